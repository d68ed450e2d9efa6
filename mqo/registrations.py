"""A matcher's registered queries and the plan compiled from them.

Match queries live in a :class:`~mqo.registry.QueryRegistry` and are compiled into a
:class:`~mqo.plan.CompiledPlan` when one is next needed (:meth:`Registrations.ensure_plan`),
or at once, kernel tables included, by a bulk registration (:data:`BULK` queries or
more, at least doubling the last plan's), so the first event after it costs one
batch; a small change after that updates the previous plan
(:mod:`mqo.plan_update`) rather than compiling every list again. Windowed aggregate queries live in an
:class:`~mqo.aggregation.Aggregator`, made on the first one. Both kinds are numbered by
one running position (a query's id when it names none).

Compiling is all or nothing: a text with one bad query registers none of them, and the
error is the front end's, with its position in the whole text.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import predicates
from mqo.aggregation import AggregateBatch, Aggregator
from mqo.aggregation.persist import aggregate_snapshot, restore_aggregator
from mqo.clock import Clock
from mqo.config import MatcherConfig
from mqo.memory import no_cyclic_gc, release_freed_memory
from mqo.plan import CompiledPlan
from mqo.plan_compile import compile_plan
from mqo.plan_update import check_plan, update_plan
from mqo.query_snapshot import query_entries, since_value, table_rows
from mqo.registry import QueryRegistry
from mqo.tables import Tables
from mqo.views import ViewGraph, ViewRows, aggregate_rows, check_views, declare_ready, reads_of
from predicates import Catalog, QueryError
from predicates.aggregate import AggregateQuery
from predicates.entry import looks_aggregate
from predicates.records import CompiledQuery, RowQueries, RowQuery
from predicates.table import first_repeated, table_queries
from predicates.tables import TableDefinition, TableQuery, mentions_table
from predicates.token_cache import TokenCache
from predicates.views import ViewDefinition

if TYPE_CHECKING:
    from mqo.pipeline import Pipeline

Query = CompiledQuery | AggregateQuery | ViewDefinition


# a registration call of at least this many match queries makes the plan at once
BULK = 1000


class NeverMatchesWarning(UserWarning):
    """A registered query whose condition can never hold."""


class Registrations:
    """The match and aggregate queries of one matcher, and its compiled plan.

    ``pipeline`` is given every new plan (:meth:`~mqo.pipeline.Pipeline.attach`); its
    clock dates registrations (a query sees tuples from the retention horizon on).
    """

    def __init__(self, catalog: Catalog, config: MatcherConfig, pipeline: Pipeline) -> None:
        self.catalog, self.config, self.pipeline = catalog, config, pipeline
        self.registry = QueryRegistry(catalog, config.max_disjuncts)
        self.aggregator: Aggregator | None = None  # the aggregate queries over declared streams (level 0)
        # the aggregate queries over aggregate views, by level (mqo.views, rule 1)
        self.deeper: dict[int, Aggregator] = {}
        self.emitted = AggregateBatch()  # aggregate rows emitted and not yet taken
        self.views = ViewGraph()  # views: match queries whose results are streams (mqo.views)
        self.tables = Tables()  # tables: reference data joined by key as of ts (mqo.tables)
        self.next_position = 1
        self.frozen = False  # shares its queries with another matcher (restore(like=))
        # the plan compiled from the registrations as they are; None after a change
        # until :meth:`ensure_plan` compiles the next one
        self.plan: CompiledPlan | None = None
        self._previous: CompiledPlan | None = None  # kept while registrations change
        self._pending = 0  # match queries registered since the plan was last made
        self._version = 0

    # --------------------------------------------------------------- compiling

    def _compiling(self, check_names: bool) -> dict[str, Any]:
        """The compile entry's options: numbered from the next position, ids checked
        against those registered (``check_names``), this matcher's caches."""
        options = {"first_position": self.next_position, "max_disjuncts": self.config.max_disjuncts}
        return {**options, "taken": _Taken(self) if check_names else (), "compiler": self.registry.compiler}

    def compile_texts(self, sources: list[str], source_name: str, check_names: bool = True) -> Sequence[Query]:
        """Compile query texts (each may hold many queries) through the one compile
        entry, numbered from the next position, all or nothing. ``check_names``: no id
        may be registered already or given twice."""
        instances: Sequence[Query] = predicates.compile_many(
            sources, self.catalog, source_name=source_name, **self._compiling(check_names)
        )
        # (a block's names are checked by the registry as it adds them, in one dict
        # update: a set of a million names made here first cost half a second)
        if check_names and len(sources) > 1 and type(instances) is not RowQueries:
            repeated = first_repeated(q.name for q in instances)
            if repeated is not None:
                raise QueryError(f"query id {repeated} is given twice", None, None)
        return instances

    # ---------------------------------------------------------- registering

    def register(
        self, sources: list[str], source_name: str, one: bool = False, query_id: str | None = None
    ) -> list[str]:
        """Compile and register query texts, all or nothing; their ids in order.
        ``one``: the texts must hold one query, named ``query_id`` if given."""
        with no_cyclic_gc():
            # a query given its id is checked under that id, not the one its text gives
            instances = self.compile_texts(sources, source_name, check_names=query_id is None)
            ids = self._register_compiled(instances, one, query_id)
        release_freed_memory(len(instances))
        return ids

    def register_read(self, texts: Sequence[str]) -> list[str] | None:
        """The queries of ``texts`` registered when the template cache reads every one
        (:func:`predicates.entry.compile_read`: a query file's parts), else None and
        nothing done; all or nothing, their ids in order."""
        with no_cyclic_gc():
            instances = predicates.compile_read(texts, self.catalog, **self._compiling(True))
            ids = None if instances is None else self._register_compiled(instances, False, None)
        release_freed_memory(len(ids or ()))
        return ids

    def _register_compiled(self, instances: Sequence[Any], one: bool, query_id: str | None) -> list[str]:
        """:meth:`register`'s queries once compiled: added, all or nothing; their ids."""
        # register_query's one match query: no kinds to sort out (one never matching: as usual)
        match = instances[0] if one and query_id is None and len(instances) == 1 else None
        if type(match) is CompiledQuery and match.disjuncts:
            self._check_not_frozen()
            self._add_matches([match], None, warn_never=False)
            return [match.name]
        # (a text's CREATE TABLE statements declare, as DDL does: they are no query)
        tables: list[Query] = []
        queries: Sequence[Query] = instances  # (one block of rows: plain match queries)
        if type(instances) is not RowQueries:
            tables = [q for q in instances if isinstance(q, TableDefinition)]
            queries = [q for q in instances if not isinstance(q, TableDefinition)]
        if one and len(queries) != (0 if tables else 1):
            raise QueryError(f"expected one query, found {len(queries)}; use register_queries", None, None)
        if query_id is not None and not queries:
            raise QueryError(f"the text declares table {tables[0].name} and no query to name {query_id}")
        if query_id is not None:
            if query_id in _Taken(self):
                raise QueryError(f"query id {query_id} is already registered", None, None)
            queries = [_renamed(queries[0], query_id)]
        self.add([*tables, *queries] if tables else queries)
        if type(queries) is RowQueries:
            return list(queries.names)
        return [inst.name for inst in (queries if queries or not one else tables)]

    def register_table(self, template: str, table: Any, id_column: str | None, source_name: str) -> list[str]:
        """One match query per row of ``table`` (see :meth:`mqo.Matcher.register_table`)."""
        if looks_aggregate(template):
            raise QueryError("register_table takes match queries (an aggregate query is registered as text)")
        if mentions_table(template, self.catalog):
            raise QueryError(
                "register_table takes queries over streams (a query reading a table is registered as text)"
            )

        def compile_texts(texts: list[str], rows: list[int]) -> Sequence[CompiledQuery]:
            return self.registry.compile_rows(texts, rows, self.next_position, source_name)

        with no_cyclic_gc():
            aggregates = self.aggregator.queries if self.aggregator is not None else ()
            names, instances = table_queries(
                template, table, id_column, source_name, self.registry, self.next_position, compile_texts, aggregates
            )
            self.add(instances)
        release_freed_memory(len(names))
        return list(names)  # (a block's list is the registry's: the caller gets a copy)

    def add(self, instances: Sequence[Query], since_ts: Any = None) -> None:
        """Register compiled queries, seeing tuples from ``since_ts`` (default: the
        retention horizon now; a list gives one per match query)."""
        self._check_not_frozen()
        if type(instances) is not RowQueries and any(isinstance(q, (TableDefinition, TableQuery)) for q in instances):
            self._add_with_tables(instances, since_ts)
        elif type(instances) is not RowQueries and any(isinstance(q, ViewDefinition) for q in instances):
            views = [q for q in instances if isinstance(q, ViewDefinition)]
            self._add_views(views)
            try:  # all or nothing: an aggregate query refused now takes the views back
                self._add([q.query if isinstance(q, ViewDefinition) else q for q in instances], since_ts)
            except BaseException:
                self._drop_views(views)
                raise
        else:
            self._add(instances, since_ts)

    def _add(self, instances: Sequence[Query], since_ts: Any) -> None:
        clock = self.pipeline.clock
        # one pass over the records to learn their kinds (at a million table rows, every
        # pass over them is mostly cache misses); a table's block holds only match queries
        kinds = {RowQuery} if type(instances) is RowQueries else set(map(type, instances))
        aggregates = [q for q in instances if isinstance(q, AggregateQuery)] if AggregateQuery in kinds else []
        if aggregates:
            by_level: dict[int, list[AggregateQuery]] = {}
            for aq in aggregates:
                by_level.setdefault(self.views.level(aq.stream), []).append(aq)
            for level, queries in sorted(by_level.items()):
                self._level_aggregator(level).register(queries, max(clock.newest, default=-math.inf))
            self.next_position += len(aggregates)
            instances = [q for q in instances if not isinstance(q, AggregateQuery)]
            if not instances:
                return
        self._add_matches(instances, since_ts, warn_never=bool(kinds - {RowQuery}))  # type: ignore[arg-type]

    def _add_matches(self, instances: Sequence[CompiledQuery], since_ts: Any, warn_never: bool) -> None:
        """Register match queries (``warn_never``: warn of those that never match; a table
        row's query has its one disjunct, not made just to look); a bulk registration
        makes the plan now."""
        never = [q.name for q in instances if type(q) is not RowQuery and not q.disjuncts] if warn_never else []
        if never:
            shown = ", ".join(never[:5]) + (f" and {len(never) - 5} more" if len(never) > 5 else "")
            warnings.warn(
                f"query {shown} can never match: its condition is always false "
                "(a contradiction, or a division by zero, whose value is NULL)",
                NeverMatchesWarning,
                stacklevel=5,  # (the caller of register_query: _add_matches, _add, add, register, register_query)
            )
        self.registry.add(instances, self.pipeline.clock.horizon if since_ts is None else since_ts)
        self.next_position += len(instances)
        self.plan = None
        self._pending += len(instances)
        if self._pending >= BULK and self._pending >= (len(self._previous.records) if self._previous else 0):
            # a bulk registration: the plan is made now, not by the first event; only
            # when the queries since the last plan at least double it, so registering
            # in many calls compiles O(queries) in all, not once per call
            self.ensure_plan().build_tables()
            gc.freeze()  # the queries' objects stay: no full collection scans them again

    def _add_with_tables(self, instances: Sequence[Query], since_ts: Any) -> None:
        """Declare the tables of ``instances`` and register their queries, all or nothing."""
        if self.config.emit != "arrival":
            raise QueryError(
                "tables need emit='arrival': a result is joined with the table as it is when the result is found"
            )
        tables = [q for q in instances if isinstance(q, TableDefinition)]
        readers = [q for q in instances if isinstance(q, TableQuery)]
        for table in tables:
            self.catalog.add_view(table.schema)  # (a schema after the declared streams: no clock, no tuples)
            self.tables.declare(table)
        try:
            queries = [q for q in instances if not isinstance(q, TableDefinition)]
            self.add([q.query if isinstance(q, TableQuery) else q for q in queries], since_ts)
        except BaseException:
            for table in reversed(tables):
                self.catalog.remove_view(table.name)
                self.tables.undeclare(table.name)
            if tables:
                self._streams_changed()
            raise
        if tables:
            self._streams_changed()
        self.tables.add_queries(readers)

    def _level_aggregator(self, level: int) -> Aggregator:
        """The aggregator of ``level`` (made on its first query)."""
        if level == 0:
            if self.aggregator is None:
                self.aggregator = Aggregator(self.catalog, self.config)
            return self.aggregator
        if level not in self.deeper:
            self.deeper[level] = Aggregator(self.catalog, self.config)
        return self.deeper[level]

    def aggregators(self) -> list[Aggregator]:
        """Every aggregator, level by level (the order an emission runs them in)."""
        first = [] if self.aggregator is None else [self.aggregator]
        return first + [self.deeper[level] for level in sorted(self.deeper)]

    def _aggregator_of(self, stream: str) -> Aggregator | None:
        return self.deeper.get(level) if (level := self.views.level(stream)) else self.aggregator

    def _add_views(self, views: list[ViewDefinition]) -> None:
        """Declare ``views`` (their streams, after the declared ones), all or none."""
        check_views(views, self.config.emit, len(self.catalog.names()) + len(self.registry.roles))
        added: list[ViewDefinition] = []
        try:
            for view in views:
                self.catalog.add_view(view.schema)
                self.views.add(view)
                added.append(view)
        except BaseException:
            self._drop_views(added)
            raise
        self._streams_changed()

    def _drop_views(self, views: list[ViewDefinition]) -> None:
        for view in reversed(views):
            if view.name in self.views:
                self.catalog.remove_view(view.name)
                self.views.remove(view.name)
        self._streams_changed()

    def _streams_changed(self) -> None:
        """A view came or went: the next plan numbers the streams anew, compiled whole
        (the pipeline moves the stored tuples by name), and the compile caches forget
        what it bound against the catalog. With an aggregate view the horizon waits for
        its emissions from the watermark now on (:mod:`mqo.views`, rule 3)."""
        self.registry.compiler = TokenCache(self.catalog, self.config.max_disjuncts)
        self.plan = self._previous = None
        capped = self.views.aggregating
        if capped and not self.pipeline.capped:
            self.pipeline.retention_cap = self.pipeline.clock.mark
        self.pipeline.capped = capped

    def readers(self, name: str) -> list[str]:
        """The ids of the queries (match, aggregate and view queries) reading stream or view ``name``."""
        lowered = name.lower()
        out = [rq.name for rq in self.registry if lowered in reads_of(rq.streams)]
        for aggregator in self.aggregators():
            out += [q for q, rec in aggregator.queries.items() if rec.query.stream.lower() == lowered]
        return out

    def remove(self, query_id: str) -> None:
        self._check_not_frozen()
        if not self.views and query_id in self.registry.queries.entries:
            # a match query (``unregister_query``'s usual id; ids are unique across kinds)
            self.registry.remove(query_id)
            self.tables.remove_query(query_id)
            self.plan = None
            return
        view = self.views.get(query_id)
        if view is not None and view.name == query_id:  # (ids are case-sensitive, stream names not)
            readers = self.readers(query_id)
            if readers:
                shown = ", ".join(readers[:10]) + (f" and {len(readers) - 10} more" if len(readers) > 10 else "")
                raise QueryError(f"view {query_id} is read by {shown}; unregister those first", None, None)
            if view.aggregate:
                self._unregister_aggregate(query_id)
            else:
                self.registry.remove(query_id)
            self._drop_views([view])
            return
        if any(query_id in aggregator.queries for aggregator in self.aggregators()):
            self._unregister_aggregate(query_id)
            return
        if query_id not in self.registry:
            raise KeyError(f"no query with id {query_id!r} is registered")
        self.registry.remove(query_id)
        self.tables.remove_query(query_id)
        self.plan = None

    def _unregister_aggregate(self, query_id: str) -> None:
        for level, aggregator in [(0, self.aggregator), *self.deeper.items()]:
            if aggregator is not None and query_id in aggregator.queries:
                aggregator.unregister(query_id)
                if level and not len(aggregator):
                    del self.deeper[level]

    def _check_not_frozen(self) -> None:
        if self.frozen:
            raise QueryError(
                "this matcher shares its queries with another (Matcher.restore(..., like=...)); "
                "register or unregister queries on a matcher of its own",
                None,
                None,
            )

    def ids(self) -> list[str]:
        return list(self.registry.queries) + [q for aggregator in self.aggregators() for q in aggregator.queries]

    def output_aggregates(self) -> list[AggregateQuery]:
        """The aggregate queries whose rows are output (every level's; not the aggregate views')."""
        views = {view.name for view in self.views}
        return [r.query for a in self.aggregators() for name, r in a.queries.items() if name not in views]

    def register_streams(self, ddl: str, source_name: str) -> list[str]:
        """Declare streams from DDL; their names. The next plan is compiled whole."""
        if len(self.registry) or self.views:
            raise QueryError("streams must be declared before queries are registered", None, None)
        if self.pipeline.arrived:
            raise QueryError("streams must be declared before tuples are pushed", None, None)
        schemas = self.catalog.register_ddl(ddl, source_name)
        self.plan = self._previous = None
        self.pipeline.state = None  # made anew, with the new streams, on the next compile
        self.pipeline.row_builders = []
        return [s.name for s in schemas]

    # -------------------------------------------------------------------- plan

    def ensure_plan(self) -> CompiledPlan:
        """The plan for the current registrations: compiled now if they changed since the
        last one (an update of the previous plan where :mod:`mqo.plan_update` can make
        one, else compiled whole), checked under ``check=True`` and attached to the
        pipeline; the current plan as it is otherwise."""
        if self.plan is None:
            self._version += 1
            previous, registry = self._previous, self.registry
            plan = update_plan(previous, registry, self._version) if previous is not None else None
            if plan is None:  # past a limit of changes: compile it whole
                plan = compile_plan(registry, self._version)
                registry.forget_removals(plan.removal_mark)
                release_freed_memory(plan.n_slots)
            if self.config.check:
                registry._check()
                check_plan(plan, registry)
            self.pipeline.attach(plan)
            self.plan = self._previous = plan
            self._pending = 0
        return self.plan

    def compiled_whole(self) -> CompiledPlan:
        """The plan, compiled whole if it is an updated one (list numbers are then
        those of a fresh compile: what ``explain`` shows and snapshots record)."""
        # (with no plan yet, ``ensure_plan`` alone could update the previous plan; right
        # after a registration change the plan is not made yet and would be an updated one)
        if not self.frozen and (self.plan is None or self.plan.base_plan is not None):
            self.plan = self._previous = None
        return self.ensure_plan()

    # -------------------------------------------------------------- aggregates

    def aggregating(self, stream: str) -> bool:
        aggregator = self._aggregator_of(stream)
        return aggregator is not None and stream.lower() in aggregator.streams()

    def ingest(self, stream: str, batch: Any, late_of: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        """A batch of ``stream``'s tuples for the aggregate queries (``late_of``: which
        rows are late, by their ts), in the aggregator of the stream's level."""
        aggregator = self._aggregator_of(stream)
        assert aggregator is not None
        aggregator.ingest(stream, batch, late_of=late_of)

    def ingest_row(self, stream: str, ts: Any, values: Mapping[str, Any] | None, id: int | None) -> None:
        """One tuple of ``stream``, not late, for the aggregate queries."""
        one = {"ts": [ts], **{name: [v] for name, v in (values or {}).items()}}
        if id is not None:
            one["id"] = [id]
        self.ingest(stream, one)

    def emit_aggregates(self, clock: Clock) -> None:
        """Windows ending before the watermark can get no more tuples that are not
        late: emit them (against the watermark exactly, as the clock keeps it).
        (Without aggregate views: with them, :meth:`mqo.Matcher` emits level by level.)"""
        assert not self.views.aggregating
        if self.aggregator is not None:
            mark = clock.current()
            if mark is not None:
                self.emitted.extend(self.aggregator.emit(*clock.exact(mark)))

    def emit_level(self, aggregator: Aggregator, clock: Clock, mark: Any, flush: bool) -> list[ViewRows]:
        """One level's emission at the watermark ``mark`` (``flush``: end of input,
        every window holding data): its rows of aggregate views, in the order they are
        fed (:func:`mqo.views.aggregate_rows`); the others join the rows to take."""
        first = sum(map(len, self.aggregators()[: self.aggregators().index(aggregator)]))  # lower levels' come first
        batch = aggregator.flush(first) if flush else aggregator.emit(*clock.exact(mark), first)
        own: list[Any] = []
        for part in batch.parts:
            kept = []
            for chunk in part:
                view = self.views.get(chunk.query)
                (own if view is not None and view.name == chunk.query else kept).append(chunk)
            self.emitted.extend(AggregateBatch([kept]))
        return aggregate_rows(self.views, own)

    def take_aggregates(self, flush: bool = False) -> AggregateBatch:
        """The aggregate rows emitted and not yet taken; ``flush``: end of input first
        (without aggregate views: with them, :meth:`mqo.Matcher.flush` emits)."""
        if flush and self.aggregator is not None and not self.views.aggregating:
            self.emitted.extend(self.aggregator.flush())
        out, self.emitted = self.emitted, AggregateBatch()
        return out

    # --------------------------------------------------------------- snapshots

    def snapshot(self, queries: bool) -> dict[str, Any]:
        """The queries' part of a matcher snapshot (``queries=False``: all but the
        match queries, which a matcher restored ``like=`` another shares)."""
        data: dict[str, Any] = {"next_position": self.next_position}
        if self.views:
            data["view_ids"] = self.views.snapshot()  # the ids the views' rows take next
        if self.aggregator is not None:  # with its queries either way: no other matcher shares them
            data["aggregates"] = aggregate_snapshot(self.aggregator, self.emitted)
        if self.tables:  # the CREATE TABLE texts (declared before the queries) and the versions
            data["reference_tables"] = {
                "texts": [t.definition.text for t in self.tables.tables.values()],
                "versions": self.tables.snapshot(),
            }
        if self.deeper:  # the aggregate queries over aggregate views, by level
            data["deeper_aggregates"] = [
                [level, aggregate_snapshot(aggregator, AggregateBatch())] for level, aggregator in self.deeper.items()
            ]
        if queries:
            data["ddl"] = self.catalog.ddl()
            data["roles"] = list(self.registry.roles)  # self-join roles: their stream numbers
            data["queries"], data["tables"] = query_entries(self.registry, self.views)
            # aggregate views: declared on restore as soon as their input is (their
            # queries and state come back with their level's aggregator)
            data["aggregate_views"] = [view.text for view in self.views if view.aggregate]
        return data

    def _restore_texts(self, entries: Sequence[tuple[str, str, float | str]], views: list[str]) -> None:
        """Match query entries in order; each of the aggregate views' texts ``views``
        (taken from the list) is declared as soon as the streams it reads are."""
        if views:
            for k in range(len(entries) + 1):
                self._declare_ready(views)
                if k < len(entries):
                    self._restore_texts(entries[k : k + 1], [])
            return
        if not entries:
            return
        instances = self.compile_texts([text for _, text, _ in entries], "<snapshot>", check_names=False)
        instances = [query.renamed(name) for (name, _, _), query in zip(entries, instances, strict=True)]
        self.add(instances, since_ts=[since_value(since) for _, _, since in entries])

    def _restore_table(self, table: Mapping[str, Any]) -> None:
        queries = table_rows(self.registry, self.next_position, table)
        self.add(queries, since_value(table["since"]))

    def _declare_ready(self, views: list[str]) -> None:
        """Declare the aggregate views (texts, leaving ``views``) whose input is declared."""
        declare_ready(
            views, lambda text: self.compile_texts([text], "<snapshot>", check_names=False)[0], self._add_views
        )

    def restore(self, snapshot: Mapping[str, Any], like: Registrations | None) -> CompiledPlan:
        """Take the queries of ``snapshot`` (or share ``like``'s); the plan they make."""
        if like is None:
            self.registry.roles = list(snapshot.get("roles", ()))  # numbered as the stored tuples are
            tables = snapshot.get("reference_tables")
            if tables is not None:
                self.add(self.compile_texts(list(tables["texts"]), "<snapshot>", check_names=False))
            entries, start = snapshot["queries"], 0
            views = list(snapshot.get("aggregate_views", ()))
            for table in [*snapshot.get("tables", ()), None]:  # in registration order
                stop = len(entries) if table is None else table["at"]
                self._restore_texts(entries[start:stop], views)
                start = stop
                if table is not None:
                    self._restore_table(table)
            if tables is not None:
                self.tables.load(tables["versions"])
            self._version += 1
            self._declare_ready(views)
            if views:
                raise QueryError(f"the snapshot's view cannot be declared: {views[0]}", None, None)
            plan = self.plan = self._previous = compile_plan(self.registry, self._version)
        else:
            if like.views:  # (the views' row ids and streams would be shared by matchers that diverge)
                raise QueryError(f"a matcher with views cannot be shared (view {next(iter(like.views)).name})")
            if like.tables:  # its tables and readers; versions of its own (the snapshot's), none shared
                self.tables.declare_like(like.tables)
                tables = snapshot.get("reference_tables")
                if tables is not None:
                    self.tables.load(tables["versions"])
            self.registry = like.registry
            plan = like.compiled_whole()  # list numbers as a fresh compile's, as snapshots record
            like.frozen = self.frozen = True
            self.plan, self._version = plan, like._version
        self.next_position = snapshot.get("next_position", like.next_position if like is not None else 1)
        self.views.load(snapshot.get("view_ids", {}))
        compile_texts = lambda texts: self.compile_texts(texts, "<snapshot>", check_names=False)  # noqa: E731
        if "aggregates" in snapshot:
            self.aggregator, self.emitted = restore_aggregator(
                snapshot["aggregates"], self.catalog, self.config, compile_texts
            )
        for level, data in snapshot.get("deeper_aggregates", ()):
            self.deeper[int(level)] = restore_aggregator(data, self.catalog, self.config, compile_texts)[0]
        return plan


class _Taken:
    """The ids registered now, of both kinds (a view: registering a million queries one
    at a time should not copy a million names each time)."""

    def __init__(self, registrations: Registrations) -> None:
        self.registrations = registrations

    def __contains__(self, name: object) -> bool:
        registrations = self.registrations
        return name in registrations.registry.queries or any(
            name in aggregator.queries for aggregator in registrations.aggregators()
        )

    def isdisjoint(self, names: Iterable[str]) -> bool:
        """Whether none of ``names`` is registered (in C: a million names at once)."""
        names = names if isinstance(names, list) else list(names)
        aggregator = self.registrations.aggregator
        return self.registrations.registry.queries.keys().isdisjoint(names) and (
            aggregator is None or aggregator.queries.keys().isdisjoint(names)
        )


def _renamed(query: Query, name: str) -> Query:
    if isinstance(query, AggregateQuery):
        return dataclasses.replace(query, name=name)
    return query.renamed(name)
