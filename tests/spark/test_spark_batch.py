"""The Spark batch stage against the local engine (results equal the local
engine's exactly, whatever the partitioning), and ``mqo match --engine spark``.

The reference is an ordinary :class:`mqo.Matcher` fed every tuple in (ts, stream, id)
order, the batch stage's documented semantics. Workloads are seeded random: a few
streams, single-, two- and three-stream queries with attribute, join and window
predicates (some with OR), windows up to 8 s over 60 s of data, and bucket widths
down to the largest MAXWINDOW, so many results span bucket boundaries (checked).
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import mqo
from mqo.partitioning import shared_equality_key
from runtime.spark.batch import match_batch
from runtime.spark.spec import SparkStageError, build_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "icu"

DDL = """
REGISTER STREAM B (pressure FLOAT, temp FLOAT, pid INTEGER);
REGISTER STREAM H (beatrate FLOAT, vib FLOAT, pid INTEGER);
REGISTER STREAM T (fluct FLOAT, pid INTEGER, tag STRING);
"""
STREAMS = ("B", "H", "T")
COLUMNS = {"B": ("pressure", "temp", "pid"), "H": ("beatrate", "vib", "pid"), "T": ("fluct", "pid", "tag")}


@dataclass
class Workload:
    queries: list[str]
    rows: dict[str, list[dict[str, Any]]]  # per stream, in DataFrame row order; "id" is the row's id
    max_window: float


def make_queries(rnd: random.Random, n: int, keyed: bool, self_joins: bool = False) -> list[str]:
    """Random queries over B, H, T; with ``keyed`` every join query equates pid; with
    ``self_joins`` some read B under two aliases (and H)."""
    out = []
    for _ in range(n):
        shape = rnd.choice(["one", "two", "two", "two", "three", *(["self", "self", "self3"] if self_joins else [])])
        w = rnd.choice([2, 3, 5, 8])
        if shape in ("self", "self3"):
            preds = [
                f"b2.pressure > b1.pressure + {rnd.randint(0, 30)}",
                rnd.choice(["b1.ts < b2.ts", "b1.ts <= b2.ts"]),
            ]
            if keyed:
                preds.append("b1.pid = b2.pid")
            if shape == "self":
                out.append(f"SELECT * FROM B b1, B b2 MAXWINDOW {w} sec WHERE {' AND '.join(preds)}")
                continue
            preds.append(f"H.vib < b2.temp + {rnd.randint(-20, 20)}")
            if keyed:
                preds.append("H.pid = b1.pid")
            out.append(
                f"SELECT b1.pressure, b2.pressure, H.vib FROM B b1, H, B b2 MAXWINDOW {w} WHERE {' AND '.join(preds)}"
            )
            continue
        if shape == "one":
            s = rnd.choice(STREAMS)
            col = COLUMNS[s][0]
            out.append(f"SELECT * FROM {s} WHERE {s}.{col} {rnd.choice(['<', '>', '<='])} {rnd.randint(10, 90)}")
            continue
        if shape == "two":
            window = rnd.choice(["WINDOW B.ts <= H.ts ", "WINDOW H.ts <= B.ts ", ""])
            preds = [
                f"B.pressure < {rnd.randint(30, 100)}",
                f"H.beatrate > {rnd.randint(0, 70)}",
                f"B.pressure <= {rnd.choice([1, 1.5, 2])} * H.vib",
            ]
            if rnd.random() < 0.3:
                preds[1] = f"(H.beatrate > {rnd.randint(0, 70)} OR H.vib < {rnd.randint(10, 60)})"
            if keyed:
                preds.append("B.pid = H.pid")
            select = rnd.choice(["B.pressure, H.vib", "*", "B.temp + H.vib AS total"])
            out.append(f"SELECT {select} FROM B, H {window}MAXWINDOW {w} sec WHERE {' AND '.join(preds)}")
            continue
        preds = [f"B.pressure > T.fluct + {rnd.randint(-20, 20)}", f"H.vib < {rnd.randint(30, 90)}"]
        if keyed:
            preds += ["B.pid = H.pid", "T.pid = H.pid"]
        out.append(
            f"SELECT B.pressure, T.tag FROM B, H, T WINDOW T.ts <= B.ts MAXWINDOW {w} WHERE {' AND '.join(preds)}"
        )
    return out


def make_rows(rnd: random.Random, span: float, per_stream: int) -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = {}
    for s in STREAMS:
        ts = sorted(round(rnd.uniform(0, span), 1) for _ in range(per_stream))
        items = []
        for i, t in enumerate(ts):
            row: dict[str, Any] = {"ts": t, "id": i}
            for col in COLUMNS[s]:
                if col == "pid":
                    row[col] = None if rnd.random() < 0.05 else rnd.randint(0, 3)
                elif col == "tag":
                    row[col] = rnd.choice(["a", "b", None])
                else:
                    row[col] = None if rnd.random() < 0.03 else round(rnd.uniform(0, 100), 1)
            items.append(row)
        rows[s] = items
    return rows


def make_workload(
    seed: int, *, keyed: bool = False, n_queries: int = 12, per_stream: int = 110, self_joins: bool = False
) -> Workload:
    rnd = random.Random(seed)
    queries = make_queries(rnd, n_queries, keyed, self_joins)
    m = mqo.Matcher(DDL)
    m.register_queries(queries)
    return Workload(queries, make_rows(rnd, 60.0, per_stream), m.registry.max_window())


def reference(workload: Workload, allowed_lateness: float = 0.0) -> list[tuple[Any, ...]]:
    """The local engine's results, tuples pushed in (ts, stream, id) order."""
    m = mqo.Matcher(DDL, allowed_lateness=allowed_lateness)
    m.register_queries(workload.queries)
    order = sorted(
        ((r["ts"], k, r["id"], s, r) for k, s in enumerate(STREAMS) for r in workload.rows[s]), key=lambda x: x[:3]
    )
    found = []
    for ts, _, ident, s, r in order:
        values = {c: r[c] for c in COLUMNS[s]}
        found.extend(key_of(x.query, x.ts, x.ids, x.values) for x in m.push(s, ts, values, id=ident))
    return found


