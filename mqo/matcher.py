"""The public matcher: register streams and queries, push tuples, get matches.

A :class:`Matcher` owns a catalog, a :class:`~mqo.registry.QueryRegistry`, the
compiled plan (rebuilt lazily after registration changes, so bulk registration
compiles once) and the window state. Registration is all or nothing: a text with one
bad query registers none of them and raises :class:`~predicates.QueryError` naming
that query.
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from indexes.stored import StoredTuple
from mqo.batch import MatchBatch, columns_of, value_types
from mqo.engine import Engine
from mqo.explain import explain_text
from mqo.plan import KIND_OF_LETTER, CompiledPlan, compile_plan
from mqo.registry import QueryRegistry
from mqo.results import LateTuple, Match, TupleError
from mqo.rows import RowBuilder
from mqo.state import WindowState, auto_bucket_width
from mqo.stats import Counters
from predicates import DEFAULT_MAX_DISJUNCTS, Catalog, Kind, NormalizedQuery, QueryError, compile_queries
from predicates.errors import did_you_mean

ORDERS = ("AJW", "AWJ", "JAW", "JWA", "WAJ", "WJA")
SNAPSHOT_FORMAT = 1
LATE_KEPT = 10_000


def query_text(nq: NormalizedQuery) -> str:
    """The source text of one query (its header included)."""
    query = nq.bound.query
    return query.source.text[query.span.start : query.span.end]


def parse_order(order: str) -> tuple[Kind, Kind, Kind]:
    """``'AJW'`` or ``'static:AJW'`` as the three predicate types in evaluation order."""
    text = order.upper()
    if text.startswith("STATIC:"):
        text = text[len("STATIC:") :]
    if text not in ORDERS:
        raise ValueError(f"unknown evaluation order {order!r}; use one of {', '.join(ORDERS)} (or static:XYZ)")
    return tuple(KIND_OF_LETTER[ch] for ch in text)  # type: ignore[return-value]


class Matcher:
    """Shared matching of many continuous queries over a few streams.

    ``schema`` is DDL text or a :class:`~predicates.Catalog` (streams can also be added
    later with :meth:`register_streams`).
    """

    def __init__(
        self,
        schema: str | Catalog | None = None,
        *,
        allowed_lateness: float = 0.0,
        order: str = "AJW",
        late_sink: Callable[[LateTuple], None] | None = None,
        bucket_width: float | None = None,
        max_disjuncts: int = DEFAULT_MAX_DISJUNCTS,
    ) -> None:
        if allowed_lateness < 0:
            raise ValueError("allowed_lateness must be >= 0")
        if bucket_width is not None and not bucket_width > 0:
            raise ValueError("bucket_width must be > 0")
        self.order = parse_order(order)
        self.order_name = order
        self.late_sink = late_sink
        self.late_tuples: deque[LateTuple] = deque(maxlen=LATE_KEPT)
        self.counters = Counters()
        self._bucket_width = bucket_width
        self._state: WindowState | None = None
        self._engine: Engine | None = None
        self._rows: list[RowBuilder] = []
        self._max_ts = float("-inf")
        self._seq = 0
        self._warned_late = False
        self.catalog = schema if isinstance(schema, Catalog) else Catalog()
        if isinstance(schema, str):
            self.catalog.register_ddl(schema)
        self.allowed_lateness = float(allowed_lateness)
        self.max_disjuncts = max_disjuncts
        self.registry = QueryRegistry(self.catalog)
        self._plan: CompiledPlan | None = None
        self._plan_version = 0
        self._next_position = 1
        self._retention_horizon = float("-inf")

    # ------------------------------------------------------------ registration

    def register_streams(self, ddl: str, source_name: str = "<schema>") -> list[str]:
        """Declare streams from DDL; returns their names."""
        if len(self.registry):
            raise QueryError("streams must be declared before queries are registered", None, None)
        if self._seq:
            raise QueryError("streams must be declared before tuples are pushed", None, None)
        schemas = self.catalog.register_ddl(ddl, source_name)
        self._plan = None
        return [s.name for s in schemas]

    def compile(self, text: str, source_name: str = "<query>", *, check_ids: bool = True) -> list[NormalizedQuery]:
        """Parse, check and normalize query text without registering it."""
        return compile_queries(
            text,
            self.catalog,
            source_name=source_name,
            first_position=self._next_position,
            taken=self.registry.queries.keys() if check_ids else (),
            max_disjuncts=self.max_disjuncts,
        )

    def register_query(self, text: str, query_id: str | None = None, source_name: str = "<query>") -> str:
        """Register one query; returns its id (``query_id``, else its ``Query ID:``, else its position)."""
        queries = self.compile(text, source_name, check_ids=query_id is None)
        if len(queries) != 1:
            raise QueryError(f"expected one query, found {len(queries)}; use register_queries", None, None)
        if query_id is not None:
            queries = [self._renamed(queries[0], str(query_id))]
        self._add(queries)
        return queries[0].name

    def register_queries(self, texts: str | Iterable[str], source_name: str = "<queries>") -> list[str]:
        """Register many queries at once (a file's text, or a list of query texts).

        All or nothing; returns the ids in order.
        """
        if isinstance(texts, str):
            queries = self.compile(texts, source_name)
        else:
            queries = []
            taken = set(self.registry.queries)
            for i, text in enumerate(texts):
                batch = compile_queries(
                    text,
                    self.catalog,
                    source_name=f"{source_name}[{i}]",
                    first_position=self._next_position + len(queries),
                    taken=taken,
                    max_disjuncts=self.max_disjuncts,
                )
                for q in batch:
                    taken.add(q.name)
                queries.extend(batch)
        self._add(queries)
        return [q.name for q in queries]

    def unregister_query(self, query_id: str) -> None:
        """Remove a query; it reports nothing more."""
        if query_id not in self.registry:
            raise KeyError(f"no query with id {query_id!r} is registered")
        self.registry.remove(query_id)
        self._plan = None

    def _renamed(self, nq: NormalizedQuery, name: str) -> NormalizedQuery:
        if name in self.registry:
            raise QueryError(f"query id {name} is already registered", None, None)
        return replace(nq, bound=replace(nq.bound, name=name))

    def _add(self, queries: list[NormalizedQuery], since_ts: float | None = None) -> None:
        since = self._retention_horizon if since_ts is None else since_ts
        self.registry.add(queries, since, [query_text(q) for q in queries])
        self._next_position += len(queries)
        self._plan = None

    @property
    def query_ids(self) -> list[str]:
        return list(self.registry.queries)

    # ------------------------------------------------------------------- plan

    @property
    def plan(self) -> CompiledPlan:
        """The compiled plan for the current registrations (compiled on demand)."""
        if self._plan is None:
            self._plan_version += 1
            plan = compile_plan(self.registry, self._plan_version)
            width = self._bucket_width or auto_bucket_width(plan.retention_window, self.allowed_lateness)
            if self._state is None:
                self._state = WindowState(len(plan.streams), width)
                self._rows = [RowBuilder(schema) for schema in plan.streams]
            self._state.configure(plan.indexed_positions, width)
            self._engine = Engine(plan, self._state, self.counters)
            self._plan = plan
        return self._plan

    @property
    def state(self) -> WindowState:
        """The stored tuples (after the plan is compiled)."""
        self.plan  # noqa: B018 - compiles the plan and creates the state
        assert self._state is not None
        return self._state

    # --------------------------------------------------------------- matching

    @property
    def watermark(self) -> float:
        """The largest timestamp seen (tuples and heartbeats); -inf before any."""
        return self._max_ts

    @property
    def retention_horizon(self) -> float:
        """Tuples older than this may have been purged."""
        return self._retention_horizon

    @property
    def late_count(self) -> int:
        return self.counters.late

    def push(
        self, stream: str, ts: float, values: Mapping[str, Any] | None = None, id: int | None = None
    ) -> list[Match]:
        """Match one tuple against every registered query; returns the results whose
        last tuple it is. A late tuple returns no results and goes to the late sink."""
        plan = self.plan
        try:
            s = plan.stream_number(stream)
        except KeyError:
            raise TupleError(f"unknown stream {stream!r}" + did_you_mean(stream, plan.catalog.names())) from None
        row = self._rows[s].build(ts, values, id)
        self.counters.tuples += 1
        if row[0] < self._max_ts - self.allowed_lateness:
            self._late(plan, s, row)
            return []
        t = StoredTuple(s, self._seq, row)
        self._seq += 1
        assert self._engine is not None and self._state is not None
        results = self._engine.process(t, self.order)
        self._state.insert(t)
        self._advance(row[0])
        return results

    def push_batch(self, stream: str, batch: Any) -> MatchBatch:
        """Match a batch of tuples of one stream, in row order, as if pushed one by one.

        ``batch`` is an Arrow table or record batch, a pandas DataFrame or a dict of
        columns (``ts``, optional ``id``, the stream's columns). Results come back as a
        :class:`~mqo.batch.MatchBatch` (arrays; ``.to_arrow()``, ``.matches()``).
        """
        plan = self.plan
        try:
            schema = plan.streams[plan.stream_number(stream)]
        except KeyError:
            raise TupleError(f"unknown stream {stream!r}" + did_you_mean(stream, plan.catalog.names())) from None
        ts, ids, columns = columns_of(batch, schema)
        names = list(columns)
        found: list[Match] = []
        push = self.push
        for i in range(len(ts)):
            values = {name: columns[name][i] for name in names}
            found.extend(push(schema.name, ts[i].item(), values, None if ids is None else ids[i].item()))
        return self._as_batch(found)

    def _as_batch(self, found: list[Match]) -> MatchBatch:
        plan = self.plan
        streams = [s.name for s in plan.streams]
        names = list(self.registry.queries)
        number = {name: i for i, name in enumerate(names)}
        aliases = [{stream: alias for alias, stream in rq.normalized.aliases} for rq in self.registry.queries.values()]
        n = len(found)
        query = np.fromiter((number[m.query] for m in found), np.int32, n)
        ts = np.fromiter((m.ts for m in found), np.float64, n)
        ids = {s: np.full(n, -1, np.int64) for s in streams}
        for i, m in enumerate(found):
            stream_of = {alias: stream for stream, alias in aliases[query[i]].items()}
            for alias, ident in m.ids.items():
                ids[stream_of[alias]][i] = ident
        return MatchBatch(names, aliases, query, ts, ids, [m.values for m in found], value_types(self.registry))

    def value_types(self) -> dict[str, Any]:
        """Arrow types of the SELECT values over the registered queries."""
        return value_types(self.registry)

    def heartbeat(self, ts: float) -> None:
        """Advance time without a tuple, so quiet streams still purge their state."""
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts != ts:
            raise TupleError(f"heartbeat ts must be a number, got {ts!r}")
        self.plan  # noqa: B018 - make sure the state exists
        self._advance(float(ts))

    def _advance(self, ts: float) -> None:
        if ts > self._max_ts:
            self._max_ts = ts
        horizon = self._max_ts - self.allowed_lateness - self.registry.max_window()
        if horizon > self._retention_horizon:
            self._retention_horizon = horizon
            assert self._state is not None
            self._state.purge(horizon)

    def _late(self, plan: CompiledPlan, s: int, row: tuple[Any, ...]) -> None:
        schema = plan.streams[s]
        late = LateTuple(
            stream=schema.name,
            ts=row[0],
            id=row[1],
            values={c.name: v for c, v in zip(schema.columns, row[2:], strict=True)},
            watermark=self._max_ts,
            allowed_lateness=self.allowed_lateness,
        )
        self.counters.late += 1
        self.late_tuples.append(late)
        if self.late_sink is not None:
            self.late_sink(late)
        elif not self._warned_late:
            self._warned_late = True
            warnings.warn(
                f"late tuple on stream {late.stream}: {late.reason}; it is not matched. "
                "Late tuples are counted in Matcher.late_count and kept in Matcher.late_tuples; "
                "pass late_sink= to handle them, or raise allowed_lateness.",
                stacklevel=3,
            )

    def explain(self) -> str:
        """Predicate lists in covering order, who uses what, each query's bits."""
        return explain_text(self.registry, self.plan)

    # ------------------------------------------------------------- snapshots

    def snapshot(self) -> dict[str, Any]:
        """Everything needed to carry on elsewhere, as plain Python data: settings,
        streams, queries (text, id, registration horizon), stored tuples and clocks."""
        state = self.state
        return {
            "format": SNAPSHOT_FORMAT,
            "ddl": self.catalog.ddl(),
            "settings": {
                "allowed_lateness": self.allowed_lateness,
                "order": self.order_name,
                "bucket_width": self._bucket_width,
                "max_disjuncts": self.max_disjuncts,
            },
            "queries": [(rq.name, rq.text, rq.since_ts) for rq in self.registry],
            "next_position": self._next_position,
            "max_ts": self._max_ts,
            "horizon": self._retention_horizon,
            "seq": self._seq,
            "next_ids": [rows.next_id for rows in self._rows],
            "counters": self.counters.as_dict(),
            "state": state.snapshot(),
        }

    @classmethod
    def restore(cls, snapshot: Mapping[str, Any], **overrides: Any) -> Matcher:
        """A matcher that continues exactly where ``snapshot`` was taken."""
        if snapshot.get("format") != SNAPSHOT_FORMAT:
            raise ValueError(f"unsupported snapshot format {snapshot.get('format')!r}")
        settings = {**snapshot["settings"], **overrides}
        m = cls(snapshot["ddl"], **settings)
        for name, text, since in snapshot["queries"]:
            (nq,) = m.compile(text, f"<snapshot query {name}>", check_ids=False)
            m._add([m._renamed(nq, name)], since_ts=since)
        m._next_position = snapshot["next_position"]
        plan = m.plan
        m._max_ts = snapshot["max_ts"]
        m._retention_horizon = snapshot["horizon"]
        m._seq = snapshot["seq"]
        for rows, next_id in zip(m._rows, snapshot["next_ids"], strict=True):
            rows.restart_ids(next_id)
        m.counters.load(snapshot["counters"])
        m._state = WindowState.restore(snapshot["state"], plan.indexed_positions)
        m._engine = Engine(plan, m._state, m.counters)
        return m
