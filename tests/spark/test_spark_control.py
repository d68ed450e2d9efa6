"""Queries as a control stream of the Structured Streaming stage: registrations and
removals mid-stream, a bad command reported and survived, a kill and restart from the
checkpoint in the middle of a registration; everything equal to the local engine fed
the same commands and tuples in the same micro-batches."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import mqo
from mqo.batch import text_of
from runtime.spark.spec import SparkStageError
from runtime.spark.streaming import match_stream, write_files
from tests.spark.test_spark_batch import COLUMNS, DDL, STREAMS, key_of, make_queries, make_rows
from tests.spark.test_spark_streaming import (
    CHUNK,
    LAST,
    SCHEMAS,
    command_stream,
    csv_streams,
    replay_last_batch,
    write_chunk,
)

LATENESS = 4.0
MAX_WINDOW = 8.0


def named(texts: list[str], first: int) -> list[str]:
    return [f"Query ID: q{first + i}\n{text};" for i, text in enumerate(texts)]


def command_plan(queries: list[str]) -> dict[int, list[dict[str, Any]]]:
    """Per micro-batch (chunk), the commands it brings."""
    return {
        0: [
            {"ts": 1.0, "command": "register", "query": "\n".join(queries[3:5])},
            {"ts": 2.0, "command": "register", "query": "SELECT * FROM B WHERE B.pressure >"},
            {"ts": 2.0, "command": "unregister", "query": "nope"},
        ],
        1: [
            {"ts": 16.0, "command": "register", "query": "\n".join(queries[5:7])},
            {"ts": 16.0, "command": "unregister", "query": "q0"},
            {
                "ts": 17.0,
                "command": "register",
                "query": "Query ID: wide\nSELECT * FROM B, H MAXWINDOW 30 sec WHERE B.pressure < H.vib;",
            },
        ],
        2: [
            {"ts": 31.0, "command": "unregister", "query": "q3"},
            {"ts": 32.0, "command": "register", "query": queries[7]},
            {"ts": 33.0, "command": "launch", "query": "q1"},
        ],
        3: [{"ts": 46.0, "command": "unregister", "query": "q5"}],
    }


def write_commands(base: Path, commands: list[dict[str, Any]], k: int) -> None:
    folder = base / "in" / "commands"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"part{k:03d}.json"
    path.write_text("".join(json.dumps(c) + "\n" for c in commands))
    os.utime(path, (1_000_000 + k, 1_000_000 + k))


def local_run(
    initial: list[str], plan: dict[int, list[dict[str, Any]]], rows: dict[str, list[dict[str, Any]]]
) -> tuple[list[tuple[Any, ...]], list[tuple[str | None, float]]]:
    """The local engine fed each micro-batch's commands, then its tuples in (ts, stream,
    id) order; refused commands as (query id or None, ts)."""
    m = mqo.Matcher(DDL, allowed_lateness=LATENESS, keep_window=MAX_WINDOW, time="global")
    m.register_queries(initial)
    found, refused = [], []
    for k in range(LAST + 1):
        for c in sorted(plan[k], key=lambda c: (c["ts"], c["command"], c["query"])):
            if c["command"] == "unregister":
                if c["query"] in m.query_ids:
                    m.unregister_query(c["query"])
                else:
                    refused.append((c["query"], c["ts"]))
            elif c["command"] == "register":
                try:
                    ids = m.register_queries(c["query"])
                except mqo.QueryError:
                    refused.append((None, c["ts"]))
                    continue
                wide = [q for q in ids if m.registry.queries[q].maxwindow > MAX_WINDOW]
                for q in ids if wide else []:
                    m.unregister_query(q)
                if wide:
                    refused.append((wide[0], c["ts"]))
            else:
                refused.append((None, c["ts"]))
        chunk = sorted(
            (r["ts"], n, r["id"], s, r)
            for n, s in enumerate(STREAMS)
            for r in rows[s]
            if min(int(r["ts"] // CHUNK), LAST) == k
        )
        for ts, _, ident, s, r in chunk:
            for x in m.push(s, ts, {c: r[c] for c in COLUMNS[s]}, id=ident):
                values = {name: None if v is None else text_of(v) for name, v in x.values.items()}
                found.append(key_of(x.query, x.ts, x.ids, values))
    return found, refused


def run(spark: Any, base: Path, initial: list[str]) -> list[int]:
    streams = csv_streams(spark, base / "in", {s: SCHEMAS[s] for s in STREAMS})
    control = command_stream(spark, base / "in" / "commands")
    results = match_stream(
        streams, initial, schema=DDL, allowed_lateness=LATENESS, control=control, max_window=MAX_WINDOW
    )
    query = write_files(results, str(base / "out"), str(base / "ck"), available_now=True)
    query.awaitTermination()
    return [p["batchId"] for p in query.recentProgress]


@pytest.mark.spark
def test_queries_come_and_go_through_the_control_stream(spark_session: Any, tmp_path: Path) -> None:
    import random

    rnd = random.Random(31)
    texts = make_queries(rnd, 8, keyed=False)
    queries = named(texts, 0)
    initial = queries[:3]
    plan = command_plan(queries)
    rows = make_rows(rnd, 60.0, 60)
    expected, refused = local_run(initial, plan, rows)
    assert expected and len(refused) == 4

    for k in (0, 1):
        write_chunk(tmp_path, rows, k)
        write_commands(tmp_path, plan[k], k)
    spark_session.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    try:
        first = run(spark_session, tmp_path, initial)
    finally:
        spark_session.conf.unset("spark.sql.streaming.noDataMicroBatches.enabled")
    replayed = replay_last_batch(tmp_path)  # the batch that registered q5, q6 and dropped q0
    for k in (2, 3):
        write_chunk(tmp_path, rows, k)
        write_commands(tmp_path, plan[k], k)
    second = run(spark_session, tmp_path, initial)
    assert replayed in first and replayed in second, (first, second)

    out = [r.asDict() for r in spark_session.read.parquet(str(tmp_path / "out")).collect()]
    errors = [r for r in out if r["error"] is not None]
    results = [r for r in out if r["error"] is None and r["query"] is not None]
    got = [key_of(r["query"], r["ts"], r["ids"], dict(r["values"] or {})) for r in results]
    duplicates = [k for k, n in Counter(got).items() if n > 1]
    assert not duplicates, f"{len(duplicates)} results written twice"
    assert Counter(got) == Counter(expected)
    assert {r["query"] for r in results} >= {"q0", "q5", "q7"}  # each registration took effect
    assert sorted(r["ts"] for r in errors) == sorted(ts for _, ts in refused)  # each reported once
    assert {r["query"] for r in errors} >= {"nope", "wide"}
    syntax = [r["error"] for r in errors if r["ts"] == 2.0 and r["query"] != "nope"]
    assert len(syntax) == 1 and "<register at ts 2.0>:1:35:" in syntax[0], syntax  # where the error is


@pytest.mark.spark
def test_a_control_stream_needs_max_window(spark_session: Any, tmp_path: Path) -> None:
    streams = {s: spark_session.readStream.schema(SCHEMAS[s]).csv(str(tmp_path)) for s in STREAMS}
    control = spark_session.readStream.schema("ts double, command string, query string").json(str(tmp_path))
    with pytest.raises(SparkStageError, match="max_window"):
        match_stream(streams, "", schema=DDL, control=control)
    wrong = spark_session.readStream.schema("ts double, verb string").json(str(tmp_path))
    with pytest.raises(SparkStageError, match="command, query"):
        match_stream(streams, "", schema=DDL, control=wrong, max_window=5)