def key_of(query: str, ts: float, ids: Any, values: dict[str, Any]) -> tuple[Any, ...]:
    clean = {k: v for k, v in values.items() if v is not None and not (isinstance(v, float) and math.isnan(v))}
    return (query, ts, tuple(sorted(dict(ids).items())), tuple(sorted(clean.items())))


def spark_keys(rows: list[Any]) -> list[tuple[Any, ...]]:
    out = []
    for row in rows:
        d = row.asDict()
        values = {k: v for k, v in d.items() if k not in ("query", "ts", "ids")}
        out.append(key_of(d["query"], d["ts"], d["ids"], values))
    return out


def frames(spark: Any, workload: Workload, *, with_ids: tuple[str, ...] = STREAMS, shuffle: int | None = None) -> dict:
    """One DataFrame per stream. Streams not in ``with_ids`` have no id column (the
    stage numbers them in row order, which is the id order here); the others may have
    their rows shuffled, since order must not matter when ids are given."""
    out = {}
    for s in STREAMS:
        rows = list(workload.rows[s])
        if s in with_ids and shuffle is not None:
            random.Random(shuffle).shuffle(rows)
        cols = ["ts", *(["id"] if s in with_ids else []), *COLUMNS[s]]
        types = {"ts": "double", "id": "bigint", "pid": "bigint", "tag": "string"}
        schema = ", ".join(f"{c} {types.get(c, 'double')}" for c in cols)
        out[s] = spark.createDataFrame([tuple(r[c] for c in cols) for r in rows], schema)
    return out


def spanning(workload: Workload, results: list[tuple[Any, ...]], width: float) -> int:
    """How many results have tuples in two different buckets of ``width``."""
    ts_of = {(s, r["id"]): r["ts"] for s in STREAMS for r in workload.rows[s]}
    n = 0
    for _, _, ids, _ in results:
        stamps = [ts_of[(alias, ident)] for alias, ident in ids]
        if len({math.floor(t / width) for t in stamps}) > 1:
            n += 1
    return n


