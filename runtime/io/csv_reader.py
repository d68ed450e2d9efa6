"""Reading a CSV stream file.

Whole (:func:`read_csv`) or a chunk at a time (:class:`CsvChunks`, Arrow's streaming
reader). Two paths, one set of rules (:mod:`runtime.io.stream_rows`):

* the fast path: Arrow's CSV reader converts whole columns at once;
* the exact path, taken when Arrow refuses the file or lets a value through that the
  rules refuse (a NULL ``ts``, an infinite FLOAT): the file is read again record by
  record, and every bad row is named by line and column (or, with
  ``on_bad_row='skip'``, set aside with its reason while the good rows are kept).
  Read in chunks, the exact path takes over from the first block Arrow refuses and
  reads the rest of the file.

The exact path splits records itself instead of using Python's :mod:`csv` module,
for two reasons: it must know whether a field was quoted (``"nan"`` in a STRING column
is text, an unquoted ``nan`` is NULL, as on the fast path), and :mod:`csv` refuses a
field over 131,072 bytes as a malformed file, which would make one long field fatal
even with ``skip``.
"""

from __future__ import annotations

import csv
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from mqo import numpy_of
from predicates import ColumnType, StreamSchema
from runtime.io.stream_rows import (
    FALSE_TEXTS,
    NULL_TEXTS,
    TRUE_TEXTS,
    BadRow,
    FieldError,
    InputError,
    StreamData,
    as_written,
    canonical_name,
    check_header,
    convert_field,
    header_line,
    kind_of,
    row_utf8_fault,
)

# Integers are read as text and checked here: Arrow's own integer parser also takes
# hexadecimal ("0x10"), which the rules do not.
_CSV_READ_TYPES = {
    ColumnType.INTEGER: pa.string(),
    ColumnType.BYTE: pa.string(),
    ColumnType.FLOAT: pa.float64(),
    ColumnType.STRING: pa.string(),
    ColumnType.BOOLEAN: pa.bool_(),
    "ts": pa.float64(),
    "id": pa.string(),
}
_INTEGER_KINDS = ("id", ColumnType.INTEGER, ColumnType.BYTE)
_NULL_PATTERN = "^(" + "|".join(sorted(NULL_TEXTS)) + ")$"


def read_header(path: str, schema: StreamSchema) -> tuple[list[str], dict[str, str], list[ColumnType | str]]:
    """The header of a CSV stream file, checked against its stream: the column names
    as written, each one's declared name and its kind."""
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
        first = header_line(f, path)
    if not first.strip():
        raise InputError(f"{path}:1: the file is empty; a header with a 'ts' column is needed")
    header = [h.strip() for h in next(csv.reader([first]))]
    check_header(path, header, schema)
    canonical = {h: canonical_name(h, schema) for h in header}
    return header, canonical, [kind_of(canonical[h], schema) for h in header]


def _arrow_options(header: list[str], kinds: list[ColumnType | str], block_size: int | None = None) -> dict[str, Any]:
    read = pacsv.ReadOptions(column_names=header, skip_rows=1)
    if block_size is not None:
        read.block_size = block_size
    return {
        "read_options": read,
        "parse_options": pacsv.ParseOptions(newlines_in_values=False),
        "convert_options": pacsv.ConvertOptions(
            column_types={h: _CSV_READ_TYPES[k] for h, k in zip(header, kinds, strict=True)},
            null_values=sorted(NULL_TEXTS),
            strings_can_be_null=True,
            true_values=sorted(TRUE_TEXTS),
            false_values=sorted(FALSE_TEXTS),
            quoted_strings_can_be_null=False,
        ),
    }


def read_csv(stream: str, path: str, schema: StreamSchema, on_bad_row: str) -> StreamData:
    header, canonical, kinds = read_header(path, schema)
    try:
        checked = _checked(pacsv.read_csv(path, **_arrow_options(header, kinds)), kinds)
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        checked = None
    if checked is None:  # the exact path, record by record, names the line and column of every bad row
        ((data, _),) = exact_chunks(stream, path, header, canonical, kinds, on_bad_row, sys.maxsize)
        return data
    return _from_table(stream, path, checked, canonical)


