"""Structures that take insertions in place, for the changes a plan keeps since its
last whole compile (:mod:`mqo.live_delta`): lists in segments of shared arrays with
spare room, their kernel rows, and exact levels (MAXWINDOWs, horizons) that take new
values."""

from __future__ import annotations

import bisect
import itertools
from fractions import Fraction
from typing import Any

import numpy as np

from indexes import kernel_modes as modes
from indexes.kill_bitsets import MODE_OF_OP, PER_LIST, WALK_STRIDE, positions_type
from mqo.plan import CompiledList, Levels
from mqo.plan_compile import number_list
from predicates import Kind, ListKey
from predicates.normalize import to_float
from predicates.numbers import exact

FIRST_ROOM = 8  # positions of a new list's segment (doubled when it fills)


class LiveLists:
    """Every added list's positions in three arrays shared by all of them, one
    segment each with spare room: ``constants`` (doubles, position for position),
    ``offsets`` (a position's first user in ``users``, absolute) and ``users``."""

    def __init__(self, positions: int, users: int) -> None:
        self.constants = np.zeros(positions, np.float64)
        self.offsets = np.zeros(positions + 1, positions_type(users))
        self.users = np.zeros(users, np.int32)
        self.positions = 0  # the first position no segment holds
        self.used = 0  # the first user no segment holds
        self.moved = 0  # how often the arrays were made anew (every list's views with them)

    def segment(self, positions: int, users: int) -> tuple[int, int]:
        """Room for ``positions`` positions (their offsets: one more) and ``users``
        users at the end: the first position and the first user."""
        if self.positions + positions + 1 > len(self.constants) or self.used + users > len(self.users):
            self._grow(positions + 1, users)
        p, u = self.positions, self.used
        self.offsets[p] = u  # (no positions yet: its users start and end here)
        self.positions += positions
        self.used += users
        return p, u

    def _grow(self, positions: int, users: int) -> None:
        size = max(2 * len(self.constants), self.positions + positions + 1)
        room = max(2 * len(self.users), self.used + users)
        constants, offsets = np.zeros(size, np.float64), np.zeros(size + 1, positions_type(room))
        all_users = np.zeros(room, np.int32)
        constants[: self.positions] = self.constants[: self.positions]
        offsets[: self.positions + 1] = self.offsets[: self.positions + 1]
        all_users[: self.used] = self.users[: self.used]
        self.constants, self.offsets, self.users = constants, offsets, all_users
        self.moved += 1

    def insert(self, live: LiveList, value: Any, slot: int) -> None:
        """One predicate of slot ``slot`` in list ``live``: its constant's position found
        (or made, in covering order: the segment's tail moved one on), the slot added
        to its users."""
        constant = live.constant_of(value)
        if live.objects is None and not (type(constant) is float or not live.numbers):
            # the first exact constant (1/3) of a list of doubles: its constants as values
            live.objects = self.constants[live.start : live.start + live.n].tolist()
            live.order_keys = [live.order_key(c) for c in live.objects]
        if live.objects is None and not live.numbers:
            live.objects, live.order_keys = [], []  # strings, booleans: values from the start
        from indexes.kernels import insert_user  # numba, on first use

        if live.n + 2 > live.room or live.m + 1 > live.user_room:
            self._move(live)
        if live.objects is None:  # found by the kernel's search of the doubles
            new = insert_user(self.constants, self.offsets, self.users, live.start, live.n, -1, 0, constant, slot)
        else:
            order_key = live.order_key(constant)
            p = bisect.bisect_left(live.order_keys, order_key)
            new = p == live.n or live.order_keys[p] != order_key
            if new:
                live.objects.insert(p, constant)
                live.order_keys.insert(p, order_key)
            # (the doubles' array holds no constant of such a list: 0 in its place)
            insert_user(self.constants, self.offsets, self.users, live.start, live.n, p, int(new), 0.0, slot)
        live.n += 1 if new else 0
        live.m += 1

    def insert_doubles(self, lists: list[LiveList], values: np.ndarray, slot: int) -> np.ndarray | None:
        """One query disjunct's predicates, constant ``values[i]`` in list ``lists[i]``
        (distinct lists), as :meth:`insert` puts them, in one kernel call; None
        (nothing done) unless every list keeps doubles. Per list, whether its constant
        took a new position (the lists' sizes are updated)."""
        for live in lists:
            if live.objects is not None or not live.numbers:
                return None
        for live in lists:
            if live.n + 2 > live.room or live.m + 1 > live.user_room:
                self._move(live)
        from indexes.kernels import insert_users  # numba, on first use

        starts = np.array([live.start for live in lists], np.int64)
        ns = np.array([live.n for live in lists], np.int64)
        new = insert_users(self.constants, self.offsets, self.users, starts, ns, values, slot)
        for live, added in zip(lists, new.tolist(), strict=True):
            live.n += added
            live.m += 1
        return new

    def _move(self, live: LiveList) -> None:
        """The list to a segment twice as large at the end of the arrays."""
        room, user_room = 2 * live.room, 2 * live.user_room
        p, v = self.segment(room, user_room)  # (may make the arrays anew: read them after)
        s, n, u = live.start, live.n, int(self.offsets[live.start])
        self.constants[p : p + n] = self.constants[s : s + n]
        self.offsets[p : p + n + 1] = self.offsets[s : s + n + 1] - u + v
        self.users[v : v + live.m] = self.users[u : u + live.m]
        live.start, live.first_user, live.room, live.user_room = p, v, room, user_room


