"""Columnar input and output of :meth:`mqo.Matcher.push_batch`.

Input: an Arrow table or record batch, a pandas DataFrame, or a dict of numpy arrays
(or lists), with a ``ts`` column, an optional ``id`` column and the stream's columns.
Rows are taken in the given order, as if pushed one by one.

Output: a :class:`MatchBatch`, which keeps results as arrays (query number, result
``ts``, one id column per stream, -1 where the query does not read that stream), so a
million matches need not become a million Python objects. It converts to an Arrow
table with the documented schema (``query`` string, ``ts`` double, ``ids``
map<string,int64> keyed by alias, then one column per SELECT value name), to dicts,
or to :class:`~mqo.results.Match` objects.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from mqo.results import Match, TupleError
from predicates import ColumnType, StreamSchema
from predicates.ast import ColumnRef
from predicates.errors import did_you_mean

ARROW_TYPES = {
    ColumnType.INTEGER: pa.int64(),
    ColumnType.BYTE: pa.int64(),
    ColumnType.FLOAT: pa.float64(),
    ColumnType.STRING: pa.string(),
    ColumnType.BOOLEAN: pa.bool_(),
}


def value_types(queries: Any) -> dict[str, pa.DataType]:
    """The Arrow type of every SELECT value name over registered queries (a name two
    queries give different types to is text)."""
    types: dict[str, pa.DataType] = {}
    for rq in queries:
        for out in rq.normalized.outputs:
            expr = out.expr
            if isinstance(expr, ColumnRef) and expr.ctype is not None:
                dtype = pa.int64() if expr.name == "id" else ARROW_TYPES[expr.ctype]
            else:
                dtype = pa.float64()
            if out.name in types and types[out.name] != dtype:
                dtype = pa.string()
            types[out.name] = dtype
    return types


def columns_of(batch: Any, schema: StreamSchema) -> tuple[np.ndarray, np.ndarray | None, dict[str, list[Any]]]:
    """(ts, ids or None, {column: values}) from any accepted batch type."""
    if isinstance(batch, pa.RecordBatch):
        batch = pa.Table.from_batches([batch])
    if isinstance(batch, pa.Table):
        data = {name: batch.column(name) for name in batch.column_names}
        get = lambda col: col.to_numpy(zero_copy_only=False) if pa.types.is_floating(col.type) else col.to_pylist()  # noqa: E731
    elif hasattr(batch, "to_dict") and hasattr(batch, "columns"):
        data = {str(name): batch[name] for name in batch.columns}
        get = lambda col: col.to_numpy()  # noqa: E731
    elif isinstance(batch, Mapping):
        data = dict(batch)
        get = lambda col: col  # noqa: E731
    else:
        raise TupleError(
            f"push_batch takes an Arrow table, a pandas DataFrame or a dict of columns, not {type(batch).__name__}"
        )
    lowered = {name.lower(): name for name in data}
    if "ts" not in lowered:
        raise TupleError(f"stream {schema.name}: the batch has no 'ts' column (columns: {', '.join(data)})")
    ts = np.asarray(get(data[lowered["ts"]]), dtype=np.float64)
    ids = None
    if "id" in lowered:
        raw = get(data[lowered["id"]])
        ids = np.asarray(raw, dtype=np.int64)
    columns: dict[str, list[Any]] = {}
    for name in data:
        if name.lower() in ("ts", "id"):
            continue
        if schema.index_of(name) is None:
            raise TupleError(f"stream {schema.name} has no column {name!r}" + did_you_mean(name, schema.column_names))
        values = get(data[name])
        columns[schema.columns[schema.index_of(name)].name] = list(values)  # type: ignore[index]
    n = len(ts)
    for name, values in columns.items():
        if len(values) != n:
            raise TupleError(f"stream {schema.name}: column {name} has {len(values)} values but ts has {n}")
    if ids is not None and len(ids) != n:
        raise TupleError(f"stream {schema.name}: column id has {len(ids)} values but ts has {n}")
    return ts, ids, columns


@dataclass
class MatchBatch:
    """Results of a batch, as arrays.

    ``query`` indexes ``query_names``; ``ts`` is each result's largest timestamp;
    ``ids[stream]`` the id of the result's tuple of that stream (-1: not in the query);
    ``aliases[q]`` maps stream to alias for query number q; ``values`` holds the SELECT
    values per result (computed as results are found).
    """

    query_names: list[str]
    aliases: list[dict[str, str]]
    query: np.ndarray
    ts: np.ndarray
    ids: dict[str, np.ndarray]
    values: list[dict[str, Any]] = field(repr=False)
    value_types: dict[str, pa.DataType] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.ts)

    def __iter__(self) -> Iterator[Match]:
        return iter(self.matches())

    def matches(self) -> list[Match]:
        out = []
        for i in range(len(self)):
            q = int(self.query[i])
            ids = {alias: int(self.ids[stream][i]) for stream, alias in self.aliases[q].items()}
            out.append(Match(self.query_names[q], float(self.ts[i]), ids, dict(self.values[i])))
        return out

    def to_pylist(self) -> list[dict[str, Any]]:
        return [m.as_dict() for m in self.matches()]

    def to_arrow(self, value_types: Mapping[str, pa.DataType] | None = None) -> pa.Table:
        """query string, ts double, ids map<string,int64>, then the SELECT values."""
        types = dict(self.value_types if value_types is None else value_types)
        names = np.asarray(self.query_names, dtype=object)
        query = names[self.query] if len(self) else np.asarray([], dtype=object)
        keys: list[str] = []
        items: list[int] = []
        offsets = [0]
        for i in range(len(self)):
            for stream, alias in self.aliases[int(self.query[i])].items():
                keys.append(alias)
                items.append(int(self.ids[stream][i]))
            offsets.append(len(keys))
        ids = pa.MapArray.from_arrays(
            pa.array(offsets, pa.int32()), pa.array(keys, pa.string()), pa.array(items, pa.int64())
        )
        arrays = [pa.array(query, pa.string()), pa.array(self.ts, pa.float64()), ids]
        fields = [
            pa.field("query", pa.string(), nullable=False),
            pa.field("ts", pa.float64(), nullable=False),
            pa.field("ids", pa.map_(pa.string(), pa.int64()), nullable=False),
        ]
        for name, dtype in types.items():
            column = [v.get(name) for v in self.values]
            if dtype == pa.string():
                column = [None if x is None else str(x) for x in column]
            arrays.append(pa.array(column, dtype))
            fields.append(pa.field(name, dtype))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def empty_batch(streams: Sequence[str]) -> MatchBatch:
    return MatchBatch(
        [], [], np.zeros(0, np.int32), np.zeros(0, np.float64), {s: np.zeros(0, np.int64) for s in streams}, []
    )
