"""How far a join list's index probe reaches: the range of the unknown side's column.

A partial result grows to a stream through a join list by probing the stream's value
index with the range its member's value allows under the most covering predicate of
the list still relevant to the candidates (:func:`probe_bounds`). The range is widened
a little, so rounding never loses a tuple: every fetched tuple is tested exactly after.
"""

from __future__ import annotations

import math
from typing import Any

from mqo.plan import CompiledList

FULL = "full"  # the index does not narrow the probe: every tuple in the window is tested
EMPTY = "empty"  # no tuple can satisfy the list (the member's value is NULL)
REL = 1e-12


def probe_bounds(lst: CompiledList, known_left: bool, row: Any, cand: int) -> Any:
    """Range of the unknown side's column that can satisfy the most covering
    predicate of ``lst`` relevant to ``cand``: ``(lo, hi)`` inclusive (None is
    unbounded), ``FULL`` (no help from the index) or ``EMPTY``.

    Numeric bounds are widened by a relative slack so rounding never loses a tuple;
    every retrieved tuple is then evaluated exactly."""
    op = lst.key.op
    if op == "!=":
        return FULL
    value = row[lst.left_pos] if known_left else row[lst.right_pos]
    if value is None:
        return EMPTY
    if not lst.numeric:
        if op == "=":
            return (value, value)
        # known_left: value OP y; else x OP value
        below = op in ("<", "<=")
        if known_left:
            return (value, None) if below else (None, value)
        return (None, value) if below else (value, None)
    kill = lst.kill
    cs = lst.covering.floats
    if op in ("<", "<="):
        c_lo = c_hi = cs[kill.last_used(cand)]
    elif op in (">", ">="):
        c_lo = c_hi = cs[kill.first_used(cand)]
    else:
        c_lo, c_hi = cs[kill.first_used(cand)], cs[kill.last_used(cand)]
    k = lst.factor
    assert k is not None
    if not (math.isfinite(c_lo) and math.isfinite(c_hi) and math.isfinite(k * value)):
        return FULL  # no useful bound; every tuple in the window is tested exactly
    if known_left:
        # value OP k*y + c  =>  bound on y
        b1, b2 = (value - c_lo) / k, (value - c_hi) / k
        slack = REL * ((abs(value) + abs(c_lo) + abs(c_hi)) / abs(k) + abs(b1) + abs(b2)) + 1e-300
        if op == "=":
            return (min(b1, b2) - slack, max(b1, b2) + slack)
        grows = (op in ("<", "<=")) == (k > 0)
        return (b1 - slack, None) if grows else (None, b1 + slack)
    # x OP k*value + c  =>  bound on x
    r1, r2 = k * value + c_lo, k * value + c_hi
    slack = REL * (abs(r1) + abs(r2) + abs(k * value)) + 1e-300
    if op == "=":
        return (min(r1, r2) - slack, max(r1, r2) + slack)
    if op in ("<", "<="):
        return (None, r1 + slack)
    return (r1 - slack, None)
