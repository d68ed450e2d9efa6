"""Shared test fixtures. Spark tests use one session for the whole run (see spark_session)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# The default run (CI's) draws the same examples every time, so a run is reproducible
# and a red one means the code changed; HYPOTHESIS_PROFILE=explore draws new ones, to
# hunt boundaries past what the fixed examples reach.
settings.register_profile("fixed", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fixed"))

REPO = Path(__file__).resolve().parent.parent
# The one home of the thesis' workload files (package data of ``mqo experiment``);
# examples/icu links its schema and running example here, and the golden fixtures
# (tests/fixtures/golden) hold only what these files must compile to.
WORKLOADS = REPO / "experiments" / "workloads"
EXAMPLES = REPO / "examples"


def workload_schema(path: Path) -> Path:
    """The DDL a thesis workload file is written against: figure 5.1's pair of streams
    A and B for ``fig5_1_*``, the ICU streams for the others."""
    return WORKLOADS / ("fig5_1.ddl" if path.name.startswith("fig5_1_") else "streams.ddl")


@pytest.fixture(scope="session")
def thesis_ddl() -> str:
    return (WORKLOADS / "streams.ddl").read_text()


@pytest.fixture(scope="session")
def running_example() -> str:
    return (WORKLOADS / "fig3_3_running_example.mqo").read_text()


@pytest.fixture(scope="session")
def spark_session():
    """One local Spark session for the whole test run (tests using it are marked spark)."""
    import os
    import sys

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("mqo-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/spark/ runs a real Spark: marked so, whatever its module
    says, so that ``-m "not spark"`` leaves them all out."""
    spark_tests = REPO / "tests" / "spark"
    for item in items:
        if spark_tests in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.spark)
