"""The one result encoder, differentially: for random result sets, JSON lines, CSV and
Parquet decode to the values of the engine's own results (``MatchBatch.matches()``,
which builds each value in Python and shares no code with :mod:`mqo.result_encoding`),
under the documented rules: a non-finite number and an integer past 64 bits are NULL
and counted, a name two queries give different types to is text in CSV and Parquet,
CSV writes NULL and the empty text alike. Hypothesis draws ties, NULLs, exact
decimals, INTEGERs past 2**53, overflows to infinity, empty batches and unicode text.
"""

from __future__ import annotations

import csv
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
from mqo import float_texts
from runtime.io.writers import open_writer

DDL = "REGISTER STREAM A (x INTEGER, y FLOAT, s STRING, b BOOLEAN); REGISTER STREAM B (x INTEGER, y FLOAT, t STRING);"
QUERIES = """
Query ID: all
SELECT * FROM A;
Query ID: ar
SELECT A.x + A.x AS s2, A.x * 2 AS d, A.y * 1e300 AS big, A.y / 3 AS third, -A.x AS n FROM A WHERE A.y > 0;
Query ID: mix1
SELECT A.x AS v, A.s AS w, A.x AS big FROM A WHERE A.b = true;
Query ID: mix2
SELECT A.y AS v, A.b AS w, 'l,"q"' AS l FROM A WHERE A.x < 5;
Query ID: "j ü"
SELECT A.s, B.t, B.y - A.y AS dy FROM A, B WINDOW A.ts <= B.ts MAXWINDOW 3 WHERE A.x = B.x;
"""
INT64 = 2**63

texts = st.one_of(st.none(), st.sampled_from(["", "é ü", "a,b", 'q"t', "l\nm", "inf", "NaN", "😀"]), st.text())
integers = st.one_of(st.none(), st.integers(-3, 6), st.integers(-(2**63), 2**63 - 1), st.just(2**53 + 1))
floats = st.one_of(
    st.none(),
    st.sampled_from([0.0, -0.0, 0.1, 2.5, 1e-7, 1e16, 1e15, 9.999e-5, 123456789012.0, 1.7976931348623157e308]),
    st.floats(allow_nan=False, allow_infinity=False),
)
stamps = st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.25, 3.0]), max_size=12).map(sorted)  # ties


@st.composite
def batches(draw: Any) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    ts_a = draw(stamps)
    n = len(ts_a)
    a = {
        "ts": ts_a,
        "x": draw(st.lists(integers, min_size=n, max_size=n)),
        "y": draw(st.lists(floats, min_size=n, max_size=n)),
        "s": draw(st.lists(texts, min_size=n, max_size=n)),
        "b": draw(st.lists(st.one_of(st.none(), st.booleans()), min_size=n, max_size=n)),
    }
    ts_b = [3.0 + t for t in draw(stamps)]
    m = len(ts_b)
    b = {
        "ts": ts_b,
        "x": draw(st.lists(integers, min_size=m, max_size=m)),
        "y": draw(st.lists(floats, min_size=m, max_size=m)),
        "t": draw(st.lists(texts, min_size=m, max_size=m)),
    }
    return a, b


def _plain(value: Any) -> tuple[Any, int]:
    """A value as the files hold it (the rule under test), and whether it was made NULL."""
    if isinstance(value, float) and not math.isfinite(value):
        return None, 1
    if isinstance(value, int) and not isinstance(value, bool) and not -INT64 <= value < INT64:
        return None, 1
    return value, 0


def _typed(value: Any) -> tuple[type, Any]:
    """A value with its type, so 2 and 2.0 (and True and 1) differ."""
    return (type(value), value)


def _text(value: Any) -> str:
    return "" if value is None else repr(value) if isinstance(value, float) else str(value)


