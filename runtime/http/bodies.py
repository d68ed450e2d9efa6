"""A posted batch of tuples (``POST /streams/{name}``) as the columns ``push_batch``
takes, with every bad row named by its index in the post.

Three formats, one set of value rules (:mod:`runtime.io.stream_rows`, shared with the
file readers, so a value means the same whether it came in a file or a post):

* JSON lines (``application/x-ndjson``): one object per line, ``ts``, optional ``id``
  and every declared column (a missing or unknown key is a bad row, never a silent
  NULL). JSON types must fit the column as in Parquet: a number for ``ts``, ``id``,
  INTEGER and FLOAT (checked by the same text rules, so ``1e400`` is a bad row, not
  infinity), a string for STRING, ``true``/``false`` for BOOLEAN, ``null`` for NULL.
* CSV (``text/csv``): read by the file reader itself (:func:`runtime.io.inputs.read_stream`)
  from a private temporary file.
* An Arrow IPC stream (``application/vnd.apache.arrow.stream``): its table is written to
  a temporary Parquet file and read by the Parquet reader, whose column-type checks
  are the rules for typed input.

A row index is 0-based over the post's data rows (for CSV, ``line`` names the line as
well). Bad rows are left out and reported; the good rows are matched. A body that
cannot be read at all (no ``ts`` column, not UTF-8, not Arrow) is a :class:`BodyError`.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from predicates import ColumnType, StreamSchema, did_you_mean
from runtime.io.input_chunks import FileIds
from runtime.io.inputs import InputError, InputSpec, read_stream
from runtime.io.stream_rows import BadRow, FieldError, convert_field

NDJSON = "application/x-ndjson"
CSV = "text/csv"
ARROW = "application/vnd.apache.arrow.stream"
FORMATS = {
    NDJSON: "ndjson",
    "application/jsonl": "ndjson",
    "application/json": "ndjson",
    CSV: "csv",
    ARROW: "arrow",
    "application/vnd.apache.arrow.file": "arrow",
}
BODY_NAME = "body"  # how messages name the posted body (never the temporary file)


class BodyError(ValueError):
    """A posted body that cannot be read as a batch of the stream at all."""


@dataclass
class Rejection:
    row: int  # 0-based among the post's data rows
    error: str
    column: str | None = None
    line: int | None = None  # CSV: the line of the body

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"row": self.row, "error": self.error}
        if self.column is not None:
            out["column"] = self.column
        if self.line is not None:
            out["line"] = self.line
        return out


@dataclass
class Posted:
    """The good rows as columns (``ts``, optional ``id``, the stream's columns) and the
    bad rows' rejections."""

    batch: dict[str, list[Any]]
    rows: int
    rejected: list[Rejection] = field(default_factory=list)


def format_of(content_type: str | None) -> str:
    """``ndjson``, ``csv`` or ``arrow`` for a Content-Type; BodyError otherwise."""
    media = (content_type or "").split(";")[0].strip().lower()
    found = FORMATS.get(media)
    if found is None:
        raise BodyError(
            f"Content-Type {media or '(none)'!r} is not a stream format; send {NDJSON} (JSON lines), {CSV} or {ARROW}"
        )
    return found


def read_body(body: bytes, fmt: str, schema: StreamSchema, max_rows: int) -> Posted:
    """The rows of ``body`` (``fmt`` from :func:`format_of`); BodyError for an unreadable
    body, ValueError('rows') when it holds more than ``max_rows`` rows."""
    if fmt == "ndjson":
        return _from_ndjson(body, schema, max_rows)
    suffix = ".csv" if fmt == "csv" else ".parquet"
    fd, path = tempfile.mkstemp(prefix="mqo-post-", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            if fmt == "csv":
                f.write(body)
            else:
                _arrow_to_parquet(body, f)
        try:
            data = read_stream(InputSpec(schema.name, path), schema, "skip")
        except InputError as err:
            raise BodyError(str(err).replace(path, BODY_NAME)) from None
    finally:
        os.unlink(path)
    if len(data) + len(data.rejected) > max_rows:
        raise TooManyRows(len(data) + len(data.rejected))
    # (plain columns: the checkpoint's log keeps a posted batch as JSON)
    return Posted(data.plain_batch(), len(data) + len(data.rejected), [_rejection(bad, path) for bad in data.rejected])


class TooManyRows(ValueError):
    def __init__(self, rows: int) -> None:
        super().__init__(rows)
        self.rows = rows


def _arrow_to_parquet(body: bytes, f: Any) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pa.ipc.open_stream(pa.BufferReader(body)).read_all()
    except (pa.ArrowInvalid, OSError) as stream_err:
        try:  # the IPC file format is taken too
            table = pa.ipc.open_file(pa.BufferReader(body)).read_all()
        except (pa.ArrowInvalid, OSError):
            raise BodyError(f"{BODY_NAME}: not an Arrow IPC stream ({stream_err})") from None
    pq.write_table(table, f)


def _rejection(bad: BadRow, path: str) -> Rejection:
    reason = bad.reason.replace(path, BODY_NAME)
    if bad.unit == "line":  # CSV: a header line, then one line per row (unless a field spans lines)
        return Rejection(bad.line - 2, reason, bad.column, bad.line)
    return Rejection(bad.line - 1, reason, bad.column)


class _Number(str):
    """A JSON number's text, kept as written, so the text rules decide it exactly."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (a non-finite number is NULL: write null)")


def _from_ndjson(body: bytes, schema: StreamSchema, max_rows: int) -> Posted:
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise BodyError(f"{BODY_NAME}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > max_rows:
        raise TooManyRows(len(lines))
    names = {c.name.lower(): (c.name, c.ctype) for c in schema.columns}
    kinds: dict[str, tuple[str, ColumnType | str]] = {"ts": ("ts", "ts"), "id": ("id", "id"), **names}
    ts: list[float] = []
    ids: list[int] = []
    id_given: list[bool] = []
    columns: dict[str, list[Any]] = {c.name: [] for c in schema.columns}
    rows: list[int] = []
    rejected: list[Rejection] = []
    for row, line in enumerate(lines):
        try:
            record = json.loads(line, parse_float=_Number, parse_int=_Number, parse_constant=_reject_constant)
        except ValueError as err:
            rejected.append(Rejection(row, f"not a JSON object: {err}"))
            continue
        if not isinstance(record, dict):
            rejected.append(Rejection(row, f"not a JSON object but {type(record).__name__}"))
            continue
        try:
            values = _row_values(record, kinds, schema)
        except _BadField as bad:
            rejected.append(Rejection(row, bad.reason, bad.column))
            continue
        ts.append(values.pop("ts"))
        given = "id" in values
        ids.append(values.pop("id") if given else 0)
        id_given.append(given)
        for name, value in values.items():
            columns[name].append(value)
        rows.append(row)
    keep = _check_ids(schema.name, ids, id_given, rows, rejected)
    batch: dict[str, list[Any]] = {"ts": [ts[k] for k in keep]}
    if any(id_given):
        batch["id"] = [ids[k] for k in keep]
    batch.update({name: [col[k] for k in keep] for name, col in columns.items()})
    rejected.sort(key=lambda r: r.row)
    return Posted(batch, len(lines), rejected)


class _BadField(ValueError):
    def __init__(self, column: str | None, reason: str) -> None:
        super().__init__(reason)
        self.column, self.reason = column, reason


_JSON_EXPECTED = {"ts": "a number", "id": "an integer"}


def _row_values(
    record: dict[str, Any], kinds: dict[str, tuple[str, ColumnType | str]], schema: StreamSchema
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in record.items():
        found = kinds.get(key.lower())
        if found is None:
            hint = did_you_mean(key, schema.column_names)
            raise _BadField(key, f"{key!r} is not a column of stream {schema.name}{hint}")
        name, kind = found
        if name in out:
            raise _BadField(key, f"column {name!r} is given twice")
        out[name] = _value(value, kind, name)
    if "ts" not in out:
        raise _BadField("ts", "no 'ts' (the event time)")
    missing = [c.name for c in schema.columns if c.name not in out]
    if missing:
        raise _BadField(missing[0], f"no value for column(s) {', '.join(missing)} (write null for NULL)")
    return out


def _value(value: Any, kind: ColumnType | str, name: str) -> Any:
    numeric = kind in ("ts", "id") or kind in (ColumnType.INTEGER, ColumnType.BYTE, ColumnType.FLOAT)
    if value is None:
        if kind in ("ts", "id"):
            raise _BadField(name, f"null is not {_JSON_EXPECTED[str(kind)]} (the {name} is never NULL)")
        return None
    if numeric:
        if not isinstance(value, _Number):
            raise _BadField(name, f"{json.dumps(value)} is not a number (JSON types must fit the column)")
        try:
            return convert_field(str(value), False, kind)
        except FieldError as err:
            raise _BadField(name, err.reason) from None
    if kind is ColumnType.BOOLEAN:
        if not isinstance(value, bool):
            raise _BadField(name, f"{json.dumps(value)} is not a boolean (true or false)")
        return value
    if not isinstance(value, str) or isinstance(value, _Number):
        raise _BadField(name, f"{value} is not a string (JSON types must fit the column)")
    return value


def _check_ids(
    stream: str, ids: list[int], id_given: list[bool], rows: list[int], rejected: list[Rejection]
) -> list[int]:
    """The good rows' positions once ids are checked: given in every row or in none, and
    unique within the post (a later repeat is a bad row, by the rule files follow:
    :class:`runtime.io.input_chunks.FileIds`, rows named by their number in the post)."""
    if not any(id_given):
        return list(range(len(ids)))
    given = [k for k, g in enumerate(id_given) if g]
    missing = "no 'id', while other rows of this post give one"
    rejected += [Rejection(rows[k], missing, "id") for k, g in enumerate(id_given) if not g]
    ids_given, rows_given = np.array(ids, np.int64)[given], np.array(rows, np.int64)[given]
    repeats, bad = FileIds(stream, BODY_NAME).bad_rows(ids_given, rows_given, "row")
    rejected += [Rejection(b.line, b.reason, "id") for b in bad]
    return np.delete(np.array(given, np.int64), repeats).tolist()


# ------------------------------------------------------------------ table changes


class TableBodyError(ValueError):
    """A table change that cannot be taken (nothing of it is applied): the message
    names the table and, for a bad row or key, its index and column."""

    def __init__(self, message: str, row: int | None = None, column: str | None = None) -> None:
        super().__init__(message)
        self.message, self.row, self.column = message, row, column


@dataclass
class TableChangeBody:
    """``POST /tables/upsert`` or ``/tables/delete``, checked: the rows (every column,
    typed) or the keys (the KEY columns, typed), and the version's ts (None: from the start)."""

    table: str
    delete: bool
    items: list[dict[str, Any]]
    ts: float | None


def parse_table_json(body: bytes) -> Any:
    """A table change's JSON, numbers kept as written (the text rules decide them)."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise TableBodyError(f"the body is not UTF-8 text ({err.reason} at byte {err.start})") from None
    try:
        return json.loads(text, parse_float=_Number, parse_int=_Number, parse_constant=_reject_constant)
    except ValueError as err:
        raise TableBodyError(f"the body is not JSON ({err})") from None


def table_change(data: Any, delete: bool, table_of: Any) -> TableChangeBody:
    """The checked change of ``data`` (from :func:`parse_table_json`): ``{"table": NAME,
    "rows": [{column: value, ...}, ...], "ts": NUMBER or null}`` to upsert, ``"keys"``
    (each an object of the KEY columns, or for a KEY of one column its value) to
    delete. ``table_of(name)``: the table's schema (it raises for an unknown table)."""
    what = "keys" if delete else "rows"
    shape = f'{{"table": NAME, "{what}": [...], "ts": NUMBER or null}}'
    if not isinstance(data, dict):
        raise TableBodyError(f"a table change is a JSON object {shape}")
    extra = sorted(set(data) - {"table", what, "ts"})
    if extra:
        other = "rows" if delete else "keys"
        hint = f" ({other} go to /tables/{'upsert' if delete else 'delete'})" if other in extra else ""
        raise TableBodyError(f"unknown field {extra[0]!r} in a table change {shape}{hint}")
    name = data.get("table")
    if not isinstance(name, str) or isinstance(name, _Number):
        raise TableBodyError(f'"table" names the table (a string), got {json.dumps(name)}')
    schema: StreamSchema = table_of(name)
    items = data.get(what)
    if not isinstance(items, list):
        raise TableBodyError(f'"{what}" is a list, got {json.dumps(items)}')
    ts = data.get("ts")
    when: float | None = None
    if ts is not None:
        if not isinstance(ts, _Number):
            raise TableBodyError(f'"ts" is a number (or null: from the start), got {json.dumps(ts)}')
        try:
            when = convert_field(str(ts), False, "ts")
        except FieldError as err:
            raise TableBodyError(f'"ts": {err.reason}') from None
    kinds = {c.name.lower(): (c.name, c.ctype) for c in schema.columns}
    key = schema.table_key
    out: list[dict[str, Any]] = []
    for k, item in enumerate(items):
        where = f"table {schema.name}, {what[:-1]} {k}"
        if delete and not isinstance(item, dict):
            if len(key) != 1:
                raise TableBodyError(f"{where}: a key is an object of the KEY columns ({', '.join(key)})", k)
            item = {key[0]: item}
        if not isinstance(item, dict):
            raise TableBodyError(f"{where}: a row is a JSON object of the table's columns", k)
        values: dict[str, Any] = {}
        for column, value in item.items():
            found = kinds.get(column.lower())
            if found is None or (delete and found[0] not in key):
                known = list(key) if delete else list(schema.column_names)
                kind = "a KEY column" if delete and found is not None else f"a column of table {schema.name}"
                raise TableBodyError(f"{where}: {column!r} is not {kind}{did_you_mean(column, known)}", k, column)
            if found[0] in values:
                raise TableBodyError(f"{where}: column {found[0]!r} is given twice", k, column)
            try:
                values[found[0]] = _value(value, found[1], found[0])
            except _BadField as bad:
                raise TableBodyError(f"{where}, column {found[0]}: {bad.reason}", k, found[0]) from None
        needed = key if delete else schema.column_names
        missing = [c for c in needed if c not in values]
        if missing:
            raise TableBodyError(
                f"{where}: no value for column(s) {', '.join(missing)}"
                + ("" if delete else " (write null for NULL; a KEY column is never NULL)"),
                k,
                missing[0],
            )
        for column in key:
            if values[column] is None:
                raise TableBodyError(
                    f"{where}, column {column}: the KEY column is null (a row needs its whole key)", k, column
                )
        out.append(values)
    return TableChangeBody(schema.name, delete, out, when)
