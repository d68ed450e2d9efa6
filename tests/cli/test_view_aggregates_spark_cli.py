"""``mqo match --engine spark`` with aggregate queries over match views (the issue's
"average pressure of the pairs where pressure exceeded vibration", a count window, an
ISTREAM alert over a view of a view) and ``--output-view``: the real command writes
what ``--engine local`` writes, over several time buckets, with late tuples set aside
by both (the local engine's runs in a subprocess, Spark's in this process on the test
run's session: ``tests.cli.clirun.in_session``; the refusals, made before Spark starts,
in a subprocess). Aggregate rows and the views' rows (ids included) are
compared exactly, line by line; matches as multisets, a view member's id aside (the
match stage numbers a view's rows per task: runtime/spark/batch.py, "Views"). The
aggregate views' file and the file of match views over an aggregate view run as one
(BOTH): one Spark run serves both."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.cli import clirun
from tests.cli.clirun import strict_lines, write

DDL = "REGISTER STREAM B (pressure FLOAT); REGISTER STREAM H (beatrate INTEGER, vib FLOAT);\n"
QUERIES = """CREATE VIEW pairs AS
SELECT B.pressure AS pressure, H.beatrate AS rate
FROM B, H MAXWINDOW 5 sec WHERE B.pressure > H.vib;

CREATE VIEW fast AS SELECT p.pressure AS pressure, p.rate AS rate FROM pairs p WHERE p.rate > 110;

Query ID: avg_pairs
SELECT AVG(pairs.pressure), COUNT(*) FROM pairs [RANGE 60 sec SLIDE 20 sec];

Query ID: per_rate
SELECT pairs.rate, SUM(pairs.pressure), MIN(pairs.pressure) FROM pairs [ROWS 4 SLIDE 2] GROUP BY pairs.rate;

Query ID: rising
SELECT ISTREAM fast.rate, MAX(fast.pressure) FROM fast [RANGE 30 sec SLIDE 10 sec]
GROUP BY fast.rate HAVING MAX(fast.pressure) > 90;

Query ID: alarm
SELECT f.pressure, H.vib FROM fast f, H MAXWINDOW 10 sec WHERE f.pressure > H.vib + 10;

