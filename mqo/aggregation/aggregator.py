"""The shared slicing aggregator: many windowed aggregate queries over one set of slices.

Sharing, from the outside in:

* **filters**: every distinct WHERE (as normalized) is one single-stream match query
  of a private :class:`~mqo.pipeline.Pipeline`; its attribute predicates live in the
  shared covering lists and one pass of the batch kernels decides, per tuple, every
  filter it satisfies (residuals and OR through the engine, as for matches). Queries
  with the same WHERE share the filter.
* **slice stores**: per (stream, filter, GROUP BY columns) one
  :class:`~mqo.aggregation.slices.SliceStore` holds per slice and group one partial per
  value column (count, compensated sum, min, max, Welford mean/M2, exact int sums):
  every query over that filter and grouping, whatever its RANGE, SLIDE and
  aggregates, reads them.
* **windows** are folds of their slices (:func:`indexes.slice_kernels.fold_windows`: all of a
  query's closed windows in one call, prefix/suffix folds per block of slices), emitted
  once the watermark has passed their end: no tuple that could still be accepted (not
  late) can fall in them. ``flush`` emits every window holding data (end of input).

Registration while running: a query registered when the newest timestamp is ``R``
reports the windows that start at or after ``R`` (they hold only tuples that arrive
after it); one registered before any tuple reports every window. Removal: nothing
more is reported; stores no query reads are dropped.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from operator import itemgetter
from typing import Any

import numpy as np

from indexes.stored import StoredTuple
from mqo.aggregation.columns import BatchColumns, FilterRows, value_columns
from mqo.aggregation.counts import CountStore, Window, add_count_query, count_windows
from mqo.aggregation.finals import finals
from mqo.aggregation.having import Column, having_verdicts
from mqo.aggregation.relations import ChunkShape, Relation, relation_of
from mqo.aggregation.results import AggregateBatch, AggregateChunk, AggregateValues, holds, output_value
from mqo.aggregation.slices import SliceStore, scaled, window_bounds, windows_with_data
from mqo.config import MatcherConfig
from mqo.pipeline import Pipeline
from mqo.plan_compile import compile_plan
from mqo.prepare import ENGINE, SINGLE, PreparedBatch
from mqo.registry import QueryRegistry
from predicates import Catalog, ColumnType, QueryError
from predicates.aggregate import AggregateQuery, filter_text
from predicates.ast import Aggregate, ColumnRef, Condition
from predicates.numbers import decimal_of

LANDMARK_STEP = 2**20  # landmark windows one emission reports per query, at most
MANY_GROUPS = 256  # past this many groups in a store, windows are folded a run at a time (Aggregator._chunk)
MAX_RUNS = 64  # runs of windows per query and emission, at most


def _gcd(a: Fraction, b: Fraction) -> Fraction:
    return Fraction(math.gcd(a.numerator * b.denominator, b.numerator * a.denominator), a.denominator * b.denominator)


@dataclass
class RegisteredAggregate:
    query: AggregateQuery
    store_key: tuple
    since: Fraction | None  # the newest timestamp at registration (None: before any)
    next_k: int | None = None  # the next window to emit ends at next_k * slide
    relation: Relation | None = None  # ISTREAM/DSTREAM: the relation at the last window (mqo.aggregation.relations)
    # (next_k, the end of window next_k, that end as a double): an emission asks it of every query
    _next_end: tuple[int, Fraction, float] | None = field(default=None, repr=False, compare=False)
    _first: tuple[int, int] | None = field(default=None, repr=False, compare=False)  # (next_k, first_slice)

    @property
    def slide(self) -> Fraction:
        return self.query.window.slide

    def next_open(self, threshold: Fraction, threshold_double: float) -> bool:
        """Whether window ``next_k`` (not None) ends at or after ``threshold`` (it is not
        closed yet). The doubles decide where they differ (a correctly rounded double keeps the
        order of what it rounds), the exact ends where they meet."""
        assert self.next_k is not None
        cached = self._next_end
        if cached is None or cached[0] != self.next_k:
            end = self.next_k * self.slide
            cached = self._next_end = (self.next_k, end, float(end))
        return threshold_double < cached[2] or threshold <= cached[1]

    @property
    def size(self) -> Fraction | None:
        return self.query.window.size

    def first_slice(self, grid: Fraction) -> int:
        """The first slice (of its store's ``grid``) window ``next_k`` holds (``next_k``
        and ``size`` not None)."""
        assert self.next_k is not None and self.size is not None
        if self._first is None or self._first[0] != self.next_k:
            self._first = (self.next_k, int((self.next_k * self.slide - self.size) / grid) + 1)
        return self._first[1]


class Aggregator:
    def __init__(self, catalog: Catalog, config: MatcherConfig) -> None:
        self.catalog = catalog
        self.queries: dict[str, RegisteredAggregate] = {}
        self.stores: dict[tuple, SliceStore] = {}
        self.count_stores: dict[tuple, CountStore] = {}  # [ROWS n SLIDE m] (mqo.aggregation.counts)
        self.filters: dict[tuple, str] = {}  # filter key -> filter query id
        self.filter_users: dict[str, set[str]] = {}
        self.filter_texts: dict[str, str] = {}
        self.filters_made = 0
        self.arrived = 0  # arrival numbers given so far (count windows order ties by them)
        self._config = config.with_changes(order="AJW", store="candidates", allowed_lateness=0.0)
        self._registry = QueryRegistry(catalog, config.max_disjuncts)
        self._pipeline = Pipeline(self._config)
        self._version = 0
        self._stale = True
        self._changes = 0  # registrations and removals so far (what _firsts_needed keeps depends on them)
        # what _firsts_needed found, and each store with the first slice it must keep
        self._needed: tuple[Any, dict[tuple, int | None], list[tuple[SliceStore, int]]] | None = None

    def __len__(self) -> int:
        return len(self.queries)

    # ------------------------------------------------------------ registration

    def register(self, queries: list[AggregateQuery], newest: float) -> None:
        since = None if newest == -math.inf else decimal_of(newest)
        for aq in queries:
            if aq.window.kind == "unbounded" and since is not None:
                raise QueryError(
                    f"query {aq.name}: a landmark window [RANGE UNBOUNDED] must be registered before the first tuple",
                    None,
                    None,
                )
        self._changes += 1
        for aq in queries:
            self._add(aq, since)
        self._stale = True
        if self._config.check:
            self._check()

    def _add(self, aq: AggregateQuery, since: Fraction | None) -> None:
        key = aq.filter_key
        fid = self.filters.get(key)
        if fid is None:
            fid = f"f{self.filters_made}_{aq.name}"  # numbered for good: a removed one's number is not reused
            self.filters_made += 1
            compiled = self._registry.compile_one(filter_text(aq)).renamed(fid)
            self._registry.add([compiled], -math.inf)
            self.filters[key] = fid
            self.filter_texts[fid] = filter_text(aq)
        self.filter_users.setdefault(fid, set()).add(aq.name)
        window = aq.window
        if window.kind == "rows":
            self.queries[aq.name] = RegisteredAggregate(
                aq, add_count_query(self.count_stores, self.catalog, aq, fid), since, None, relation_of(aq.stream_op)
            )
            return
        grid = window.slide if window.size is None else _gcd(window.size, window.slide)
        columns = list(dict.fromkeys(c.column for c in aq.calls if c.column is not None))
        integer = [self.catalog.get(aq.stream).lookup(c)[1] is ColumnType.INTEGER for c in columns]  # type: ignore[union-attr,index]
        base = (aq.stream.lower(), fid, aq.group_by)
        store_key = None
        if window.kind != "unbounded":
            for k, store in self.stores.items():
                if k[:3] == base and not store.landmark and (grid / store.grid).denominator == 1:
                    store_key = k
                    break
        if store_key is None:
            store_key = (*base, grid, aq.name if window.kind == "unbounded" else "")
            self.stores[store_key] = SliceStore([], [], grid)
            self.stores[store_key].landmark = window.kind == "unbounded"
        self.stores[store_key].add_columns(columns, integer)
        reg = RegisteredAggregate(aq, store_key, since, None, relation_of(aq.stream_op))
        if since is not None and window.size is not None:
            reg.next_k = math.ceil((since + window.size) / window.slide)
        self.queries[aq.name] = reg

    def unregister(self, name: str) -> None:
        reg = self.queries.pop(name)
        self._changes += 1
        key = reg.query.filter_key
        fid = self.filters[key]
        users = self.filter_users[fid]
        users.discard(name)
        if not users:
            del self.filters[key], self.filter_users[fid], self.filter_texts[fid]
            self._registry.remove(fid)
        if not any(r.store_key == reg.store_key for r in self.queries.values()):
            self.stores.pop(reg.store_key, None)
            self.count_stores.pop(reg.store_key, None)
        elif reg.store_key in self.count_stores:
            del self.count_stores[reg.store_key].readers[name]
        self._stale = True

    def _plan(self) -> None:
        if self._stale:
            self._version += 1
            self._pipeline.attach(compile_plan(self._registry, self._version))
            self._stale = False

    # ----------------------------------------------------------------- input

    def streams(self) -> set[str]:
        return {r.query.stream.lower() for r in self.queries.values()}

    def ingest(
        self,
        stream: str,
        batch: Any,
        late_of: Callable[[np.ndarray], np.ndarray] | None = None,
        late: np.ndarray | None = None,
        arrival: np.ndarray | None = None,
    ) -> None:
        """A batch of ``stream``'s tuples into the slices, leaving out the late rows:
        ``late_of(ts)`` decides them on the matcher's clock as it is before the batch
        (as the pipeline does), or ``late`` gives them. ``arrival``: the rows' arrival
        numbers when batches arrive interleaved (from :attr:`arrived` on); else they
        arrive after every row so far, in row order."""
        if stream.lower() not in self.streams():
            return
        self._plan()
        plan = self._pipeline.plan
        assert plan is not None
        s = plan.stream_number(stream)
        prepared = self._pipeline.prepare(s, batch)
        n = len(prepared)
        if not n:
            return
        arrival = self.arrived + np.arange(n, dtype=np.int64) if arrival is None else np.asarray(arrival, np.int64)
        self.arrived = max(self.arrived, int(arrival.max()) + 1)
        keep = np.ones(n, bool) if late_of is None else ~late_of(prepared.ts)
        if late is not None:  # decided by the caller over a merged arrival order
            keep &= ~late
        filtered = self._filtered(prepared, keep)
        slots_of: dict[str, list[int]] = {}  # a filter may take more than one slot
        for q, slot in enumerate(plan.slots):
            slots_of.setdefault(slot.name, []).append(q)
        rows_of: dict[str, np.ndarray] = {}  # per filter, once however many stores read it
        shared = BatchColumns(prepared)
        for store_key, store in self.stores.items():
            if store_key[0] != stream.lower():
                continue
            if store_key[1] not in rows_of:
                rows_of[store_key[1]] = filtered.rows(slots_of.get(store_key[1], []))
            chosen = rows_of[store_key[1]]
            if len(chosen):
                self._into(store, store_key, shared, chosen)
        for store_key, count_store in self.count_stores.items():
            if store_key[0] == stream.lower():
                chosen = filtered.rows(slots_of.get(store_key[1], []))
                if len(chosen):
                    fvals, ivals = value_columns(count_store.columns, count_store.integer, prepared, chosen)
                    codes, keys = shared.groups(store_key[2])
                    count_store.take(prepared.ts[chosen], arrival[chosen], keys, codes[chosen], fvals, ivals)
        if self._config.check:
            self._check()

    def _check(self) -> None:
        """The stores' invariants (``check=True``: after every registration, ingest and emission)."""
        for store in self.stores.values():
            store._check()
        for count_store in self.count_stores.values():
            count_store._check()

    def _filtered(self, prepared: PreparedBatch, keep: np.ndarray) -> FilterRows:
        """The filters each kept row satisfies."""
        flags = np.where(keep, prepared.flags, 0)
        rows_out: list[np.ndarray] = []
        slots_out: list[np.ndarray] = []
        single = np.flatnonzero(flags & SINGLE)
        words = prepared.candidates(single) if len(single) else np.zeros((0, len(prepared.single_mask)), np.uint64)
        engine = self._pipeline.engine
        assert engine is not None
        for i in np.flatnonzero(flags & ENGINE).tolist():
            t = StoredTuple(prepared.stream, 0, prepared.row(i))
            for block in engine.process(t, self._pipeline.order, prepared.engine_cand(i)):
                hit = block.numbers()
                rows_out.append(np.full(len(hit), i, np.int64))
                slots_out.append(hit)
        pairs = (np.concatenate(rows_out), np.concatenate(slots_out)) if rows_out else (np.zeros(0, np.int64),) * 2
        return FilterRows(single, words, prepared.single_mask, pairs)

    def _into(self, store: SliceStore, store_key: tuple, shared: BatchColumns, rows: np.ndarray) -> None:
        """The batch's ``rows`` (ascending) into ``store``: one kernel call."""
        prepared = shared.prepared
        slices = shared.slices(store.grid)[rows]
        fvals, ivals = value_columns(store.columns, store.integer, prepared, rows)
        codes, keys = shared.groups(store_key[2])
        store.add(slices, codes[rows], keys, fvals, ivals, self._first_needed(store_key))

    def _first_needed(self, store_key: tuple) -> int | None:
        """The first slice a pending window of the store's queries can need (None: any,
        as long as a query has not emitted its first window)."""
        return self._firsts_needed().get(store_key)

    def _firsts_needed(self) -> dict[tuple, int | None]:
        """:meth:`_first_needed` of every store, in one pass over the queries (an
        emission asks it of each store, an ingest of the stores it feeds). It changes
        only with the queries and their ``next_k``: kept until they change (most
        emissions close no window)."""
        seen = (self._changes, id(self.stores), [reg.next_k for reg in self.queries.values()])
        if self._needed is not None and self._needed[0] == seen:
            return self._needed[1]
        firsts: dict[tuple, int | None] = {}
        for reg in self.queries.values():
            key = reg.store_key
            if key not in self.stores:
                continue
            if key in firsts and firsts[key] is None:
                continue
            if reg.next_k is None or reg.size is None:
                firsts[key] = None
                continue
            lo = reg.first_slice(self.stores[key].grid)
            first = firsts.get(key, lo)
            firsts[key] = lo if first is None else min(first, lo)
        drops: list[tuple[SliceStore, int]] = []
        for key, store in self.stores.items():
            first = firsts.get(key)
            if first is not None:
                drops.append((store, first))
        self._needed = (seen, firsts, drops)
        return firsts

    def _drop_unneeded(self) -> None:
        """Every store forgets the slices no pending window needs (a landmark's keeps all)."""
        self._firsts_needed()
        assert self._needed is not None
        for store, first in self._needed[2]:
            if not store.landmark:
                store.drop_before(first)

    # -------------------------------------------------------------- emission

    def emit(self, newest: float, lateness: Fraction, first: int = 0) -> AggregateBatch:
        """Every window that ends before ``newest - lateness`` (no tuple that is still
        accepted can fall in it). ``first``: the position of the first query (as :meth:`flush`)."""
        if newest == -math.inf:
            return AggregateBatch()
        return self._emit(decimal_of(newest) - lateness, first)

    def flush(self, first: int = 0) -> AggregateBatch:
        """End of input: every window holding data. The chunks' positions number the
        queries in registration order from ``first``: the aggregator of a deeper level
        starts after the queries of those below, so that no two queries of one matcher
        share a position (:func:`runtime.io.aggregate_writers.in_file_order` orders by it)."""
        return self._emit(None, first)

    def _emit(self, threshold: Fraction | None, first: int) -> AggregateBatch:
        out: list[AggregateChunk] = []
        filled: dict[tuple, np.ndarray] = {}  # per store, the slices holding data
        positions: dict[str, int] = {}
        threshold_double = math.inf if threshold is None else float(threshold)
        for position, reg in enumerate(self.queries.values(), start=first):
            positions[reg.query.name] = position
            # window k ends at k * SLIDE and closes once the threshold passes it: none is
            # due before window next_k (an emission every few rows mostly finds none)
            next_k = None if threshold is None or reg.relation is not None else reg.next_k
            if next_k is not None and reg.next_open(threshold, threshold_double):  # type: ignore[arg-type]
                continue
            store = self.stores.get(reg.store_key)  # None: a count query's
            if store is None or store.empty:
                if store is not None and reg.relation is not None:  # the groups present may go away
                    closed = None if threshold is None else math.ceil(threshold / reg.slide) - 1
                    gone = self._relation_step(reg, position, None, closed)
                    out += [] if gone is None else [gone]
                continue
            # in slice units (the grid divides RANGE and SLIDE): window k is slices
            # k*S - D + 1 .. k*S (D 0: a landmark, every slice up to k*S)
            S = int(reg.slide / store.grid)
            D = 0 if reg.size is None else int(reg.size / store.grid)
            top = store.last_slice
            if threshold is None:
                k_max = -(-top // S) if D == 0 else (top + D - 1) // S  # the last window holding data
            else:
                k_max = math.ceil(threshold / reg.slide) - 1
            if reg.next_k is None:
                # the first window with data; none ending at or after the threshold is
                # closed yet (a tuple within the lateness may still come before the first)
                first = -(-store.first_slice // S)
                reg.next_k = first if threshold is None else min(first, k_max + 1)
            if D:
                # no later window holds data: the windows of a gap in time are never visited
                k_to = min(k_max, (top + D - 1) // S)
                k_next = max(reg.next_k, k_max + 1)
            else:
                # every landmark window holds data: a far watermark (a heartbeat of 1e19)
                # emits them LANDMARK_STEP at a time, the rest on the next calls
                k_to = min(k_max, reg.next_k + LANDMARK_STEP - 1)
                k_next = max(reg.next_k, k_to + 1)
                if threshold is None and k_to < k_max:
                    warnings.warn(
                        f"query {reg.query.name}: its landmark window has {_many(k_max - k_to)} more ends to report"
                        f" than one call reports ({LANDMARK_STEP:,}); flush() again for the next ones",
                        stacklevel=4,
                    )
            data = filled.get(reg.store_key)
            if data is None:
                data = filled[reg.store_key] = store.data_slices()
            ks = windows_with_data(data, S, D, reg.next_k, k_to)
            reg.next_k = k_next
            chunk = self._chunk(reg, position, store, ks, S, D) if len(ks) else None
            if reg.relation is not None:
                # at the end of input every window after the data is empty (a landmark's never is)
                closed = k_next - 1 if threshold is not None or not D else None
                chunk = self._relation_step(reg, position, chunk, closed)
            if chunk is not None:
                out.append(chunk)
        self._drop_unneeded()
        finish = lambda name, cs, ws: self._count_chunk(self.queries[name], positions[name], cs, ws)  # noqa: E731
        out += [c for c in count_windows(self.count_stores, threshold, finish) if c is not None]
        if self._config.check:
            self._check()
        return AggregateBatch([out])

    def _chunk(
        self, reg: RegisteredAggregate, position: int, store: SliceStore, ks: np.ndarray, S: int, D: int
    ) -> AggregateChunk:
        """The rows of a query's closed windows ``ks`` (window ``k`` the ``D`` slices up to
        slice ``k*S``; ``D`` 0: a landmark): folded per (window, group), every aggregate
        finished over all (window, group) pairs at once, on arrays; one row per group
        holding data that passes HAVING.

        A store keeps the groups it has seen until half of them hold no data (an auction
        bid on once, long ago: ``SliceStore._forget_groups``), so with many groups the
        windows are folded a run at a time, each run over the groups holding data in its
        slices only: work in proportion to the (window, group) pairs that can hold data,
        not windows x every group."""
        runs = [ks]
        if D and len(store.group_keys) > MANY_GROUPS:
            per = max(-(-D // S), -(-len(ks) // MAX_RUNS))  # a run spans about two windows' slices
            runs = [ks[i : i + per] for i in range(0, len(ks), per)]
        found: list[tuple[np.ndarray, ...]] = []
        for run in runs:
            ends = scaled(run, S)
            groups = store.groups_in(ends, D) if len(runs) > 1 else np.arange(len(store.group_keys))
            rows, fparts, iparts = store.fold(ends, D, groups)
            w, at = np.nonzero(rows)  # by window, then group
            found.append((run[w], groups[at], rows[w, at], fparts[w, at], iparts[w, at]))
        windows, grps, n, fpart, ipart = (np.concatenate(parts) for parts in zip(*found, strict=True))
        starts, ends = window_bounds(windows, reg.slide, reg.size)
        chunk = self._finish(reg, position, store, starts, ends, grps, n, fpart, ipart)
        if reg.relation is not None:
            chunk.windows = windows  # every row is kept: the relation step reads HAVING's verdicts
        return chunk

    def _relation_step(
        self, reg: RegisteredAggregate, position: int, chunk: AggregateChunk | None, closed: int | None
    ) -> AggregateChunk | None:
        """An ISTREAM/DSTREAM query's rows from its windows' rows (``chunk``, every
        group holding data; None: no window with data closed) up to window ``closed``."""
        assert reg.relation is not None
        aq = reg.query
        shape = ChunkShape(aq.name, position, aq.group_by, [name for name, _ in aq.outputs])
        bounds = lambda ks: window_bounds(ks, reg.slide, reg.size)  # noqa: E731
        if chunk is None:
            none = np.zeros(0, np.int64)
            return reg.relation.time_windows(None, none, none.astype(bool), closed, bounds, shape)
        assert chunk.windows is not None and chunk.passed is not None
        return reg.relation.time_windows(chunk, chunk.windows, chunk.passed, closed, bounds, shape)

    def _count_chunk(
        self, reg: RegisteredAggregate, position: int, store: CountStore, windows: list[Window]
    ) -> AggregateChunk | None:
        """The rows of a query's complete count windows (batches of one group each), by window end."""
        starts, ends, n, fpart, ipart = (np.concatenate([w[k] for w in windows]) for k in (0, 1, 3, 4, 5))
        grps = np.concatenate([np.full(len(w[0]), w[2], np.int64) for w in windows])
        order = np.lexsort((grps, ends))  # stable: a group's windows keep their order
        chunk = self._finish(
            reg, position, store, starts[order], ends[order], grps[order], *(a[order] for a in (n, fpart, ipart))
        )
        if reg.relation is None:
            return chunk
        assert chunk.passed is not None
        aq = reg.query
        shape = ChunkShape(aq.name, position, aq.group_by, [name for name, _ in aq.outputs])
        return reg.relation.count_windows(chunk, chunk.passed, shape)

    def _finish(
        self,
        reg: RegisteredAggregate,
        position: int,
        store: SliceStore | CountStore,
        starts: np.ndarray,
        ends: np.ndarray,
        grps: np.ndarray,
        n: np.ndarray,
        fpart: np.ndarray,
        ipart: np.ndarray,
    ) -> AggregateChunk:
        """Rows (window bounds, group code, folded partials) finished: aggregates,
        HAVING, outputs. An ISTREAM/DSTREAM query's chunk keeps the rows HAVING fails,
        marked in ``passed`` (its relation step needs them)."""
        aq = reg.query
        arrays: dict[tuple[str, str | None], Column] = {}
        for call in aq.calls:
            if call.column is None:
                arrays[(call.func, None)] = (np.asarray(n, np.int64), np.zeros(len(n), bool))
                continue
            c = store.columns.index(call.column)
            what = f"query {aq.name}: {call.func}({aq.alias}.{call.column})"
            arrays[(call.func, call.column)] = finals(call.func, store.integer[c], fpart[:, c], ipart[:, c], what)
        keys = store.group_keys
        names = [name for name, _ in aq.outputs]
        verdicts = np.ones(len(grps), bool)
        if aq.having is not None:
            having = aq.having

            def scalar(cond: Condition, rows: np.ndarray) -> np.ndarray:
                """The exact row path on the rows the columns leave undecided."""
                values = {key: _as_list(column, rows) for key, column in arrays.items()}
                codes = grps[rows].tolist()
                return np.array(
                    [
                        holds(cond, {key: v[r] for key, v in values.items()}, _group(aq.group_by, keys[grp]))
                        for r, grp in enumerate(codes)
                    ],
                    bool,
                )

            verdicts = having_verdicts(having, arrays, scalar, len(grps))
        if reg.relation is None and not verdicts.all():
            # only the rows that pass are shown
            pick = np.flatnonzero(verdicts)
            starts, ends, grps, verdicts = starts[pick], ends[pick], grps[pick], verdicts[pick]
        else:
            pick = np.arange(len(grps))
        # the chunk's own groups only (a store keeps groups that hold no data in these windows)
        used, codes = np.unique(grps, return_inverse=True)
        shown = [keys[g] for g in used.tolist()] if len(used) < 2 else list(itemgetter(*used.tolist())(keys))
        chunk = AggregateChunk(aq.name, position, starts, ends, aq.group_by, shown, codes.reshape(-1), names, [])
        if all(_plain(expr, aq.group_by) for _, expr in aq.outputs):
            # every output an aggregate as computed or a group column: read off the arrays
            chunk.values = [
                AggregateValues(arrays[_aggregate_key(expr)][0][pick], arrays[_aggregate_key(expr)][1][pick])
                if isinstance(expr, Aggregate)
                else chunk.group_column(aq.group_by.index(expr.name))  # type: ignore[union-attr]
                for _, expr in aq.outputs
            ]
        else:
            # output expressions: exact arithmetic row by row, on the rows shown
            columns = {key: _as_list(column, pick) for key, column in arrays.items()}
            value_columns: list[list[Any]] = [[] for _ in names]
            for r, grp in enumerate(grps.tolist()):
                values = {key: column[r] for key, column in columns.items()}
                group = _group(aq.group_by, keys[grp])
                for k, (_, expr) in enumerate(aq.outputs):
                    value_columns[k].append(output_value(expr, values, group))
            chunk.values = [AggregateValues.of(column) for column in value_columns]
        if reg.relation is not None:
            chunk.passed = verdicts
        return chunk

    # --------------------------------------------------------------- explain


def _many(count: int) -> str:
    """A count as a short text: 65,536, 1e+292."""
    return f"{count:,}" if count < 10**12 else f"{float(count):.3g}"


def _plain(expr: Any, group_by: tuple[str, ...]) -> bool:
    """An output read off as computed: an aggregate, or a GROUP BY column."""
    return isinstance(expr, Aggregate) or (isinstance(expr, ColumnRef) and expr.name in group_by)


def _aggregate_key(expr: Any) -> tuple[str, str | None]:
    return (expr.func, None if expr.arg is None else expr.arg.name)


def _group(group_by: tuple[str, ...], key: tuple) -> dict[str, Any]:
    return dict(zip(group_by, key, strict=True))


def _as_list(column: Column, rows: np.ndarray) -> list[Any]:
    """A column's values at ``rows`` as Python values, NULL as None."""
    values, null = column
    out: list[Any] = values[rows].tolist()
    for r in np.flatnonzero(null[rows]).tolist():
        out[r] = None
    return out
