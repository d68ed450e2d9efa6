"""Columnar input and output of the batch path.

Input: an Arrow table or record batch, a pandas DataFrame, or a dict of numpy arrays
(or lists), with a ``ts`` column, an optional ``id`` column and the stream's columns
(:func:`columns_of`).

Output: a :class:`MatchBatch`. Results stay in the form the engine found them:
blocks (one assignment of tuples and the set of queries it satisfies) from the join
engine, and arrays of (row, slot) pairs from the single-stream kernels. So a million
matches need not become a million Python objects: ``len`` counts them, ``to_arrow``
builds columns (``query`` string, ``ts`` double, ``ids`` map<string,int64> keyed by
alias, then one column per SELECT value name), ``json_lines`` writes them, and
``matches()`` gives :class:`~mqo.results.Match` objects when wanted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa

from mqo.engine import ResultBlock
from mqo.plan import CompiledPlan
from mqo.results import MATCH_SETTERS, Match, ReadOnlyDict, TupleError
from mqo.rows import INT64_MAX, INT64_MIN
from predicates import ColumnType, StreamSchema
from predicates.ast import ColumnRef
from predicates.errors import did_you_mean
from predicates.numbers import EXACT_INTEGERS

ARROW_TYPES = {
    ColumnType.INTEGER: pa.int64(),
    ColumnType.BYTE: pa.int64(),
    ColumnType.FLOAT: pa.float64(),
    ColumnType.STRING: pa.string(),
    ColumnType.BOOLEAN: pa.bool_(),
}
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_dumps_strict = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def value_types(queries: Any) -> dict[str, pa.DataType]:
    """The Arrow type of every SELECT value name over registered queries (a name two
    queries give different types to is text)."""
    types: dict[str, pa.DataType] = {}
    seen: set[int] = set()
    for rq in queries:
        context = rq.context
        if id(context) in seen:
            continue
        seen.add(id(context))
        for out in context.bound.outputs:
            expr = out.expr
            if isinstance(expr, ColumnRef) and expr.ctype is not None:
                dtype = pa.int64() if expr.name == "id" else ARROW_TYPES[expr.ctype]
            else:
                dtype = pa.float64()
            if out.name in types and types[out.name] != dtype:
                dtype = pa.string()
            types[out.name] = dtype
    return types


def columns_of(
    batch: Any, schema: StreamSchema, missing_null: bool = True
) -> tuple[np.ndarray, np.ndarray | None, dict[str, Any]]:
    """(ts, ids or None, {column: values}) from any accepted batch type. Numeric columns
    come back as float64 arrays with NaN for NULL (rows of ``columns[NUMERIC]``),
    others as lists; an INTEGER column
    holding values past 2**53 (which doubles cannot all tell apart) also comes back
    exactly, as an :class:`ExactIntegers` under its name in ``columns[EXACT]``.

    Values that cannot mean what their column says are errors naming the stream, the
    row and the column: text in a number column, a fraction or a number past 64 bits
    in an INTEGER column, an infinity anywhere. A column the batch lacks is NULL with
    ``missing_null``, else an error."""
    if isinstance(batch, pa.RecordBatch):
        batch = pa.Table.from_batches([batch])
    if isinstance(batch, pa.Table):
        data = {name: batch.column(name) for name in batch.column_names}
    elif hasattr(batch, "columns") and hasattr(batch, "to_dict"):
        # through Arrow, so pandas' NaN, None and NA all become NULL
        data = {str(name): pa.array(batch[name], from_pandas=True) for name in batch.columns}
    elif isinstance(batch, Mapping):
        data = dict(batch)
    else:
        raise TupleError(
            f"push_batch takes an Arrow table, a pandas DataFrame or a dict of columns, not {type(batch).__name__}"
        )
    lowered = {name.lower(): name for name in data}
    if "ts" not in lowered:
        raise TupleError(f"stream {schema.name}: the batch has no 'ts' column (columns: {', '.join(data)})")
    ts = _floats(data[lowered["ts"]], schema.name, "ts")
    n = len(ts)
    if not np.isfinite(ts).all():
        bad = int(np.flatnonzero(~np.isfinite(ts))[0])
        raise TupleError(f"stream {schema.name}: row {bad}: ts must be a finite number")
    ids = None
    if "id" in lowered:
        ids, null, _ = _integers(data[lowered["id"]], schema.name, "id")
        if null.any():
            raise TupleError(f"stream {schema.name}: row {int(np.flatnonzero(null)[0])}: id must not be NULL")
    columns: dict[str, Any] = {}
    exact: dict[str, ExactIntegers] = {}
    for name, values in data.items():
        if name.lower() in ("ts", "id"):
            continue
        index = schema.index_of(name)
        if index is None:
            raise TupleError(f"stream {schema.name} has no column {name!r}" + did_you_mean(name, schema.column_names))
        col = schema.columns[index]
        if col.ctype in (ColumnType.INTEGER, ColumnType.BYTE):
            whole, null, wide = _integers(values, schema.name, col.name)
            converted = whole.astype(np.float64)
            converted[null] = np.nan
            if wide:
                exact[col.name] = ExactIntegers(whole, null)
        elif col.ctype.is_numeric:
            converted = _floats(values, schema.name, col.name)
            infinite = np.isinf(converted)
            if infinite.any():
                row = int(np.flatnonzero(infinite)[0])
                raise TupleError(
                    f"stream {schema.name}: row {row}, column {col.name}: {converted[row]} is not a number"
                )
        else:
            converted = list(_plain(values))
        if len(converted) != n:
            raise TupleError(f"stream {schema.name}: column {col.name} has {len(converted)} values but ts has {n}")
        columns[col.name] = converted
    if ids is not None and len(ids) != n:
        raise TupleError(f"stream {schema.name}: column id has {len(ids)} values but ts has {n}")
    absent = [c.name for c in schema.columns if c.name not in columns]
    if absent and not missing_null:
        raise TupleError(
            f"stream {schema.name}: the batch has no column(s) {', '.join(absent)} "
            "(give NULLs, or make the Matcher with missing='null')"
        )
    numeric = numeric_columns(schema)
    matrix = np.full((len(numeric), n), np.nan)
    for k, (name, _) in enumerate(numeric):
        if name in columns:
            matrix[k] = columns[name]
            columns[name] = matrix[k]
    columns[NUMERIC] = matrix
    if exact:
        columns[EXACT] = exact
    return ts, ids, columns


@dataclass(frozen=True)
class RowLayout:
    """Where a stream's stored rows keep what :func:`row_columns` takes out of them."""

    schema: StreamSchema
    numeric: list[str]  # the numeric columns' names
    numeric_at: list[int]  # and their positions in a row
    integer_at: list[int]  # positions of INTEGER and BYTE columns (exact past 2**53)
    others: list[tuple[str, int]]  # the other columns: name and position
    numeric_row: dict[int, int]  # a numeric column's position -> its row of columns[NUMERIC]


