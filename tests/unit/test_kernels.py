"""Every numba kernel against its plain reference (tests/references/naive_kernels.py).

These tests also run with ``NUMBA_DISABLE_JIT=1`` (see the last test), so the kernels'
Python source is what is measured for coverage."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexes import kernels, kill_bitsets
from indexes.kill_bitsets import KillBitsets, ListUsers, bitset_of, bitset_to_int, words_for
from tests.references import naive_kernels as naive
from tests.references.naive_kernels import int_to_bitset

OPS = ["<", "<=", ">", ">=", "=", "!="]


@st.composite
def csr_lists(draw, n_slots: int):
    n = draw(st.integers(1, 12))
    users = [draw(st.lists(st.integers(0, n_slots - 1), max_size=3, unique=True)) for _ in range(n)]
    offsets = np.zeros(n + 1, np.int64)
    offsets[1:] = np.cumsum([len(u) for u in users])
    flat = np.array([u for us in users for u in us], np.int32)
    return offsets, flat


def _rows_as_ints(rows: np.ndarray) -> list[int]:
    return [bitset_to_int(row) for row in rows]


def _random_ranges(rng: np.random.Generator, lists: list, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Per list and row, a random (lo, hi) search outcome for the list's operator (a
    ``<``/``<=`` one runs to the end, a ``>``/``>=`` one from the start)."""
    lo = np.zeros((len(lists), n_rows), np.int64)
    hi = np.zeros((len(lists), n_rows), np.int64)
    for l, (op, offsets, _) in enumerate(lists):
        n = len(offsets) - 1
        for i in range(n_rows):
            a = int(rng.integers(-1, n + 1))
            lo[l, i], hi[l, i] = a, int(rng.integers(max(a, 0), n + 1))
            if op in ("<", "<="):
                hi[l, i] = n
            if op in (">", ">="):
                lo[l, i] = min(a, 0)
    return lo, hi


@given(st.data(), st.integers(1, 150), st.integers(1, 5), st.booleans())
@settings(max_examples=150, deadline=None)
def test_build_checkpoints(data, n_slots, stride, suffix):
    offsets, users = data.draw(csr_lists(n_slots))
    n = len(offsets) - 1
    table = kernels.build_checkpoints(offsets, users, n, stride, words_for(n_slots), suffix)
    assert _rows_as_ints(table) == naive.checkpoints(offsets, users, n, stride, suffix)


@given(st.data(), st.integers(1, 150), st.integers(1, 5), st.booleans(), st.integers(0, 3))
@settings(max_examples=100, deadline=None)
def test_fill_checkpoints_in_place(data, n_slots, stride, suffix, first):
    """A list's rows written into a larger table that holds garbage (as the kill
    tables' one uninitialized table does): every row of the list's range is the
    reference's, the empty prefix and the row past the end included, and no other row
    is touched."""
    offsets, users = data.draw(csr_lists(n_slots))
    n = len(offsets) - 1
    rows = n // stride + 2
    garbage = np.uint64(0xDEADBEEFDEADBEEF)
    table = np.full((first + rows + 2, words_for(n_slots)), garbage, np.uint64)
    kernels.fill_checkpoints(table, first, offsets, users, n, stride, suffix)
    assert _rows_as_ints(table[first : first + rows]) == naive.checkpoints(offsets, users, n, stride, suffix)
    assert (table[:first] == garbage).all() and (table[first + rows :] == garbage).all()


@given(
    st.lists(st.tuples(st.sampled_from([-2.0, 0.0, 0.5, 1.0, 3.0]), st.integers(0, 60)), min_size=1, max_size=25),
    st.integers(0, 5),
    st.integers(0, 7),
)
@settings(max_examples=150, deadline=None)
def test_insert_user(predicates: list, start: int, gap: int) -> None:
    """Predicates inserted one by one into a list at position ``start`` of CSR arrays
    (with ``gap`` free positions and users after it, as a list with room has) give the
    constants and users the reference gives; the arrays around it are not written."""
    size = start + len(predicates) + 1 + gap
    constants = np.full(size, 9.0)
    offsets = np.full(size + 1, -7, np.int64)
    users = np.full(3 + len(predicates) + gap, -5, np.int32)
    offsets[start] = 3  # its users after three others'
    want: list = []
    n = 0
    for value, slot in predicates:
        n += kernels.insert_user(constants, offsets, users, start, n, -1, 0, value, slot)
        want = naive.insert_user(want, value, slot)
        got = [
            (float(constants[start + p]), users[offsets[start + p] : offsets[start + p + 1]].tolist()) for p in range(n)
        ]
        assert got == want
    m = len(predicates)
    assert (constants[:start] == 9.0).all() and (constants[start + n :] == 9.0).all()
    assert (offsets[:start] == -7).all() and (offsets[start + n + 1 :] == -7).all()
    assert (users[:3] == -5).all() and (users[3 + m :] == -5).all()


