"""Match views in the Structured Streaming stage (``runtime.spark.streaming.match_stream``)
against the local matcher and the exact view reference (tests/references/exact_views.py).

The views and readers of tests/spark/test_spark_views.py (views over views, depth 2)
over CSV file sources, one file per stream per micro-batch (four micro-batches), with
allowed lateness: an out-of-order tuple that is within the lateness (matched, and its
view rows matched in turn) and a tuple far behind the watermark (late: reported, and
neither matched nor made into view rows). Every result the local matcher and the
reference find for the tuples in arrival order, the stage finds once, by time buckets
and by key. A view member's id is the view row's number in its state group
(runtime/spark/streaming.py, "Views"), so results are compared without it.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import mqo
from runtime.spark.spec import SparkStageError
from runtime.spark.streaming import match_stream, write_files
from tests.references.exact_views import ViewReference
from tests.references.reference import Result, exact_result
from tests.spark.helpers import Row
from tests.spark.test_spark_streaming import csv_streams
from tests.spark.test_spark_views import NEAR, PAIRS, READERS, SCHEMA, TEXTS, key, results, tuples

LATENESS = 2.0
CHUNK = 10.0  # seconds of data per micro-batch: the tuples span 0 .. 40
FRAME = "ts double, id bigint, x bigint, y double"


def arrivals() -> list[list[Row]]:
    """The tuples cut into micro-batches by ts, each in (ts, stream, id) order, with an
    H tuple of ts 18.5 held back to the next micro-batch (out of order, within the
    lateness: the watermark there is 19.5 - 2) and a B tuple of ts 3 arriving
    in the last one (late: the watermark is past 20 by then)."""
    rows = tuples(seed=7, n=200)
    batches: list[list[Row]] = [[] for _ in range(4)]
    for row in rows:
        batches[min(int(row[1] // CHUNK), 3)].append(row)
    held = next(r for r in batches[1] if r[0] == "H" and r[1] == 18.5)
    batches[1].remove(held)
    batches[2].insert(0, held)
    late: Row = ("B", 3.0, 1000, {"x": 1, "y": 2.3})
    batches[3].insert(0, late)
    for batch in batches:
        batch.sort(key=lambda r: (r[1], r[0], r[2]))
    return batches


def write_batches(folder: Path, batches: list[list[Row]]) -> None:
    """One CSV file per stream per micro-batch (file times in batch order)."""
    for k, batch in enumerate(batches):
        for stream in ("B", "H"):
            part = [{"ts": ts, "id": ident, **v} for s, ts, ident, v in batch if s == stream]
            assert part, f"micro-batch {k} needs a tuple of {stream}"
            path = folder / stream / f"part{k:03d}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            pd.DataFrame(part, columns=["ts", "id", "x", "y"]).to_csv(path, index=False)
            os.utime(path, (1_000_000 + k, 1_000_000 + k))


def expected(batches: list[list[Row]], texts: list[str]) -> tuple[Counter[Any], list[tuple[float, int]]]:
    """The local matcher's results for the tuples in arrival order (keys without view
    members' ids), checked against the exact reference, and the late tuples."""
    reference = ViewReference(SCHEMA, allowed_lateness=LATENESS)
    for view in (PAIRS, NEAR):
        reference.create_view(view)
    for q in READERS:
        if q.to_text() in texts:
            reference.register(q)
    late: list[mqo.LateTuple] = []
    local = mqo.Matcher(SCHEMA.ddl(), allowed_lateness=LATENESS, late_sink=late.append)
    local.register_queries(texts)
    want: list[Result] = []
    found: list[Result] = []
    for batch in batches:
        for stream, ts, ident, values in batch:
            want += reference.push(stream, ts, values, id=ident)
            found += [exact_result(m.query, m.ts, m.ids, m.values) for m in local.push(stream, ts, values, ident)]
    assert Counter(key(r) for r in found) == Counter(key(r) for r in want)
    return Counter(key(r) for r in want), [(t.ts, t.id) for t in late]


@pytest.mark.spark
@pytest.mark.parametrize("partition_by", ["time", "key"])
def test_views_stream_like_the_local_matcher_and_the_reference(
    spark_session: Any, tmp_path: Path, partition_by: str
) -> None:
    batches = arrivals()
    # by key: without "plain" (no equality), every join is on x and pairs selects b.x
    texts = TEXTS if partition_by == "time" else TEXTS[:4]
    want, late = expected(batches, texts)
    assert late == [(3.0, 1000)]
    # what the workload holds: results of every query, and some resting on the
    # out-of-order H tuple of ts 18.5 (those the stage would miss if it were late)
    assert {k[0] for k in want} == ({"deep", "echo", "plain"} if partition_by == "time" else {"deep", "echo"})
    without_held = expected([[r for r in b if not (r[0] == "H" and r[1] == 18.5)] for b in batches], texts)[0]
    assert without_held != want

    write_batches(tmp_path / "in", batches)
    streams = csv_streams(spark_session, tmp_path / "in", {"B": FRAME, "H": FRAME})
    stage = match_stream(
        streams,
        texts,
        schema=SCHEMA.ddl(),
        allowed_lateness=LATENESS,
        partition_by=partition_by,
        bucket_width=6.0 if partition_by == "time" else None,
    )
    query = write_files(stage, str(tmp_path / "out"), str(tmp_path / "ck"), available_now=True)
    query.awaitTermination()
    assert len([p for p in query.recentProgress if p["numInputRows"]]) == 4
    out = spark_session.read.parquet(str(tmp_path / "out")).collect()
    assert Counter(key(r) for r in results([r for r in out if r["query"] is not None])) == want
    assert [(r["ts"], dict(r["ids"])) for r in out if r["query"] is None] == [(3.0, {"B": 1000})]


@pytest.mark.spark
def test_views_the_streaming_stage_cannot_run_are_refused(spark_session: Any, tmp_path: Path) -> None:
    (tmp_path / "B").mkdir()
    (tmp_path / "H").mkdir()
    streams = csv_streams(spark_session, tmp_path, {"B": FRAME, "H": FRAME})
    with pytest.raises(SparkStageError, match=r"view pairs needs emit='arrival' and no control stream"):
        match_stream(streams, TEXTS, schema=SCHEMA.ddl(), emit="ordered")
    counting = [
        "CREATE VIEW counts AS SELECT B.x AS x, COUNT(*) AS n FROM B [RANGE 4 SLIDE 2] GROUP BY B.x;",
        "Query ID: q\nSELECT * FROM counts c, H h MAXWINDOW 1 WHERE c.x = h.x;",
    ]
    with pytest.raises(SparkStageError, match=r"aggregate view counts does not run in the Spark streaming stages"):
        match_stream(streams, counting, schema=SCHEMA.ddl())