# ------------------------------------------------------------------ no Spark needed


def test_shared_key_detected_for_chains_and_renamed_columns() -> None:
    ddl = "REGISTER STREAM A (x FLOAT, dev INTEGER); REGISTER STREAM C (y FLOAT, device INTEGER);" + (
        "REGISTER STREAM D (z FLOAT, dev INTEGER);"
    )
    m = mqo.Matcher(ddl)
    m.register_queries(
        [
            "SELECT * FROM A, C MAXWINDOW 5 WHERE A.dev = C.device AND A.x < C.y",
            "SELECT * FROM A, C, D MAXWINDOW 5 WHERE C.device = D.dev AND D.dev = A.dev",
            "SELECT * FROM A WHERE A.x > 3",
        ]
    )
    assert shared_equality_key(m.registry) == {"A": "dev", "C": "device", "D": "dev"}
    assert build_spec(m).mode == "key"
    assert build_spec(m, partition_by="time").mode == "time"


def test_shared_key_absent_when_one_query_lacks_it() -> None:
    m = mqo.Matcher(DDL)
    m.register_queries(
        [
            "SELECT * FROM B, H MAXWINDOW 5 WHERE B.pid = H.pid",
            "SELECT * FROM B, H MAXWINDOW 5 WHERE B.pid = H.pid OR B.temp > H.vib",  # one disjunct has no key
        ]
    )
    assert shared_equality_key(m.registry) is None
    with pytest.raises(SparkStageError, match="partition_by='key'"):
        build_spec(m, partition_by="key")
    m2 = mqo.Matcher(DDL)
    m2.register_queries(["SELECT * FROM B, H MAXWINDOW 5 WHERE B.pid = 2 * H.pid"])  # not an equality of values
    assert shared_equality_key(m2.registry) is None
    m3 = mqo.Matcher(DDL)
    m3.register_queries(["SELECT * FROM B, H, T MAXWINDOW 5 WHERE B.pid = H.pid"])  # T not connected
    assert shared_equality_key(m3.registry) is None


def test_shared_key_of_self_joins_takes_one_column_per_stream() -> None:
    m = mqo.Matcher(DDL)
    m.register_queries(
        [
            "SELECT * FROM B b1, B b2 MAXWINDOW 5 WHERE b1.pid = b2.pid AND b1.pressure < b2.pressure",
            "SELECT * FROM B, H MAXWINDOW 5 WHERE B.pid = H.pid",
        ]
    )
    assert shared_equality_key(m.registry) == {"B": "pid", "H": "pid"}
    # the two readings of B equated on different columns: no one column of B keeps them together
    m.register_query("SELECT * FROM B b1, B b2, H MAXWINDOW 5 WHERE b1.pid = H.pid AND b2.temp = H.pid")
    assert shared_equality_key(m.registry) is None


def test_bucket_width_below_the_window_is_refused() -> None:
    m = mqo.Matcher(DDL)
    m.register_queries(["SELECT * FROM B, H MAXWINDOW 8 WHERE B.pressure < H.vib"])
    with pytest.raises(SparkStageError, match="smaller than the largest MAXWINDOW"):
        build_spec(m, bucket_width=5)
    assert build_spec(m).bucket_width == 32  # default: four windows


def test_value_name_clashing_with_a_result_column_is_refused() -> None:
    m = mqo.Matcher(DDL)
    m.register_query("SELECT B.pressure AS ts FROM B")
    with pytest.raises(SparkStageError, match="clashes"):
        build_spec(m)


# ------------------------------------------------------------------------- Spark


@pytest.mark.spark
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_time_buckets_equal_local_engine(spark_session: Any, seed: int) -> None:
    workload = make_workload(seed)
    expected = reference(workload)
    assert expected, "the workload should produce results"
    data = frames(spark_session, workload, with_ids=("B", "H"), shuffle=seed)
    w = workload.max_window
    configs = [(1, w), (3, w), (4, 1.5 * w), (2, 40.0)]
    for partitions, width in configs:
        assert spanning(workload, expected, width) > 0, "some results must span a bucket boundary"
        got = spark_keys(
            match_batch(
                data, workload.queries, schema=DDL, partitions=partitions, bucket_width=width, partition_by="time"
            ).collect()
        )
        assert Counter(got) == Counter(expected), f"partitions={partitions} bucket_width={width}"


