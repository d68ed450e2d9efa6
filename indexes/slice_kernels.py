"""Numba kernels of the shared slicing aggregator (mqo/aggregation).

Partials of one slice store are arrays indexed ``[slice, group, column, field]``:

* ``rows[S, G]`` the tuples (COUNT(*));
* ``fpart[S, G, C, 6]`` over the column's non-NULL values as doubles: a Neumaier
  compensated sum (``SUM_HI`` + ``SUM_LO``: the sum of the doubles to about one
  rounding, whatever the order), ``MIN``, ``MAX``, and ``MEAN``/``M2`` (Welford, merged
  with Chan's formula: variances without the cancellation of sum-of-squares);
* ``ipart[S, G, C, 5]``: ``N`` the non-NULL count, and for INTEGER columns the exact
  ``IMIN``, ``IMAX`` and sum: ``ICARRY * 2**64 + ISUM`` (``ISUM`` wraps around in
  int64 and ``ICARRY`` counts the wraps, so 2^62 + 2^62 - 5 is exact, and so is a
  sum past 64 bits).

:func:`update` adds a batch's tuples to their slices (one call per store and batch);
:func:`fold_windows` folds all of a query's closed windows in one call (prefix/suffix
folds per block of slices: MIN and MAX are not subtractable, so no running sums).
A store holds only the slices that hold data (``mqo.aggregation.slices``): the
kernels see positions, never slice numbers, so a gap in time costs nothing.
Arrays and scalars only, so the kernels cache (``cache=True``). ``tests/references/naive_slices.py``
is the plain-Python reference they are tested against.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from indexes.slice_fields import ICARRY, IMAX, IMIN, INT_MAX, INT_MIN, ISUM, M2, MAX, MEAN, MIN, SUM_HI, SUM_LO, N

__all__ = [
    "ICARRY",
    "IMAX",
    "IMIN",
    "INT_MAX",
    "INT_MIN",
    "ISUM",
    "M2",
    "MAX",
    "MEAN",
    "MIN",
    "SUM_HI",
    "SUM_LO",
    "N",
]


@njit(cache=True, inline="always")
def _add(a: int, b: int) -> tuple[int, int]:
    """``a + b`` wrapped around int64, and +1 when it passed the largest int64, -1 the
    smallest, else 0. No step overflows: the compiler may assume signed addition does
    not, so ``a + b < a`` is no test of it."""
    if b > 0 and a > INT_MAX - b:
        return (a + INT_MIN) + (b + INT_MIN), 1
    if b < 0 and a < INT_MIN - b:
        return (a + INT_MAX) + (b + INT_MAX) + 2, -1
    return a + b, 0


@njit(cache=True, inline="always")
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
            # the partial's fields indexed in place: a view (``fpart[s, g, c]``) per tuple
            # and column costs a reference count each, more than the fields' arithmetic
            x = fvals[i, c]
            if x != x:
                continue
            k = ipart[s, g, c, N] + 1
            ipart[s, g, c, N] = k
            sum_hi, sum_lo = _neumaier(fpart[s, g, c, SUM_HI], fpart[s, g, c, SUM_LO], x)
            fpart[s, g, c, SUM_HI] = sum_hi
            fpart[s, g, c, SUM_LO] = sum_lo
            if k == 1 or x < fpart[s, g, c, MIN]:
                fpart[s, g, c, MIN] = x
            if k == 1 or x > fpart[s, g, c, MAX]:
                fpart[s, g, c, MAX] = x
            delta = x - fpart[s, g, c, MEAN]
            fpart[s, g, c, MEAN] += delta / k
            fpart[s, g, c, M2] += delta * (x - fpart[s, g, c, MEAN])
            v = ivals[i, c]
            total, carry = _add(ipart[s, g, c, ISUM], v)
            ipart[s, g, c, ISUM] = total
            ipart[s, g, c, ICARRY] += carry
            if k == 1 or v < ipart[s, g, c, IMIN]:
                ipart[s, g, c, IMIN] = v
            if k == 1 or v > ipart[s, g, c, IMAX]:
                ipart[s, g, c, IMAX] = v


@njit(cache=True, inline="always")
def _merge(
    dr: np.ndarray,
    df: np.ndarray,
    di: np.ndarray,
    a: int,
    ga: int,
    sr: np.ndarray,
    sf: np.ndarray,
    si: np.ndarray,
    b: int,
    gb: int,
) -> None:
    """The partial of group ``gb`` at ``b`` of ``(sr, sf, si)`` folded into that of
    group ``ga`` at ``a`` of ``(dr, df, di)`` (arrays shaped as a slice store's).

    Without branches: every field is computed and then chosen (``x if nb else old``),
    which numba compiles to selects; with ``if`` blocks around the fields the loop runs
    about ten times slower. An empty side (count 0) leaves every field as it was; the
    minimum and maximum of an empty side are not read."""
    dr[a, ga] += sr[b, gb]
    for c in range(sf.shape[2]):
        nb = si[b, gb, c, N]
        na = di[a, ga, c, N]
        some = nb > 0
        first = na == 0
        hi_, lo_ = _neumaier(df[a, ga, c, SUM_HI], df[a, ga, c, SUM_LO], sf[b, gb, c, SUM_HI])
        df[a, ga, c, SUM_HI] = hi_ if some else df[a, ga, c, SUM_HI]
        df[a, ga, c, SUM_LO] = lo_ + sf[b, gb, c, SUM_LO] if some else df[a, ga, c, SUM_LO]
        x = sf[b, gb, c, MIN]
        df[a, ga, c, MIN] = x if some and (first or x < df[a, ga, c, MIN]) else df[a, ga, c, MIN]
        x = sf[b, gb, c, MAX]
        df[a, ga, c, MAX] = x if some and (first or x > df[a, ga, c, MAX]) else df[a, ga, c, MAX]
        v = si[b, gb, c, IMIN]
        di[a, ga, c, IMIN] = v if some and (first or v < di[a, ga, c, IMIN]) else di[a, ga, c, IMIN]
        v = si[b, gb, c, IMAX]
        di[a, ga, c, IMAX] = v if some and (first or v > di[a, ga, c, IMAX]) else di[a, ga, c, IMAX]
        total = na + nb
        t = max(total, 1)  # both empty: nothing is chosen, but no 0/0 either
        delta = sf[b, gb, c, MEAN] - df[a, ga, c, MEAN]
        m2 = df[a, ga, c, M2] + sf[b, gb, c, M2] + delta * delta * na * nb / t
        mean = df[a, ga, c, MEAN] + delta * nb / t
        df[a, ga, c, M2] = m2 if some else df[a, ga, c, M2]
        df[a, ga, c, MEAN] = mean if some else df[a, ga, c, MEAN]
        total_sum, carry = _add(di[a, ga, c, ISUM], si[b, gb, c, ISUM])
        di[a, ga, c, ISUM] = total_sum
        di[a, ga, c, ICARRY] += si[b, gb, c, ICARRY] + carry
        di[a, ga, c, N] = total


@njit(cache=True, inline="always")
def _copy(
    dr: np.ndarray, df: np.ndarray, di: np.ndarray, a: int, sr: np.ndarray, sf: np.ndarray, si: np.ndarray, b: int
) -> None:
    """Every group's partial at ``b`` of ``(sr, sf, si)`` over that at ``a`` of ``(dr, df, di)``."""
    for g in range(sr.shape[1]):
        dr[a, g] = sr[b, g]
        for c in range(sf.shape[2]):
            for k in range(sf.shape[3]):
                df[a, g, c, k] = sf[b, g, c, k]
            for k in range(si.shape[3]):
                di[a, g, c, k] = si[b, g, c, k]


@njit(cache=True)
def fold_windows(
    rows: np.ndarray,
    fpart: np.ndarray,
    ipart: np.ndarray,
    block: np.ndarray,
    los: np.ndarray,
    his: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Many windows of one length folded at once, per group: window ``w`` is the held
    positions ``los[w] .. his[w]`` (empty when ``his[w] < los[w]``); ``block[p]`` numbers
    the block of slice numbers position ``p`` falls in (non-decreasing; blocks are as
    long as the windows, aligned on slice numbers, so a window's fold does not depend on
    when it is emitted, and a window meets at most two blocks); windows ascending.

    Positions are the store's occupied slices only (a store is sparse in time), so the
    blocks are read off ``block``, not off the positions. MIN and MAX cannot be
    subtracted, so windows are not running sums: a window starting inside block ``b``
    (after its first position) is the suffix fold of ``b`` from its start merged with
    the prefix fold of the next block up to its end (the prefix/suffix method); a window
    starting at its block's first position is that block's prefix. One backward running
    fold per block gives every suffix, one forward fold every prefix, each read off
    where a window needs it: every position is folded at most twice,
    O((positions + windows) x groups x columns) for all the windows.
    Returns per window and group ``rows[W, G]``, ``fpart[W, G, C, F]``, ``ipart[W, G, C, I]``."""
    W = len(his)
    P = len(block)
    G = rows.shape[1]
    C = fpart.shape[2]
    F = fpart.shape[3]
    I = ipart.shape[3]
    out_r = np.zeros((W, G), np.int64)
    out_f = np.zeros((W, G, C, F))
    out_i = np.zeros((W, G, C, I), np.int64)
    acc_r = np.zeros((1, G), np.int64)
    acc_f = np.zeros((1, G, C, F))
    acc_i = np.zeros((1, G, C, I), np.int64)
    NONE = np.iinfo(np.int64).min
    # suffixes: windows from the last, each block folded backwards from its end
    current, at = NONE, 0
    for w in range(W - 1, -1, -1):
        lo, hi = los[w], his[w]
        if hi < lo:
            continue
        bl = block[lo]
        if block[hi] == bl and (lo == 0 or block[lo - 1] != bl):
            continue  # within one block, from its first position: a prefix alone
        if bl != current:
            current, at = bl, lo
            while at + 1 < P and block[at + 1] == bl:
                at += 1  # the block's last position
            acc_r[:] = 0
            acc_f[:] = 0.0
            acc_i[:] = 0
        while at >= lo:
            for g in range(G):
                _merge(acc_r, acc_f, acc_i, 0, g, rows, fpart, ipart, at, g)
            at -= 1
        _copy(out_r, out_f, out_i, w, acc_r, acc_f, acc_i, 0)
    # prefixes: windows from the first, each block folded forwards from its start
    current, at = NONE, 0
    for w in range(W):
        lo, hi = los[w], his[w]
        if hi < lo:
            continue
        bl, bh = block[lo], block[hi]
        head = bh == bl and (lo == 0 or block[lo - 1] != bl)
        if bh == bl and not head:
            continue  # no position in the next block: the suffix is all
        if bh != current:
            current, at = bh, hi
            while at > 0 and block[at - 1] == bh:
                at -= 1  # the block's first position
            acc_r[:] = 0
            acc_f[:] = 0.0
            acc_i[:] = 0
        while at <= hi:
            for g in range(G):
                _merge(acc_r, acc_f, acc_i, 0, g, rows, fpart, ipart, at, g)
            at += 1
        if head:
            _copy(out_r, out_f, out_i, w, acc_r, acc_f, acc_i, 0)
        else:
            for g in range(G):
                _merge(out_r, out_f, out_i, w, g, acc_r, acc_f, acc_i, 0, g)
    return out_r, out_f, out_i


@njit(cache=True)
def first_rows(codes: np.ndarray, count: int) -> np.ndarray:
    """The first row holding each code ``0 .. count - 1`` (-1: none does)."""
    first = np.full(count, -1, np.int64)
    for i in range(len(codes)):
        c = codes[i]
        if first[c] < 0:
            first[c] = i
    return first
