"""Numba kernels that lay texts out row by row (the result encoder's lines, mqo/result_encoding.py).

A batch's JSON or CSV lines are its columns' texts joined element-wise: per row, the
pieces one after the other. The encoder works out each row's length and place on
arrays; these kernels copy one piece of every row of a block of rows into place and
move each row's cursor past it. Blocks of rows, piece after piece, keep the part of
the output being written in cache (a pass per piece over all rows would sweep the
whole output once a piece: slower than Arrow's ``binary_join_element_wise``, which
this replaces at about half its cost).

Arrays and scalars only, so the kernels cache (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def copy_texts(out: np.ndarray, cursor: np.ndarray, offsets: np.ndarray, data: np.ndarray) -> None:
    """Row ``i``'s text ``data[offsets[i]:offsets[i + 1]]`` to ``out`` at ``cursor[i]``,
    and the cursor past it."""
    for i in range(len(cursor)):
        a = offsets[i]
        size = offsets[i + 1] - a
        c = cursor[i]
        for k in range(size):
            out[c + k] = data[a + k]
        cursor[i] = c + size


@njit(cache=True)
def copy_constant(out: np.ndarray, cursor: np.ndarray, text: np.ndarray) -> None:
    """The same ``text`` to every row's place in ``out`` at ``cursor[i]``, and the
    cursor past it."""
    size = len(text)
    for i in range(len(cursor)):
        c = cursor[i]
        for k in range(size):
            out[c + k] = text[k]
        cursor[i] = c + size
