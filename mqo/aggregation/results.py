"""Results of aggregate queries: one row per (query, window, group)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from predicates.ast import (
    Aggregate,
    Arith,
    BoolLit,
    ColumnRef,
    Comparison,
    Condition,
    Expr,
    Negate,
    Not,
    Number,
    StringLit,
)
from predicates.normalize import _truth as truth
from predicates.numbers import decimal_of


@dataclass(frozen=True)
class AggregateRow:
    """``window_start``/``window_end``: the window ``(start, end]`` in seconds."""

    query: str
    window_start: float
    window_end: float
    group: dict[str, Any]
    values: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "window_start": self.window_start,
            "window_end": self.window_end,
            "group": self.group,
            "values": self.values,
        }


@dataclass
class AggregateBatch:
    """Aggregate rows in emission order (window end, then registration order)."""

    rows: list[AggregateRow] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[AggregateRow]:
        return iter(self.rows)

    def extend(self, other: AggregateBatch) -> None:
        self.rows.extend(other.rows)

    def to_pylist(self) -> list[dict[str, Any]]:
        return [r.as_dict() for r in self.rows]

    def json_lines(self) -> Iterator[str]:
        for r in self.rows:
            yield json.dumps(r.as_dict(), allow_nan=False, default=str) + "\n"

    def to_arrow(self) -> Any:
        """An Arrow table: query, window_start, window_end, then ``group`` and
        ``values`` as JSON text (queries differ in their groups and values)."""
        import pyarrow as pa

        return pa.table(
            {
                "query": pa.array([r.query for r in self.rows], pa.string()),
                "window_start": pa.array([r.window_start for r in self.rows], pa.float64()),
                "window_end": pa.array([r.window_end for r in self.rows], pa.float64()),
                "group": pa.array([json.dumps(r.group, default=str) for r in self.rows], pa.string()),
                "values": pa.array([json.dumps(r.values, default=str) for r in self.rows], pa.string()),
            }
        )


# ------------------------------------------------------------- expressions


def exact_value(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return decimal_of(value)


def evaluate(expr: Expr, aggregates: dict[tuple[str, str | None], Any], group: dict[str, Any]) -> Any:
    """A SELECT value of one (window, group): exact arithmetic on what the numbers mean."""
    if isinstance(expr, Aggregate):
        return aggregates[(expr.func, None if expr.arg is None else expr.arg.name)]  # type: ignore[union-attr]
    if isinstance(expr, ColumnRef):
        return group[expr.name]
    if isinstance(expr, Number):
        return expr.value
    if isinstance(expr, (StringLit, BoolLit)):
        return expr.value
    if isinstance(expr, Negate):
        v = exact_value(evaluate(expr.operand, aggregates, group))
        return None if v is None else -v
    left = exact_value(evaluate(expr.left, aggregates, group))
    right = exact_value(evaluate(expr.right, aggregates, group))
    if left is None or right is None:
        return None
    if expr.op == "+":
        return left + right
    if expr.op == "-":
        return left - right
    if expr.op == "*":
        return left * right
    return None if right == 0 else Fraction(left) / right


def output_value(expr: Expr, aggregates: dict, group: dict[str, Any]) -> Any:
    if isinstance(expr, Aggregate):  # the usual output: the aggregate as computed
        return aggregates[(expr.func, None if expr.arg is None else expr.arg.name)]  # type: ignore[union-attr]
    value = evaluate(expr, aggregates, group)
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 and isinstance(expr, Arith) is False else float(value)
    return value


def holds(cond: Condition, aggregates: dict, group: dict[str, Any]) -> bool:
    if isinstance(cond, Comparison):
        left = exact_value(evaluate(cond.left, aggregates, group))
        right = exact_value(evaluate(cond.right, aggregates, group))
        if left is None or right is None:
            return False
        return truth(left, cond.op, right)
    if isinstance(cond, Not):  # not reached: HAVING is in negation normal form (push_not)
        return not holds(cond.operand, aggregates, group)
    results = (holds(c, aggregates, group) for c in cond.items)
    return all(results) if type(cond).__name__ == "And" else any(results)
