"""Input checks of the batch path: any accepted batch as checked columns.

A batch is an Arrow table or record batch, a pandas DataFrame, or a dict of numpy
arrays (or lists), with a ``ts`` column, an optional ``id`` column and the stream's
columns. :func:`columns_of` turns it into (ts, ids, columns), naming the stream, the
row and the column of any value that cannot mean what its column says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from mqo.arrow_build import numpy_with_nulls
from mqo.results import TupleError
from mqo.rows import INT64_MAX, INT64_MIN
from predicates import ColumnType, StreamSchema
from predicates.errors import did_you_mean
from predicates.numbers import EXACT_INTEGERS


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
            converted = _typed(values, schema.name, col.name, col.ctype)
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


def numeric_columns(schema: StreamSchema) -> list[tuple[str, int]]:
    """The numeric columns (name, position in a stored row), in schema order: the rows
    of ``columns[NUMERIC]``."""
    return [(c.name, p) for p, c in enumerate(schema.columns, 2) if c.ctype.is_numeric]


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
            # (unchecked: a uint64 past 2**63 - 1 wraps to a negative int64, found below)
            whole, null = numpy_with_nulls(values.cast(pa.int64(), safe=False))
            if pa.types.is_uint64(values.type) and (wrapped := np.flatnonzero((whole < 0) & ~null)).size:
                row = int(wrapped[0])
                value = int(whole[row]) + 2**64
                raise TupleError(f"stream {stream}: row {row}, column {column}: {value} is past 64 bits")
            return whole, null, bool((np.abs(whole) >= EXACT_INTEGERS).any())
        values = values.to_pylist()
    arr = _one_dimensional(np.asarray(values), stream, column)
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


_PYTHON_TYPE = {ColumnType.STRING: (str, "a string"), ColumnType.BOOLEAN: (bool, "a boolean")}


def _typed(values: Any, stream: str, column: str, ctype: ColumnType) -> list[Any]:
    """A STRING or BOOLEAN column as a list of str (bool) or None, as ``push`` takes
    them: a number in a STRING column is an error, not a value of another type."""
    want, what = _PYTHON_TYPE[ctype]
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        kind = values.type
        if pa.types.is_dictionary(kind):  # (a CSV's text column: a dictionary of its distinct strings)
            kind = kind.value_type
        if pa.types.is_null(kind) or (
            pa.types.is_boolean(kind)
            if ctype is ColumnType.BOOLEAN
            else pa.types.is_string(kind) or pa.types.is_large_string(kind)
        ):
            return values.to_pylist()  # (every value is of the type already, or None)
        out = values.to_pylist()
    else:
        out = _one_dimensional(values, stream, column).tolist() if isinstance(values, np.ndarray) else list(values)
    for i, v in enumerate(out):
        if v is not None and not isinstance(v, want):
            if want is bool and isinstance(v, np.bool_):
                out[i] = bool(v)  # (numpy's bool is no bool to isinstance; push takes it too)
                continue
            raise TupleError(f"stream {stream}: row {i}, column {column}: expected {what}, got {v!r}")
    return out


def _one_dimensional(arr: np.ndarray, stream: str, column: str) -> np.ndarray:
    if arr.ndim != 1:
        raise TupleError(
            f"stream {stream}, column {column}: expected one value per row, got an array of shape {arr.shape}"
        )
    return arr


def _floats(values: Any, stream: str, column: str) -> np.ndarray:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if not (pa.types.is_floating(values.type) or pa.types.is_integer(values.type) or pa.types.is_null(values.type)):
            raise TupleError(f"stream {stream}, column {column}: expected numbers, got Arrow type {values.type}")
        if pa.types.is_null(values.type):
            return np.full(len(values), np.nan)
        # an integer past 2**53 rounds to the nearest double, as a CSV or Parquet reader takes it
        floats, null = numpy_with_nulls(values.cast(pa.float64(), safe=False))
        floats[null] = np.nan
        return floats
    try:
        arr = _one_dimensional(np.asarray(values), stream, column)
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
