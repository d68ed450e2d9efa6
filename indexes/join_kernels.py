"""The join and window step of two streams, for a whole batch of rows, in one kernel.

The columnar join step of a replay (docs/columnar-join.md, :mod:`mqo.pair_step`): every row of both streams is
a row of flat arrays in arrival order (``ts``, the join columns' values as float64,
the row's attribute candidates as ``uint64`` words), only the rows with some candidate
that are not late, and :func:`join_rows` visits the rows in that order. Row ``j``
meets the rows of the other stream that come before it and lie within ``reach`` of
its ``ts`` (found by binary search in the other stream's rows sorted by ``ts``; when
every slot requires the two rows' values of one column pair equal, sorted by that key
and then ``ts``, and only the rows of row ``j``'s key are met); for
each such pair it intersects the two rows' candidate words, decides every join and window list between the streams as
:meth:`indexes.covering.CoveringList.satisfied_pair` does, takes the killed slots off
with the lists' prefix and suffix checkpoint rows (:func:`indexes.kernels.build_checkpoints`)
and the users of fewer than a stride of positions, after keeping the slots whose
MAXWINDOW and registration time allow the pair's span, and writes each pair with
slots left as one result block: (row, partner) and its nonzero words.

Exactness is that of :mod:`indexes.exact`: a list's boundaries are the doubles'
answer when both constants next to the difference lie farther from it than the
rounding band (``_boundaries``' own test, computed alike), a span or a registration
time is decided by its sign when it lies outside the band; a pair any of whose
decisions falls inside the band, or with a row whose integers are past 2**53, is not
decided here but written to the fallback pairs, which the caller decides exactly
(:mod:`mqo.columnar_join`). Nothing of such a pair is written to the triples. Rows
whose key doubles differ are never met: values equal exactly have equal doubles (each
the nearest double of its value), so no pair an exact list keeps is left out.
"""

from __future__ import annotations

import numpy as np

from indexes.numba_config import kernel

RELATIVE_BAND = 2.0**-46  # indexes.exact's bands (the kernel reads them as literals)
ABSOLUTE_BAND = 1e-300
OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE = 0, 1, 2, 3, 4, 5
OP_CODES = {"<": OP_LT, "<=": OP_LE, ">": OP_GT, ">=": OP_GE, "=": OP_EQ, "!=": OP_NE}
UNSURE = -2  # a list, span or horizon the doubles cannot decide


@kernel
def _clear_range(
    cr: np.ndarray, offsets: np.ndarray, users: np.ndarray, obase: int, lo: int, hi: int, wlo: int, whi: int
) -> None:
    """Clear the users of positions [lo, hi) of one list (CSR from ``obase``) in ``cr``."""
    one = np.uint64(1)
    for k in range(offsets[obase + lo], offsets[obase + hi]):
        u = users[k]
        w = u >> 6
        if wlo <= w < whi:
            cr[w] &= ~(one << np.uint64(u & 63))


@kernel
def _sign(x: float, y: float, kf: float, cf: float, ky: float, unit: bool, same_kind: bool, c_exact: bool) -> int:
    """The exact sign of ``x - (k*y + c)`` where doubles can tell it, as
    :func:`indexes.exact.linear_sign` decides it, else UNSURE: outside the band the
    doubles' sign; inside it, ``x - y`` compared as they are (k = 1, c = 0, both
    columns of one kind, linear_sign's own rule), or a difference of small integral
    doubles with an integral factor and constant (computed without rounding)."""
    d = x - ky - cf
    if abs(d) > RELATIVE_BAND * (abs(x) + abs(ky) + abs(cf)) + ABSOLUTE_BAND:
        return 1 if d > 0 else -1
    if unit and same_kind and c_exact and cf == 0.0:
        return (x > y) - (x < y)
    if (
        c_exact
        and abs(cf) < 2.0**50
        and cf == np.floor(cf)
        and abs(kf) < 2.0**20
        and kf == np.floor(kf)
        and abs(x) < 2.0**30
        and x == np.floor(x)
        and abs(y) < 2.0**30
        and y == np.floor(y)
    ):
        # (the factor is exact when the list says so: callers pass unit or an exact kf)
        return 1 if d > 0 else (-1 if d < 0 else 0)
    return UNSURE


