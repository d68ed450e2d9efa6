"""The one result encoder: result columns (Arrow) as JSON lines and CSV, one number rule.

Results leave the engine as an Arrow table in one schema (:func:`result_schema`:
``query`` string, ``ts`` double, ``ids`` map<string,int64>, then one column per SELECT
value name over all queries, typed by :func:`value_types`). Aggregate rows have their
own table (``query``, ``window_start``, ``window_end``, ``group.<col>``..., values).
Every writer formats such a table; nothing builds a dict per row.

**How values print** (the same text in JSON lines and CSV): a double as the shortest
decimal that reads back as it (Python's ``repr``: ``2.0``, ``0.1``, ``1e-07``), an
integer as its digits (64-bit, exact past 2**53), a boolean as ``true``/``false``, a
text as JSON text in JSON lines and as itself in CSV. A name two queries give
different types to is a text column; each query's own values print as their own type
in JSON lines (the query's :class:`Layout` says which), as text in CSV and Parquet.

**Non-finite numbers** (an overflow to infinity): a file holds none. With
``strict`` every one is NULL (JSON ``null``, an empty CSV field, a Parquet null) and
counted; the API texts (:meth:`mqo.MatchBatch.json_text`) write them as Python's json
module does (``Infinity``, ``-Infinity``, ``NaN``).

Formatting is column by column in Arrow kernels: a double column through Arrow's
shortest-digits cast, brought to ``repr``'s layout by string kernels (the few values
where the two lay digits out differently are formatted by ``repr``); a text column
by encoding each distinct value once; rows are joined element-wise, and a batch's
lines are one Arrow string buffer written as it is.
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mqo.arrow_build import array_of, null, numpy_array, numpy_of, scalar
from mqo.text_lines import TextLines, join
from predicates import ColumnType
from predicates.ast import Arith, BoolLit, ColumnRef, Expr, Negate, StringLit

ARROW_TYPES = {
    ColumnType.INTEGER: pa.int64(),
    ColumnType.BYTE: pa.int64(),
    ColumnType.FLOAT: pa.float64(),
    ColumnType.STRING: pa.string(),
    ColumnType.BOOLEAN: pa.bool_(),
}
IDS_TYPE = pa.map_(pa.string(), pa.int64())
_json_text = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_LITERAL = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}


def _join(*parts: Any) -> pa.Array:
    """Texts joined element-wise; a ``str`` part is the same text on every row."""
    return join(*parts)


# ------------------------------------------------------------------ schema


def expression_type(expr: Expr) -> pa.DataType:
    """The Arrow type of a SELECT value: a column's own type (``id`` int64); INTEGER
    columns under ``+ - *`` and negation stay integers (exact, 64-bit); other
    arithmetic and number literals are doubles; text and boolean literals their type."""
    if isinstance(expr, ColumnRef) and expr.ctype is not None:
        return pa.int64() if expr.name == "id" else ARROW_TYPES[expr.ctype]
    if isinstance(expr, StringLit):
        return pa.string()
    if isinstance(expr, BoolLit):
        return pa.bool_()
    if isinstance(expr, Negate):
        return pa.int64() if expression_type(expr.operand) == pa.int64() else pa.float64()
    if isinstance(expr, Arith) and expr.op != "/":
        whole = expression_type(expr.left) == pa.int64() and expression_type(expr.right) == pa.int64()
        return pa.int64() if whole else pa.float64()
    return pa.float64()


def named_contexts(queries: Iterable[Any]) -> Iterable[tuple[Any, Sequence[str]]]:
    """Registered queries as (context, names of queries of that context), in order:
    a record list's runs (:meth:`mqo.registered.RecordList.named_contexts`: a block of
    a million table rows is one pair), else a pair per query."""
    runs = getattr(queries, "named_contexts", None)
    return runs() if runs is not None else ((rq.context, (rq.name,)) for rq in queries)


def _layout(context: Any, made: dict[int, Layout]) -> Layout:
    """A context's :class:`Layout`, made once per context (``made``: by its id)."""
    layout = made.get(id(context))
    if layout is None:
        members = tuple((out.name, out.name, expression_type(out.expr)) for out in context.bound.outputs)
        layout = made[id(context)] = Layout((("values", members),))
    return layout