Query ID: hot
SELECT COUNT(*), MAX(H.vib) FROM H [RANGE 40 sec];
"""


def match(
    *args: str, schema: str, queries: str, inputs: list[str], spark: Any = None
) -> subprocess.CompletedProcess[str]:
    """``mqo match`` (clirun's: in a subprocess, or in this process on ``spark``), with
    room for a loaded machine: each aggregate view is a few Spark jobs, made by both stages."""
    return clirun.match(*args, schema=schema, queries=queries, inputs=inputs, spark=spark, timeout=900)


def inputs(tmp_path: Path) -> list[str]:
    # 5 minutes of tuples, every 13th B tuple 7 s behind the newest (late: lateness 0)
    b = "".join(f"{3.0 * i - (7 if i % 13 == 5 else 0)},{80.0 + (7 * i) % 30}\n" for i in range(100))
    h = "".join(f"{3.0 * i + (i % 3)},{100 + (5 * i) % 20},{70.0 + (3 * i) % 25}\n" for i in range(100))
    return [
        f"B={write(tmp_path / 'b.csv', 'ts,pressure' + chr(10) + b)}",
        f"H={write(tmp_path / 'h.csv', 'ts,beatrate,vib' + chr(10) + h)}",
    ]


# the aliases of match view members, whose ids the Spark match stage numbers per task
MATCH_VIEW_MEMBERS = {"alarm": {"f"}, "q": {"m"}, "deep": {"r"}}


def record(line: dict[str, Any]) -> tuple[Any, ...] | str:
    """An aggregate row exactly as written; a match with all it holds, the ids of match
    view members aside."""
    if "ids" not in line:
        return json.dumps(line, sort_keys=True)
    hidden = MATCH_VIEW_MEMBERS.get(line["query"], set())
    ids = tuple(sorted((a, i) for a, i in line["ids"].items() if a not in hidden))
    return (line["query"], line["ts"], ids, tuple(sorted(line["values"].items())))


def both_engines(
    tmp_path: Path, text: str, views: tuple[str, ...], spark: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``mqo match`` with the query file ``text`` on the local engine (a subprocess) and
    on Spark (in this process, on the session ``spark``), over the same inputs, each
    writing ``views`` with ``--output-view``: for each (local, spark), its records, its
    aggregate rows in order, each view's file and the late file."""
    schema = write(tmp_path / "s.ddl", DDL)
    queries = write(tmp_path / "q.mqo", text)
    given = inputs(tmp_path)
    out: dict[str, dict[str, Any]] = {}
    for engine in ("local", "spark"):
        folder = tmp_path / engine
        folder.mkdir()
        shown = [a for view in views for a in ("--output-view", f"{view}={folder / view.lower()}.jsonl")]
        args = ("--engine", engine, "--output", str(folder / "out.jsonl"), *shown)
        done = match(*args, schema=schema, queries=queries, inputs=given, spark=spark if engine == "spark" else None)
        assert done.returncode == 0, done.stderr
        lines = strict_lines((folder / "out.jsonl").read_text())
        out[engine] = {
            "records": Counter(record(line) for line in lines),
            "aggregates": [line for line in lines if "ids" not in line],
            "views": {view: (folder / f"{view.lower()}.jsonl").read_text() for view in views},
            "late": (folder / "out.jsonl.late.jsonl").read_text(),
        }
    return out["local"], out["spark"]


@pytest.mark.spark
def test_spark_engine_aggregates_views_and_writes_their_rows_as_the_local_engine(
    tmp_path: Path, spark_session: Any
) -> None:
    local, spark = both_engines(tmp_path, QUERIES, ("pairs", "FAST"), spark_session)  # (view names compare in any case)
    assert spark["records"] == local["records"]
    assert spark["aggregates"] == local["aggregates"]  # in the same order too
    assert spark["views"] == local["views"]  # ids and order too
    assert spark["late"] == local["late"] != ""
    # what the run holds: rows of every aggregate, over several windows, and view rows
    # made by one tuple several at a time (the count window numbers them in that order)
    assert {line["query"] for line in local["aggregates"]} == {"avg_pairs", "per_rate", "rising", "hot"}
    pairs = strict_lines(local["views"]["pairs"])
    assert [row["id"] for row in pairs] == list(range(len(pairs)))
    assert len({row["ts"] for row in pairs}) < len(pairs) and pairs[-1]["ts"] > 200
    assert {row["view"] for row in strict_lines(local["views"]["FAST"])} == {"fast"}


AGGREGATE_VIEWS = """CREATE VIEW counts AS
SELECT H.beatrate AS rate, COUNT(*) AS n, MAX(H.vib) AS top FROM H [RANGE 30 sec SLIDE 10 sec] GROUP BY H.beatrate;

CREATE VIEW most AS SELECT MAX(c.n) AS n FROM counts c [RANGE 10 sec SLIDE 10 sec];

CREATE VIEW pairs AS
SELECT B.pressure AS pressure, H.beatrate AS rate
FROM B, H MAXWINDOW 5 sec WHERE B.pressure > H.vib;

CREATE VIEW paired AS SELECT DSTREAM p.pressure AS pressure, COUNT(*) AS n FROM pairs p [RANGE 20 sec SLIDE 10 sec]
GROUP BY p.pressure;

Query ID: hottest
SELECT c.rate, c.n FROM counts c, most m MAXWINDOW 0 WHERE c.n = m.n AND c.ts = m.ts;

Query ID: gone
SELECT g.pressure, g.n, B.pressure FROM paired g, B MAXWINDOW 3 sec WHERE B.pressure > g.pressure;

Query ID: tops
SELECT counts.rate, AVG(counts.top), COUNT(*) FROM counts [ROWS 3] GROUP BY counts.rate;
"""


OVER_AGGREGATE = """CREATE VIEW counts AS
SELECT H.beatrate AS rate, COUNT(*) AS n FROM H [RANGE 20 sec SLIDE 10 sec] GROUP BY H.beatrate;

CREATE VIEW many AS SELECT c.rate AS rate, c.n AS n FROM counts c WHERE c.n >= 2;

CREATE VIEW near AS SELECT m.rate AS rate, B.pressure AS pressure FROM many m, B MAXWINDOW 4 sec
WHERE B.pressure > 95;

Query ID: q
SELECT m.rate, m.n, B.pressure FROM many m, B MAXWINDOW 3 sec WHERE B.pressure > 90;

Query ID: deep
SELECT r.rate, r.pressure FROM near r WHERE r.rate > 105;
"""


# Two query files in one, so that one Spark run (a JVM and its jobs, most of the time)
# serves both: OVER_AGGREGATE's ``counts`` (not AGGREGATE_VIEWS') is called ``tallies``.
BOTH = AGGREGATE_VIEWS + "\n" + OVER_AGGREGATE.replace("counts", "tallies")
WRITTEN_VIEWS = ("most", "counts", "paired")


@pytest.mark.spark
def test_spark_engine_runs_aggregate_views_and_match_views_over_them_as_the_local_engine(
    tmp_path: Path, spark_session: Any
) -> None:
    """NEXMark Q5's shape (the hottest groups of each window: two aggregate views and a
    join), a DSTREAM view over a match view joined with a stream and a count window over
    an aggregate view (AGGREGATE_VIEWS); match views over an aggregate view, one joining
    a stream, read by match queries (OVER_AGGREGATE): the records the local engine
    writes, an aggregate view member's id included (the stage numbers their rows as the
    local engine does), a match view member's aside; aggregate rows in the same order;
    ``--output-view`` of aggregate views (one over another, one over a match view)
    writes the same files, ids and order too; the same late tuples set aside."""
    local, spark = both_engines(tmp_path, BOTH, WRITTEN_VIEWS, spark_session)
    assert spark["records"] == local["records"]
    assert spark["aggregates"] == local["aggregates"]  # in the same order too
    assert spark["views"] == local["views"]  # ids and order too
    assert spark["late"] == local["late"] != ""
    # what the run holds: rows of every query, and of every view over several windows
    assert {line["query"] for line in local["aggregates"]} == {"tops"}
    met = {key[0] if isinstance(key, tuple) else json.loads(key)["query"] for key in local["records"]}
    assert met == {"hottest", "gone", "tops", "q", "deep"}
    for view, text in local["views"].items():
        rows = strict_lines(text)
        assert len({row["ts"] for row in rows}) > 3 and {row["view"] for row in rows} == {view}
        assert [row["id"] for row in rows] == list(range(len(rows)))


@pytest.mark.spark
def test_spark_engine_refuses_to_write_or_aggregate_match_views_over_aggregate_views(
    tmp_path: Path, spark_session: Any
) -> None:
    """The rows of a match view over an aggregate view are not written with
    ``--output-view``, nor aggregated: refused naming the view, before Spark starts
    (the command in a subprocess, whose stderr would show Spark's start). Run in this
    process on a running session, the command refuses alike: the same status, stdout and
    stderr (what the other tests' ``in_session`` runs stand on)."""
    schema = write(tmp_path / "s.ddl", DDL)
    queries = write(tmp_path / "q.mqo", OVER_AGGREGATE)
    given = inputs(tmp_path)
    out = tmp_path / "out.jsonl"
    done = match(
        "--engine", "spark", "--output", str(out), "--output-view", f"near={tmp_path / 'near.jsonl'}",
        schema=schema, queries=queries, inputs=given,
    )  # fmt: skip
    assert done.returncode != 0
    assert "view many is a match view reading aggregate view counts: the Spark aggregate stages and" in done.stderr
    assert "log4j" not in done.stderr  # (Spark's first words when it starts)
    over = write(tmp_path / "over.mqo", OVER_AGGREGATE + "Query ID: agg\nSELECT COUNT(*) FROM many [RANGE 30 sec];\n")
    done = match("--engine", "spark", "--output", str(out), schema=schema, queries=over, inputs=given)
    assert done.returncode != 0
    assert "view many is a match view reading aggregate view counts: the Spark aggregate stages and" in done.stderr
    assert "log4j" not in done.stderr
    again = match(
        "--engine", "spark", "--output", str(out), schema=schema, queries=over, inputs=given, spark=spark_session
    )
    assert (again.returncode, again.stdout, again.stderr) == (done.returncode, done.stdout, done.stderr)
