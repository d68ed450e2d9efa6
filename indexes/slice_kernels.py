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
def _merge(rows_d, f_d, i_d, rows_s, f_s, i_s) -> None:
    """Partial ``(rows_s, f_s, i_s)`` of one group folded into ``(rows_d, f_d, i_d)``
    (``rows_*``: 0-d views are not cheap in numba, so rows are passed as length-1 arrays)."""
    r = rows_s[0]
    if r == 0:
        return
    rows_d[0] += r
    C = f_s.shape[0]
    for c in range(C):
        p = i_s[c]
        nb = p[N]
        if nb == 0:
            continue
        f = f_s[c]
        of = f_d[c]
        oi = i_d[c]
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


@njit(cache=True)
def _scan(rows, fpart, ipart, npos, start, width, acc_r, acc_f, acc_i, backwards) -> None:
    """Running folds over the block of positions ``start .. start+width-1``: entry ``i``
    of ``acc_*`` is the fold of positions ``start .. start+i`` (a prefix) or, with
    ``backwards``, of ``start+i .. start+width-1`` (a suffix). Positions outside
    ``0 .. npos-1`` hold nothing."""
    acc_r[:width] = 0
    acc_f[:width] = 0.0
    acc_i[:width] = 0
    for step in range(width):
        i = width - 1 - step if backwards else step
        j = i + 1 if backwards else i - 1
        if step > 0:
            acc_r[i] = acc_r[j]
            acc_f[i] = acc_f[j]
            acc_i[i] = acc_i[j]
        p = start + i
        if 0 <= p < npos:
            for g in range(rows.shape[1]):
                _merge(acc_r[i, g : g + 1], acc_f[i, g], acc_i[i, g], rows[p, g : g + 1], fpart[p, g], ipart[p, g])


@njit(cache=True)
def fold_windows(
    rows: np.ndarray,
    fpart: np.ndarray,
    ipart: np.ndarray,
    npos: int,
    origin: int,
    length: int,
    his: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Many windows of one length folded at once, per group: window ``w`` is the
    positions ``his[w] - length + 1 .. his[w]`` (``length`` 0: ``0 .. his[w]``, a
    landmark), clipped to the ``npos`` positions held; ``his`` ascending.

    MIN and MAX cannot be subtracted, so windows are not running sums: positions are
    cut into blocks of ``length`` (aligned on slice numbers, ``origin`` being the slice
    number of position 0, so a window's fold does not depend on when it is emitted);
    a window starting inside block ``b`` ends inside block ``b + 1`` and is the suffix
    fold of ``b`` at its start merged with the prefix fold of ``b + 1`` at its end
    (the prefix/suffix method). Each block's prefix and suffix are computed once,
    when a window first needs them: O((blocks touched x length + windows) x groups x
    columns), against O(windows x length x ...) for folding every window's slices.
    Returns per window and group ``rows[W, G]``, ``fpart[W, G, C, 6]``, ``ipart[W, G, C, 4]``."""
    W = len(his)
    G = rows.shape[1]
    C = fpart.shape[2]
    out_r = np.zeros((W, G), np.int64)
    out_f = np.zeros((W, G, C, 6))
    out_i = np.zeros((W, G, C, 4), np.int64)
    width = length if length > 0 else max(npos, 1)
    pre_r = np.zeros((width, G), np.int64)
    pre_f = np.zeros((width, G, C, 6))
    pre_i = np.zeros((width, G, C, 4), np.int64)
    suf_r = np.zeros((width, G), np.int64)
    suf_f = np.zeros((width, G, C, 6))
    suf_i = np.zeros((width, G, C, 4), np.int64)
    pre_block = np.iinfo(np.int64).min
    suf_block = np.iinfo(np.int64).min
    for w in range(W):
        hi = min(his[w], npos - 1)
        lo = max(his[w] - length + 1, 0) if length > 0 else 0
        if hi < lo:
            continue
        bl = (origin + lo) // width - origin // width if length > 0 else 0
        bh = (origin + hi) // width - origin // width if length > 0 else 0
        # block b covers positions start(b) .. start(b) + width - 1
        start_h = bh * width - origin % width if length > 0 else 0
        if pre_block != bh:
            _scan(rows, fpart, ipart, npos, start_h, width, pre_r, pre_f, pre_i, False)
            pre_block = bh
        if bl == bh and (lo <= start_h or lo == 0):
            # the window is the block's head (the rest of the block before it is empty)
            out_r[w] = pre_r[hi - start_h]
            out_f[w] = pre_f[hi - start_h]
            out_i[w] = pre_i[hi - start_h]
            continue
        start_l = bl * width - origin % width
        if suf_block != bl:
            _scan(rows, fpart, ipart, npos, start_l, width, suf_r, suf_f, suf_i, True)
            suf_block = bl
        out_r[w] = suf_r[lo - start_l]
        out_f[w] = suf_f[lo - start_l]
        out_i[w] = suf_i[lo - start_l]
        if bh != bl:
            for g in range(G):
                _merge(
                    out_r[w, g : g + 1],
                    out_f[w, g],
                    out_i[w, g],
                    pre_r[hi - start_h, g : g + 1],
                    pre_f[hi - start_h, g],
                    pre_i[hi - start_h, g],
                )
    return out_r, out_f, out_i


@njit(cache=True)
def windows_with_data(data: np.ndarray, step: int, length: int, k_from: int, k_to: int) -> np.ndarray:
    """The windows ``k`` in ``k_from .. k_to`` holding one of the slices ``data``
    (ascending slice numbers), window ``k`` being the slices ``k*step - length + 1 ..
    k*step`` (``length`` 0: every slice up to ``k*step``); ascending. Slice ``j`` is in
    the windows ``ceil(j/step) .. floor((j+length-1)/step)``: O(data + windows)."""
    out = np.empty(0, np.int64)
    count = 0
    last = k_from - 1
    for j in data:
        first = max(-((-j) // step), last + 1)
        final = (j + length - 1) // step if length > 0 else k_to
        final = min(final, k_to)
        if final < first:
            continue
        need = count + final - first + 1
        if need > len(out):
            grown = np.empty(max(need, 2 * len(out)), np.int64)
            grown[:count] = out[:count]
            out = grown
        for k in range(first, final + 1):
            out[count] = k
            count += 1
        last = final
    return out[:count]
