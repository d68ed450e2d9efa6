"""Snapshots as bytes and back, without pickle (docs/SNAPSHOTS.md is the reference).

A snapshot (:meth:`mqo.Matcher.snapshot`, a ``mqo serve`` checkpoint, a Spark
streaming group's state) is plain data: dicts with str keys, lists, str, int of any
size, float (also nan, inf and -0.0), bool, None, and numpy arrays of a bool or
numeric dtype. :func:`encode_snapshot` writes such data as:

* a 60-byte header: the magic ``MQOSNAP\\0``, the file version (uint32), the lengths
  of the JSON and of the columns (uint64 each) and the sha256 of both (32 bytes),
  all little-endian;
* JSON (UTF-8) for the data, where a value JSON cannot hold exactly is a one-key
  object: ``{"$float": "nan"|"inf"|"-inf"}``, ``{"$int": "<hex>"}`` (past 64 bits),
  ``{"$array": {"column": i, "dtype": "<f8", "shape": [2, 3]}}`` and ``{"$bytes": i}``
  (column ``i``); a data key starting with ``$`` gets one more ``$`` in front;
* an Arrow IPC stream of one record batch of one row: column ``i`` is an array
  flattened (C order) into a ``large_list`` of its dtype, or ``bytes`` as a
  ``large_binary`` value.

:func:`decode_snapshot` checks all of that before it builds anything and raises
:class:`SnapshotError` on a file that is not a snapshot, is truncated or corrupt, was
written by a newer version, or is an older version's pickle. Nothing in a file is ever
run: it is read as JSON and Arrow data only.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from typing import Any

import numpy as np
import pyarrow as pa

from predicates import MqoError

MAGIC = b"MQOSNAP\x00"
FILE_VERSION = 1
_HEADER = struct.Struct("<8sIQQ32s")
HEADER_SIZE = _HEADER.size  # 60
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_TAGS = ("$float", "$int", "$array", "$bytes")
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_ARRAY_KINDS = "biuf"  # bool, signed, unsigned, floating


class SnapshotError(MqoError, ValueError):
    """A snapshot that cannot be written or read (not plain data; a foreign, corrupt,
    truncated, newer or older-version file)."""


class _Unsupported(Exception):
    """A value the format has no place for; carries the path to it as it unwinds."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value
        self.path: list[str] = []


# ------------------------------------------------------------------ writing


