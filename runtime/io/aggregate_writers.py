"""Aggregate rows as CSV or Parquet (``mqo match --format csv|parquet``).

A match result and an aggregate row have different columns, so with CSV and Parquet
the aggregate rows go to a file of their own beside the results (JSON lines keep both
in one file: each line says what it is by its keys). Its columns:

* ``query``, ``window_start``, ``window_end`` (seconds; a landmark window's start,
  which is minus infinity, is NULL, as in JSON lines);
* one column ``group.<column>`` per GROUP BY column of any aggregate query (NULL for
  rows of queries not grouped by it, and for the NULL key);
* one column per SELECT value name over all aggregate queries (NULL where a query has
  no such value).

Types come from the queries, not the data: COUNT is an integer, SUM, MIN and MAX of an
INTEGER column are integers (exact, 64-bit), AVG, STDDEV, VARIANCE and arithmetic
(``+ - * /``) are doubles, MIN and MAX of a FLOAT column doubles, a negation has its
operand's type (``-MIN(x)`` of an INTEGER column is an integer), a group column has its
column's type.
A name two queries give different types to is written as text. Numbers are written as
for matches: a double as the shortest decimal that reads back as it, an integer as its
digits; a computed value that is not a finite number is NULL and counted.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pyarrow as pa

from mqo import (
    ARROW_TYPES,
    AggregateBatch,
    AggregateChunk,
    AggregateValues,
    buffer_of,
    csv_header,
    csv_lines,
    finite_columns,
)
from predicates import Aggregate, AggregateQuery, BoolLit, ColumnRef, ColumnType, MqoError, Negate, Number, StringLit
from runtime.io.writers import LinesWriter, OutputError, ParquetWriter, ResultWriter

FIXED = ("query", "window_start", "window_end")


def aggregates_path(output: str, fmt: str, given: str | None) -> str:
    """Where aggregate rows go with CSV or Parquet: as given, else beside the output
    (``out.csv`` -> ``out.aggregates.csv``; ``mqo.aggregates.csv`` in the working
    directory when results go to standard output)."""
    if given is not None:
        return given
    base = "mqo" if output == "-" else output
    suffix = f".{fmt}"
    if base.lower().endswith(suffix):
        base = base[: -len(suffix)]
    return f"{base}.aggregates{suffix}"


def _output_type(aq: AggregateQuery, expr: Any) -> pa.DataType:
    if isinstance(expr, Aggregate):
        call = next(
            c for c in aq.calls if c.func == expr.func and c.column == (None if expr.arg is None else expr.arg.name)
        )
        if call.func == "COUNT":
            return pa.int64()
        if call.func in ("SUM", "MIN", "MAX") and call.ctype is ColumnType.INTEGER:
            return pa.int64()
        return pa.float64()
    if isinstance(expr, Negate):
        return _output_type(aq, expr.operand)
    if isinstance(expr, ColumnRef) and expr.ctype is not None:
        return ARROW_TYPES[expr.ctype]
    if isinstance(expr, Number):
        return pa.int64() if expr.value.denominator == 1 else pa.float64()
    if isinstance(expr, StringLit):
        return pa.string()
    if isinstance(expr, BoolLit):
        return pa.bool_()
    return pa.float64()


def output_types(aq: AggregateQuery) -> dict[str, pa.DataType]:
    """The type of each SELECT value of an aggregate query, by name (see the module docstring)."""
    return {name: _output_type(aq, expr) for name, expr in aq.outputs}


def in_file_order(batch: AggregateBatch) -> AggregateBatch:
    """The rows as files hold them, whichever engine made them: by window end, then
    query (its chunks' ``position``: registration order, a query over an aggregate view
    after those over what the view reads), then group key (NULL first); the windows of
    one group with one end (count windows over tied timestamps) keep their emission order.
    Emission orders groups by first arrival and puts the windows a flush completes
    after those completed before, which a partitioned engine cannot know, so files
    use an order both engines can give. Returns one part of one chunk per query."""
    by_query: dict[str, list[AggregateChunk]] = {}  # (a query is its name: one chunk holds one query's rows)
    for part in batch.parts:
        for chunk in part:
            if len(chunk):
                by_query.setdefault(chunk.query, []).append(chunk)
    ordered = sorted(by_query.values(), key=lambda chunks: chunks[0].position)
    return AggregateBatch([[_sorted_chunk(chunks) for chunks in ordered]])


def _sorted_chunk(chunks: list[AggregateChunk]) -> AggregateChunk:
    """One query's chunks (in emission order) as one, its rows by window end, then
    group key; stable."""
    keys: dict[tuple[Any, ...], int] = {}
    codes = []
    for chunk in chunks:
        remap = np.array([keys.setdefault(key, len(keys)) for key in chunk.keys], np.int64)
        codes.append(remap[np.asarray(chunk.codes, np.int64)])
    code = np.concatenate(codes)
    ends = np.concatenate([c.ends for c in chunks])
    key_list = list(keys)
    ranks = np.empty(len(key_list), np.int64)
    ranks[sorted(range(len(key_list)), key=lambda k: _key_order(key_list[k]))] = np.arange(len(key_list))
    order = np.lexsort((ranks[code], ends))
    first = chunks[0]
    if len(chunks) == 1 and np.array_equal(order, np.arange(len(order))):
        return first
    values = [AggregateValues.concat([c.values[k] for c in chunks]).take(order) for k in range(len(first.names))]
    return dataclasses.replace(
        first,
        starts=np.concatenate([c.starts for c in chunks])[order],
        ends=ends[order],
        keys=key_list,
        codes=code[order],
        values=values,
    )


def _key_order(key: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    return tuple((v is not None, v) for v in key)


def aggregate_columns(queries: list[AggregateQuery]) -> tuple[dict[str, pa.DataType], dict[str, pa.DataType]]:
    """(group columns, value columns) of the aggregate file, each name -> Arrow type."""
    groups: dict[str, pa.DataType] = {}
    values: dict[str, pa.DataType] = {}
    for aq in queries:
        for name, ctype in zip(aq.group_by, aq.group_types, strict=True):
            dtype = ARROW_TYPES[ctype]
            groups[name] = pa.string() if name in groups and groups[name] != dtype else dtype
        for name, expr in aq.outputs:
            dtype = _output_type(aq, expr)
            values[name] = pa.string() if name in values and values[name] != dtype else dtype
    return groups, values


class AggregateTable:
    """The aggregate file's columns, and rows into them."""

    def __init__(self, queries: list[AggregateQuery]) -> None:
        self.groups, self.values = aggregate_columns(queries)
        names = [*FIXED, *(f"group.{g}" for g in self.groups), *self.values]
        clash = sorted({n for n in names if names.count(n) > 1})
        if clash:
            raise OutputError(
                f"aggregate value name {clash[0]!r} is also a column of the aggregate file; rename it with AS"
            )
        self.schema = pa.schema(
            [
                pa.field("query", pa.string(), nullable=False),
                pa.field("window_start", pa.float64()),
                pa.field("window_end", pa.float64(), nullable=False),
                *(pa.field(f"group.{g}", t) for g, t in self.groups.items()),
                *(pa.field(n, t) for n, t in self.values.items()),
            ]
        )

    def result_columns(self, batch: AggregateBatch) -> tuple[pa.Table, int]:
        """The rows as the file's columns (:meth:`AggregateBatch.result_columns`), every
        non-finite number and integer past 64 bits NULL; and how many were."""
        table, layouts, overflowed = batch.result_columns(self.groups, self.values)
        table, nonfinite = finite_columns(table, layouts)
        return table, overflowed + nonfinite


