"""What a stream file becomes, and the rules for one value: shared by the CSV and
Parquet readers (:mod:`runtime.io.csv_reader`, :mod:`runtime.io.parquet_reader`).

The rules, the same for both readers and for both CSV paths (Arrow's fast reader and
the exact row-by-row reader), so an answer never depends on which reader ran:

* ``ts`` is a finite number, never NULL; ``id`` is a 64-bit integer, never NULL.
* INTEGER (and BYTE) is a 64-bit integer, kept exactly; a value outside
  [-2^63, 2^63 - 1] is a bad row, never rounded.
* FLOAT is a double; a value that is not finite (``inf``, ``1e400``, 300,000 digits)
  is a bad row (the query language has no such number either). NaN is NULL.
* NULL: an unquoted empty field, ``NULL``, ``null``, ``NaN`` or ``nan``. In a STRING
  column quoted text is text: ``"nan"`` and ``""`` are strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import pyarrow as pa

from mqo import ARROW_TYPES, array_of, numpy_array
from predicates import ColumnType, MqoError, StreamSchema, did_you_mean

NULL_TEXTS = frozenset({"", "NULL", "null", "NaN", "nan"})
TRUE_TEXTS = frozenset({"true", "TRUE", "True", "1", "t", "T"})
FALSE_TEXTS = frozenset({"false", "FALSE", "False", "0", "f", "F"})
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# ASCII only: Python's int() and float() also take "1_000" and other scripts' digits,
# which Arrow's reader refuses; both paths must accept the same texts.
_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_NAN = re.compile(r"[+-]?nan", re.IGNORECASE)
_INFINITE = re.compile(r"[+-]?inf(?:inity)?", re.IGNORECASE)

EXPECTED: dict[ColumnType | str, str] = {
    "ts": "a number (the event time)",
    "id": "an integer id",
    ColumnType.INTEGER: "an integer",
    ColumnType.BYTE: "an integer",
    ColumnType.FLOAT: "a number",
    ColumnType.BOOLEAN: "a boolean (true/false/1/0)",
}


class InputError(MqoError):
    """A stream file that cannot be read as given; names the file and, for a bad row,
    the line (CSV) or row (Parquet) and the column."""


class FieldError(ValueError):
    """One field that breaks the rules; ``reason`` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def utf8_fault(text: str, what: str = "the row") -> str | None:
    """None if ``text``, read with ``surrogateescape`` (as the readers read files: a
    byte that is not UTF-8 becomes a lone surrogate, so that its row can be named like
    any bad row), was UTF-8; else what is wrong, for a message."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        byte = ord(text[err.start]) - 0xDC00
        return f"not UTF-8 text (the byte 0x{byte:02x} at character {err.start + 1} of {what})"
    return None


def row_utf8_fault(raw: str, fields: list[str]) -> tuple[str, int | None] | None:
    """None if a record (its ``raw`` text, split into ``fields``) was UTF-8; else what
    is wrong (:func:`utf8_fault`) and the first field holding the bad byte (None when
    the byte is in no field: a separator's place)."""
    fault = utf8_fault(raw)
    if fault is None:
        return None
    return fault, next((k for k, text in enumerate(fields) if utf8_fault(text)), None)


def header_line(f: IO[str], path: str) -> str:
    """The first line of a file opened with ``surrogateescape``: an error at line 1 if
    it was not UTF-8."""
    line = f.readline()
    fault = utf8_fault(line, "the header")
    if fault is not None:
        raise InputError(f"{path}:1: {fault}")
    return line


def as_written(text: str) -> str:
    """Text read with ``surrogateescape`` as it can be written (each byte that was not
    UTF-8 as ``\\xNN``), for messages and the reject file."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def shown(text: str) -> str:
    """A field's text for a message: quoted, and cut short when long."""
    if not text:
        return "'(empty)'"
    if len(text) > 60:
        return repr(text[:40]) + f"... ({len(text):,} characters)"
    return repr(text)


def int64_of(text: str, what: str = "INTEGER") -> int:
    """An integer's text as an exact 64-bit int; FieldError otherwise."""
    if not _INT.fullmatch(text):
        raise FieldError(f"{shown(text)} is not an integer")
    digits = text.lstrip("+-").lstrip("0")
    # checked before int(): Python refuses to convert more than 4,300 digits
    value = int(text) if len(digits) <= 19 else None
    if value is None or not INT64_MIN <= value <= INT64_MAX:
        raise FieldError(f"{shown(text)} is out of range for {what} (a 64-bit integer: {INT64_MIN} to {INT64_MAX})")
    return value


def float_of(text: str) -> float | None:
    """A number's text as a finite double, None for NaN; FieldError otherwise."""
    if _NAN.fullmatch(text):
        return None
    if _FLOAT.fullmatch(text):
        value = float(text)
        if value - value == 0.0:  # finite
            return value
    elif not _INFINITE.fullmatch(text):
        raise FieldError(f"{shown(text)} is not a number")
    raise FieldError(f"{shown(text)} is not a finite number (a FLOAT lies within about ±1.8e308)")


def convert_field(text: str, quoted: bool, kind: ColumnType | str) -> Any:
    """One CSV field as a value of its column (``kind``: a column type, or ``'ts'``
    / ``'id'``); raises FieldError with the reason."""
    if kind is ColumnType.STRING:
        return text if quoted or text not in NULL_TEXTS else None
    # numbers and booleans: surrounding blanks do not count (Arrow's reader skips them)
    text = text.strip()
    if kind == "ts":
        if text in NULL_TEXTS:
            raise FieldError(f"{shown(text)} is not {EXPECTED['ts']}")
        try:
            value = float_of(text)
        except FieldError as err:
            raise FieldError(f"{err.reason} (the event time)") from None
        if value is None:
            raise FieldError(f"{shown(text)} is not {EXPECTED['ts']}")
        return value
    if kind == "id":
        if text in NULL_TEXTS:
            raise FieldError(f"{shown(text)} is not {EXPECTED['id']}")
        return int64_of(text, "an id")
    if text in NULL_TEXTS:
        return None
    if kind is ColumnType.INTEGER or kind is ColumnType.BYTE:
        return int64_of(text)
    if kind is ColumnType.FLOAT:
        return float_of(text)
    if kind is ColumnType.BOOLEAN:
        if text in TRUE_TEXTS:
            return True
        if text in FALSE_TEXTS:
            return False
        raise FieldError(f"{shown(text)} is not {EXPECTED[ColumnType.BOOLEAN]}")
    return text


@dataclass(frozen=True)
class BadRow:
    """A row set aside: where it is (``line`` of a CSV file, or ``row`` of a Parquet
    file, as ``unit`` says), which column, the value and why."""

    path: str
    line: int
    column: str | None
    value: str | None
    reason: str
    raw: str
    unit: str = "line"

    def message(self) -> str:
        where = f"{self.path}:{self.line}" if self.unit == "line" else f"{self.path}: row {self.line}"
        if self.column is None:
            return f"{where}: {self.reason}"
        return f"{where}: column '{self.column}': {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.path,
            self.unit: self.line,
            "column": self.column,
            "value": self.value,
            "reason": self.reason,
            "raw": self.raw,
        }


