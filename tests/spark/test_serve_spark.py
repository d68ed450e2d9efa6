"""``mqo serve --engine spark``: query files and data files dropped into directories
between two ``--once`` runs; the second run carries on from the checkpoint. The
results equal the local engine's fed each run's commands, then its tuples."""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import mqo
from runtime.cli import main
from tests.spark.test_spark_batch import COLUMNS, DDL, key_of, make_rows

LATENESS = 2.0
MAX_WINDOW = 6.0
STREAMS = ("B", "H")
FIRST = """Query ID: low
SELECT B.pressure, H.vib FROM B, H MAXWINDOW 4 sec WHERE B.pressure < H.vib AND H.beatrate > 40;
Query ID: any_high
SELECT * FROM H WHERE H.vib > 90;
"""
SECOND = """-- a query added while the service runs
Query ID: near
SELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 6 sec WHERE B.pressure <= 1.5 * H.vib AND B.temp > 50;
"""
VIEW = """CREATE VIEW hot AS SELECT B.pressure AS p FROM B WHERE B.pressure > 50;
Query ID: hot_reader
SELECT * FROM hot r WHERE r.p > 60;
"""


def drop(path: Path, text: str, mtime: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime, mtime))


def drop_data(base: Path, rows: dict[str, list[dict[str, Any]]], part: int, lo: float, hi: float) -> None:
    for s in STREAMS:
        chunk = [r for r in rows[s] if lo <= r["ts"] < hi]
        frame = pd.DataFrame(chunk, columns=["ts", "id", *COLUMNS[s]])
        frame["pid"] = frame["pid"].astype("Int64")
        path = base / "in" / s / f"part{part}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False)


def serve_once(base: Path) -> None:
    argv = ["serve", "--engine", "spark", "--once", "--schema", str(base / "streams.ddl")]
    argv += ["--queries", str(base / "queries"), "--output", str(base / "out"), "--checkpoint", str(base / "ck")]
    argv += ["--max-window", str(MAX_WINDOW), "--allowed-lateness", str(LATENESS)]
    for s in STREAMS:
        argv += ["--input", f"{s}={base / 'in' / s}"]
    assert main(argv) == 0


def local_run(rows: dict[str, list[dict[str, Any]]]) -> list[tuple[Any, ...]]:
    m = mqo.Matcher(DDL, allowed_lateness=LATENESS, keep_window=MAX_WINDOW, time="global")
    found = []

    def push(lo: float, hi: float) -> None:
        chunk = sorted(
            (r["ts"], n, r["id"], s, r) for n, s in enumerate(STREAMS) for r in rows[s] if lo <= r["ts"] < hi
        )
        for ts, _, ident, s, r in chunk:
            for x in m.push(s, ts, {c: r[c] for c in COLUMNS[s]}, id=ident):
                values = {k: None if v is None else mqo.batch.text_of(v) for k, v in x.values.items()}
                found.append(key_of(x.query, x.ts, x.ids, values))

    m.register_queries(FIRST)
    push(0.0, 30.0)
    m.register_queries(SECOND)  # b.mqo (older) before drop.mqo
    m.unregister_query("low")
    push(30.0, 60.0)
    return found


@pytest.mark.spark
def test_serve_on_spark_takes_query_and_data_files_as_they_come(spark_session: Any, tmp_path: Path) -> None:
    (tmp_path / "streams.ddl").write_text(DDL)
    rows = make_rows(random.Random(5), 60.0, 80)
    drop(tmp_path / "queries" / "a.mqo", FIRST, 1_000_000)
    drop_data(tmp_path, rows, 0, 0.0, 30.0)
    serve_once(tmp_path)

    drop(tmp_path / "queries" / "b.mqo", SECOND, 1_000_010)
    drop(tmp_path / "queries" / "drop.mqo", "-- retire it\nUNREGISTER low;\n", 1_000_020)
    drop(tmp_path / "queries" / "broken.mqo", "Query ID: broken\nSELECT * FROM B WHERE B.nope > 1;\n", 1_000_030)
    drop(tmp_path / "queries" / "view.mqo", VIEW, 1_000_040)  # refused by name: no view rows, no results
    drop_data(tmp_path, rows, 1, 30.0, 60.0)
    serve_once(tmp_path)

    out = [
        json.loads(line)
        for path in sorted((tmp_path / "out").glob("part-*"))
        for line in path.read_text().splitlines()
        if line
    ]
    errors = [r for r in out if r.get("error")]
    results = [r for r in out if not r.get("error") and r.get("query") is not None]
    got = Counter(key_of(r["query"], r["ts"], r["ids"], r.get("values") or {}) for r in results)
    expected = Counter(local_run(rows))
    assert expected and {k[0] for k in expected} == {"low", "any_high", "near"}
    assert got == expected
    errors.sort(key=lambda r: r["query"])
    assert [r["query"] for r in errors] == ["broken", "hot"] and "nope" in errors[0]["error"]
    assert "view hot: views do not run where queries come through a control stream" in errors[1]["error"]
    folder = tmp_path / "out" / "aggregates"
    aggregates = [json.loads(line) for path in folder.glob("part-*") for line in path.read_text().splitlines() if line]
    assert not [r for r in aggregates if r.get("error")]  # reported once, by the match stage