@given(
    st.lists(st.lists(st.sampled_from([-2.0, 0.0, 0.5, 1.0, 3.0]), min_size=1, max_size=6), min_size=1, max_size=5),
    st.integers(0, 60),
)
@settings(max_examples=100, deadline=None)
def test_insert_users_is_insert_user_list_by_list(queries: list, first_slot: int) -> None:
    """Queries inserted one kernel call each into several lists of shared CSR arrays
    (each list its own segment with room, as kept lists have: query ``k`` puts
    ``queries[k][i]`` into list ``i``) give the constants and users the reference
    gives list by list, and every list's size is reported."""
    width = max(map(len, queries))
    room = len(queries) + 1
    constants = np.full(width * room, 9.0)
    offsets = np.full(width * room + 1, -7, np.int64)
    users = np.full(width * room, -5, np.int32)
    starts = np.arange(width, dtype=np.int64) * room
    offsets[starts] = starts  # each list's users start at its own segment
    ns = np.zeros(width, np.int64)
    want: list[list] = [[] for _ in range(width)]
    for k, values in enumerate(queries):
        lists = np.arange(len(values))
        slot = first_slot + k
        new = kernels.insert_users(constants, offsets, users, starts[lists], ns[lists], np.array(values), slot)
        ns[lists] += new
        for i, value in enumerate(values):
            want[i] = naive.insert_user(want[i], value, slot)
    for i in range(width):
        s = int(starts[i])
        got = [(float(constants[s + p]), users[offsets[s + p] : offsets[s + p + 1]].tolist()) for p in range(ns[i])]
        assert got == want[i]


def as_list_users(lists: list, how: str) -> list[ListUsers]:
    """The kernels' lists with their own CSR arrays (``own``); cut from one pair of
    arrays behind another list, as a compiled plan's are (``shared``: read in place);
    or so, but the last with arrays of its own (``mixed``: copied, from offsets that do
    not start at 0)."""
    if how == "own":
        return [ListUsers(op, o, u) for op, o, u in lists]
    from mqo.plan_compile import SharedCsr

    csr = SharedCsr(3 + sum(len(o) + len(u) for _, o, u in lists))
    csr.add(None, np.array([0, 3], np.int64), np.zeros(3, np.int32))  # another list first
    out = []
    for op, o, u in lists:
        _, offsets, users, base = csr.add(None, o, u)
        out.append(ListUsers(op, offsets, users, base))
    if how == "mixed":
        out[-1] = ListUsers(*lists[-1])
    return out


@given(
    st.data(),
    st.integers(1, 200),
    st.integers(1, 4),
    st.integers(1, 6),
    st.sampled_from([1 << 30, 600, 1]),
    st.sampled_from(["own", "shared", "mixed"]),
)
@settings(max_examples=150, deadline=None)
def test_prune(data, n_slots, n_lists, n_tuples, budget, how):
    lists = []
    lo = np.zeros((n_lists, n_tuples), np.int64)
    hi = np.zeros((n_lists, n_tuples), np.int64)
    for l in range(n_lists):
        op = data.draw(st.sampled_from(OPS))
        offsets, users = data.draw(csr_lists(n_slots))
        n = len(offsets) - 1
        lists.append((op, offsets, users))
        for i in range(n_tuples):
            a = data.draw(st.integers(-1, n))
            b = data.draw(st.integers(max(a, 0), n))
            if op in ("<", "<="):
                b = n
            if op in (">", ">="):
                a = -1 if a == -1 else 0
            lo[l, i], hi[l, i] = a, b
    base_slots = data.draw(st.lists(st.integers(0, n_slots - 1), unique=True))
    words = words_for(n_slots)
    given = as_list_users(lists, how)
    tables = KillBitsets(given, n_slots, bitset_of(np.array(base_slots, np.int64), words), budget)
    if how == "shared":  # read in place, not copied
        assert tables.users is given[0].users and tables.offsets is given[0].offsets.base
    tables._check()
    got = _rows_as_ints(tables.prune(lo, hi))
    base = sum(1 << s for s in base_slots)
    want = naive.prune(base, lists, lo, hi, n_tuples)
    assert got == want
    masks = [data.draw(st.integers(0, (1 << n_slots) - 1)) for _ in range(3)]
    # one call for all tuples, and one tuple per kernel call (with a bit every tuple gets)
    for chunk, always in ((kill_bitsets.SELECT_CHUNK_BYTES, 0), (8, 4)):
        original, kill_bitsets.SELECT_CHUNK_BYTES = kill_bitsets.SELECT_CHUNK_BYTES, chunk
        try:
            flags, kept, row_of = tables.select(lo, hi, np.stack([int_to_bitset(m, words) for m in masks]), always)
        finally:
            kill_bitsets.SELECT_CHUNK_BYTES = original
        assert flags.tolist() == [sum(1 << k for k, m in enumerate(masks) if c & m) | always for c in want]
        wanted = [i for i, c in enumerate(want) if c & (masks[0] | masks[1])]
        assert _rows_as_ints(kept) == [want[i] for i in wanted]
        assert row_of.tolist() == [wanted.index(i) if i in wanted else -1 for i in range(n_tuples)]


