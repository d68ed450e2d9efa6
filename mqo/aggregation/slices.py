"""One slice store: the partials of one (stream, filter, GROUP BY columns) at one grid.

Time is cut into slices ``((j-1)*g, j*g]`` where ``g`` is the greatest common divisor
of the RANGE and SLIDE of every query reading the store, so every window
``(k*s - d, k*s]`` is exactly the slices ``k*s/g - d/g + 1 .. k*s/g``. Which slice a
tuple falls in is decided exactly (``ceil(ts / g)`` on the decimal ``ts`` means, as
docs/ARCHITECTURE.md's "Exact numbers" asks; doubles decide unless ``ts / g`` is
within rounding of an integer).

Memory is slices x groups x columns: slices no pending window needs are dropped as
windows are emitted (landmark windows, ``[RANGE UNBOUNDED]``, keep every slice: that
store grows with time, one slice per ``g``).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from predicates.numbers import decimal_of


def slice_of(ts: np.ndarray, g: Fraction) -> np.ndarray:
    """``ceil(ts / g)`` of every timestamp, exactly."""
    gf = float(g)
    q = ts / gf
    j = np.ceil(q)
    near = np.abs(q - np.round(q)) <= 1e-9 * np.maximum(1.0, np.abs(q))
    out = j.astype(np.int64)
    for i in np.flatnonzero(near).tolist():
        out[i] = math.ceil(decimal_of(float(ts[i])) / g)
    return out


class SliceStore:
    def __init__(self, columns: list[str], integer: list[bool], grid: Fraction) -> None:
        self.columns = columns  # value columns, in partial order
        self.integer = integer
        self.grid = grid
        self.groups: dict[tuple[Any, ...], int] = {}
        self.group_keys: list[tuple[Any, ...]] = []
        self.base = 0  # slice number at position 0
        self.top = -1  # largest slice number holding data (-1 with base 0: none)
        self.empty = True
        self.landmark = False
        self._alloc(16, 4)

    def _alloc(self, S: int, G: int) -> None:
        C = len(self.columns)
        self.rows = np.zeros((S, G), np.int64)
        self.fpart = np.zeros((S, G, C, 6))
        self.ipart = np.zeros((S, G, C, 4), np.int64)

    @property
    def slices_kept(self) -> int:
        return 0 if self.empty else self.top - self.base + 1

    def add_columns(self, columns: list[str], integer: list[bool]) -> None:
        """More value columns (a query registered later): they start empty."""
        new = [(c, i) for c, i in zip(columns, integer, strict=True) if c not in self.columns]
        if not new:
            return
        S, G = self.rows.shape
        extra = len(new)
        self.fpart = np.concatenate([self.fpart, np.zeros((S, G, extra, 6))], axis=2)
        self.ipart = np.concatenate([self.ipart, np.zeros((S, G, extra, 4), np.int64)], axis=2)
        self.columns += [c for c, _ in new]
        self.integer += [i for _, i in new]

    def group_index(self, keys: list[tuple[Any, ...]]) -> np.ndarray:
        out = np.empty(len(keys), np.int64)
        groups = self.groups
        for i, key in enumerate(keys):
            g = groups.get(key)
            if g is None:
                g = groups[key] = len(self.group_keys)
                self.group_keys.append(key)
            out[i] = g
        G = len(self.group_keys)
        if self.rows.shape[1] < G:
            self._resize(self.rows.shape[0], max(G, 2 * self.rows.shape[1]), 0)
        return out

    def _resize(self, S: int, G: int, shift: int) -> None:
        """New capacity; slice position p moves to p - shift."""
        old = (self.rows, self.fpart, self.ipart)
        self._alloc(S, G)
        keep = min(old[0].shape[0] - shift, S)
        if keep > 0:
            g = old[0].shape[1]
            self.rows[:keep, :g] = old[0][shift : shift + keep]
            self.fpart[:keep, :g] = old[1][shift : shift + keep]
            self.ipart[:keep, :g] = old[2][shift : shift + keep]

    def add(
        self,
        slices: np.ndarray,
        codes: np.ndarray,
        keys: list[tuple[Any, ...]],
        fvals: np.ndarray,
        ivals: np.ndarray,
        first: int,
    ) -> None:
        """Tuples into their slices; row i's group key is ``keys[codes[i]]``; slices
        before ``first`` are needed by no window."""
        keep = slices >= first
        if not keep.any():
            return
        slices, codes, fvals, ivals = slices[keep], codes[keep], fvals[keep], ivals[keep]
        used, at = np.unique(codes, return_index=True)
        used = used[np.argsort(at, kind="stable")]  # new groups numbered in arrival order
        index = np.zeros(len(keys), np.int64)
        index[used] = self.group_index([keys[c] for c in used.tolist()])
        groups = index[codes]
        lo, hi = int(slices.min()), int(slices.max())
        if self.empty:
            self.base, self.top, self.empty = lo, hi, False
            self.rows[:] = 0
            self.fpart[:] = 0
            self.ipart[:] = 0
        elif lo < self.base:  # a tuple within the lateness, before every kept slice
            self._grow_front(self.base - lo)
        self.top = max(self.top, hi)
        need = self.top - self.base + 1
        if need > self.rows.shape[0]:
            self._resize(max(need, 2 * self.rows.shape[0]), self.rows.shape[1], 0)
        from indexes import slice_kernels as K  # numba on first use

        K.update(slices - self.base, groups, fvals, ivals, self.rows, self.fpart, self.ipart)

    def _grow_front(self, extra: int) -> None:
        """Room for ``extra`` slices before ``base``."""
        old = (self.rows, self.fpart, self.ipart)
        S, G = old[0].shape
        self._alloc(max(S + extra, 2 * S), G)
        self.rows[extra : extra + S] = old[0]
        self.fpart[extra : extra + S] = old[1]
        self.ipart[extra : extra + S] = old[2]
        self.base -= extra

    def drop_before(self, first: int) -> None:
        """Forget slices before ``first`` (no window needs them any more)."""
        if self.empty or self.landmark or first <= self.base:
            return
        if first > self.top:
            self.empty = True
            self.base = first
            return
        shift = first - self.base
        S = self.rows.shape[0]
        if shift * 2 >= S or shift > 4096:
            # move, and give back room a large batch once needed
            kept = self.top - first + 1
            self._resize(S if 4 * kept > S else max(16, 2 * kept), self.rows.shape[1], shift)
        else:
            # clear and keep positions: cheaper than moving for small drops
            self.rows = np.roll(self.rows, -shift, axis=0)
            self.fpart = np.roll(self.fpart, -shift, axis=0)
            self.ipart = np.roll(self.ipart, -shift, axis=0)
            self.rows[-shift:] = 0
            self.fpart[-shift:] = 0
            self.ipart[-shift:] = 0
        self.base = first

    def data_slices(self) -> np.ndarray:
        """The slice numbers holding a tuple, ascending."""
        if self.empty:
            return np.zeros(0, np.int64)
        return self.base + np.flatnonzero(self.rows[: self.top - self.base + 1].any(axis=1))

    def fold(self, ends: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Windows of ``length`` slices (0: landmark, every slice kept) ending at the
        slice numbers ``ends`` (ascending), folded per group in one kernel call:
        ``rows[W, G]``, ``fpart[W, G, C, 6]``, ``ipart[W, G, C, 4]``."""
        from indexes import slice_kernels as K

        npos = 0 if self.empty else self.top - self.base + 1
        his = np.asarray(ends, np.int64) - self.base
        return K.fold_windows(self.rows, self.fpart, self.ipart, npos, self.base, length, his)
