"""A prepared batch's stored rows made a column at a time (``PreparedBatch.rows``, what
a replay stores and reports) are the rows made one at a time (``PreparedBatch.row``):
NULLs, integers (past 2**53 too), floats, strings and booleans alike."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import mqo
from mqo.prepare import rows_in_order

DDL = "REGISTER STREAM S (i INTEGER, f FLOAT, s STRING, b BOOLEAN, t BYTE);"
QUERIES = ["SELECT * FROM S WHERE S.i > 0 OR S.f < 1;", "SELECT * FROM S, S s2 MAXWINDOW 1 WHERE S.i = s2.i;"]

integers = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.integers(-5, 5))
floats = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([0.1, -2.0, 3.0]))


@st.composite
def batches(draw: Any) -> dict[str, list[Any]]:
    n = draw(st.integers(1, 12))
    return {
        "ts": sorted(draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))),
        "i": draw(st.lists(integers, min_size=n, max_size=n)),
        "f": draw(st.lists(floats, min_size=n, max_size=n)),
        "s": draw(st.lists(st.one_of(st.none(), st.text(max_size=3)), min_size=n, max_size=n)),
        "b": draw(st.lists(st.one_of(st.none(), st.booleans()), min_size=n, max_size=n)),
        "t": draw(st.lists(st.one_of(st.none(), st.integers(-128, 127)), min_size=n, max_size=n)),
    }


@settings(max_examples=60, deadline=None)
@given(batch=batches(), data=st.data())
def test_rows_made_a_column_at_a_time_are_the_rows_made_one_by_one(batch: dict[str, list[Any]], data: Any) -> None:
    m = mqo.Matcher(DDL, missing="null")
    m.register_queries(QUERIES)
    if data.draw(st.booleans(), label="a column left out"):
        del batch[data.draw(st.sampled_from(["i", "f", "s", "b", "t"]), label="which")]
    prepared = m.prepare("S", batch)
    n = len(prepared)
    picked = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=2 * n), label="rows"), np.int64)
    want = [prepared.row(int(i)) for i in picked]
    got = prepared.rows(picked)
    assert got == want
    # the same types (an int is not a float that equals it)
    assert [[type(v) for v in row] for row in got] == [[type(v) for v in row] for row in want]
    # two batches' rows in a given order
    other = m.prepare("S", batch)
    which = np.array(data.draw(st.lists(st.integers(0, 1), min_size=len(picked), max_size=len(picked))), np.int64)
    both = [prepared, other]  # (the second batch's rows have ids of their own)
    assert rows_in_order(both, which, picked) == [both[w].row(int(i)) for w, i in zip(which, picked, strict=True)]
