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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

import predicates
from mqo.aggregation import AggregateBatch, Aggregator
from mqo.aggregation.persist import aggregate_snapshot, restore_aggregator
from mqo.clock import Clock
from mqo.config import MatcherConfig
from mqo.memory import release_freed_memory
from mqo.plan import CompiledPlan
from mqo.plan_compile import compile_plan
from mqo.plan_update import check_plan, update_plan
from mqo.registry import QueryRegistry, RegisteredRow
from mqo.views import ViewGraph, check_emit, reads_of
from predicates import Catalog, QueryError
from predicates.aggregate import AggregateQuery
from predicates.entry import looks_aggregate
from predicates.records import CompiledQuery, RowQueries, RowQuery
from predicates.table import (
    block_template,
    compile_table,
    first_repeated,
    parse_template,
    table_queries,
)
from predicates.templates import FastCompiler
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
        self.aggregator: Aggregator | None = None
        self.emitted = AggregateBatch()  # aggregate rows emitted and not yet taken
        self.views = ViewGraph()  # views: match queries whose results are streams (mqo.views)
        self.next_position = 1
        self.frozen = False  # shares its queries with another matcher (restore(like=))
        # the plan compiled from the registrations as they are; None after a change
        # until :meth:`ensure_plan` compiles the next one
        self.plan: CompiledPlan | None = None
        self._previous: CompiledPlan | None = None  # kept while registrations change
        self._pending = 0  # match queries registered since the plan was last made
        self._version = 0

    # --------------------------------------------------------------- compiling

    def compile_texts(self, sources: list[str], source_name: str, check_names: bool = True) -> Sequence[Query]:
        """Compile query texts (each may hold many queries) through the one compile
        entry, numbered from the next position, all or nothing. ``check_names``: no id
        may be registered already or given twice."""
        instances: Sequence[Query] = predicates.compile_many(
            sources,
            self.catalog,
            source_name=source_name,
            first_position=self.next_position,
            taken=_Taken(self) if check_names else (),
            max_disjuncts=self.config.max_disjuncts,
            compiler=self.registry.compiler,
        )
        if check_names and len(sources) > 1:
            repeated = first_repeated(instances.names if type(instances) is RowQueries else (q.name for q in instances))
            if repeated is not None:
                raise QueryError(f"query id {repeated} is given twice", None, None)
        return instances

    # ---------------------------------------------------------- registering

    def register(
        self, sources: list[str], source_name: str, one: bool = False, query_id: str | None = None
    ) -> list[str]:
        """Compile and register query texts, all or nothing; their ids in order.
        ``one``: the texts must hold one query, named ``query_id`` if given."""
        with _no_cyclic_gc():
            # a query given its id is checked under that id, not the one its text gives
            instances = self.compile_texts(sources, source_name, check_names=query_id is None)
            if one and len(instances) != 1:
                raise QueryError(f"expected one query, found {len(instances)}; use register_queries", None, None)
            if query_id is not None:
                if query_id in _Taken(self):
                    raise QueryError(f"query id {query_id} is already registered", None, None)
                instances = [_renamed(instances[0], query_id)]
            self.add(instances)
        release_freed_memory(len(instances))
        return list(instances.names) if type(instances) is RowQueries else [inst.name for inst in instances]

    def register_table(self, template: str, table: Any, id_column: str | None, source_name: str) -> list[str]:
        """One match query per row of ``table`` (see :meth:`mqo.Matcher.register_table`)."""
        if looks_aggregate(template):
            raise QueryError("register_table takes match queries (an aggregate query is registered as text)")
        compile_one = self.registry.compiler.compile

        def compile_text(text: str, row: int) -> CompiledQuery:
            return compile_one(text, self.next_position + row, f"{source_name}[row {row}]")

        with _no_cyclic_gc():
            aggregates = self.aggregator.queries if self.aggregator is not None else ()
            names, instances = table_queries(
                template, table, id_column, source_name, self.registry, self.next_position, compile_text, aggregates
            )
            self.add(instances)
        release_freed_memory(len(names))
        return names

    def add(self, instances: Sequence[Query], since_ts: Any = None) -> None:
        """Register compiled queries, seeing tuples from ``since_ts`` (default: the
        retention horizon now; a list gives one per match query)."""
        self._check_not_frozen()
        if type(instances) is not RowQueries and any(isinstance(q, ViewDefinition) for q in instances):
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
            if self.aggregator is None:
                self.aggregator = Aggregator(self.catalog, self.config)
            self.aggregator.register(aggregates, max(clock.newest, default=-math.inf))
            self.next_position += len(aggregates)
            instances = [q for q in instances if not isinstance(q, AggregateQuery)]
            if not instances:
                return
        # (a table row's query always has its one disjunct: not made here just to look)
        never = [q.name for q in instances if type(q) is not RowQuery and not q.disjuncts] if kinds - {RowQuery} else []
        if never:
            shown = ", ".join(never[:5]) + (f" and {len(never) - 5} more" if len(never) > 5 else "")
            warnings.warn(
                f"query {shown} can never match: its condition is always false "
                "(a contradiction, or a division by zero, whose value is NULL)",
                NeverMatchesWarning,
                stacklevel=4,
            )
        self.registry.add(instances, clock.horizon if since_ts is None else since_ts)
        self.next_position += len(instances)
        self.plan = None
        self._pending += len(instances)
        if self._pending >= BULK and self._pending >= (len(self._previous.records) if self._previous else 0):
            # a bulk registration: the plan is made now, not by the first event; only
            # when the queries since the last plan at least double it, so registering
            # in many calls compiles O(queries) in all, not once per call
            self.ensure_plan().build_tables()
            gc.freeze()  # the queries' objects stay: no full collection scans them again

    def _add_views(self, views: list[ViewDefinition]) -> None:
        """Declare ``views`` (their streams, after the declared ones), all or none."""
        for view in views:
            check_emit(self.config.emit, view)
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
        (the pipeline moves the stored tuples by name), and the fast compiler forgets
        what it bound against the catalog."""
        self.registry.compiler = FastCompiler(self.catalog, self.config.max_disjuncts)
        self.plan = self._previous = None

    def readers(self, name: str) -> list[str]:
        """The ids of the queries (match, aggregate and view queries) reading stream or view ``name``."""
        lowered = name.lower()
        out = [rq.name for rq in self.registry if lowered in reads_of(rq.streams)]
        if self.aggregator is not None:
            out += [q for q, rec in self.aggregator.queries.items() if rec.query.stream.lower() == lowered]
        return out

    def remove(self, query_id: str) -> None:
        self._check_not_frozen()
        view = self.views.get(query_id)
        if view is not None and view.name == query_id:  # (ids are case-sensitive, stream names not)
            readers = self.readers(query_id)
            if readers:
                shown = ", ".join(readers[:10]) + (f" and {len(readers) - 10} more" if len(readers) > 10 else "")
                raise QueryError(f"view {query_id} is read by {shown}; unregister those first", None, None)
            self.registry.remove(query_id)
            self._drop_views([view])
            return
        if self.aggregator is not None and query_id in self.aggregator.queries:
            self.aggregator.unregister(query_id)
            return
        if query_id not in self.registry:
            raise KeyError(f"no query with id {query_id!r} is registered")
        self.registry.remove(query_id)
        self.plan = None

    def _check_not_frozen(self) -> None:
        if self.frozen:
            raise QueryError(
                "this matcher shares its queries with another (Matcher.restore(..., like=...)); "
                "register or unregister queries on a matcher of its own",
                None,
                None,
            )

    def ids(self) -> list[str]:
        aggregates = list(self.aggregator.queries) if self.aggregator is not None else []
        return list(self.registry.queries) + aggregates

    def register_streams(self, ddl: str, source_name: str) -> list[str]:
        """Declare streams from DDL; their names. The next plan is compiled whole."""
        if len(self.registry) or self.views:
            raise QueryError("streams must be declared before queries are registered", None, None)
        if self.pipeline.seq:
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
        return self.aggregator is not None and stream.lower() in self.aggregator.streams()

    def ingest(self, stream: str, batch: Any, late_of: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        """A batch of ``stream``'s tuples for the aggregate queries (``late_of``: which
        rows are late, by their ts)."""
        assert self.aggregator is not None
        self.aggregator.ingest(stream, batch, late_of=late_of)

    def ingest_row(self, stream: str, ts: Any, values: Mapping[str, Any] | None, id: int | None) -> None:
        """One tuple of ``stream``, not late, for the aggregate queries."""
        one = {"ts": [ts], **{name: [v] for name, v in (values or {}).items()}}
        if id is not None:
            one["id"] = [id]
        self.ingest(stream, one)

    def emit_aggregates(self, clock: Clock) -> None:
        """Windows ending before the watermark can get no more tuples that are not
        late: emit them (against the watermark exactly, as the clock keeps it)."""
        if self.aggregator is not None:
            mark = clock.current()
            if mark is not None:
                self.emitted.extend(self.aggregator.emit(*clock.exact(mark)))

    def take_aggregates(self, flush: bool = False) -> AggregateBatch:
        """The aggregate rows emitted and not yet taken; ``flush``: end of input first."""
        if flush and self.aggregator is not None:
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
        if queries:
            data["ddl"] = self.catalog.ddl()
            data["roles"] = list(self.registry.roles)  # self-join roles: their stream numbers
            data["queries"], data["tables"] = self._query_entries()
        return data

    def _query_entries(self) -> tuple[list[tuple[str, str, float | str]], list[dict[str, Any]]]:
        """The match queries as snapshot data: texts ``(name, text, since)``, and each
        run of a table's rows (one block, one horizon) as its block's template with
        the rows' names and constants, to be registered after the ``at`` first texts
        (a million rows print and compile again in seconds, not minutes)."""
        texts: list[tuple[str, str, float | str]] = []
        tables: list[dict[str, Any]] = []
        run: list[RegisteredRow] = []

        def close_run() -> None:
            if run:
                block = run[0].block
                rows = np.fromiter((rq.row for rq in run), np.int64, len(run))
                constants = np.frombuffer(block.values, np.float64).reshape(-1, block.width)[rows]
                tables.append(
                    {
                        "at": len(texts),
                        "template": block_template(block),
                        "names": [rq.name for rq in run],
                        "constants": np.ascontiguousarray(constants.reshape(-1)),  # row after row
                        "since": _since_text(run[0].since_ts),
                    }
                )
                run.clear()

        for rq in self.registry:
            if type(rq) is RegisteredRow:
                if run and rq.block is run[0].block and rq.since_ts == run[0].since_ts:
                    run.append(rq)
                    continue
                close_run()
                if not rq.context.bound.self_join:  # (a self-join's rows are kept as texts)
                    run.append(rq)
                    continue
            else:
                close_run()
            view = self.views.get(rq.name)
            texts.append((rq.name, rq.text if view is None else view.text, _since_text(rq.since_ts)))
        close_run()
        return texts, tables

    def _restore_texts(self, entries: Sequence[tuple[str, str, float | str]]) -> None:
        if not entries:
            return
        instances = self.compile_texts([text for _, text, _ in entries], "<snapshot>", check_names=False)
        instances = [query.renamed(name) for (name, _, _), query in zip(entries, instances, strict=True)]
        self.add(instances, since_ts=[_since_value(since) for _, _, since in entries])

    def _restore_table(self, table: Mapping[str, Any]) -> None:
        names = list(table["names"])
        template = parse_template(table["template"], "<snapshot>")
        constants = np.asarray(table["constants"], np.float64).reshape(len(names), -1)
        compile_one = self.registry.compiler.compile

        def compile_text(text: str, row: int) -> CompiledQuery:
            return compile_one(text, self.next_position + row, f"<snapshot>[row {row}]")

        columns = {f"c{j}": constants[:, j] for j in range(constants.shape[1])}
        queries = compile_table(self.registry.compiler, template, columns, names, compile_text)
        self.add(queries, _since_value(table["since"]))

    def restore(self, snapshot: Mapping[str, Any], like: Registrations | None) -> CompiledPlan:
        """Take the queries of ``snapshot`` (or share ``like``'s); the plan they make."""
        if like is None:
            self.registry.roles = list(snapshot.get("roles", ()))  # numbered as the stored tuples are
            entries, start = snapshot["queries"], 0
            for table in [*snapshot.get("tables", ()), None]:  # in registration order
                stop = len(entries) if table is None else table["at"]
                self._restore_texts(entries[start:stop])
                start = stop
                if table is not None:
                    self._restore_table(table)
            self._version += 1
            plan = self.plan = self._previous = compile_plan(self.registry, self._version)
        else:
            if like.views:  # (the views' row ids and streams would be shared by matchers that diverge)
                raise QueryError(f"a matcher with views cannot be shared (view {next(iter(like.views)).name})")
            self.registry = like.registry
            plan = like.compiled_whole()  # list numbers as a fresh compile's, as snapshots record
            like.frozen = self.frozen = True
            self.plan, self._version = plan, like._version
        self.next_position = snapshot.get("next_position", like.next_position if like is not None else 1)
        self.views.load(snapshot.get("view_ids", {}))
        if "aggregates" in snapshot:
            compile_texts = lambda texts: self.compile_texts(texts, "<snapshot>", check_names=False)  # noqa: E731
            self.aggregator, self.emitted = restore_aggregator(
                snapshot["aggregates"], self.catalog, self.config, compile_texts
            )
        return plan


class _Taken:
    """The ids registered now, of both kinds (a view: registering a million queries one
    at a time should not copy a million names each time)."""

    def __init__(self, registrations: Registrations) -> None:
        self.registrations = registrations

    def __contains__(self, name: object) -> bool:
        aggregator = self.registrations.aggregator
        return name in self.registrations.registry.queries or (aggregator is not None and name in aggregator.queries)

    def isdisjoint(self, names: Iterable[str]) -> bool:
        """Whether none of ``names`` is registered (in C: a million names at once)."""
        names = names if isinstance(names, list) else list(names)
        aggregator = self.registrations.aggregator
        return self.registrations.registry.queries.keys().isdisjoint(names) and (
            aggregator is None or aggregator.queries.keys().isdisjoint(names)
        )


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    # Compiling allocates many small objects and no reference cycles; the cyclic
    # collector would otherwise scan the growing registry again and again (half the
    # time of a million registrations).
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _renamed(query: Query, name: str) -> Query:
    if isinstance(query, AggregateQuery):
        return dataclasses.replace(query, name=name)
    return query.renamed(name)


def _since_text(since: float | Fraction) -> float | str:
    """A registration horizon as snapshot data (exact: a Fraction as its text)."""
    return since if isinstance(since, float) else str(since)


def _since_value(data: float | str) -> float | Fraction:
    return Fraction(data) if isinstance(data, str) else float(data)
