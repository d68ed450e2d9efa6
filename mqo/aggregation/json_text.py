"""Aggregate rows as JSON lines, built column by column in Arrow (no Python per row).

A line is ``{"query":…,"window_start":…,"window_end":…,"group":{…},"values":{…}}``
with every number written as ``json.dumps`` writes it (Python's ``repr``: the
shortest decimal that reads back as the same double, DESIGN §5). Arrow's cast of a
double to text gives the same shortest digits but its own layout (``1`` for ``1.0``,
``0.00001`` for ``1e-05``, exponents from 1e15): the texts of plain magnitudes are
taken from Arrow (``.0`` added to whole numbers), every other value from ``repr``.
Lines are joined element-wise (``binary_join_element_wise``), so a chunk of ``n``
rows costs a few C++ passes over its columns: O(n) with no Python call per row.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str).encode

# Python's repr writes a double without an exponent iff 1e-4 <= |x| < 1e16; where
# Arrow writes one without an exponent too, the two agree up to the ".0" of whole
# numbers (the same shortest digits). Elsewhere: repr, value by value.
_PLAIN_LOW, _PLAIN_HIGH = 1e-4, 1e16


def text(value: Any) -> str:
    """``value`` as json.dumps writes it (the common types without the encoder's call)."""
    kind = type(value)
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    if value is None:
        return "null"
    return _encode(value)


def float_texts(values: np.ndarray) -> pa.Array:
    """Every double of ``values`` as json.dumps writes it (NaN, Infinity; no NULLs):
    Arrow's shortest digits where its layout is repr's, repr elsewhere."""
    values = np.asarray(values, np.float64)
    out = pc.cast(pa.array(values), pa.large_string())
    magnitude = np.abs(values)
    plain = ((magnitude >= _PLAIN_LOW) & (magnitude < _PLAIN_HIGH)) | (values == 0)
    ok = pc.and_(pa.array(plain), pc.invert(pc.match_substring(out, "e")))
    whole = pc.and_(ok, pc.invert(pc.match_substring(out, ".")))
    out = pc.if_else(whole, pc.binary_join_element_wise(out, _large(".0"), _large("")), out)
    other = np.flatnonzero(~ok.to_numpy(zero_copy_only=False))
    if len(other):
        texts = pa.array([text(v) for v in values[other].tolist()], pa.large_string())
        mask = np.zeros(len(values), bool)
        mask[other] = True
        out = pc.replace_with_mask(out, pa.array(mask), texts)
    return out


def column_texts(column: list[Any] | np.ndarray) -> pa.Array:
    """A value column (Python values, None as NULL) as JSON texts."""
    if isinstance(column, np.ndarray) and column.dtype.kind == "f":
        return float_texts(column)
    kinds = set(map(type, column))
    if kinds and kinds <= {int, type(None)}:
        ints = [v for v in column if v is not None] if type(None) in kinds else column
        if not ints or (min(ints) >= -(2**63) and max(ints) < 2**63):
            return pc.fill_null(pc.cast(pa.array(column, pa.int64()), pa.large_string()), _large("null"))
    if kinds <= {float, type(None)} and kinds:
        values = np.array(column, np.float64)  # None -> NaN, NULL marked below
        out = float_texts(values)
        if type(None) in kinds:
            null = np.fromiter((v is None for v in column), bool, len(column))
            out = pc.if_else(pa.array(null), _large("null"), out)
        return out
    return pa.array([text(v) for v in column], pa.large_string())


def repeated_texts(values: np.ndarray, null_at: float | None = None) -> pa.Array:
    """The text of every double of ``values``, formatted once per distinct value (a
    window's bounds repeat on each of its groups' rows); ``null_at`` is written null."""
    distinct, index = np.unique(values, return_inverse=True)
    texts = [text(v) for v in distinct.tolist()]
    if null_at is not None:
        texts = ["null" if v == null_at else t for v, t in zip(distinct.tolist(), texts, strict=True)]
    return pa.array(texts, pa.large_string()).take(pa.array(index.reshape(-1)))


def chunk_lines(
    query: str,
    starts: np.ndarray,
    ends: np.ndarray,
    group_by: tuple[str, ...],
    keys: list[tuple[Any, ...]],
    codes: np.ndarray,
    names: list[str],
    values: list[list[Any]],
) -> pa.Array:
    """One JSON line (ending in a newline) per row of one query's chunk, as an Arrow
    string array; a landmark window's start is null."""
    n = len(ends)
    if n == 0:
        return pa.array([], pa.large_string())
    groups = ["{" + ",".join(text(g) + ":" + text(v) for g, v in zip(group_by, key, strict=True)) + "}" for key in keys]
    parts: list[Any] = [
        '{"query":' + text(query) + ',"window_start":',
        repeated_texts(starts, null_at=-math.inf),
        ',"window_end":',
        repeated_texts(ends),
        ',"group":',
        pa.array(groups, pa.large_string()).take(pa.array(np.asarray(codes, np.int64))),
        ',"values":{',
    ]
    for k, (name, column) in enumerate(zip(names, values, strict=True)):
        parts += [("," if k else "") + text(name) + ":", column_texts(column)]
    parts.append("}}\n")
    return pc.binary_join_element_wise(*[_large(p) if isinstance(p, str) else p for p in parts], _large(""))


def _large(value: str) -> pa.Scalar:
    return pa.scalar(value, pa.large_string())


def ordered_text(chunks: list[pa.Array], order: np.ndarray) -> str:
    """The lines of ``chunks`` (numbered chunk after chunk) in ``order``, as one string.
    Each copy is let go as soon as the next is made, and Arrow's pool gives back what
    it holds: the text of millions of rows is hundreds of MiB."""
    lines = pa.chunked_array(chunks, pa.large_string()).combine_chunks()
    del chunks[:]
    if len(order) > 1 and not (order[1:] > order[:-1]).all():
        lines = lines.take(pa.array(order))
    text = joined(lines)
    del lines
    pa.default_memory_pool().release_unused()
    return text


def joined(lines: pa.Array) -> str:
    """The lines of an Arrow large-string array as one string: its characters lie
    back to back in the array's data buffer, decoded from there (no copy before)."""
    if len(lines) == 0:
        return ""
    _, offsets, data = lines.buffers()
    bounds = np.frombuffer(offsets, np.int64, len(lines) + 1, lines.offset * 8)
    return str(memoryview(data)[bounds[0] : bounds[-1]], "utf-8")