def encode_snapshot(data: Any) -> bytes:
    """``data`` (the plain-data contract above) as snapshot bytes. Tuples are written
    as lists and numpy scalars as the Python numbers they equal."""
    arrays: list[pa.Array] = []
    encoder = _Encoder(arrays)
    try:
        tree = encoder.value(data)
    except _Unsupported as err:
        where = "snapshot" + "".join(reversed(err.path))
        raise SnapshotError(
            f"{where}: a value of type {type(err.value).__name__} cannot be written into a snapshot "
            "(plain data only: dict with str keys, list, str, int, float, bool, None, numeric numpy arrays)"
        ) from None
    text = json.dumps(tree, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    body = text.encode("utf-8")
    blob = b""
    if arrays:
        batch = pa.RecordBatch.from_arrays(arrays, names=[str(i) for i in range(len(arrays))])
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        blob = sink.getvalue().to_pybytes()
    digest = hashlib.sha256(body)
    digest.update(blob)
    return _HEADER.pack(MAGIC, FILE_VERSION, len(body), len(blob), digest.digest()) + body + blob


class _Encoder:
    def __init__(self, arrays: list[pa.Array]) -> None:
        self.arrays = arrays

    def value(self, x: Any) -> Any:
        t = type(x)
        if t is str or t is bool or x is None:
            return x
        if t is float:
            return x if x - x == 0.0 else {"$float": _nonfinite_name(x)}
        if t is int:
            return x if _INT64_MIN <= x <= _INT64_MAX else {"$int": hex(x)}
        if t is list or t is tuple:
            return self.sequence(x)
        if t is dict:
            return self.mapping(x)
        return self.other(x)

    def sequence(self, items: list[Any] | tuple[Any, ...]) -> list[Any] | tuple[Any, ...]:
        # most lists (a stored row, a column of numbers) hold only values JSON writes
        # as they are: those go out untouched, with no copy (json writes a tuple as a list)
        for x in items:
            t = type(x)
            if t is float:
                if x - x != 0.0:
                    break
            elif t is int:
                if not _INT64_MIN <= x <= _INT64_MAX:
                    break
            elif t is not str and t is not bool and x is not None:
                break
        else:
            return items
        out = []
        value = self.value
        for i, x in enumerate(items):
            try:
                out.append(value(x))
            except _Unsupported as err:
                err.path.append(f"[{i}]")
                raise
        return out

    def mapping(self, d: dict[Any, Any]) -> dict[str, Any]:
        out = {}
        for k, x in d.items():
            if type(k) is not str:
                err = _Unsupported(k)
                err.path.append(f"[{k!r}] (a key)")
                raise err
            try:
                out["$" + k if k.startswith("$") else k] = self.value(x)
            except _Unsupported as err:
                err.path.append(f"[{k!r}]")
                raise
        return out

    def other(self, x: Any) -> Any:
        if isinstance(x, np.ndarray):
            if x.dtype.kind not in _ARRAY_KINDS:
                raise _Unsupported(x)
            native = x.astype(x.dtype.newbyteorder("="), copy=False)
            flat = pa.array(np.ascontiguousarray(native).reshape(-1))
            self.arrays.append(pa.LargeListArray.from_arrays(pa.array([0, len(flat)], pa.int64()), flat))
            return {"$array": {"column": len(self.arrays) - 1, "dtype": x.dtype.str, "shape": list(x.shape)}}
        if isinstance(x, (bytes, bytearray)):
            self.arrays.append(pa.array([bytes(x)], pa.large_binary()))
            return {"$bytes": len(self.arrays) - 1}
        # numpy scalars (a stored row's values come from numpy columns), as the Python
        # values they equal; other subclasses of the plain types (an enum) are refused
        if isinstance(x, np.bool_):
            return bool(x)
        if isinstance(x, np.integer):
            return self.value(int(x))
        if isinstance(x, np.floating):
            return self.value(float(x))
        if isinstance(x, np.str_):
            return str(x)
        raise _Unsupported(x)


def _nonfinite_name(x: float) -> str:
    return "nan" if x != x else ("inf" if x > 0 else "-inf")


# ------------------------------------------------------------------ reading


def decode_snapshot(blob: bytes | bytearray | memoryview, source: str = "snapshot") -> Any:
    """The data :func:`encode_snapshot` wrote; :class:`SnapshotError` naming ``source``
    (a file name, "checkpoint", ...) when ``blob`` is not such a snapshot."""
    view = memoryview(blob).cast("B")
    if bytes(view[:2]) in _PICKLE_STARTS:
        raise SnapshotError(
            f"{source}: made by an older version of mqo (a pickle, which this version does not load: "
            "loading a pickle can run code); start from a new checkpoint or snapshot"
        )
    if len(view) < len(MAGIC) or bytes(view[: len(MAGIC)]) != MAGIC:
        raise SnapshotError(f"{source}: not an mqo snapshot (it does not start with {MAGIC!r})")
    if len(view) < HEADER_SIZE:
        raise SnapshotError(f"{source}: truncated ({len(view)} bytes, shorter than the {HEADER_SIZE}-byte header)")
    _, version, n_json, n_columns, digest = _HEADER.unpack(view[:HEADER_SIZE])
    if version > FILE_VERSION:
        raise SnapshotError(
            f"{source}: made by a newer version of mqo (snapshot file version {version}; "
            f"this version reads up to {FILE_VERSION})"
        )
    if version < 1:
        raise SnapshotError(f"{source}: corrupt (snapshot file version {version})")
    size = HEADER_SIZE + n_json + n_columns
    if len(view) != size:
        what = "truncated" if len(view) < size else "corrupt"
        raise SnapshotError(f"{source}: {what} ({len(view)} bytes where the header says {size})")
    body = view[HEADER_SIZE : HEADER_SIZE + n_json]
    columns_blob = view[HEADER_SIZE + n_json :]
    check = hashlib.sha256(body)
    check.update(columns_blob)
    if check.digest() != digest:
        raise SnapshotError(f"{source}: corrupt (its checksum does not match its contents)")
    try:
        batch = _column_batch(columns_blob)
        return json.loads(bytes(body).decode("utf-8"), parse_constant=_no_constant, object_hook=_Tags(batch))
    except (ValueError, KeyError, TypeError, IndexError, RecursionError, pa.ArrowException) as err:
        raise SnapshotError(f"{source}: corrupt ({type(err).__name__}: {err})") from None


_PICKLE_STARTS = {bytes([0x80, protocol]) for protocol in range(2, 6)}


def _no_constant(name: str) -> Any:
    raise ValueError(f"JSON constant {name} (non-finite numbers are written as $float)")


def _column_batch(blob: memoryview) -> pa.RecordBatch | None:
    """The Arrow IPC part: one record batch of one row (None when there is none)."""
    if not len(blob):
        return None
    reader = pa.ipc.open_stream(pa.py_buffer(blob))
    batch = reader.read_next_batch()
    batch.validate(full=True)
    if batch.num_rows != 1:
        raise ValueError(f"the columns' record batch has {batch.num_rows} rows, not 1")
    return batch


class _Tags:
    """``json.loads``'s object hook: a tagged object as its value, a data object with
    its ``$`` keys unescaped (objects come innermost first)."""

    def __init__(self, batch: pa.RecordBatch | None) -> None:
        self.batch = batch

    def __call__(self, obj: dict[str, Any]) -> Any:
        if len(obj) == 1:
            ((tag, inner),) = obj.items()
            if tag in _TAGS:
                return getattr(self, "_" + tag[1:])(inner)
        if not any(k[:1] == "$" for k in obj):
            return obj
        out = {}
        for k, v in obj.items():
            if k[:1] == "$":
                if k[:2] != "$$":
                    raise ValueError(f"unknown tag {k!r}")
                k = k[1:]
            out[k] = v
        return out

    def _float(self, name: Any) -> float:
        return _NONFINITE[name]

    def _int(self, digits: Any) -> int:
        if type(digits) is not str:
            raise ValueError(f"$int of {digits!r}")
        return int(digits, 16)

    def _column(self, i: Any) -> pa.Array:
        if self.batch is None or type(i) is not int or not 0 <= i < self.batch.num_columns:
            raise ValueError(f"no column {i!r}")
        return self.batch.column(i)

    def _bytes(self, i: Any) -> bytes:
        column = self._column(i)
        if column.type != pa.large_binary():
            raise ValueError(f"$bytes of column {i}, which holds {column.type}")
        return column[0].as_py()

    def _array(self, about: Any) -> np.ndarray:
        column = self._column(about["column"])
        dtype = np.dtype(about["dtype"])
        shape = tuple(int(n) for n in about["shape"])
        if any(n < 0 for n in shape):  # (reshape would infer a -1)
            raise ValueError(f"$array of shape {list(shape)}")
        if dtype.kind not in _ARRAY_KINDS or not pa.types.is_large_list(column.type):
            raise ValueError(f"$array of dtype {dtype} in column {about['column']}, which holds {column.type}")
        values = column.values.to_numpy(zero_copy_only=False)
        if values.dtype != dtype.newbyteorder("="):
            raise ValueError(f"column {about['column']} holds {values.dtype}, the array is {dtype}")
        return np.array(values, dtype=dtype).reshape(shape)  # a copy of its own, writable
