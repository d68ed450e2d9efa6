"""Exact differential tests of the Spark stages against the exact reference.

The batch stage (``runtime.spark.match_batch``) matches as if every tuple arrived in
``(ts, stream in DDL order, id)`` order, where none is late; the streaming stage
(``runtime.spark.streaming.match_stream``) does the same within a micro-batch, and a
run here is one micro-batch (one file per stream, ``availableNow``). The reference is
fed the workload's tuples in that order, with every query registered at the start.
Partitioning by time buckets (with the bucket width at the largest MAXWINDOW, so that
many results straddle a bucket's edge) and by equality key must not change a result.

Each example is a Spark job, so there are few and they do not shrink (see
tests/differential/test_exact_differential.py); the failing workload is printed.
"""

from __future__ import annotations

import csv
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.differential.test_exact_differential import EXPENSIVE, compare, record
from tests.references.exact_workloads import Push, Workload, csv_cell, workloads
from tests.references.reference import FLOAT, INTEGER, Reference, Result, exact_result, outputs

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore:late tuple:UserWarning")]

SPARK_TYPES = {INTEGER: "bigint", FLOAT: "double"}
IMPLICIT = {"ts": FLOAT, "id": INTEGER}


def in_timestamp_order(workload: Workload) -> list[tuple[Push, int]]:
    """Every tuple with its id, in (ts, stream in DDL order, id) order."""
    order = [s.name for s in workload.schema.streams]
    ids = workload.effective_ids()
    pushes = [(op, ids[i]) for i, op in enumerate(workload.ops) if isinstance(op, Push)]
    return sorted(pushes, key=lambda p: (p[0].ts, order.index(p[0].stream), p[1]))  # type: ignore[arg-type]


def expected(workload: Workload) -> list[Result]:
    ref = Reference(workload.schema, 0)
    for q in workload.queries:
        ref.register(q)
    return [r for p, ident in in_timestamp_order(workload) for r in ref.push(p.stream, p.ts, dict(p.values), id=ident)]


def spark_schema(workload: Workload, stream: str) -> str:
    columns = workload.schema.stream(stream).columns
    return ", ".join(["ts double", "id bigint", *(f"{c.name} {SPARK_TYPES.get(c.type, 'string')}" for c in columns)])


def rows_of(workload: Workload, stream: str) -> list[tuple[Any, ...]]:
    columns = workload.schema.stream(stream).columns
    out = []
    for p, ident in in_timestamp_order(workload):
        if p.stream == stream:
            values = [p.values.get(c.name) for c in columns]
            values = [
                float(v) if c.type == FLOAT and v is not None else v for c, v in zip(columns, values, strict=True)
            ]
            out.append((p.ts, ident, *values))
    return out


def results_of(workload: Workload, rows: list[Any]) -> list[Result]:
    """Result rows (query, ts, ids, one column per value name of any query) as results;
    each query keeps its own value names. A value name that queries give different
    types to is a string column (docs/spark.md); it is read back by the query's own
    column type, so a number must print exactly as what it means."""
    types = {}
    for q in workload.queries:
        aliases = dict(q.sources)
        types[q.name] = {
            n: IMPLICIT.get(c.name) or workload.schema.stream(aliases[c.alias]).column(c.name).type
            for n, c in outputs(workload.schema, q)
        }
    got = []
    for row in rows:
        data = row.asDict()
        assert data["query"] is not None, f"a tuple was reported late: {data}"
        values = {n: read_back(data[n], t) for n, t in types[data["query"]].items()}
        got.append(exact_result(data["query"], data["ts"], dict(data["ids"]), values))
    return got


def read_back(value: Any, column_type: str | None) -> Any:
    if not isinstance(value, str) or column_type not in (INTEGER, FLOAT):
        return value
    return int(value) if column_type == INTEGER else float(value)


def widest(workload: Workload) -> float:
    windows = [q.maxwindow.seconds for q in workload.queries if q.maxwindow is not None and len(q.sources) > 1]
    return float(max(windows, default=1))


@settings(max_examples=6, **EXPENSIVE)
@given(workload=workloads(churn=False, max_tuples=30), how=st.sampled_from(("auto", "time", "narrow", "width=W")))
def test_spark_batch(spark_session: Any, workload: Workload, how: str) -> None:
    """``narrow``: buckets just wider than the largest MAXWINDOW W, so many results
    straddle a bucket's edge; ``width=W``: exactly W, which the contract allows (B >= W)
    and the decimal W as a double means (FLOAT values mean their shortest decimal)."""
    from runtime.spark.batch import match_batch

    record(workload)
    frames = {
        s.name: spark_session.createDataFrame(rows_of(workload, s.name), spark_schema(workload, s.name))
        for s in workload.schema.streams
    }
    options: dict[str, Any] = {"partition_by": "auto" if how == "auto" else "time"}
    if how == "narrow":
        options["bucket_width"] = math.nextafter(widest(workload), math.inf)
    elif how == "width=W":
        options["bucket_width"] = widest(workload)
    texts = [q.to_text() for q in workload.queries]
    result = match_batch(frames, texts, schema=workload.schema.ddl(), partitions=3, **options)
    compare(f"match_batch {options}", results_of(workload, result.collect()), expected(workload))


@settings(max_examples=4, **EXPENSIVE)
@given(workload=workloads(churn=False, max_tuples=30), how=st.sampled_from(("auto", "time")))
def test_spark_streaming(spark_session: Any, workload: Workload, how: str) -> None:
    from runtime.spark.streaming import match_stream, write_files

    record(workload)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        streams = {}
        for s in workload.schema.streams:
            folder = base / "in" / s.name
            folder.mkdir(parents=True)
            with (folder / "part0.csv").open("w", newline="") as f:
                out = csv.writer(f)
                out.writerow(["ts", "id", *(c.name for c in s.columns)])
                for row in rows_of(workload, s.name):
                    cells = [csv_cell(v, c.type) for c, v in zip(s.columns, row[2:], strict=True)]
                    out.writerow([repr(row[0]), row[1], *cells])
            reader = spark_session.readStream.schema(spark_schema(workload, s.name)).option("header", True)
            streams[s.name] = reader.csv(str(folder))
        texts = [q.to_text() for q in workload.queries]
        results = match_stream(streams, texts, schema=workload.schema.ddl(), partition_by=how)
        query = write_files(results, str(base / "out"), str(base / "ck"), available_now=True)
        query.awaitTermination()
        rows = spark_session.read.schema(results.schema).parquet(str(base / "out")).collect()
    compare(f"match_stream partition_by={how}", results_of(workload, rows), expected(workload))
