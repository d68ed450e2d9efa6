"""Plain-Python references for every kernel of indexes/kernels.py.

Bitsets here are Python ints (bit s = slot s); the tests convert the kernels' uint64
rows to ints and compare.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def users_mask(offsets: Sequence[int], users: Sequence[int], lo: int, hi: int) -> int:
    mask = 0
    for p in range(lo, hi):
        for k in range(offsets[p], offsets[p + 1]):
            mask |= 1 << int(users[k])
    return mask


def checkpoints(offsets: Sequence[int], users: Sequence[int], n: int, stride: int, suffix: bool) -> list[int]:
    rows = n // stride + 2
    if not suffix:
        return [users_mask(offsets, users, 0, min(n, j * stride)) for j in range(rows)]
    return [users_mask(offsets, users, min(n, j * stride), n) for j in range(rows)]


def prune(
    base: int,
    lists: Sequence[tuple[str, Sequence[int], Sequence[int]]],
    lo: Sequence[Sequence[int]],
    hi: Sequence[Sequence[int]],
    n_tuples: int,
) -> list[int]:
    """``lists`` are (op, offsets, users); returns each tuple's candidates."""
    out = []
    for i in range(n_tuples):
        cand = base
        for l, (op, offsets, users) in enumerate(lists):
            n = len(offsets) - 1
            a, b = int(lo[l][i]), int(hi[l][i])
            if a == -1:
                cand &= ~users_mask(offsets, users, 0, n)
            elif op in ("<", "<="):
                cand &= ~users_mask(offsets, users, 0, a)
            elif op in (">", ">="):
                cand &= ~users_mask(offsets, users, b, n)
            elif op == "=":
                cand &= ~(users_mask(offsets, users, 0, a) | users_mask(offsets, users, b, n))
            else:
                cand &= ~users_mask(offsets, users, a, b)
        out.append(cand)
    return out


def select_bits(rows: Sequence[int], mask: int) -> list[tuple[int, int]]:
    return [(i, b) for i, row in enumerate(rows) for b in range((row & mask).bit_length()) if (row & mask) >> b & 1]


def int_to_bitset(mask: int, words: int) -> np.ndarray:
    """A Python-int slot mask as a bitset row (the kernels' layout)."""
    return np.frombuffer(mask.to_bytes(words * 8, "little"), dtype="<u8").astype(np.uint64)