class CsvChunks:
    """A CSV stream file read a chunk of at most ``chunk_rows`` rows at a time, by the
    same rules and with the same bad rows as :func:`read_csv`: Arrow's streaming
    reader while its blocks obey the rules; from the first block that does not on,
    the exact path (the rows before it were good: it passes over them)."""

    def __init__(self, stream: str, path: str, schema: StreamSchema, on_bad_row: str, chunk_rows: int) -> None:
        self.stream, self.path, self.on_bad_row, self.chunk_rows = stream, path, on_bad_row, chunk_rows
        self.header, self.canonical, self.kinds = read_header(path, schema)
        self.size = os.path.getsize(path)
        self.position = 0  # about how many bytes have been read (for a progress bar)

    def __iter__(self) -> Iterator[StreamData]:
        done = 0  # rows given so far
        source = pa.OSFile(self.path)
        try:
            # Arrow's blocks are cut into chunks; a block of about 128 bytes a row keeps
            # a small chunk size small (a row longer than a block takes the exact path)
            block = min(max(self.chunk_rows * 128, 256), 1 << 24)
            reader = pacsv.open_csv(source, **_arrow_options(self.header, self.kinds, block))
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    self.position = self.size
                    return
                table = _checked(pa.Table.from_batches([batch]), self.kinds)
                if table is None:
                    break
                self.position = source.tell()
                for start in range(0, table.num_rows, self.chunk_rows):
                    data = _from_table(self.stream, self.path, table.slice(start, self.chunk_rows), self.canonical)
                    data.first_row = done
                    done += len(data)
                    yield data
        except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
            pass
        finally:
            source.close()
        for data, chars in exact_chunks(
            self.stream, self.path, self.header, self.canonical, self.kinds, self.on_bad_row, self.chunk_rows, done
        ):
            self.position = min(self.size, self.position + chars)
            yield data
        self.position = self.size


def _checked(table: pa.Table, kinds: list[ColumnType | str]) -> pa.Table | None:
    """Arrow's conversion with integer columns made exact, or None where it breaks the
    rules (the exact path then reads the rows)."""
    for k, kind in enumerate(kinds):
        if kind in _INTEGER_KINDS:
            integers = _integers(table.column(k))
            if integers is None:
                return None
            table = table.set_column(k, table.field(k).with_type(pa.int64()), integers)
    return table if _within_rules(table, kinds) else None