class LiveList:
    """One added list: its segment of :class:`LiveLists`, its constants (as Python
    values in ``objects`` when not all are doubles, with their order keys), its bit
    block and, for an attribute list, its kernel rows."""

    def __init__(self, key: ListKey, index: int, shape: dict[str, Any], first: tuple[int, int]) -> None:
        self.key = key
        self.kind: Kind = key.kind
        self.index = index
        self.shape = shape
        self.numbers = number_list(key)
        self.start, self.first_user = first
        self.room = FIRST_ROOM  # positions of the segment (one offset more)
        self.user_room = FIRST_ROOM
        self.n = 0
        self.m = 0
        self.objects: list[Any] | None = None  # constants, when some are not doubles
        self.order_keys: list[Any] = []  # their order keys (exact values, or (is None, value))
        self.bit_base = 0
        self.bit_room = 0
        self.rows: tuple[int, ...] = ()  # its "all users" rows in its stream's kernel table
        self.compiled: CompiledList | None = None  # None: made anew at the next plan
        # where the plans' list of added lists of its type keeps its compiled list
        self.kept: list[Any] = []
        self.kept_at = 0

    def constant_of(self, value: Any) -> Any:
        """A predicate's constant as the list keeps it (as a whole compile does: a number
        of a numeric list a double unless exact, such as 1/3)."""
        if self.numbers and value is not None and not isinstance(value, Fraction):
            return to_float(value)
        return value

    def order_key(self, constant: Any) -> Any:
        return exact(constant) if self.numbers else (constant is None, constant)


class KernelRows:
    """One stream's added attribute lists as the second part of its kernel tables:
    per-list arrays, and a table of rows over the words of the added slots (each list's
    "none" and "all users" rows), with spare rows."""

    def __init__(self, first_word: int, width: int) -> None:
        self.first_word = first_word
        self.table = np.zeros((16, max(width, 1)), np.uint64)
        self.rows = 0
        self.per_list: dict[str, list[int]] = {name: [] for name in PER_LIST}
        self.lists: list[LiveList] = []
        self._fixed: dict[str, np.ndarray] | None = None  # per-list arrays as arrays, while no list is added

    def add(self, live: LiveList, op: str) -> None:
        """Rows for a new list (none yet set: it has no users yet)."""
        mode = MODE_OF_OP[op]
        # rows: [none, all] as prefix rows, [all, none] as suffix rows, [all] for !=
        shape = {modes.MODE_LESS: 2, modes.MODE_GREATER: 2, modes.MODE_EQUAL: 4, modes.MODE_NOT_EQUAL: 1}[mode]
        if self.rows + shape > len(self.table):
            grown = np.zeros((2 * len(self.table) + shape, self.table.shape[1]), np.uint64)
            grown[: self.rows] = self.table[: self.rows]
            self.table = grown
        r = self.rows
        prefix = suffix = 0
        if mode == modes.MODE_LESS:
            prefix, any_row, live.rows = r, r + 1, (r + 1,)
        elif mode == modes.MODE_GREATER:
            suffix, any_row, live.rows = r, r, (r,)
        elif mode == modes.MODE_EQUAL:
            prefix, suffix, any_row, live.rows = r, r + 2, r + 2, (r + 1, r + 2)
        else:
            any_row, live.rows = r, (r,)
        self.rows += shape
        values = (mode, 0, WALK_STRIDE, prefix, suffix, any_row, live.start, 1, self.first_word)
        for name, value in zip(PER_LIST, values, strict=True):
            self.per_list[name].append(value)
        self.lists.append(live)

    def widen(self, width: int) -> None:
        """Rows over ``width`` words (more slots were added)."""
        if width > self.table.shape[1]:
            grown = np.zeros((len(self.table), width), np.uint64)
            grown[:, : self.table.shape[1]] = self.table
            self.table = grown

    def set_user(self, live: LiveList, slot: int) -> None:
        bit = slot - 64 * self.first_word
        for r in live.rows:
            self.table[r, bit >> 6] |= np.uint64(1 << (bit & 63))

    def set_rows(self, rows: np.ndarray, slot: int) -> None:
        """Slot ``slot`` a user of every list whose rows ``rows`` are (one query's lists)."""
        bit = slot - 64 * self.first_word
        column = self.table[:, bit >> 6]  # (a view: one index array, not two)
        column[rows] |= np.uint64(1 << (bit & 63))

    def arrays(self) -> dict[str, np.ndarray]:
        """The per-list arrays as the kernels take them (sizes and segments as they are now)."""
        if self._fixed is None or len(self._fixed["modes"]) != len(self.lists):  # (lists were added)
            types = {"modes": np.int8, "part": np.int8}
            self._fixed = {name: np.array(values, types.get(name, np.int64)) for name, values in self.per_list.items()}
        out = dict(self._fixed)  # (what changes with insertions made anew below)
        out["ns"] = np.fromiter((live.n for live in self.lists), np.int64, len(self.lists))
        out["csr_base"] = np.fromiter((live.start for live in self.lists), np.int64, len(self.lists))
        return out


