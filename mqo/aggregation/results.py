"""Results of aggregate queries: one row per (query, window, group)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa

from mqo.arrow_build import array_of, numpy_array, numpy_of
from mqo.result_encoding import Layout, buffer_of, json_lines, within_64_bits
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


_ARROW_OF_KIND = {"i": pa.int64(), "f": pa.float64(), "b": pa.bool_()}


class AggregateValues:
    """One output column of a chunk: ``data`` (int64, float64 or bool; an object array
    of Python values for anything else: texts, integers past 64 bits, exact results of
    output expressions) and ``null``, where the value is NULL. Reads as a sequence of
    Python values (None: NULL), so code that walks a column row by row sees what a list
    would hold; the result columns take the arrays as they are."""

    __slots__ = ("data", "null")

    def __init__(self, data: np.ndarray, null: np.ndarray | None = None) -> None:
        self.data = data
        self.null = np.zeros(len(data), bool) if null is None else null

    @classmethod
    def of(cls, values: Any) -> AggregateValues:
        """A column from Python values (None: NULL): int64, float64 or bool when every
        value is one of those (int within 64 bits), else an object array."""
        if isinstance(values, AggregateValues):
            return values
        values = list(values)
        null = np.fromiter((v is None for v in values), bool, len(values))
        kinds = {type(v) for v in values if v is not None}
        if kinds == {int} and all(-(2**63) <= v < 2**63 for v in values if v is not None):
            return cls(np.array([0 if v is None else v for v in values], np.int64), null)
        if kinds == {float}:
            return cls(np.array([0.0 if v is None else v for v in values], np.float64), null)
        if kinds == {bool}:
            return cls(np.array([bool(v) for v in values], bool), null)
        data = np.empty(len(values), object)
        data[:] = values
        return cls(data, null)

    @staticmethod
    def concat(columns: list[AggregateValues]) -> AggregateValues:
        """The columns one after the other (object when their kinds differ)."""
        kinds = {c.data.dtype for c in columns}
        data = [c.data if len(kinds) == 1 else c.data.astype(object) for c in columns]
        if not data:
            return AggregateValues(np.zeros(0, object))
        return AggregateValues(np.concatenate(data), np.concatenate([c.null for c in columns]))

    def take(self, rows: np.ndarray) -> AggregateValues:
        return AggregateValues(self.data[rows], self.null[rows])

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, r: int) -> Any:
        return None if self.null[r] else _python(self.data[r])

    def tolist(self) -> list[Any]:
        out: list[Any] = self.data.tolist()
        for r in np.flatnonzero(self.null).tolist():
            out[r] = None
        return out

    def __iter__(self) -> Iterator[Any]:
        return iter(self.tolist())

    def __eq__(self, other: object) -> bool:
        return self.tolist() == (other.tolist() if isinstance(other, AggregateValues) else list(other))  # type: ignore[call-overload]

    def __repr__(self) -> str:
        return f"AggregateValues({self.tolist()!r})"

    def kind(self) -> pa.DataType | None:
        """The Arrow type of the values (None: every one is NULL, so not known)."""
        if self.null.all():
            return None
        if self.data.dtype != object:
            return _ARROW_OF_KIND[self.data.dtype.kind]
        return _kind(self.data[int(np.argmin(self.null))])

    def arrow(self, dtype: pa.DataType) -> tuple[pa.Array, int]:
        """The column as an Arrow array of ``dtype`` (the file's type of the name), and
        how many integers past 64 bits were made NULL: a numeric column of that type
        from its buffers; otherwise value by value (texts: ``str`` of each value)."""
        n = len(self.data)
        if self.null.all():
            return pa.nulls(n, dtype), 0
        if self.data.dtype != object and _ARROW_OF_KIND[self.data.dtype.kind] == dtype:
            nulls = int(self.null.sum())
            bitmap = pa.py_buffer(np.packbits(~self.null, bitorder="little")) if nulls else None
            if dtype == pa.bool_():
                bits = pa.py_buffer(np.packbits(self.data, bitorder="little"))
                return pa.Array.from_buffers(dtype, n, [bitmap, bits], nulls), 0
            return pa.Array.from_buffers(dtype, n, [bitmap, pa.py_buffer(np.ascontiguousarray(self.data))], nulls), 0
        column = self.tolist()
        overflowed = 0
        if dtype == pa.string():
            column = [None if v is None else v if isinstance(v, str) else str(v) for v in column]
        elif dtype == pa.int64():
            column, overflowed = within_64_bits(column)
        return array_of(column, dtype), overflowed


def _python(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


@dataclass
class AggregateChunk:
    """Rows of one query, as columns: row ``r`` is the window ``(starts[r], ends[r]]``,
    the group ``keys[codes[r]]`` and the values ``values[k][r]`` of the outputs ``names``
    (each a :class:`AggregateValues`; lists given are made one)."""

    query: str
    # the query's place among its matcher's aggregate queries (level by level, each in
    # registration order; one per query), which orders rows of the same window end
    position: int
    starts: np.ndarray
    ends: np.ndarray
    group_by: tuple[str, ...]
    keys: list[tuple[Any, ...]]
    codes: np.ndarray
    names: list[str]
    values: list[AggregateValues]
    # an ISTREAM/DSTREAM query's rows before its relation step (mqo.aggregation.relations):
    # each row's window number (time windows) and whether it passes HAVING
    windows: np.ndarray | None = None
    passed: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.values = [AggregateValues.of(column) for column in self.values]

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

    def group_column(self, j: int) -> AggregateValues:
        """Group column ``j`` of every row (one key value made per group used, not per row)."""
        used, inverse = np.unique(np.asarray(self.codes, np.int64), return_inverse=True)
        return AggregateValues.of([self.keys[c][j] for c in used.tolist()]).take(inverse.reshape(-1))


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
        """Every row as a JSON line, in emission order, formatted from the result columns
        (:meth:`result_columns`; non-finite values as Infinity/NaN, as
        :meth:`mqo.MatchBatch.json_text` writes them; a landmark window's start is null)."""
        table, layouts, _ = self.result_columns()
        return bytes(buffer_of(json_lines(table, layouts, ("window_start", "window_end"), literal=True))).decode()

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

    def result_columns(
        self, groups: Mapping[str, pa.DataType] | None = None, values: Mapping[str, pa.DataType] | None = None
    ) -> tuple[pa.Table, dict[str, Layout], int]:
        """The rows as result columns, in emission order: ``query``, ``window_start``
        (a landmark window's minus infinity is NULL), ``window_end``, ``group.<col>``
        per GROUP BY column, then the values; each query's :class:`Layout` (its group
        columns and values, each of the type its values have); and how many integers
        past 64 bits were made NULL. ``groups``/``values``: the columns' types (the
        aggregate file's); by default the union of the rows' own."""
        own: dict[str, dict[str, dict[str, pa.DataType | None]]] = {}
        chunks = [c for part in self.parts for c in part]
        for c in chunks:
            kinds = own.setdefault(c.query, {"group": dict.fromkeys(c.group_by), "values": dict.fromkeys(c.names)})
            for j, g in enumerate(c.group_by):
                if kinds["group"][g] is None:
                    kinds["group"][g] = _kind(next((k[j] for k in c.keys if k[j] is not None), None))
            for name, column in zip(c.names, c.values, strict=True):
                if kinds["values"][name] is None:
                    kinds["values"][name] = column.kind()
        layouts = {
            query: Layout(
                (
                    ("group", tuple((g, f"group.{g}", t or pa.string()) for g, t in kinds["group"].items())),
                    ("values", tuple((n, n, t or pa.string()) for n, t in kinds["values"].items())),
                )
            )
            for query, kinds in own.items()
        }
        group_types = dict(groups) if groups is not None else _union(layouts.values(), 0)
        value_types = dict(values) if values is not None else _union(layouts.values(), 1)
        # per part its chunks and the emission order of their rows, numbered chunk after chunk
        order = [(part, numpy_array(self._order(part))) for part in self.parts if part]
        names = list(dict.fromkeys(c.query for c in chunks))
        number = {q: k for k, q in enumerate(names)}
        query_codes = [np.concatenate([np.full(len(c), number[c.query], np.int32) for c in p]) for p, _ in order]
        starts = [np.concatenate([c.starts for c in p]) for p, _ in order]
        ends = [np.concatenate([c.ends for c in p]) for p, _ in order]
        start = np.concatenate([s[numpy_of(o)] for s, (_, o) in zip(starts, order, strict=True)]) if order else []
        start = np.asarray(start, np.float64)
        columns: list[pa.Array] = [
            array_of(names, pa.string()).take(
                _concat([numpy_array(q).take(o) for q, (_, o) in zip(query_codes, order, strict=True)], pa.int32())
            ),
            AggregateValues(np.asarray(start, np.float64), np.asarray(start, np.float64) == -math.inf).arrow(
                pa.float64()
            )[0],
            _concat([numpy_array(e).take(o) for e, (_, o) in zip(ends, order, strict=True)], pa.float64()),
        ]
        overflowed = 0
        for dtype, read in [
            *((t, _group_reader(g)) for g, t in group_types.items()),
            *((t, _value_reader(v)) for v, t in value_types.items()),
        ]:
            pieces = []
            for p, o in order:
                made = [read(c).arrow(dtype) for c in p]
                overflowed += sum(wide for _, wide in made)
                pieces.append(_concat([a for a, _ in made], dtype).take(o))
            columns.append(_concat(pieces, dtype))
        fields = [
            pa.field("query", pa.string(), nullable=False),
            pa.field("window_start", pa.float64()),
            pa.field("window_end", pa.float64(), nullable=False),
            *(pa.field(f"group.{g}", t) for g, t in group_types.items()),
            *(pa.field(v, t) for v, t in value_types.items()),
        ]
        return pa.Table.from_arrays(columns, schema=pa.schema(fields)), layouts, overflowed


_PYTHON_TYPES = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}


def _kind(value: Any) -> pa.DataType | None:
    """The Arrow type of a value as a query gives it (None: not known yet; another
    type, a Fraction say, is written as its text)."""
    return None if value is None else _PYTHON_TYPES.get(type(value), pa.string())


def _union(layouts: Any, k: int) -> dict[str, pa.DataType]:
    """Name -> type over the layouts' groups (``k`` 0) or values (1); a name two
    queries type differently is text."""
    types: dict[str, pa.DataType] = {}
    for layout in layouts:
        for name, _, dtype in layout.objects[k][1]:
            types[name] = pa.string() if name in types and types[name] != dtype else dtype
    return types


def _concat(arrays: list[pa.Array], dtype: pa.DataType) -> pa.Array:
    return pa.concat_arrays(arrays) if arrays else pa.nulls(0, dtype)


def _group_reader(name: str) -> Any:
    def read(chunk: AggregateChunk) -> AggregateValues:
        if name not in chunk.group_by:
            return AggregateValues(np.zeros(len(chunk), bool), np.ones(len(chunk), bool))
        return chunk.group_column(chunk.group_by.index(name))

    return read


def _value_reader(name: str) -> Any:
    def read(chunk: AggregateChunk) -> AggregateValues:
        if name in chunk.names:
            return chunk.values[chunk.names.index(name)]
        return AggregateValues(np.zeros(len(chunk), bool), np.ones(len(chunk), bool))

    return read


# ------------------------------------------------------------- expressions


def exact_value(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Fraction):  # a constant or a quotient: exact already (decimal_of would round it to a double)
        return value
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
    """A SELECT value as written: an aggregate as computed, arithmetic (+ - * /) a
    double, a negation of its operand's type (``-MIN(x)`` of an INTEGER an integer,
    ``-AVG(x)`` a double), as :func:`runtime.io.aggregate_writers.output_types` types
    the columns."""
    if isinstance(expr, Aggregate):  # the usual output: the aggregate as computed
        return aggregates[(expr.func, None if expr.arg is None else expr.arg.name)]  # type: ignore[union-attr]
    if isinstance(expr, Negate):
        inner = output_value(expr.operand, aggregates, group)
        return None if inner is None else -inner
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