@given(st.data(), st.integers(1, 140), st.integers(1, 80), st.integers(0, 3), st.integers(0, 3))
@settings(max_examples=100, deadline=None)
def test_extended_tables_prune_as_tables_built_whole(data, n_first, n_added, first_lists, added_lists):
    """A second part (the lists of slots added after the tables were built: their own
    narrow table and CSR arrays) prunes exactly as the naive reference over all lists."""
    n_slots = n_first + n_added
    lists = []
    for k in range(first_lists + added_lists):
        op = data.draw(st.sampled_from(OPS))
        offsets, users = data.draw(csr_lists(n_first if k < first_lists else n_added))
        lists.append((op, offsets, users if k < first_lists else (users + n_first).astype(np.int32)))
    n_tuples = data.draw(st.integers(1, 5))
    lo = np.zeros((len(lists), n_tuples), np.int64)
    hi = np.zeros((len(lists), n_tuples), np.int64)
    for l, (op, offsets, _) in enumerate(lists):
        n = len(offsets) - 1
        for i in range(n_tuples):
            a = data.draw(st.integers(-1, n))
            lo[l, i], hi[l, i] = a, data.draw(st.integers(max(a, 0), n))
            if op in ("<", "<="):
                hi[l, i] = n
            if op in (">", ">="):
                lo[l, i] = min(a, 0)
    budget = data.draw(st.sampled_from([1 << 30, 1]))
    first = KillBitsets(
        [ListUsers(*lst) for lst in lists[:first_lists]],
        n_first,
        bitset_of(np.arange(n_first), words_for(n_first)),
        budget,
    )
    base_slots = data.draw(st.lists(st.integers(0, n_slots - 1), unique=True))
    tables = first.extended(
        [ListUsers(*lst) for lst in lists[first_lists:]],
        n_slots,
        bitset_of(np.array(base_slots, np.int64), words_for(n_slots)),
        budget,
    )
    first._check()
    tables._check()
    want = naive.prune(sum(1 << s for s in base_slots), lists, lo, hi, n_tuples)
    assert _rows_as_ints(tables.prune(lo, hi)) == want
    with pytest.raises(ValueError, match="built whole"):
        tables.extended([], n_slots, tables.base)


@given(st.lists(st.integers(0, (1 << 130) - 1), min_size=1, max_size=5), st.integers(0, (1 << 130) - 1))
@settings(max_examples=150, deadline=None)
def test_count_and_select_bits(rows, mask):
    words = words_for(130)
    cand = np.stack([int_to_bitset(r, words) for r in rows])
    m = int_to_bitset(mask, words)
    counts = kernels.count_bits(cand, m)
    assert counts.tolist() == [(r & mask).bit_count() for r in rows]
    row_of, bits = kernels.select_bits(cand, m, counts)
    assert list(zip(row_of.tolist(), bits.tolist(), strict=True)) == naive.select_bits(rows, mask)


