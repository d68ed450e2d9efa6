"""Every single-column numeric attribute list of a stream decided for a batch of rows
in one numba call.

A list keeps its constants in covering order and two arrays of cuts (``lt``: the
doubles below which ``x < c`` holds... see :meth:`indexes.covering.CoveringList.cuts`);
a row's satisfied range is one binary search per list. Done list by list with numpy,
each list costs a dozen array calls, which for a pushed tuple (a batch of one row) is
most of its attribute phase; here all lists of a stream are one call, O(lists * rows *
log constants). Integers past 2**53 are not all doubles: the caller decides those rows
exactly (:func:`mqo.prepare.attribute_ranges`).

The kernel takes only arrays and scalars: ``values[c, i]`` (float64, NaN is NULL) is
column ``c`` of row ``i``; list ``l`` reads column ``columns[l]`` with operator
``ops[l]`` (the ``OP_*`` codes) over the cuts ``lt[starts[l]:ends[l]]`` and ``le[...]``
(the lists' cuts may lie anywhere in ``lt``: a plan's doubles are one array, read in
place); it writes ``lo[rows[l], i]``, ``hi[rows[l], i]`` in the kernels' form
(``lo = NULL`` for a NULL value; for ``!=`` ``[lo, hi)`` is the run that fails), so
a stream's lists go straight to their rows among all its lists.
"""

from __future__ import annotations

import numpy as np

from indexes.kernel_modes import NULL
from indexes.numba_config import kernel

OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE = 0, 1, 2, 3, 4, 5
OP_CODES = {"<": OP_LT, "<=": OP_LE, ">": OP_GT, ">=": OP_GE, "=": OP_EQ, "!=": OP_NE}


@kernel
def _after(cuts: np.ndarray, start: int, end: int, x: float, strict: bool) -> int:
    """How many of ``cuts[start:end]`` (ascending) are <= x (``strict``) or < x:
    numpy's searchsorted 'right' and 'left', relative to ``start``."""
    a, b = start, end
    while a < b:
        mid = (a + b) >> 1
        if cuts[mid] < x or (strict and cuts[mid] == x):
            a = mid + 1
        else:
            b = mid
    return a - start


@kernel
def list_ranges(
    values: np.ndarray,
    columns: np.ndarray,
    ops: np.ndarray,
    lt: np.ndarray,
    le: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    rows: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
) -> None:
    for l in range(ops.shape[0]):
        start, end = starts[l], ends[l]
        n = end - start
        op = ops[l]
        c = columns[l]
        r = rows[l]
        for i in range(values.shape[1]):
            x = values[c, i]
            lo[r, i] = 0
            hi[r, i] = n
            if x != x:
                lo[r, i] = NULL
            elif op == OP_LT:
                lo[r, i] = _after(lt, start, end, x, True)
            elif op == OP_LE:
                lo[r, i] = _after(le, start, end, x, False)
            elif op == OP_GT:
                hi[r, i] = _after(le, start, end, x, False)
            elif op == OP_GE:
                hi[r, i] = _after(lt, start, end, x, True)
            else:
                lo[r, i] = _after(le, start, end, x, False)
                hi[r, i] = _after(lt, start, end, x, True)