def query_layouts(queries: Iterable[Any]) -> dict[str, Layout]:
    """Each registered query's :class:`Layout` (its SELECT names and types), by id:
    a dictionary update per run of queries of one context (:func:`named_contexts`)."""
    layouts: dict[str, Layout] = {}
    made: dict[int, Layout] = {}
    for context, names in named_contexts(queries):
        layouts.update(zip(names, repeat(_layout(context, made))))
    return layouts


def value_types(queries: Iterable[Any], leave_out: Container[str] = ()) -> dict[str, pa.DataType]:
    """The Arrow type of every SELECT value name over registered queries (a name two
    queries give different types to is text), but those named in ``leave_out`` (a
    matcher's views: their results are no output). O(contexts), not O(queries)."""
    made: dict[int, Layout] = {}
    layouts = [
        _layout(context, made)
        for context, names in named_contexts(queries)
        if not leave_out or any(name not in leave_out for name in names)
    ]
    return union_types(layouts, "values")


def union_types(layouts: Iterable[Layout], key: str) -> dict[str, pa.DataType]:
    """Column name -> type over the layouts' ``key`` objects (a text column where two
    give one name different types)."""
    types: dict[str, pa.DataType] = {}
    seen: set[int] = set()
    for layout in layouts:
        if id(layout) in seen:
            continue
        seen.add(id(layout))
        for _, column, dtype in dict(layout.objects)[key]:
            types[column] = pa.string() if column in types and types[column] != dtype else dtype
    return types


def result_schema(types: Mapping[str, pa.DataType]) -> pa.Schema:
    """The match results' one schema: query, ts, ids, then the value columns."""
    return pa.schema(
        [
            pa.field("query", pa.string(), nullable=False),
            pa.field("ts", pa.float64(), nullable=False),
            pa.field("ids", IDS_TYPE, nullable=False),
            *(pa.field(name, dtype) for name, dtype in types.items()),
        ]
    )


@dataclass(frozen=True)
class Layout:
    """What one query's JSON object holds past its fixed keys: per object key
    (``values``; ``group`` and ``values`` for aggregate rows) its members as (JSON
    key, table column, the query's own type of the value)."""

    objects: tuple[tuple[str, tuple[tuple[str, str, pa.DataType], ...]], ...]


# --------------------------------------------------------- non-finite values


def finite_columns(
    table: pa.Table, layouts: Mapping[str, Layout] | None = None, uses: np.ndarray | None = None
) -> tuple[pa.Table, int]:
    """``table`` with every non-finite number NULL, and how many there were: in double
    columns, and in text columns where a query's own value is a double written as
    text (``inf``; with ``layouts``, which say whose values are doubles). ``uses``:
    how many results each row stands for (a shared row, :class:`mqo.batch.ResultColumns`)."""
    count = 0
    floats_as_text: set[str] = set()
    for layout in {id(layout): layout for layout in (layouts or {}).values()}.values():  # shared by many queries
        for _, members in layout.objects:
            floats_as_text.update(column for _, column, dtype in members if pa.types.is_floating(dtype))
    for k, column in enumerate(table.columns):
        name = table.schema.field(k).name
        if pa.types.is_floating(column.type):
            bad = pc.invert(pc.is_finite(column))
        elif pa.types.is_string(column.type) and name in floats_as_text:
            bad = pc.is_in(column, value_set=array_of(list(_LITERAL), pa.string()))
            # only where the query's own value is a double, not a text "inf"
            bad = pc.and_(bad, _float_rows(table, name, layouts or {}))
        else:
            continue
        bad = pc.fill_null(bad, scalar(False))
        n = pc.sum(bad).as_py() or 0
        if n and uses is not None:
            n = int(uses[numpy_of(bad)].sum())
        if n:
            count += n
            table = table.set_column(k, table.field(k), pc.if_else(bad, null(column.type), column))
    return table, count


