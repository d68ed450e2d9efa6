"""Aggregate queries through a control stream of the streaming aggregate stage: two
streams, registrations and removals mid-stream (time, landmark and count windows, an
id used again), bad commands reported and survived, a late tuple, a restart from the
checkpoint that re-runs a micro-batch whose output was written; everything equal to
the local engine fed each micro-batch's commands, then its tuples, in the same order."""

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
from mqo.batch import text_of
from predicates.entry import looks_aggregate
from runtime.spark.aggregate_streaming import aggregate_stream
from runtime.spark.spec import SparkStageError
from runtime.spark.streaming import write_files
from tests.spark.test_spark_aggregate import make_rows
from tests.spark.test_spark_aggregate_stream import COLUMNS as H_COLUMNS
from tests.spark.test_spark_aggregate_stream import SCHEMA as H_SCHEMA
from tests.spark.test_spark_aggregate_stream import TWO_DDL, row_key
from tests.spark.test_spark_streaming import command_stream, csv_streams, replay_last_batch

LATENESS = 2.0  # H's; B's is 5 s, from the DDL
CHUNK = 20.0
LAST = 4  # chunk 4: a tuple of each stream far ahead, which closes the windows
STREAMS = ("H", "B")  # in the DDL's order
COLUMNS = {"H": H_COLUMNS, "B": ["ts", "id", "patient", "pressure"]}
SCHEMAS = {"H": H_SCHEMA, "B": "ts double, id bigint, patient bigint, pressure double"}

ALL = "Query ID: all\nSELECT COUNT(*) AS n, SUM(H.vib) AS total FROM H [RANGE 10 SLIDE 3];"
LANDMARK = "Query ID: landmark\nSELECT COUNT(*), AVG(H.vib) AS mean FROM H [RANGE UNBOUNDED SLIDE 15];"
LAST5 = "Query ID: last5\nSELECT H.patient, AVG(H.vib) AS mean, COUNT(*) FROM H [ROWS 5 SLIDE 2] GROUP BY H.patient;"
PRESSURE = (
    "Query ID: pressure\nSELECT B.patient, COUNT(*) AS n, AVG(B.pressure) AS mean FROM B [RANGE 10 SLIDE 5] "
    "GROUP BY B.patient;"
)
BUSY = "Query ID: busy\nSELECT COUNT(H.vib) AS n FROM H [RANGE 4 SLIDE 1] HAVING COUNT(H.vib) > 1;"
PEAKS = "Query ID: peaks\nSELECT B.patient, MAX(B.pressure) FROM B [ROWS 4 SLIDE 2] WHERE B.pressure > 20 GROUP BY B.patient;"
ALL_AGAIN = "Query ID: all\nSELECT H.alert, MAX(H.vib) FROM H [RANGE 7] WHERE H.beatrate > 40 GROUP BY H.alert;"


def command_plan() -> dict[int, list[dict[str, Any]]]:
    """Per micro-batch (chunk), the commands it brings; the comments say what the
    stage must do with each."""
    return {
        0: [
            {"ts": 1.0, "command": "register", "query": "\n".join([ALL, LANDMARK])},  # before any tuple
            {"ts": 1.0, "command": "register", "query": LAST5},
            {"ts": 2.0, "command": "register", "query": "SELECT COUNT(*) FROM H [RANGE 5 SLIDE"},  # no
            {"ts": 3.0, "command": "register", "query": "Query ID: m\nSELECT * FROM H WHERE H.vib > 5;"},  # no
        ],
        1: [
            {"ts": 21.0, "command": "register", "query": PRESSURE + "\n" + BUSY},
            {"ts": 22.0, "command": "register", "query": LANDMARK.replace("landmark", "late_mark")},  # no
            {"ts": 23.0, "command": "register", "query": LAST5},  # no: the id is taken
        ],
        2: [
            {"ts": 41.0, "command": "unregister", "query": "busy"},
            {"ts": 41.0, "command": "register", "query": PEAKS},
            {"ts": 42.0, "command": "unregister", "query": "nope"},  # no
            {"ts": 43.0, "command": "unregister", "query": "all"},
        ],
        3: [
            {"ts": 61.0, "command": "register", "query": ALL_AGAIN},  # the id again, another query
            {"ts": 62.0, "command": "unregister", "query": "landmark"},
            {"ts": 63.0, "command": "launch", "query": "x"},  # no
        ],
        4: [],
    }


