"""The aggregate streaming stage equals the local engine fed the same tuples, in each
way it groups a stream (by a common group key, by time spans, in one group): file
sources read one file per micro-batch, two ``availableNow`` runs with a restart from
the checkpoint that re-runs a micro-batch whose output was written, a late tuple
reported, and windows of groups that get no new rows put out when the watermark passes
them (a last tuple far ahead moves it)."""

from __future__ import annotations

import datetime
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import mqo
from mqo.batch import text_of
from runtime.spark.aggregate import plan_stream
from runtime.spark.aggregate_streaming import aggregate_stream
from runtime.spark.spec import SparkStageError
from runtime.spark.streaming import write_files
from tests.spark.test_spark_aggregate import DDL, KEYED, ONE, TIMED, make_rows
from tests.spark.test_spark_streaming import csv_streams, replay_last_batch

SCHEMA = "ts double, id bigint, patient bigint, beatrate double, vib double, alert bigint"
COLUMNS = ["ts", "id", "patient", "beatrate", "vib", "alert"]
CHUNK = 20.0  # seconds of data per file: make_rows spans 80 s, four files, then the last tuple's
LATENESS = 2.0
SPAN = 12.0


def write_chunk(base: Path, rows: list[dict[str, Any]], k: int) -> None:
    """The rows of chunk ``k`` as one CSV file; file times increase with k so that the
    source takes the files in order (one per micro-batch)."""
    part = [r for r in rows if r.get("chunk", int(r["ts"] // CHUNK)) == k]
    folder = base / "in"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"part{k:03d}.csv"
    frame = pd.DataFrame(part, columns=COLUMNS)
    for c in ("patient", "alert"):
        frame[c] = frame[c].astype("Int64")  # else NULLs make it float, and "3.0" is no bigint
    frame.to_csv(path, index=False)
    os.utime(path, (1_000_000 + k, 1_000_000 + k))


def run(spark: Any, base: Path, queries: str) -> list[dict[str, Any]]:
    """One availableNow run from the checkpoint; its progress reports."""
    stream = csv_streams(spark, base, {"in": SCHEMA})["in"]
    rows = aggregate_stream({"H": stream}, queries, schema=DDL, allowed_lateness=LATENESS, slots=3, span=SPAN)
    query = write_files(rows, str(base / "out"), str(base / "ck"), available_now=True)
    query.awaitTermination()
    return list(query.recentProgress)


def seconds(iso: str) -> float:
    stamp = datetime.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return (stamp - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)).total_seconds()


def row_key(query: str, start: float | None, end: float, group: Any, values: Any) -> tuple[Any, ...]:
    return (query, start, end, tuple(sorted((group or {}).items())), tuple(sorted((values or {}).items())))


def reference(queries: str, rows: list[dict[str, Any]]) -> tuple[Counter, float]:
    """The local engine (per-stream time, the stage's lateness) fed the tuples in
    (ts, id) order: the rows it has emitted at the end, and its watermark."""
    m = mqo.Matcher(DDL, allowed_lateness=LATENESS, idle_timeout=None)
    m.register_queries(queries)
    ordered = sorted(rows, key=lambda r: (r["ts"], r["id"]))
    m.push_batch("H", {c: [r[c] for r in ordered] for c in COLUMNS})
    emitted = Counter(
        row_key(
            r.query,
            r.window_start if r.window_start > float("-inf") else None,
            r.window_end,
            {k: text_of(v) for k, v in r.group.items()},
            {k: text_of(v) for k, v in r.values.items()},
        )
        for r in m.poll_aggregates()
    )
    return emitted, m.watermark


@pytest.mark.spark
@pytest.mark.parametrize(("queries", "mode"), [(KEYED, "key"), (TIMED, "time"), (ONE, "one")])
def test_aggregate_stream_equals_the_local_engine_across_a_restart(
    spark_session: Any, tmp_path: Path, queries: str, mode: str
) -> None:
    m = mqo.Matcher(DDL)
    m.register_queries(queries)
    assert m.aggregator is not None
    assert plan_stream("H", [r.query for r in m.aggregator.queries.values()], SPAN).mode == mode
    rows = make_rows(seed=len(queries))
    last_ts = max(r["ts"] for r in rows)
    # chunk 4: one tuple far ahead, of one patient: it moves the watermark past every
    # window, and the groups it does not go to put theirs out without new rows
    ahead = {"ts": 200.0, "id": len(rows), "patient": 1, "beatrate": 60.0, "vib": 50.0, "alert": 0, "chunk": 4}
    late = {"ts": 2.0, "id": len(rows) + 1, "patient": 2, "beatrate": 1.0, "vib": 1.0, "alert": 1, "chunk": 3}
    expected, watermark = reference(queries, [*rows, ahead])  # the late tuple is no part of it
    assert watermark == 200.0 - LATENESS
    assert len(expected) > 20
    # windows that only the last watermark closes, of groups the last tuple is not in
    quiet = [k for k in expected if k[2] > last_ts - LATENESS and dict(k[3]).get("patient") != "1"]
    assert quiet
    files = [*rows, ahead, late]

    # run 1: two files, with no-data micro-batches off so that it ends on a batch with
    # data; then that batch's commit is forgotten, as if the driver died before it
    write_chunk(tmp_path, files, 0)
    write_chunk(tmp_path, files, 1)
    spark_session.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    try:
        first = run(spark_session, tmp_path, queries)
    finally:
        spark_session.conf.unset("spark.sql.streaming.noDataMicroBatches.enabled")
    replayed = replay_last_batch(tmp_path)

    # run 2: the batch again, then the rest (the late tuple, the one far ahead)
    for k in (2, 3, 4):
        write_chunk(tmp_path, files, k)
    second = run(spark_session, tmp_path, queries)
    batch_ids = [p["batchId"] for p in second]
    assert replayed in [p["batchId"] for p in first] and replayed in batch_ids
    assert second[-1]["numInputRows"] == 0, "a micro-batch without data closes the last windows"
    assert seconds(second[-1]["eventTime"]["watermark"]) == watermark

    out = spark_session.read.parquet(str(tmp_path / "out")).collect()
    got = Counter(
        row_key(r["query"], r["window_start"], r["window_end"], r["group"], r["values"])
        for r in out
        if r["query"] is not None
    )
    duplicates = [k for k, n in got.items() if n > 1]
    assert not duplicates, f"{len(duplicates)} rows written twice"
    assert got == expected
    reported = [(r["window_start"], r["window_end"], dict(r["group"]), r["values"]) for r in out if r["query"] is None]
    assert reported == [(None, 2.0, {"H": str(late["id"])}, None)]


@pytest.mark.spark
def test_aggregate_stream_inputs_are_checked(spark_session: Any, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    batch = spark_session.createDataFrame([(1.0, 0, 1, 1.0, 1.0, 0)], SCHEMA)
    with pytest.raises(SparkStageError, match="stream H: not a streaming DataFrame"):
        aggregate_stream({"H": batch}, TIMED, schema=DDL)
    stream = spark_session.readStream.schema(SCHEMA).csv(str(tmp_path / "in"))
    with pytest.raises(SparkStageError, match="match_batch"):
        aggregate_stream({"H": stream}, "SELECT * FROM H WHERE H.vib > 1;", schema=DDL)
    with pytest.raises(SparkStageError, match="allowed_lateness"):
        aggregate_stream({"H": stream}, TIMED, schema=DDL, allowed_lateness=-1)
    with pytest.raises(SparkStageError, match="slots"):
        aggregate_stream({"H": stream}, KEYED, schema=DDL, slots=0)
    no_id = spark_session.readStream.schema("ts double, patient bigint, beatrate double, vib double, alert bigint")
    with pytest.raises(SparkStageError, match="needs an 'id' column"):
        aggregate_stream({"H": no_id.csv(str(tmp_path / "in"))}, TIMED, schema=DDL)


TWO_DDL = DDL + "\nCREATE STREAM B (patient INTEGER, pressure FLOAT) ALLOWED LATENESS 5 sec;"
TWO = (
    TIMED
    + """
Query ID: pressure
SELECT B.patient, COUNT(*) AS n, AVG(B.pressure) AS mean FROM B [RANGE 10 SLIDE 5] GROUP BY B.patient;
Query ID: pressure_peaks
SELECT B.patient, MAX(B.pressure) FROM B [ROWS 4 SLIDE 2] WHERE B.pressure > 20 GROUP BY B.patient;
"""
)


@pytest.mark.spark
def test_two_streams_in_one_stage(spark_session: Any, tmp_path: Path) -> None:
    """H grouped by time spans and B by key in one stateful operator, a watermark per
    source (B's lateness from the DDL), the smallest governing: equal to the local
    engine's per-stream clock."""
    h_rows = make_rows(seed=7, n=120)
    rnd = random.Random(8)
    b_rows = [
        {"ts": round(rnd.uniform(0, 80), 1), "id": i, "patient": rnd.choice([1, 2, 3]), "pressure": rnd.uniform(0, 50)}
        for i in range(120)
    ]
    ahead = {"ts": 150.0, "id": len(h_rows), "patient": 1, "beatrate": 60.0, "vib": 50.0, "alert": 0, "chunk": 4}
    b_ahead = {"ts": 160.0, "id": len(b_rows), "patient": 2, "pressure": 30.0, "chunk": 4}
    streams_rows = {"H": [*h_rows, ahead], "B": [*b_rows, b_ahead]}
    columns = {"H": COLUMNS, "B": ["ts", "id", "patient", "pressure"]}
    m = mqo.Matcher(TWO_DDL, allowed_lateness=LATENESS, idle_timeout=None)
    m.register_queries(TWO)
    merged = sorted((r["ts"], s, r["id"], r) for s, rs in streams_rows.items() for r in rs)
    for ts, s, ident, r in merged:
        m.push(s, ts, {c: r[c] for c in columns[s][2:]}, id=ident)
    expected = Counter(
        row_key(
            r.query,
            r.window_start if r.window_start > float("-inf") else None,
            r.window_end,
            {k: text_of(v) for k, v in r.group.items()},
            {k: text_of(v) for k, v in r.values.items()},
        )
        for r in m.poll_aggregates()
    )
    assert m.watermark == 150.0 - LATENESS  # H's; B's is 160 - 5
    assert {k[0] for k in expected} == {"all", "by_alert", "busy", "pressure", "pressure_peaks"}
    for s, rs in streams_rows.items():
        folder = tmp_path / "in" / s
        folder.mkdir(parents=True)
        for k in range(5):
            frame = pd.DataFrame([r for r in rs if r.get("chunk", int(r["ts"] // CHUNK)) == k], columns=columns[s])
            for c in ("patient", "alert"):
                if c in frame:
                    frame[c] = frame[c].astype("Int64")
            path = folder / f"part{k:03d}.csv"
            frame.to_csv(path, index=False)
            os.utime(path, (1_000_000 + k, 1_000_000 + k))
    schemas = {"H": SCHEMA, "B": "ts double, id bigint, patient bigint, pressure double"}
    frames = csv_streams(spark_session, tmp_path / "in", schemas)
    rows = aggregate_stream(frames, TWO, schema=TWO_DDL, allowed_lateness=LATENESS, slots=2, span=SPAN)
    query = write_files(rows, str(tmp_path / "out"), str(tmp_path / "ck"), available_now=True)
    query.awaitTermination()
    out = spark_session.read.parquet(str(tmp_path / "out")).collect()
    assert all(r["query"] is not None for r in out), "no tuple is late here"
    got = Counter(row_key(r["query"], r["window_start"], r["window_end"], r["group"], r["values"]) for r in out)
    assert got == expected


@pytest.mark.spark
def test_a_restart_with_other_settings_is_refused(spark_session: Any, tmp_path: Path) -> None:
    """The state's fingerprint: restarting from a checkpoint with another number of
    slots (other groups, other matchers) fails with a clear message."""
    from pyspark.errors import StreamingQueryException

    rows = make_rows(seed=5, n=60)
    write_chunk(tmp_path, rows, 0)
    run(spark_session, tmp_path, KEYED)
    write_chunk(tmp_path, rows, 1)
    stream = spark_session.readStream.schema(SCHEMA).option("header", True).csv(str(tmp_path / "in"))
    other = aggregate_stream({"H": stream}, KEYED, schema=DDL, allowed_lateness=LATENESS, slots=2)
    query = write_files(other, str(tmp_path / "out"), str(tmp_path / "ck"), available_now=True)
    with pytest.raises(StreamingQueryException, match="start from a new checkpoint location"):
        query.awaitTermination()