def numeric_columns(schema: StreamSchema) -> list[tuple[str, int]]:
    """The numeric columns (name, position in a stored row), in schema order: the rows
    of ``columns[NUMERIC]``."""
    return [(c.name, p) for p, c in enumerate(schema.columns, 2) if c.ctype.is_numeric]


def row_layout(plan: CompiledPlan, stream: int) -> RowLayout:
    """A stream's :class:`RowLayout` (made once per plan, :meth:`CompiledPlan.per_stream`)."""
    schema = plan.streams[stream]
    numeric = numeric_columns(schema)
    integer = [p for p, c in enumerate(schema.columns, 2) if c.ctype in (ColumnType.INTEGER, ColumnType.BYTE)]
    others = [(c.name, p) for p, c in enumerate(schema.columns, 2) if not c.ctype.is_numeric]
    numeric_at = [p for _, p in numeric]
    row_of = {p: k for k, p in enumerate(numeric_at)}
    return RowLayout(schema, [name for name, _ in numeric], numeric_at, integer, others, row_of)


def row_columns(row: tuple[Any, ...], layout: RowLayout) -> dict[str, Any]:
    """:func:`columns_of`'s columns for one stored row (``(ts, id, *values)``, values
    already checked by :mod:`mqo.rows`), without converting them again: what one pushed
    tuple takes to the kernels."""
    for p in layout.integer_at:
        v = row[p]
        if v is not None and abs(v) >= EXACT_INTEGERS:
            # an integer doubles round: the batch form keeps it exact
            one = {"ts": [row[0]], **{c.name: [x] for c, x in zip(layout.schema.columns, row[2:], strict=True)}}
            return columns_of(one, layout.schema)[2]
    columns: dict[str, Any] = {name: [row[p]] for name, p in layout.others}
    # one array (None is NaN), and no view of it per column: a pushed tuple's cost is
    # per call, and its numeric columns are read as rows of this one (the stored row
    # itself gives its values)
    columns[NUMERIC] = np.array([row[p] for p in layout.numeric_at], np.float64).reshape(-1, 1)
    return columns


