"""A list's constants sorted into covering order, straight into CSR arrays.

A list is made from its rows (constant, slot) in any order: its distinct constants
ascending, and the slots using each (their order within a position is free: a
position's users are a set). At a million rows a list, the sort is most of a plan's
compile, so it sorts one int64 (or uint64) key per row with numpy's vectorized sort,
the row's slot (or its row number) packed into the key's low bits, rather than an
argsort of the doubles and two gathers through its permutation:

* integers (every INTEGER column's constants, when integral doubles within 2**53 whose
  range and slots fit 63 bits): ``(value - low) << shift | slot``;
* other doubles: their order-preserving bit keys (a double's bits, the magnitude's
  bits flipped when negative: the keys sort as the doubles do, and are equal exactly
  when the doubles are), less the smallest, ``key << shift | slot`` when that fits 64
  bits, else the key's high bits and the row number: the full keys gathered in that
  order are then checked ascending (constants of bounded precision, such as decimals
  of one place, differ in their high bits), and only where they are not is the
  argsort by value used;
* NaN (each its own position, last) or -0.0 (one position with 0.0) in a list: the
  argsort by value, whose answer they have always had.

Every strategy gives the argsort's positions: the same distinct constants and the same
users of each. A list's work arrays (a copy of its constants, the packed keys, the row
numbers) are a :class:`Scratch`'s, made at the largest list's size once per compile
and reused list after list: made anew for every list, their pages would be faulted in
(and zeroed) again twenty times at a million subscriptions of twenty predicates.
"""

from __future__ import annotations

import numpy as np

_EXACT = 2.0**53
_MAGNITUDE = np.int64(0x7FFF_FFFF_FFFF_FFFF)  # the bits a negative double's key flips
_KEY_INF = 0x7FF0_0000_0000_0000  # the key of +inf (a larger key is a NaN)
_KEY_NEG_INF = -(2**63) + 0x000F_FFFF_FFFF_FFFF  # the key of -inf (a smaller one is a NaN)
_KEY_NEG_ZERO = -1  # the key of -0.0, the only double with it
_SAMPLE = 64  # doubles looked at before all are tried as integers

INTEGERS, BITS, DOUBLES = 0, 1, 2  # what the sorted keys are (integers less low, bit keys less low, the doubles)


class Scratch:
    """The work arrays of :func:`sort_into`, kept from list to list (grown to the
    largest): ``work`` (a list's doubles, then their keys), ``keys`` (packed keys),
    ``rows`` (row numbers), ``first`` (where a position
    starts) and ``identity`` (0, 1, 2, ...)."""

    def __init__(self) -> None:
        self.size = 0
        self._grow(0)
        self._run: tuple[np.ndarray | None, int | None] = (None, None)

    def _grow(self, m: int) -> None:
        self.work = np.empty(m, np.float64)
        self.keys = np.empty(m, np.uint64)
        self.rows = np.empty(m, np.intp)  # (what np.take indexes with: no conversion)
        self.first = np.empty(m, bool)
        # (a list's rows number below 2**31, its users being int32: half an intp's bytes)
        self.identity = np.arange(m, dtype=np.uint32)
        self.size = m

    def of(self, m: int) -> Scratch:
        if m > self.size:
            self._grow(m)
        return self

    def first_of_run(self, slots: np.ndarray) -> int | None:
        """``slots[0]`` when ``slots`` are consecutive (a block's rows, one slot each),
        else None: the users of rows are then their numbers plus it, not gathered.
        Looked at once per array (a block's slots serve each of its lists)."""
        if self._run[0] is not slots:
            m = len(slots)
            first = int(slots[0]) if m else 0
            run = m > 0 and int(slots[-1]) - first == m - 1 and bool((np.diff(slots) == 1).all())
            self._run = (slots, first if run else None)
        return self._run[1]


def sort_into(
    values: np.ndarray,
    slots: np.ndarray,
    users: np.ndarray,
    offsets: np.ndarray,
    constants: np.ndarray,
    base: int,
    scratch: Scratch | None = None,
) -> int:
    """The rows ``values`` (doubles, possibly a strided column) and ``slots`` (int32)
    sorted by constant: the slots into ``users`` (``len(values)`` long), each distinct
    constant's first user's index plus ``base`` into ``offsets`` (one more entry: the
    end), the distinct constants ascending into ``constants``. Returns how many."""
    m = len(values)
    offsets[0] = base
    if not m:
        return 0
    space = (scratch or Scratch()).of(m)
    # a contiguous copy (a strided column's passes cost 2-4 times a contiguous one's),
    # which :func:`_by_bits` turns into keys in place
    work = space.work[:m]
    np.copyto(work, values)
    found = _as_integers(work, slots, users, space)
    if found is None:
        found = _by_bits(work, slots, users, space)
    if found is None:
        found = _by_argsort(values, slots, users)
    ordered, kind, low = found
    first = space.first[:m]
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)  # (faster than a compress into the scratch's rows)
    n = len(starts)
    np.add(starts, base, out=offsets[:n], casting="unsafe")
    offsets[n] = base + m
    out = constants[:n]
    if kind == DOUBLES:
        np.take(ordered, starts, out=out, mode="clip")  # (in range: clip only skips a check)
    elif kind == INTEGERS:
        chosen = out.view(np.int64)
        np.take(ordered, starts, out=chosen, mode="clip")
        np.add(chosen, low, out=out, casting="unsafe")  # (in place, item for item; int64 < 2**53: exact)
    else:
        keys = out.view(np.int64)
        np.take(ordered, starts, out=keys.view(np.uint64), mode="clip")
        np.add(keys.view(np.uint64), np.uint64(low % 2**64), out=keys.view(np.uint64))  # (modulo 2**64)
        if low < 0:  # (the map from bits to keys is its own inverse)
            flip = np.right_shift(keys, 63)
            flip &= _MAGNITUDE
            keys ^= flip
    return n