@dataclass
class StreamData:
    """One input file as columns: timestamps (float64), ids (int64; None: automatic)
    and each declared column as an Arrow array of its type (NULL where the file had
    none), as :meth:`mqo.Matcher.prepare` takes them: no Python object per value.

    ``lines`` holds each row's source line (CSV) or row number (Parquet, 1-based) when
    it is not the default (``row + 2`` for CSV: a header, then one line per row;
    ``row + 1`` for Parquet); ``unit`` says which of the two it is. A chunk of a file
    read in pieces (:mod:`runtime.io.input_chunks`) starts at row ``first_row`` of it.
    """

    stream: str
    path: str
    ts: np.ndarray
    ids: np.ndarray | None
    columns: dict[str, pa.Array | pa.ChunkedArray]
    rejected: list[BadRow] = field(default_factory=list)
    lines: list[int] | None = None
    unit: str = "line"
    first_row: int = 0

    @classmethod
    def of_values(
        cls,
        stream: str,
        path: str,
        ts: list[float],
        ids: list[int] | None,
        columns: dict[str, list[Any]],
        kinds: dict[str, ColumnType],
        **rest: Any,
    ) -> StreamData:
        """Rows read value by value (the exact CSV path): Python values of each column's
        type (``kinds``) or None, made columns."""
        arrays: dict[str, pa.Array | pa.ChunkedArray] = {
            name: _column(values, ARROW_TYPES[kinds[name]]) for name, values in columns.items()
        }
        return cls(
            stream,
            path,
            np.asarray(ts, np.float64),
            None if ids is None else np.asarray(ids, np.int64),
            arrays,
            **rest,
        )

    def __len__(self) -> int:
        return len(self.ts)

    def as_batch(self) -> dict[str, Any]:
        """The rows as columns, as :meth:`mqo.Matcher.prepare` takes them."""
        batch: dict[str, Any] = {"ts": self.ts}
        if self.ids is not None:
            batch["id"] = self.ids
        batch.update(self.columns)
        return batch

    def plain_batch(self) -> dict[str, list[Any]]:
        """:meth:`as_batch` as Python values (None for NULL): what a log of JSON lines keeps."""
        batch: dict[str, list[Any]] = {"ts": self.ts.tolist()}
        if self.ids is not None:
            batch["id"] = self.ids.tolist()
        batch.update((name, col.to_pylist()) for name, col in self.columns.items())
        return batch

    def line_of(self, i: int) -> int:
        if self.lines is not None:
            return self.lines[i]
        return self.first_row + i + (2 if self.unit == "line" else 1)

    def rows(self, start: int, end: int) -> StreamData:
        """Rows ``start`` to ``end`` (not included) as data of their own, each still
        named by its source line (no rejected rows go with them). O(1): views of the columns."""
        return StreamData(
            self.stream,
            self.path,
            self.ts[start:end],
            None if self.ids is None else self.ids[start:end],
            {name: col.slice(start, max(0, end - start)) for name, col in self.columns.items()},
            lines=None if self.lines is None else self.lines[start:end],
            unit=self.unit,
            first_row=self.first_row + start,
        )

    def bad_row(self, i: int, column: str | None, value: str | None, reason: str, raw: str = "") -> BadRow:
        return BadRow(self.path, self.line_of(i), column, value, reason, raw, self.unit)

    def drop(self, rows: set[int]) -> None:
        """Leave out ``rows`` (positions); the rows that stay keep their source lines."""
        keep = np.ones(len(self), bool)
        keep[list(rows)] = False
        lines = [self.line_of(i) for i in np.flatnonzero(keep).tolist()]
        self.ts = self.ts[keep]
        if self.ids is not None:
            self.ids = self.ids[keep]
        mask = numpy_array(keep)
        self.columns = {name: col.filter(mask) for name, col in self.columns.items()}
        self.lines = lines

    def values(self, i: int) -> dict[str, Any]:
        """Row ``i``'s values as Python values (None for NULL)."""
        return {name: col[i].as_py() for name, col in self.columns.items()}

    def column_values(self, name: str) -> list[Any]:
        """A column's values as Python values (None for NULL)."""
        return self.columns[name].to_pylist()