@kernel
def _bisect(consts: np.ndarray, cbase: int, lo: int, hi: int, x: float, right: bool) -> int:
    """``bisect_left`` (``bisect_right`` with ``right``) of ``x`` in a list's doubles [lo, hi)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if consts[cbase + mid] < x or (right and consts[cbase + mid] == x):
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel
def _first_true(
    i: int,
    lo: int,
    hi: int,
    strict: bool,
    x: float,
    y: float,
    kf: float,
    term: float,
    consts: np.ndarray,
    c_exact: np.ndarray,
    cbase: int,
    unit: bool,
    same_kind: bool,
    kx: bool,
) -> int:
    """:func:`indexes.covering.first_true` from the guess ``i`` over [lo, hi] for the
    predicate "the sign at i is <= 0" (``< 0`` when ``strict``), each sign decided
    exactly by :func:`_sign`, or UNSURE as soon as one is not."""
    while i > lo:
        sg = _sign(x, y, kf, consts[cbase + i - 1], term, unit, same_kind, kx and c_exact[cbase + i - 1])
        if sg == UNSURE:
            return UNSURE
        if sg > 0 or (strict and sg == 0):
            break
        i -= 1
    while i < hi:
        sg = _sign(x, y, kf, consts[cbase + i], term, unit, same_kind, kx and c_exact[cbase + i])
        if sg == UNSURE:
            return UNSURE
        if sg < 0 or (not strict and sg == 0):
            break
        i += 1
    return i


@kernel
def _boundaries_near(
    x: float,
    y: float,
    kf: float,
    term: float,
    diff: float,
    g: int,
    consts: np.ndarray,
    c_exact: np.ndarray,
    cbase: int,
    n: int,
    unit: bool,
    k_exact: bool,
    same_kind: bool,
) -> tuple[int, int]:
    """``CoveringList._boundaries`` where a constant next to the doubles' guess ``g`` lies
    within the band of ``diff = x - k*y`` (:func:`join_rows` decides the other lists
    itself): each neighbour's sign settled by :func:`_sign`, or (UNSURE, UNSURE)."""
    kx = k_exact or unit
    below = _first_true(g, 0, n, False, x, y, kf, term, consts, c_exact, cbase, unit, same_kind, kx)
    if below == UNSURE:
        return UNSURE, UNSURE
    guess = _bisect(consts, cbase, below, n, diff, True)
    above = _first_true(guess, below, n, True, x, y, kf, term, consts, c_exact, cbase, unit, same_kind, kx)
    if above == UNSURE:
        return UNSURE, UNSURE
    return below, above


@kernel
def _list_cuts(op: int, below: int, above: int, n: int, stride: int) -> tuple[int, int, int, int, int, int]:
    """What to take off for one list's failed predicates, given its boundaries
    (``CoveringList._answer``; ``below`` -1 for a NULL: nothing holds): (the prefix
    checkpoint row, the suffix checkpoint row, each -1 for none, relative to the list's
    first row) and two position ranges [lo1, hi1), [lo2, hi2) whose users are cleared."""
    if below < 0:  # NOTHING: every position failed, the first suffix row holds them all
        return -1, 0, 0, 0, 0, 0
    if op == OP_NE:  # satisfied: all but [below, above), the run that fails
        return -1, -1, below, above, 0, 0
    if op == OP_LT:
        lo, hi = above, n
    elif op == OP_LE:
        lo, hi = below, n
    elif op == OP_GT:
        lo, hi = 0, below
    elif op == OP_GE:
        lo, hi = 0, above
    else:  # OP_EQ
        lo, hi = below, above
    # prefix [0, lo): its checkpoint row, then the positions after it
    j = lo // stride
    suffix_row, lo2, hi2 = -1, 0, 0
    # suffix [hi, n)
    if hi < n:
        jj = hi // stride
        if hi % stride == 0:
            suffix_row = jj
        else:
            end = (jj + 1) * stride
            if end < n:
                suffix_row = jj + 1
            else:
                end = n
            lo2, hi2 = hi, end
    return j, suffix_row, j * stride, lo, lo2, hi2


@kernel
def _window_level(lo: float, hi: float, w_floats: np.ndarray) -> int:
    """The first MAXWINDOW level whose window holds the span [lo, hi] (``len`` if none),
    as ``plan.slots_within`` finds it; UNSURE inside the band."""
    for k in range(w_floats.shape[0]):
        wf = w_floats[k]
        if hi == lo:
            if wf > 0:
                return k
            return UNSURE  # a zero window against a zero span: the exact path
        d = hi - lo - wf
        if abs(d) > RELATIVE_BAND * (abs(hi) + abs(lo) + abs(wf)) + ABSOLUTE_BAND:
            if d < 0:
                return k
            continue
        return UNSURE
    return int(w_floats.shape[0])


