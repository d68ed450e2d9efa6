"""Bound expressions compiled to closures over a result's member rows.

Used for residual predicates and SELECT values. A closure takes ``members``, a
sequence indexed by stream number holding each member's row (``(ts, id, *values)``).
NULL propagates through arithmetic, division by zero gives NULL, and a comparison
with NULL is false (SQL's unknown, which never lets a result through).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from indexes.covering import compare, is_null
from indexes.exact import decimal_of
from predicates.ast import Arith, BoolLit, ColumnRef, Comparison, Expr, Negate, Number, StringLit
from predicates.catalog import StreamSchema

Rows = Sequence[Any]
ValueFn = Callable[[Rows], Any]
TestFn = Callable[[Rows], bool]

_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
}


def column_position(schema: StreamSchema, column: str) -> int:
    """Position of a column in a stored row: ts 0, id 1, declared columns from 2."""
    if column == "ts":
        return 0
    if column == "id":
        return 1
    index = schema.index_of(column)
    if index is None:
        raise KeyError(f"{schema.name}.{column}")
    return index + 2


def compile_value(
    expr: Expr, stream_number: Callable[[str], int], schema_of: Callable[[str], StreamSchema], exact: bool = False
) -> ValueFn:
    """A closure computing ``expr`` from member rows: in doubles (SELECT values), or
    with ``exact`` in Fractions of what the numbers mean (residual predicates)."""
    if isinstance(expr, Number):
        value = expr.value if exact else float(expr.value)
        return lambda rows: value
    if isinstance(expr, (StringLit, BoolLit)):
        const = expr.value
        return lambda rows: const
    if isinstance(expr, ColumnRef):
        assert expr.stream is not None
        s = stream_number(expr.stream)
        pos = column_position(schema_of(expr.stream), expr.name)
        to_exact = exact and (expr.ctype is None or expr.ctype.is_numeric)

        def column(rows: Rows) -> Any:
            value = rows[s][pos]
            if value is None or value != value:  # is_null, inline: SELECT * runs this per column and result
                return None
            return decimal_of(value) if to_exact else value

        return column
    if isinstance(expr, Negate):
        inner = compile_value(expr.operand, stream_number, schema_of, exact)

        def negate(rows: Rows) -> Any:
            value = inner(rows)
            return None if value is None else -value

        return negate
    assert isinstance(expr, Arith)
    left = compile_value(expr.left, stream_number, schema_of, exact)
    right = compile_value(expr.right, stream_number, schema_of, exact)
    if expr.op == "/":

        def divide(rows: Rows) -> Any:
            a, b = left(rows), right(rows)
            if a is None or b is None or b == 0:
                return None
            return a / b

        return divide
    fn = _ARITH[expr.op]

    def arith(rows: Rows) -> Any:
        a, b = left(rows), right(rows)
        if a is None or b is None:
            return None
        result = fn(a, b)
        return None if is_null(result) else result

    return arith


def compile_test(
    cmp: Comparison, stream_number: Callable[[str], int], schema_of: Callable[[str], StreamSchema]
) -> TestFn:
    """A closure deciding a comparison on member rows (NULL: false), in exact
    arithmetic on what the numbers mean (docs/ARCHITECTURE.md, Exact numbers):
    residuals are not shared and run last, so exactness costs little here."""
    left = compile_value(cmp.left, stream_number, schema_of, exact=True)
    right = compile_value(cmp.right, stream_number, schema_of, exact=True)
    op = cmp.op
    return lambda rows: compare(left(rows), op, right(rows))
