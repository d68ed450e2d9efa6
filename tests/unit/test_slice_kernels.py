"""The aggregator's numba kernels against their plain-Python reference."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from indexes import slice_kernels as K
from mqo.aggregation.slices import SliceStore, ints, windows_with_data
from tests.references.naive_slices import windows, windows_holding

values = st.one_of(st.just(float("nan")), st.integers(-(2**40), 2**40).map(float), st.floats(-1e6, 1e6))


def _check(out_rows, out_f, out_i, expected) -> None:
    """One window's folded partials equal the definitions over its tuples."""
    assert {g for g in range(3) if out_rows[g]} == set(expected)
    for g, entry in expected.items():
        assert out_rows[g] == entry["rows"]
        for c, stat in enumerate(entry["stats"]):
            f, i = out_f[g, c], out_i[g, c]
            assert i[K.N] == stat["n"]
            if not stat["n"]:
                continue
            assert math.isclose(f[K.SUM_HI] + f[K.SUM_LO], stat["sum"], rel_tol=1e-12, abs_tol=1e-6)
            assert (f[K.MIN], f[K.MAX]) == (stat["min"], stat["max"])
            assert (i[K.ISUM], i[K.IMIN], i[K.IMAX]) == (stat["isum"], stat["imin"], stat["imax"])
            if stat["var"] is not None:
                assert math.isclose(f[K.M2] / (stat["n"] - 1), float(stat["var"]), rel_tol=1e-6, abs_tol=1e-3)


def _store(tuples: list) -> SliceStore:
    """A store holding ``tuples`` (slice number, group, x, y) in three groups."""
    store = SliceStore(["x", "y"], [False, False], Fraction(1))
    store.group_index([(0,), (1,), (2,)])  # group g is code g
    if tuples:
        fvals = np.array([[t[2], t[3]] for t in tuples])
        store.add(
            ints([t[0] for t in tuples]),
            np.array([t[1] for t in tuples], np.int64),
            [(0,), (1,), (2,)],
            fvals,
            np.nan_to_num(fvals).astype(np.int64),
            None,
        )
    return store


# slice numbers: clustered, spread over 1e12, and past int64 (exact Python ints)
slice_numbers = st.one_of(
    st.integers(-7, 12), st.integers(-(10**12), 10**12), st.integers(2**70, 2**70 + 12).map(lambda j: j - 2**70 + 2**66)
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(slice_numbers, st.integers(0, 2), values, values), min_size=0, max_size=60),
    st.one_of(st.integers(0, 5), st.integers(1, 10**13)),
    st.lists(slice_numbers, min_size=1, max_size=12),
)
def test_fold_windows_equals_the_definitions(tuples, length, ends) -> None:
    """Every window of a sparse store, whatever its length, its place against the
    blocks and the gaps between held slices, against its tuples."""
    store = _store(tuples)
    assert store.slices_kept == len({t[0] for t in tuples})
    his = sorted(ends)
    out_rows, out_f, out_i = (a[:, :3] for a in store.fold(ints(his), length))  # groups past 3 hold nothing
    assert out_rows.shape == (len(his), 3)
    slot = [t[0] for t in tuples]
    group = [t[1] for t in tuples]
    fvals = [[t[2], t[3]] for t in tuples]
    ivals = np.nan_to_num(np.array(fvals).reshape(-1, 2)).astype(np.int64).tolist()
    for w, hi in enumerate(his):
        lo = -math.inf if length == 0 else hi - length + 1
        expected = windows(slot, group, fvals, ivals, lo, hi + 1)
        _check(out_rows[w], out_f[w], out_i[w], expected)


def test_a_gap_of_a_billion_slices_holds_two() -> None:
    store = _store([(0, 0, 1.0, 2.0), (10**9, 1, 3.0, 4.0), (2**80, 2, 5.0, 6.0)])
    assert store.slices_kept == 3 and store.rows.shape[0] <= 16
    store.drop_before(1)
    assert store.data_slices().tolist() == [10**9, 2**80]
    store.drop_before(2**79)
    assert store.data_slices().tolist() == [2**80]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.integers(-20, 40), st.integers(2**64, 2**64 + 40)), max_size=10, unique=True),
    st.integers(1, 5),
    st.integers(0, 12),
    st.one_of(st.integers(-15, 15), st.integers(2**64 - 10, 2**64 + 10)),
    st.integers(0, 25),
)
def test_windows_with_data_equals_the_definitions(data, step, length, k_from, count) -> None:
    data = sorted(data)
    k_to = k_from + count - 1
    got = windows_with_data(ints(data), step, length, k_from, k_to)
    assert got.tolist() == windows_holding(data, step, length, k_from, k_to)