class LiveLevels:
    """Exact values (MAXWINDOWs, registration horizons) with each record's level, as
    :class:`~mqo.plan.Levels`, taking new values in place: a value above the others
    is appended (the usual case: horizons grow with time); one between them
    renumbers the levels above it (a pass over the records and slots). Counts each
    level's records, for the largest used."""

    def __init__(self, levels: Levels, n_records: int) -> None:
        self.values = list(levels.values)
        self.floats = list(levels.floats)
        self.level_of = with_room(levels.level_of, n_records + 64)
        self.n = n_records
        self.counts = np.bincount(levels.level_of, minlength=len(self.values)).tolist()
        self._largest: tuple[Any, Fraction] | None = None

    def _number(self, value: Any, slot_levels: np.ndarray, n_slots: int) -> int:
        k = bisect.bisect_left(self.values, value)  # (floats and Fractions compare exactly)
        if k < len(self.values) and self.values[k] == value:
            return k
        if k < len(self.values):  # between two values: the levels above move up
            above = self.level_of[: self.n]
            above[above >= k] += 1
            slots = slot_levels[:n_slots]
            slots[slots >= k] += 1
        self.values.insert(k, value)
        self.floats.insert(k, to_float(value))
        self.counts.insert(k, 0)
        return k

    def append(self, value: Any, slot_levels: np.ndarray, n_slots: int) -> int:
        """A new record's value: its level."""
        k = self._number(value, slot_levels, n_slots)
        if self.n == len(self.level_of):
            self.level_of = with_room(self.level_of, 2 * self.n + 64)
        self.level_of[self.n] = k
        self.n += 1
        self.counts[k] += 1
        return k

    def set(self, record: int, value: Any, slot_levels: np.ndarray, n_slots: int) -> int:
        """Record ``record``'s value is ``value`` now: its level."""
        k = self._number(value, slot_levels, n_slots)
        self.counts[int(self.level_of[record])] -= 1
        self.level_of[record] = k
        self.counts[k] += 1
        return k

    def top(self) -> int:
        """The largest level some record has (-1: none)."""
        return max((k for k, c in enumerate(self.counts) if c), default=-1)

    def largest(self) -> tuple[float, Fraction]:
        """The largest value some record has, as a double and exactly (0 without
        records); the exact value kept from the last call while it is the same."""
        top = self.top()
        value = self.values[top] if top >= 0 else 0.0
        if self._largest is None or self._largest[0] is not value:
            self._largest = (value, exact(value))
        return to_float(value), self._largest[1]

    def levels(self, n_records: int) -> Levels:
        return Levels(list(self.values), list(self.floats), self.level_of[:n_records])

    def _check(self, n_records: int, dead: Any) -> None:
        assert self.n == n_records and len(self.values) == len(self.floats) == len(self.counts), "levels"
        assert all(a < b for a, b in itertools.pairwise(self.values)), "levels out of order"
        assert np.bincount(self.level_of[: self.n], minlength=len(self.values)).tolist() == self.counts, "counts"


def with_room(array: np.ndarray, size: int) -> np.ndarray:
    """``array`` copied into an array of ``size`` entries (zeros past it)."""
    out = np.zeros(max(size, len(array)), array.dtype)
    out[: len(array)] = array
    return out
