"""Count windows, ``[ROWS n]`` and ``[ROWS n SLIDE m]`` (CQL's row windows; per group
when grouped, as CQL's ``[Partition By x Rows n]``).

**Which rows.** A query's rows are the tuples that satisfy its WHERE, are not late and
arrive after it is registered. Per group they are numbered 1, 2, ... in timestamp order
(ties: arrival order). Window ``k`` (k = 1, 2, ...) is rows ``k*m - n + 1 .. k*m``
(from row 1 while ``k*m < n``: CQL's relation holds the last n rows, or all while there
are fewer). ``[ROWS n]`` is ``[ROWS n SLIDE n]``.

**When.** A row's number is final once its timestamp is at or before the watermark: a
tuple still to come is not late, so its ts is at or after the watermark, and one at
exactly the watermark is numbered after the rows already there (arrival order). Window
``k`` is emitted once row ``k*m`` is final. A late tuple within the allowed lateness
therefore lands in its place in ts order and changes only windows not yet emitted. At
the end of input (``flush``) each group's next window is emitted with the rows it holds
so far, if it holds any (``[ROWS 5 SLIDE 2]`` over 7 rows: windows ending at rows 2, 4,
6 and one of rows 4..7).

**Bounds.** ``window_start`` and ``window_end`` are the timestamps of the window's first
and last row (both included, unlike a time window's ``(start, end]``).

**Memory.** Rows not yet final are held as values (the tuples within the allowed
lateness of the newest: none with lateness 0 after each emission). Final rows go to
slices of ``g`` rows, ``g`` the greatest common divisor of the n and m of the store's
queries, one :class:`~mqo.aggregation.slices.SliceStore` per group, so each window is
the fold of its ``n/g`` slices and slices before the next window of every query are
dropped: memory is O(groups x n/g) partials, not rows.

**Sharing.** Queries on the same (stream, filter, GROUP BY) read one :class:`CountStore`
when they number the same rows: those registered while it has taken no row yet
(registered together, e.g. from one file). A query registered later numbers the rows
after it, so it gets a store of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from mqo.aggregation.slices import SliceStore, plain
from predicates import Catalog, ColumnType
from predicates.aggregate import AggregateQuery
from predicates.numbers import decimal_of

# windows of one group: start ts[W], end ts[W], the group, rows[W], float partials
# [W, C, 6], int partials [W, C, 4]
Window = tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray, np.ndarray]


def at_or_before(ts: np.ndarray, mark: Fraction) -> np.ndarray:
    """``ts <= mark`` on the decimal values, exactly (doubles decide unless within
    rounding of the mark)."""
    mf = float(mark)
    out = ts <= mf
    near = np.flatnonzero(np.abs(ts - mf) <= 1e-9 * max(1.0, abs(mf)))
    for i in near.tolist():
        out[i] = decimal_of(float(ts[i])) <= mark
    return out


@dataclass
class _Group:
    """One group's final rows: ``done`` numbered so far, their slices, the ts of the
    first row of every kept slice and of the last row."""

    store: SliceStore
    done: int = 0
    first_ts: dict[int, float] = field(default_factory=dict)
    last_ts: float = -math.inf
    flushed: int = -1  # ``done`` when ``flush`` last emitted the next windows


class CountStore:
    """The count-window partials of one (stream, filter, GROUP BY) and the queries
    numbering the same rows."""

    def __init__(self, group_by: tuple[str, ...]) -> None:
        self.group_by = group_by
        self.columns: list[str] = []
        self.integer: list[bool] = []
        self.grain = 0  # rows per slice; 0: no query yet
        self.readers: dict[str, tuple[int, int]] = {}  # query -> (n, m)
        self.groups: dict[tuple[Any, ...], int] = {}
        self.group_keys: list[tuple[Any, ...]] = []
        self.group_states: list[_Group] = []
        self.taken = 0  # rows taken so far
        # rows not final yet: ts, arrival number, group, values (chunks, joined on use)
        self.pending: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def add_reader(self, name: str, n: int, m: int, columns: list[str], integer: list[bool]) -> None:
        assert self.taken == 0, "a count store takes readers only before its first row"
        self.readers[name] = (n, m)
        self.grain = math.gcd(self.grain, n, m)
        for c, i in zip(columns, integer, strict=True):
            if c not in self.columns:
                self.columns.append(c)
                self.integer.append(i)

    @property
    def rows_held(self) -> int:
        """Rows held as values (not final yet)."""
        return sum(len(p[0]) for p in self.pending)

    @property
    def slices_kept(self) -> int:
        return sum(s.store.slices_kept for s in self.group_states)

    def take(
        self,
        ts: np.ndarray,
        arrival: np.ndarray,
        keys: list[tuple[Any, ...]],
        codes: np.ndarray,
        fv: np.ndarray,
        iv: np.ndarray,
    ) -> None:
        """Rows with their arrival numbers (``keys[codes[i]]`` the group key of row i)."""
        index = np.zeros(len(keys), np.int64)
        for c in np.unique(codes).tolist():  # groups holding rows only
            key = keys[c]
            g = self.groups.get(key)
            if g is None:
                g = self.groups[key] = len(self.group_keys)
                self.group_keys.append(key)
                self.group_states.append(
                    _Group(SliceStore(list(self.columns), list(self.integer), Fraction(self.grain)))
                )
            index[c] = g
        self.taken += len(ts)
        self.pending.append((np.asarray(ts, np.float64), np.asarray(arrival, np.int64), index[codes], fv, iv))

    def emit(self, mark: Fraction | None) -> dict[str, list[Window]]:
        """Number the rows at or before ``mark`` (None: all, the end of input) and
        return per reader the windows that became complete, ordered by group, then
        window; at the end of input also each group's next window, when it holds rows.
        O(final rows + windows x n/g x groups' columns)."""
        out: dict[str, list[Window]] = {name: [] for name in self.readers}
        if self.pending:
            ts, seq, grp, fv, iv = (np.concatenate(parts) for parts in zip(*self.pending, strict=True))
            final = np.ones(len(ts), bool) if mark is None else at_or_before(ts, mark)
            self.pending = [] if final.all() else [(ts[~final], seq[~final], grp[~final], fv[~final], iv[~final])]
            pick = np.flatnonzero(final)
            if len(pick):
                # by group, then ts, then arrival: each group's rows in their final order
                order = pick[np.lexsort((seq[pick], ts[pick], grp[pick]))]
                bounds = np.flatnonzero(np.diff(grp[order])) + 1
                for part in np.split(order, bounds):
                    self._number(int(grp[part[0]]), ts[part], fv[part], iv[part], out)
        if mark is None:
            for g, state in enumerate(self.group_states):
                if state.flushed != state.done:
                    state.flushed = state.done
                    for name, (n, m) in self.readers.items():
                        self._next_window(g, state, n, m, out[name])
        return out

    def _number(self, g: int, ts: np.ndarray, fv: np.ndarray, iv: np.ndarray, out: dict[str, list[Window]]) -> None:
        state = self.group_states[g]
        grain = self.grain
        d0 = state.done
        d1 = d0 + len(ts)
        rownum = np.arange(d0 + 1, d1 + 1, dtype=np.int64)
        slices = (rownum - 1) // grain + 1
        starts = np.flatnonzero((rownum - 1) % grain == 0)
        for i in starts.tolist():
            state.first_ts[int(slices[i])] = float(ts[i])
        first = self._first_needed(d0)
        state.store.add(slices, np.zeros(len(ts), np.int64), [()], fv, iv, first)
        for name, (n, m) in self.readers.items():
            ends = np.arange(d0 // m + 1, d1 // m + 1, dtype=np.int64) * m
            if len(ends):
                lo = (np.maximum(1, ends - n + 1) - 1) // grain + 1
                starts = np.array([state.first_ts[j] for j in lo.tolist()])
                # n/g slices ending at each window's last; those before slice 1 hold nothing
                out[name].append((starts, ts[ends - d0 - 1], g, *_group0(state.store.fold(ends // grain, n // grain))))
        state.done = d1
        state.last_ts = float(ts[-1])
        first = self._first_needed(d1)
        state.store.drop_before(first)
        for j in [j for j in state.first_ts if j < first]:
            del state.first_ts[j]

    def _first_needed(self, done: int) -> int:
        """The first slice the next window of any reader needs, ``done`` rows numbered."""
        first = None
        for n, m in self.readers.values():
            begin = max(1, (done // m + 1) * m - n + 1)
            lo = (begin - 1) // self.grain + 1
            first = lo if first is None else min(first, lo)
        return 1 if first is None else first

    def _next_window(self, g: int, state: _Group, n: int, m: int, out: list[Window]) -> None:
        """The window after the complete ones, with the rows it holds so far."""
        done = state.done
        if done % m == 0:
            return
        begin = max(1, (done // m + 1) * m - n + 1)
        if begin > done:
            return  # it starts after the last row (m > n): it holds none
        lo, hi = (begin - 1) // self.grain + 1, (done - 1) // self.grain + 1
        folded = _group0(state.store.fold(np.array([hi], np.int64), hi - lo + 1))
        out.append((np.array([state.first_ts[lo]]), np.array([state.last_ts]), g, *folded))

    def _check(self) -> None:
        """Assert the store's invariants (``check=True``, after every ingest and
        emission): group codes those of the keys, one group state each; the grain
        dividing every reader's n and m; pending chunks of one length over the columns,
        in known groups; rows taken = rows numbered + rows pending; and per group a
        slice store (checked) over the same columns at the grain, holding one group,
        its slices those whose first row's ts is kept, every held slice whole but the
        last, which holds the last numbered row."""
        C, G, grain = len(self.columns), len(self.group_keys), self.grain
        assert len(self.integer) == C, "columns and their kinds differ"
        assert self.groups == {key: g for g, key in enumerate(self.group_keys)}, "group codes differ from the keys"
        assert len(self.group_states) == G, "a group without its state"
        assert all(n % grain == 0 and m % grain == 0 for n, m in self.readers.values()), "a grain not dividing a window"
        for ts, arrival, group, fv, iv in self.pending:
            k = len(ts)
            assert len(arrival) == len(group) == k and fv.shape == iv.shape == (k, C), "pending columns differ"
            assert not k or (int(group.min()) >= 0 and int(group.max()) < G), "a pending row of no group"
        assert self.taken == self.rows_held + sum(state.done for state in self.group_states), "rows lost or doubled"
        for state in self.group_states:
            store = state.store
            store._check()
            assert store.columns == self.columns and store.grid == grain, "a group's store over other columns"
            assert len(store.group_keys) <= 1, "a group's store holding other groups"
            assert state.done >= 0 and state.flushed <= state.done, "a group numbered more than it took"
            assert set(store.nums.tolist()) == set(state.first_ts), "kept first ts differ from the held slices"
            if not store.empty:
                last = (state.done - 1) // grain + 1
                assert store.last_slice == last, "the last held slice does not hold the last row"
                rows = store.rows[: store.slices_kept, 0]
                assert (rows[:-1] == grain).all(), "a held slice missing rows"
                assert rows[-1] == state.done - (last - 1) * grain, "the last slice's rows differ from those numbered"

    def state(self) -> dict[str, Any]:
        """The store as plain data (see :meth:`SliceStore.state`); the rows not final
        yet as one set of columns."""
        C = len(self.columns)
        if self.pending:
            ts, seq, grp, fv, iv = (np.concatenate(parts) for parts in zip(*self.pending, strict=True))
        else:
            ts, seq, grp = np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64)
            fv, iv = np.zeros((0, C)), np.zeros((0, C), np.int64)
        return {
            "group_by": list(self.group_by),
            "columns": list(self.columns),
            "integer": list(self.integer),
            "grain": self.grain,
            "readers": {name: [n, m] for name, (n, m) in self.readers.items()},
            "group_keys": [[plain(v) for v in key] for key in self.group_keys],
            "groups": [
                {
                    "store": g.store.state(),
                    "done": g.done,
                    "first_slices": list(g.first_ts),
                    "first_ts": list(g.first_ts.values()),
                    "last_ts": g.last_ts,
                    "flushed": g.flushed,
                }
                for g in self.group_states
            ],
            "taken": self.taken,
            "pending": {"ts": ts, "arrival": seq, "group": grp, "fvals": fv, "ivals": iv},
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> CountStore:
        store = cls(tuple(state["group_by"]))
        store.columns = list(state["columns"])
        store.integer = [bool(i) for i in state["integer"]]
        store.grain = int(state["grain"])
        store.readers = {name: (int(n), int(m)) for name, (n, m) in state["readers"].items()}
        store.group_keys = [tuple(key) for key in state["group_keys"]]
        store.groups = {key: g for g, key in enumerate(store.group_keys)}
        for g in state["groups"]:
            first = dict(zip((int(j) for j in g["first_slices"]), map(float, g["first_ts"]), strict=True))
            group = _Group(SliceStore.from_state(g["store"]), int(g["done"]), first, float(g["last_ts"]))
            group.flushed = int(g["flushed"])
            store.group_states.append(group)
        store.taken = int(state["taken"])
        p = state["pending"]
        C = len(store.columns)
        ts = np.asarray(p["ts"], np.float64).reshape(-1)
        if len(ts):
            store.pending = [
                (
                    ts,
                    np.asarray(p["arrival"], np.int64).reshape(-1),
                    np.asarray(p["group"], np.int64).reshape(-1),
                    np.asarray(p["fvals"], np.float64).reshape(len(ts), C),
                    np.asarray(p["ivals"], np.int64).reshape(len(ts), C),
                )
            ]
        return store


def _group0(folded: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per window the partials of the store's one group (a count store's group has a
    :class:`SliceStore` of its own)."""
    rows, fpart, ipart = folded
    return rows[:, 0], fpart[:, 0], ipart[:, 0]


def count_windows(
    stores: dict[tuple, CountStore], mark: Fraction | None, finish: Callable[[str, CountStore, list[Window]], Any]
) -> list[Any]:
    """Emit every count store's complete windows; ``finish`` makes a reader's rows."""
    out = []
    for store in stores.values():
        for name, windows in store.emit(mark).items():
            if windows:
                out.append(finish(name, store, windows))
    return out


def add_count_query(stores: dict[tuple, CountStore], catalog: Catalog, aq: AggregateQuery, fid: str) -> tuple:
    """Register a ``[ROWS n SLIDE m]`` query on filter ``fid``: into a store of its
    (stream, filter, GROUP BY) that has taken no row yet, else a new one; its key."""
    base = (aq.stream.lower(), fid, aq.group_by)
    key = next((k for k, s in stores.items() if k[:3] == base and s.taken == 0), None)
    if key is None:
        key = (*base, "rows", 1 + max((k[4] for k in stores if k[:3] == base), default=0))
        stores[key] = CountStore(aq.group_by)
    columns = list(dict.fromkeys(c.column for c in aq.calls if c.column is not None))
    schema = catalog.get(aq.stream)
    integer = [schema.lookup(c)[1] is ColumnType.INTEGER for c in columns]  # type: ignore[union-attr,index]
    assert aq.window.size is not None
    stores[key].add_reader(aq.name, int(aq.window.size), int(aq.window.slide), columns, integer)
    return key