def _float_rows(table: pa.Table, column: str, layouts: Mapping[str, Layout]) -> pa.Array:
    """Per row: whether the row's query gives ``column`` a double."""
    dictionary = pc.dictionary_encode(table.column("query")).combine_chunks()
    floats = [
        any(c == column and pa.types.is_floating(t) for _, ms in layouts[q].objects for _, c, t in ms)
        if q in layouts
        else False
        for q in dictionary.dictionary.to_pylist()
    ]
    return numpy_array(np.asarray(floats, bool)[numpy_of(dictionary.indices)])


# ---------------------------------------------------------------- numbers


def float_texts(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each double as ``repr`` writes it (non-finite: ``inf``, ``-inf``, ``nan``);
    NULL stays NULL. Arrow's cast gives the same shortest digits, laid out by other
    rules: where both use an exponent only the exponent's width differs (``1e-7``
    against ``1e-07``), where both write all digits ``repr`` adds ``.0`` to a whole
    number; the rest (Arrow's exponent where ``repr`` writes digits, and the other
    way round) goes through ``repr``."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if len(values) > 64:  # many repeats (window bounds, minima): each distinct value formatted once
        coded = pc.dictionary_encode(values)  # distinct by bits: -0.0 is not 0.0
        if 4 * len(coded.dictionary) <= len(values):
            return _float_texts(coded.dictionary).take(coded.indices)
    return _float_texts(values)


def _float_texts(values: pa.Array) -> pa.Array:
    """:func:`float_texts` of each value."""
    n = len(values)
    text = pc.fill_null(pc.cast(values, pa.string()), scalar(""))
    size = pc.abs(values)
    # repr writes an exponent outside [1e-4, 1e16)
    repr_exponent = pc.or_(
        pc.greater_equal(size, scalar(1e16)), pc.and_(pc.less(size, scalar(1e-4)), pc.not_equal(size, scalar(0.0)))
    )
    arrow_exponent = pc.match_substring(text, "e")
    # repr writes a whole number with ".0"
    whole = numpy_of(pc.invert(pc.or_(pc.match_substring(text, "."), arrow_exponent)))
    lines = TextLines(n)
    lines.add(text)
    lines.add(".0", np.flatnonzero(whole))
    out = lines.build()
    exponent = np.flatnonzero(numpy_of(arrow_exponent))
    if len(exponent):  # the exponent as repr writes it: two digits at least
        padded = pc.replace_substring_regex(text.take(numpy_array(exponent)), r"e([+-])(\d)$", r"e\10\2")
        out = _put(out, exponent, padded)
    odd = pc.fill_null(
        pc.or_(pc.not_equal(repr_exponent, arrow_exponent), pc.invert(pc.is_finite(values))), scalar(False)
    )
    where = np.flatnonzero(numpy_of(odd))
    if len(where):
        picked = numpy_of(values.take(numpy_array(where)))
        fixed_texts = array_of(list(map(float.__repr__, picked.tolist())), pa.string())
        out = _put(out, where, fixed_texts)
    if values.null_count:
        out = pc.if_else(pc.is_valid(values), out, null(pa.string()))
    return out


def _put(array: pa.Array, where: np.ndarray, texts: pa.Array) -> pa.Array:
    """``array`` with ``texts`` at the positions ``where``."""
    index = np.arange(len(array), dtype=np.int64)
    index[where] = len(array) + np.arange(len(where))
    return pa.concat_arrays([array, texts]).take(numpy_array(index))


