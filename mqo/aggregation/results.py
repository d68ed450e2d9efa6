"""Results of aggregate queries: one row per (query, window, group)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from operator import itemgetter
from typing import Any

import numpy as np

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
from predicates.normalize import truth as truth
from predicates.numbers import decimal_of


@dataclass(frozen=True)
class AggregateRow:
    """``window_start``/``window_end``: a time window ``(start, end]`` in seconds (a
    landmark window's start is minus infinity); a count window's first and last row's
    ts (both in it)."""

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
class AggregateChunk:
    """Rows of one query, as columns: row ``r`` is the window ``(starts[r], ends[r]]``,
    the group ``keys[codes[r]]`` and the values ``values[k][r]`` of the outputs ``names``."""

    query: str
    position: int  # registration order, which orders rows of the same window end
    starts: np.ndarray
    ends: np.ndarray
    group_by: tuple[str, ...]
    keys: list[tuple[Any, ...]]
    codes: np.ndarray
    names: list[str]
    values: list[list[Any]]
    # an ISTREAM/DSTREAM query's rows before its relation step (mqo.aggregation.relations):
    # each row's window number (time windows) and whether it passes HAVING
    windows: np.ndarray | None = None
    passed: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ends)

    def row(self, r: int) -> AggregateRow:
        return AggregateRow(
            self.query,
            float(self.starts[r]),
            float(self.ends[r]),
            dict(zip(self.group_by, self.keys[int(self.codes[r])], strict=True)),
            {name: column[r] for name, column in zip(self.names, self.values, strict=True)},
        )

    def json_lines(self) -> list[str]:
        """One JSON line per row, built column by column (a landmark window's start is
        null; other non-finite numbers are written as json writes them, Infinity/NaN)."""

        # one %-template per chunk: a row is then one C-level format of its cells
        def part(text: str) -> str:
            return text.replace("%", "%%")

        # whole columns of finite floats or of ints go into the template as they are
        # (%r and %d write what json writes): no list of texts is made for them
        specs, cells = zip(*map(_cells, self.values), strict=True) if self.values else ((), ())
        values = "".join(
            part(("," if k else "") + _text(name) + ":") + spec
            for k, (name, spec) in enumerate(zip(self.names, specs, strict=True))
        )
        template = (
            part('{"query":' + _text(self.query))
            + ',"window_start":%s,"window_end":%s,"group":%s,"values":{'
            + values
            + "}}\n"
        )
        groups = [
            "{" + ",".join(_text(g) + ":" + _text(v) for g, v in zip(self.group_by, key, strict=True)) + "}"
            for key in self.keys
        ]
        rows = zip(
            _repeated(self.starts, null_at=-math.inf),
            _repeated(self.ends),
            _pick(groups, self.codes),
            *cells,
            strict=True,
        )
        return [template % row for row in rows]


def _cells(column: list[Any]) -> tuple[str, list[Any]]:
    """A column's template spec and cells: ``%r`` and the floats themselves when all
    are finite floats (float repr is what json writes), ``%d`` and the ints when all are
    ints (not bools), else ``%s`` and the texts."""
    kinds = set(map(type, column))
    if kinds == {float} and math.isfinite(sum(column)):  # the sum is finite iff every value is
        return "%r", column
    if kinds == {int}:
        return "%d", column
    return "%s", _texts(column)


def _pick(texts: list[str], index: np.ndarray) -> list[str] | tuple[str, ...]:
    """``texts[i]`` for every ``i`` of ``index``, at C speed (itemgetter)."""
    if len(index) == 0:
        return []
    if len(index) == 1:
        return [texts[int(index[0])]]
    return itemgetter(*index.tolist())(texts)


def _repeated(values: np.ndarray, null_at: float | None = None) -> list[str] | tuple[str, ...]:
    """The text of every value, formatted once per distinct value (a window's bounds
    repeat on each of its groups' rows); ``null_at`` is written as null."""
    if len(values) == 0:
        return []
    # by bit pattern: 0.0 and -0.0 compare equal but are written differently
    bits, index = np.unique(np.ascontiguousarray(values, np.float64).view(np.int64), return_inverse=True)
    distinct = bits.view(np.float64)
    texts = _texts(distinct.tolist())
    if null_at is not None:
        texts = ["null" if v == null_at else t for v, t in zip(distinct.tolist(), texts, strict=True)]
    return _pick(texts, index.reshape(-1))


def _texts(column: list[Any]) -> list[str]:
    """Every value of a column as json.dumps writes it; whole columns of finite floats
    or of ints at once (the usual columns: one C-level pass to format, one to check)."""
    try:
        texts = list(map(float.__repr__, column))
    except TypeError:  # not all floats
        pass
    else:
        # the sum is finite iff every value is (short of an overflow: then the slow way)
        if math.isfinite(sum(column)):
            return texts
        return list(map(_text, column))
    if set(map(type, column)) == {int}:
        return list(map(int.__repr__, column))
    return list(map(_text, column))


_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str).encode


def _text(value: Any) -> str:
    """``value`` as json.dumps writes it (the common types without the encoder's call)."""
    kind = type(value)
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    if value is None:
        return "null"
    return _encode(value)


@dataclass
class AggregateBatch:
    """Aggregate rows in emission order, held as columns per query
    (:class:`AggregateChunk`); rows are made only when asked for. ``parts``: what one
    emission gave, ordered by window end, then registration order; parts in the order
    they were emitted."""

    parts: list[list[AggregateChunk]] = field(default_factory=list)

    def __len__(self) -> int:
        return sum(len(c) for part in self.parts for c in part)

    @staticmethod
    def _order(part: list[AggregateChunk]) -> np.ndarray:
        """The rows of a part, numbered chunk after chunk, in emission order."""
        ends = np.concatenate([c.ends for c in part])
        positions = np.concatenate([np.full(len(c), c.position) for c in part])
        return np.lexsort((positions, ends))  # stable: a query's rows keep their order

    def _ordered(self) -> Iterator[tuple[list[AggregateChunk], list[tuple[int, int]]]]:
        """Per part its chunks and the (chunk, row) of its rows in emission order."""
        for part in self.parts:
            if not part:
                continue
            chunk = np.concatenate([np.full(len(c), k) for k, c in enumerate(part)])
            row = np.concatenate([np.arange(len(c)) for c in part])
            order = self._order(part)
            yield part, list(zip(chunk[order].tolist(), row[order].tolist(), strict=True))

    @property
    def rows(self) -> list[AggregateRow]:
        return [part[k].row(r) for part, order in self._ordered() for k, r in order]

    def __iter__(self) -> Iterator[AggregateRow]:
        return iter(self.rows)

    def extend(self, other: AggregateBatch) -> None:
        """``other``'s rows after these (they were emitted later)."""
        self.parts.extend(part for part in other.parts if part)

    def to_pylist(self) -> list[dict[str, Any]]:
        return [r.as_dict() for r in self.rows]

    def json_text(self) -> str:
        """Every row as a JSON line, in emission order, built from the columns
        (non-finite values as Infinity/NaN, as :meth:`mqo.batch.MatchBatch.json_text`
        writes them; a landmark window's start is null)."""
        out: list[str] = []
        for part in self.parts:
            if not part:
                continue
            lines = [line for c in part for line in c.json_lines()]
            out.extend(_pick(lines, self._order(part)))
        return "".join(out)

    def json_lines(self) -> Iterator[str]:
        for r in self.rows:
            yield json.dumps(r.as_dict(), allow_nan=False, default=str) + "\n"

    def to_arrow(self) -> Any:
        """An Arrow table: query, window_start, window_end, then ``group`` and
        ``values`` as JSON text (queries differ in their groups and values)."""
        import pyarrow as pa

        rows = self.rows
        return pa.table(
            {
                "query": pa.array([r.query for r in rows], pa.string()),
                "window_start": pa.array([r.window_start for r in rows], pa.float64()),
                "window_end": pa.array([r.window_end for r in rows], pa.float64()),
                "group": pa.array([json.dumps(r.group, default=str) for r in rows], pa.string()),
                "values": pa.array([json.dumps(r.values, default=str) for r in rows], pa.string()),
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
