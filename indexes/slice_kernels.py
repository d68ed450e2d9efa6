"""Numba kernels of the shared slicing aggregator (mqo/aggregation).

Partials of one slice store are arrays indexed ``[slice, group, column, field]``:

* ``rows[S, G]`` the tuples (COUNT(*));
* ``fpart[S, G, C, 6]`` over the column's non-NULL values as doubles: a Neumaier
  compensated sum (``SUM_HI`` + ``SUM_LO``: the sum of the doubles to about one
  rounding, whatever the order), ``MIN``, ``MAX``, and ``MEAN``/``M2`` (Welford, merged
  with Chan's formula: variances without the cancellation of sum-of-squares);
* ``ipart[S, G, C, 4]``: ``N`` the non-NULL count, and for INTEGER columns the exact
  int64 ``ISUM``, ``IMIN``, ``IMAX``.

:func:`update` adds tuples to their slices; :func:`combine` folds a range of slices
into one partial per group (MIN and MAX are not subtractable, so a window is a fold
over its slices: O(slices x groups) per window, no per-tuple work).
Arrays and scalars only, so the kernels cache (``cache=True``). ``tests/naive_slices.py``
is the plain-Python reference they are tested against.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from indexes.slice_fields import IMAX, IMIN, INT_MAX, INT_MIN, ISUM, M2, MAX, MEAN, MIN, SUM_HI, SUM_LO, N

__all__ = ["IMAX", "IMIN", "INT_MAX", "INT_MIN", "ISUM", "M2", "MAX", "MEAN", "MIN", "SUM_HI", "SUM_LO", "N"]


@njit(cache=True)
def _neumaier(hi: float, lo: float, x: float) -> tuple[float, float]:
    t = hi + x
    if abs(hi) >= abs(x):
        lo += (hi - t) + x
    else:
        lo += (x - t) + hi
    return t, lo


@njit(cache=True)
def update(
    slot: np.ndarray,  # int64[n]: slice position of each tuple (-1: in no kept slice)
    group: np.ndarray,  # int64[n]
    fvals: np.ndarray,  # float64[n, C], NaN = NULL
    ivals: np.ndarray,  # int64[n, C] (INTEGER columns; else unused)
    rows: np.ndarray,
    fpart: np.ndarray,
    ipart: np.ndarray,
) -> None:
    n, C = fvals.shape
    for i in range(n):
        s = slot[i]
        if s < 0:
            continue
        g = group[i]
        rows[s, g] += 1
        for c in range(C):
            x = fvals[i, c]
            if x != x:
                continue
            f = fpart[s, g, c]
            p = ipart[s, g, c]
            k = p[N] + 1
            p[N] = k
            f[SUM_HI], f[SUM_LO] = _neumaier(f[SUM_HI], f[SUM_LO], x)
            if k == 1 or x < f[MIN]:
                f[MIN] = x
            if k == 1 or x > f[MAX]:
                f[MAX] = x
            delta = x - f[MEAN]
            f[MEAN] += delta / k
            f[M2] += delta * (x - f[MEAN])
            v = ivals[i, c]
            p[ISUM] += v
            if k == 1 or v < p[IMIN]:
                p[IMIN] = v
            if k == 1 or v > p[IMAX]:
                p[IMAX] = v


@njit(cache=True)
def combine(
    rows: np.ndarray, fpart: np.ndarray, ipart: np.ndarray, lo: int, hi: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Slices ``lo..hi-1`` folded into one partial per group."""
    G = rows.shape[1]
    C = fpart.shape[2]
    out_rows = np.zeros(G, np.int64)
    out_f = np.zeros((G, C, 6))
    out_i = np.zeros((G, C, 4), np.int64)
    for s in range(lo, hi):
        for g in range(G):
            r = rows[s, g]
            if r == 0:
                continue
            out_rows[g] += r
            for c in range(C):
                p = ipart[s, g, c]
                nb = p[N]
                if nb == 0:
                    continue
                f = fpart[s, g, c]
                of = out_f[g, c]
                oi = out_i[g, c]
                na = oi[N]
                hi_, lo_ = _neumaier(of[SUM_HI], of[SUM_LO], f[SUM_HI])
                of[SUM_HI], of[SUM_LO] = hi_, lo_ + f[SUM_LO]
                if na == 0 or f[MIN] < of[MIN]:
                    of[MIN] = f[MIN]
                if na == 0 or f[MAX] > of[MAX]:
                    of[MAX] = f[MAX]
                if na == 0 or p[IMIN] < oi[IMIN]:
                    oi[IMIN] = p[IMIN]
                if na == 0 or p[IMAX] > oi[IMAX]:
                    oi[IMAX] = p[IMAX]
                total = na + nb
                delta = f[MEAN] - of[MEAN]
                of[M2] += f[M2] + delta * delta * na * nb / total
                of[MEAN] += delta * nb / total
                oi[ISUM] += p[ISUM]
                oi[N] = total
    return out_rows, out_f, out_i