@pytest.mark.spark
@pytest.mark.parametrize("seed", [4, 5])
def test_equality_key_partitioning_equals_local_engine(spark_session: Any, seed: int) -> None:
    workload = make_workload(seed, keyed=True)
    m = mqo.Matcher(DDL)
    m.register_queries(workload.queries)
    assert build_spec(m).mode == "key"
    expected = reference(workload)
    assert expected
    data = frames(spark_session, workload, shuffle=seed)
    for partitions in (1, 4):
        got = spark_keys(match_batch(data, m, partitions=partitions).collect())
        assert Counter(got) == Counter(expected), f"partitions={partitions}"


@pytest.mark.spark
def test_ids_numbered_in_row_order_without_an_id_column(spark_session: Any) -> None:
    workload = make_workload(7, n_queries=6, per_stream=60)
    data = frames(spark_session, workload, with_ids=())
    got = spark_keys(match_batch(data, workload.queries, schema=DDL, partitions=3).collect())
    assert Counter(got) == Counter(reference(workload))


@pytest.mark.spark
def test_schema_derived_from_dataframes(spark_session: Any) -> None:
    df = spark_session.createDataFrame([(1.0, 10.0, 1), (2.0, 50.0, 2), (3.0, 70.0, 3)], "ts double, x double, k int")
    rows = match_batch({"A": df}, "SELECT A.k FROM A WHERE A.x > 20").collect()
    assert sorted((r["query"], r["ts"], r["ids"]["A"], r["A.k"]) for r in rows) == [("1", 2.0, 1, 2), ("1", 3.0, 2, 3)]


@pytest.mark.spark
def test_bad_inputs_name_the_stream_and_column(spark_session: Any) -> None:
    good = spark_session.createDataFrame(
        [(1.0, 0, 1.0, 1.0, 1)], "ts double, id bigint, pressure double, temp double, pid bigint"
    )
    query = "SELECT * FROM B WHERE B.pressure > 0"
    with pytest.raises(SparkStageError, match=r"unknown stream 'Bx'.*did you mean 'B'"):
        match_batch({"Bx": good}, query, schema=DDL)
    missing = good.drop("temp").withColumnRenamed("pressure", "presure")
    with pytest.raises(
        SparkStageError, match=r"stream B: the DataFrame has no column 'pressure'.*did you mean 'presure'"
    ):
        match_batch({"B": missing}, query, schema=DDL)
    wrong = good.withColumn("pid", good["pid"].cast("string"))
    with pytest.raises(SparkStageError, match="stream B: column pid is INTEGER but the DataFrame has string"):
        match_batch({"B": wrong}, query, schema=DDL)


# --------------------------------------------------------------------------- CLI


def _cli(args: list[str]) -> int:
    from runtime.cli import main

    return main(args)


def _icu_args(out: Path, *extra: str) -> list[str]:
    args = ["match", "--schema", str(EXAMPLES / "streams.ddl"), "--queries", str(EXAMPLES / "running_example.mqo")]
    for s in "BHKT":
        args += ["--input", f"{s}={EXAMPLES / f'{s}.csv'}"]
    return [*args, "--output", str(out), *extra]