@kernel
def _since_count(lo: float, s_floats: np.ndarray) -> int:
    """How many registration horizons are at or before ``lo`` (``plan.slots_since``);
    UNSURE inside the band."""
    for k in range(s_floats.shape[0]):
        sf = s_floats[k]
        if sf == -np.inf:
            continue
        d = lo - sf
        if abs(d) > RELATIVE_BAND * (abs(lo) + abs(sf)) + ABSOLUTE_BAND:
            if d < 0:
                return k
            continue
        return UNSURE
    return int(s_floats.shape[0])


@kernel
def join_rows(
    start: int,
    side: np.ndarray,
    ts: np.ndarray,
    vals: np.ndarray,
    cand: np.ndarray,
    wlo_of: np.ndarray,
    whi_of: np.ndarray,
    big: np.ndarray,
    key: np.ndarray,
    by_probe: np.ndarray,
    sorted_key: np.ndarray,
    sorted_ts: np.ndarray,
    side_start: np.ndarray,
    reach: float,
    l_op: np.ndarray,
    l_kf: np.ndarray,
    l_left_side: np.ndarray,
    l_left_col: np.ndarray,
    l_right_col: np.ndarray,
    l_n: np.ndarray,
    l_cbase: np.ndarray,
    consts: np.ndarray,
    c_exact: np.ndarray,
    l_unit: np.ndarray,
    l_k_exact: np.ndarray,
    l_same_kind: np.ndarray,
    l_stride: np.ndarray,
    l_rbase: np.ndarray,
    prefix_rows: np.ndarray,
    suffix_rows: np.ndarray,
    l_obase: np.ndarray,
    offsets: np.ndarray,
    users: np.ndarray,
    w_floats: np.ndarray,
    w_masks: np.ndarray,
    s_floats: np.ndarray,
    s_masks: np.ndarray,
    out_a: np.ndarray,
    out_b: np.ndarray,
    out_start: np.ndarray,
    out_widx: np.ndarray,
    out_word: np.ndarray,
    fb_a: np.ndarray,
    fb_b: np.ndarray,
) -> tuple[int, int, int, int]:
    """Rows ``start ..`` in arrival order (see the module docstring). Returns (the row
    to go on from, pairs written, words written, fallback pairs written): it stops
    before a row whose results might not fit the output arrays (the caller grows them
    and calls again from there; the rows before it are complete). A pair's slots are
    its nonzero words: ``out_widx``/``out_word`` from ``out_start[k]`` to the next
    pair's start (one result block per pair, as the engine's ``ResultBlock``).

    ``key``: each row's value of the plan's equality key (every slot of the step
    requires the two rows' keys equal, :attr:`mqo.pair_tables.PairTables.key`), 0 for
    every row without one; each side's rows are ``by_probe`` in (key, ts) order."""
    n_rows = side.shape[0]
    words = cand.shape[1]
    n_lists = l_op.shape[0]
    pair_cap, word_cap, fb_cap = out_a.shape[0], out_word.shape[0], fb_a.shape[0]
    n_pairs = n_words = n_fb = 0
    cr = np.empty(words, np.uint64)
    for j in range(start, n_rows):
        wlo, whi = wlo_of[j], whi_of[j]
        if wlo >= whi:
            continue
        k = key[j]
        if k != k:
            continue  # a NULL key: no partner is equal to it
        s = side[j]
        y = 1 - s
        t = ts[j]
        # the partner rows of the same key within reach, by binary search in their (key, ts) order
        a, b = side_start[y], side_start[y + 1]
        lo_t, hi_t = t - reach, t + reach
        lo, hi = a, b
        while lo < hi:
            mid = (lo + hi) >> 1
            if sorted_key[mid] < k or (sorted_key[mid] == k and sorted_ts[mid] < lo_t):
                lo = mid + 1
            else:
                hi = mid
        first = lo
        row_pairs, row_words, row_fb = n_pairs, n_words, n_fb
        for q in range(first, b):
            if sorted_key[q] != k or sorted_ts[q] > hi_t:
                break
            r = by_probe[q]
            if r >= j:
                continue  # not stored yet when row j arrives
            if wlo_of[r] >= whi or whi_of[r] <= wlo:
                continue  # no candidate word in common
            any_left = False
            for w in range(wlo, whi):
                cr[w] = cand[j, w] & cand[r, w]
                if cr[w]:
                    any_left = True
            if not any_left:
                continue
            if n_pairs >= pair_cap or n_words + whi - wlo > word_cap or n_fb >= fb_cap:
                return j, row_pairs, row_words, row_fb  # row j again, with room
            # the pair's span against the MAXWINDOW and registration levels first (cheap, and
            # a pair they rule out needs no list, decided or not)
            t_lo = t if t < ts[r] else ts[r]
            t_hi = t if t > ts[r] else ts[r]
            level = _window_level(t_lo, t_hi, w_floats)
            count = _since_count(t_lo, s_floats)
            if level == UNSURE or count == UNSURE or big[j] or big[r]:
                fb_a[n_fb] = j
                fb_b[n_fb] = r
                n_fb += 1
                continue
            if level >= w_floats.shape[0] or count == 0:
                continue
            left_any = False
            for w in range(wlo, whi):
                cr[w] &= w_masks[level, w] & s_masks[count - 1, w]
                if cr[w]:
                    left_any = True
            if not left_any:
                continue
            # The lists, written out in this loop rather than in a helper per list: per pair
            # and list, a call too big for LLVM to inline or a view of a row
            # (``suffix_rows[r]``) counts references on its arrays, which cost more than the
            # list's own work (indexes.numba_config). The helpers left are small enough to
            # be inlined (_bisect, _clear_range), take and return scalars (_list_cuts), or
            # run only for the rare pairs near a band (_boundaries_near).
            unsure = False
            for li in range(n_lists):
                rbase = l_rbase[li]
                relevant = False  # (a list none of the candidates uses decides nothing: Engine skips it too)
                for w in range(wlo, whi):
                    if cr[w] & suffix_rows[rbase, w]:
                        relevant = True
                        break
                if not relevant:
                    continue
                if l_left_side[li] == s:
                    left, right = vals[j, l_left_col[li]], vals[r, l_right_col[li]]
                else:
                    left, right = vals[r, l_left_col[li]], vals[j, l_right_col[li]]
                n = l_n[li]
                if left != left or right != right:  # NULL
                    below = above = -1
                else:
                    # CoveringList._boundaries: the doubles' answer when both constants next
                    # to x - k*y lie outside the band, else _boundaries_near
                    cbase = l_cbase[li]
                    term = l_kf[li] * right
                    diff = left - term
                    g = _bisect(consts, cbase, 0, n, diff, False)
                    scale = abs(left) + abs(term)
                    sure = True
                    if g > 0:
                        c = consts[cbase + g - 1]
                        sure = diff - c > RELATIVE_BAND * (scale + abs(c)) + ABSOLUTE_BAND
                    if sure and g < n:
                        c = consts[cbase + g]
                        sure = c - diff > RELATIVE_BAND * (scale + abs(c)) + ABSOLUTE_BAND
                    if sure:
                        below = above = g
                    else:
                        below, above = _boundaries_near(
                            left,
                            right,
                            l_kf[li],
                            term,
                            diff,
                            g,
                            consts,
                            c_exact,
                            cbase,
                            n,
                            l_unit[li],
                            l_k_exact[li],
                            l_same_kind[li],
                        )
                        if below == UNSURE:
                            unsure = True
                            break
                prefix_row, suffix_row, lo1, hi1, lo2, hi2 = _list_cuts(l_op[li], below, above, n, l_stride[li])
                if prefix_row >= 0:
                    for w in range(wlo, whi):
                        cr[w] &= ~prefix_rows[rbase + prefix_row, w]
                if suffix_row >= 0:
                    for w in range(wlo, whi):
                        cr[w] &= ~suffix_rows[rbase + suffix_row, w]
                obase = l_obase[li]
                _clear_range(cr, offsets, users, obase, lo1, hi1, wlo, whi)
                _clear_range(cr, offsets, users, obase, lo2, hi2, wlo, whi)
            if unsure:
                fb_a[n_fb] = j
                fb_b[n_fb] = r
                n_fb += 1
                continue
            first_word = n_words
            for w in range(wlo, whi):
                if cr[w]:
                    out_widx[n_words] = w
                    out_word[n_words] = cr[w]
                    n_words += 1
            if n_words > first_word:
                out_a[n_pairs] = j
                out_b[n_pairs] = r
                out_start[n_pairs] = first_word
                n_pairs += 1
    return n_rows, n_pairs, n_words, n_fb
