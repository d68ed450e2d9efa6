"""The Spark stages' event time and emission: per-source watermarks (one source lags a
minute behind the other and is still matched, not late), ``emit="ordered"`` in the
batch stage (sorted) and in the streaming stage (released by the watermark, micro-batch
after micro-batch in ``ts`` order, held results woken without new rows). Results are
compared with the local engine, which is checked against the reference elsewhere."""

from __future__ import annotations

import datetime
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import mqo

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:late tuple:UserWarning")]

DDL = "CREATE STREAM A (x BIGINT); CREATE STREAM B (y BIGINT) ALLOWED LATENESS 2 sec;"
QUERIES = [
    "Query ID: pair\nSELECT * FROM A, B MAXWINDOW 4 sec WHERE A.x = B.y",
    "Query ID: big\nSELECT * FROM A WHERE A.x > 5",
]
SCHEMAS = {"A": "ts double, id bigint, x bigint", "B": "ts double, id bigint, y bigint"}


def readings(stream: str, start: float, n: int, first_id: int) -> pd.DataFrame:
    """One reading a second; the value cycles so that A and B join every few seconds."""
    column = "x" if stream == "A" else "y"
    return pd.DataFrame(
        {"ts": [start + i for i in range(n)], "id": range(first_id, first_id + n), column: [i % 7 for i in range(n)]}
    )


def chunks() -> list[dict[str, pd.DataFrame]]:
    """Two micro-batches; B lags 60 s behind A (allowed lateness 5 s, B's own 2 s)."""
    return [
        {"A": readings("A", 1000, 100, 0), "B": readings("B", 940, 100, 0)},
        {"A": readings("A", 1100, 100, 100), "B": readings("B", 1040, 100, 100)},
    ]


def local_results(emit: str = "arrival") -> list[Any]:
    """The local engine over every tuple in timestamp order."""
    m = mqo.Matcher(DDL, allowed_lateness=5, idle_timeout=None, emit=emit)
    m.register_queries(QUERIES)
    rows = []
    for part in chunks():
        for stream, frame in part.items():
            rows += [(r.ts, stream, int(r.id), int(r[3])) for r in frame.itertuples()]
    found = []
    for ts, stream, ident, v in sorted(rows):
        found += m.push(stream, ts, {"x" if stream == "A" else "y": v}, id=ident)
    return found + (m.flush_results().matches() if emit == "ordered" else [])


def key(row: Any) -> str:
    return json.dumps([row["query"], row["ts"], sorted(dict(row["ids"]).items())])


def test_batch_stage_ordered(spark_session: Any) -> None:
    from runtime.spark.batch import match_batch

    frames = {s: spark_session.createDataFrame(pd.concat([c[s] for c in chunks()])) for s in ("A", "B")}
    found = {}
    for emit in ("arrival", "ordered"):
        rows = match_batch(frames, QUERIES, schema=DDL, partitions=3, partition_by="time", emit=emit).collect()
        found[emit] = [key(r.asDict()) for r in rows]
    ordered = [json.loads(k) for k in found["ordered"]]
    assert [r[1] for r in ordered] == sorted(r[1] for r in ordered)
    assert ordered == sorted(ordered, key=lambda r: (r[1], r[0], r[2]))  # ties: query, then ids
    assert Counter(found["arrival"]) == Counter(found["ordered"])
    assert Counter(found["ordered"]) == Counter(
        json.dumps([m.query, m.ts, sorted(m.ids.items())]) for m in local_results()
    )


def run_stream(spark: Any, base: Path, emit: str) -> list[list[dict[str, Any]]]:
    """Both chunks as two micro-batches (one file per stream each, availableNow); the
    rows each micro-batch wrote, and the watermark after each (from the progress)."""
    from runtime.spark.streaming import match_stream, write_files
    from tests.spark.test_spark_streaming import csv_streams

    for k, part in enumerate(chunks()):
        for stream, frame in part.items():
            folder = base / "in" / stream
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"part{k}.csv"
            frame.to_csv(path, index=False)
            os.utime(path, (1_000_000 + k, 1_000_000 + k))
    streams = csv_streams(spark, base / "in", {s: SCHEMAS[s] for s in ("A", "B")})
    results = match_stream(streams, QUERIES, schema=DDL, allowed_lateness=5, emit=emit, partition_by="time")
    query = write_files(results, str(base / "out"), str(base / "ck"), available_now=True)
    query.awaitTermination()
    batches = []
    log = base / "out" / "_spark_metadata"
    for entry in sorted(log.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1):
        if not entry.name.isdigit():
            continue
        files = [json.loads(line)["path"] for line in entry.read_text().splitlines()[1:]]
        rows = []
        for f in files:
            rows += pd.read_parquet(f.removeprefix("file://")).to_dict("records")
        batches.append(rows)
    marks = [p["eventTime"].get("watermark") for p in query.recentProgress]
    batches.append([{"watermark": m} for m in marks])  # the last entry: watermarks
    return batches