def _distinct_texts(values: pa.Array, encode: Any) -> pa.Array:
    """``encode`` of each value, run once per distinct value (NULL stays NULL)."""
    dictionary = pc.dictionary_encode(values)
    texts = array_of([encode(v) for v in dictionary.dictionary.to_pylist()], pa.string())
    return texts.take(dictionary.indices)


def value_texts(column: pa.Array, dtype: pa.DataType, *, json_text: bool, literal: bool = False) -> pa.Array:
    """The text of each value of ``column`` whose values are of type ``dtype`` (the
    column is of that type, or text holding them); NULL stays NULL. ``json_text``:
    texts as JSON strings (else as themselves, for CSV); ``literal``: non-finite
    doubles as ``Infinity``/``NaN`` (else as they are)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_string(dtype):
        return _distinct_texts(column, _json_text) if json_text else column
    if pa.types.is_string(column.type):  # a query's number or boolean kept as its text
        text = column
        if pa.types.is_boolean(dtype):
            return pc.if_else(pc.equal(text, scalar("True")), scalar("true"), scalar("false")) if json_text else text
    elif pa.types.is_floating(column.type):
        text = float_texts(column)
    elif pa.types.is_boolean(column.type):
        shown = ("true", "false") if json_text else ("True", "False")
        return pc.if_else(column, scalar(shown[0]), scalar(shown[1]))
    else:
        text = pc.cast(column, pa.string())
    if literal and pa.types.is_floating(dtype):
        for raw, shown in _LITERAL.items():
            text = pc.if_else(pc.equal(text, scalar(raw)), scalar(shown), text)
    return text


# ------------------------------------------------------------- JSON lines


def query_heads(names: Sequence[str]) -> np.ndarray:
    """``{"query":<name>`` of each query name, UTF-8 (an object array of bytes, taken by
    query numbers at once): how a JSON line starts."""
    return _bytes_array([('{"query":' + _json_text(name)).encode() for name in names])


def csv_heads(names: Sequence[str]) -> np.ndarray:
    """Each query name as a CSV field (quoted where needed), UTF-8 (an object array of
    bytes, like :func:`query_heads`): how a CSV line of results starts."""
    if not names:
        return _bytes_array([])
    return _bytes_array([name.encode() for name in _csv_quoted(array_of(list(names), pa.string())).to_pylist()])


def _bytes_array(items: list[bytes]) -> np.ndarray:
    return np.array(items or [b""], object)[: len(items)]


def shared_lines(
    tails: pa.Array, slots: np.ndarray, run_starts: np.ndarray, run_rows: np.ndarray, heads: np.ndarray
) -> Iterator[bytes]:
    """Lines whose tails are shared (JSON lines: :func:`json_lines` of the shared rows,
    made with ``heads=False``; CSV: :func:`csv_lines` of them after their query):
    line ``k`` is ``heads[slots[k]]`` (:func:`query_heads` or :func:`csv_heads` by
    slot) then the tail of its run's row (run ``j``: from line ``run_starts[j]``, row
    ``run_rows[j]``). Each run is one ``bytes.join`` over its heads (one copy of its
    bytes), yielded as it is made."""
    if not len(run_starts):
        return
    tail_bytes = [t.encode() for t in tails.to_pylist()]
    ends = [*run_starts[1:].tolist(), len(slots)]
    for a, b, row in zip(run_starts.tolist(), ends, run_rows.tolist(), strict=True):
        # head, tail, head, tail, ..., head, tail: the join puts a tail after each head
        yield tail_bytes[row].join([*heads[slots[a:b]].tolist(), b""])


def json_lines(
    table: pa.Table,
    layouts: Mapping[str, Layout],
    scalars: Sequence[str],
    *,
    literal: bool = False,
    heads: bool = True,
) -> pa.Array:
    """One JSON object per row, each ending in a newline, as one Arrow string array:
    ``{"query":..., <scalars>, <the row's query's objects>}``. A scalar column is
    written by its type (a map as an object, in its key order); an object holds the
    members the row's query's :class:`Layout` names, in its order, each as the query's
    own type. Non-finite numbers are written as they are in the table (make them NULL
    first, :func:`finite_columns`, for a strict file) or, with ``literal``, as
    ``Infinity``/``NaN``. Without ``heads`` each line lacks its query (``{"query":...``):
    the rows are shared by lines of many queries (:func:`shared_lines`)."""
    if table.num_rows == 0:
        return array_of([], pa.string())
    lines = TextLines(table.num_rows)
    if heads:
        query = table.column("query").combine_chunks()
        lines.add(_distinct_texts(query, lambda name: '{"query":' + _json_text(name)))
    _tails(lines, table, layouts, scalars, literal)
    return lines.build()


def _tails(
    lines: TextLines, table: pa.Table, layouts: Mapping[str, Layout], scalars: Sequence[str], literal: bool
) -> None:
    """Each row's JSON line after its query: the scalars, the objects, the end."""
    for name in scalars:
        column = table.column(name).combine_chunks()
        lines.add(f',"{name}":')
        if isinstance(column.type, pa.MapType):
            lines.add(_map_texts(column))
            continue
        text = value_texts(column, column.type, json_text=True, literal=literal)
        lines.add(pc.fill_null(text, scalar("null")))
    query = pc.dictionary_encode(table.column("query").combine_chunks())
    names = query.dictionary.to_pylist()
    codes = numpy_of(query.indices)
    layout_of: dict[Layout, int] = {}
    known = [layout_of.setdefault(layouts[q], len(layout_of)) if q in layouts else -1 for q in names]
    if -1 in known:
        raise ValueError(f"results of query {names[known.index(-1)]!r}, which no layout describes")
    row_layout = np.asarray(known, np.int64)[codes]
    # the rows of each layout (ascending): their objects are formatted together
    order = np.argsort(row_layout, kind="stable")
    bounds = np.searchsorted(row_layout[order], np.arange(len(layout_of) + 1))
    rows_of = [order[bounds[k] : bounds[k + 1]] for k in range(len(layout_of))]
    for key, _ in next(iter(layout_of)).objects:
        lines.add(f',"{key}":')
        for layout, rows in zip(layout_of, rows_of, strict=True):
            if len(rows):
                _object_texts(lines, table, dict(layout.objects)[key], rows, literal)
    lines.add("}\n")


def _map_texts(column: pa.MapArray) -> pa.Array:
    """A map<string, int64> column as JSON objects, keys in their order."""
    keys = _distinct_texts(column.keys, _json_text)
    pairs = _join(keys, ":", pc.cast(column.items, pa.string()))
    offsets = column.offsets
    if column.offset or offsets[0].as_py():
        start = offsets[0].as_py()
        offsets = pc.subtract(offsets, start)
    joined = pc.binary_join(pa.ListArray.from_arrays(offsets, pairs), scalar(","))
    return _join("{", joined, "}")


def _object_texts(lines: TextLines, table: pa.Table, members: Any, rows: np.ndarray, literal: bool) -> None:
    """The object of ``members`` (one layout's) on each of ``rows``, as pieces of those rows."""
    if not members:
        lines.add("{}", rows)
        return
    taken = numpy_array(rows)
    for m, (member, column, dtype) in enumerate(members):
        values = table.column(column).take(taken)
        text = pc.fill_null(value_texts(values, dtype, json_text=True, literal=literal), scalar("null"))
        lines.add(("{" if m == 0 else ",") + _json_text(member) + ":", rows)
        lines.add(text, rows)
    lines.add("}", rows)


# -------------------------------------------------------------------- CSV


def csv_lines(table: pa.Table, columns: Sequence[str], lead: str = "") -> pa.Array:
    """One CSV line per row (``\\r\\n`` ended, quoted where needed, as Python's csv
    module writes): numbers as :func:`value_texts` writes them, NULL empty, the ids
    map as its JSON text. ``lead``: what each line starts with (``,`` for the tail of
    a line whose first field comes apart, :func:`shared_lines`)."""
    if table.num_rows == 0:
        return array_of([], pa.string())
    parts: list[Any] = [lead] if lead else []
    for k, name in enumerate(columns):
        column = table.column(name).combine_chunks()
        if isinstance(column.type, pa.MapType):
            text = _map_texts(column)
        else:
            text = value_texts(column, column.type, json_text=False)
        parts.extend([*([","] if k else []), _csv_quoted(pc.fill_null(text, scalar("")))])
    parts.append("\r\n")
    return _join(*parts)


def csv_header(columns: Sequence[str]) -> str:
    quoted = _csv_quoted(array_of(list(columns), pa.string())).to_pylist()
    return ",".join(quoted) + "\r\n"


def _csv_quoted(text: pa.Array) -> pa.Array:
    """Fields as Python's csv module quotes them (QUOTE_MINIMAL): in quotes, with
    quotes doubled, where a field holds a comma, a quote or a line break."""
    needs = pc.match_substring_regex(text, '[,"\\r\\n]')
    if not pc.any(needs).as_py():
        return text
    quoted = _join('"', pc.replace_substring(text, '"', '""'), '"')
    return pc.if_else(needs, quoted, text)


def buffer_of(lines: pa.Array) -> memoryview:
    """The lines of a string array as one run of UTF-8 bytes (no copy)."""
    if not len(lines):
        return memoryview(b"")
    offsets = np.frombuffer(lines.buffers()[1], np.int32, len(lines) + 1, lines.offset * 4)
    data = lines.buffers()[2]
    return memoryview(data)[int(offsets[0]) : int(offsets[-1])]


# ------------------------------------------------------------- from matches

_PYTHON_TYPES = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}


