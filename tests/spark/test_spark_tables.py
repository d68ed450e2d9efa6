"""Tables in the Spark match stages against the local matcher and the exact reference.

Generated data: two streams (one with a NaN and NULL keys), a table keyed by one
column and one keyed by two (a composite key), with upserts and deletes interleaved in
time with the tuples (from the start, at a tuple's ts, between tuples, several of one
key at one ts, a key whose first version comes after tuples that read it). The local
matcher and the reference get each version just before the first tuple at or after
its ts (as ``mqo match --table`` puts them); the Spark stages get the tables as
DataFrames. Results must be equal however the stage partitions the tuples (by key, by
time buckets a little wider than the largest MAXWINDOW) and in the streaming stage.
"""

from __future__ import annotations

import math
import random
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import mqo
from runtime.spark.spec import SparkStageError, output_names
from tests.differential.test_tables import SCHEMA, TABLES, queries
from tests.references.exact_language import Query
from tests.references.exact_tables import TableReference
from tests.references.reference import Result, engine_results, exact_result

pytestmark = pytest.mark.spark

QUERIES = queries(["1", "1.5", "2", "1"])  # icu, mixed, join, composite, plain, selfjoin
STREAM_SPARK = {
    "H": "ts double, id bigint, k bigint, x double, s string",
    "B": "ts double, id bigint, k double, y bigint",
}
TABLE_SPARK = {
    "T": "ts double, op string, id bigint, w string, a bigint, f double",
    "U": "ts double, op string, k1 bigint, k2 string, v double",
}
# (table, ts or None, op, values) in the order of the tables' DataFrames
Change = tuple[str, float | None, str, dict[str, Any]]


def tuples(seed: int) -> list[tuple[str, float, int, dict[str, Any]]]:
    """(stream, ts, id, values) in (ts, stream, id) order: the stages' order."""
    rnd = random.Random(seed)
    out = []
    ids = {"H": 0, "B": 0}
    for step in range(70):
        ts = step // 2 * 0.5
        stream = rnd.choice("HB")
        if stream == "H":
            values = {
                "k": rnd.choice([0, 1, 2, 3, None]),
                "x": rnd.choice([0.0, 0.5, 1.0, 1.5, 2.5]),
                "s": "ab"[step % 2],
            }
        else:
            values = {"k": rnd.choice([0.0, 1.0, 1.5, 2.0, 3.0, math.nan]), "y": rnd.choice([0, 1, 2, 3])}
        out.append((stream, ts, ids[stream], values))
        ids[stream] += 1
    return sorted(out, key=lambda t: (t[1], "HB".index(t[0]), t[2]))


def changes(seed: int) -> list[Change]:
    """Key 3 of T has no version before ts 6 (earlier tuples of key 3 find no row)."""
    rnd = random.Random(seed)
    out: list[Change] = [
        ("T", None, "", {"id": k, "w": rnd.choice(["ICU", "GEN"]), "a": k, "f": 0.3}) for k in (0, 1, 2)
    ]
    out += [("U", None, "", {"k1": k, "k2": "a", "v": 0.5}) for k in (0, 1)]
    for _ in range(24):
        ts = rnd.choice([0.0, 1.0, 2.5, 4.0, 6.0, 6.0, 7.5, 9.0, 12.0, 15.5])
        if rnd.random() < 0.25:
            out.append(("T", ts, "delete", {"id": rnd.choice([0, 1, 2]), "w": None, "a": None, "f": None}))
        elif rnd.random() < 0.6:
            row = {"id": rnd.choice([0, 1, 2, 3 if ts >= 6 else 1]), "w": rnd.choice(["ICU", "GEN"])}
            out.append(("T", ts, "upsert", {**row, "a": rnd.choice([0, 1, 2]), "f": rnd.choice([None, 0.3, 1.5])}))
        else:
            row = {"k1": rnd.choice([0, 1, 2]), "k2": rnd.choice("ab"), "v": rnd.choice([0.5, 1.0, 2.3])}
            out.append(("U", ts, rnd.choice(["", "upsert"]), row))
    return out


