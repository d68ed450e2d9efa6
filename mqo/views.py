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
apart: the view queries' results become rows, in ``ts`` order, then view
(registration order), then their members' ids (not the order a join found them in,
which the adaptive join order moves), and are fed, one generation after another (the rows a view's rows make in the
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

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from indexes.kill_bitsets import bitset_of, words_for
from indexes.kill_table import mask_of_flags
from mqo.aggregation.results import AggregateValues
from mqo.batch import MatchBatch
from mqo.results import ResultBlock
from predicates import QueryError
from predicates.catalog import split_role
from predicates.views import ViewDefinition

if TYPE_CHECKING:
    from mqo.aggregation.results import AggregateChunk
    from mqo.pipeline import Pipeline
    from mqo.plan import CompiledPlan


@dataclass
class ViewRows:
    """Rows of one view made together (by results, or by an aggregate's emission), in
    the order made, as columns: ``ts`` and each of the view's columns (None: NULL)."""

    view: str  # the view's name as declared
    ts: Any  # float64 array, or a list of floats
    columns: dict[str, list[Any]]

    def __len__(self) -> int:
        return len(self.ts)


# hands a view's rows of one generation, as a batch of columns with ts and id, to the aggregate queries
Ingest = Callable[[str, Mapping[str, Any]], None]


class ViewGraph:
    """The registered views, in registration order, and the ids their rows take next."""

    def __init__(self) -> None:
        self.views: dict[str, ViewDefinition] = {}  # by lower-case name
        self.next_ids: dict[str, int] = {}
        self._slots: tuple[CompiledPlan, np.ndarray] | None = None  # the view queries' slots of a plan
        self._mask: tuple[CompiledPlan, int] | None = None  # and as a mask

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
        self._slots = self._mask = None

    def remove(self, name: str) -> None:
        del self.views[name.lower()]
        del self.next_ids[name.lower()]
        self._slots = self._mask = None

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

    def view_words(self, plan: CompiledPlan) -> np.ndarray:
        """The view queries' slots of ``plan`` as a bitset (the kernels' words)."""
        return bitset_of(np.flatnonzero(self.view_slots(plan)), words_for(plan.n_slots))

    def view_mask(self, plan: CompiledPlan) -> int:
        """The view queries' slots of ``plan`` as a mask."""
        if self._mask is None or self._mask[0] is not plan:
            self._mask = (plan, mask_of_flags(self.view_slots(plan)))
        return self._mask[1]

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


def aggregate_rows(graph: ViewGraph, chunks: list[AggregateChunk]) -> list[ViewRows]:
    """The rows of aggregate views in ``chunks`` (one emission of one level), one part
    per view in registration order: ``ts`` the window's end, the SELECT values as the
    view's columns, sorted by window end, then group key (NULL first); the parts
    merged by ``ts`` (stably) are in the order the rows are numbered and fed in:
    window end, view, group key (module docstring, rule 2)."""
    by_view: dict[str, list[AggregateChunk]] = {}
    for chunk in chunks:
        by_view.setdefault(chunk.query.lower(), []).append(chunk)
    parts = []
    for name, view in graph.views.items():
        own = by_view.get(name)
        if not own:
            continue
        # each group key's rank among the view's keys (one sort of the distinct keys)
        keys = {key for chunk in own for key in chunk.keys}
        # (without a NULL, the keys' own order, compared in C, is the same order)
        distinct = sorted(keys, key=_key_order) if any(None in key for key in keys) else sorted(keys)
        rank = {key: r for r, key in enumerate(distinct)}
        ranks = np.concatenate(
            [np.array([rank[key] for key in chunk.keys], np.int64)[np.asarray(chunk.codes, np.int64)] for chunk in own]
        )
        ends = np.concatenate([np.asarray(chunk.ends, np.float64) for chunk in own])
        order = np.lexsort((ranks, ends))  # stable: rows of one end and group in the order made
        columns = {
            column.name: AggregateValues.concat([chunk.values[k] for chunk in own]).take(order).tolist()
            for k, column in enumerate(view.schema.columns)
        }
        parts.append(ViewRows(view.name, ends[order], columns))
    return parts


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
) -> tuple[list[ResultBlock], list[ViewRows]]:
    """The result blocks without the view queries' results, and the view rows those
    results make (in ts order, then view, then their members' ids: see the module docstring;
    a part per run of rows of one view)."""
    view_mask = graph.view_mask(plan)
    if not view_mask:  # (only aggregate views: no result is a view row)
        return list(blocks), []
    is_view = graph.view_slots(plan)
    kept: list[ResultBlock] = []
    own: list[ResultBlock] = []
    for block in blocks:
        if isinstance(block.slots, int) and not block.slots & view_mask:
            kept.append(block)  # (most blocks: no view query's, told without their numbers)
            continue
        numbers = block.numbers()
        views = is_view[numbers]
        if not views.any():
            kept.append(block)
            continue
        if not views.all():
            kept.append(ResultBlock(numbers[~views], block.tuples, block.ts))
        own.append(ResultBlock(numbers[views], block.tuples, block.ts))
    if not own:
        return kept, []
    # one order whatever order the joins found them in (the adaptive join order moves
    # with the statistics, so a matcher that has seen other tuples finds them in
    # another): the rows' ids, and a count window over them, depend on the input only
    at = {name: k for k, name in enumerate(graph.views)}
    found = sorted(
        MatchBatch(plan, own).matches(),
        key=lambda m: (m.ts, at[m.query.lower()], sorted((a, i is None, i or 0) for a, i in m.ids.items())),
    )
    parts: list[ViewRows] = []
    for m in found:
        view = graph.views[m.query.lower()]
        if not parts or parts[-1].view != view.name:
            parts.append(ViewRows(view.name, [], {column.name: [] for column in view.schema.columns}))
        part = parts[-1]
        part.ts.append(m.ts)
        for name, values in part.columns.items():
            values.append(m.values.get(name))
    return kept, parts


