"""The aggregator's numba kernels against their plain-Python reference."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from indexes import slice_kernels as K
from tests.references.naive_slices import windows, windows_holding

values = st.one_of(st.just(float("nan")), st.integers(-(2**40), 2**40).map(float), st.floats(-1e6, 1e6))


def _filled(tuples: list) -> tuple[np.ndarray, ...]:
    """Slice partials of ``tuples`` (slot, group, x, y) over 8 slots and 3 groups."""
    slot = np.array([t[0] for t in tuples], np.int64)
    group = np.array([t[1] for t in tuples], np.int64)
    fvals = np.array([[t[2], t[3]] for t in tuples])
    ivals = np.nan_to_num(fvals).astype(np.int64)
    rows = np.zeros((8, 3), np.int64)
    fpart = np.zeros((8, 3, 2, 6))
    ipart = np.zeros((8, 3, 2, 4), np.int64)
    K.update(slot, group, fvals, ivals, rows, fpart, ipart)
    return slot, group, fvals, ivals, rows, fpart, ipart


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


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2), values, values), min_size=1, max_size=60),
    st.integers(0, 8),
    st.integers(0, 5),
    st.integers(-7, 7),
    st.lists(st.integers(-3, 12), min_size=1, max_size=12),
)
def test_fold_windows_equals_the_definitions(tuples, npos, length, origin, ends) -> None:
    """Every window, whatever its length, its place against the blocks (``origin``)
    and the positions held (``npos``: later ones are empty), against its tuples."""
    tuples = [t for t in tuples if t[0] < npos]
    slot, group, fvals, ivals, rows, fpart, ipart = _filled(tuples) if tuples else _filled([(0, 0, 0.0, 0.0)])
    if not tuples:
        rows[:], fpart[:], ipart[:] = 0, 0.0, 0
        slot, group, fvals, ivals = slot[:0], group[:0], fvals[:0], ivals[:0]
    his = np.array(sorted(ends), np.int64)
    out_rows, out_f, out_i = K.fold_windows(rows, fpart, ipart, npos, origin, length, his)
    assert out_rows.shape == (len(his), 3)
    for w, hi in enumerate(his.tolist()):
        lo = 0 if length == 0 else hi - length + 1
        expected = windows(slot.tolist(), group.tolist(), fvals.tolist(), ivals.tolist(), lo, min(hi, npos - 1) + 1)
        _check(out_rows[w], out_f[w], out_i[w], expected)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(-20, 40), max_size=10, unique=True),
    st.integers(1, 5),
    st.integers(0, 12),
    st.integers(-15, 15),
    st.integers(0, 25),
)
def test_windows_with_data_equals_the_definitions(data, step, length, k_from, count) -> None:
    data = sorted(data)
    k_to = k_from + count - 1
    got = K.windows_with_data(np.array(data, np.int64), step, length, k_from, k_to)
    assert got.tolist() == windows_holding(data, step, length, k_from, k_to)
