"""Reading a table file (``mqo match --table patients=patients.csv``).

A CSV file with a header: the table's columns (all of them, any order, each once),
and two optional ones:

* ``ts``: the event time at which the row's version takes effect (a number); a row
  with an empty ``ts``, and every row of a file without the column, holds from the start;
* ``op``: ``upsert`` (or empty: the default) or ``delete`` (the key's row is gone from
  ``ts`` on; only the key's fields count). A table that declares a column named ``op``
  has no such column: its files only put rows.

Rows of one key and one ts take effect in file order (the last one wins). Every field
follows the stream files' rules (:func:`runtime.io.stream_rows.convert_field`); a bad
field, a missing key or an unknown column is an :class:`InputError` naming the file,
line and column. Table files are reference data, read whole before matching starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from predicates import StreamSchema, did_you_mean
from runtime.io.csv_reader import split_records
from runtime.io.stream_rows import FieldError, InputError, convert_field, header_line, row_utf8_fault, shown


@dataclass(frozen=True)
class TableSpec:
    """A table's file (``--table TABLE=FILE``, read by :data:`runtime.io.named_paths.TABLE`)."""

    table: str
    path: str


@dataclass(frozen=True)
class TableChange:
    """One row of a table file: its version's ts (None: from the start), whether it
    deletes its key, the row's values (typed) and its line."""

    ts: float | None
    delete: bool
    values: dict[str, Any]
    line: int


def read_table_file(spec: TableSpec, schema: StreamSchema) -> list[TableChange]:
    """Every row of a table file, checked, in file order."""
    path = spec.path
    p = Path(path)
    if not p.is_file():
        raise InputError(f"table file not found: {path}" if not p.exists() else f"not a file: {path}")
    if p.suffix.lower() in (".parquet", ".pq"):
        raise InputError(f"{path}: a table file is CSV (with a header); Parquet table files are not read yet")
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
        header = header_line(f, path).rstrip("\r\n").split(",")
        names = _header(path, header, schema)
        key = {c.lower() for c in schema.table_key}
        out: list[TableChange] = []
        for line, fields, quoted, raw in split_records(f, path):
            if len(fields) == 1 and not fields[0].strip() and not quoted[0]:
                continue  # a blank line
            fault = row_utf8_fault(raw, fields)
            if fault is not None:
                reason, at = fault
                column = f" column {names[at]}:" if at is not None and at < len(names) else ""
                raise InputError(f"{path}:{line}:{column} {reason}")
            if len(fields) != len(names):
                raise InputError(f"{path}:{line}: expected {len(names)} fields, found {len(fields)}")
            ts: float | None = None
            delete = False
            values: dict[str, Any] = {}
            for name, text, was_quoted in zip(names, fields, quoted, strict=True):
                try:
                    if name == "ts":
                        ts = None if not text.strip() else convert_field(text, was_quoted, "ts")
                    elif name == "op":
                        delete = _op(text)
                    else:
                        column = schema.columns[schema.index_of(name)]  # type: ignore[index]
                        values[column.name] = convert_field(text, was_quoted, column.ctype)
                except FieldError as err:
                    raise InputError(f"{path}:{line}: column {name}: {err.reason}") from None
            for column in schema.table_key:
                if values[column] is None:
                    raise InputError(
                        f"{path}:{line}: column {column}: the KEY column is empty (a row needs its whole key)"
                    )
            if delete:
                values = {c: v for c, v in values.items() if c.lower() in key}
            out.append(TableChange(ts, delete, values, line))
    return out


def _header(path: str, header: list[str], schema: StreamSchema) -> list[str]:
    """Each header field as a table column's declared name, ``ts`` or ``op``."""
    own_op = schema.index_of("op") is not None
    names: list[str] = []
    for field in header:
        text = field.strip()
        index = schema.index_of(text)
        if index is not None:
            name = schema.columns[index].name
        elif text.lower() == "ts" or (text.lower() == "op" and not own_op):
            name = text.lower()
        else:
            known = [*schema.column_names, "ts", *([] if own_op else ["op"])]
            raise InputError(
                f"{path}:1: column {shown(text)} is not a column of table {schema.name}"
                + did_you_mean(text, known)
                + f" (columns: {', '.join(schema.column_names)}; optional: ts"
                + ("" if own_op else ", op")
                + ")"
            )
        if name in names:
            raise InputError(f"{path}:1: column {name} is in the header twice")
        names.append(name)
    missing = [c for c in schema.column_names if c not in names]
    if missing:
        raise InputError(f"{path}:1: the header lacks column(s) {', '.join(missing)} of table {schema.name}")
    return names


def _op(text: str) -> bool:
    """Whether an ``op`` field says delete."""
    word = text.strip().lower()
    if word in ("", "upsert"):
        return False
    if word == "delete":
        return True
    raise FieldError(f"{shown(text)} is not upsert or delete")