def _integers(column: pa.ChunkedArray) -> pa.ChunkedArray | None:
    """An integer column's text as exact int64 values, or None if some value breaks
    the rules (decimal digits only, within 64 bits; the exact path names it)."""
    import pyarrow.compute as pc

    text = pc.utf8_trim(column, characters=" \t")
    # a quoted NULL spelling is text to Arrow; in a number column it is NULL all the same
    # (Arrow values are made from Arrow arrays here: making one from a Python list or
    # None imports pandas, half a second of start-up)
    text = pc.if_else(pc.match_substring_regex(text, _NULL_PATTERN), pa.nulls(1, pa.string())[0], text)
    if pc.all(pc.match_substring_regex(text, r"^[+-]?[0-9]+$")).as_py() is False:
        return None
    try:
        return text.cast(pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _within_rules(table: pa.Table, kinds: list[ColumnType | str]) -> bool:
    """Whether Arrow's conversion obeys the rules Arrow does not know: ``ts`` and
    ``id`` are never NULL, ``ts`` and FLOAT values are finite."""
    import pyarrow.compute as pc

    for column, kind in zip(table.columns, kinds, strict=True):
        if kind in ("ts", "id") and column.null_count:
            return False
        if kind == "ts" and pc.all(pc.is_finite(column)).as_py() is False:
            return False
        if kind is ColumnType.FLOAT and pc.any(pc.is_inf(column)).as_py():
            return False
    return True


def _from_table(stream: str, path: str, table: pa.Table, canonical: dict[str, str]) -> StreamData:
    """Arrow's columns as they are (``ts`` and ``id`` as numpy arrays), NaN made NULL."""
    import pyarrow.compute as pc

    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    ts = np.zeros(0, np.float64)
    ids: np.ndarray | None = None
    for name in table.column_names:
        column = table.column(name)
        target = canonical[name]
        if target == "ts":
            ts = numpy_of(column)  # (never NULL: _within_rules)
        elif target == "id":
            ids = numpy_of(column)
        else:
            if pa.types.is_floating(column.type):
                column = pc.if_else(pc.is_nan(column), pa.nulls(1, column.type)[0], column)  # NaN is NULL
            columns[target] = column
    return StreamData(stream, path, ts, ids, columns)


def split_records(lines: Iterable[str], path: str) -> Iterator[tuple[int, list[str], list[bool], str]]:
    """(first line number, fields, whether each field was quoted, raw text) of every
    record after the header, as RFC 4180 reads them: a field that starts with ``"``
    is quoted, ``""`` inside it is one ``"``, and it may hold commas and line breaks.
    A quote elsewhere is an ordinary character (as Python's :mod:`csv` reads it)."""
    it = iter(lines)
    number = 1  # the header
    for line in it:
        number += 1
        first = number
        if '"' not in line:
            body = line.rstrip("\r\n")
            fields = body.split(",")
            yield first, fields, [False] * len(fields), body
            continue
        fields = []
        quoted: list[bool] = []
        raw = [line]
        buf: list[str] = []
        was_quoted = False
        at_start = True
        in_quotes = False
        text, i = line, 0
        while True:
            n = len(text)
            while i < n:
                if in_quotes:
                    j = text.find('"', i)
                    if j < 0:
                        buf.append(text[i:])
                        i = n
                        break
                    buf.append(text[i:j])
                    if j + 1 < n and text[j + 1] == '"':
                        buf.append('"')
                        i = j + 2
                    else:
                        in_quotes = False
                        i = j + 1
                    continue
                c = text[i]
                if c == ",":
                    fields.append("".join(buf))
                    quoted.append(was_quoted)
                    buf, was_quoted, at_start = [], False, True
                elif c in "\r\n":
                    i = n  # the end of the record
                    break
                elif c == '"' and at_start:
                    in_quotes = was_quoted = True
                    at_start = False
                else:
                    buf.append(c)
                    at_start = False
                i += 1
            if not in_quotes:
                break
            nxt = next(it, None)
            if nxt is None:
                raise InputError(f"{path}:{first}: a quoted field that starts on this line is never closed")
            number += 1
            raw.append(nxt)
            text, i = nxt, 0
        fields.append("".join(buf))
        quoted.append(was_quoted)
        yield first, fields, quoted, "".join(raw).rstrip("\r\n")


def exact_chunks(
    stream: str,
    path: str,
    header: list[str],
    canonical: dict[str, str],
    kinds: list[ColumnType | str],
    on_bad_row: str,
    chunk_rows: int,
    skip: int = 0,
) -> Iterator[tuple[StreamData, int]]:
    """The exact path a chunk at a time: (rows, about how many characters they took)
    for every ``chunk_rows`` good rows, and the last ones (at least one chunk, maybe
    empty). The first ``skip`` records were read already (good rows): passed over."""
    targets = [canonical[h] for h in header]
    has_id = "id" in targets
    width = len(header)
    types = {t: k for t, k in zip(targets, kinds, strict=True) if isinstance(k, ColumnType)}

    def empty() -> _Rows:
        return _Rows(path, [], [] if has_id else None, {t: [] for t in targets if t not in ("ts", "id")})

    data, chars = empty(), 0
    # a byte that is not UTF-8 is read as a lone surrogate (surrogateescape), so that
    # its row is a bad row like any other, named by its line, not the end of the file
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
        f.readline()
        for line, fields, quoted, raw in split_records(f, path):
            chars += len(raw) + 1
            if len(fields) == 1 and not fields[0].strip() and not quoted[0]:
                continue  # a blank line
            if skip:
                skip -= 1
                continue
            fault = row_utf8_fault(raw, fields)
            if fault is not None:
                reason, at = fault
                column, value = (header[at], as_written(fields[at])) if at is not None and at < width else (None, None)
                _bad(data, on_bad_row, line, column, value, reason, as_written(raw))
                continue
            if len(fields) != width:
                reason = f"expected {width} fields (as in the header), found {len(fields)}"
                _bad(data, on_bad_row, line, None, None, reason, raw)
                continue
            values: list[Any] = []
            for h, kind, text, q in zip(header, kinds, fields, quoted, strict=True):
                try:
                    values.append(convert_field(text, q, kind))
                except FieldError as err:
                    _bad(data, on_bad_row, line, h, text, err.reason, raw)
                    break
            else:
                for target, value in zip(targets, values, strict=True):
                    if target == "ts":
                        data.ts.append(value)
                    elif target == "id":
                        data.ids.append(value)  # type: ignore[union-attr]
                    else:
                        data.columns[target].append(value)
                data.lines.append(line)
                if len(data) >= chunk_rows:
                    yield data.finished(stream, types), chars
                    data, chars = empty(), 0
    yield data.finished(stream, types), chars


@dataclass
class _Rows:
    """The exact path's good rows so far, value by value, and its rejected ones."""

    path: str
    ts: list[float]
    ids: list[int] | None
    columns: dict[str, list[Any]]
    lines: list[int] = field(default_factory=list)
    rejected: list[BadRow] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ts)

    def finished(self, stream: str, types: dict[str, ColumnType]) -> StreamData:
        return StreamData.of_values(
            stream, self.path, self.ts, self.ids, self.columns, types, lines=self.lines, rejected=self.rejected
        )


def _bad(data: _Rows, on_bad_row: str, line: int, column: str | None, value: str | None, reason: str, raw: str) -> None:
    row = BadRow(data.path, line, column, value, reason, raw)
    if on_bad_row != "skip":
        raise InputError(row.message())
    data.rejected.append(row)