def feed(
    graph: ViewGraph,
    plan: CompiledPlan,
    pipeline: Pipeline,
    parts: list[ViewRows],
    ingest: Ingest,
    sink: Callable[[str, float, int, dict[str, Any]], None] | None = None,
) -> list[ResultBlock]:
    """Feed view rows in, generation by generation: each generation (the parts' rows
    merged in ``ts`` order, stable) is numbered per view, matched as rows of their
    views and handed to the aggregate queries (``ingest``, a batch per view); the
    match views' results it finds are the next generation. The results to return
    (no view query's). ``sink``, when given, sees every view row as (view, ts, id, values)."""
    out: list[ResultBlock] = []
    while parts:
        ts = np.concatenate([np.asarray(part.ts, np.float64) for part in parts])
        order = np.argsort(ts, kind="stable")  # rows of one ts in the order found (or made)
        names = list(dict.fromkeys(part.view for part in parts))  # the views, as first found
        view_of = np.repeat([names.index(part.view) for part in parts], [len(part) for part in parts])
        # each row's place among its view's rows (its parts one after the other)
        local = np.concatenate([np.arange(len(part)) for part in parts])
        for k in range(len(names)):
            mine = view_of == k
            local[mine] = np.arange(int(mine.sum()))
        view_of, local = view_of[order], local[order]
        batches: dict[str, dict[str, Any]] = {}
        places: list[np.ndarray] = []  # per view, the places in the generation of its rows
        for k, name in enumerate(names):
            at = np.flatnonzero(view_of == k)
            places.append(at)
            first = graph.next_ids[name.lower()]
            graph.next_ids[name.lower()] = first + len(at)
            batch: dict[str, Any] = {"ts": ts[order[at]], "id": np.arange(first, first + len(at), dtype=np.int64)}
            mine = [part for part in parts if part.view == name]
            for column in mine[0].columns:
                batch[column] = _gathered([v for part in mine for v in part.columns[column]], local[at])
            batches[name] = batch
        if sink is not None:
            number = np.empty(len(order), np.int64)
            for at in places:
                number[at] = np.arange(len(at))
            for k, i in zip(view_of.tolist(), number.tolist(), strict=True):
                batch = batches[names[k]]
                values = {column: values[i] for column, values in batch.items() if column not in ("ts", "id")}
                sink(names[k], float(batch["ts"][i]), int(batch["id"][i]), values)
        # each view's rows decided at once (attribute predicates read the row alone), then
        # matched and stored one by one in the generation's order: a row meets the rows before it
        prepared = [pipeline.prepare_derived(plan.stream_number(name), batches[name]) for name in names]
        wanted: list[tuple[int, int, int]] = []  # (place in the generation, view, number among its rows)
        for k, (at, part) in enumerate(zip(places, prepared, strict=True)):
            rows = np.flatnonzero(part.visit_flags())
            wanted += zip(at[rows].tolist(), [k] * len(rows), rows.tolist(), strict=True)
        wanted.sort()
        found: list[ResultBlock] = []
        for _, k, i in wanted:
            found += pipeline.push_derived(prepared[k], i)
        for name in names:
            ingest(name, batches[name])
        kept, parts = split_blocks(graph, plan, found)
        out += kept
    return out


def _key_order(key: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    """How group keys sort: value by value, NULL first."""
    return tuple((v is not None, v) for v in key)


def _gathered(values: list[Any], rows: np.ndarray) -> list[Any]:
    """``values`` at ``rows`` (the values themselves when ``rows`` takes them in order)."""
    if len(rows) == len(values) and not (np.diff(rows) != 1).any():
        return values
    return [values[i] for i in rows.tolist()]


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
    out, parts = split_blocks(graph, plan, blocks)
    return out + feed(graph, plan, pipeline, parts, ingest, sink) if parts else out
