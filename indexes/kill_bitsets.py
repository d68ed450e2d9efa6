"""Kill tables as bitsets, for deciding many tuples against many queries per kernel call.

:class:`KillBitsets` gathers the lists one stream's tuples are tested against (its
attribute lists) into one checkpoint table (see :mod:`indexes.kernels` for the bit
layout), so one :func:`~indexes.kernels.prune` call takes a whole batch of tuples
through every list. Memory is O(sum over lists of (n / stride) * slots / 8) and the
work per tuple and list is one row (slots / 64 words) plus the users of fewer than
``stride`` positions. Each list's stride is a power of two: the largest whose users
walked still cost well under a row (:data:`WALK_SHARE`); or, where the rows of that
stride would not fit the list's share of ``budget_bytes``, the smallest stride whose
rows do (any number). A smaller stride would buy almost nothing per
tuple and cost a table many times larger, to build (every whole compile of the plan
builds it again) and to keep in cache: at 20,000 subscriptions stride 4 meant 239 MB
against 15 MB at stride 64, and tuples were no faster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from indexes import kernel_modes as modes

CHECK_SAMPLE = 4  # checkpoint rows per list _check rebuilds besides the first and last two
SELECT_CHUNK_BYTES = 64 << 20  # the candidate buffer of one select call
# per stream: at a million slots of 20 lists, strides of ~35,000 positions of a list
# of doubles (128 MiB held ~17,000 and 256 MiB ~8,300): each halving cuts the
# process's peak by the half it drops and doubles the walk of a failed run's users
# (kernels._fail_lists), at a million FLOAT subscriptions 1.5 -> 2 ms per event;
# with 20 lists of distinct constants it binds from about 50,000 slots (128 MiB:
# 100,000), below which a list's stride is the walk rule's (_build)
DEFAULT_BUDGET_BYTES = 64 << 20
# a list's stride doubles while a stride's users number at most 1/WALK_SHARE of a
# row's words: walking them (scattered bit clears) costs about what reading a row does
WALK_SHARE = 4
# the stride of a list kept without checkpoints (every failed user walked): a list that
# takes insertions in place (mqo.live_delta), whose only rows are "none" and "all"
WALK_STRIDE = 1 << 40

MODE_OF_OP = {
    "<": modes.MODE_LESS,
    "<=": modes.MODE_LESS,
    ">": modes.MODE_GREATER,
    ">=": modes.MODE_GREATER,
    "=": modes.MODE_EQUAL,
    "!=": modes.MODE_NOT_EQUAL,
}


def positions_type(users: int) -> type[np.signedinteger]:
    """The type of CSR offsets into ``users`` users: int32 while they fit (a list's
    positions cost half: 33 MB fewer at a million subscriptions of 20 predicates),
    else int64. The kernels take either."""
    return np.int32 if users <= np.iinfo(np.int32).max else np.int64


def words_for(n_slots: int) -> int:
    return max(1, (n_slots + 63) // 64)


def bitset_of(slots: np.ndarray, words: int) -> np.ndarray:
    """A bitset row with the given slot bits set."""
    selected = np.zeros(words * 64, bool)
    selected[np.asarray(slots, np.int64)] = True
    return np.packbits(selected, bitorder="little").view("<u8").astype(np.uint64, copy=False)


def stream_bitset(stream_masks: np.ndarray, stream: int, words: int) -> np.ndarray:
    """A bitset row of the slots whose stream mask (int64 per slot) has bit
    ``stream``, made a chunk of slots at a time: no slot-sized temporary (at a million
    slots an index array and two masks' worth, 17 MB, at the kernel tables' peak)."""
    out = np.zeros(words * 8, np.uint8)
    bit = np.int64(1) << np.int64(stream)
    step = 1 << 16  # (a multiple of 8: each chunk's bits start on a byte)
    for start in range(0, len(stream_masks), step):
        packed = np.packbits((stream_masks[start : start + step] & bit) != 0, bitorder="little")
        out[start // 8 : start // 8 + len(packed)] = packed
    return out.view("<u8").astype(np.uint64, copy=False)


def bitset_to_int(row: np.ndarray) -> int:
    return int.from_bytes(row.astype("<u8", copy=False).tobytes(), "little")


def set_bits(rows: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, slot) of every set bit of ``rows[i] & mask``, row-major (two passes of the
    kernels: count, then fill)."""
    from indexes import kernels  # numba, on first use (importing mqo stays light)

    return kernels.select_bits(rows, mask, kernels.count_bits(rows, mask))


