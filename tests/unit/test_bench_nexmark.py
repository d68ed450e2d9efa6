"""The NEXMark multi-query benchmark (experiments.bench_nexmark) at a tiny scale: its
variants are queries mqo takes, and a run, which stops unless ``mqo match``, DuckDB's
per-query statements and its set-based statements wrote the same rows, comes out with
rows in every family. No timings are checked."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from experiments import bench_nexmark
from experiments.bench_nexmark import FAMILIES, draw_variants, query_file, result_key
from experiments.nexmark import DDL
from experiments.nexmark_sql import SPARK_RUNNER, write_plan
from mqo import Matcher


def test_variants_register_with_mqo_and_vary() -> None:
    variants = draw_variants(42, 20000, np.random.default_rng(3))
    assert Counter(v.family for v in variants) == {"q2": 11, "q3": 11, "q5": 10, "q7": 10}
    m = Matcher(DDL)
    m.register_queries(query_file(variants))
    # Q5's and Q7's variants read aggregate views, one per window (and channel), shared
    views = {v.qid: v.views() for v in variants}
    assert sorted(set(m.query_ids) - set(m.views)) == sorted(views)
    assert sorted(m.views) == sorted({name for per in views.values() for name, _ in per})
    assert len(m.views) < sum(len(per) for per in views.values())
    # the parameters differ between the variants of a family
    assert len({tuple(v.auctions) for v in variants if v.family == "q2"}) > 5
    assert len({(tuple(v.states), v.category, v.window) for v in variants if v.family == "q3"}) > 5
    assert len({(v.range_s, v.slide_s, v.threshold) for v in variants if v.family == "q5"}) > 5
    assert len({(v.range_s, v.slide_s, v.channel) for v in variants if v.family == "q7"}) > 3


def test_result_key_tells_results_apart() -> None:
    match = {"query": "q2_0", "ts": 1.5, "ids": {"B": 3}, "values": {"B.auction": 1000, "B.price": 7}}
    assert result_key(match) == result_key({**match, "ts": 1.5000000001})  # JSON's float text
    assert result_key(match) != result_key({**match, "ids": {"B": 4}})
    assert result_key(match) != result_key({**match, "values": {"B.auction": 1000, "B.price": 8}})
    # a view row's id is mqo's numbering, which the SQL side does not have
    assert result_key({**match, "ids": {"B": 3, "h": 17}}) == result_key(match)
    row = {"query": "q7_1", "window_start": 0.0, "window_end": 10.0, "group": {}, "values": {"highest": 5, "bids": 2}}
    assert result_key(row) == result_key({k: v for k, v in row.items() if k not in ("group", "window_start")})
    assert result_key(row) != result_key({**row, "window_end": 12.0})


def test_tiny_run_agrees_on_every_family(tmp_path: Path) -> None:
    args = ["--events", "6000", "--queries", "16", "--sample", "2", "--no-spark", "--out", str(tmp_path)]
    assert bench_nexmark.main(args) == 0
    table = (tmp_path / "nexmark.md").read_text()
    assert "16 queries, 6,000 events" in table
    for family in FAMILIES:  # every family has rows, so the sides' agreement says something
        assert f"{family} 4 queries / 0 rows" not in table
    assert table.count("| >= 20x |") == table.count("| >= 2x |") == 2  # all queries, and without Q5
    assert "8 queries timed" in table  # two per family, scaled
    assert (
        "each family alone: q2" in table
        and " s CPU)" in table
        and "most self time over all queries (cProfile)" in table
    )


def spark_jobs_in(spark: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, Any], Path, str], Any]:
    """``bench_nexmark.run_spark`` with its runner (SPARK_RUNNER, which the benchmark
    runs as a process of its own, for its whole-process time; a JVM start each) run in
    this process on ``spark``, the test run's session, which its ``session()`` finds:
    the same script and jobs, but ``stop()`` left to the session's owner, and the
    script's tables (temporary views, cached) dropped after it. Its seconds are this
    run's; its peak memory is not measured (0)."""
    from pyspark.sql import SparkSession

    def run_spark(plan: dict[str, Any], folder: Path, name: str) -> tuple[float, float, dict[str, float]]:
        path = write_plan(plan, folder / f"{name}.json")
        printed = io.StringIO()
        started = time.perf_counter()
        with monkeypatch.context() as patch, contextlib.redirect_stdout(printed):
            patch.setattr(sys, "argv", ["-c", str(path)])
            patch.setattr(SparkSession, "stop", lambda self: None)
            try:
                exec(compile(SPARK_RUNNER, "SPARK_RUNNER", "exec"), {"__name__": "__main__"})
            finally:
                for table in plan["tables"]:
                    spark.catalog.dropTempView(table)  # (uncached with it)
        return time.perf_counter() - started, 0.0, json.loads(printed.getvalue().splitlines()[-1])

    return run_spark


@pytest.mark.spark
def test_tiny_run_with_spark_agrees(tmp_path: Path, spark_session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark SQL's per-query and set-based jobs write mqo's rows (the run stops
    otherwise), run on the test run's session (:func:`spark_jobs_in`)."""
    monkeypatch.setattr(bench_nexmark, "run_spark", spark_jobs_in(spark_session, monkeypatch))
    args = ["--events", "4000", "--queries", "4", "--sample", "1", "--spark", "--out", str(tmp_path)]
    assert bench_nexmark.main(args) == 0
    table = (tmp_path / "nexmark.md").read_text()
    assert "Spark SQL (local, every core), one job per query" in table and "set-based Spark SQL" in table
    assert table.count("| >= 20x |") == 3 and table.count("| >= 2x |") == 3


def test_profile_only_prints_each_family_and_writes_no_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--profile-only``: where mqo's time goes (each family alone, with its CPU seconds,
    and cProfile's top functions), printed; no table."""
    args = ["--events", "2000", "--queries", "8", "--profile-only", "--out", str(tmp_path)]
    assert bench_nexmark.main(args) == 0
    printed = capsys.readouterr().out
    for family in FAMILIES:
        assert f"{family} " in printed.split("each family alone: ", 1)[1]
    assert printed.count(" s CPU)") == len(FAMILIES) and "most self time over all queries (cProfile)" in printed
    assert not (tmp_path / "nexmark.md").exists()
