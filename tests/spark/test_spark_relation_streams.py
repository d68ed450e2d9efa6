"""ISTREAM and DSTREAM queries on the Spark aggregate stages equal the local engine:
by a common group key (a group's windows all in one task or state group), else in one
(a time span's first window would lack the window before it). The streaming stage
keeps each query's relation in its state across micro-batches and a restart."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import mqo
from runtime.spark.aggregate import aggregate_batch, plan_stream
from tests.spark.test_spark_aggregate import DDL, local_rows, make_rows
from tests.spark.test_spark_aggregate_stream import (
    test_aggregate_stream_equals_the_local_engine_across_a_restart as stream_equals_local_across_a_restart,
)

KEYED = """
Query ID: rising
SELECT ISTREAM H.patient, MAX(H.vib) AS peak FROM H [RANGE 10 SLIDE 5] GROUP BY H.patient HAVING COUNT(*) > 3;
Query ID: gone
SELECT DSTREAM H.patient, H.alert, COUNT(*) FROM H [RANGE 6 SLIDE 2] WHERE H.vib > 30 GROUP BY H.patient, H.alert;
Query ID: last5
SELECT ISTREAM H.patient, MAX(H.beatrate), COUNT(*) FROM H [ROWS 5 SLIDE 2] GROUP BY H.patient HAVING MAX(H.beatrate) > 90;
"""
TIMED = """
Query ID: busy
SELECT ISTREAM COUNT(*) AS n FROM H [RANGE 4 SLIDE 1] HAVING COUNT(*) > 2;
Query ID: by_alert
SELECT DSTREAM H.alert, MAX(H.vib) FROM H [RANGE 7] WHERE H.beatrate > 40 GROUP BY H.alert;
Query ID: plain
SELECT COUNT(*) FROM H [RANGE 10 SLIDE 5];
"""


@pytest.mark.spark
@pytest.mark.parametrize(("queries", "mode"), [(KEYED, "key"), (TIMED, "one")])
def test_relation_streams_on_spark_equal_the_local_engine(spark_session: Any, queries: str, mode: str) -> None:
    m = mqo.Matcher(DDL)
    m.register_queries(queries)
    assert m.aggregator is not None
    assert plan_stream("H", [r.query for r in m.aggregator.queries.values()], None).mode == mode
    rows = make_rows(seed=7, n=300)
    shuffled = list(rows)
    random.Random(5).shuffle(shuffled)
    frame = spark_session.createDataFrame(
        shuffled, "ts double, id bigint, patient bigint, beatrate double, vib double, alert bigint"
    )
    out = aggregate_batch({"H": frame}, queries, schema=DDL, partitions=3, span=12.0).collect()
    got = Counter(
        (
            r["query"],
            r["window_start"],
            r["window_end"],
            tuple(sorted((r["group"] or {}).items())),
            tuple(sorted((r["values"] or {}).items())),
        )
        for r in out
    )
    expected = local_rows(queries, rows)
    names = {"rising", "gone", "last5"} if mode == "key" else {"busy", "by_alert", "plain"}
    assert {key[0] for key in expected} == names  # every query reports rows
    assert got == expected


@pytest.mark.spark
@pytest.mark.parametrize(("queries", "mode"), [(KEYED, "key"), (TIMED, "one")])
def test_relation_streams_on_spark_streaming_equal_the_local_engine(
    spark_session: Any, tmp_path: Path, queries: str, mode: str
) -> None:
    """Files as micro-batches, a restart that runs a micro-batch again, a late tuple,
    windows closed only by the last watermark (tests/spark/test_spark_aggregate_stream.py)."""
    stream_equals_local_across_a_restart(spark_session, tmp_path, queries, mode)
