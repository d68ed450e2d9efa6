"""Views: named queries whose rows are a stream other queries read.

A view (``CREATE VIEW pairs AS SELECT ...``, :mod:`predicates.views`) is a stream of
the catalog, declared after the declared streams. Its work is done once however many
queries read it. A **match view** is registered as a match query named as the view:
each of its results becomes a row of the view's stream (``ts`` the result's, ``id``
0, 1, 2, ... in the order the rows are made, the SELECT values as columns), which is
matched against every query reading the view, sharing their predicates over its
columns as over any stream's (:func:`derive`). An **aggregate view** is registered
as an aggregate query named as the view: each row it emits (one per window and group,
as its ISTREAM/DSTREAM/RSTREAM decides) becomes a row of its stream with ``ts`` the
window's end (:func:`aggregate_rows`). So views over views, joins of views with
streams and with each other, and aggregates over views all follow.

**Match views: order and time.** The results found by one incoming tuple are taken
apart: the view queries' results become rows, in ``ts`` order (stable: in the order
found), and are fed, one generation after another (the rows a view's rows make in the
views reading it come after all of them), before the call returns; results of view
queries are not returned (``mqo match --output-view NAME`` writes them). A match
view's stream has no clock of its own: a result found by a tuple that is not late has
``ts`` at or after the watermark (its newest member's ts is at least the tuple's;
docs/ARCHITECTURE.md, "Ordered emission"), so its row is never late and nothing it
could meet has been purged; its rows are matched without the clock. This is why a
batch is matched row by row when views are registered (a row's view rows are fed
before the next row moves the watermark).

**Aggregate views: the clock.** An aggregate row is emitted once the watermark ``w``
has passed its window's end, so its ``ts`` is behind ``w``. Three rules keep every
result exact and deterministic, with nothing late or dropped:

1. *Levels.* A stream's level is 0 for a declared stream, a match view's the highest
   of its inputs', an aggregate view's one more than its input's. An aggregate query
   (view or not) runs in the aggregator of the level of the stream it reads
   (:meth:`ViewGraph.level`).
2. *Emission in levels.* An emission at watermark ``w`` emits level 0's windows ending
   before ``w``; the aggregate views' rows among them are sorted by window end, then
   view (registration order), then group (by its key, NULL first), numbered in that
   order, and fed in as rows of their views (matched, and the rows they make in match
   views after them, generation by generation as above; rows reaching an aggregate
   query are taken into its level's slices); then level 1 at the same ``w``, and so
   on. Every row a derived stream will ever have with ``ts`` before ``w`` is in by
   the time its level emits (its inputs' windows before ``w`` are all emitted, and
   later tuples are at or after ``w``), so a view stream's watermark is the matcher's
   and an aggregate over a view is exact. After the emission at ``w`` every row still
   to come, of a stream or a view, has ``ts`` at or after ``w``.
3. *Retention.* While aggregate views are registered, the retention horizon (what
   stored tuples are purged before) moves only to the watermark of the last emission
   (:attr:`mqo.pipeline.Pipeline.retention_cap`), never past it: a row emitted at
   ``w`` still meets every stored tuple within MAXWINDOW of it.

So when rows are emitted changes only *which call returns* a result, never the set of
results: ``push``, ``heartbeat`` and ``set_idle`` emit after their tuple; a batch
(``push_batch``) emits once at its end; ``replay`` (the CLI) at each row it visits and
at its end; ``poll_aggregates`` and ``flush`` (end of input: every window holding
data, level by level) emit too, and keep the match results their rows find for
:meth:`mqo.Matcher.take_results`. Views need ``emit='arrival'`` (under
``emit='ordered'`` results leave behind the watermark, too late to be a stream).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from mqo.batch import MatchBatch
from mqo.engine import ResultBlock
from predicates import QueryError
from predicates.catalog import StreamSchema, split_role
from predicates.views import ViewDefinition

if TYPE_CHECKING:
    from mqo.aggregation.results import AggregateChunk
    from mqo.pipeline import Pipeline
    from mqo.plan import CompiledPlan

# a view row made by a result or an aggregate: (ts, view name, values)
ViewRow = tuple[float, str, dict[str, Any]]
# hands a view's rows of one generation, as (ts, id, values), to the aggregate queries
Ingest = Callable[[str, list[tuple[float, int, dict[str, Any]]]], None]


class ViewGraph:
    """The registered views, in registration order, and the ids their rows take next."""

    def __init__(self) -> None:
        self.views: dict[str, ViewDefinition] = {}  # by lower-case name
        self.next_ids: dict[str, int] = {}
        self._slots: tuple[CompiledPlan, np.ndarray] | None = None  # the view queries' slots of a plan

    def __bool__(self) -> bool:
        return bool(self.views)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self.views

    def __iter__(self) -> Iterator[ViewDefinition]:
        return iter(list(self.views.values()))

    def get(self, name: str) -> ViewDefinition | None:
        return self.views.get(name.lower())

    def add(self, view: ViewDefinition) -> None:
        self.views[view.name.lower()] = view
        self.next_ids.setdefault(view.name.lower(), 0)
        self._slots = None

    def remove(self, name: str) -> None:
        del self.views[name.lower()]
        del self.next_ids[name.lower()]
        self._slots = None

    @property
    def aggregating(self) -> bool:
        """Whether an aggregate view is registered (its rows come behind the watermark)."""
        return any(view.aggregate for view in self.views.values())

    def view_slots(self, plan: CompiledPlan) -> np.ndarray:
        """A bool per slot of ``plan``: whether it is a view query's."""
        if self._slots is None or self._slots[0] is not plan:
            names = plan.record_names
            is_view = np.array([name.lower() in self.views for name in names], bool)
            self._slots = (plan, is_view[plan.slot_record] if len(names) else np.zeros(0, bool))
        return self._slots[1]

    # ------------------------------------------------------------- the graph

    def levels(self) -> dict[str, int]:
        """Each view's depth: 1 over streams only, else one more than the deepest view it reads."""
        level: dict[str, int] = {}
        for view in self.views.values():  # registration order: a view's inputs come before it
            level[view.name.lower()] = 1 + max((level.get(r.lower(), 0) for r in view.reads), default=0)
        return level

    def level(self, stream: str) -> int:
        """The emission level of ``stream`` (module docstring, rule 1): 0 for a declared
        stream, a match view's its inputs' highest, an aggregate view's one more than its
        input's. An aggregate query reading ``stream`` runs at this level."""
        view = self.views.get(stream.lower())
        if view is None:
            return 0
        below = max((self.level(read) for read in view.reads), default=0)
        return below + 1 if view.aggregate else below

    # ------------------------------------------------------------- snapshots

    def snapshot(self) -> dict[str, int]:
        return dict(self.next_ids)

    def load(self, next_ids: dict[str, int]) -> None:
        for name, n in next_ids.items():
            if name in self.next_ids:
                self.next_ids[name] = int(n)


