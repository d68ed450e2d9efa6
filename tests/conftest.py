"""Shared test fixtures. Spark tests use one session for the whole run (see spark_session)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
WORKLOADS = REPO / "experiments" / "workloads"
EXAMPLES = REPO / "examples"


@pytest.fixture(scope="session")
def thesis_ddl() -> str:
    return (WORKLOADS / "streams.ddl").read_text()


@pytest.fixture(scope="session")
def running_example() -> str:
    return (WORKLOADS / "fig3_3_running_example.mqo").read_text()
