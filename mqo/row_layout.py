"""Stored layout: where a stream's stored rows ``(ts, id, *values)`` keep the columns
the attribute kernels read, and one stored row as those columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mqo.batch_input import NUMERIC, columns_of, numeric_columns
from mqo.plan import CompiledPlan
from predicates import ColumnType, StreamSchema
from predicates.numbers import EXACT_INTEGERS


@dataclass(frozen=True)
class RowLayout:
    """Where a stream's stored rows keep what :func:`row_columns` takes out of them."""

    schema: StreamSchema
    numeric: list[str]  # the numeric columns' names
    numeric_at: list[int]  # and their positions in a row
    integer_at: list[int]  # positions of INTEGER and BYTE columns (exact past 2**53)
    others: list[tuple[str, int]]  # the other columns: name and position
    numeric_row: dict[int, int]  # a numeric column's position -> its row of columns[NUMERIC]


def row_layout(plan: CompiledPlan, stream: int) -> RowLayout:
    """A stream's :class:`RowLayout` (made once per plan, :meth:`CompiledPlan.per_stream`)."""
    schema = plan.streams[stream]
    numeric = numeric_columns(schema)
    integer = [p for p, c in enumerate(schema.columns, 2) if c.ctype in (ColumnType.INTEGER, ColumnType.BYTE)]
    others = [(c.name, p) for p, c in enumerate(schema.columns, 2) if not c.ctype.is_numeric]
    numeric_at = [p for _, p in numeric]
    row_of = {p: k for k, p in enumerate(numeric_at)}
    return RowLayout(schema, [name for name, _ in numeric], numeric_at, integer, others, row_of)


def row_columns(row: tuple[Any, ...], layout: RowLayout) -> dict[str, Any]:
    """:func:`columns_of`'s columns for one stored row (``(ts, id, *values)``, values
    already checked by :mod:`mqo.rows`), without converting them again: what one pushed
    tuple takes to the kernels."""
    for p in layout.integer_at:
        v = row[p]
        if v is not None and abs(v) >= EXACT_INTEGERS:
            # an integer doubles round: the batch form keeps it exact
            one = {"ts": [row[0]], **{c.name: [x] for c, x in zip(layout.schema.columns, row[2:], strict=True)}}
            return columns_of(one, layout.schema)[2]
    columns: dict[str, Any] = {name: [row[p]] for name, p in layout.others}
    # one array (None is NaN), and no view of it per column: a pushed tuple's cost is
    # per call, and its numeric columns are read as rows of this one (the stored row
    # itself gives its values)
    columns[NUMERIC] = np.array([row[p] for p in layout.numeric_at], np.float64).reshape(-1, 1)
    return columns
