"""Arrow arrays read as numpy by their buffers (``mqo.numpy_of``, ``mqo.numpy_with_nulls``),
as the file readers and ``push_batch`` read columns: the values pyarrow's own
``to_pylist`` gives, whatever the chunks, the offset of a slice or the NULLs; and no
pandas imported on the way (pyarrow's own ``to_numpy`` imports it when it is installed).
"""

from __future__ import annotations

import math
import subprocess
import sys
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqo import array_of, numpy_array, numpy_of, numpy_with_nulls

ints = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))
floats = st.one_of(st.none(), st.floats(allow_nan=False))


def chunked(values: list, dtype: pa.DataType, cuts: list[int]) -> pa.ChunkedArray:
    """``values`` as a chunked array cut at ``cuts`` (each chunk a slice of a longer array)."""
    bounds = sorted({0, len(values), *(c % (len(values) + 1) for c in cuts)})
    chunks = [array_of([None, *values[a:b], None], dtype).slice(1, b - a) for a, b in pairwise(bounds)]
    return pa.chunked_array(chunks, dtype)


@given(st.lists(ints, max_size=40), st.lists(st.integers(0, 40), max_size=3))
def test_integers_with_nulls(values: list[int | None], cuts: list[int]) -> None:
    got, null = numpy_with_nulls(chunked(values, pa.int64(), cuts))
    assert got.dtype == np.int64 and null.dtype == np.bool_
    assert null.tolist() == [v is None for v in values]
    assert got.tolist() == [0 if v is None else v for v in values]


@given(st.lists(floats, max_size=40), st.lists(st.integers(0, 40), max_size=3))
def test_floats_with_nulls(values: list[float | None], cuts: list[int]) -> None:
    array = chunked(values, pa.float64(), cuts)
    got, null = numpy_with_nulls(array)
    assert null.tolist() == [v is None for v in values]
    assert [0.0 if n else v for v, n in zip(got.tolist(), null.tolist(), strict=True)] == [
        0.0 if v is None else v for v in values
    ]
    if not any(null):
        assert numpy_of(array).tolist() == got.tolist()


def test_the_values_read_are_a_copy() -> None:
    array = array_of([1, None, 3], pa.int64())
    got, _ = numpy_with_nulls(array)
    got[0] = 99
    assert array.to_pylist() == [1, None, 3]


@given(st.lists(st.booleans(), max_size=70), st.integers(0, 10))
def test_booleans_round_trip(values: list[bool], skip: int) -> None:
    array = numpy_array(np.array(values, bool)).slice(min(skip, len(values)))
    assert numpy_of(array).tolist() == values[min(skip, len(values)) :]


def test_empty_and_nan() -> None:
    assert numpy_with_nulls(pa.chunked_array([], pa.float64()))[0].shape == (0,)
    assert numpy_of(pa.chunked_array([], pa.int64())).shape == (0,)
    got, null = numpy_with_nulls(array_of([math.nan, None], pa.float64()))
    assert math.isnan(got[0]) and null.tolist() == [False, True]


@pytest.mark.parametrize("call", ["numpy_with_nulls(a)", "numpy_of(a.fill_null(s))"])
def test_no_pandas_on_the_way(call: str) -> None:
    script = f"""
import sys
import pyarrow as pa
import pyarrow.csv as pacsv
from mqo import numpy_of, numpy_with_nulls
a = pacsv.read_csv(pa.BufferReader(b"x\\n1\\n\\n3\\n")).column("x")
s = a.drop_null()[0]
{call}
print("pandas" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]


def test_reading_parquet_imports_no_pandas(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A Parquet input (an unsigned column past 2^63 among its INTEGER values, read as a
    bad row) is read without pandas, as a CSV input is."""
    import pyarrow.parquet as pq

    path = tmp_path / "a.parquet"
    table = pa.table({"ts": [1.0, 2.0], "n": pa.array([5, 2**63], pa.uint64()), "x": [0.5, None]})
    pq.write_table(table, path)
    script = f"""
import sys
from predicates import Catalog
from runtime.io.inputs import InputSpec, read_stream
schema = Catalog.from_ddl("REGISTER STREAM A (n INTEGER, x FLOAT);").require("A")
data = read_stream(InputSpec("A", {str(path)!r}), schema, "skip")
print(data.ts.tolist(), data.column_values("n"), len(data.rejected), "pandas" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "[1.0] [5] 1 False"


DDL = "REGISTER STREAM S (n INTEGER, x FLOAT);"
QUERIES = "Query ID: big\nSELECT * FROM S WHERE S.x > 9007199254740991;\nQuery ID: n\nSELECT * FROM S WHERE S.n > 5;"


def _matched(batch: object) -> list[tuple[str, float]]:
    from mqo import Matcher

    m = Matcher(DDL)
    m.register_queries(QUERIES)
    return [(r.query, r.ts) for r in m.push_batch("S", batch).matches()]


def test_an_arrow_integer_in_a_float_column_rounds_as_from_a_list() -> None:
    """An integer past 2**53 given for a FLOAT column is its nearest double, from an
    Arrow column as from a list (and as the file readers take it), not Arrow's error."""
    arrow = pa.table(
        {
            "ts": array_of([1.0, 2.0], pa.float64()),
            "n": array_of([1, 7], pa.int64()).cast(pa.uint64()),
            "x": array_of([2**53 + 1, 3], pa.int64()),
        }
    )
    assert (
        _matched(arrow)
        == _matched({"ts": [1.0, 2.0], "n": [1, 7], "x": [2**53 + 1, 3]})
        == [
            ("big", 1.0),
            ("n", 2.0),
        ]
    )


def test_an_arrow_uint64_past_64_bits_is_an_error_naming_row_and_column() -> None:
    from mqo import TupleError

    n = pa.Array.from_buffers(pa.uint64(), 2, [None, pa.py_buffer(np.array([3, 2**63 + 5], np.uint64))])
    batch = pa.table({"ts": array_of([1.0, 2.0], pa.float64()), "n": n, "x": array_of([1.0, 2.0], pa.float64())})
    with pytest.raises(TupleError, match=f"stream S: row 1, column n: {2**63 + 5} is past 64 bits"):
        _matched(batch)
