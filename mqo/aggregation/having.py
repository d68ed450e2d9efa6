"""HAVING over whole columns of finished aggregates, exactly.

A comparison of an aggregate with a constant (``COUNT(*) >= 3``, ``AVG(x) < 0.1``) is
decided for every (window, group) row at once: an INTEGER-valued column (COUNT, and
SUM/MIN/MAX of INTEGER columns: int64) against the constant's exact ceiling and floor,
a double column (FLOAT aggregates, AVG of INTEGER) against the constant's exact cut
(:func:`indexes.exact.float_cut`: the doubles on each side of what the constant means),
so no rounding puts a row on the wrong side. A NULL aggregate (no values, or a
non-finite double) is unknown and the row fails, as :func:`results.holds` has it.
Any other comparison (arithmetic between aggregates, a group column) is decided by
:func:`results.holds` on the rows still undecided: the one exact scalar path. AND and
OR are array operations; an AND decides its column comparisons first, so the scalar
comparisons run only on the rows that pass them.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np

from indexes.exact import float_cut, integer_cut
from predicates.ast import Aggregate, Comparison, Condition, Negate, Not, Number

# an aggregate's finished values over the rows and where they are NULL
Column = tuple[np.ndarray, np.ndarray]
ColumnKey = tuple[str, str | None]
# decides one condition on the rows given (their numbers) with the scalar path
Scalar = Callable[[Condition, np.ndarray], np.ndarray]

_FLIPPED = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "="}
_INT64 = np.iinfo(np.int64)


def having_verdicts(cond: Condition, columns: dict[ColumnKey, Column], scalar: Scalar, rows: int) -> np.ndarray:
    """Whether each of ``rows`` rows passes ``cond`` (bool array)."""
    return _verdicts(cond, columns, scalar, np.ones(rows, bool))


def _verdicts(cond: Condition, columns: dict[ColumnKey, Column], scalar: Scalar, live: np.ndarray) -> np.ndarray:
    """``cond`` on the ``live`` rows (False elsewhere)."""
    if isinstance(cond, Comparison):
        side = _column_side(cond, columns)
        if side is None:
            out = np.zeros(len(live), bool)
            at = np.flatnonzero(live)
            if len(at):
                out[at] = scalar(cond, at)
            return out
        (values, null), op, constant = side
        known = live & ~null
        if values.dtype.kind == "f":  # an infinity or NaN means no number: NULL
            known &= np.isfinite(values)
        return known & _compare(values, op, constant)
    if isinstance(cond, Not):  # as results.holds: the operand's verdict negated
        return live & ~_verdicts(cond.operand, columns, scalar, live)
    items = sorted(cond.items, key=lambda c: not (isinstance(c, Comparison) and _column_side(c, columns)))
    if type(cond).__name__ == "And":
        out = live
        for item in items:
            out = _verdicts(item, columns, scalar, out)
        return out
    out = np.zeros(len(live), bool)
    for item in items:
        out |= _verdicts(item, columns, scalar, live & ~out)
    return out


def _column_side(cond: Comparison, columns: dict[ColumnKey, Column]) -> tuple[Column, str, Fraction] | None:
    """(the aggregate's column, the operator with the aggregate on the left, the
    constant) of an aggregate compared with a constant; None for any other comparison."""
    for agg, other, op in ((cond.left, cond.right, cond.op), (cond.right, cond.left, _FLIPPED.get(cond.op, cond.op))):
        constant = _constant(other)
        if isinstance(agg, Aggregate) and constant is not None:
            key = (agg.func, None if agg.arg is None else agg.arg.name)  # type: ignore[union-attr]
            if key in columns:
                return columns[key], op, constant
    return None


def _constant(expr: object) -> Fraction | None:
    if isinstance(expr, Number):
        return Fraction(expr.value)
    if isinstance(expr, Negate):
        inner = _constant(expr.operand)
        return None if inner is None else -inner
    return None


def _compare(values: np.ndarray, op: str, constant: Fraction) -> np.ndarray:
    """``values OP constant`` exactly, with the values meaning their integers or shortest
    decimals; for NULL rows the result is unspecified (the caller masks them)."""
    if values.dtype.kind == "f":
        lt_cut, le_cut = float_cut(constant)
        with np.errstate(invalid="ignore"):
            below = values < lt_cut  # values < constant
            at_most = values <= le_cut  # values <= constant
    else:
        lt_int, le_int = integer_cut(constant)
        below = _int_less(values, int(lt_int), strict=True)
        at_most = _int_less(values, int(le_int), strict=False)
    if op == "<":
        return below
    if op == "<=":
        return at_most
    if op == ">":
        return ~at_most
    if op == ">=":
        return ~below
    equal = at_most & ~below
    return equal if op == "=" else ~equal


def _int_less(values: np.ndarray, bound: int, *, strict: bool) -> np.ndarray:
    """``values < bound`` (or ``<=``) for int64 values and any integer bound."""
    if bound > _INT64.max:
        return np.ones(len(values), bool)
    if bound < _INT64.min:
        return np.zeros(len(values), bool)
    return values < bound if strict else values <= bound
