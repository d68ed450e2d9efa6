"""A batch's columns as the aggregator reads them: values (INTEGER ones exactly),
group codes per GROUP BY, slice numbers per grid, and the rows of each filter."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from mqo.aggregation.slices import slice_of
from mqo.batch_input import EXACT
from mqo.prepare import PreparedBatch
from predicates import ColumnType


class BatchColumns:
    """What every store reads of one batch, worked out once for the whole batch: the
    slice of each row at a grid, the group code of each row for a GROUP BY."""

    def __init__(self, prepared: PreparedBatch) -> None:
        self.prepared = prepared
        self._slices: dict[Fraction, np.ndarray] = {}
        self._groups: dict[tuple[str, ...], tuple[np.ndarray, list[tuple[Any, ...]]]] = {}

    def slices(self, grid: Fraction) -> np.ndarray:
        if grid not in self._slices:
            self._slices[grid] = slice_of(self.prepared.ts, grid)
        return self._slices[grid]

    def groups(self, group_by: tuple[str, ...]) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
        if group_by not in self._groups:
            rows = np.arange(len(self.prepared), dtype=np.int64)
            floats = [name == "ts" or _is_float(self.prepared, name) for name in group_by]
            self._groups[group_by] = group_codes(group_columns(self.prepared, group_by), rows, floats)
        return self._groups[group_by]


class FilterRows:
    """Which kept rows of a batch satisfy each filter: read per filter off the rows'
    candidate words (``words[r]``: the slots single row ``single[r]`` satisfies, of
    ``mask``'s), and the (row, slot) pairs the engine decided (residuals, OR). A
    filter's rows cost a pass over one word column per slot: no (row, slot) pair is
    made per satisfied filter (a thousand filters over a million rows would be half a
    billion pairs to sort)."""

    def __init__(self, single: np.ndarray, words: np.ndarray, mask: np.ndarray, engine: tuple[np.ndarray, np.ndarray]):
        self.single = single
        self.words = np.ascontiguousarray(words.T)  # word by word: a slot's bits are one contiguous row
        self.mask = mask
        rows, slots = engine
        order = np.argsort(slots, kind="stable")
        self.engine_rows, self.engine_slots = rows[order], slots[order]

    def rows(self, slots: list[int]) -> np.ndarray:
        """The rows (ascending) satisfying a filter of ``slots`` (a row in two of them once)."""
        hit = np.zeros(len(self.single), bool)
        extra: list[np.ndarray] = []
        for q in slots:
            word, bit = divmod(q, 64)
            if int(self.mask[word]) >> bit & 1:
                hit |= (self.words[word] & np.uint64(1 << bit)) != 0
            lo, hi = np.searchsorted(self.engine_slots, [q, q + 1])
            if hi > lo:
                extra.append(self.engine_rows[lo:hi])
        chosen = self.single[hit]
        return np.union1d(chosen, np.concatenate(extra)) if extra else chosen


def value_columns(
    columns: list[str], integer: list[bool], prepared: PreparedBatch, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The value columns of ``rows`` (``ts`` and ``id`` too): as doubles (NaN: NULL)
    and INTEGER ones exactly."""
    C = len(columns)
    fvals = np.full((len(rows), C), np.nan)
    ivals = np.zeros((len(rows), C), np.int64)
    exact = prepared.columns.get(EXACT, {})
    numeric = {col.name: col.ctype.is_numeric for col in prepared.schema.columns}
    for c, (name, is_int) in enumerate(zip(columns, integer, strict=True)):
        if name == "id":  # the implicit columns are columns like any other
            fvals[:, c] = prepared.ids[rows].astype(np.float64)
            ivals[:, c] = prepared.ids[rows]
            continue
        col = prepared.ts if name == "ts" else prepared.columns.get(name)
        if col is not None and not numeric.get(name, True):
            # a STRING or BOOLEAN column is only counted (COUNT(col)): its NULLs matter
            present = np.array([v is not None for v in col], bool)
            fvals[:, c] = np.where(present[rows], 0.0, np.nan)
        elif col is not None:
            fvals[:, c] = np.asarray(col, np.float64)[rows]
        if is_int:
            if name in exact:
                ivals[:, c] = np.asarray(exact[name].values, np.int64)[rows]
            else:
                ivals[:, c] = np.nan_to_num(fvals[:, c]).astype(np.int64)
    return fvals, ivals


def group_columns(prepared: PreparedBatch, names: tuple[str, ...]) -> list[Any]:
    """The GROUP BY columns of a batch (``ts`` and ``id`` too); an INTEGER one holding
    values past 2**53 as exact Python ints (None: NULL), since its doubles would merge
    groups."""
    exact = prepared.columns.get(EXACT, {})
    out: list[Any] = []
    for name in names:
        if name == "ts":
            out.append(prepared.ts)
        elif name == "id":  # exact: as Python ints past 2**53
            ids = prepared.ids
            wide = len(ids) and max(-int(ids.min()), int(ids.max())) >= 2**53  # (abs of -2**63 wraps)
            out.append(np.array(ids.tolist(), object) if wide else ids.astype(np.float64))
        elif name in exact:
            col = exact[name]
            values = [None if null else v for v, null in zip(col.values.tolist(), col.null.tolist(), strict=True)]
            out.append(np.array(values, object))
        else:
            out.append(prepared.columns.get(name))
    return out


def _is_float(prepared: PreparedBatch, name: str) -> bool:
    return any(col.name == name and col.ctype is ColumnType.FLOAT for col in prepared.schema.columns)


def group_codes(
    cols: list[Any], rows: np.ndarray, floats: list[bool] | None = None
) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    """Per row a code of its group key and the key of each code (codes numbered by
    first occurrence): the distinct keys are found on arrays, and only one Python
    tuple is built per distinct key, not per row. ``floats``: which columns are FLOAT
    (their keys stay floats; the others' whole doubles are the INTEGERs they hold)."""
    n = len(rows)
    floats = floats or [False] * len(cols)
    if not cols:
        return np.zeros(n, np.int64), [()]
    per_col: list[np.ndarray] = []
    for col in cols:
        if col is None:
            per_col.append(np.zeros(n, np.int64))
            continue
        vals = np.asarray(col)[rows]
        if vals.dtype.kind in "fiub":  # NaN (NULL) is one value: np.unique folds NaNs together
            per_col.append(np.unique(vals, return_inverse=True)[1].reshape(-1))
        elif set(map(type, vals.tolist())) <= {str, type(None)}:  # texts and NULL: the texts sorted at once
            null = np.fromiter(map(_is_none, vals.tolist()), bool, n)
            texts = np.where(null, "", vals)
            codes = np.where(null, -1, np.unique(texts, return_inverse=True)[1].reshape(-1))
            per_col.append(np.unique(codes, return_inverse=True)[1].reshape(-1))  # (numbered 0, 1, ... as below)
        else:  # other values (exact INTEGERs past 2**53): by dictionary
            seen: dict[Any, int] = {}
            per_col.append(np.fromiter((seen.setdefault(group_key(vals, i), len(seen)) for i in range(n)), np.int64, n))
    if len(per_col) == 1:
        inverse = per_col[0]
        _, first = np.unique(inverse, return_index=True)
    else:
        stacked = np.stack(per_col, axis=1)
        _, first, inverse = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    order = np.argsort(first, kind="stable")  # codes by first occurrence
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    keys = [
        tuple(group_key(col, int(rows[first[u]]), f) for col, f in zip(cols, floats, strict=True))
        for u in order.tolist()
    ]
    return rank[inverse], keys


def _is_none(value: Any) -> bool:
    return value is None


def group_key(col: Any, i: int, is_float: bool = False) -> Any:
    """Row ``i``'s key in ``col`` as a Python value (NaN: None); a whole double of a
    column that is not FLOAT is the INTEGER it holds."""
    if col is None:
        return None
    v = col[i]
    if isinstance(v, float | np.floating):
        if v != v:
            return None
        return int(v) if not is_float and float(v).is_integer() and abs(v) < 2**53 else float(v)
    return v.item() if isinstance(v, np.generic) else v