Found = tuple[np.ndarray, int, int]  # the sorted keys (equal where the constants are), their kind, low


def _as_integers(work: np.ndarray, slots: np.ndarray, users: np.ndarray, space: Scratch) -> Found | None:
    """Integral doubles and their slots as one sortable int64 each, ``(value - low) <<
    shift | slot``, or None when the values are not all integers within 2**53 or their
    range and the slots do not fit in 63 bits."""
    sample = work[:_SAMPLE]
    if not np.array_equal(np.trunc(sample), sample):  # (a fraction or NaN: no pass over them all)
        return None
    low, high = float(work.min()), float(work.max())
    shift = _bits(slots)
    if not (low >= -_EXACT and high <= _EXACT and high - low < 2.0 ** (62 - shift)):
        return None
    keys = space.keys[: len(work)].view(np.int64)
    np.copyto(keys, work, casting="unsafe")
    if not np.array_equal(keys, work):  # (a fraction)
        return None
    keys -= int(low)
    keys <<= shift
    keys |= slots
    keys.sort()
    np.bitwise_and(keys, (1 << shift) - 1, out=users, casting="unsafe")
    keys >>= shift
    return keys, INTEGERS, int(low)


def _by_bits(work: np.ndarray, slots: np.ndarray, users: np.ndarray, space: Scratch) -> Found | None:
    """Doubles sorted by their bit keys (see the module's docstring), or None when one
    is a NaN or -0.0, or the keys' high bits did not sort them. ``work``: the doubles,
    a contiguous array made into their keys in place."""
    m = len(work)
    keys = work.view(np.int64)
    low = int(keys.min())
    if low < 0:  # (a negative double's bits: its magnitude's flipped, so larger is less)
        flip = np.right_shift(keys, 63, out=space.keys[:m].view(np.int64))
        flip &= _MAGNITUDE
        keys ^= flip
        low = int(keys.min())
    high = int(keys.max())
    if low < _KEY_NEG_INF or high > _KEY_INF or (low <= _KEY_NEG_ZERO <= high and (keys == _KEY_NEG_ZERO).any()):
        return None
    relative = keys.view(np.uint64)
    relative -= np.uint64(low % 2**64)  # (modulo 2**64: the exact distance, below 2**64)
    width = (high - low).bit_length()
    shift = _bits(slots)
    if width + shift <= 64:  # the key and its slot in one: no gather
        relative <<= np.uint64(shift)
        np.bitwise_or(relative, slots, out=relative, dtype=np.uint64, casting="unsafe")
        relative.sort()
        np.bitwise_and(relative, np.uint64((1 << shift) - 1), out=users, casting="unsafe")
        relative >>= np.uint64(shift)
        return relative, BITS, low
    shift = max(1, (m - 1).bit_length())
    packed = np.right_shift(relative, np.uint64(max(0, width + shift - 64)), out=space.keys[:m])  # its high bits
    packed <<= np.uint64(shift)
    np.bitwise_or(packed, space.identity[:m], out=packed, dtype=np.uint64, casting="unsafe")
    packed.sort()
    rows = space.rows[:m]
    np.bitwise_and(packed, np.uint64((1 << shift) - 1), out=rows, casting="unsafe")
    ordered = np.take(relative, rows, out=packed, mode="clip")  # (the packed keys are done with)
    descents = np.less(ordered[1:], ordered[:-1], out=space.first[1:m])
    if descents.any():  # keys alike in their high bits, out of order
        return None
    start = space.first_of_run(slots)
    if start is None:
        np.take(slots, rows, out=users, mode="clip")
    else:
        np.add(rows, start, out=users, casting="unsafe")
    return ordered, BITS, low


def _by_argsort(values: np.ndarray, slots: np.ndarray, users: np.ndarray) -> Found:
    """Doubles sorted by value with an argsort (NaN last, each its own; -0.0 equal to
    0.0), from a contiguous copy when a strided column (the gathers stay in cache)."""
    values = np.ascontiguousarray(values)
    order = np.argsort(values, kind="quicksort")
    np.take(slots, order, out=users, mode="clip")
    return values[order], DOUBLES, 0


def _bits(numbers: np.ndarray) -> int:
    """Bits that hold every one of ``numbers`` (non-negative), at least 1."""
    return max(1, int(numbers.max()).bit_length()) if len(numbers) else 1
