"""Results of queries with the same SELECT share one row of result columns, and only
those: against the engine's own results (``MatchBatch.matches()``, which builds every
result's ids and values from its own query context, one by one).

A query file gives each query a context of its own; the result columns put the
results of contexts with the same aliases and SELECT on one row (:class:`mqo.batch.SharedCode`).
The queries below differ from one another at each place where sharing would be wrong
(another column or alias under one name, an INTEGER against a FLOAT column, a text, a
boolean and a number literal, ``+`` against ``-``, the FROM order that orders the
ids) and are the same elsewhere (a WHERE of their own). Every file format and the
API's JSON text must say what ``matches()`` says, ids in their order, values in their
types; Hypothesis draws NULLs, NaN, ties in ts and integers past 2**53.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
from mqo.arrow_build import array_of
from mqo.batch import SharedCode
from runtime.io.writers import open_writer

DDL = "REGISTER STREAM A (x INTEGER, y FLOAT, s STRING); REGISTER STREAM B (x INTEGER, y FLOAT);"
SELECTS = [
    "SELECT A.x AS v, A.s FROM A",
    "SELECT A.x AS v, A.s FROM A WHERE A.x > 0",  # the first's code, a WHERE of its own
    "SELECT A.y AS v, A.s FROM A",  # a FLOAT column under the same name
    "SELECT Z.x AS v, Z.s FROM A Z",  # another alias: other ids
    "SELECT A.x + 1 AS v, A.s FROM A",
    "SELECT A.x - 1 AS v, A.s FROM A",
    "SELECT -A.x AS v, A.s FROM A",
    "SELECT 1 AS v, A.s FROM A",
    "SELECT '1' AS v, A.s FROM A",
    "SELECT true AS v, A.s FROM A",
    "SELECT A.x AS v, B.y AS s FROM A, B WINDOW A.ts <= B.ts MAXWINDOW 2 WHERE A.x = B.x",
    "SELECT A.x AS v, B.y AS s FROM B, A WINDOW A.ts <= B.ts MAXWINDOW 2 WHERE A.x = B.x",  # ids in another order
    "SELECT A.x AS v, B.y AS s FROM A, B WINDOW A.ts <= B.ts MAXWINDOW 2 WHERE A.x <= B.x",
]
QUERIES = "".join(f"Query ID: q{k}\n{select};\n" for k, select in enumerate(SELECTS))

integers = st.one_of(st.none(), st.integers(-2, 3), st.just(2**53 + 1), st.just(-(2**63)))
floats = st.one_of(st.none(), st.just(math.nan), st.sampled_from([0.0, -0.0, 0.1, 1e300]), st.floats(-5, 5))
stamps = st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.0, 1.5]), max_size=8).map(sorted)  # ties


@st.composite
def batches(draw: Any) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    ts_a, ts_b = draw(stamps), [1.0 + t for t in draw(stamps)]
    n, m = len(ts_a), len(ts_b)
    a = {
        "ts": ts_a,
        "x": draw(st.lists(integers, min_size=n, max_size=n)),
        "y": draw(st.lists(floats, min_size=n, max_size=n)),
        "s": draw(st.lists(st.one_of(st.none(), st.sampled_from(["", "é", "1", "a,b"])), min_size=n, max_size=n)),
    }
    b = {
        "ts": ts_b,
        "x": draw(st.lists(integers, min_size=m, max_size=m)),
        "y": draw(st.lists(floats, min_size=m, max_size=m)),
    }
    return a, b


def _typed(value: Any) -> tuple[type, Any]:
    """A value with its type (2 and 2.0, True and 1 differ), NaN and non-finite as NULL."""
    if isinstance(value, float) and not math.isfinite(value):
        value = None
    return (type(value), value)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches())
def test_shared_rows_say_what_each_querys_own_results_say(tmp_path: Path, data: Any) -> None:
    a, b = data
    matcher = mqo.Matcher(DDL)
    matcher.register_queries(QUERIES)
    found = [matcher.push_batch("A", a), matcher.push_batch("B", b)]
    matches = [m for batch in found for m in batch.matches()]
    # the codes: q0 and q1 share one, q10 and q12 one, every other query has its own
    plan = matcher.ensure_plan()
    codes = plan.derived(SharedCode).classes(plan, np.arange(plan.n_slots)).tolist()
    by_query = {plan.record_names[r]: c for r, c in zip(plan.slot_record.tolist(), codes, strict=True)}
    assert len(set(codes)) == len(SELECTS) - 2
    assert by_query["q0"] == by_query["q1"] and by_query["q10"] == by_query["q12"]
    # JSON lines: each query's own ids (in order) and values (in their types)
    path = tmp_path / "out.jsonl"
    with open_writer(str(path), "jsonl", matcher.value_types()) as writer:
        for batch in found:
            writer.write_batch(batch)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n")[:-1]]
    assert len(lines) == len(matches)
    for line, m in zip(lines, matches, strict=True):
        assert (line["query"], line["ts"], list(line["ids"].items())) == (m.query, m.ts, list(m.ids.items()))
        assert [(k, _typed(v)) for k, v in line["values"].items()] == [(k, _typed(v)) for k, v in m.values.items()]
    # the API's text, and the table of one row per result (Parquet's)
    text = "".join(batch.json_text() for batch in found)
    assert [json.loads(line)["ids"] for line in text.split("\n")[:-1]] == [m.ids for m in matches]
    types = matcher.value_types()
    path = tmp_path / "out.parquet"
    with open_writer(str(path), "parquet", types) as writer:
        for batch in found:
            writer.write_batch(batch)
    rows = pq.read_table(path).to_pylist()
    assert len(rows) == len(matches)
    for row, m in zip(rows, matches, strict=True):
        assert (row["query"], row["ts"], list(row["ids"])) == (m.query, m.ts, list(m.ids.items()))
        for name, dtype in types.items():
            want = m.values.get(name)
            want = None if want is None else str(want) if dtype == pa.string() else want
            assert _typed(row[name]) == _typed(want), (m.query, name)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["int64", "float64", "string", "bool"]).flatmap(
        lambda kind: st.tuples(
            st.just(kind),
            st.lists(
                st.one_of(
                    st.none(),
                    {
                        "int64": st.integers(-(2**63), 2**63 - 1),
                        "float64": st.one_of(st.floats(), st.integers(-(2**53), 2**53)),
                        "string": st.text(),
                        "bool": st.booleans(),
                    }[kind],
                ),
                max_size=20,
            ),
        )
    )
)
def test_arrays_built_from_values_hold_them(case: tuple[str, list[Any]]) -> None:
    """Columns with and without NULLs, empty and all-NULL ones, integers at the 64-bit
    ends, integers in a double column: pyarrow's own conversion says what each holds."""
    kind, values = case
    dtype = getattr(pa, "bool_" if kind == "bool" else kind)()
    got = array_of(values, dtype)
    want = pa.array([None if v is None else float(v) if kind == "float64" else v for v in values], dtype)
    assert got.null_count == want.null_count
    assert got.equals(want) or [
        None if v is None else "nan" if isinstance(v, float) and math.isnan(v) else v for v in got.to_pylist()
    ] == [None if v is None else "nan" if isinstance(v, float) and math.isnan(v) else v for v in want.to_pylist()]