def chunk_of(row: dict[str, Any]) -> int:
    return row.get("chunk", min(int(row["ts"] // CHUNK), LAST - 1))


def make_streams() -> dict[str, list[dict[str, Any]]]:
    h = make_rows(seed=41, n=140)
    rnd = random.Random(42)
    b = [
        {"ts": round(rnd.uniform(0, 80), 1), "id": i, "patient": rnd.choice([1, 2, 3]), "pressure": rnd.uniform(0, 50)}
        for i in range(120)
    ]
    h.append({"ts": 150.0, "id": len(h), "patient": 1, "beatrate": 60.0, "vib": 50.0, "alert": 0, "chunk": LAST})
    h.append({"ts": 2.0, "id": len(h), "patient": 2, "beatrate": 1.0, "vib": 1.0, "alert": 1, "chunk": 3})  # late
    b.append({"ts": 160.0, "id": len(b), "patient": 2, "pressure": 30.0, "chunk": LAST})
    return {"H": h, "B": b}


def local_run(
    plan: dict[int, list[dict[str, Any]]], rows: dict[str, list[dict[str, Any]]]
) -> tuple[Counter, list[tuple[float, int]], list[float]]:
    """The local engine: per micro-batch its commands, then its tuples in (ts, stream,
    id) order. The aggregate rows, the late tuples (ts, id) and the ts of each refused
    command."""
    late: list[Any] = []
    m = mqo.Matcher(TWO_DDL, allowed_lateness=LATENESS, idle_timeout=None, late_sink=late.append)
    found: Counter = Counter()
    refused: list[float] = []

    def collect() -> None:
        for r in m.poll_aggregates():
            start = r.window_start if r.window_start > float("-inf") else None
            group = {k: text_of(v) for k, v in r.group.items()}
            found[row_key(r.query, start, r.window_end, group, {k: text_of(v) for k, v in r.values.items()})] += 1

    for k in range(LAST + 1):
        for c in sorted(plan[k], key=lambda c: (c["ts"], c["command"], c["query"])):
            if c["command"] == "unregister" and c["query"] in m.query_ids:
                m.unregister_query(c["query"])
            elif c["command"] == "register" and looks_aggregate(c["query"]):
                try:
                    m.register_queries(c["query"])
                except mqo.QueryError:
                    refused.append(c["ts"])
            else:  # an unknown id or command, a match query
                refused.append(c["ts"])
        chunk = sorted((r["ts"], n, r["id"], s, r) for n, s in enumerate(STREAMS) for r in rows[s] if chunk_of(r) == k)
        for ts, _, ident, s, r in chunk:
            m.push(s, ts, {c: r[c] for c in COLUMNS[s][2:]}, id=ident)
        collect()
    return found, [(t.ts, t.id) for t in late], refused


def write_chunk(
    base: Path, rows: dict[str, list[dict[str, Any]]], plan: dict[int, list[dict[str, Any]]], k: int
) -> None:
    """Chunk ``k``: one CSV file per stream and one file of commands, file times
    increasing with k, so that each micro-batch takes one of each."""
    for s in STREAMS:
        frame = pd.DataFrame([r for r in rows[s] if chunk_of(r) == k], columns=COLUMNS[s])
        for c in ("patient", "alert"):
            if c in frame:
                frame[c] = frame[c].astype("Int64")  # else NULLs make it float, and "3.0" is no bigint
        path = base / "in" / s / f"part{k:03d}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False)
        os.utime(path, (1_000_000 + k, 1_000_000 + k))
    path = base / "in" / "commands" / f"part{k:03d}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(c) + "\n" for c in plan[k]))
    os.utime(path, (1_000_000 + k, 1_000_000 + k))


def run(spark: Any, base: Path) -> list[int]:
    streams = csv_streams(spark, base / "in", {s: SCHEMAS[s] for s in STREAMS})
    control = command_stream(spark, base / "in" / "commands")
    rows = aggregate_stream(streams, "", schema=TWO_DDL, allowed_lateness=LATENESS, control=control)
    query = write_files(rows, str(base / "out"), str(base / "ck"), available_now=True)
    query.awaitTermination()
    return [p["batchId"] for p in query.recentProgress]


@pytest.mark.spark
def test_aggregate_queries_come_and_go_through_the_control_stream(spark_session: Any, tmp_path: Path) -> None:
    plan = command_plan()
    rows = make_streams()
    expected, late, refused = local_run(plan, rows)
    queries = {k[0] for k in expected}
    assert queries == {"all", "landmark", "last5", "pressure", "busy", "peaks"}, queries
    assert late == [(2.0, 141)] and len(refused) == 6
    # the re-registered "all" reports (grouped by alert) after the first one's rows
    assert any(dict(k[3]).get("alert") for k in expected if k[0] == "all")

    for k in (0, 1):
        write_chunk(tmp_path, rows, plan, k)
    first = run(spark_session, tmp_path)
    replayed = replay_last_batch(tmp_path)  # the batch that registered pressure and busy
    for k in range(2, LAST + 1):
        write_chunk(tmp_path, rows, plan, k)
    second = run(spark_session, tmp_path)
    assert replayed in first and replayed in second, (first, second)

    out = [r.asDict() for r in spark_session.read.parquet(str(tmp_path / "out")).collect()]
    errors = [r for r in out if r["error"] is not None]
    data = [r for r in out if r["error"] is None and r["query"] is not None]
    got = Counter(row_key(r["query"], r["window_start"], r["window_end"], r["group"], r["values"]) for r in data)
    duplicates = [k for k, n in got.items() if n > 1]
    assert not duplicates, f"{len(duplicates)} rows written twice"
    assert got == expected
    reported = [(r["window_end"], int(dict(r["group"])["H"])) for r in out if r["query"] is None and not r["error"]]
    assert reported == late
    assert sorted(r["window_end"] for r in errors) == sorted(refused)  # each refused command reported once
    by_ts = {r["window_end"]: r for r in errors}
    assert "<register at ts 2.0>:1:" in by_ts[2.0]["error"], by_ts[2.0]  # where the error is
    assert by_ts[3.0]["query"] == "m" and "match_stream" in by_ts[3.0]["error"]
    assert by_ts[22.0]["query"] == "late_mark" and "before the first tuple" in by_ts[22.0]["error"]
    assert by_ts[23.0]["query"] == "last5" and "already registered" in by_ts[23.0]["error"]
    assert by_ts[42.0]["query"] == "nope"


@pytest.mark.spark
def test_aggregate_control_inputs_are_checked(spark_session: Any, tmp_path: Path) -> None:
    stream = spark_session.readStream.schema(H_SCHEMA).csv(str(tmp_path))
    control = spark_session.readStream.schema("ts double, command string, query string").json(str(tmp_path))
    with pytest.raises(SparkStageError, match="slots and span"):
        aggregate_stream({"H": stream}, "", schema=TWO_DDL, control=control, slots=2)
    with pytest.raises(SparkStageError, match="reads stream B: give its DataFrame"):
        aggregate_stream({"H": stream}, PRESSURE, schema=TWO_DDL, control=control)
    with pytest.raises(SparkStageError, match="stream X: not declared"):
        aggregate_stream({"X": stream}, "", schema=TWO_DDL, control=control)
    with pytest.raises(SparkStageError, match="allowed_lateness"):
        aggregate_stream({"H": stream}, "", schema=TWO_DDL, control=control, allowed_lateness=-1)
    with pytest.raises(SparkStageError, match="control="):
        aggregate_stream({"H": stream}, ALL, schema=TWO_DDL, shared_control=True)