def slots_of(mask: int) -> np.ndarray:
    """The set bits of a mask, ascending."""
    if mask < (1 << 64):
        out = []
        while mask:
            low = mask & -mask
            out.append(low.bit_length() - 1)
            mask ^= low
        return np.array(out, np.int64)
    # the kernels find a wide mask's few set bits for about the cost of one numpy call
    # (on writable words, the batch path's kernel types: no second compiled variant)
    words = np.frombuffer(bytearray(mask.to_bytes(8 * ((mask.bit_length() + 63) >> 6), "little")), "<u8")
    return set_bits(words[None, :], words)[1]


# the per-list arrays, as _build makes them and the kernels take them
PER_LIST = ("modes", "ns", "strides", "prefix_rows", "suffix_rows", "any_rows", "csr_base", "part", "word_lo")
# the second part of tables built whole: no lists (the kernels take both parts' arrays)
_NO_PART = (np.zeros((1, 1), np.uint64), np.zeros(1, np.int32), np.zeros(0, np.int32))


@dataclass
class ListUsers:
    """One list, as the kernels see it: its mode, size and users in covering order,
    ``users[offsets[p]:offsets[p + 1]]`` for position ``p``. ``offsets`` may be a view
    (from position ``csr_base`` on) of an array of positions that other lists share,
    with ``users``: lists that all share theirs are read in place, not copied."""

    op: str
    offsets: np.ndarray  # int32 or int64 (positions_type), n + 1
    users: np.ndarray  # int32 slot numbers
    csr_base: int = 0

    @property
    def n(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_users(self) -> int:
        return int(self.offsets[-1] - self.offsets[0])


class KillBitsets:
    """One stream's attribute lists as checkpoint tables for the kernels.

    :meth:`extended` adds lists (those of queries registered since) without touching
    or copying what is already built: the new lists' tables cover only the words of
    the new slots and go, with their CSR arrays, to a second part, so a registration
    costs the size of what it adds, not a rebuild (or a copy) of every list."""

    def __init__(
        self, lists: list[ListUsers], n_slots: int, base: np.ndarray, budget_bytes: int = DEFAULT_BUDGET_BYTES
    ) -> None:
        self.n_slots = n_slots
        self.words = words_for(n_slots)
        self.base = base
        self.parts = 1
        per_list, table, offsets, users = _build(lists, 0, self.words, budget_bytes, 0)
        self._set_lists(per_list, (table, offsets, users), _NO_PART)

    def extended(
        self, lists: list[ListUsers], n_slots: int, base: np.ndarray, budget_bytes: int = DEFAULT_BUDGET_BYTES
    ) -> KillBitsets:
        """These tables plus ``lists``, whose users are all slots past this table's
        (``>= self.n_slots``), for ``n_slots`` slots in all; ``base``: the candidates a
        tuple starts from (slots removed since are left out of it). Shares this
        table; only the new lists' (narrow) table is built."""
        per_list, table2, offsets2, users2 = _build(lists, self.n_slots >> 6, words_for(n_slots), budget_bytes, 1)
        return self.joined(per_list, (table2, offsets2, users2), n_slots, base)

    def joined(
        self,
        per_list: dict[str, np.ndarray],
        second: tuple[np.ndarray, np.ndarray, np.ndarray],
        n_slots: int,
        base: np.ndarray,
        merged: dict[str, np.ndarray] | None = None,
    ) -> KillBitsets:
        """These tables (built whole) and a second part: its lists' per-list arrays (as
        :func:`_build` makes them, ``part`` 1) and its (checkpoint table, CSR offsets,
        users), the table's rows over the words from this table's last on. Shares
        both parts' arrays. ``merged``: both parts' per-list arrays as an earlier
        join over the same lists made them, their second part's sizes and CSR
        positions written over with ``per_list``'s (no arrays made)."""
        if self.parts != 1:
            raise ValueError("only tables built whole can be extended")
        out = KillBitsets.__new__(KillBitsets)
        out.n_slots = n_slots
        out.words = words_for(n_slots)
        out.base = base
        out.parts = 2
        if merged is None:
            merged = {name: np.concatenate([getattr(self, name), per_list[name]]) for name in PER_LIST}
        else:
            first_lists = len(self.ns)
            if len(merged["ns"]) != first_lists + len(per_list["ns"]):
                raise ValueError("the earlier join was over other lists")
            merged["ns"][first_lists:] = per_list["ns"]
            merged["csr_base"][first_lists:] = per_list["csr_base"]
        # the kernels take both parts' offsets as one type: the first part's (shared,
        # not copied), wider only if the second's users need it
        table2, offsets2, users2 = second
        common = np.promote_types(self.offsets.dtype, positions_type(len(users2)))
        first = (self.table, self.offsets.astype(common, copy=False), self.users)
        out._set_lists(merged, first, (table2, offsets2.astype(common, copy=False), users2), self.first_spans)
        return out

    def _set_lists(
        self,
        per_list: dict[str, np.ndarray],
        first: tuple[np.ndarray, np.ndarray, np.ndarray],
        second: tuple[np.ndarray, np.ndarray, np.ndarray],
        first_spans: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """The per-list arrays, and each part's (checkpoint table, CSR offsets, users);
        ``first_spans``: the first part's lists' spans, if known (:func:`_user_spans`)."""
        self.modes = per_list["modes"]
        self.ns = per_list["ns"]
        self.strides = per_list["strides"]
        self.prefix_rows = per_list["prefix_rows"]
        self.suffix_rows = per_list["suffix_rows"]
        self.any_rows = per_list["any_rows"]
        self.csr_base = per_list["csr_base"]
        self.part = per_list["part"]
        self.word_lo = per_list["word_lo"]
        self.table, self.offsets, self.users = first
        self.table2, self.offsets2, self.users2 = second
        # The words a list's rows can have bits in: its users'. A tuple's row is pruned
        # over those only (each shape's queries are a run of slots: at 10,000 queries of
        # seven shapes a list's rows span a seventh of the words). The first part's lists
        # never change (a registration adds lists to the second part, whose narrow
        # table is taken whole), so their spans are found once per whole compile.
        n_first = int((self.part == 0).sum())
        if first_spans is None:
            first_spans = _user_spans(self.ns[:n_first], self.csr_base[:n_first], self.offsets, self.users)
        self.first_spans = first_spans
        self.span_lo = np.zeros(len(self.ns), np.int64)
        self.span_hi = np.full(len(self.ns), self.table2.shape[1], np.int64)
        self.span_lo[:n_first], self.span_hi[:n_first] = first_spans
        # the kernels' arguments, gathered once
        self.arrays = (
            self.modes,
            self.ns,
            self.strides,
            self.prefix_rows,
            self.suffix_rows,
            self.any_rows,
            self.csr_base,
            self.part,
            self.word_lo,
            self.span_lo,
            self.span_hi,
            self.table,
            self.table2,
            self.offsets,
            self.users,
            self.offsets2,
            self.users2,
        )

    def _check(self, sample: int = CHECK_SAMPLE) -> None:
        """Assert the tables' invariants (``check=True``): per-list arrays of one length,
        valid modes, strides in range, parts and the words their rows cover,
        checkpoint rows in range, CSR arrays in order with users among the slots; and
        checkpoint rows equal to the OR of the users they stand for, rebuilt from the
        CSR arrays for the empty, the full and ``sample`` more rows of every list."""
        per_list = (self.modes, self.ns, self.strides, self.prefix_rows, self.suffix_rows, self.any_rows)
        count = len(self.modes)
        assert all(len(a) == count for a in (*per_list, self.csr_base, self.part, self.word_lo)), (
            "per-list arrays of different lengths"
        )
        assert self.words == words_for(self.n_slots) and self.base.shape == (self.words,), "words and slots differ"
        assert not (bitset_to_int(self.base) >> self.n_slots), "a base candidate past the slots"
        assert self.parts in (1, 2) and set(self.part.tolist()) <= set(range(self.parts)), "a list in no part"
        first_words = {0: 0, 1: self.words - self.table2.shape[1]} if self.parts == 2 else {0: 0}
        parts = ((self.table, self.offsets, self.users), (self.table2, self.offsets2, self.users2))
        for table, offsets, users in parts[: self.parts]:
            assert table.ndim == 2 and table.dtype == np.uint64, "a checkpoint table of the wrong shape"
            assert offsets.dtype in (np.int32, np.int64) and users.dtype == np.int32, "CSR arrays of the wrong types"
            assert offsets.dtype == positions_type(len(users)) or offsets.dtype == np.int64, "offsets too narrow"
        for l in range(count):
            mode, n, stride, part = int(self.modes[l]), int(self.ns[l]), int(self.strides[l]), int(self.part[l])
            assert mode in MODE_OF_OP.values(), f"list {l}: mode {mode}"
            walked = stride == WALK_STRIDE and n < stride  # a list taking insertions: no checkpoints
            assert stride > 0, f"list {l}: stride {stride}"
            assert walked or stride < 2 * max(n, 1), f"list {l}: stride {stride} for {n} positions"
            assert walked or mode != modes.MODE_NOT_EQUAL or stride == 1, f"list {l}: a != list with stride {stride}"
            assert int(self.word_lo[l]) == first_words[part], f"list {l}: its rows start at another word"
            table, offsets, users = parts[part]
            at = int(self.csr_base[l])
            assert at >= 0 and at + n < len(offsets), f"list {l}: CSR positions out of range"
            mine = offsets[at : at + n + 1]  # shared arrays may have room past the lists
            assert (np.diff(mine) >= 0).all() and mine[0] >= 0 and mine[-1] <= len(users), f"list {l}: CSR disorder"
            slots = users[int(mine[0]) : int(mine[-1])]
            low, high = first_words[part] * 64, min(self.n_slots, (first_words[part] + table.shape[1]) * 64)
            inside = not len(slots) or (low <= int(slots.min()) and int(slots.max()) < high)
            assert inside, f"list {l}: a user out of its part's slots"
            if part == 0 and len(slots):
                lo, hi = int(self.span_lo[l]), int(self.span_hi[l])
                assert lo * 64 <= int(slots.min()) and int(slots.max()) < hi * 64, f"list {l}: a user past its span"
            self._check_rows(l, table, mine, users, sample)

    def _check_rows(self, l: int, table: np.ndarray, offsets: np.ndarray, users: np.ndarray, sample: int) -> None:
        """List ``l``'s checkpoint rows against its users (``offsets`` its positions)."""
        mode, n, stride = int(self.modes[l]), int(self.ns[l]), int(self.strides[l])
        lo_word = int(self.word_lo[l])
        width = table.shape[1]

        def users_of(a: int, b: int) -> np.ndarray:
            """The OR of the users of positions [a, b), over the table's words."""
            slots = users[int(offsets[min(a, n)]) : int(offsets[min(b, n)])]
            return bitset_of(slots, lo_word + width)[lo_word:]

        rows = n // stride + 2
        picks = sorted({0, 1, rows - 2, rows - 1, *np.linspace(0, rows - 1, sample + 2).astype(int).tolist()})
        if mode in (modes.MODE_LESS, modes.MODE_EQUAL):
            first = int(self.prefix_rows[l])
            assert first >= 0 and first + rows <= table.shape[0], f"list {l}: prefix rows out of the table"
            if mode == modes.MODE_LESS:
                assert int(self.any_rows[l]) == first + rows - 1, f"list {l}: its any row is not its last prefix"
            for j in picks:
                assert (table[first + j] == users_of(0, j * stride)).all(), f"list {l}: prefix row {j} wrong"
        if mode in (modes.MODE_GREATER, modes.MODE_EQUAL):
            first = int(self.suffix_rows[l])
            assert first >= 0 and first + rows <= table.shape[0], f"list {l}: suffix rows out of the table"
            assert int(self.any_rows[l]) == first, f"list {l}: its any row is not its first suffix"
            for j in picks:
                assert (table[first + j] == users_of(j * stride, n)).all(), f"list {l}: suffix row {j} wrong"
        if mode == modes.MODE_NOT_EQUAL:
            row = int(self.any_rows[l])
            assert 0 <= row < table.shape[0], f"list {l}: its row out of the table"
            assert (table[row] == users_of(0, n)).all(), f"list {l}: its row is not every user"

    @property
    def nbytes(self) -> int:
        parts = (self.table, self.offsets, self.users, self.table2, self.offsets2, self.users2)
        return sum(int(a.nbytes) for a in parts)

    def select(
        self, lo: np.ndarray, hi: np.ndarray, masks: np.ndarray, always: int = 0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One pass over N tuples (``lo``/``hi`` as for :meth:`prune`, up to 8 masks):
        per tuple a code whose bit m says whether a candidate left is in ``masks[m]``,
        or'ed with ``always`` (int8 ``[N]``); the candidate rows of the tuples that meet
        ``masks[0]`` or ``masks[1]``, in order; and per tuple its row there (-1: not
        kept)."""
        n = lo.shape[1] if lo.ndim == 2 else 0
        # the kernel writes every tuple's flag and row (a pushed tuple's batch is one
        # row: each array call is a good part of its cost)
        flags = np.empty(n, np.int8)
        kept = np.empty(n, np.int64)
        if not n:
            return flags, np.zeros((0, self.words), np.uint64), kept
        import indexes.kernels as kernels  # numba, on first use

        lo = np.ascontiguousarray(lo, np.int64)
        hi = np.ascontiguousarray(hi, np.int64)
        # a buffer for every tuple's row, written only for wanted ones (untouched pages
        # are never resident), in chunks so its address space stays modest
        step = max(1, SELECT_CHUNK_BYTES // (8 * max(self.words, 1)))
        rows, first = [], 0
        for start in range(0, n, step):
            end = min(n, start + step)
            cand = np.empty((end - start, self.words), np.uint64)
            k = kernels.prune_select(
                masks, self.base, *self.arrays, lo, hi, start, end, always, flags, kept, first, cand
            )
            rows.append(cand if k == end - start else cand[:k].copy())
            first += k
        return flags, rows[0] if len(rows) == 1 else np.concatenate(rows), kept

    def prune(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Candidate slots (``[N, words]``) of N tuples given each list's satisfied
        range per tuple (``lo``/``hi`` ``[L, N]``; ``lo`` NULL: nothing satisfied)."""
        n = lo.shape[1] if lo.ndim == 2 else 0
        cand = np.empty((n, self.words), np.uint64)
        if n:
            from indexes import kernels  # numba, on first use

            kernels.prune(
                cand,
                self.base,
                *self.arrays,
                np.ascontiguousarray(lo, np.int64),
                np.ascontiguousarray(hi, np.int64),
            )
        return cand


def _user_spans(
    ns: np.ndarray, csr_base: np.ndarray, offsets: np.ndarray, users: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per list of the first part, the words its users lie in: ``[lo, hi)`` (empty for
    a list without users)."""
    lo = np.zeros(len(ns), np.int64)
    hi = np.zeros(len(ns), np.int64)
    for l, (n, base) in enumerate(zip(ns.tolist(), csr_base.tolist(), strict=True)):
        mine = users[int(offsets[base]) : int(offsets[base + n])]
        if len(mine):
            lo[l], hi[l] = int(mine.min()) >> 6, (int(mine.max()) >> 6) + 1
    return lo, hi


def _build(
    lists: list[ListUsers], first_word: int, words: int, budget_bytes: int, part: int
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """Per-list arrays, checkpoint table (rows over words ``[first_word, words)``) and
    CSR arrays of ``lists``, the lists of kernel part ``part``."""
    from indexes import kernels  # numba, on first use

    count = len(lists)
    width = words - first_word
    shift = first_word * 64
    per_list: dict[str, np.ndarray] = {
        "modes": np.array([MODE_OF_OP[lst.op] for lst in lists], np.int8),
        "ns": np.array([lst.n for lst in lists], np.int64),
        "strides": np.ones(count, np.int64),
        "prefix_rows": np.zeros(count, np.int64),
        "suffix_rows": np.zeros(count, np.int64),
        "any_rows": np.zeros(count, np.int64),
        "csr_base": np.zeros(count, np.int64),
        "part": np.full(count, part, np.int8),
        "word_lo": np.full(count, first_word, np.int64),
    }
    per_budget = max(budget_bytes // max(count, 1), 4 * width * 8)
    flat_offsets, flat_users, bases = _shared_csr(lists)
    per_list["csr_base"][:] = bases
    # strides and row numbers first, so the one table is made at its size and each
    # list's rows are written into it: joining the lists' tables at the end held
    # them twice (at a million slots, 20 lists: 250 MB more at the peak)
    rows = 0
    for l, lst in enumerate(lists):
        mode = per_list["modes"][l]
        n = lst.n
        sides = 2 if mode == modes.MODE_EQUAL else 1
        per_position = lst.n_users / max(n, 1)
        stride = 1  # (a != list's: its one row is every user, its failed run is walked)
        while mode != modes.MODE_NOT_EQUAL and 2 * stride * per_position * WALK_SHARE <= width and stride < max(n, 1):
            stride *= 2
        if mode != modes.MODE_NOT_EQUAL and (n // stride + 2) * sides * width * 8 > per_budget:
            # the smallest stride whose rows fit the list's share of the budget (any
            # stride: the next power of two could leave half the share unused, and
            # walk twice as far)
            fit = per_budget // (sides * width * 8)
            stride = n // (fit - 1) + 1 if fit >= 3 else max(n, 1)
        per_list["strides"][l] = stride
        height = n // stride + 2
        if mode in (modes.MODE_LESS, modes.MODE_EQUAL):
            per_list["prefix_rows"][l] = rows
            per_list["any_rows"][l] = rows + height - 1
            rows += height
        if mode in (modes.MODE_GREATER, modes.MODE_EQUAL):
            per_list["suffix_rows"][l] = rows
            per_list["any_rows"][l] = rows
            rows += height
        if mode == modes.MODE_NOT_EQUAL:
            per_list["any_rows"][l] = rows
            rows += 1
    table = np.empty((rows, width), np.uint64) if rows else np.zeros((1, max(width, 1)), np.uint64)
    shifted_users: dict[int, np.ndarray] = {}
    for l, lst in enumerate(lists):
        mode, n, stride = per_list["modes"][l], lst.n, int(per_list["strides"][l])
        # the table's rows cover words [first_word, words): slot numbers shift with them
        shifted = lst.users
        if shift:
            known = shifted_users.get(id(lst.users))
            if known is None:
                known = shifted_users[id(lst.users)] = lst.users.astype(np.int32) - shift
            shifted = known
        # each list's rows written in place: a list's own table (13 MB per list at a
        # million slots) is never made beside the whole one
        if mode in (modes.MODE_LESS, modes.MODE_EQUAL):
            kernels.fill_checkpoints(table, int(per_list["prefix_rows"][l]), lst.offsets, shifted, n, stride, False)
        if mode in (modes.MODE_GREATER, modes.MODE_EQUAL):
            kernels.fill_checkpoints(table, int(per_list["suffix_rows"][l]), lst.offsets, shifted, n, stride, True)
        if mode == modes.MODE_NOT_EQUAL:
            table[int(per_list["any_rows"][l])] = bitset_of(shifted[lst.offsets[0] : lst.offsets[-1]], width)
    return per_list, table, flat_offsets, flat_users


def _shared_csr(lists: list[ListUsers]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """One array of positions and one of users for the kernels, and each list's first
    position in it: the lists' own when they all share one pair (a plan's lists do,
    ``mqo.plan_compile.SharedCsr``), else the lists' entries copied into new ones."""
    if not lists:
        return np.zeros(1, np.int32), np.zeros(0, np.int32), []
    users, positions = lists[0].users, lists[0].offsets.base
    if (
        isinstance(positions, np.ndarray)
        and users.dtype == np.int32
        and positions.dtype in (np.int32, np.int64)
        and all(lst.users is users and is_view_at(lst.offsets, positions, lst.csr_base) for lst in lists)
    ):
        return positions, users, [lst.csr_base for lst in lists]
    offsets: list[np.ndarray] = []
    own: list[np.ndarray] = []
    bases = []
    users_so_far = 0
    positions_so_far = 0
    for lst in lists:
        first = int(lst.offsets[0])
        offsets.append(lst.offsets[:-1] - first + users_so_far)
        own.append(lst.users[first : int(lst.offsets[-1])].astype(np.int32, copy=False))
        bases.append(positions_so_far)
        positions_so_far += lst.n
        users_so_far += lst.n_users
    offsets.append(np.array([users_so_far], np.int64))
    joined = np.concatenate(offsets).astype(positions_type(users_so_far))
    return joined, np.concatenate(own).astype(np.int32), bases


def is_view_at(view: np.ndarray, whole: np.ndarray, at: int) -> bool:
    """``view`` is ``whole[at : at + len(view)]``, the very memory."""
    step = whole.itemsize
    return (
        view.base is whole
        and view.dtype == whole.dtype
        and view.strides == (step,)
        and view.ctypes.data - whole.ctypes.data == at * step
    )
