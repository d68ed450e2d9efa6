"""The aggregate batch stage on Spark equals the local engine fed the same tuples in
(ts, id) order, in each way it partitions a stream: by a common group key, by time
spans (rows copied to every span whose windows they are in), and in one task; count
windows in the key and one-task modes."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

import mqo
from mqo.batch import text_of
from runtime.spark.aggregate import aggregate_batch, plan_stream
from runtime.spark.spec import SparkStageError

DDL = "REGISTER STREAM H (patient INTEGER, beatrate FLOAT, vib FLOAT, alert INTEGER);"
KEYED = """
Query ID: per_patient
SELECT H.patient, COUNT(*) AS n, AVG(H.beatrate) AS rate FROM H [RANGE 10 SLIDE 5] GROUP BY H.patient;
Query ID: per_patient_alert
SELECT H.patient, H.alert, MAX(H.vib), SUM(H.alert) FROM H [RANGE 6] WHERE H.vib > 30 GROUP BY H.patient, H.alert;
Query ID: since_start
SELECT H.patient, MIN(H.beatrate) FROM H [RANGE UNBOUNDED SLIDE 20] GROUP BY H.patient HAVING COUNT(*) > 2;
Query ID: last5
SELECT H.patient, AVG(H.vib) AS mean, COUNT(*) FROM H [ROWS 5 SLIDE 2] GROUP BY H.patient;
"""
TIMED = """
Query ID: all
SELECT COUNT(*) AS n, SUM(H.vib) AS total, STDDEV(H.beatrate) FROM H [RANGE 10 SLIDE 3];
Query ID: by_alert
SELECT H.alert, MAX(H.vib), VARIANCE(H.vib) FROM H [RANGE 7, FREQUENCY 7] WHERE H.beatrate > 40 GROUP BY H.alert;
Query ID: busy
SELECT COUNT(H.vib) AS n FROM H [RANGE 4 SLIDE 1] HAVING COUNT(H.vib) > 1;
"""
ONE = """
Query ID: landmark
SELECT COUNT(*), AVG(H.vib) AS mean FROM H [RANGE UNBOUNDED SLIDE 15];
Query ID: recent
SELECT MAX(H.beatrate) FROM H [RANGE 5 SLIDE 5];
Query ID: every7
SELECT COUNT(*), MAX(H.vib) FROM H [ROWS 7 SLIDE 3] WHERE H.alert = 1;
"""


def make_rows(seed: int, n: int = 160) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        rows.append(
            {
                "ts": round(rnd.uniform(0, 80), rnd.choice([0, 1, 2])),  # ties, and window edges hit exactly
                "id": i,
                "patient": rnd.choice([1, 2, 3, None]),
                "beatrate": None if rnd.random() < 0.05 else round(rnd.uniform(0, 120), 1),
                "vib": None if rnd.random() < 0.05 else round(rnd.uniform(0, 100), 2),
                "alert": rnd.choice([0, 1]),
            }
        )
    return rows


def local_rows(queries: str, rows: list[dict[str, Any]]) -> Counter:
    m = mqo.Matcher(DDL)
    m.register_queries(queries)
    ordered = sorted(rows, key=lambda r: (r["ts"], r["id"]))
    batch = {c: [r[c] for r in ordered] for c in ("ts", "id", "patient", "beatrate", "vib", "alert")}
    m.push_batch("H", batch)
    return Counter(
        (
            r.query,
            r.window_start if r.window_start > float("-inf") else None,
            r.window_end,
            tuple(sorted((k, text_of(v)) for k, v in r.group.items())),
            tuple(sorted((k, text_of(v)) for k, v in r.values.items())),
        )
        for r in m.flush()
    )


@pytest.mark.spark
@pytest.mark.parametrize(("queries", "mode"), [(KEYED, "key"), (TIMED, "time"), (ONE, "one")])
def test_aggregate_stage_equals_the_local_engine(spark_session: Any, queries: str, mode: str) -> None:
    m = mqo.Matcher(DDL)
    m.register_queries(queries)
    assert m.aggregator is not None
    assert plan_stream("H", [r.query for r in m.aggregator.queries.values()], None).mode == mode
    rows = make_rows(seed=len(queries))
    shuffled = list(rows)
    random.Random(3).shuffle(shuffled)  # order must not matter: ids and ts decide
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
    assert expected and len(expected) > 20
    assert got == expected


@pytest.mark.spark
def test_aggregate_stage_takes_aggregate_queries_only(spark_session: Any) -> None:
    frame = spark_session.createDataFrame([(1.0, 1, 1, 1.0, 1.0, 0)], "ts double, id bigint, patient bigint, "
                                          "beatrate double, vib double, alert bigint")  # fmt: skip
    with pytest.raises(SparkStageError, match="match_batch"):
        aggregate_batch({"H": frame}, "SELECT * FROM H WHERE H.vib > 1;", schema=DDL)
    two = DDL + "\nREGISTER STREAM B (pressure FLOAT);"
    with pytest.raises(SparkStageError, match=r"read stream\(s\) H: give their DataFrames"):
        aggregate_batch({"B": frame}, TIMED, schema=two)
    with pytest.raises(SparkStageError, match="no stream DataFrames given"):
        aggregate_batch({}, TIMED, schema=DDL)
