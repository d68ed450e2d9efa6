"""The batch path (push_batch, prepare/replay) against pushing one by one.

Random workloads from tests/references/exact_workloads.py are replayed twice: once tuple by tuple, once
with runs of consecutive tuples of one stream cut into random batches (given as dicts
of columns, Arrow tables or pandas frames). Every batch must give exactly the results
of its tuples pushed one by one, and late counts must agree. The per-tuple path is
itself checked against the exact reference in tests/differential/.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from functools import partial

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
from mqo.batch import MatchBatch
from mqo.results import TupleError
from tests.references.exact_workloads import Heartbeat, Idle, Push, Register, Unregister, Workload, workloads
from tests.references.reference import INTEGER, Stream

# these tests push sparse tuples: a column left out is NULL
sparse_matcher = partial(mqo.Matcher, missing="null", time="global")

SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


def canonical(m: mqo.Match | dict) -> tuple:
    d = m.as_dict() if not isinstance(m, dict) else m
    values = tuple(
        sorted(
            (k, None if v is None else (float(v) if isinstance(v, (int, float)) else v)) for k, v in d["values"].items()
        )
    )
    return (d["query"], float(d["ts"]), tuple(sorted(d["ids"].items())), values)


def as_batch(pushes: list[Push], stream: Stream, kind: str):
    data = {"ts": [p.ts for p in pushes]}
    if pushes[0].id is not None:
        data["id"] = [p.id for p in pushes]
    for col in stream.columns:
        data[col.name] = [p.values.get(col.name) for p in pushes]
    if kind == "arrow":
        return pa.table({k: pa.array(v) for k, v in data.items()})
    if kind == "pandas":
        # nullable integers: a float column would round integers past 2**53
        integers = {c.name for c in stream.columns if c.type == INTEGER}
        return pd.DataFrame({k: pd.array(v, dtype="Int64") if k in integers else v for k, v in data.items()})
    return data


def _same(a: object, b: object) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b))


def assert_conversions_agree(found: MatchBatch, m: mqo.Matcher) -> None:
    """to_arrow and json_lines say what matches() says, row for row."""

    types = m.value_types()
    matches = found.matches()
    rows = found.to_arrow(types).to_pylist()
    assert len(rows) == len(matches)
    for row, match in zip(rows, matches, strict=True):
        assert (row["query"], row["ts"], dict(row["ids"])) == (match.query, match.ts, match.ids)
        for name, dtype in types.items():
            want = match.values.get(name)
            if want is not None and dtype == pa.string():
                want = str(want)
            assert _same(row[name], want), (name, row[name], want)
    lines = [json.loads(line) for line in found.json_lines()]
    assert found.json_text() == "".join(found.json_lines())
    as_text = lambda d: json.dumps(d, sort_keys=True)  # noqa: E731  (NaN-safe equality)
    assert Counter(map(as_text, lines)) == Counter(as_text(match.as_dict()) for match in matches)


def replay(workload: Workload, cuts: list[int], kinds: list[str], store: str = "all") -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = matcher(workload, store=store)
        many = matcher(workload, store=store)
        ops = workload.ops
        i = 0
        cut = 0
        while i < len(ops):
            op = ops[i]
            if isinstance(op, Push):
                run = [op]
                j = i + 1
                while (
                    j < len(ops)
                    and isinstance(ops[j], Push)
                    and ops[j].stream == op.stream
                    and len(run) < cuts[cut % len(cuts)]
                    and (ops[j].id is None) == (op.id is None)
                ):
                    run.append(ops[j])
                    j += 1
                want = Counter()
                for p in run:
                    want.update(canonical(m) for m in one.push(p.stream, p.ts, dict(p.values), id=p.id))
                batch = as_batch(run, workload.schema.stream(op.stream), kinds[cut % len(kinds)])
                got_batch = many.push_batch(op.stream, batch)
                got = Counter(canonical(m) for m in got_batch.matches())
                assert len(got_batch) == sum(got.values())
                assert_conversions_agree(got_batch, many)
                assert got == want, (
                    f"batch of {len(run)} {op.stream} tuples at op {i}: {got - want} extra, {want - got} missing"
                )
                assert one.late_count == many.late_count
                cut += 1
                i = j
                continue
            for m in (one, many):
                apply(m, op)
            i += 1
        assert one.counters.results == many.counters.results
        many.state._check()


def matcher(workload: Workload, **options) -> mqo.Matcher:
    return sparse_matcher(
        workload.schema.ddl(),
        allowed_lateness=workload.lateness,
        time=workload.time,
        stream_lateness=workload.stream_lateness,
        idle_timeout=None,
        **options,
    )


def apply(m: mqo.Matcher, op: object) -> None:
    """A registration, removal, heartbeat or idle declaration."""
    if isinstance(op, Heartbeat):
        m.heartbeat(*((op.ts,) if op.stream is None else (op.stream, op.ts)))
    elif isinstance(op, Register):
        m.register_query(*op.call_args())
    elif isinstance(op, Unregister):
        m.unregister_query(op.name)
    elif isinstance(op, Idle):
        m.set_idle(op.stream)


@settings(max_examples=80, **SETTINGS)
@given(
    workloads(),
    st.lists(st.integers(1, 8), min_size=1, max_size=4),
    st.lists(st.sampled_from(["dict", "arrow", "pandas"]), min_size=1, max_size=3),
)
def test_push_batch_equals_pushing_one_by_one(workload, cuts, kinds):
    replay(workload, cuts, kinds)


def fixed_queries(workload: Workload) -> Workload:
    """The workload with every registration moved to the start and no removals."""
    registers = [op for op in workload.ops if isinstance(op, Register)]
    rest = [op for op in workload.ops if isinstance(op, (Push, Heartbeat))]
    return Workload(workload.schema, workload.lateness, registers + rest)


@settings(max_examples=60, **SETTINGS)
@given(workloads(), st.lists(st.integers(1, 8), min_size=1, max_size=4))
def test_storing_only_candidates_changes_no_result_when_queries_are_fixed(workload, cuts):
    fixed = fixed_queries(workload)
    replay(fixed, cuts, ["dict"], store="candidates")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = matcher(fixed)
        b = matcher(fixed, store="candidates")
        for op in fixed.ops:
            for m in (a, b):
                apply(m, op)
            if isinstance(op, Push):
                got_a = Counter(canonical(m) for m in a.push(op.stream, op.ts, dict(op.values), id=op.id))
                got_b = Counter(canonical(m) for m in b.push(op.stream, op.ts, dict(op.values), id=op.id))
                assert got_a == got_b
        assert len(b.state) <= len(a.state)


def test_batch_results_convert_to_arrow_json_and_matches(thesis_ddl, running_example):
    m = sparse_matcher(thesis_ddl, allowed_lateness=8)
    m.register_queries(running_example)
    m.register_query("Query ID: hot\nSELECT B.pressure * 2 AS twice, B.alert FROM B WHERE B.pressure > 100")
    got = m.push_batch(
        "B", {"ts": [1, 2, 4, 5, 8], "pressure": [150, 97, 35, 100, 150], "temp": [101] * 5, "alert": [0] * 5}
    )
    assert len(got) == 2
    table = got.to_arrow(m.value_types())
    assert table.column_names[:3] == ["query", "ts", "ids"]
    assert table.column("query").to_pylist() == ["hot", "hot"]
    assert table.column("twice").to_pylist() == [300.0, 300.0]
    assert table.column("ids").to_pylist() == [[("B", 0)], [("B", 4)]]
    assert [json.loads(line) for line in got.json_lines()] == got.to_pylist()
    assert got.json_text() == "".join(got.json_lines())
    assert [r["values"]["twice"] for r in got.to_pylist()] == [300.0, 300.0]
    m.push_batch(
        "H",
        pa.table(
            {"ts": [0.0, 1, 2, 3, 4], "beatrate": [6.0, 1, 7, 2, 8], "vib": [98.0, 90, 98, 98, 89], "alert": [1] * 5}
        ),
    )
    t = m.push_batch("T", pd.DataFrame({"ts": [1.0], "fluct": [103.0], "degree": [101.0], "incr": [98.0]}))
    assert [x.as_dict() for x in t] == [{"query": "3", "ts": 1.0, "ids": {"T": 0, "H": 0}, "values": {"H.alert": 1}}]


@pytest.mark.parametrize(
    ("batch", "fragment"),
    [
        ({"pressure": [1.0]}, "has no 'ts' column"),
        ({"ts": [1.0], "presure": [1.0]}, "has no column 'presure' (did you mean 'pressure'?)"),
        ({"ts": [1.0, 2.0], "pressure": [1.0]}, "column pressure has 1 values but ts has 2"),
        ({"ts": [1.0, float("nan")]}, "row 1: ts must be a finite number"),
        ([1, 2, 3], "takes an Arrow table, a pandas DataFrame or a dict of columns"),
    ],
)
def test_bad_batches_are_clear_errors(batch, fragment, thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    m.register_query("SELECT * FROM B WHERE B.pressure > 0")
    with pytest.raises(TupleError) as err:
        m.push_batch("B", batch)
    assert fragment in str(err.value)


TYPED_DDL = "REGISTER STREAM S (name STRING, ok BOOLEAN, n INTEGER);"


@pytest.mark.parametrize(
    ("column", "value", "fragment"),
    [
        ("name", 5, "column name: expected a string, got 5"),
        ("name", 1.5, "column name: expected a string, got 1.5"),
        ("name", True, "column name: expected a string, got True"),
        ("ok", 1, "column ok: expected a boolean, got 1"),
        ("ok", "true", "column ok: expected a boolean, got 'true'"),
    ],
)
@pytest.mark.parametrize("form", ["list", "numpy", "arrow"])
def test_a_batch_takes_the_values_push_takes(column, value, fragment, form):
    """A STRING or BOOLEAN column of a batch holds what ``push`` takes there (a str, a
    bool, None) or the batch is refused naming the row and column, as ``push`` refuses
    the tuple; a number in a STRING column was taken as it was."""
    m = mqo.Matcher(TYPED_DDL, missing="null")
    m.register_query("SELECT S.name, S.ok FROM S")
    with pytest.raises(TupleError, match=fragment.split(": ", 1)[1]):
        m.push("S", 0.0, {column: value})
    given = {"list": [value], "numpy": np.array([value], object), "arrow": pa.array([value])}[form]
    with pytest.raises(TupleError) as err:
        m.push_batch("S", {"ts": [1.0], column: given})
    assert str(err.value) == f"stream S: row 0, {fragment}"
    good = "fine" if column == "name" else False
    assert m.push_batch("S", {"ts": [3.0], column: [good]}).to_pylist()[0]["values"][f"S.{column}"] == good


def test_a_dictionary_column_holds_its_values():
    """A dictionary-encoded column (what a CSV or Parquet reader gives a text column)
    is its values: strings (and NULLs) in a STRING column are taken as they are, a
    dictionary of numbers is refused naming its first row, as plain numbers are."""
    m = mqo.Matcher(TYPED_DDL, missing="null")
    m.register_query("SELECT S.name FROM S WHERE S.name = 'b'")
    names = pa.array(["a", "b", None, "b"]).dictionary_encode()
    got = m.push_batch("S", pa.table({"ts": [1.0, 2.0, 3.0, 4.0], "name": names}))
    assert [(r["ts"], r["values"]["S.name"]) for r in got.to_pylist()] == [(2.0, "b"), (4.0, "b")]
    with pytest.raises(TupleError) as err:
        m.push_batch("S", pa.table({"ts": [5.0], "name": pa.array([7]).dictionary_encode()}))
    assert str(err.value) == "stream S: row 0, column name: expected a string, got 7"


def test_numpy_booleans_are_booleans():
    """np.bool_ is no bool to ``isinstance``; push and push_batch take it as the bool it is."""
    m = mqo.Matcher(TYPED_DDL, missing="null")
    m.register_query("SELECT S.ok FROM S WHERE S.ok = TRUE")
    pushed = [r.values["S.ok"] for r in m.push("S", 0.0, {"ok": np.True_})]
    batched = [r.values["S.ok"] for r in m.push_batch("S", {"ts": [1.0, 2.0], "ok": [np.True_, np.False_]})]
    assert pushed == batched == [True] and {type(v) for v in pushed + batched} == {bool}


def test_a_column_of_many_dimensions_is_refused(thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    m.register_query("SELECT * FROM B WHERE B.pressure > 0")
    for column in ("ts", "pressure", "alert"):
        batch = {"ts": np.array([1.0, 2.0]), "pressure": np.array([1.0, 2.0]), "alert": np.array([0, 1])}
        batch[column] = batch[column].reshape(2, 1)
        with pytest.raises(TupleError, match=f"column {column}: expected one value per row, got an array of shape"):
            m.push_batch("B", batch)


def test_late_rows_inside_a_batch_are_reported(thesis_ddl):
    seen = []
    m = sparse_matcher(thesis_ddl, late_sink=seen.append)
    m.register_query("SELECT * FROM B WHERE B.pressure > 0")
    got = m.push_batch("B", {"ts": [5.0, 3.0, 6.0, 1.0], "pressure": [1.0, 1.0, 1.0, 1.0]})
    assert sorted(r.ids["B"] for r in got) == [0, 2]
    assert [(t.ts, t.id) for t in seen] == [(3.0, 1), (1.0, 3)]
    assert m.late_count == 2


def test_empty_batch(thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    m.register_query("SELECT * FROM B WHERE B.pressure > 0")
    got = m.push_batch("B", {"ts": np.zeros(0), "pressure": np.zeros(0)})
    assert isinstance(got, MatchBatch) and len(got) == 0
    assert got.to_arrow().num_rows == 0


def test_json_lines_are_one_per_result_whatever_the_strings_hold():
    m = sparse_matcher("REGISTER STREAM S (tag STRING);")
    m.register_query("Query ID: a\nSELECT S.tag FROM S")
    m.register_query("Query ID: b\nSELECT S.tag FROM S")
    tags = ["two\nlines", "sep\u2028arator", 'quote"d', "plain"]
    got = m.push_batch("S", {"ts": [1.0, 2.0, 3.0, 4.0], "tag": tags})
    lines = list(got.json_lines())
    assert len(lines) == len(got) == 8 and all(line.endswith("}\n") for line in lines)
    assert [json.loads(line)["values"]["S.tag"] for line in lines] == [t for t in tags for _ in "ab"]
    assert got.json_text() == "".join(lines)