class AggregateCsvWriter(LinesWriter):
    what = "the aggregate file"

    def __init__(self, path: str, queries: list[AggregateQuery]) -> None:
        super().__init__(path)
        self.table = AggregateTable(queries)
        self._put(csv_header(self.table.schema.names).encode())

    def write_aggregates(self, batch: AggregateBatch) -> int:
        table, bad = self.table.result_columns(batch)
        self.nonfinite += bad
        self._put(buffer_of(csv_lines(table, table.schema.names)))
        return table.num_rows


class AggregateParquetWriter(ParquetWriter):
    """The Parquet results writer's file handling (a temporary name, renamed when
    closed) over the aggregate file's columns."""

    what = "the aggregate file"

    def __init__(self, path: str, queries: list[AggregateQuery]) -> None:
        self.table = AggregateTable(queries)
        super().__init__(path, {}, self.table.schema)

    def write_aggregates(self, batch: AggregateBatch) -> int:
        if not len(batch):
            return 0
        table, bad = self.table.result_columns(batch)
        self.nonfinite += bad
        self.write_batch_table(table)
        return table.num_rows


def open_aggregate_writer(path: str, fmt: str, queries: list[AggregateQuery]) -> ResultWriter:
    """A writer of aggregate rows to their own CSV or Parquet file."""
    if fmt == "csv":
        return AggregateCsvWriter(path, queries)
    if fmt == "parquet":
        if path == "-":
            raise MqoError("Parquet output needs a file, not standard output")
        return AggregateParquetWriter(path, queries)
    raise MqoError(f"aggregate rows have a file of their own only with csv or parquet, not {fmt}")