@st.composite
def list_tables(draw):
    """Lists of sorted cuts (ties included: an lt cut may equal an le cut) over columns
    of values drawn from the cuts themselves, their neighbours and NaN."""
    pool = draw(st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=8))
    n_columns = draw(st.integers(1, 3))
    n_rows = draw(st.integers(0, 12))
    near = pool + [np.nextafter(x, np.inf) for x in pool] + [np.nextafter(x, -np.inf) for x in pool] + [np.nan]
    values = np.array([[draw(st.sampled_from(near)) for _ in range(n_rows)] for _ in range(n_columns)], np.float64)
    n_lists = draw(st.integers(1, 5))
    columns = [draw(st.integers(0, n_columns - 1)) for _ in range(n_lists)]
    ops = [draw(st.sampled_from(OPS)) for _ in range(n_lists)]
    lt, le = [], []
    for _ in range(n_lists):
        cuts = sorted(draw(st.lists(st.sampled_from(pool), max_size=6)))
        lt.append(cuts)
        le.append(sorted(draw(st.sampled_from([c, np.nextafter(c, -np.inf)])) for c in cuts))
    return values.reshape(n_columns, n_rows), columns, ops, lt, le


@given(list_tables())
@settings(max_examples=300, deadline=None)
def test_list_ranges(table):
    from indexes.attribute_kernels import OP_CODES, list_ranges

    values, columns, ops, lt, le = table
    # the lists' cuts anywhere in the arrays, in another order and with other values
    # between them (as a plan's one array of doubles holds them)
    order = list(range(len(ops)))[::2] + list(range(len(ops)))[1::2]
    starts = np.zeros(len(ops), np.int64)
    flat_lt: list[float] = [-1e300]
    flat_le: list[float] = [-1e300]
    for l in order:
        starts[l] = len(flat_lt)
        flat_lt += lt[l] + [1e300, -1e300]
        flat_le += le[l] + [1e300, -1e300]
    ends = starts + np.array([len(c) for c in lt], np.int64)
    lo = np.empty((len(ops), values.shape[1]), np.int64)
    hi = np.empty_like(lo)
    codes = np.array([OP_CODES[op] for op in ops], np.int64)
    rows = np.arange(len(ops), dtype=np.int64)[::-1].copy()  # each list to its row, here in reverse
    flat = lambda cuts: np.array(cuts, np.float64)  # noqa: E731
    list_ranges(values, np.array(columns, np.int64), codes, flat(flat_lt), flat(flat_le), starts, ends, rows, lo, hi)
    want_lo, want_hi = naive.list_ranges(values, columns, ops, lt, le)
    assert lo[::-1].tolist() == want_lo
    assert hi[::-1].tolist() == want_hi


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="already running without JIT")
def test_kernels_pass_without_jit_and_are_covered():
    """Run this file with NUMBA_DISABLE_JIT=1 under coverage: the kernels' Python source
    passes the same tests, and the run reports how much of it the tests reach."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    data = root / ".coverage.kernels"
    run = subprocess.run(
        [sys.executable, "-m", "coverage", "run", f"--data-file={data}", "--include=*/indexes/kernels.py,*/indexes/attribute_kernels.py",
         "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__)), "-k", "not without_jit"],
        cwd=root, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = subprocess.run(
        [sys.executable, "-m", "coverage", "report", f"--data-file={data}", "--format=total"],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    data.unlink(missing_ok=True)
    total = int(report.stdout.strip() or 0)
    print(f"kernel coverage without JIT: {total}%")
    assert total >= 90, f"kernel coverage without JIT is {total}%"


@pytest.mark.parametrize("how", ["shared", "mixed"])
def test_prune_lists_cut_from_shared_arrays_seeded(how: str) -> None:
    """Seeded stress of the no-copy and the copying paths at the smallest budget (every
    list one checkpoint stride, so partial strides walk the CSR users): as the naive
    reference, which reads each list's own arrays."""
    rng = np.random.default_rng(17)
    for _ in range(200):
        n_slots = int(rng.integers(1, 100))
        lists = []
        for _ in range(3):
            n = int(rng.integers(1, 12))
            per = [sorted(set(rng.integers(0, n_slots, int(rng.integers(1, 4))).tolist())) for _ in range(n)]
            offsets = np.zeros(n + 1, np.int64)
            offsets[1:] = np.cumsum([len(u) for u in per])
            lists.append((str(rng.choice(OPS)), offsets, np.array([x for u in per for x in u], np.int32)))
        lo, hi = _random_ranges(rng, lists, 2)
        tables = KillBitsets(as_list_users(lists, how), n_slots, bitset_of(np.arange(n_slots), words_for(n_slots)), 1)
        assert _rows_as_ints(tables.prune(lo, hi)) == naive.prune((1 << n_slots) - 1, lists, lo, hi, 2)


