"""Numba kernel of count windows (mqo/aggregation/counts.py): many windows of one
group's slices folded in one call, each by :func:`indexes.slice_kernels.combine`."""

from __future__ import annotations

import numpy as np
from numba import njit

from indexes.slice_kernels import combine


@njit(cache=True)
def combine_many(
    rows: np.ndarray, fpart: np.ndarray, ipart: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Window w is slice positions ``lo[w]..hi[w]-1`` of group 0, folded: O(sum of
    window lengths x columns), no Python per window."""
    W = len(lo)
    C = fpart.shape[2]
    out_rows = np.zeros(W, np.int64)
    out_f = np.zeros((W, C, 6))
    out_i = np.zeros((W, C, 4), np.int64)
    for w in range(W):
        r, f, i = combine(rows[:, :1], fpart[:, :1], ipart[:, :1], lo[w], hi[w])
        out_rows[w] = r[0]
        out_f[w] = f[0]
        out_i[w] = i[0]
    return out_rows, out_f, out_i