def reads_of(streams: Iterable[str]) -> set[str]:
    """The stream names (lower case) a query's streams or roles read."""
    return {split_role(s)[0].lower() for s in streams}


def check_views(views: list[ViewDefinition], emit: str, streams: int) -> None:
    """``views`` may be registered: under ``emit='arrival'`` (under ``emit='ordered'``
    results leave once the watermark has passed them, too late to be a stream other
    queries match), and as streams a plan has room for beside its ``streams``."""
    for view in views:
        if emit != "arrival":
            raise QueryError(
                f"view {view.name} needs emit='arrival': under emit='ordered' results leave once the watermark "
                "has passed them, too late to be a stream other queries match",
                None,
                None,
            )
    check_room(streams, views)


MAX_STREAMS = 63  # a plan's streams (declared, views, self-join roles) are the bits of an int64 mask


def check_room(streams: int, views: list[ViewDefinition]) -> None:
    """``views`` may join the ``streams`` a plan has (else an error naming the first one too many)."""
    if streams + len(views) > MAX_STREAMS:
        view = views[max(MAX_STREAMS - streams, 0)]
        raise QueryError(
            f"view {view.name} would make {streams + len(views)} streams (declared, views and self-join roles);"
            f" a plan holds at most {MAX_STREAMS}: let queries share views, or use GROUP BY in one view",
            None,
            None,
        )


def aggregate_rows(graph: ViewGraph, chunks: list[AggregateChunk]) -> list[ViewRow]:
    """The rows of aggregate views in ``chunks`` (one emission of one level): ``ts``
    the window's end, the SELECT values as the view's columns; sorted by window end,
    then view (registration order), then group key (NULL first): the order they are
    numbered and fed in (module docstring, rule 2)."""
    order = {name: k for k, name in enumerate(graph.views)}
    keyed: list[tuple[float, int, tuple[tuple[bool, Any], ...], ViewRow]] = []
    for chunk in chunks:
        view = graph.views[chunk.query.lower()]
        columns = [column.name for column in view.schema.columns]
        at = order[chunk.query.lower()]
        codes = np.asarray(chunk.codes, np.int64).tolist()
        ends = np.asarray(chunk.ends, np.float64).tolist()
        for r, (end, code) in enumerate(zip(ends, codes, strict=True)):
            key = tuple((v is not None, v) for v in chunk.keys[code])
            values = {name: column[r] for name, column in zip(columns, chunk.values, strict=True)}
            keyed.append((end, at, key, (end, view.name, values)))
    keyed.sort(key=lambda row: row[:3])
    return [row[3] for row in keyed]