AGGREGATES = """Query ID: h_rate
SELECT H.pid, COUNT(*) AS n, AVG(H.vib) AS mean FROM H [RANGE 10 sec SLIDE 5 sec] GROUP BY H.pid;
Query ID: b_rows
SELECT COUNT(*) AS n, MAX(B.pressure) FROM B [ROWS 5 SLIDE 5];
"""
LATER = "Query ID: b_temp\nSELECT MAX(B.temp) AS hottest, MIN(B.temp) FROM B [RANGE 6 sec SLIDE 3 sec];\n"
MIXED = (
    "Query ID: mixed_m\nSELECT * FROM H WHERE H.vib > 95;\nQuery ID: mixed_a\nSELECT COUNT(*) FROM H [RANGE 5 sec];\n"
)
TAKEN = "Query ID: low\nSELECT COUNT(*) FROM B [RANGE 5 sec];\n"


def local_aggregates(rows: dict[str, list[dict[str, Any]]]) -> Counter:
    """The local engine's aggregate rows over the two runs: per-stream time, T (no
    --input) idle from the start, each run's query files then its tuples."""
    from tests.spark.test_spark_aggregate_stream import row_key

    m = mqo.Matcher(DDL, allowed_lateness=LATENESS, idle_timeout=None)
    m.set_idle("T")
    order = {"B": 0, "H": 1}  # the DDL's
    for texts, lo, hi in (([AGGREGATES], 0.0, 30.0), ([LATER], 30.0, 60.0)):
        for text in texts:
            m.register_queries(text)
        if lo:
            m.unregister_query("h_rate")
        chunk = sorted((r["ts"], order[s], r["id"], s, r) for s in STREAMS for r in rows[s] if lo <= r["ts"] < hi)
        for ts, _, ident, s, r in chunk:
            m.push(s, ts, {c: r[c] for c in COLUMNS[s]}, id=ident)
    return Counter(
        row_key(
            r.query,
            r.window_start if r.window_start > float("-inf") else None,
            r.window_end,
            {k: mqo.batch.text_of(v) for k, v in r.group.items()},
            {k: mqo.batch.text_of(v) for k, v in r.values.items()},
        )
        for r in m.poll_aggregates()
    )


def read_lines(folder: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for path in sorted(folder.glob("part-*")) for line in path.read_text().splitlines() if line
    ]


@pytest.mark.spark
def test_serve_on_spark_runs_aggregate_query_files(spark_session: Any, tmp_path: Path) -> None:
    """Aggregate query files beside match query files: registered, one added and one
    unregistered by an UNREGISTER file in the second run; their rows in
    output/aggregates equal the local engine's; a file mixing both kinds and an id
    taken by a match query are refused (once, in the match output); the match results
    are untouched by it all."""
    from tests.spark.test_spark_aggregate_stream import row_key

    (tmp_path / "streams.ddl").write_text(DDL)
    rows = make_rows(random.Random(7), 60.0, 80)
    drop(tmp_path / "queries" / "a.mqo", FIRST, 1_000_000)
    drop(tmp_path / "queries" / "agg.mqo", AGGREGATES, 1_000_005)
    drop_data(tmp_path, rows, 0, 0.0, 30.0)
    serve_once(tmp_path)

    drop(tmp_path / "queries" / "b.mqo", SECOND, 1_000_010)
    drop(tmp_path / "queries" / "drop.mqo", "-- retire it\nUNREGISTER low;\n", 1_000_020)
    drop(tmp_path / "queries" / "later.mqo", LATER, 1_000_030)
    drop(tmp_path / "queries" / "drop_agg.mqo", "UNREGISTER h_rate;\n", 1_000_040)
    drop(tmp_path / "queries" / "mixed.mqo", MIXED, 1_000_050)
    drop(tmp_path / "queries" / "taken.mqo", TAKEN.replace("low", "any_high"), 1_000_060)
    drop_data(tmp_path, rows, 1, 30.0, 60.0)
    serve_once(tmp_path)

    out = read_lines(tmp_path / "out")
    errors = sorted((r["query"], r["error"]) for r in out if r.get("error"))
    assert [q for q, _ in errors] == ["any_high", "mixed_m"], errors
    assert "already registered" in errors[0][1] and "both match and aggregate" in errors[1][1]
    results = [r for r in out if not r.get("error") and r.get("query") is not None]
    got = Counter(key_of(r["query"], r["ts"], r["ids"], r.get("values") or {}) for r in results)
    assert got == Counter(local_run(rows))

    aggregates = read_lines(tmp_path / "out" / "aggregates")
    assert not [r for r in aggregates if r.get("error")]
    expected = local_aggregates(rows)
    assert {k[0] for k in expected} == {"h_rate", "b_rows", "b_temp"}
    assert max(k[2] for k in expected if k[0] == "h_rate") < 30.0  # unregistered in the second run
    got_rows = Counter(
        row_key(r["query"], r.get("window_start"), r["window_end"], r.get("group"), r.get("values"))
        for r in aggregates
        if r.get("query") is not None
    )
    assert got_rows == expected
