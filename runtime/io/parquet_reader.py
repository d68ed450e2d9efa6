"""Reading a Parquet stream file.

A Parquet column has a type of its own, so what it may hold is decided by type, never
by value (a string column of digits is not a number column, and a boolean column is
not an integer one):

=============== ==========================================================
declared type    Parquet column types accepted
=============== ==========================================================
INTEGER, BYTE    any integer type (an unsigned value above 2^63 - 1 is a bad row)
FLOAT            any integer or floating-point type (integers become doubles)
STRING           string, large string
BOOLEAN          boolean
``ts``           any integer or floating-point type
``id``           any integer type
=============== ==========================================================

Dictionary-encoded columns count as their value type, and a column of only NULLs
fits any declared type. Any other column type is an error naming the column, its type
and what the declared type takes; like a bad CSV header, it is not excused by
``--on-bad-row skip`` (every row would be bad). Values are checked by the same rules
as CSV fields (:mod:`runtime.io.stream_rows`): a NULL or non-finite ``ts``, a NULL ``id``,
an infinite FLOAT are bad rows, named by row number (1-based) and column, and set
aside with ``skip``. A file is read whole (:func:`read_parquet`) or a batch at a time
(:class:`ParquetChunks`, ``mqo match``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mqo import ARROW_TYPES, array_of, arrow_scalar, numpy_with_nulls
from predicates import ColumnType, StreamSchema
from runtime.io.stream_rows import (
    INT64_MAX,
    InputError,
    StreamData,
    canonical_name,
    check_header,
    kind_of,
)

_ACCEPTS: dict[ColumnType | str, str] = {
    ColumnType.INTEGER: "an integer column",
    ColumnType.BYTE: "an integer column",
    ColumnType.FLOAT: "an integer or floating-point column",
    ColumnType.STRING: "a string column",
    ColumnType.BOOLEAN: "a boolean column",
    "ts": "an integer or floating-point column (seconds)",
    "id": "an integer column",
}


def _fits(kind: ColumnType | str, dtype: pa.DataType) -> bool:
    if pa.types.is_null(dtype):
        return True
    if kind in ("id", ColumnType.INTEGER, ColumnType.BYTE):
        return pa.types.is_integer(dtype)
    if kind in ("ts", ColumnType.FLOAT):
        return pa.types.is_integer(dtype) or pa.types.is_floating(dtype)
    if kind is ColumnType.STRING:
        return pa.types.is_string(dtype) or pa.types.is_large_string(dtype)
    if kind is ColumnType.BOOLEAN:
        return pa.types.is_boolean(dtype)
    return False


def read_parquet(stream: str, path: str, schema: StreamSchema, on_bad_row: str) -> StreamData:
    import pyarrow.parquet as pq  # here: a run over CSV files starts without it (with pyarrow.fs, ~25 ms)

    try:
        table = pq.ParquetFile(path).read()  # (pq.read_table goes through pyarrow.dataset, which imports pandas)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as err:
        raise InputError(f"{path}: not a readable Parquet file ({err})") from None
    check_header(path, list(table.column_names), schema)
    return _rows(stream, path, table, schema, on_bad_row, 0)


class ParquetChunks:
    """A Parquet stream file read ``chunk_rows`` rows at a time (by the same rules and
    with the same bad rows as :func:`read_parquet`)."""

    def __init__(self, stream: str, path: str, schema: StreamSchema, on_bad_row: str, chunk_rows: int) -> None:
        import pyarrow.parquet as pq

        self.stream, self.path, self.schema, self.on_bad_row, self.chunk_rows = (
            stream,
            path,
            schema,
            on_bad_row,
            chunk_rows,
        )
        try:
            self.file = pq.ParquetFile(path)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as err:
            raise InputError(f"{path}: not a readable Parquet file ({err})") from None
        self.header = list(self.file.schema_arrow.names)
        check_header(path, self.header, schema)
        self.rows = self.file.metadata.num_rows
        self.size = os.path.getsize(path)
        self.position = 0  # about how many bytes have been read (for a progress bar)
        # a column of the wrong type is an error before any row is read (also in an empty file)
        # (an empty table made from Arrow arrays: pyarrow's empty_table imports pandas)
        arrow = self.file.schema_arrow
        empty = pa.Table.from_arrays([pa.nulls(0, f.type) for f in arrow], schema=arrow)
        _rows(stream, path, empty, schema, on_bad_row, 0)

    def __iter__(self) -> Iterator[StreamData]:
        done = 0
        batches = self.file.iter_batches(batch_size=self.chunk_rows)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as err:
                raise InputError(f"{self.path}: not a readable Parquet file ({err})") from None
            table = pa.Table.from_batches([batch])
            yield _rows(self.stream, self.path, table, self.schema, self.on_bad_row, done)
            done += table.num_rows
            self.position = self.size * done // max(self.rows, 1)
        self.position = self.size


def _rows(stream: str, path: str, table: pa.Table, schema: StreamSchema, on_bad_row: str, first: int) -> StreamData:
    """The rows of ``table`` (from row ``first`` of the file on) by the rules; bad ones
    raise or, with ``skip``, are set aside."""
    bad: dict[int, tuple[str, str | None, str]] = {}  # row -> (column, value, reason); the first problem wins
    ts = np.zeros(0, np.float64)
    ids: np.ndarray | None = None
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for h in table.column_names:
        target = canonical_name(h, schema)
        kind = kind_of(target, schema)
        column = table.column(h)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        if not _fits(kind, column.type):
            if kind in ("ts", "id"):
                wanted = f"the {'event time' if kind == 'ts' else 'tuple id'} takes {_ACCEPTS[kind]}"
            else:
                wanted = f"stream {schema.name} declares it {kind.value}, which takes {_ACCEPTS[kind]}"  # type: ignore[union-attr]
            raise InputError(f"{path}: column '{h}' is a Parquet {column.type} column, but {wanted}")
        values = _convert(column, kind, h, bad)
        if target == "ts":
            ts = numpy_with_nulls(values)[0]  # (a NULL is a bad row, dropped below)
        elif target == "id":
            ids = numpy_with_nulls(values)[0]
        else:
            columns[target] = values
    data = StreamData(stream, path, ts, ids, columns, unit="row", first_row=first)
    if bad:
        for i in sorted(bad):
            column_name, value, reason = bad[i]
            row = data.bad_row(i, column_name, value, reason)
            if on_bad_row != "skip":
                raise InputError(row.message())
            data.rejected.append(row)
        data.drop(set(bad))
    return data


def _convert(column: pa.ChunkedArray, kind: ColumnType | str, name: str, bad: dict[int, Any]) -> pa.ChunkedArray:
    """The column as values of its declared type (``ts`` and FLOAT float64, ``id`` and
    INTEGER int64, NaN made NULL); rows that break the rules are noted in ``bad``."""

    def note(mask: Any, reason: str) -> None:
        """Rows where ``mask`` holds are bad; ``{value}`` in the reason is their value."""
        for i in pc.indices_nonzero(pc.fill_null(mask, arrow_scalar(False))).to_pylist():  # (no pandas)
            if i not in bad:
                value = column[i].as_py()
                bad[i] = (name, None if value is None else str(value), reason.format(value=value))

    dtype = column.type
    if kind in ("ts", "id"):
        note(pc.is_null(column), f"the {'event time' if kind == 'ts' else 'id'} must not be NULL")
    if kind in ("id", ColumnType.INTEGER, ColumnType.BYTE) and pa.types.is_uint64(dtype):
        too_big = pc.greater(column, _int64_max_as_uint64())
        note(too_big, "{value} is out of range for a 64-bit integer (above 9223372036854775807)")
        column = pc.if_else(too_big, pa.nulls(1, column.type)[0], column).cast(pa.int64())
    if kind in ("ts", ColumnType.FLOAT):
        if not pa.types.is_null(dtype):
            # a double holds every integer up to 2^53 exactly; larger ones round, as a
            # CSV integer in a FLOAT column does
            column = column.cast(pa.float64(), safe=False)
            note(pc.is_inf(column), "{value} is not a finite number (a FLOAT lies within about ±1.8e308)")
            if kind == "ts":
                note(pc.is_nan(column), "the event time must be a number, not NaN")
            column = pc.if_else(pc.is_nan(column), pa.nulls(1, pa.float64())[0], column)  # NaN is NULL
    elif kind in ("id", ColumnType.INTEGER, ColumnType.BYTE) and not pa.types.is_null(dtype):
        column = column.cast(pa.int64())
    if pa.types.is_null(column.type):  # a column of NULLs only: NULLs of the column's type
        column = column.cast(_NULL_TYPES[kind] if isinstance(kind, str) else ARROW_TYPES[kind])
    return column


_NULL_TYPES = {"ts": pa.float64(), "id": pa.int64()}


def _int64_max_as_uint64() -> pa.Scalar:
    """2^63 - 1 as a uint64 scalar, made from an Arrow array (``pa.scalar`` imports pandas)."""
    return array_of([INT64_MAX], pa.int64())[0].cast(pa.uint64())
