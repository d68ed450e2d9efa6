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


def list_ranges(
    values: np.ndarray, columns: Sequence[int], ops: Sequence[str], lt: list[list[float]], le: list[list[float]]
) -> tuple[list[list[int]], list[list[int]]]:
    """``indexes.attribute_kernels.list_ranges`` by counting: list l's cuts are
    ``lt[l]``, ``le[l]``; NULL (NaN) gives lo = -1, hi = n."""
    los, his = [], []
    for col, op, lts, les in zip(columns, ops, lt, le, strict=True):
        n = len(lts)
        lo_row, hi_row = [], []
        for x in values[col].tolist():
            lo, hi = 0, n
            if x != x:
                lo = -1
            else:
                below_lt = sum(1 for c in lts if c <= x)  # searchsorted(lt, x, 'right')
                below_le = sum(1 for c in les if c < x)  # searchsorted(le, x, 'left')
                if op == "<":
                    lo = below_lt
                elif op == "<=":
                    lo = below_le
                elif op == ">":
                    hi = below_le
                elif op == ">=":
                    hi = below_lt
                else:
                    lo, hi = below_le, below_lt
            lo_row.append(lo)
            hi_row.append(hi)
        los.append(lo_row)
        his.append(hi_row)
    return los, his


def insert_user(positions: list[tuple[float, list[int]]], value: float, slot: int) -> list[tuple[float, list[int]]]:
    """A list as (constant, users) pairs, constants ascending, with ``slot`` added:
    to the users of ``value``'s position if there is one (last), else at a new
    position in order."""
    out = [(c, list(us)) for c, us in positions]
    for c, us in out:
        if c == value:
            us.append(slot)
            return out
    out.append((value, [slot]))
    return sorted(out, key=lambda pair: pair[0])
