"""Texts laid out row by row: the result encoder's lines (mqo/result_encoding.py).

A batch's JSON or CSV lines are pieces of text joined per row: a column's texts, the
same text on every row (``,"values":``), and pieces that only some rows have (the
members of one query layout's objects). :class:`TextLines` collects the pieces in
line order, works out every row's length and place on arrays, and copies each piece
of a block of rows into place with the kernels of :mod:`indexes.text_kernels`: every
byte of the output is written once, in its final place (no per-layout lines taken
back into row order, no line joined again to add its head). Arrow's
``binary_join_element_wise`` did the same work at several times the cost.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mqo.arrow_build import numpy_array, numpy_of

BLOCK = 1 << 16  # rows written together (their output stays in cache)


class TextLines:
    """The lines of ``n`` rows, built from pieces added in line order."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._pieces: list[tuple[np.ndarray | None, Any]] = []

    def add(self, piece: str | pa.Array | pa.ChunkedArray, rows: np.ndarray | None = None) -> None:
        """The next piece of every row (``rows``: of those rows only, ascending; a text
        array then holds one text per row of ``rows``). A ``str`` is the same text on
        each row; an array holds no NULL (fill them first)."""
        if isinstance(piece, str):
            self._pieces.append((rows, np.frombuffer(piece.encode(), np.uint8)))
            return
        array = piece.combine_chunks() if isinstance(piece, pa.ChunkedArray) else piece
        if not pa.types.is_string(array.type):
            array = array.cast(pa.string())
        assert array.null_count == 0, "a NULL text in a line"
        self._pieces.append((rows, text_buffers(array)))

    def build(self) -> pa.Array:
        """The lines as one Arrow string array."""
        n = self.n
        # consecutive pieces of the same rows go together: their rows' cursors are
        # gathered and put back once
        runs: list[tuple[np.ndarray | None, list[Any]]] = []
        for rows, piece in self._pieces:
            if runs and runs[-1][0] is rows:
                runs[-1][1].append(piece)
            else:
                runs.append((rows, [piece]))
        lengths = np.zeros(n, np.int64)
        for rows, pieces in runs:
            size = np.zeros(n if rows is None else len(rows), np.int64)
            for piece in pieces:
                size += np.diff(piece[0]) if isinstance(piece, tuple) else len(piece)
            if rows is None:
                lengths += size
            else:
                lengths[rows] += size
        ends = np.cumsum(lengths)
        total = int(ends[-1]) if n else 0
        if total >= 2**31:
            raise ValueError("more than 2 GiB of text in one column of one batch")
        from indexes.text_kernels import copy_constant, copy_texts  # numba on first use (importing mqo stays light)

        out = np.empty(total, np.uint8)
        cursor = ends - lengths
        starts = np.arange(0, n + BLOCK, BLOCK)
        cuts = [None if rows is None else np.searchsorted(rows, starts) for rows, _ in runs]
        for b, first in enumerate(range(0, n, BLOCK)):
            for (rows, pieces), cut in zip(runs, cuts, strict=True):
                if rows is None or cut is None:
                    lo, hi = first, min(n, first + BLOCK)
                    block = cursor[lo:hi]
                else:
                    lo, hi = int(cut[b]), int(cut[b + 1])
                    if lo == hi:
                        continue
                    block = cursor[rows[lo:hi]]
                for piece in pieces:
                    if isinstance(piece, tuple):
                        copy_texts(out, block, piece[0][lo : hi + 1], piece[1])
                    else:
                        copy_constant(out, block, piece)
                if rows is not None:
                    cursor[rows[lo:hi]] = block
        offsets = np.zeros(n + 1, np.int32)
        offsets[1:] = ends
        return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out)])


def join(*parts: str | pa.Array | pa.ChunkedArray) -> pa.Array:
    """Texts joined element-wise, NULL where a part is NULL; a ``str`` part is the same
    text on every row (at least one part is an array)."""
    arrays = [p for p in parts if not isinstance(p, str)]
    n = len(arrays[0])
    valid = None
    for array in arrays:
        if array.null_count:
            known = numpy_of(pc.is_valid(array))
            valid = known if valid is None else valid & known
    if valid is None:
        lines = TextLines(n)
        for p in parts:
            lines.add(p)
        return lines.build()
    # the rows without a NULL part joined, then put in their places
    rows = numpy_array(np.flatnonzero(valid))
    joined = join(*(p if isinstance(p, str) else p.take(rows) for p in parts))
    lengths = np.zeros(n, np.int64)
    lengths[valid] = np.diff(text_buffers(joined)[0])
    offsets = np.zeros(n + 1, np.int32)
    offsets[1:] = np.cumsum(lengths)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    data = joined.buffers()[2]
    return pa.Array.from_buffers(pa.string(), n, [bitmap, pa.py_buffer(offsets), data], n - int(valid.sum()))


def text_buffers(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string array's offsets (one more than its rows) and its bytes, as numpy."""
    offsets = np.frombuffer(texts.buffers()[1], np.int32, len(texts) + 1, texts.offset * 4)
    data = texts.buffers()[2]
    return offsets, (np.zeros(0, np.uint8) if data is None else np.frombuffer(data, np.uint8))