PIECE = 1 << 16  # values per Arrow array of a column read value by value


def _column(values: list[Any], dtype: pa.DataType) -> pa.ChunkedArray:
    """Values read one by one as a column, in arrays of :data:`PIECE` values: a whole
    file's text may pass the 2 GiB one string array holds."""
    return pa.chunked_array([array_of(values[i : i + PIECE], dtype) for i in range(0, len(values), PIECE)], dtype)


def check_header(path: str, header: list[str], schema: StreamSchema) -> None:
    """The column names of a file against its stream: ``ts``, optional ``id``, every
    declared column, nothing else, nothing twice."""
    lowered = {h.lower(): h for h in header}
    if "ts" not in lowered:
        raise InputError(f"{path}:1: the header has no 'ts' column (found: {', '.join(header)})")
    declared = {c.name.lower() for c in schema.columns}
    for h in header:
        if h.lower() not in declared and h.lower() not in ("ts", "id"):
            raise InputError(
                f"{path}:1: column '{h}' is not a column of stream {schema.name}"
                + did_you_mean(h, schema.column_names)
                + f" (columns: {', '.join(schema.column_names)})"
            )
    missing = [c.name for c in schema.columns if c.name.lower() not in lowered]
    if missing:
        raise InputError(f"{path}:1: the header lacks column(s) {', '.join(missing)} of stream {schema.name}")
    if len(lowered) != len(header):
        dup = next(h for h in header if sum(1 for o in header if o.lower() == h.lower()) > 1)
        raise InputError(f"{path}:1: column '{dup}' appears twice in the header")


def canonical_name(header: str, schema: StreamSchema) -> str:
    """A header's column as declared (``ts`` and ``id`` in lower case)."""
    lowered = header.lower()
    if lowered in ("ts", "id"):
        return lowered
    return schema.columns[schema.index_of(header)].name  # type: ignore[index]


def kind_of(name: str, schema: StreamSchema) -> ColumnType | str:
    """``'ts'``, ``'id'`` or the declared type of a (canonical) column name."""
    if name in ("ts", "id"):
        return name
    return schema.columns[schema.index_of(name)].ctype  # type: ignore[index]