def put_order(table_changes: list[Change]) -> list[Change]:
    """The order a table file's rows are put: without ts first, then by ts (stable)."""
    timed = sorted((c for c in table_changes if c[1] is not None), key=lambda c: c[1])  # type: ignore[arg-type,return-value]
    return [c for c in table_changes if c[1] is None] + timed


def local_runs(chosen: list[Query], seed: int) -> tuple[list[Result], list[Result]]:
    """(the reference's results, the local matcher's), each version put just before
    the first tuple at or after its ts."""
    ref = TableReference(SCHEMA, TABLES, 0)
    m = mqo.Matcher(SCHEMA.ddl())
    for q in chosen:
        ref.register(q)
    m.register_queries("\n".join(t.to_text() for t in TABLES) + "\n" + "\n".join(q.to_text() for q in chosen))
    pending = put_order(changes(seed))
    want: list[Result] = []
    got: list[Result] = []

    def put(table: str, ts: float | None, op: str, values: dict[str, Any]) -> None:
        key = next(t.key for t in TABLES if t.name == table)
        if op == "delete":
            ref.delete(table, [{k: values[k] for k in key}], ts)
            m.delete_rows(table, [{k: values[k] for k in key}], ts)
        else:
            ref.upsert(table, [values], ts)
            m.upsert_rows(table, [values], ts)

    for stream, ts, ident, values in tuples(seed):
        while pending and (pending[0][1] is None or pending[0][1] <= ts):
            put(*pending.pop(0))
        want += ref.push(stream, ts, dict(values), id=ident)
        got += engine_results(m.push(stream, ts, values, ident))
    return want, got


