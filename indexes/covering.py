"""Predicate lists in covering order: one binary search decides a whole list.

A list holds the constants ``c`` of predicates ``x OP c`` (one column) or
``x OP k*y + c`` (two columns, factor ``k``) that share everything but ``c``, in
ascending order. For fixed values of ``x`` and ``y`` such a predicate is monotone in
``c``, so the satisfied positions are:

=============  ==============================================
``<`` ``<=``   a suffix ``[lo, n)``: larger constants cover more
``>`` ``>=``   a prefix ``[0, hi)``: smaller constants cover more
``=``          the run ``[lo, hi)`` of constants that match
``!=``         everything but that run
=============  ==============================================

:meth:`CoveringList.satisfied` returns that range as ``(lo, hi, negated)``.
Answers are exact (see :mod:`indexes.exact`): a one-column list searches the cuts of
its constants for the column's type, a two-column list searches the doubles and
settles the boundary with :func:`~indexes.exact.linear_sign`. :meth:`satisfied_many`
answers for a whole column of values at once with numpy, and settles exactly the
rows whose double answer could be off (rare: values on a boundary, integers past
2**53).

Constants are floats that mean what they print as, or Fractions (see
:func:`indexes.exact.faithful`); strings and booleans for non-numeric lists.
A NULL (None) or NaN value satisfies nothing, ``!=`` included (SQL's unknown).
"""

from __future__ import annotations

import bisect
import operator
from array import array
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from indexes.exact import (
    ABSOLUTE_BAND,
    EXACT_INTEGERS,
    RELATIVE_BAND,
    exact,
    float_cut,
    integer_cut,
    linear_sign,
    to_float,
)

Satisfied = tuple[int, int, bool]
NOTHING: Satisfied = (0, 0, False)
NULL = -1  # ``lo`` of a row whose value is NULL in the arrays of satisfied_many

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "=": operator.eq,
    "!=": operator.ne,
}

OPERATORS = tuple(_OPS)


def is_null(value: object) -> bool:
    """None, or a float NaN."""
    return value is None or (value != value)


def compare(left: Any, op: str, right: Any) -> bool:
    """``left op right`` with SQL's NULL rule (any NULL or NaN side: false)."""
    if is_null(left) or is_null(right):
        return False
    return _OPS[op](left, right)


def search_comparisons(n: int) -> int:
    """Comparisons a binary search over ``n`` constants costs."""
    return max(1, n.bit_length())


def own_cuts(doubles: np.ndarray) -> bool:
    """An integer column's list of doubles is its own cuts: every constant integral
    (so finite) and below 2**53 in magnitude (see :meth:`CoveringList._integer_cuts`)."""
    return bool((np.abs(doubles) < EXACT_INTEGERS).all()) and bool(np.array_equal(np.ceil(doubles), doubles))


def first_true(lo: int, hi: int, pred: Callable[[int], bool], guess: int) -> int:
    """Smallest i in [lo, hi] with pred(i) true, for pred monotone False..True over
    [lo, hi) (pred(hi) is taken as true). ``guess`` is usually exact already."""
    i = min(max(guess, lo), hi)
    while i > lo and pred(i - 1):
        i -= 1
    while i < hi and not pred(i):
        i += 1
    return i


