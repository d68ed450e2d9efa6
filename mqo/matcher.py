"""The public matcher: register streams and queries, push tuples, get matches.

A :class:`Matcher` is a facade over three parts: the
:class:`~mqo.registry.QueryRegistry` (which queries, compiled into a plan lazily after
registration changes, so bulk registration compiles once), the
:class:`~mqo.pipeline.Pipeline` (the one way every tuple is matched: rows, lateness,
attributes, joins and windows, store and purge) and its :class:`~mqo.clock.Clock`.
Registration is all or nothing: a text with one bad query registers none of them and
raises :class:`~predicates.QueryError` naming that query and where it is.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import math
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from mqo.aggregation import AggregateBatch, Aggregator, aggregate_piece, looks_aggregate
from mqo.aggregation.persist import aggregate_snapshot, restore_aggregator
from mqo.batch import MatchBatch, value_types
from mqo.clock import Clock
from mqo.config import ORDERS, MatcherConfig, parse_order
from mqo.engine import ResultBlock
from mqo.explain import explain_text
from mqo.pipeline import Pipeline
from mqo.plan import CompiledPlan
from mqo.plan_compile import compile_plan
from mqo.plan_update import check_plan, update_plan
from mqo.prepare import PreparedBatch
from mqo.registry import QueryRegistry
from mqo.reorder import AdaptivePolicy
from mqo.results import LateTuple, Match, TupleError
from mqo.state import WindowState
from mqo.stats import Counters
from mqo.table import RowQuery, table_queries
from predicates import Catalog, NormalizedQuery, QueryError, compile_queries
from predicates.aggregate import AggregateQuery
from predicates.errors import did_you_mean
from predicates.frontend import column_order
from predicates.numbers import to_float
from predicates.records import CompiledQuery
from predicates.templates import split_query_texts

__all__ = ["ORDERS", "Matcher", "MatcherConfig", "NeverMatchesWarning", "parse_order"]

SNAPSHOT_FORMAT = 6  # 5: per-stream clocks; 6: held results of emit='ordered'
READABLE_FORMATS = (5, 6)


class NeverMatchesWarning(UserWarning):
    """A registered query whose condition can never hold."""


class Matcher:
    """Shared matching of many continuous queries over a few streams.

    ``schema`` is DDL text or a :class:`~predicates.Catalog` (streams can also be added
    later with :meth:`register_streams`). The settings are those of
    :class:`~mqo.config.MatcherConfig`, given as keywords or as ``config``;
    ``late_sink`` receives every late tuple; ``now`` is the processing-time source the
    ``idle_timeout`` is measured with (seconds, monotonic; injectable for tests).
    """

    def __init__(
        self,
        schema: str | Catalog | None = None,
        *,
        config: MatcherConfig | None = None,
        late_sink: Callable[[LateTuple], None] | None = None,
        now: Callable[[], float] = time.monotonic,
        **settings: Any,
    ) -> None:
        self.config = config.with_changes(**settings) if config is not None else MatcherConfig(**settings)
        self.catalog = schema if isinstance(schema, Catalog) else Catalog()
        if isinstance(schema, str):
            self.catalog.register_ddl(schema)
        self.registry = QueryRegistry(self.catalog, self.config.max_disjuncts)
        self.pipeline = Pipeline(self.config, late_sink, now)
        self._plan: CompiledPlan | None = None
        self._previous_plan: CompiledPlan | None = None  # kept while registrations change
        self._plan_version = 0
        self._next_position = 1
        self._frozen = False  # shares its queries with another matcher (restore(like=))
        # windowed aggregate queries (mqo/aggregation): made on the first one
        self.aggregator: Aggregator | None = None
        self._aggregates = AggregateBatch()  # emitted, not yet taken (poll_aggregates)

    # ------------------------------------------------------------- settings

    @property
    def clock(self) -> Clock:
        return self.pipeline.clock

    @property
    def counters(self) -> Counters:
        return self.pipeline.counters

    @property
    def late_tuples(self) -> deque[LateTuple]:
        return self.pipeline.late_tuples

    @property
    def late_sink(self) -> Callable[[LateTuple], None] | None:
        return self.pipeline.late_sink

    @late_sink.setter
    def late_sink(self, sink: Callable[[LateTuple], None] | None) -> None:
        self.pipeline.late_sink = sink

    @property
    def policy(self) -> AdaptivePolicy | None:
        """The adaptive order's statistics (None under a static order)."""
        return self.pipeline.policy

    @property
    def order_name(self) -> str:
        return self.config.order

    @property
    def allowed_lateness(self) -> float:
        return self.config.allowed_lateness

    @property
    def max_disjuncts(self) -> int:
        return self.config.max_disjuncts

    @property
    def store(self) -> str:
        return self.config.store

    # ------------------------------------------------------------ registration

    def register_streams(self, ddl: str, source_name: str = "<schema>") -> list[str]:
        """Declare streams from DDL; returns their names."""
        if len(self.registry):
            raise QueryError("streams must be declared before queries are registered", None, None)
        if self.pipeline.seq:
            raise QueryError("streams must be declared before tuples are pushed", None, None)
        schemas = self.catalog.register_ddl(ddl, source_name)
        self._plan = self._previous_plan = None
        self.pipeline.state = None  # made anew, with the new streams, on the next compile
        self.pipeline.rows = []
        return [s.name for s in schemas]

    def compile(self, text: str, source_name: str = "<query>") -> list[NormalizedQuery]:
        """Parse, check and normalize query text without registering it."""
        return self._front_end(text, source_name, taken=self.registry.queries.keys())

    def _front_end(self, text: str, source_name: str, **options: Any) -> list[NormalizedQuery]:
        options.setdefault("first_position", self._next_position)
        return compile_queries(
            text, self.catalog, source_name=source_name, max_disjuncts=self.config.max_disjuncts, **options
        )

    def register_query(self, text: str, query_id: str | None = None, source_name: str = "<query>") -> str:
        """Register one query; returns its id (``query_id``, else its ``Query ID:``, else its position)."""
        compiled = self._compile_texts([text], source_name)
        if len(compiled) != 1:
            raise QueryError(f"expected one query, found {len(compiled)}; use register_queries", None, None)
        query = compiled[0] if query_id is None else _renamed(compiled[0], str(query_id))
        self._check_names([query], [text], source_name)
        self._add([query])
        return query.name

    def register_queries(self, texts: str | Iterable[str], source_name: str = "<queries>") -> list[str]:
        """Register many queries at once (a file's text, or a list of query texts).

        All or nothing; returns the ids in order.
        """
        sources = [texts] if isinstance(texts, str) else list(texts)
        # Compiling allocates many small objects and no reference cycles; the cyclic
        # collector would otherwise scan the growing registry again and again (half the
        # time of a million registrations).
        collecting = gc.isenabled()
        gc.disable()
        try:
            instances = self._compile_texts(sources, source_name)
            self._check_names(instances, sources, source_name)
            self._add(instances)
        finally:
            if collecting:
                gc.enable()
        return [inst.name for inst in instances]

    def register_table(
        self, template: str, table: Any, id_column: str | None = None, source_name: str = "<table>"
    ) -> list[str]:
        """Register one query per row of ``table`` (a pandas DataFrame, an Arrow table or
        a mapping of columns): ``template`` is a query text whose ``:name`` parameters
        take the row's value of column ``name`` (meaning the number as it prints). Ids
        come from ``id_column``, else positions. All or nothing; returns the ids."""
        if looks_aggregate(template):
            raise QueryError("register_table takes match queries (an aggregate query is registered as text)")
        compile_one = self.registry.compiler.compile

        def compile_text(text: str, row: int) -> CompiledQuery:
            return compile_one(text, self._next_position + row, f"{source_name}[row {row}]")

        collecting = gc.isenabled()
        gc.disable()
        try:
            names, instances = table_queries(
                template, table, id_column, source_name, self.registry, self._next_position, compile_text
            )
            self._add(instances)
        finally:
            if collecting:
                gc.enable()
        return names

    def _compile_texts(self, sources: list[str], source_name: str) -> list[CompiledQuery | AggregateQuery]:
        instances: list[CompiledQuery | AggregateQuery] = []
        compile_one = self.registry.compiler.compile
        order = column_order(self.catalog)  # (the catalog does not change meanwhile)
        for k, text in enumerate(sources):
            name = source_name if len(sources) == 1 else f"{source_name}[{k}]"
            try:
                for piece in split_query_texts(text):
                    position = self._next_position + len(instances)
                    try:
                        aggregate = (
                            aggregate_piece(piece, self.catalog, position, name, order, self.config.max_disjuncts)
                            if looks_aggregate(piece)
                            else None
                        )
                    except QueryError as err:
                        raise _AggregateError(err) from None
                    instances.append(aggregate if aggregate is not None else compile_one(piece, position, name))
            except _AggregateError as wrapped:
                raise wrapped.error from None
            except QueryError as err:
                # Report the error where it is in the whole text, not in the piece.
                self._front_end(text, name, first_position=self._next_position + len(instances))
                raise err from None
        return instances

    def _check_names(
        self, instances: list[CompiledQuery | AggregateQuery], sources: list[str], source_name: str
    ) -> None:
        seen: set[str] = set()
        registered = self.registry.queries
        aggregates = self.aggregator.queries if self.aggregator is not None else {}
        for inst in instances:
            if inst.name in aggregates:
                raise QueryError(f"query id {inst.name} is already registered", None, None)
            if inst.name in registered or inst.name in seen:
                # the front end names the duplicate with its position
                for k, text in enumerate(sources):
                    name = source_name if len(sources) == 1 else f"{source_name}[{k}]"
                    self._front_end(text, name, first_position=1, taken=registered.keys())
                where = "is already registered" if inst.name in registered else "is given twice"
                raise QueryError(f"query id {inst.name} {where}", None, None)
            seen.add(inst.name)

    def _check_not_frozen(self) -> None:
        if self._frozen:
            raise QueryError(
                "this matcher shares its queries with another (Matcher.restore(..., like=...)); "
                "register or unregister queries on a matcher of its own",
                None,
                None,
            )

    def unregister_query(self, query_id: str) -> None:
        """Remove a query; it reports nothing more."""
        self._check_not_frozen()
        if self.aggregator is not None and query_id in self.aggregator.queries:
            self.aggregator.unregister(query_id)
            return
        if query_id not in self.registry:
            raise KeyError(f"no query with id {query_id!r} is registered")
        self.registry.remove(query_id)
        self._plan = None

    def _add(self, instances: list[CompiledQuery | AggregateQuery], since_ts: Any = None) -> None:
        self._check_not_frozen()
        aggregates = [q for q in instances if isinstance(q, AggregateQuery)]
        if aggregates:
            if self.aggregator is None:
                self.aggregator = Aggregator(self.catalog, self.config)
            self.aggregator.register(aggregates, max(self.clock.newest, default=-math.inf))
            self._next_position += len(aggregates)
            instances = [q for q in instances if not isinstance(q, AggregateQuery)]
            if not instances:
                return
        # (a table row's query always has its one disjunct: not made here just to look)
        never = [q.name for q in instances if type(q) is not RowQuery and not q.disjuncts]
        if never:
            shown = ", ".join(never[:5]) + (f" and {len(never) - 5} more" if len(never) > 5 else "")
            warnings.warn(
                f"query {shown} can never match: its condition is always false "
                "(a contradiction, or a division by zero, whose value is NULL)",
                NeverMatchesWarning,
                stacklevel=3,
            )
        self.registry.add(instances, self.clock.horizon if since_ts is None else since_ts)
        self._next_position += len(instances)
        self._plan = None

    @property
    def query_ids(self) -> list[str]:
        aggregates = list(self.aggregator.queries) if self.aggregator is not None else []
        return list(self.registry.queries) + aggregates

    # ------------------------------------------------------------------- plan

    @property
    def plan(self) -> CompiledPlan:
        """The compiled plan for the current registrations (compiled on demand)."""
        if self._plan is None:
            self._plan_version += 1
            previous, registry = self._previous_plan, self.registry
            # registration changes update the previous plan (mqo.plan_update) rather
            # than recompile every list; past a limit of changes, compile it whole
            plan = update_plan(previous, registry, self._plan_version) if previous is not None else None
            if plan is None:
                plan = compile_plan(registry, self._plan_version)
                registry.forget_removals(plan.removal_mark)
            if self.config.check:
                registry._check()
                check_plan(plan, registry)
            self.pipeline.attach(plan)
            self._plan = self._previous_plan = plan
        return self._plan

    def _compiled_whole(self) -> CompiledPlan:
        """The plan, compiled whole if it is an updated one (list numbers are then
        those of a fresh compile: what ``explain`` shows and snapshots record)."""
        # (with no plan yet, ``self.plan`` alone could update the previous plan; right
        # after a registration change the plan is not made yet and would be an updated one)
        if not self._frozen and (self._plan is None or self._plan.base_plan is not None):
            self._plan = self._previous_plan = None
        return self.plan

    @property
    def state(self) -> WindowState:
        """The stored tuples (after the plan is compiled)."""
        self.plan  # noqa: B018 - compiles the plan and creates the state
        assert self.pipeline.state is not None
        return self.pipeline.state

    def explain(self) -> str:
        """Predicate lists in covering order, who uses what, each query's bits, and the
        evaluation order with the statistics behind it."""
        plan = self._compiled_whole()
        policy = self.pipeline.policy
        if policy is None:
            order = f"static {''.join(k.name[0] for k in self.pipeline.order)}"
            return explain_text(self.registry, plan, order=order) + self._explain_aggregates()
        notes = policy.describe() or ["no tuples seen yet; starting with AJW for every stream"]
        return explain_text(self.registry, plan, order="adaptive", order_note=notes) + self._explain_aggregates()

    def _explain_aggregates(self) -> str:
        if self.aggregator is None or not len(self.aggregator):
            return ""
        return "\n\n" + "\n".join(self.aggregator.explain()) + "\n"

    def value_types(self) -> dict[str, Any]:
        """Arrow types of the SELECT values over the registered queries."""
        return value_types(self.registry)

    # --------------------------------------------------------------- matching

    @property
    def watermark(self) -> float:
        """The matcher's watermark: the smallest over the active streams of their
        newest ts minus their allowed lateness (under ``time='global'``: the newest ts
        of any stream minus the lateness); a tuple older than it is late. -inf until
        every active stream has spoken."""
        self.plan  # noqa: B018 - the clock knows the streams once the plan exists
        self.clock._recompute()
        return self.clock.watermark

    def stream_watermarks(self) -> dict[str, float]:
        """Each stream's newest ts (tuples and heartbeats; -inf before any), by name."""
        self.plan  # noqa: B018
        clock = self.clock
        return dict(zip(clock.names, clock.newest, strict=True))

    @property
    def retention_horizon(self) -> float:
        """Tuples older than this may have been purged."""
        return to_float(self.clock.horizon)

    @property
    def late_count(self) -> int:
        return self.counters.late

    def _stream(self, stream: str) -> int:
        plan = self.plan
        try:
            return plan.stream_number(stream)
        except KeyError:
            raise TupleError(f"unknown stream {stream!r}" + did_you_mean(stream, plan.catalog.names())) from None

    def push(
        self, stream: str, ts: float, values: Mapping[str, Any] | None = None, id: int | None = None
    ) -> list[Match]:
        """Match one tuple against every registered query; returns the results whose
        last tuple it is (under ``emit='ordered'``: the results the watermark releases
        now, in ``ts`` order). A late tuple finds no results and goes to the late sink."""
        number = self._stream(stream)
        aggregating = self._aggregating(stream)
        late = aggregating and isinstance(ts, (int, float)) and self.clock.is_late(number, float(ts))
        blocks = self.pipeline.push(number, ts, values, id)
        if aggregating and not late:
            one = {"ts": [ts], **{name: [v] for name, v in (values or {}).items()}}
            if id is not None:
                one["id"] = [id]
            assert self.aggregator is not None
            self.aggregator.ingest(stream, one)
            self._emit_aggregates()
        return MatchBatch(self.plan, blocks).matches() if blocks else []

    # ------------------------------------------------------------ aggregates

    def _aggregating(self, stream: str) -> bool:
        return self.aggregator is not None and stream.lower() in self.aggregator.streams()

    def late_probe(self, streams: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Which of these tuples (stream numbers and ts, in arrival order) would be
        late from here, without moving the clock."""
        return copy.deepcopy(self.clock).late_mask(streams, ts)[0]

    def _emit_aggregates(self) -> None:
        """Windows ending before the matcher's watermark can get no more tuples that
        are not late: emit them (the watermark exactly, as the clock keeps it)."""
        if self.aggregator is not None:
            clock = self.clock
            clock._recompute()
            if clock.mark is not None:
                base, k = clock.mark
                self._aggregates.extend(self.aggregator.emit(base, clock._late_exact[k]))

    def poll_aggregates(self) -> AggregateBatch:
        """The aggregate rows emitted so far and not yet taken: one per (query, window,
        group), emitted by ``push``/``push_batch``/``heartbeat`` once the watermark
        passes the window's end (also those the watermark passed since, as in a run
        through :meth:`replay`, which emits nothing itself)."""
        self._emit_aggregates()
        out, self._aggregates = self._aggregates, AggregateBatch()
        return out

    def flush(self) -> AggregateBatch:
        """End of input: emit every window that holds data; returns every aggregate row
        not yet taken (as :meth:`poll_aggregates`)."""
        if self.aggregator is not None:
            self._aggregates.extend(self.aggregator.flush())
        return self.poll_aggregates()

    def push_batch(self, stream: str, batch: Any) -> MatchBatch:
        """Match a batch of one stream's tuples, in row order, as if pushed one by one.

        ``batch`` is an Arrow table or record batch, a pandas DataFrame or a dict of
        columns (``ts``, optional ``id``, the stream's columns). The attribute phase of
        all rows runs in numba kernels, single-stream results are read off the
        candidate bits of all rows at once, and only rows that multi-stream queries
        need go through the join engine. Results come back as a
        :class:`~mqo.batch.MatchBatch` (``len``, ``.to_arrow()``, ``.matches()``).
        """
        number = self._stream(stream)
        if not self._aggregating(stream):
            return self.pipeline.push_batch(number, batch)
        assert self.aggregator is not None
        # the aggregator decides lateness on the clock as it is before this batch, as the
        # pipeline does (on a copy: deciding a batch's lateness moves a clock)
        self.aggregator.ingest(stream, batch, late_of=lambda ts: self.late_probe(np.full(len(ts), number), ts))
        out = self.pipeline.push_batch(number, batch)
        self._emit_aggregates()
        return out

    def prepare(self, stream: str, batch: Any) -> PreparedBatch:
        """Decide the attribute predicates of a batch of one stream's tuples (no state
        changes besides consuming automatic ids). Feed its rows, in arrival order, to
        :meth:`push_prepared` or :meth:`replay`."""
        return self.pipeline.prepare(self._stream(stream), batch)

    def push_prepared(self, prepared: PreparedBatch, i: int) -> list[ResultBlock]:
        """Match row ``i`` of a prepared batch (rows in arrival order); result blocks."""
        self.plan  # noqa: B018 - the pipeline runs on the current plan
        return self.pipeline.push_prepared(prepared, i)

    def replay(
        self, prepared: list[PreparedBatch], which: np.ndarray, rows: np.ndarray
    ) -> Iterator[tuple[int, list[ResultBlock]]]:
        """Match prepared rows in a given arrival order: row ``rows[j]`` of batch
        ``prepared[which[j]]`` arrives j-th. Exactly like :meth:`push_prepared` on each
        row in turn, but only rows that are late or that some query wants are visited
        one by one; yields (j, result blocks) for each visited row."""
        self.plan  # noqa: B018 - the pipeline runs on the current plan
        return self.pipeline.replay(prepared, which, rows)

    def heartbeat(self, stream_or_ts: str | float, ts: float | None = None) -> list[Match]:
        """Advance event time without a tuple: ``heartbeat('B', 100)`` says stream B
        has nothing more before 100 (it holds the watermark back no further);
        ``heartbeat(100)`` says so of every stream. Quiet streams purge their state.
        Returns the results this releases (``emit='ordered'``; else none)."""
        stream: str | None = None
        if isinstance(stream_or_ts, str):
            stream = stream_or_ts
        elif ts is None:
            ts = stream_or_ts
        else:
            raise TupleError(f"heartbeat takes (ts) or (stream, ts), got ({stream_or_ts!r}, {ts!r})")
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts != ts or abs(ts) == float("inf"):
            raise TupleError(f"heartbeat ts must be a finite number, got {ts!r}")
        s = None if stream is None else self._stream(stream)
        self.plan  # noqa: B018 - make sure the state exists
        blocks = self.pipeline.heartbeat(s, float(ts))
        self._emit_aggregates()
        return MatchBatch(self.plan, blocks).matches() if blocks else []

    def set_idle(self, stream: str) -> list[Match]:
        """Declare ``stream`` idle: it stops holding the watermark back until it
        sends a tuple or a heartbeat (as after ``idle_timeout`` of silence). Returns
        the results this releases (``emit='ordered'``; else none)."""
        blocks = self.pipeline.set_idle(self._stream(stream))
        self._emit_aggregates()
        return MatchBatch(self.plan, blocks).matches() if blocks else []

    # --------------------------------------------------------- ordered emission

    def release(self) -> MatchBatch:
        """``emit='ordered'``: the held results the watermark has passed by now, in ``ts``
        order (call it when no tuple comes: a stream may have gone idle since)."""
        plan = self.plan
        blocks = self.pipeline.release()
        self._emit_aggregates()
        return MatchBatch(plan, blocks)

    def flush_results(self) -> MatchBatch:
        """End of input under ``emit='ordered'``: every held result, in ``ts`` order
        (results released by later tuples start a new ordered run)."""
        return MatchBatch(self.plan, self.pipeline.flush())

    @property
    def next_release_ts(self) -> float | None:
        """The smallest ``ts`` of a held result (None when none is held)."""
        if self.pipeline.held is None:
            return None
        self.plan  # noqa: B018 - withdraw the results of queries unregistered since
        return self.pipeline.held.first_ts

    @property
    def held_results(self) -> int:
        """How many results ``emit='ordered'`` holds (``ts`` at or after the watermark)."""
        if self.pipeline.held is None:
            return 0
        self.plan  # noqa: B018 - a query unregistered since withdraws its results when the plan changes
        return len(self.pipeline.held)

    # ------------------------------------------------------------- snapshots

    def snapshot(self, queries: bool = True) -> dict[str, Any]:
        """Everything needed to carry on elsewhere, as plain Python data: settings,
        streams, queries (text, id, registration horizon), stored tuples, clocks, the
        late tuples kept, the results ``emit='ordered'`` holds, and the adaptive
        order's statistics (so a restored matcher evaluates, and orders the results of
        a push, exactly as this one would); the aggregate queries with their slices,
        partials, count-window rows not final yet and rows not yet taken
        (:mod:`mqo.aggregation.persist`).

        With ``queries=False`` the queries are left out: restore that with ``like=`` a
        matcher that has them (a Spark worker restoring window state in every
        micro-batch does not re-register thousands of queries each time)."""
        self._compiled_whole()  # the state exists once the plan does; list numbers as restored
        data: dict[str, Any] = {
            "format": SNAPSHOT_FORMAT,
            "settings": self.config.as_dict(),
            "next_position": self._next_position,
            **self.pipeline.snapshot(),
        }
        if self.aggregator is not None:  # with its queries either way: no other matcher shares them
            data["aggregates"] = aggregate_snapshot(self.aggregator, self._aggregates)
        if queries:
            data["ddl"] = self.catalog.ddl()
            data["roles"] = list(self.registry.roles)  # self-join roles: their stream numbers
            data["queries"] = [(rq.name, rq.text, _since_text(rq.since_ts)) for rq in self.registry]
        return data

    @classmethod
    def restore(
        cls,
        snapshot: Mapping[str, Any],
        like: Matcher | None = None,
        late_sink: Callable[[LateTuple], None] | None = None,
        **overrides: Any,
    ) -> Matcher:
        """A matcher that continues exactly where ``snapshot`` was taken.

        ``like``: a matcher with the same streams and queries whose compiled plan the
        restored one shares instead of registering and compiling them again (then
        neither may register or unregister queries afterwards; they would diverge).
        """
        if snapshot.get("format") not in READABLE_FORMATS:
            raise ValueError(f"unsupported snapshot format {snapshot.get('format')!r}")
        config = MatcherConfig(**{**snapshot["settings"], **overrides})
        if like is None:
            if "queries" not in snapshot:
                raise ValueError("this snapshot has no queries (snapshot(queries=False)); restore it with like=")
            m = cls(snapshot["ddl"], config=config, late_sink=late_sink)
            m.registry.roles = list(snapshot.get("roles", ()))  # numbered as the stored tuples are
            names = [name for name, _, _ in snapshot["queries"]]
            instances = m._compile_texts([text for _, text, _ in snapshot["queries"]], "<snapshot>")
            instances = [query.renamed(name) for name, query in zip(names, instances, strict=True)]
            m._add(instances, since_ts=[_since_value(since) for _, _, since in snapshot["queries"]])
            m._plan_version += 1
            plan = m._plan = m._previous_plan = compile_plan(m.registry, m._plan_version)
        else:
            m = cls(like.catalog, config=config, late_sink=late_sink)
            m.registry = like.registry
            plan = like._compiled_whole()  # list numbers as a fresh compile's, as snapshots record
            like._frozen = m._frozen = True
            m._plan, m._plan_version = plan, like._plan_version
        m._next_position = snapshot.get("next_position", like._next_position if like is not None else 1)
        m.pipeline.load(snapshot, plan)
        if "aggregates" in snapshot:
            compile_texts = lambda texts: m._compile_texts(texts, "<snapshot>")  # noqa: E731
            m.aggregator, m._aggregates = restore_aggregator(snapshot["aggregates"], m.catalog, config, compile_texts)
        return m


class _AggregateError(Exception):
    """An aggregate query's error, already reported in full (not a match query's)."""

    def __init__(self, error: QueryError) -> None:
        self.error = error


def _renamed(query: CompiledQuery | AggregateQuery, name: str) -> CompiledQuery | AggregateQuery:
    if isinstance(query, AggregateQuery):
        return dataclasses.replace(query, name=name)
    return query.renamed(name)


def _since_text(since: float | Fraction) -> float | str:
    """A registration horizon as snapshot data (exact: a Fraction as its text)."""
    return since if isinstance(since, float) else str(since)


def _since_value(data: float | str) -> float | Fraction:
    return Fraction(data) if isinstance(data, str) else float(data)