def rows_batch(schema: StreamSchema, rows: list[tuple[float, int, dict[str, Any]]]) -> dict[str, list[Any]]:
    """A view's rows (ts, id, values) as a batch of columns."""
    batch: dict[str, list[Any]] = {"ts": [ts for ts, _, _ in rows], "id": [i for _, i, _ in rows]}
    for column in schema.columns:
        batch[column.name] = [values.get(column.name) for _, _, values in rows]
    return batch


def declare_ready(
    texts: list[str], compile_one: Callable[[str], Any], declare: Callable[[list[ViewDefinition]], None]
) -> None:
    """Restoring a snapshot: declare each aggregate view of ``texts`` (its ``CREATE
    VIEW``) as soon as the stream it reads is declared (it compiles), in order; the
    views declared leave ``texts``."""
    progress = True
    while texts and progress:
        progress = False
        for text in list(texts):
            try:
                view = compile_one(text)
            except QueryError:
                continue  # its input is not declared yet
            assert isinstance(view, ViewDefinition)
            declare([view])
            texts.remove(text)
            progress = True


def split_blocks(
    graph: ViewGraph, plan: CompiledPlan, blocks: list[ResultBlock]
) -> tuple[list[ResultBlock], list[ViewRow]]:
    """The result blocks without the view queries' results, and the view rows those
    results make (in the order found)."""
    is_view = graph.view_slots(plan)
    kept: list[ResultBlock] = []
    own: list[ResultBlock] = []
    for block in blocks:
        numbers = block.numbers()
        views = is_view[numbers]
        if not views.any():
            kept.append(block)
            continue
        if not views.all():
            kept.append(ResultBlock(numbers[~views], block.tuples, block.ts))
        own.append(ResultBlock(numbers[views], block.tuples, block.ts))
    rows = [(m.ts, m.query, dict(m.values)) for m in MatchBatch(plan, own).matches()] if own else []
    return kept, rows


def feed(
    graph: ViewGraph,
    plan: CompiledPlan,
    pipeline: Pipeline,
    rows: list[ViewRow],
    ingest: Ingest,
    sink: Callable[[str, float, int, dict[str, Any]], None] | None = None,
) -> list[ResultBlock]:
    """Feed view rows in, generation by generation: each generation (in ``ts`` order,
    stable) is numbered, matched as rows
    of their views and handed to the aggregate queries (``ingest``, per view); the
    match views' results it finds are the next generation. The results to return
    (no view query's). ``sink``, when given, sees every view row as (view, ts, id, values)."""
    out: list[ResultBlock] = []
    while rows:
        rows.sort(key=lambda row: row[0])  # stable: rows of one ts in the order found (or made)
        taken: dict[str, list[tuple[float, int, dict[str, Any]]]] = {}
        order: list[tuple[str, int]] = []  # the generation's rows: (view, number among its rows)
        for ts, name, values in rows:
            view = graph.views[name.lower()]
            row_id = graph.next_ids[name.lower()]
            graph.next_ids[name.lower()] = row_id + 1
            if sink is not None:
                sink(view.name, ts, row_id, values)
            made = taken.setdefault(view.name, [])
            order.append((view.name, len(made)))
            made.append((ts, row_id, values))
        # each view's rows decided at once (attribute predicates read the row alone), then
        # matched and stored one by one in the generation's order: a row meets the rows before it
        prepared = {
            name: pipeline.prepare_derived(plan.stream_number(name), rows_batch(graph.views[name.lower()].schema, made))
            for name, made in taken.items()
        }
        wanted = {name: part.visit_flags() for name, part in prepared.items()}
        found: list[ResultBlock] = []
        for name, i in order:
            if wanted[name][i]:
                found += pipeline.push_derived(prepared[name], i)
        for name, made in taken.items():
            ingest(name, made)
        kept, rows = split_blocks(graph, plan, found)
        out += kept
    return out


def derive(
    graph: ViewGraph,
    plan: CompiledPlan,
    pipeline: Pipeline,
    blocks: list[ResultBlock],
    ingest: Ingest,
    sink: Callable[[str, float, int, dict[str, Any]], None] | None = None,
) -> list[ResultBlock]:
    """The results of ``blocks`` (found by one incoming tuple) with every view row they
    make fed in (:func:`feed`): the results to return (no view query's)."""
    out, rows = split_blocks(graph, plan, blocks)
    return out + feed(graph, plan, pipeline, rows, ingest, sink) if rows else out
