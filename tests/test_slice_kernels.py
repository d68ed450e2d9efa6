"""The aggregator's numba kernels against their plain-Python reference."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from indexes import slice_kernels as K
from tests.naive_slices import windows

values = st.one_of(st.just(float("nan")), st.integers(-(2**40), 2**40).map(float), st.floats(-1e6, 1e6))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2), values, values), min_size=1, max_size=60),
    st.integers(0, 3),
    st.integers(1, 6),
)
def test_update_and_combine_equal_the_definitions(tuples, lo, width) -> None:
    hi = lo + width
    slot = np.array([t[0] for t in tuples], np.int64)
    group = np.array([t[1] for t in tuples], np.int64)
    fvals = np.array([[t[2], t[3]] for t in tuples])
    ivals = np.nan_to_num(fvals).astype(np.int64)
    rows = np.zeros((6, 3), np.int64)
    fpart = np.zeros((6, 3, 2, 6))
    ipart = np.zeros((6, 3, 2, 4), np.int64)
    K.update(slot, group, fvals, ivals, rows, fpart, ipart)
    out_rows, out_f, out_i = K.combine(rows, fpart, ipart, lo, min(hi, 6))
    expected = windows(slot.tolist(), group.tolist(), fvals.tolist(), ivals.tolist(), lo, hi)
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