def frames(spark: Any, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    streams = {
        name: spark.createDataFrame(
            [(ts, ident, *values.values()) for stream, ts, ident, values in tuples(seed) if stream == name],
            STREAM_SPARK[name],
        )
        for name in STREAM_SPARK
    }
    tables = {
        name: spark.createDataFrame(
            [(ts, op or None, *values.values()) for table, ts, op, values in changes(seed) if table == name],
            TABLE_SPARK[name],
        )
        for name in TABLE_SPARK
    }
    return streams, tables


def stage_results(rows: list[Any], chosen: list[Query]) -> list[Result]:
    m = mqo.Matcher(SCHEMA.ddl())
    m.register_queries("\n".join(t.to_text() for t in TABLES) + "\n" + "\n".join(q.to_text() for q in chosen))
    names = {rq.name: output_names(rq) for rq in m.registry}
    out = []
    for row in rows:
        data = row.asDict()
        assert data["query"] is not None, f"a tuple was reported late: {data}"
        out.append(
            exact_result(data["query"], data["ts"], dict(data["ids"]), {n: data[n] for n in names[data["query"]]})
        )
    return out


def texts(chosen: list[Query]) -> str:
    return "\n".join(t.to_text() for t in TABLES) + "\n" + "\n".join(q.to_text() for q in chosen)


@pytest.mark.parametrize("seed", [3])
def test_batch_stage_joins_tables_as_the_local_engine(spark_session: Any, seed: int) -> None:
    from runtime.spark.batch import match_batch

    streams, tables = frames(spark_session, seed)
    keyed = [q for q in QUERIES if q.name != "selfjoin"]  # (joins by '=' on one column per stream: key mode)
    for chosen, options in (
        (QUERIES, {"partition_by": "time", "bucket_width": math.nextafter(2.0, math.inf)}),
        (keyed, {"partition_by": "key"}),
    ):
        want, local = local_runs(chosen, seed)
        assert Counter(map(str, local)) == Counter(map(str, want)), "the local matcher and the reference differ"
        assert sum(r.query in ("icu", "join", "composite") for r in want) > 10, "too few table results to test"
        rows = match_batch(streams, texts(chosen), schema=SCHEMA.ddl(), partitions=3, tables=tables, **options)
        got = stage_results(rows.collect(), chosen)
        assert Counter(map(str, got)) == Counter(map(str, want)), f"match_batch {options}"


def test_streaming_stage_joins_tables_as_the_local_engine(spark_session: Any) -> None:
    from runtime.spark.streaming import match_stream, write_files

    seed = 3
    streams, tables = frames(spark_session, seed)
    want, _ = local_runs(QUERIES, seed)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        sources = {}
        for name, df in streams.items():
            df.write.parquet(str(base / "in" / name))
            sources[name] = spark_session.readStream.schema(STREAM_SPARK[name]).parquet(str(base / "in" / name))
        results = match_stream(sources, texts(QUERIES), schema=SCHEMA.ddl(), tables=tables, slots=3)
        query = write_files(results, str(base / "out"), str(base / "ck"), available_now=True)
        query.awaitTermination()
        rows = spark_session.read.schema(results.schema).parquet(str(base / "out")).collect()
    got = stage_results(rows, QUERIES)
    assert Counter(map(str, got)) == Counter(map(str, want))


def test_bad_tables_are_refused_before_the_stage_runs(spark_session: Any) -> None:
    from runtime.spark.batch import match_batch

    streams, tables = frames(spark_session, 3)
    ddl, text = SCHEMA.ddl(), texts(QUERIES[:1])

    def refused(message: str, given: dict[str, Any] = streams, **options: Any) -> None:
        with pytest.raises(SparkStageError, match=message):
            match_batch(given, text, schema=ddl, **options)

    refused("more than 5 rows. A table is reference data", tables=tables, max_table_rows=5)
    refused(r"tables: no table 'TT' among the queries \(did you mean 'T'\?\)", tables={"TT": tables["T"]})
    refused("T is a table: give its rows as tables=", {**streams, "T": tables["T"]}, tables={"U": tables["U"]})
    bad = spark_session.createDataFrame([(1.0, "remove", 1, "ICU", 1, 0.5)], TABLE_SPARK["T"])
    refused(r"table T, DataFrame row 0: op 'remove' is not upsert or delete", tables={"T": bad})
    keyless = spark_session.createDataFrame([(None, None, None, "ICU", 1, 0.5)], TABLE_SPARK["T"])
    refused("table T, DataFrame row 0: KEY column id is NULL", tables={"T": keyless})
    typo = tables["T"].withColumnRenamed("ts", "tss")
    refused(
        r"the DataFrame has a column 'tss', which is not a column of the table \(did you mean 'ts'\?\)",
        tables={"T": typo},
    )
    held = mqo.Matcher(ddl)
    held.register_queries(text)
    held.upsert_rows("T", [{"id": 1, "w": "ICU", "a": 1, "f": 0.5}], None)
    with pytest.raises(SparkStageError, match="the matcher holds rows of it already"):
        match_batch(streams, held, tables={"T": tables["T"]})


def test_what_still_refuses_tables_says_so(spark_session: Any, tmp_path: Path) -> None:
    """Ordered emission and a control stream in the streaming stage, and the aggregate
    stages (no aggregate query reads a table), each before any Spark job runs."""
    from runtime.spark.aggregate import aggregate_batch
    from runtime.spark.streaming import match_stream

    streams, tables = frames(spark_session, 3)
    live = {name: spark_session.readStream.schema(STREAM_SPARK[name]).parquet(str(tmp_path)) for name in streams}
    ddl, text = SCHEMA.ddl(), texts(QUERIES[:1])
    with pytest.raises(SparkStageError, match=r"tables need emit='arrival' \(table T\)"):
        match_stream(live, text, schema=ddl, tables=tables, emit="ordered")
    commands = spark_session.readStream.schema("ts double, command string, query string").json(str(tmp_path))
    with pytest.raises(SparkStageError, match=r"does not run tables with a control stream yet \(table T\)"):
        match_stream(live, text, schema=ddl, tables=tables, control=commands, max_window=5)
    counting = "\n".join(t.to_text() for t in TABLES) + "\nSELECT COUNT(*) FROM H [RANGE 5];"
    with pytest.raises(SparkStageError, match=r"the Spark aggregate stages take no tables \(table T\)"):
        aggregate_batch(streams, counting, schema=ddl)
