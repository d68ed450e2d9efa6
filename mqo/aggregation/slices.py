"""One slice store: the partials of one (stream, filter, GROUP BY columns) at one grid.

Time is cut into slices ``((j-1)*g, j*g]`` where ``g`` is the greatest common divisor
of the RANGE and SLIDE of every query reading the store, so every window
``(k*s - d, k*s]`` is exactly the slices ``k*s/g - d/g + 1 .. k*s/g``. Which slice a
tuple falls in is decided exactly (``ceil(ts / g)`` on the decimal ``ts`` means, as
docs/ARCHITECTURE.md's "Exact numbers" asks; doubles decide unless ``ts / g`` is
within rounding of an integer).

**Sparse in time.** A store holds only the slices that hold data: ``nums`` their
slice numbers, ascending, and row ``p`` of the partial arrays the slice ``nums[p]``.
A gap of a day (or of 1e9 s) between two tuples costs nothing; a window's fold reads
the held slices inside its range (positions found by binary search). Memory is held
slices x groups x columns: slices no pending window needs are dropped as windows are
emitted (landmark windows, ``[RANGE UNBOUNDED]``, keep every slice holding data).

Slice numbers are int64 while they stay within ``SAFE`` (then sums of two of them
stay in int64 too); a timestamp far from zero on a fine grid (``ts`` 1e300) gets an
exact Python int, and the store's numbers become an object array until such slices
are dropped: correct everywhere, only slower.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from predicates.numbers import decimal_of

SAFE = 2**61  # int64 slice numbers stay within this, so sums of two stay in int64
FORGET_AT = 4096  # groups in a store before it looks for groups with no data left (SliceStore._forget_groups)


def slice_of(ts: np.ndarray, g: Fraction) -> np.ndarray:
    """``ceil(ts / g)`` of every timestamp, exactly: int64, or an object array of
    Python ints when one is past :data:`SAFE`."""
    gf = float(g)
    with np.errstate(over="ignore", invalid="ignore"):
        q = ts / gf
        near = np.abs(q - np.round(q)) <= 1e-9 * np.maximum(1.0, np.abs(q))
    far = ~(np.abs(q) < SAFE / 2)  # also inf: ts / g past the doubles
    if far.any():
        exact = [
            math.ceil(decimal_of(float(t)) / g) if f or n else math.ceil(x)
            for t, x, f, n in zip(ts.tolist(), q.tolist(), far.tolist(), near.tolist(), strict=True)
        ]
        return ints(exact)
    out = np.ceil(q).astype(np.int64)
    close = np.flatnonzero(near)
    if len(close):
        # decided exactly once per distinct timestamp: an aggregate view's rows are
        # all at their windows' ends, on the grid, a few distinct ends per emission
        distinct, inverse = np.unique(ts[close], return_inverse=True)
        exact = [math.ceil(decimal_of(t) / g) for t in distinct.tolist()]
        out[close] = np.array(exact, np.int64)[inverse.reshape(-1)]
    return out


def ints(values: Any) -> np.ndarray:
    """Whole numbers as an int64 array when all are within :data:`SAFE`, else as an
    object array of Python ints (exact at any size)."""
    arr = np.asarray(values)
    if arr.dtype == object or arr.dtype.kind not in "iu":
        out = np.empty(len(arr), object)
        out[:] = [int(v) for v in arr.tolist()]
        if not len(out) or (max(out) < SAFE and min(out) > -SAFE):
            return out.astype(np.int64)
        return out
    return arr.astype(np.int64, copy=False)


def scaled(ks: np.ndarray, factor: int, offset: int = 0) -> np.ndarray:
    """``ks * factor + offset`` exactly (object arithmetic when int64 could overflow)."""
    if not len(ks):
        return np.zeros(0, np.int64)
    top = max(abs(int(ks.max())), abs(int(ks.min()))) * abs(factor) + abs(offset)
    if ks.dtype != object and top < SAFE:
        return ks * factor + offset
    return ints(ks.astype(object) * factor + offset)


def _common(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two slice-number arrays of one dtype (object if either is)."""
    if a.dtype == b.dtype:
        return a, b
    return a.astype(object), b.astype(object)


