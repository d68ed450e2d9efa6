"""numba kernels for the bit work of matching many tuples against many queries.

Bit layout: a set of query slots is a row of ``uint64`` words (bit ``s`` of word
``s >> 6``). A predicate list keeps, Rein-style, the slots using each position in
covering order as CSR arrays (``offsets``, ``users``), plus **checkpoint rows**: the
OR of the users of every prefix ``[0, j*stride)`` (and/or suffix ``[j*stride, n)``).
Because the predicates a tuple fails form a prefix or a suffix (or a run, for ``!=``)
in covering order, the slots a tuple rules out in a list are one checkpoint row plus
the users of fewer than ``stride`` positions.

Kernels take arrays and scalars only and are driven by thin Python in
:mod:`indexes.kill_bitsets` and :mod:`indexes.covering`; ``tests/references/naive_kernels.py``
has a plain reference for each. Settings live in :mod:`indexes.numba_config`.
"""

from __future__ import annotations

import numpy as np

from indexes.kernel_modes import MODE_EQUAL, MODE_GREATER, MODE_LESS, MODE_NOT_EQUAL, NULL
from indexes.numba_config import kernel

__all__ = ["MODE_EQUAL", "MODE_GREATER", "MODE_LESS", "MODE_NOT_EQUAL", "NULL"]


ONE = np.uint64(1)
# A word's lowest set bit, times this De Bruijn constant, holds the bit's number in its
# top six bits, each number once: a table lookup instead of a shift per bit position.
DE_BRUIJN = np.uint64(0x03F79D71B4CB0A89)
DE_BRUIJN_SHIFT = np.uint64(58)
DE_BRUIJN_BITS = np.zeros(64, np.int64)
for _b in range(64):
    DE_BRUIJN_BITS[((1 << _b) * 0x03F79D71B4CB0A89 & 0xFFFFFFFFFFFFFFFF) >> 58] = _b


