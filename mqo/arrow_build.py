"""Arrow arrays built from Python values and read back as numpy, by their buffers.

pyarrow (26) imports pandas, when it is installed, the first time ``pa.array``,
``pa.scalar`` or ``Array.to_numpy`` meets a Python value, or a compute function a
Python scalar: about half a second of a process that needs nothing of pandas (``mqo
match`` writing JSON lines). The result encoder builds its arrays and scalars here,
from buffers, and gives compute functions Arrow scalars only.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa

_NUMPY = {pa.int64(): np.int64, pa.int32(): np.int32, pa.float64(): np.float64}


def _validity(values: list[Any], nulls: int) -> pa.Buffer | None:
    """The validity bitmap of ``values`` (None is NULL) holding ``nulls`` NULLs."""
    if not nulls:
        return None
    valid = np.fromiter((v is not None for v in values), bool, len(values))
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def array_of(values: Sequence[Any], dtype: pa.DataType) -> pa.Array:
    """``values`` (None: NULL) as an Arrow array of ``dtype`` (string, bool, int64 or
    float64)."""
    values = values if isinstance(values, list) else list(values)
    n = len(values)
    nulls = values.count(None)  # (in C: most columns have none, and are converted by numpy at once)
    bitmap = _validity(values, nulls)
    if pa.types.is_string(dtype):
        encoded = [b"" if v is None else v.encode() for v in values]
        ends = np.cumsum(np.fromiter(map(len, encoded), np.int64, n))
        if n and int(ends[-1]) >= 2**31:
            raise ValueError("more than 2 GiB of text in one column of one batch")
        offsets = np.zeros(n + 1, np.int32)
        offsets[1:] = ends
        return pa.Array.from_buffers(
            pa.string(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))], nulls
        )
    if pa.types.is_boolean(dtype):
        bits = np.packbits(np.fromiter((bool(v) for v in values), bool, n), bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), n, [bitmap, pa.py_buffer(bits)], nulls)
    kind = _NUMPY[dtype]
    data = np.array([0 if v is None else v for v in values] if nulls else values, kind) if n else np.zeros(0, kind)
    return pa.Array.from_buffers(dtype, n, [bitmap, pa.py_buffer(data)], nulls)


def numpy_array(values: np.ndarray) -> pa.Array:
    """A numeric or boolean numpy array as an Arrow array (no NULL)."""
    values = np.ascontiguousarray(values)
    n = len(values)
    if values.dtype == np.bool_:
        return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(np.packbits(values, bitorder="little"))])
    for dtype, kind in _NUMPY.items():
        if values.dtype == kind:
            return pa.Array.from_buffers(dtype, n, [None, pa.py_buffer(values)])
    return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(values.astype(np.int64))])


def numpy_of(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A numeric or boolean Arrow array without NULLs as numpy (NULLs of a boolean
    array read as False)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    n, at = len(array), array.offset
    if pa.types.is_boolean(array.type):
        if array.null_count:
            array = array.fill_null(scalar(False))
        bits = np.frombuffer(array.buffers()[1], np.uint8)
        return np.unpackbits(bits, bitorder="little")[at : at + n].astype(bool)
    assert array.null_count == 0, "NULLs in a numeric array read as numpy"
    kind = np.dtype(_NUMPY[array.type])
    if not n:
        return np.zeros(0, kind)
    return np.frombuffer(array.buffers()[1], kind, n, at * kind.itemsize)


def numpy_with_nulls(array: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """An integer or floating Arrow array as int64 or float64 numpy (a copy, 0 where
    NULL) and its NULL mask; TypeError for any other type."""
    if pa.types.is_integer(array.type):
        array = array.cast(pa.int64())
    elif pa.types.is_floating(array.type):
        array = array.cast(pa.float64())
    else:
        raise TypeError(f"numpy_with_nulls reads integer and floating arrays, not {array.type}")
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    kind = np.dtype(_NUMPY[array.type])
    n, at = len(array), array.offset
    if not n:
        return np.zeros(0, kind), np.zeros(0, bool)
    values = np.frombuffer(array.buffers()[1], kind, n, at * kind.itemsize).copy()
    bitmap = array.buffers()[0]
    if bitmap is None or not array.null_count:
        return values, np.zeros(n, bool)
    null = np.unpackbits(np.frombuffer(bitmap, np.uint8), bitorder="little")[at : at + n] == 0
    values[null] = 0
    return values, null


@lru_cache(maxsize=256, typed=True)  # typed: 0.0 and False are equal keys
def scalar(value: str | float | bool) -> pa.Scalar:
    """An Arrow scalar of a text, a double or a boolean."""
    if isinstance(value, str):
        return array_of([value], pa.string())[0]
    if isinstance(value, bool):
        return array_of([value], pa.bool_())[0]
    return array_of([float(value)], pa.float64())[0]


def null(dtype: pa.DataType) -> pa.Scalar:
    """A NULL scalar of ``dtype``."""
    return pa.nulls(1, dtype)[0]