def windows_with_data(data: np.ndarray, step: int, length: int, k_from: int, k_to: int) -> np.ndarray:
    """The windows ``k`` in ``k_from .. k_to`` holding one of the slices ``data``
    (ascending slice numbers), window ``k`` being the slices ``k*step - length + 1 ..
    k*step`` (``length`` 0: every slice up to ``k*step``); ascending. Slice ``j`` is in
    the windows ``ceil(j/step) .. floor((j+length-1)/step)``: O(data + windows), on
    arrays, whatever the gaps between the slices (exact Python ints past int64)."""
    if not len(data) or k_to < k_from:
        return np.zeros(0, np.int64)
    wide = data.dtype == object or max(abs(k_from), abs(k_to), abs(step), length) >= SAFE
    d = data.astype(object) if wide else data
    first = np.maximum(-((-d) // step), k_from)
    last = np.minimum((d + (length - 1)) // step, k_to) if length > 0 else np.full(len(d), k_to, d.dtype)
    # a window already holding an earlier slice is not listed twice
    before = np.concatenate([np.array([k_from - 1], d.dtype), np.maximum.accumulate(last)[:-1]])
    first = np.maximum(first, before + 1)
    counts = np.maximum(last - first + 1, 0).astype(np.int64)
    total = int(counts.sum())
    starts = np.repeat(first, counts)
    offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return ints(starts + offsets) if wide else starts + offsets


class SliceStore:
    def __init__(self, columns: list[str], integer: list[bool], grid: Fraction) -> None:
        self.columns = columns  # value columns, in partial order
        self.integer = integer
        self.grid = grid
        self.groups: dict[tuple[Any, ...], int] = {}
        self.group_keys: list[tuple[Any, ...]] = []
        self.nums = np.zeros(0, np.int64)  # the slice numbers held, ascending; row p is nums[p]
        self.landmark = False
        self._forget_at = FORGET_AT  # the groups at which the next look for groups to forget comes
        self._alloc(16, 4)

    def _alloc(self, S: int, G: int) -> None:
        from indexes.slice_fields import FLOAT_FIELDS, INT_FIELDS

        C = len(self.columns)
        self.rows = np.zeros((S, G), np.int64)
        self.fpart = np.zeros((S, G, C, FLOAT_FIELDS))
        self.ipart = np.zeros((S, G, C, INT_FIELDS), np.int64)

    @property
    def empty(self) -> bool:
        return len(self.nums) == 0

    @property
    def slices_kept(self) -> int:
        return len(self.nums)

    @property
    def first_slice(self) -> int:
        return int(self.nums[0])

    @property
    def last_slice(self) -> int:
        return int(self.nums[-1])

    def add_columns(self, columns: list[str], integer: list[bool]) -> None:
        """More value columns (a query registered later): they start empty."""
        new = [(c, i) for c, i in zip(columns, integer, strict=True) if c not in self.columns]
        if not new:
            return
        S, G = self.rows.shape
        extra = len(new)
        self.fpart = np.concatenate([self.fpart, np.zeros((S, G, extra, self.fpart.shape[3]))], axis=2)
        self.ipart = np.concatenate([self.ipart, np.zeros((S, G, extra, self.ipart.shape[3]), np.int64)], axis=2)
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
            self._moved(self.rows.shape[0], max(G, 2 * self.rows.shape[1]), np.arange(len(self.nums)))
        return out

    def _moved(self, S: int, G: int, where: np.ndarray) -> None:
        """New capacity ``S`` slices x ``G`` groups; held row ``p`` moves to ``where[p]``."""
        old = (self.rows, self.fpart, self.ipart)
        self._alloc(S, G)
        P, g = len(where), old[0].shape[1]
        if P:
            self.rows[where, :g] = old[0][:P]
            self.fpart[where, :g] = old[1][:P]
            self.ipart[where, :g] = old[2][:P]

    def add(
        self,
        slices: np.ndarray,
        codes: np.ndarray,
        keys: list[tuple[Any, ...]],
        fvals: np.ndarray,
        ivals: np.ndarray,
        first: int | None,
    ) -> None:
        """Tuples into their slices; row i's group key is ``keys[codes[i]]``; slices
        before ``first`` are needed by no window (None: every slice may be)."""
        if first is not None:
            keep = slices >= first
            if not keep.any():
                return
            slices, codes, fvals, ivals = slices[keep], codes[keep], fvals[keep], ivals[keep]
        from indexes import slice_kernels as K  # numba on first use

        first_row = K.first_rows(np.asarray(codes, np.int64), len(keys))
        used = np.flatnonzero(first_row >= 0)
        used = used[np.argsort(first_row[used], kind="stable")]  # new groups numbered in arrival order
        index = np.zeros(len(keys), np.int64)
        index[used] = self.group_index([keys[c] for c in used.tolist()])
        groups = index[codes]
        nums, slices = _common(self.nums, slices)
        # rows in time order (no tuple within the lateness among them): the slices are runs
        runs = None
        if slices.dtype != object and len(slices) and bool((slices[1:] >= slices[:-1]).all()):
            runs = np.concatenate([[0], np.flatnonzero(slices[1:] != slices[:-1]) + 1])
            distinct = slices[runs]
        else:
            distinct = np.unique(slices)
        P = len(nums)
        if P:
            found = np.searchsorted(nums, distinct)
            held = found < P
            held[held] = nums[found[held]] == distinct[held]
            distinct = distinct[~held]
        if len(distinct):
            merged = np.concatenate([nums, distinct])
            if P and distinct[0] < nums[-1]:  # a slice before held ones (a tuple within the lateness)
                merged = np.sort(merged, kind="stable")
            where = np.searchsorted(merged, nums)
            S = self.rows.shape[0]
            if len(merged) > S or (P and where[-1] != P - 1):
                self._moved(max(len(merged), 2 * S if len(merged) > S else S), self.rows.shape[1], where)
            nums = merged
        self.nums = ints(nums) if nums.dtype == object else nums
        if runs is not None:  # each run's position once
            found = np.searchsorted(self.nums, slices[runs]).astype(np.int64)
            pos = np.repeat(found, np.diff(np.append(runs, len(slices))))
        else:
            pos = np.searchsorted(*_common(self.nums, slices)).astype(np.int64)
        K.update(pos, groups, fvals, ivals, self.rows, self.fpart, self.ipart)

    def drop_before(self, first: int | None) -> None:
        """Forget slices before ``first`` (no window needs them any more; None: keep all)."""
        if first is None or self.landmark or not len(self.nums) or first <= int(self.nums[0]):
            return  # (most calls: an emission asks every store, and the first needed has not moved)
        k = int(np.searchsorted(self.nums, first)) if self.nums.dtype == object else _search(self.nums, first)
        if not k:
            return
        P = len(self.nums)
        kept = P - k
        S = self.rows.shape[0]
        if S > 64 and 4 * kept < S:  # give back room a large batch once needed
            old = (self.rows, self.fpart, self.ipart)
            self._alloc(max(16, 2 * kept), old[0].shape[1])
            self.rows[:kept], self.fpart[:kept], self.ipart[:kept] = old[0][k:P], old[1][k:P], old[2][k:P]
        else:
            for a in (self.rows, self.fpart, self.ipart):
                a[:kept] = a[k:P].copy()
                a[kept:P] = 0
        self.nums = self.nums[k:]
        if self.nums.dtype == object:
            self.nums = ints(self.nums)
        if len(self.group_keys) >= self._forget_at:
            self._forget_groups()

    def _forget_groups(self) -> None:
        """Forget the groups that hold data in no held slice, when they are at least half
        of them, numbering the others anew in their order (a group's code lives within
        one emission: chunks keep keys, relations key by them): an auction bid on once,
        long ago, costs no room once its windows closed, so memory follows the groups of
        the windows still open, not every group ever seen. O(held slices x groups), run
        when the groups have doubled since the last time: amortized O(1) per group."""
        P, G = len(self.nums), len(self.group_keys)
        live = np.flatnonzero(self.rows[:P, :G].any(axis=0))
        self._forget_at = max(FORGET_AT, 2 * len(live) if 2 * len(live) <= G else 2 * G)
        if 2 * len(live) > G:
            return
        old = (self.rows, self.fpart, self.ipart)
        self._alloc(self.rows.shape[0], max(4, 2 * len(live)))
        L = len(live)
        self.rows[:P, :L], self.fpart[:P, :L], self.ipart[:P, :L] = old[0][:P, live], old[1][:P, live], old[2][:P, live]
        self.group_keys = [self.group_keys[g] for g in live.tolist()]
        self.groups = {key: g for g, key in enumerate(self.group_keys)}

    def state(self) -> dict[str, Any]:
        """The store as plain data (str keys, lists, numbers, numeric arrays): what
        :meth:`from_state` takes back, also after a JSON round trip (lists for tuples
        and arrays)."""
        P, G = len(self.nums), len(self.group_keys)
        return {
            "columns": list(self.columns),
            "integer": list(self.integer),
            "grid": str(self.grid),
            "landmark": self.landmark,
            "group_keys": [[plain(v) for v in key] for key in self.group_keys],
            # slice numbers past int64 are Python ints (a list), else an int64 array
            "nums": self.nums.tolist() if self.nums.dtype == object else self.nums.copy(),
            "rows": self.rows[:P, :G].copy(),
            "fpart": self.fpart[:P, :G].copy(),
            "ipart": self.ipart[:P, :G].copy(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SliceStore:
        store = cls(list(state["columns"]), [bool(i) for i in state["integer"]], Fraction(state["grid"]))
        store.landmark = bool(state["landmark"])
        keys = [tuple(key) for key in state["group_keys"]]
        store.group_index(keys)
        nums = ints(state["nums"])
        P, G, C = len(nums), len(keys), len(store.columns)
        store._alloc(max(16, P), max(4, G))
        store.rows[:P, :G] = np.asarray(state["rows"], np.int64).reshape(P, G)
        store.fpart[:P, :G] = np.asarray(state["fpart"], np.float64).reshape(P, G, C, store.fpart.shape[3])
        store.ipart[:P, :G] = np.asarray(state["ipart"], np.int64).reshape(P, G, C, store.ipart.shape[3])
        store.nums = nums
        return store

    def _check(self) -> None:
        """Assert the store's invariants (``check=True``, after every ingest and
        emission): partial arrays of one shape over the columns; group codes those of
        the keys; held slice numbers strictly ascending (int64 unless one is past
        :data:`SAFE`); every held slice holding a tuple; no data in the room past the
        held slices and groups (new slices start there); and partial fields that agree:
        counts at least 0 and at most the slice's rows, an empty partial all zeros,
        min <= max (exact and as doubles alike for INTEGER columns)."""
        from indexes.slice_fields import FLOAT_FIELDS, IMAX, IMIN, INT_FIELDS, MAX, MIN, N

        C, P, G = len(self.columns), len(self.nums), len(self.group_keys)
        S, room = self.rows.shape
        assert len(self.integer) == C and self.grid > 0, "columns and their kinds differ"
        assert self.fpart.shape == (S, room, C, FLOAT_FIELDS), "float partials of another shape"
        assert self.ipart.shape == (S, room, C, INT_FIELDS), "integer partials of another shape"
        assert P <= S and room >= G, "more slices or groups held than there is room for"
        assert self.groups == {key: g for g, key in enumerate(self.group_keys)}, "group codes differ from the keys"
        nums = self.nums
        if nums.dtype == object:
            assert any(not -SAFE < v < SAFE for v in nums.tolist()), "object slice numbers that fit in int64"
            assert all(a < b for a, b in zip(nums.tolist(), nums.tolist()[1:], strict=False)), "slices out of order"
        else:
            assert nums.dtype == np.int64 and (np.abs(nums) < SAFE).all(), "slice numbers of another type"
            assert (np.diff(nums) > 0).all(), "held slice numbers not strictly ascending"
        for a in (self.rows, self.fpart, self.ipart):
            assert not a[P:].any() and not a[:, G:].any(), "data in the room past the held slices and groups"
        rows, f, i = self.rows[:P, :G], self.fpart[:P, :G], self.ipart[:P, :G]
        assert (rows >= 0).all() and (rows.sum(axis=1) > 0).all(), "a held slice without data"
        counts = i[..., N]
        assert (counts >= 0).all() and (counts <= rows[:, :, None]).all(), "a column counted past its rows"
        some = counts > 0
        assert not f[~some].any() and not i[~some].any(), "an empty partial with a field set"
        assert (f[..., MIN][some] <= f[..., MAX][some]).all(), "a partial's min above its max"
        for c in np.flatnonzero(self.integer).tolist():
            held = some[:, :, c]
            low, high = i[:, :, c, IMIN][held], i[:, :, c, IMAX][held]
            assert (low <= high).all(), "an exact min above its max"
            assert (f[:, :, c, MIN][held] == low.astype(np.float64)).all(), "an exact min apart from its double"
            assert (f[:, :, c, MAX][held] == high.astype(np.float64)).all(), "an exact max apart from its double"

    def data_slices(self) -> np.ndarray:
        """The slice numbers holding a tuple, ascending."""
        return self.nums

    def fold(
        self, ends: np.ndarray, length: int, groups: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Windows of ``length`` slices (0: landmark, every slice kept) ending at the
        slice numbers ``ends`` (ascending), folded per group in one kernel call:
        ``rows[W, G]``, ``fpart[W, G, C, F]``, ``ipart[W, G, C, I]``; ``groups``: of
        those groups only (column ``j`` is group ``groups[j]``), else of every group."""
        from indexes import slice_kernels as K

        nums, ends = _common(self.nums, ints(ends))
        los, his = self.positions(ends, length)
        # the kernel reads the held positions from the first window's start to the last's end
        first = int(los.min()) if len(los) else 0
        last = max(first, int(his.max()) + 1 if len(his) else 0)
        span = nums[first:last]
        block = np.zeros(len(span), np.int64)
        if length and len(span) > 1:
            # block numbers: aligned on slice numbers, one window long
            number = (span.astype(object) if length >= SAFE else span) // length
            block[1:] = np.cumsum(number[1:] != number[:-1])
        G = len(self.group_keys)  # the output holds the groups made, not the room for more
        pick: Any = groups if groups is not None and len(groups) < G else slice(0, G)
        rows, fpart, ipart = (a[first:last][:, pick] for a in (self.rows, self.fpart, self.ipart))
        return K.fold_windows(rows, fpart, ipart, block, los - first, his - first)

    def positions(self, ends: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
        """The first and last held position of each window of ``length`` slices (0:
        landmark) ending at the slice numbers ``ends`` (none held: last < first)."""
        nums, ends = _common(self.nums, ints(ends))
        his = np.searchsorted(nums, ends, "right").astype(np.int64) - 1
        if length == 0:
            return np.zeros(len(ends), np.int64), his
        return np.searchsorted(*_common(nums, scaled(ends, 1, 1 - length))).astype(np.int64), his

    def groups_in(self, ends: np.ndarray, length: int) -> np.ndarray:
        """The groups holding data in the windows of ``length`` slices ending at ``ends``
        (ascending)."""
        los, his = self.positions(ends, length)
        G = len(self.group_keys)
        if not len(los):
            return np.zeros(0, np.int64)
        return np.flatnonzero(self.rows[int(los.min()) : int(his.max()) + 1, :G].any(axis=0))


def window_bounds(ks: np.ndarray, slide: Fraction, size: Fraction | None) -> tuple[np.ndarray, np.ndarray]:
    """Window ``k``'s ``(k*slide - size, k*slide]`` as correctly rounded doubles, for all
    ``ks`` (landmark: start -inf): on int64 arrays when the numbers are whole and small
    enough to be exact doubles, else by Python's correctly rounded int division."""
    sn, sd = slide.numerator, slide.denominator
    dn, dd = (0, 1) if size is None else (size.numerator, size.denominator)
    top = int(np.abs(ks).max()) * sn * dd + abs(dn) * sd if len(ks) else 0
    if sd == 1 and dd == 1 and top < 2**53:
        end = ks * sn
        ends = end.astype(np.float64)
        starts = np.full(len(ks), -math.inf) if size is None else (end - dn).astype(np.float64)
        return starts, ends
    ends = np.array([quotient(k * sn, sd) for k in ks.tolist()], np.float64)
    if size is None:
        return np.full(len(ks), -math.inf), ends
    starts = np.array([quotient(k * sn * dd - dn * sd, sd * dd) for k in ks.tolist()], np.float64)
    return starts, ends


def quotient(a: int, b: int) -> float:
    """``a / b`` correctly rounded; past the largest double, infinity (a window bound
    beyond the doubles, as a timestamp near 1.8e308 on a coarse grid has)."""
    try:
        return a / b
    except OverflowError:
        return math.inf if (a > 0) == (b > 0) else -math.inf


def plain(value: Any) -> Any:
    """A value as plain Python (a numpy scalar as its Python number)."""
    return value.item() if isinstance(value, np.generic) else value


def _search(nums: np.ndarray, value: int) -> int:
    """Where ``value`` (any size) goes in the int64 ``nums``."""
    if value >= SAFE:
        return len(nums)
    if value <= -SAFE:
        return 0
    return int(np.searchsorted(nums, value))