class CoveringList:
    """The constants of one predicate list, ascending, with O(log n) evaluation.

    ``integer``: the left column holds integers (its cuts are whole numbers).
    ``factor``: ``k`` of a two-column list ``x OP k*y + c``; None for ``x OP c``.
    """

    __slots__ = ("_arrays", "_kf", "_le", "_lt", "constants", "factor", "floats", "integer", "n", "op")

    def __init__(
        self,
        op: str,
        constants: Sequence[Any] | np.ndarray,
        *,
        integer: bool = False,
        factor: Fraction | None = None,
        doubles: bool = False,
    ) -> None:
        """``doubles``: every constant is a float that means what it prints as (the
        usual case): each is its own cut, and nothing needs converting."""
        if op not in _OPS:
            raise ValueError(f"unknown operator {op!r}")
        self.op = op
        shared = None
        if isinstance(constants, np.ndarray):  # doubles in a plan's one array: read in place
            shared, constants = constants, constants.data  # a memoryview bisects as fast as an array
        # an array of doubles stays as it is (a list would take four times the memory)
        self.constants = constants if isinstance(constants, (array, memoryview)) else list(constants)
        self.n = len(self.constants)
        self.integer = integer
        self.factor = factor
        self._kf = to_float(factor) if factor is not None else 1.0
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        if doubles:
            self.floats = self.constants
            self._lt = self._le = self.constants  # a faithful float is its own cut (float_cut)
            if factor is None:
                if shared is not None:
                    cuts = shared
                elif isinstance(self.constants, array):
                    cuts = np.frombuffer(self.constants, np.float64)
                else:
                    cuts = np.array(self.constants, np.float64)
                self._arrays = (cuts, cuts)
                if integer and not self._integer_cuts(cuts):
                    pairs = [integer_cut(c) for c in self.constants]
                    self._lt = [lt for lt, _ in pairs]
                    self._le = [le for _, le in pairs]
                    self._arrays = None
            return
        numeric = all(isinstance(c, (float, int, Fraction)) and not isinstance(c, bool) for c in self.constants)
        self.floats = [to_float(c) for c in self.constants] if numeric else self.constants
        if factor is None and numeric:
            cut = integer_cut if integer else float_cut
            pairs = [cut(c) for c in self.constants]
            self._lt = [lt for lt, _ in pairs]
            self._le = [le for _, le in pairs]
        else:
            self._lt = self._le = self.constants  # strings and booleans compare as they are

    def _integer_cuts(self, doubles: np.ndarray) -> bool:
        """The cuts of an integer column's list of doubles, all at once, if every
        constant is finite and below 2**53 in magnitude (else False, and nothing is set).

        There ``integer_cut``'s ``ceil`` and ``floor`` of the constant's shortest decimal
        are those of the double itself: an integer between the two would be a double
        nearer the decimal than the double it reads back as. Cuts below 2**53 are
        doubles, and Python compares an int with a double exactly, so the per-value
        bisection reads the same arrays as the kernels."""
        if len(doubles) and not bool((np.abs(doubles) < EXACT_INTEGERS).all()):
            return False  # past 2**53 the decimal is not the double: integer_cut decides
        if own_cuts(doubles):
            # integral constants (the usual case) are their own cuts: the plan's shared
            # array read in place, no two copies of every constant
            self._lt = self._le = self.constants
            self._arrays = (doubles, doubles)
            return True
        lt = np.ceil(doubles)
        le = np.floor(doubles)
        self._lt, self._le = memoryview(lt), memoryview(le)
        self._arrays = (lt, le)
        return True

    def __getstate__(self) -> dict[str, Any]:
        state = {name: getattr(self, name) for name in self.__slots__}
        for name in ("constants", "floats", "_lt", "_le"):  # doubles read in place: pickled as their own
            if isinstance(state[name], memoryview):
                state[name] = array("d", state[name].tobytes())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)

    def _check(self) -> None:
        cs = self.constants
        assert self.n == len(cs)
        assert all(not is_null(c) for c in cs), "NULL constant in a list"
        keys = [exact(c) for c in cs] if self.floats is not cs else cs
        assert all(keys[i] <= keys[i + 1] for i in range(len(keys) - 1)), "constants out of covering order"
        if self.factor is None:
            assert all(self._lt[i] <= self._lt[i + 1] for i in range(self.n - 1)), "cuts out of order"
            assert all(self._le[i] <= self._le[i + 1] for i in range(self.n - 1)), "cuts out of order"

    # ------------------------------------------------------------- one value

    def satisfied(self, left: Any) -> Satisfied:
        """Positions whose predicate ``left OP c`` holds, as (lo, hi, negated)."""
        if is_null(left):
            return NOTHING
        op = self.op
        if op == "<":
            return bisect.bisect_right(self._lt, left), self.n, False
        if op == "<=":
            return bisect.bisect_left(self._le, left), self.n, False
        if op == ">":
            return 0, bisect.bisect_left(self._le, left), False
        if op == ">=":
            return 0, bisect.bisect_right(self._lt, left), False
        return bisect.bisect_left(self._le, left), bisect.bisect_right(self._lt, left), op == "!="

    def satisfied_pair(self, left: Any, right: Any) -> Satisfied:
        """Positions whose predicate ``left OP k*right + c`` holds."""
        if is_null(left) or is_null(right):
            return NOTHING
        below, above = self._boundaries(left, right)
        return self._answer(below, above)

    def _boundaries(self, left: Any, right: Any) -> tuple[int, int]:
        """(first position where ``left <= k*right + c``, first where ``left <``): the
        exact sign of ``left - (k*right + c)`` falls from + through 0 to - along the
        list. A binary search on the doubles guesses both; exact tests settle them."""
        k, kf, cs, floats = self.factor, self._kf, self.constants, self.floats
        assert k is not None
        n = self.n
        term = kf * right
        diff = left - term
        g = bisect.bisect_left(floats, diff)
        # Usually the doubles decide both neighbours of the guess as linear_sign would
        # (the same difference against the same band, computed alike): then both
        # boundaries are the guess (the sign is + before it, - from it on), no exact test.
        scale = abs(left) + abs(term)
        if (g == 0 or diff - floats[g - 1] > RELATIVE_BAND * (scale + abs(floats[g - 1])) + ABSOLUTE_BAND) and (
            g == n or floats[g] - diff > RELATIVE_BAND * (scale + abs(floats[g])) + ABSOLUTE_BAND
        ):
            return g, g

        def sign(i: int) -> int:
            return linear_sign(left, k, kf, right, cs[i], floats[i])

        below = first_true(0, n, lambda i: sign(i) <= 0, g)
        above = first_true(below, n, lambda i: sign(i) < 0, bisect.bisect_right(floats, diff))
        return below, above

    def _answer(self, below: int, above: int) -> Satisfied:
        op = self.op
        if op == "<":
            return above, self.n, False
        if op == "<=":
            return below, self.n, False
        if op == ">":
            return 0, below, False
        if op == ">=":
            return 0, above, False
        return below, above, op == "!="

    # ------------------------------------------------------------ many values

    def cuts(self) -> tuple[np.ndarray, np.ndarray]:
        """A single-column numeric list's cuts as float64 arrays ``(lt, le)``, what a
        double is compared with: a value ``x`` (not an integer past 2**53) satisfies
        ``<`` from position ``searchsorted(lt, x, 'right')`` on, ``<=`` from
        ``searchsorted(le, x, 'left')`` on, ``>`` and ``>=`` below those positions,
        ``=`` in between them."""
        return self._cut_arrays()

    def _cut_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._arrays is None:
            # integer cuts past the double range round; rows that could tell are settled exactly
            self._arrays = (
                np.array([to_float(t) for t in self._lt], np.float64),
                np.array([to_float(t) for t in self._le], np.float64),
            )
        return self._arrays

    def satisfied_many(
        self,
        left: np.ndarray,
        right: np.ndarray | None = None,
        exact_left: np.ndarray | None = None,
        exact_right: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`satisfied` (or :meth:`satisfied_pair`) for many float64 values at
        once (NaN is NULL), as ``(lo, hi)`` arrays in the kernels' form: a NULL row
        has ``lo = NULL``; for ``!=`` ``[lo, hi)`` is the run that fails.
        ``exact_left``, ``exact_right``: the int64 values of integer columns whose
        doubles round (past 2**53)."""
        left = np.asarray(left, np.float64)
        count = len(left)
        n, op = self.n, self.op
        lo = np.zeros(count, np.int64)
        hi = np.full(count, n, np.int64)
        null = np.isnan(left)
        if right is None:
            # the one implementation of a single-column list's search (a batch of a
            # stream's lists at once is the same kernel call, mqo.prepare)
            from indexes.attribute_kernels import OP_CODES, list_ranges

            lt, le = self._cut_arrays()
            found_lo, found_hi = np.empty((1, count), np.int64), np.empty((1, count), np.int64)
            one, ends = np.zeros(1, np.int64), np.array([n], np.int64)
            codes = np.array([OP_CODES[op]], np.int64)
            list_ranges(left.reshape(1, count), one, codes, lt, le, one, ends, one, found_lo, found_hi)
            lo, hi = found_lo[0], found_hi[0]
            # integers past 2**53 are not all doubles: those rows are decided one by one
            unsure = (np.abs(left) >= EXACT_INTEGERS) if self.integer else None
        else:
            right = np.asarray(right, np.float64)
            null |= np.isnan(right)
            floats = np.array(self.floats, np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                term = self._kf * right
                diff = left - term
                band = 4 * RELATIVE_BAND * (np.abs(left) + np.abs(term)) + ABSOLUTE_BAND
            below = np.searchsorted(floats, diff, "left")
            above = np.searchsorted(floats, diff, "right")
            # a constant within the band of the difference may be on either side of it
            near = np.zeros(count, bool)
            for at in (below - 1, below, above - 1, above):
                inside = (at >= 0) & (at < n)
                c = floats[np.clip(at, 0, max(n - 1, 0))] if n else np.zeros(count)
                with np.errstate(invalid="ignore"):
                    near |= inside & ~(np.abs(diff - c) > band)
            unsure = near | ~np.isfinite(diff)
            lo, hi = self._answer_arrays(below, above)
        lo = np.asarray(lo, np.int64).copy()
        hi = np.asarray(hi, np.int64).copy()
        if unsure is not None:
            self.settle(np.flatnonzero(unsure & ~null), lo, hi, left, right, exact_left, exact_right)
        lo[null] = NULL
        return lo, hi

    def settle(
        self,
        rows: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        left: np.ndarray,
        right: np.ndarray | None = None,
        exact_left: np.ndarray | None = None,
        exact_right: np.ndarray | None = None,
    ) -> None:
        """Decide ``rows`` exactly, one by one, into ``lo``/``hi`` (kernels' form):
        the rows a search over doubles cannot decide (integers past 2**53, a
        difference within rounding of a constant)."""
        for i in rows.tolist():
            if exact_left is not None:
                x: Any = int(exact_left[i])
            else:
                x = int(left[i]) if self.integer and right is None else float(left[i])
            if right is None:
                sat = self.satisfied(x)
            else:
                y = int(exact_right[i]) if exact_right is not None else float(right[i])
                sat = self.satisfied_pair(x, y)
            lo[i], hi[i] = kernel_form(sat, self.op, self.n)

    def _answer_arrays(self, below: np.ndarray, above: np.ndarray) -> tuple[Any, Any]:
        op, n = self.op, self.n
        zeros, full = np.zeros_like(below), np.full_like(below, n)
        if op == "<":
            return above, full
        if op == "<=":
            return below, full
        if op == ">":
            return zeros, below
        if op == ">=":
            return zeros, above
        return below, above

    # --------------------------------------------------------------- costs

    def comparisons(self) -> int:
        """Comparisons one evaluation costs: a binary search over the list."""
        return search_comparisons(self.n)

    def extreme_for(self, lo: int, hi: int) -> Any:
        """The most covering constant among positions [lo, hi)."""
        if self.op in ("<", "<="):
            return self.constants[hi - 1]
        return self.constants[lo]


def kernel_form(sat: Satisfied, op: str, n: int) -> tuple[int, int]:
    """A ``(lo, hi, negated)`` answer as the kernels' ``(lo, hi)``: NOTHING (a NULL)
    is ``lo = NULL``, which fails every predicate whatever the operator; a list
    compared as it is (strings, booleans: one position) answers ``!=`` not negated,
    satisfied or not."""
    lo, hi, negated = sat
    if sat == NOTHING:
        return NULL, 0
    if op in ("<", "<="):
        return lo, n
    if op in (">", ">="):
        return 0, hi
    if op == "!=" and not negated:
        # satisfied [lo, hi), which touches an end: the rest is the one run that fails
        return (hi, n) if lo == 0 else (0, lo)
    return lo, hi