def test_select_bits_every_position():
    """Each of a word's 64 bit positions alone, every word full, and the last word's
    top bit: select_bits names each bit (its lowest set bit is looked up, not shifted
    out), as the plain reference does."""
    words = words_for(200)
    singles = [1 << b for b in range(200)]
    rows = [*singles, (1 << 200) - 1, 1 << 199 | 1 << 63 | 1]
    cand = np.stack([int_to_bitset(r, words) for r in rows])
    mask = (1 << 200) - 1
    m = int_to_bitset(mask, words)
    row_of, bits = kernels.select_bits(cand, m, kernels.count_bits(cand, m))
    assert list(zip(row_of.tolist(), bits.tolist(), strict=True)) == naive.select_bits(rows, mask)
    assert bits[:200].tolist() == list(range(200))


def test_positions_type_at_the_int32_limit() -> None:
    """CSR offsets are int32 up to the largest user count an int32 holds, int64 past it."""
    limit = np.iinfo(np.int32).max
    assert kill_bitsets.positions_type(0) is np.int32
    assert kill_bitsets.positions_type(limit) is np.int32
    assert kill_bitsets.positions_type(limit + 1) is np.int64


@pytest.mark.parametrize("first_wide", [False, True])
def test_prune_with_offsets_of_either_type(monkeypatch: pytest.MonkeyPatch, first_wide: bool) -> None:
    """A plan's shared positions as int64 (what a plan past the int32 limit has) are
    read in place as its int32 ones are; a second part of the other type is made the
    first part's (or both int64), and both prune as the naive reference does."""
    from mqo import plan_compile

    monkeypatch.setattr(plan_compile, "positions_type", lambda rows: np.int64 if first_wide else np.int32)
    rng = np.random.default_rng(5)
    n_first, n_slots = 70, 100
    lists = []
    for k in range(4):
        n = int(rng.integers(3, 15))
        slots = range(n_first) if k < 3 else range(n_first, n_slots)
        per = [sorted(set(rng.choice(list(slots), int(rng.integers(1, 4))).tolist())) for _ in range(n)]
        offsets = np.zeros(n + 1, np.int64)
        offsets[1:] = np.cumsum([len(u) for u in per])
        lists.append((OPS[k], offsets, np.array([x for u in per for x in u], np.int32)))
    given = as_list_users(lists[:3], "shared")
    assert given[0].offsets.dtype == (np.int64 if first_wide else np.int32)
    first = KillBitsets(given, n_first, bitset_of(np.arange(n_first), words_for(n_first)), 1)
    assert first.offsets is given[0].offsets.base  # read in place, not copied
    own_second = ListUsers(*lists[3])
    tables = first.extended([own_second], n_slots, bitset_of(np.arange(n_slots), words_for(n_slots)), 1)
    assert tables.offsets.dtype == tables.offsets2.dtype == first.offsets.dtype
    tables._check()
    lo, hi = _random_ranges(rng, lists, 3)
    assert _rows_as_ints(tables.prune(lo, hi)) == naive.prune((1 << n_slots) - 1, lists, lo, hi, 3)


@pytest.mark.parametrize("n_slots", [0, 1, 63, 64, 65, (1 << 16) - 1, (1 << 16) + 9, 3 * (1 << 16) + 70])
def test_stream_bitset_is_the_slots_reading_the_stream(n_slots: int) -> None:
    """The chunked bitset of a stream's slots is the one made from their indexes, for
    every stream bit (63, the sign bit, included), across chunk and word boundaries."""
    rng = np.random.default_rng(n_slots)
    masks = rng.integers(-(1 << 63), (1 << 63) - 1, n_slots, dtype=np.int64, endpoint=True)
    masks[: n_slots // 3] = 0  # (some slots read nothing: removed queries)
    words = words_for(n_slots)
    for stream in (0, 1, 5, 62, 63):
        reading = np.flatnonzero((masks >> stream) & 1 == 1)
        got = kill_bitsets.stream_bitset(masks, stream, words)
        assert got.dtype == np.uint64 and got.shape == (words,)
        assert bitset_to_int(got) == bitset_to_int(bitset_of(reading, words))
