"""Predicate lists in covering order: one binary search decides a whole list.

A compiled list holds the constants ``c`` of predicates ``left OP term + c`` that share
everything but ``c`` (``term`` is ``k*y`` for two-column predicates, absent for
``x OP c``), sorted ascending. For fixed values of ``left`` and ``term`` the predicate
is monotone in ``c`` (floating-point addition rounds monotonically), so the satisfied
positions are:

=============  ==============================================
``<`` ``<=``   a suffix ``[lo, n)``: larger constants cover more
``>`` ``>=``   a prefix ``[0, hi)``: smaller constants cover more
``=``          the run ``[lo, hi)`` of constants that match
``!=``         everything but that run
=============  ==============================================

:meth:`CoveringList.satisfied` returns that range as ``(lo, hi, negated)`` in
O(log n) comparisons. With a ``term`` the search first bisects on ``left - term`` and
then moves the boundary by exact evaluation of ``left OP term + c``, so the answer is
exactly what evaluating each predicate on its own would give, rounding included.

A NULL (None) or NaN value satisfies nothing, ``!=`` included (SQL's unknown).
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

Satisfied = tuple[int, int, bool]
NOTHING: Satisfied = (0, 0, False)

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


def _first_true(lo: int, hi: int, pred: Callable[[int], bool], guess: int) -> int:
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

    ``constants`` must be sorted ascending and non-NULL. ``op`` is the list's operator.
    ``equality_index`` (built for ``=``/``!=`` lists without a term) maps a value to its
    run, so equality lists are hash lookups.
    """

    __slots__ = ("_eq_runs", "_pred", "constants", "n", "op")

    def __init__(self, op: str, constants: Sequence[Any]) -> None:
        if op not in _OPS:
            raise ValueError(f"unknown operator {op!r}")
        self.op = op
        self.constants = list(constants)
        self.n = len(self.constants)
        self._pred = _OPS[op]
        self._eq_runs: dict[Any, tuple[int, int]] | None = None
        if op in ("=", "!="):
            runs: dict[Any, tuple[int, int]] = {}
            for i, c in enumerate(self.constants):
                lo, _ = runs.get(c, (i, i))
                runs[c] = (lo, i + 1)
            self._eq_runs = runs

    def _check(self) -> None:
        cs = self.constants
        assert self.n == len(cs)
        assert all(not is_null(c) for c in cs), "NULL constant in a list"
        assert all(cs[i] <= cs[i + 1] for i in range(len(cs) - 1)), "constants out of covering order"

    def satisfied(self, left: Any, term: Any = None) -> Satisfied:
        """Positions whose predicate ``left OP term + c`` holds, as (lo, hi, negated).

        ``term`` None means the predicates are ``left OP c``.
        """
        if is_null(left) or (term is not None and is_null(term)):
            return NOTHING
        n = self.n
        op = self.op
        cs = self.constants
        if term is None:
            if op == "<":
                return bisect.bisect_right(cs, left), n, False
            if op == "<=":
                return bisect.bisect_left(cs, left), n, False
            if op == ">":
                return 0, bisect.bisect_left(cs, left), False
            if op == ">=":
                return 0, bisect.bisect_right(cs, left), False
            lo, hi = self._eq_runs.get(left, (0, 0))  # type: ignore[union-attr]
            return lo, hi, op == "!="
        # left OP term + c: bisect on the approximate difference, then settle the
        # boundary by exact evaluation (monotone in c).
        diff = left - term
        if math.isnan(diff):
            # left and term are infinities of the same sign: term + c is that infinity
            # for every (finite) constant, so the whole list decides alike.
            if not n:
                return NOTHING
            holds = self._pred(left, term + cs[0])
            if op == "!=":
                return (0, 0, True) if holds else (0, n, True)
            return (0, n, False) if holds else NOTHING
        if op in ("<", "<="):
            guess = bisect.bisect_right(cs, diff) if op == "<" else bisect.bisect_left(cs, diff)
            pred = self._pred
            lo = _first_true(0, n, lambda i: pred(left, term + cs[i]), guess)
            return lo, n, False
        if op in (">", ">="):
            guess = bisect.bisect_left(cs, diff) if op == ">" else bisect.bisect_right(cs, diff)
            pred = self._pred
            hi = _first_true(0, n, lambda i: not pred(left, term + cs[i]), guess)
            return 0, hi, False
        lo = _first_true(0, n, lambda i: term + cs[i] >= left, bisect.bisect_left(cs, diff))
        hi = _first_true(lo, n, lambda i: term + cs[i] > left, bisect.bisect_right(cs, diff))
        return lo, hi, op == "!="

    def comparisons(self) -> int:
        """Comparisons one evaluation costs: a binary search over the list."""
        return max(1, self.n.bit_length())

    def extreme_for(self, lo: int, hi: int) -> Any:
        """The most covering constant among positions [lo, hi)."""
        if self.op in ("<", "<="):
            return self.constants[hi - 1]
        return self.constants[lo]