@kernel
def copy_row(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[:] = src`` as a loop: numba's slice assignment compiles a shape-mismatch
    error path whose typing costs seconds on a cold cache."""
    for w in range(src.shape[0]):
        dst[w] = src[w]


@kernel
def build_checkpoints(
    offsets: np.ndarray, users: np.ndarray, n: int, stride: int, words: int, suffix: bool
) -> np.ndarray:
    """Checkpoint rows of one list: row j = OR of the users of [0, j*stride) (prefix)
    or of [j*stride, n) (suffix; the row past the end is empty). O(users + rows*words)."""
    table = np.empty((n // stride + 2, words), np.uint64)
    fill_checkpoints(table, 0, offsets, users, n, stride, suffix)
    return table


@kernel
def fill_checkpoints(
    table: np.ndarray, first: int, offsets: np.ndarray, users: np.ndarray, n: int, stride: int, suffix: bool
) -> None:
    """:func:`build_checkpoints`' rows written into ``table[first : first + n // stride
    + 2]`` (every row of it: the table may be uninitialized), no list-sized array made."""
    rows = n // stride + 2
    words = table.shape[1]
    acc = np.zeros(words, np.uint64)
    if not suffix:
        copy_row(table[first], acc)
        for j in range(1, rows):
            a, b = min(n, (j - 1) * stride), min(n, j * stride)
            for k in range(offsets[a], offsets[b]):
                u = users[k]
                acc[u >> 6] |= ONE << np.uint64(u & 63)
            copy_row(table[first + j], acc)
    else:
        for j in range(rows - 1, -1, -1):
            a, b = min(n, j * stride), min(n, (j + 1) * stride)
            for k in range(offsets[a], offsets[b]):
                u = users[k]
                acc[u >> 6] |= ONE << np.uint64(u & 63)
            copy_row(table[first + j], acc)


BLOCK = 64  # tuples :func:`prune_select` prunes per call of :func:`_fail_lists` (its rows stay in cache)


@kernel
def _fail_lists(
    rows: np.ndarray,
    r0: int,
    count: int,
    i0: int,
    which: int,
    modes: np.ndarray,
    ns: np.ndarray,
    strides: np.ndarray,
    prefix_rows: np.ndarray,
    suffix_rows: np.ndarray,
    any_rows: np.ndarray,
    csr_base: np.ndarray,
    part: np.ndarray,
    word_lo: np.ndarray,
    span_lo: np.ndarray,
    span_hi: np.ndarray,
    table: np.ndarray,
    offsets: np.ndarray,
    users: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
) -> None:
    """Remove from ``rows[r0 + k]`` (``k < count``: tuple ``i0 + k``) the users of the
    predicates the tuple failed, list by list, for the lists of part ``which``: their
    checkpoint rows and CSR arrays are ``table``, ``offsets`` and ``users``, the rows
    covering the words from ``word_lo`` on (lists added to a matcher after its tables
    were built live in a second part, with a narrow table over the new slots' words).

    One call per block of tuples, one flat loop nest, no array views: a call to a
    kernel or a view of an array counts references to every array it passes, and per
    tuple that cost 20-50 times the work itself (0.5-1 us a tuple where one list of one
    word takes 20 ns)."""
    for k in range(count):
        i = i0 + k
        r = r0 + k
        for l in range(modes.shape[0]):
            if part[l] != which:
                continue
            w0 = word_lo[l]
            a = lo[l, i]
            if a == NULL:
                c = any_rows[l]
                for w in range(span_lo[l], span_hi[l]):
                    rows[r, w0 + w] &= ~table[c, w]
                continue
            b = hi[l, i]
            mode = modes[l]
            s = strides[l]
            base = csr_base[l]
            # the empty prefix (row 0) and the empty suffix (past the end) are rows of
            # zeros, never read: often one list of a range's two fails nothing, and reading
            # a row of every list is most of a tuple's memory traffic; the users of the
            # positions short of a checkpoint are one run of ``users``, walked in one loop
            if mode == MODE_LESS or mode == MODE_EQUAL:  # noqa: SIM109 - plain compares for numba
                j = a // s
                if j > 0:
                    c = prefix_rows[l] + j
                    for w in range(span_lo[l], span_hi[l]):
                        rows[r, w0 + w] &= ~table[c, w]
                for q in range(offsets[base + j * s], offsets[base + a]):
                    u = users[q]
                    rows[r, u >> 6] &= ~(ONE << np.uint64(u & 63))
            if mode == MODE_GREATER or mode == MODE_EQUAL:  # noqa: SIM109
                j = (b + s - 1) // s
                if j * s < ns[l]:
                    c = suffix_rows[l] + j
                    for w in range(span_lo[l], span_hi[l]):
                        rows[r, w0 + w] &= ~table[c, w]
                for q in range(offsets[base + b], offsets[base + min(ns[l], j * s)]):
                    u = users[q]
                    rows[r, u >> 6] &= ~(ONE << np.uint64(u & 63))
            if mode == MODE_NOT_EQUAL:
                for q in range(offsets[base + a], offsets[base + b]):
                    u = users[q]
                    rows[r, u >> 6] &= ~(ONE << np.uint64(u & 63))


@kernel
def prune(
    cand: np.ndarray,
    base: np.ndarray,
    modes: np.ndarray,
    ns: np.ndarray,
    strides: np.ndarray,
    prefix_rows: np.ndarray,
    suffix_rows: np.ndarray,
    any_rows: np.ndarray,
    csr_base: np.ndarray,
    part: np.ndarray,
    word_lo: np.ndarray,
    span_lo: np.ndarray,
    span_hi: np.ndarray,
    table: np.ndarray,
    table2: np.ndarray,
    offsets: np.ndarray,
    users: np.ndarray,
    offsets2: np.ndarray,
    users2: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
) -> None:
    """Candidate slots of N tuples after L lists: ``cand[i] = base`` minus, for every
    list, the users of the predicates tuple i failed (given as ``lo[l, i]``,
    ``hi[l, i]`` in covering order). The QED subset test over all slots at once."""
    n = cand.shape[0]
    second = np.any(part != 0)  # lists of the second part (added since)
    for b0 in range(0, n, BLOCK):
        count = min(BLOCK, n - b0)
        for k in range(b0, b0 + count):
            for w in range(base.shape[0]):
                cand[k, w] = base[w]
        args = (modes, ns, strides, prefix_rows, suffix_rows, any_rows, csr_base, part, word_lo, span_lo, span_hi)
        _fail_lists(cand, b0, count, b0, 0, *args, table, offsets, users, lo, hi)
        if second:
            _fail_lists(cand, b0, count, b0, 1, *args, table2, offsets2, users2, lo, hi)


@kernel
def prune_select(
    masks: np.ndarray,
    base: np.ndarray,
    modes: np.ndarray,
    ns: np.ndarray,
    strides: np.ndarray,
    prefix_rows: np.ndarray,
    suffix_rows: np.ndarray,
    any_rows: np.ndarray,
    csr_base: np.ndarray,
    part: np.ndarray,
    word_lo: np.ndarray,
    span_lo: np.ndarray,
    span_hi: np.ndarray,
    table: np.ndarray,
    table2: np.ndarray,
    offsets: np.ndarray,
    users: np.ndarray,
    offsets2: np.ndarray,
    users2: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    start: int,
    end: int,
    always: int,
    flags: np.ndarray,
    kept: np.ndarray,
    first: int,
    cand: np.ndarray,
) -> int:
    """:func:`prune` for tuples ``start:end`` in one pass that keeps only what is
    wanted: ``flags[i]`` has bit m set when tuple i's candidates meet ``masks[m]``, and
    the bits of ``always``; the candidate rows of the tuples meeting ``masks[0]`` or
    ``masks[1]`` are copied, in order, to ``cand[0:k]`` and ``kept[i]`` is ``first``
    plus tuple i's row there (-1 if not kept); returns k. (``cand`` may be allocated
    for every tuple and never touched past k: a batch where few tuples are wanted costs
    no candidate matrix; the tuples are pruned a block at a time in a small buffer.)"""
    words = base.shape[0]
    block = np.empty((min(BLOCK, max(end - start, 1)), words), np.uint64)  # (a pushed tuple: one row)
    second = np.any(part != 0)  # lists of the second part (added since)
    k = 0
    for b0 in range(start, end, BLOCK):
        count = min(BLOCK, end - b0)
        for r in range(count):
            for w in range(words):
                block[r, w] = base[w]
        args = (modes, ns, strides, prefix_rows, suffix_rows, any_rows, csr_base, part, word_lo, span_lo, span_hi)
        _fail_lists(block, 0, count, b0, 0, *args, table, offsets, users, lo, hi)
        if second:
            _fail_lists(block, 0, count, b0, 1, *args, table2, offsets2, users2, lo, hi)
        for r in range(count):
            i = b0 + r
            code = 0
            live = False  # (most tuples fail every candidate: one scan, not one per mask)
            for w in range(words):
                if block[r, w]:
                    live = True
                    break
            if live:
                for m in range(masks.shape[0]):
                    for w in range(words):
                        if block[r, w] & masks[m, w]:
                            code |= 1 << m
                            break
            flags[i] = code | always
            if code & 3:
                for w in range(words):
                    cand[k, w] = block[r, w]
                kept[i] = first + k
                k += 1
            else:
                kept[i] = -1
    return k


@kernel
def count_bits(cand: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per row, how many bits of ``cand[i] & mask`` are set."""
    out = np.zeros(cand.shape[0], np.int64)
    for i in range(cand.shape[0]):
        total = 0
        for w in range(cand.shape[1]):
            x = cand[i, w] & mask[w]
            while x:
                x &= x - ONE
                total += 1
        out[i] = total
    return out


