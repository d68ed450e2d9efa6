"""``mqo match --engine spark`` on a query file with views (a view over a join, a view
over that view, a query reading it and a query on the declared streams) writes the
matches ``--engine local`` writes, a view member's id aside (the Spark stage numbers a
view's rows per task: runtime/spark/batch.py, "Views"). The real command, over several
time buckets: the local engine's run in a subprocess, Spark's in this process on the
test run's session (``tests.cli.clirun.in_session``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.cli.clirun import match, strict_lines, write

DDL = "REGISTER STREAM B (pressure FLOAT); REGISTER STREAM H (beatrate INTEGER, vib FLOAT);\n"
QUERIES = """CREATE VIEW pairs AS
SELECT B.pressure AS pressure, H.beatrate AS rate
FROM B, H MAXWINDOW 5 sec WHERE B.pressure > H.vib;

CREATE VIEW fast AS SELECT p.pressure AS pressure, p.rate AS rate FROM pairs p WHERE p.rate > 115;

Query ID: alarm
SELECT f.pressure, H.vib FROM fast f, H MAXWINDOW 10 sec WHERE f.pressure > H.vib + 10;

Query ID: close
SELECT B.pressure, H.vib FROM B, H MAXWINDOW 2 sec WHERE B.pressure < H.vib + 5;
"""
VIEW_ALIASES = {"alarm": "f"}


def record(line: dict[str, Any]) -> tuple[Any, ...]:
    hidden = VIEW_ALIASES.get(line["query"])
    ids = tuple(sorted((a, i) for a, i in line["ids"].items() if a != hidden))
    return (line["query"], line["ts"], ids, tuple(sorted(line["values"].items())))


@pytest.mark.spark
def test_spark_engine_runs_views_as_the_local_engine(tmp_path: Path, spark_session: Any) -> None:
    schema = write(tmp_path / "s.ddl", DDL)
    queries = write(tmp_path / "q.mqo", QUERIES)
    # 5 minutes of tuples: time buckets of 4 x 15 s (alarm reaches 10 + 5 s back through the views)
    b = "".join(f"{3.0 * i},{80.0 + (7 * i) % 30}\n" for i in range(100))
    h = "".join(f"{3.0 * i + 1},{105 + (5 * i) % 20},{70.0 + (3 * i) % 25}\n" for i in range(100))
    b_file = write(tmp_path / "b.csv", "ts,pressure\n" + b)
    inputs = [f"B={b_file}", f"H={write(tmp_path / 'h.csv', 'ts,beatrate,vib' + chr(10) + h)}"]
    got = {}
    for engine in ("local", "spark"):
        out = tmp_path / engine / "out.jsonl"
        out.parent.mkdir()
        in_session = spark_session if engine == "spark" else None
        done = match(
            "--engine", engine, "--output", str(out), schema=schema, queries=queries, inputs=inputs, spark=in_session
        )
        assert done.returncode == 0, done.stderr
        got[engine] = Counter(record(line) for line in strict_lines(out.read_text()))
    assert got["spark"] == got["local"]
    assert {key[0] for key in got["local"]} == {"alarm", "close"}
    assert max(key[1] for key in got["local"] if key[0] == "alarm") > 120  # past the first buckets