def satisfied_mask(sat: Satisfied, n: int) -> int:
    """The satisfied positions as a bit mask over ``n`` positions."""
    lo, hi, negated = sat
    run = ((1 << (hi - lo)) - 1) << lo if hi > lo else 0
    if negated:
        return ((1 << n) - 1) & ~run
    return run


def naive_satisfied(op: str, constants: Sequence[Any], left: Any, term: Any = None) -> list[bool]:
    """Reference: evaluate every predicate of the list on its own."""
    if term is None:
        return [compare(left, op, c) for c in constants]
    if is_null(term) or is_null(left):
        return [False] * len(constants)
    return [compare(left, op, term + c) for c in constants]


def satisfied_many(op: str, constants: Any, left: Any, term: Any = None) -> tuple[Any, Any]:
    """:meth:`CoveringList.satisfied` for many values at once, as ``(lo, hi)`` arrays.

    Numeric lists only: ``constants`` a sorted float64 array, ``left`` (and ``term``)
    float64 arrays with NaN for NULL. A NULL row gets ``lo = -1`` (nothing satisfied);
    for ``!=`` ``[lo, hi)`` is the run of equal constants (the failed ones), as in the
    single-value form. Rows where ``left`` and ``term`` are infinities of the same sign
    are decided one by one.
    """
    import numpy as np

    from indexes import kernels

    cs = np.asarray(constants, np.float64)
    n = len(cs)
    left = np.asarray(left, np.float64)
    count = len(left)
    lo = np.zeros(count, np.int64)
    hi = np.full(count, n, np.int64)
    if term is None:
        if op == "<":
            lo = np.searchsorted(cs, left, "right").astype(np.int64)
        elif op == "<=":
            lo = np.searchsorted(cs, left, "left").astype(np.int64)
        elif op == ">":
            hi = np.searchsorted(cs, left, "left").astype(np.int64)
        elif op == ">=":
            hi = np.searchsorted(cs, left, "right").astype(np.int64)
        else:
            lo = np.searchsorted(cs, left, "left").astype(np.int64)
            hi = np.searchsorted(cs, left, "right").astype(np.int64)
        lo[np.isnan(left)] = kernels.NULL
        return lo, hi
    term = np.asarray(term, np.float64)
    with np.errstate(invalid="ignore"):
        diff = left - term
    if op in ("<", "<="):
        guess = np.searchsorted(cs, diff, "right" if op == "<" else "left")
        lo = kernels.settle(cs, left, term, guess.astype(np.int64), 0 if op == "<" else 1)
    elif op in (">", ">="):
        guess = np.searchsorted(cs, diff, "left" if op == ">" else "right")
        hi = kernels.settle(cs, left, term, guess.astype(np.int64), 2 if op == ">" else 3)
    else:
        lo = kernels.settle(cs, left, term, np.searchsorted(cs, diff, "left").astype(np.int64), 4)
        hi = kernels.settle(cs, left, term, np.searchsorted(cs, diff, "right").astype(np.int64), 5)
        hi = np.maximum(hi, lo)
    null = np.isnan(left) | np.isnan(term)
    both_infinite = np.isnan(diff) & ~null
    lo = np.asarray(lo, np.int64).copy()
    hi = np.asarray(hi, np.int64).copy()
    if both_infinite.any():
        single = CoveringList(op, cs.tolist())
        for i in np.flatnonzero(both_infinite):
            a, b, _ = single.satisfied(float(left[i]), float(term[i]))
            if op == "!=":
                # the single form gives the satisfied set as the complement of [a, b)
                lo[i], hi[i] = a, b
            elif (a, b) == (0, 0):
                lo[i], hi[i] = (n, n) if op in ("<", "<=") else (0, 0)
            else:
                lo[i], hi[i] = a, b
    lo[null] = kernels.NULL
    return lo, hi