@kernel
def select_bits(cand: np.ndarray, mask: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, bit) of every set bit of ``cand[i] & mask``, row-major; ``counts`` from
    :func:`count_bits`."""
    total = 0
    for c in counts:
        total += c
    rows = np.empty(total, np.int64)
    bits = np.empty(total, np.int64)
    k = 0
    for i in range(cand.shape[0]):
        for w in range(cand.shape[1]):
            x = cand[i, w] & mask[w]
            while x:
                low = x & (~x + ONE)
                rows[k] = i
                bits[k] = w * 64 + DE_BRUIJN_BITS[(low * DE_BRUIJN) >> DE_BRUIJN_SHIFT]
                k += 1
                x ^= low
    return rows, bits


@kernel
def insert_user(
    constants: np.ndarray,
    offsets: np.ndarray,
    users: np.ndarray,
    start: int,
    n: int,
    p: int,
    new: int,
    value: float,
    slot: int,
) -> int:
    """Add ``slot`` to the list at position ``start`` of the CSR arrays (``n``
    positions, their users after ``offsets[start]``, with room for one more position
    and user): as a new position ``p`` with constant ``value`` (``new``), or as one more
    user of position ``p``; with ``p`` < 0, ``p`` and ``new`` are found by a binary
    search of ``value`` among the constants (doubles, ascending). Returns ``new``."""
    if p < 0:
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) >> 1
            if constants[start + mid] < value:
                lo = mid + 1
            else:
                hi = mid
        p = lo
        new = 1 if p == n or constants[start + p] != value else 0
    end = offsets[start + n]
    if new:
        at = offsets[start + p]
        for k in range(start + n, start + p, -1):
            constants[k] = constants[k - 1]
        constants[start + p] = value
        for k in range(start + n + 1, start + p + 1, -1):
            offsets[k] = offsets[k - 1] + 1
        offsets[start + p + 1] = at + 1
    else:
        at = offsets[start + p + 1]  # after the users of the equal constant
        for k in range(start + p + 1, start + n + 1):
            offsets[k] += 1
    for k in range(end, at, -1):
        users[k] = users[k - 1]
    users[at] = slot
    return new


@kernel
def insert_users(
    constants: np.ndarray,
    offsets: np.ndarray,
    users: np.ndarray,
    starts: np.ndarray,
    ns: np.ndarray,
    values: np.ndarray,
    slot: int,
) -> np.ndarray:
    """:func:`insert_user` of ``slot`` into several lists of doubles in one call (a
    query's predicates): list ``i`` at position ``starts[i]`` with ``ns[i]`` positions
    (and room for one more position and user) takes constant ``values[i]``. The lists
    are distinct. Returns, per list, whether its constant took a new position."""
    new = np.zeros(len(starts), np.int64)
    for i in range(len(starts)):
        new[i] = insert_user(constants, offsets, users, starts[i], ns[i], -1, 0, values[i], slot)
    return new