@pytest.mark.spark
def test_cli_spark_engine_on_the_icu_example(spark_session: Any, tmp_path: Path, capsys: Any) -> None:
    for fmt in ("jsonl", "parquet"):
        local, spark = tmp_path / f"local.{fmt}", tmp_path / f"spark.{fmt}"
        assert _cli(_icu_args(local, "--allowed-lateness", "10")) == 0
        local_err = capsys.readouterr().err
        assert _cli(_icu_args(spark, "--engine", "spark", "--allowed-lateness", "10")) == 0
        spark_err = capsys.readouterr().err
        if fmt == "jsonl":
            lines = spark.read_text().splitlines()
            assert lines == ['{"query":"3","ts":1.0,"ids":{"T":0,"H":0},"values":{"H.alert":1}}']
            assert sorted(lines) == sorted(local.read_text().splitlines())
        else:
            assert pq.read_table(spark).to_pylist() == pq.read_table(local).to_pylist()

        # the same summary, but for the time
        def summary(err: str, out: Path) -> list[str]:
            return [x.replace(str(out), "OUT") for x in err.splitlines() if not x.startswith("time:")]

        assert summary(spark_err, spark) == summary(local_err, local)
        assert "results:  1 -> OUT" in summary(spark_err, spark)


@pytest.mark.spark
def test_cli_spark_engine_matches_local_with_late_and_bad_rows(spark_session: Any, tmp_path: Path, capsys: Any) -> None:
    """Out-of-order input (some tuples late, some within the lateness), a bad row
    skipped, a stream without ids, two inputs of one stream: same records, late file
    and reject file as the local engine."""
    rnd = random.Random(11)
    ddl = tmp_path / "s.ddl"
    ddl.write_text("REGISTER STREAM B (pressure FLOAT, pid INTEGER); REGISTER STREAM H (vib FLOAT, pid INTEGER);")
    queries = tmp_path / "q.mqo"
    queries.write_text(
        "SELECT B.pressure, H.vib FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 4 WHERE B.pressure < H.vib;\n"
        "SELECT * FROM B, H MAXWINDOW 2 WHERE B.pid = H.pid AND H.vib > 50;\n"
        "SELECT * FROM H WHERE H.vib > 90;\n"
    )
    files = []
    for name, col, parts in (("B", "pressure", 2), ("H", "vib", 1)):
        for part in range(parts):
            path = tmp_path / f"{name}{part}.csv"
            lines = [f"ts,{col},pid"]
            for _ in range(80):
                ts = round(rnd.uniform(0, 40), 1)
                lines.append(f"{ts},{round(rnd.uniform(0, 100), 1)},{rnd.randint(0, 2)}")
            lines.insert(30, "12.5,not-a-number,1")
            path.write_text("\n".join(lines) + "\n")
            files.append(f"{name}={path}")
    outs = {}
    for engine in ("local", "spark"):
        out = tmp_path / f"{engine}.jsonl"
        args = ["match", "--schema", str(ddl), "--queries", str(queries), "--output", str(out)]
        for f in files:
            args += ["--input", f]
        args += ["--engine", engine, "--allowed-lateness", "3", "--on-bad-row", "skip"]
        assert _cli(args) == 0
        capsys.readouterr()
        late = Path(f"{out}.late.jsonl").read_text().splitlines()
        rejects = Path(f"{out}.rejects.jsonl").read_text().splitlines()
        outs[engine] = (sorted(out.read_text().splitlines()), late, rejects)
    local, spark = outs["local"], outs["spark"]
    assert local[0] and local[1], "the input should give results and late tuples"
    assert spark[0] == local[0]
    assert sorted(map(json.dumps, map(json.loads, spark[1]))) == sorted(map(json.dumps, map(json.loads, local[1])))
    assert spark[2] == local[2] and len(local[2]) == 3


@pytest.mark.spark
def test_self_joins_equal_local_engine(spark_session: Any) -> None:
    """Queries reading B under two aliases, by time buckets and by the equality key."""
    for keyed, seed in ((False, 32), (True, 32)):
        workload = make_workload(seed, keyed=keyed, n_queries=6, per_stream=50, self_joins=True)
        assert any(" b2" in q for q in workload.queries)
        expected = reference(workload)
        assert any(dict(ids).keys() >= {"b1", "b2"} for _, _, ids, _ in expected), "self-join results expected"
        data = frames(spark_session, workload, shuffle=seed)
        mode = "key" if keyed else "time"
        got = spark_keys(match_batch(data, workload.queries, schema=DDL, partitions=3, partition_by=mode).collect())
        assert Counter(got) == Counter(expected), mode