def check_files(folder: Path, found: list[mqo.Match], types: dict[str, pa.DataType], write: Any) -> None:
    expected, nulled = [], 0
    for m in found:
        values = {}
        for name, v in m.values.items():
            values[name], n = _plain(v)
            nulled += n
        expected.append((m.query, m.ts, dict(m.ids), values))
    for fmt in ("jsonl", "csv", "parquet"):
        path = folder / f"out.{fmt}"
        with open_writer(str(path), fmt, types) as writer:
            write(writer)
        assert writer.nonfinite == nulled, fmt
        if fmt == "jsonl":

            def refuse(text: str) -> None:
                raise AssertionError(f"not strict JSON: {text}")

            lines = path.read_text(encoding="utf-8").split("\n")[:-1]  # not splitlines: U+0085 is a line break to it
            got = [json.loads(line, parse_constant=refuse) for line in lines]
            assert [list(g) for g in got] == [["query", "ts", "ids", "values"]] * len(got)
            assert [(g["query"], g["ts"], g["ids"]) for g in got] == [e[:3] for e in expected]
            for g, e in zip(got, expected, strict=True):
                assert list(g["values"]) == list(e[3])  # the query's own values, in SELECT order
                assert [_typed(v) for v in g["values"].values()] == [_typed(v) for v in e[3].values()]
        elif fmt == "csv":
            with open(path, encoding="utf-8", newline="") as f:
                rows = list(csv.reader(f))
            assert rows[0] == ["query", "ts", "ids", *types]
            assert len(rows) == len(expected) + 1
            for row, (query, ts, ids, values) in zip(rows[1:], expected, strict=True):
                assert row[:2] == [query, repr(ts)] and json.loads(row[2]) == ids
                assert row[3:] == [_text(values.get(name)) for name in types]
        else:
            table = pq.read_table(path)
            assert table.schema.names == ["query", "ts", "ids", *types]
            for name, dtype in types.items():
                assert table.schema.field(name).type == dtype
            for row, (query, ts, ids, values) in zip(table.to_pylist(), expected, strict=True):
                assert (row["query"], row["ts"], dict(row["ids"])) == (query, ts, ids)
                for name, dtype in types.items():
                    v = values.get(name)
                    want = None if v is None else str(v) if dtype == pa.string() else v
                    assert _typed(row[name]) == _typed(want), name
            assert table.num_rows == len(expected)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches())
def test_every_format_holds_the_engines_values(tmp_path: Path, data: Any) -> None:
    a, b = data
    matcher = mqo.Matcher(DDL)
    matcher.register_queries(QUERIES)
    types = matcher.value_types()
    # a double overflowing to infinity in a text column (big) is NULL too
    assert types["s2"] == pa.int64() and types["v"] == types["big"] == types["l"] == pa.string()
    found = [matcher.push_batch("A", a), matcher.push_batch("B", b)]
    matches = [m for batch in found for m in batch.matches()]
    # the batch path (result columns) and the Match path write the same files
    check_files(tmp_path, matches, types, lambda w: [w.write_batch(batch) for batch in found])
    check_files(tmp_path, matches, types, lambda w: w.write(matches))
    # the API's text: the same lines, non-finite values as Infinity/NaN, in matches() order
    text = "".join(batch.json_text() for batch in found)
    assert [json.loads(line)["query"] for line in text.split("\n")[:-1]] == [m.query for m in matches]
    assert "".join(line for batch in found for line in batch.json_lines()) == text


@settings(max_examples=2000, deadline=None)
@given(value=st.floats(allow_nan=True, allow_infinity=True) | st.floats(width=32) | st.integers(-(10**20), 10**20))
def test_a_double_prints_as_repr(value: float) -> None:
    x = float(value)
    assert float_texts(pa.array([x, None], pa.float64())).to_pylist() == [repr(x), None]


def test_float_texts_on_the_layout_boundaries() -> None:
    values = [1e-5, 1e-4, 9.999e-5, 1e15, 1e16, 9999999999999998.0, 123456789012.0, 0.1 + 0.2, -0.0, 5e-324]
    assert float_texts(pa.array(values)).to_pylist() == [repr(v) for v in values]


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(
        st.none()
        | st.sampled_from([0.0, -0.0, 1.0, 2.5, 1e16, 1e-5, 1e300, math.inf, -math.inf, math.nan])
        | st.floats(),
        min_size=0,
        max_size=400,
    )
)
def test_columns_of_doubles_print_as_repr(values: list[float | None]) -> None:
    """Whole columns, long enough and repetitive enough that each distinct double is
    formatted once and taken to its rows (-0.0 apart from 0.0, NULLs kept)."""
    expected = [None if v is None else repr(v) for v in values]
    assert float_texts(pa.array(values, pa.float64())).to_pylist() == expected
    assert float_texts(pa.array(values * 5, pa.float64())).to_pylist() == expected * 5


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.text(max_size=5), st.none() | st.text(max_size=5), st.booleans(), st.text(max_size=3)),
        max_size=60,
    )
)
def test_lines_are_their_pieces_joined(rows: list[tuple[str, str | None, bool, str]]) -> None:
    """Lines built from pieces of every row, pieces of some rows and constants (unicode,
    empty texts), against the texts joined in Python; a NULL piece makes the joined text NULL."""
    from mqo.text_lines import TextLines, join

    n = len(rows)
    a = pa.array([r[0] for r in rows], pa.string())
    b = pa.array([r[1] for r in rows], pa.string())
    some = [i for i, r in enumerate(rows) if r[2]]
    lines = TextLines(n)
    lines.add("{")
    lines.add(a)
    lines.add("|", np.asarray(some, np.int64))
    lines.add(pa.array([rows[i][3] for i in some], pa.string()), np.asarray(some, np.int64))
    lines.add("}\n")
    assert lines.build().to_pylist() == ["{" + r[0] + ("|" + r[3] if r[2] else "") + "}\n" for r in rows]
    if n:
        assert join(a, "ü", b).to_pylist() == [None if r[1] is None else r[0] + "ü" + r[1] for r in rows]