EXACT = "\x00exact"  # key of the exact INTEGER columns in a columns dict (no column has this name)
# key of the numeric columns as the rows of one float64 array, in schema order (NaN:
# NULL; a column the batch lacks is all NaN): the attribute kernels read it whole, with
# no array made per column. A batch's columns dict has each row under its column's name
# too; a pushed row's (row_columns) has only this
NUMERIC = "\x00numeric"


@dataclass
class ExactIntegers:
    """An INTEGER column as int64 with a NULL mask: the values doubles would round."""

    values: np.ndarray
    null: np.ndarray

    def value(self, i: int) -> int | None:
        return None if self.null[i] else int(self.values[i])


def _integers(values: Any, stream: str, column: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """(int64 values, NULL mask, whether any is past 2**53) of an integer column."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if pa.types.is_integer(values.type):
            null = np.asarray(values.is_null().to_numpy(zero_copy_only=False), bool)
            whole = np.asarray(values.fill_null(0).cast(pa.int64()).to_numpy(zero_copy_only=False), np.int64)
            return whole, null, bool((np.abs(whole) >= EXACT_INTEGERS).any())
        values = values.to_pylist()
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and len(arr) and int(arr.max()) > INT64_MAX:
            row = int(np.argmax(arr))
            raise TupleError(f"stream {stream}: row {row}, column {column}: {arr[row]} is past 64 bits")
        whole = arr.astype(np.int64)
        return whole, np.zeros(len(whole), bool), bool((np.abs(whole) >= EXACT_INTEGERS).any())
    if arr.dtype.kind == "f":
        floats = arr.astype(np.float64)
        null = np.isnan(floats)
        bad = ~null & ((floats != np.floor(floats)) | (np.abs(floats) >= 2.0**63))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise TupleError(f"stream {stream}: row {row}, column {column}: expected an integer, got {floats[row]!r}")
        whole = np.where(null, 0, floats).astype(np.int64)
        return whole, null, False  # doubles past 2**53 were rounded before they got here
    out = np.zeros(len(arr), np.int64)
    null = np.zeros(len(arr), bool)
    wide = False
    for i, v in enumerate(arr.tolist()):
        if v is None or (isinstance(v, float) and v != v):
            null[i] = True
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
            raise TupleError(f"stream {stream}: row {i}, column {column}: expected an integer, got {v!r}")
        v = int(v)
        if not INT64_MIN <= v <= INT64_MAX:
            raise TupleError(f"stream {stream}: row {i}, column {column}: {v} is past 64 bits")
        out[i] = v
        wide = wide or abs(v) >= EXACT_INTEGERS
    return out, null, wide


def _plain(values: Any) -> Any:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values.to_pylist()
    return values


def _floats(values: Any, stream: str, column: str) -> np.ndarray:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if not (pa.types.is_floating(values.type) or pa.types.is_integer(values.type) or pa.types.is_null(values.type)):
            raise TupleError(f"stream {stream}, column {column}: expected numbers, got Arrow type {values.type}")
        values = values.cast(pa.float64()).to_numpy(zero_copy_only=False)
    try:
        arr = np.asarray(values)
        if arr.dtype.kind in "fiu":
            return arr.astype(np.float64)
    except (TypeError, ValueError):
        arr = np.array(list(values), object)
    out = np.empty(len(arr), np.float64)
    for i, v in enumerate(arr.tolist()):
        if v is None:
            out[i] = np.nan
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TupleError(f"stream {stream}: row {i}, column {column}: expected a number, got {v!r}")
        else:
            out[i] = float(v)
    return out


@dataclass
class SingleResults:
    """Single-stream results of one batch: ``slots[k]`` matched row ``rows[k]``."""

    stream: int
    rows: list[tuple[Any, ...]]
    row_of: np.ndarray
    slots: np.ndarray

    def __len__(self) -> int:
        return len(self.slots)


@dataclass
class MatchBatch:
    """Results of a batch (see the module docstring)."""

    plan: CompiledPlan
    blocks: list[ResultBlock] = field(default_factory=list)
    singles: list[SingleResults] = field(default_factory=list)

    def __len__(self) -> int:
        return sum(len(b) for b in self.blocks) + sum(len(s) for s in self.singles)

    def __iter__(self) -> Iterator[Match]:
        return iter(self.matches())

    def _groups(self) -> Iterator[tuple[np.ndarray, float, list[Any]]]:
        """(slots, ts, member rows by stream): results sharing one assignment."""
        n = len(self.plan.streams)
        for single in self.singles:
            bounds = np.flatnonzero(np.diff(single.row_of, prepend=-1, append=-1) != 0)
            for a, b in pairwise(bounds.tolist()):
                row = single.rows[int(single.row_of[a])]
                rows: list[Any] = [None] * n
                rows[single.stream] = row
                yield single.slots[a:b], row[0], rows
        for block in self.blocks:
            rows = [m.row if m is not None else None for m in block.tuples]
            yield block.numbers(), block.ts, rows

    def _entries(self) -> Iterator[tuple[int, float, list[Any]]]:
        """(slot, ts, member rows by stream) of every result."""
        for slots, ts, rows in self._groups():
            for q in slots.tolist():
                yield q, ts, rows

    def matches(self) -> list[Match]:
        plan = self.plan
        codes = plan.context_codes
        slot_record, slot_context = plan.slot_record, plan.slot_context
        out: list[Match] = []
        # the loop below runs once per result: kept lean (Match objects made by setting
        # their slots, see mqo.results.MATCH_SETTERS)
        append, new = out.append, object.__new__
        set_query, set_ts, set_ids, set_values = MATCH_SETTERS
        names = plan.record_names
        for group, ts, rows in self._groups():
            # the queries of one context share their aliases and SELECT code: an
            # assignment's ids and values are computed once per context and shared,
            # read-only, by its results
            made: dict[int, tuple[dict[str, int], dict[str, Any]]] = {}
            for r, c in zip(slot_record[group].tolist(), slot_context[group].tolist(), strict=True):
                shared = made.get(c)
                if shared is None:
                    code = codes[c]
                    ids = ReadOnlyDict({alias: rows[s][1] for s, alias in code.aliases.items()})
                    shared = made[c] = (ids, ReadOnlyDict({name: fn(rows) for name, fn in code.outputs}))
                match = new(Match)
                set_query(match, names[r])
                set_ts(match, ts)
                set_ids(match, shared[0])
                set_values(match, shared[1])
                append(match)
        return out

    def to_pylist(self) -> list[dict[str, Any]]:
        return [m.as_dict() for m in self.matches()]

    def json_lines(self) -> Iterator[str]:
        """One newline-terminated JSON object per result, in the order of :meth:`matches`."""
        for chunk in self._json_chunks():
            # JSON escapes newlines inside strings, so every "\n" ends a result
            for line in chunk[:-1].decode().split("\n"):
                yield line + "\n"

    def json_text(self) -> str:
        """All of :meth:`json_lines` as one string (non-finite values as ``Infinity``
        and ``NaN``, as Python's json module writes them)."""
        return b"".join(self._json_chunks()).decode()

    def write_json(self, write: Callable[[bytes], object]) -> int:
        """:meth:`json_lines` as strict JSON, what a JSONL file gets (every non-finite
        value written as null), encoded as UTF-8 and given to ``write`` in runs of whole
        lines (a file's ``write``): no string of the whole batch is made. Returns how
        many non-finite values were written as null."""
        replaced = [0]
        for chunk in self._json_chunks(replaced):
            write(chunk)
        return replaced[0]

    def _json_chunks(self, replaced: list[int] | None = None) -> Iterator[bytes]:
        """Runs of whole JSON lines, UTF-8 encoded. The results of one assignment share
        (ts, ids, values): that part is encoded once per query context, then prefixed
        with each query's id. With ``replaced``, non-finite values become null, counted
        there."""
        plan = self.plan
        slot_context = plan.slot_context
        codes = plan.context_codes
        prefix = plan.json_prefixes
        for slots, ts, rows in self._groups():
            contexts = slot_context[slots]
            for ctx in np.unique(contexts).tolist():
                code = codes[ctx]
                ids = {alias: rows[s][1] for s, alias in code.aliases.items()}
                values = {name: fn(rows) for name, fn in code.outputs}
                chosen = slots if len(codes) == 1 else slots[contexts == ctx]
                if replaced is None:
                    encoded = _dumps(values)
                else:
                    try:  # the common case costs nothing more: finite values encode strictly
                        encoded = _dumps_strict(values)
                    except ValueError:
                        bad = [k for k, v in values.items() if isinstance(v, float) and not math.isfinite(v)]
                        encoded = _dumps_strict({k: None if k in bad else v for k, v in values.items()})
                        replaced[0] += len(bad) * len(chosen)
                tail = (',"ts":' + _dumps(ts) + ',"ids":' + _dumps(ids) + ',"values":' + encoded + "}\n").encode()
                yield tail.join(prefix[chosen].tolist()) + tail

    def to_arrow(self, types: Mapping[str, pa.DataType] | None = None) -> pa.Table:
        """query string, ts double, ids map<string,int64>, then the SELECT values, one
        row per result in the order of :meth:`matches`.

        The value columns are those of ``types`` (name -> Arrow type), by default
        every SELECT name of the plan's queries as :func:`value_types` types them.
        Columns are built with numpy over all results at once; only the SELECT
        functions run per assignment (once per query context it satisfies), so the
        cost per result is a few array elements, not Python objects.
        """
        types = dict(types if types is not None else value_types(self.plan.records))
        plan = self.plan
        groups = list(self._groups())
        counts = np.fromiter((len(g[0]) for g in groups), np.int64, len(groups))
        slots = np.concatenate([g[0] for g in groups]) if groups else np.zeros(0, np.int64)
        group_of = np.repeat(np.arange(len(groups)), counts)
        stamps = np.repeat(np.fromiter((g[1] for g in groups), np.float64, len(groups)), counts)
        records = plan.slot_record[slots]
        named, which = np.unique(records, return_inverse=True)
        names = pa.array([plan.record_names[r] for r in named.tolist()], pa.string()).take(pa.array(which))

        contexts = plan.slot_context[slots]
        codes = plan.context_codes
        width = np.array([len(code.aliases) for code in codes], np.int64)
        offsets = np.zeros(len(slots) + 1, np.int64)
        np.cumsum(width[contexts], out=offsets[1:])
        n_streams = len(plan.streams)
        members = np.array([[-1 if r is None else r[1] for r in rows] for _, _, rows in groups], np.int64).reshape(
            len(groups), n_streams
        )
        key_code = np.zeros(int(offsets[-1]), np.int32)
        items = np.zeros(int(offsets[-1]), np.int64)
        aliases: list[str] = []
        columns = {name: np.full(len(slots), None, object) for name in types}
        for ctx in np.unique(contexts).tolist():
            code = codes[ctx]
            chosen = np.flatnonzero(contexts == ctx)
            for j, (s, alias) in enumerate(code.aliases.items()):
                at = offsets[chosen] + j
                key_code[at] = len(aliases)
                aliases.append(alias)
                items[at] = members[group_of[chosen], s]
            wanted = [(name, fn) for name, fn in code.outputs if name in columns]
            if not wanted:
                continue
            # one value per assignment, shared by every query of the context it satisfies
            assigned, back = np.unique(group_of[chosen], return_inverse=True)
            member_rows = [groups[g][2] for g in assigned.tolist()]
            for name, fn in wanted:
                values = np.empty(len(member_rows), object)
                values[:] = [fn(rows) for rows in member_rows]
                if types[name] == pa.string():
                    values[:] = [text_of(v) for v in values.tolist()]
                columns[name][chosen] = values[back]
        keys = pa.array(aliases, pa.string()).take(pa.array(key_code))
        ids = pa.MapArray.from_arrays(pa.array(offsets.astype(np.int32)), keys, pa.array(items))
        arrays = [names, pa.array(stamps, pa.float64()), ids]
        fields = [
            pa.field("query", pa.string(), nullable=False),
            pa.field("ts", pa.float64(), nullable=False),
            pa.field("ids", pa.map_(pa.string(), pa.int64()), nullable=False),
        ]
        for name, dtype in types.items():
            arrays.append(pa.array(columns[name], dtype))
            fields.append(pa.field(name, dtype))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def text_of(value: Any) -> str | None:
    """A value in a string column that queries give different types to: what the
    value prints as (``repr`` of a float is its shortest decimal, so nothing rounds)."""
    return None if value is None else str(value)
