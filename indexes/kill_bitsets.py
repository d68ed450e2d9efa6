"""Kill tables as bitsets, for deciding many tuples against many queries per kernel call.

:class:`KillBitsets` gathers the lists one stream's tuples are tested against (its
attribute lists) into one checkpoint table (see :mod:`indexes.kernels` for the bit
layout), so one :func:`~indexes.kernels.prune` call takes a whole batch of tuples
through every list. The stride of each list's checkpoints is the smallest power of two
that keeps the whole table within ``budget_bytes``: memory is
O(sum over lists of (n / stride) * slots / 8) and the work per tuple and list is one
row (slots / 64 words) plus the users of fewer than ``stride`` positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from indexes import kernels

DEFAULT_BUDGET_BYTES = 256 << 20

MODE_OF_OP = {
    "<": kernels.MODE_LESS,
    "<=": kernels.MODE_LESS,
    ">": kernels.MODE_GREATER,
    ">=": kernels.MODE_GREATER,
    "=": kernels.MODE_EQUAL,
    "!=": kernels.MODE_NOT_EQUAL,
}


def words_for(n_slots: int) -> int:
    return max(1, (n_slots + 63) // 64)


def bitset_of(slots: np.ndarray, words: int) -> np.ndarray:
    """A bitset row with the given slot bits set."""
    row = np.zeros(words, np.uint64)
    if len(slots):
        s = np.asarray(slots, np.int64)
        np.bitwise_or.at(row, s >> 6, np.left_shift(np.uint64(1), (s & 63).astype(np.uint64)))
    return row


def bitset_to_int(row: np.ndarray) -> int:
    return int.from_bytes(row.astype("<u8", copy=False).tobytes(), "little")


@dataclass
class ListUsers:
    """One list, as the kernels see it: its mode, size and users in covering order."""

    op: str
    offsets: np.ndarray  # int64, n + 1
    users: np.ndarray  # int32 slot numbers

    @property
    def n(self) -> int:
        return len(self.offsets) - 1


class KillBitsets:
    def __init__(
        self, lists: list[ListUsers], n_slots: int, base: np.ndarray, budget_bytes: int = DEFAULT_BUDGET_BYTES
    ) -> None:
        self.words = words = words_for(n_slots)
        self.base = base
        count = len(lists)
        self.modes = np.array([MODE_OF_OP[lst.op] for lst in lists], np.int8)
        self.ns = np.array([lst.n for lst in lists], np.int64)
        self.strides = np.ones(count, np.int64)
        self.prefix_rows = np.zeros(count, np.int64)
        self.suffix_rows = np.zeros(count, np.int64)
        self.any_rows = np.zeros(count, np.int64)
        self.csr_base = np.zeros(count, np.int64)
        per_list = max(budget_bytes // max(count, 1), 4 * words * 8)
        tables: list[np.ndarray] = []
        offsets: list[np.ndarray] = []
        users: list[np.ndarray] = []
        rows = 0
        users_so_far = 0
        positions_so_far = 0
        for l, lst in enumerate(lists):
            mode = self.modes[l]
            n = lst.n
            sides = 2 if mode == kernels.MODE_EQUAL else 1
            stride = 1
            while (n // stride + 2) * sides * words * 8 > per_list and stride < max(n, 1):
                stride *= 2
            self.strides[l] = stride
            self.csr_base[l] = positions_so_far
            offsets.append(lst.offsets[:-1] + users_so_far if l < count - 1 else lst.offsets + users_so_far)
            users.append(lst.users.astype(np.int32, copy=False))
            positions_so_far += n
            users_so_far += len(lst.users)
            if mode in (kernels.MODE_LESS, kernels.MODE_EQUAL):
                table = kernels.build_checkpoints(lst.offsets, lst.users, n, stride, words, False)
                self.prefix_rows[l] = rows
                self.any_rows[l] = rows + table.shape[0] - 1
                tables.append(table)
                rows += table.shape[0]
            if mode in (kernels.MODE_GREATER, kernels.MODE_EQUAL):
                table = kernels.build_checkpoints(lst.offsets, lst.users, n, stride, words, True)
                self.suffix_rows[l] = rows
                self.any_rows[l] = rows
                tables.append(table)
                rows += table.shape[0]
            if mode == kernels.MODE_NOT_EQUAL:
                self.any_rows[l] = rows
                tables.append(bitset_of(lst.users, words)[None, :])
                rows += 1
        self.table = np.concatenate(tables) if tables else np.zeros((1, words), np.uint64)
        if offsets:
            self.offsets = np.concatenate(offsets).astype(np.int64)
            self.users = np.concatenate(users).astype(np.int32)
        else:
            self.offsets = np.zeros(1, np.int64)
            self.users = np.zeros(0, np.int32)

    @property
    def nbytes(self) -> int:
        return int(self.table.nbytes + self.offsets.nbytes + self.users.nbytes)

    def _arrays(self) -> tuple:
        return (
            self.modes,
            self.ns,
            self.strides,
            self.prefix_rows,
            self.suffix_rows,
            self.any_rows,
            self.csr_base,
            self.table,
            self.offsets,
            self.users,
        )

    def flags(self, lo: np.ndarray, hi: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """Per tuple and mask, whether any candidate left after pruning is in the mask
        (``[N, M]`` booleans), without making the candidate matrix."""
        n = lo.shape[1] if lo.ndim == 2 else 0
        if not n:
            return np.zeros((0, len(masks)), bool)
        return kernels.prune_flags(
            masks,
            self.base,
            *self._arrays(),
            np.ascontiguousarray(lo, np.int64),
            np.ascontiguousarray(hi, np.int64),
        )

    def prune(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Candidate slots (``[N, words]``) of N tuples given each list's satisfied
        range per tuple (``lo``/``hi`` ``[L, N]``; ``lo`` NULL: nothing satisfied)."""
        n = lo.shape[1] if lo.ndim == 2 else 0
        cand = np.empty((n, self.words), np.uint64)
        if n:
            kernels.prune(
                cand,
                self.base,
                *self._arrays(),
                np.ascontiguousarray(lo, np.int64),
                np.ascontiguousarray(hi, np.int64),
            )
        return cand