def matches_columns(
    matches: Sequence[Any], types: Mapping[str, pa.DataType] | None = None
) -> tuple[pa.Table, dict[str, Layout], int]:
    """:class:`~mqo.results.Match` objects (what ordered emission releases) as result
    columns, and each query's :class:`Layout` read off its matches (its value names in
    order, each of the type its values have); and how many integers past 64 bits
    were made NULL. ``types``: the value columns (default: the union of the matches'
    own)."""
    seen: dict[str, dict[str, pa.DataType | None]] = {}
    for m in matches:
        own = seen.get(m.query)
        if own is None:
            own = seen[m.query] = dict.fromkeys(m.values)
        for name, value in m.values.items():
            if own.get(name) is None and value is not None:
                own[name] = _PYTHON_TYPES.get(type(value), pa.string())
    layouts = {
        query: Layout((("values", tuple((n, n, t or pa.string()) for n, t in own.items())),))
        for query, own in seen.items()
    }
    if types is None:
        types = union_types(layouts.values(), "values")
    ids = pa.array([list(m.ids.items()) for m in matches], IDS_TYPE)
    arrays = [pa.array([m.query for m in matches], pa.string()), pa.array([m.ts for m in matches], pa.float64()), ids]
    overflowed = 0
    for name, dtype in types.items():
        column = [m.values.get(name) for m in matches]
        if dtype == pa.string():
            column = [None if v is None else str(v) for v in column]
        elif dtype == pa.int64():
            column, n = within_64_bits(column)
            overflowed += n
        arrays.append(pa.array(column, dtype, from_pandas=True))
    return pa.Table.from_arrays(arrays, schema=result_schema(types)), layouts, overflowed


def within_64_bits(column: list[Any]) -> tuple[list[Any], int]:
    """An integer column's values with those past 64 bits (INTEGER arithmetic that
    overflows, exact in Python) as None; and how many."""
    wide = [k for k, v in enumerate(column) if v is not None and not -(2**63) <= v < 2**63]
    if wide:
        column = list(column)
        for k in wide:
            column[k] = None
    return column, len(wide)