def seconds(iso: str) -> float:
    stamp = datetime.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return (stamp - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)).total_seconds()


def test_streaming_per_source_watermarks(spark_session: Any, tmp_path: Path) -> None:
    """B lags 60 s behind A: with one watermark per source (the smaller one governs),
    none of B's second chunk is late, and the results are the local engine's."""
    *batches, _ = run_stream(spark_session, tmp_path, "arrival")
    rows = [r for b in batches for r in b]
    late = [r for r in rows if r["query"] is None]
    assert late == []
    want = Counter(json.dumps([m.query, m.ts, sorted(m.ids.items())]) for m in local_results())
    assert Counter(key(r) for r in rows) == want and len(want) > 50


def test_streaming_ordered(spark_session: Any, tmp_path: Path) -> None:
    """Results come out micro-batch by micro-batch in ts order: every result of one
    micro-batch is older than the watermark it was released by, and not older than
    any result of an earlier micro-batch; the ones released are exactly the local
    engine's results older than the last watermark."""
    *batches, marks = run_stream(spark_session, tmp_path, "ordered")
    last = max(seconds(m["watermark"]) for m in marks if m["watermark"])
    released = [r for b in batches for r in b if r["query"] is not None]
    assert released and all(r["ts"] < last for r in released)
    previous = float("-inf")
    for b in batches:
        stamps = [r["ts"] for r in b if r["query"] is not None]
        if stamps:
            assert min(stamps) >= previous
            previous = max(stamps)
    want = Counter(json.dumps([m.query, m.ts, sorted(m.ids.items())]) for m in local_results() if m.ts < last)
    assert Counter(key(r) for r in released) == want
    # the last micro-batch had no rows: held results were woken by the watermark alone
    assert len(batches) >= 3 and not [r for r in batches[-1] if r["query"] is None]


def test_cli_spark_engine_emit_ordered_with_declared_lateness(spark_session: Any, tmp_path: Path) -> None:
    """``mqo match --engine spark --emit ordered``: late tuples decided with the streams'
    ALLOWED LATENESS as locally, results in ts order, the local engine's results."""
    from runtime.cli import main
    from tests.cli.test_emit_cli import DDL as CLI_DDL
    from tests.cli.test_emit_cli import QUERIES as CLI_QUERIES
    from tests.cli.test_emit_cli import jittered

    (tmp_path / "s.ddl").write_text(CLI_DDL)
    (tmp_path / "q.mqo").write_text(CLI_QUERIES)
    (tmp_path / "a.csv").write_text(jittered(1000, 400, 1, 6).replace("ts,v", "ts,x"))
    (tmp_path / "b.csv").write_text(jittered(820, 400, 2, 2).replace("ts,v", "ts,y"))
    found = {}
    for engine in ("local", "spark"):
        out, late = tmp_path / f"{engine}.jsonl", tmp_path / f"{engine}.late.jsonl"
        args = ["match", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q.mqo")]
        args += ["--input", f"A={tmp_path / 'a.csv'}", "--input", f"B={tmp_path / 'b.csv'}", "--engine", engine]
        args += ["--emit", "ordered", "--output", str(out), "--late", str(late), "--quiet"]
        assert main(args) == 0
        found[engine] = [json.loads(line) for line in out.read_text().splitlines()]
        found[engine + " late"] = sorted(late.read_text().splitlines()) if late.exists() else []
    assert found["local late"] == found["spark late"] and found["local late"]
    assert Counter(map(json.dumps, found["local"])) == Counter(map(json.dumps, found["spark"]))
    assert [r["ts"] for r in found["spark"]] == sorted(r["ts"] for r in found["spark"]) and found["spark"]
