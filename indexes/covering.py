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
