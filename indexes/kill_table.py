"""Which queries a failed range of predicates rules out: the QED test, transposed.

The thesis decides candidate queries query by query: a query stays a candidate when
``QED & RelPBS`` is a subset of ``SatPBS``. Over a whole predicate list that is the
same as removing every query that uses a predicate the tuple failed. In covering
order the failed predicates of a list are a prefix plus a suffix (or, for ``!=``, one
run), so with the users of each position ORed together into prefix and suffix tables
the whole test for a list is one or two lookups and one AND-NOT, whatever the number
of queries.

Masks are Python ints (bit q = query slot q). Users of one position are usually one or
a few queries, so OR over a position is cheap; the tables are checkpointed so memory
stays bounded for long lists:

* ``prefix(i)`` = OR of users of positions ``[0, i)``;
* ``suffix(i)`` = OR of users of positions ``[i, n)``;

each stored every ``stride`` positions and completed with at most ``stride - 1`` ORs.
With ``stride`` s: memory O((n / s) * q / 8) bytes for q query slots, time O(s) ORs per
lookup. ``stride`` is chosen as the smallest power of two that keeps a table under
a budget (:func:`kill_stride`). The tables are built in one numba pass over the list's
users (the batch kernels' checkpoint rows, :mod:`indexes.kernels`) and read as Python
ints, each row converted when first needed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# A list's tables are kept small (under SMALL_BUDGET_BITS each) as far as a stride of
# SHORT_STRIDE positions allows (a lookup walks up to a stride's positions in Python),
# and never larger than DEFAULT_BUDGET_BITS allows: the stride is the larger of the
# two rules' (SHORT_STRIDE from about 23,000 slots on, until the large budget needs
# more). At 20,000 slots a join list's tables were 12.5 MB and 7 ms to build, paid by
# the tuple that first needed the list; under the small budget 3 MB, and lookups cost
# the same.
SMALL_BUDGET_BITS = 1 << 24  # 2 MiB
SHORT_STRIDE = 32
DEFAULT_BUDGET_BITS = 1 << 26  # 8 MiB


def kill_stride(n: int, width: int, budget_bits: int | None = None) -> int:
    """The checkpoint stride of a list of ``n`` positions over ``width`` slot bits: the
    smallest power of two keeping a table under ``budget_bits``, or by the rule above."""

    def smallest(budget: int) -> int:
        stride = 1
        while (n // stride + 2) * width > budget and stride < n:
            stride *= 2
        return stride

    if budget_bits is not None:
        return smallest(budget_bits)
    return max(smallest(DEFAULT_BUDGET_BITS), min(smallest(SMALL_BUDGET_BITS), SHORT_STRIDE))


def mask_of(slots: Sequence[int]) -> int:
    """A Python int with the given bits set."""
    if len(slots) > 16:
        arr = np.asarray(slots, np.int64)
        selected = np.zeros(int(arr.max()) + 1, bool)
        selected[arr] = True
        return mask_of_flags(selected)
    mask = 0
    for s in slots:
        mask |= 1 << int(s)
    return mask


def mask_of_flags(selected: np.ndarray) -> int:
    """A Python int whose bit i is set where ``selected[i]`` (bools) holds."""
    return int.from_bytes(np.packbits(selected, bitorder="little").tobytes(), "little")


class KillTable:
    """One list's prefix and suffix tables. The checkpoint rows are built as ``uint64``
    words by one kernel pass over the list's users (:func:`indexes.kernels.build_checkpoints`)
    and become Python ints when first read: built in Python, a list of 20,000
    positions at 20,000 slots took ~35 ms, paid by the tuple that first met the list."""

    __slots__ = ("_ints", "_mask", "_offsets", "_tables", "_users", "any_user", "n", "stride")

    def __init__(self, users: Sequence[int], slot_bits: int = 0, budget_bits: int | None = None) -> None:
        masks = [int(m) for m in users]
        per_position = [[q for q in range(m.bit_length()) if m >> q & 1] for m in masks]
        offsets = np.zeros(len(masks) + 1, np.int64)
        offsets[1:] = np.cumsum([len(p) for p in per_position], dtype=np.int64)
        flat = np.array([q for p in per_position for q in p], np.int32)
        slot_bits = max(slot_bits, max((m.bit_length() for m in masks), default=0))
        self._build(offsets, flat, slot_bits, budget_bits)

    @classmethod
    def from_csr(
        cls, offsets: np.ndarray, flat: np.ndarray, slot_bits: int, budget_bits: int | None = None
    ) -> KillTable:
        """Users of position p are ``flat[offsets[p]:offsets[p + 1]]`` (slot numbers)."""
        table = cls.__new__(cls)
        offsets, flat = np.ascontiguousarray(offsets, np.int64), np.ascontiguousarray(flat, np.int32)
        table._build(offsets, flat, slot_bits, budget_bits)
        return table

    def _build(self, offsets: np.ndarray, flat: np.ndarray, slot_bits: int, budget_bits: int | None) -> None:
        from indexes.kernels import build_checkpoints  # numba, on first use

        n = len(offsets) - 1
        self.n = n
        width = max(1, slot_bits)
        stride = self.stride = kill_stride(n, width, budget_bits)
        words = max(1, (width + 63) // 64)
        # [prefix rows, suffix rows]: prefix row j = OR of users[0 : j * stride],
        # suffix row j = OR of users[j * stride : n]
        self._tables = (
            build_checkpoints(offsets, flat, n, stride, words, False),
            build_checkpoints(offsets, flat, n, stride, words, True),
        )
        self._ints: dict[tuple[int, int], int] = {}
        self._offsets = offsets
        self._users = flat
        self.any_user = self._row(1, 0)

        starts: list[int] | None = None
        slots: list[int] | None = None

        def mask(p: int) -> int:
            nonlocal starts, slots
            if starts is None:
                starts, slots = self._offsets.tolist(), self._users.tolist()
            assert slots is not None
            return mask_of(slots[starts[p] : starts[p + 1]])

        self._mask = mask

    def _row(self, side: int, j: int) -> int:
        """Checkpoint row ``j`` of the prefix (``side`` 0) or suffix (1) table as an int."""
        key = (side, j)
        found = self._ints.get(key)
        if found is None:
            found = self._ints[key] = int.from_bytes(self._tables[side][j].astype("<u8").tobytes(), "little")
        return found

    @property
    def users(self) -> list[int]:
        """The users' mask of every position."""
        return [self._mask(p) for p in range(self.n)]

    def prefix(self, i: int) -> int:
        """OR of the users of positions [0, i)."""
        j, r = divmod(i, self.stride)
        acc = self._row(0, j)
        base = j * self.stride
        mask = self._mask
        for p in range(base, base + r):
            acc |= mask(p)
        return acc

    def suffix(self, i: int) -> int:
        """OR of the users of positions [i, n)."""
        if i >= self.n:
            return 0
        j, r = divmod(i, self.stride)
        if r == 0:
            return self._row(1, j)
        acc = self._row(1, j + 1) if (j + 1) * self.stride < self.n else 0
        mask = self._mask
        for p in range(i, min(self.n, (j + 1) * self.stride)):
            acc |= mask(p)
        return acc

    def range(self, lo: int, hi: int) -> int:
        """OR of the users of positions [lo, hi)."""
        acc = 0
        mask = self._mask
        for p in range(lo, hi):
            acc |= mask(p)
        return acc

    def killed(self, lo: int, hi: int, negated: bool) -> int:
        """Users of the predicates that failed, given the satisfied range."""
        if negated:
            return self.range(lo, hi)
        return self.prefix(lo) | self.suffix(hi)

    def last_used(self, candidates: int) -> int:
        """Largest position used by a query in ``candidates``, or -1. A binary search
        over the suffix checkpoints (ints once read), then a walk down the one stride
        that holds it: O(log(n / stride) + stride) masks, not a walk per probe."""
        if not self.any_user & candidates:
            return -1
        lo, hi = 0, (self.n - 1) // self.stride  # suffix row lo (of [lo * stride, n)) holds one
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._row(1, mid) & candidates:
                lo = mid
            else:
                hi = mid - 1
        for p in range(min(self.n, (lo + 1) * self.stride) - 1, lo * self.stride - 1, -1):
            if self._mask(p) & candidates:
                return p
        raise AssertionError("a suffix checkpoint holds a candidate its positions do not")

    def first_used(self, candidates: int) -> int:
        """Smallest position used by a query in ``candidates``, or -1 (as
        :meth:`last_used`, over the prefix checkpoints)."""
        if not self.any_user & candidates:
            return -1
        lo, hi = 1, self.n // self.stride + 1  # prefix row hi (of [0, hi * stride)) holds one
        while lo < hi:
            mid = (lo + hi) // 2
            if self._row(0, mid) & candidates:
                hi = mid
            else:
                lo = mid + 1
        for p in range((lo - 1) * self.stride, min(self.n, lo * self.stride)):
            if self._mask(p) & candidates:
                return p
        raise AssertionError("a prefix checkpoint holds a candidate its positions do not")

    def _check(self) -> None:
        n, users = self.n, self.users
        for i in range(n + 1):
            want_prefix = 0
            for u in users[:i]:
                want_prefix |= u
            want_suffix = 0
            for u in users[i:]:
                want_suffix |= u
            assert self.prefix(i) == want_prefix, f"prefix({i}) wrong"
            assert self.suffix(i) == want_suffix, f"suffix({i}) wrong"
