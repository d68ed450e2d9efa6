"""Views: named match queries whose results are a stream other queries read.

A view (``CREATE VIEW pairs AS SELECT ...``, :mod:`predicates.views`) is registered as
a match query named as the view, and its stream is declared in the catalog after the
declared streams. Its work is done once however many queries read it: the engine
matches the view's query like any other, and each of its results becomes a row of the
view's stream (``ts`` the result's, ``id`` 0, 1, 2, ... in the order the rows are made,
the SELECT values as columns), which is matched against every query reading the view,
sharing their predicates over its columns as over any stream's (:func:`derive`). So
views over views, joins of views with streams, and aggregates over views all follow.

**Order and time.** The results found by one incoming tuple are taken apart: the view
queries' results become rows, in ``ts`` order (stable: in the order found), and are
fed, one generation after another (the rows a view's rows make in the views reading it
come after all of them), before the call returns; results of view queries are not
returned (``mqo match --output-view NAME`` writes them). A view's stream has no clock
of its own: a result found by a tuple that is not late has ``ts`` at or after the
watermark (its newest member's ts is at least the tuple's; docs/ARCHITECTURE.md,
"Ordered emission"), so a view row is never late and nothing it could meet has been
purged; its rows are matched without the clock (its watermark is its inputs'). This is
why a batch is matched row by row when views are registered (a row's view rows are fed
before the next row moves the watermark), and why views need ``emit='arrival'`` (under
``emit='ordered'`` results leave behind the watermark).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from mqo.batch import MatchBatch
from mqo.engine import ResultBlock
from predicates import QueryError
from predicates.catalog import split_role
from predicates.views import ViewDefinition

if TYPE_CHECKING:
    from mqo.pipeline import Pipeline
    from mqo.plan import CompiledPlan

# a view row made by a result: (ts, view name, values)
ViewRow = tuple[float, str, dict[str, Any]]


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


def check_emit(config_emit: str, view: ViewDefinition) -> None:
    if config_emit != "arrival":
        raise QueryError(
            f"view {view.name} needs emit='arrival': under emit='ordered' results leave once the watermark "
            "has passed them, too late to be a stream other queries match",
            None,
            None,
        )


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


def derive(
    graph: ViewGraph,
    plan: CompiledPlan,
    pipeline: Pipeline,
    blocks: list[ResultBlock],
    ingest: Callable[[str, float, dict[str, Any], int], None],
    sink: Callable[[str, float, int, dict[str, Any]], None] | None = None,
) -> list[ResultBlock]:
    """The results of ``blocks`` (found by one incoming tuple) with every view row they
    make fed in, generation by generation in ``ts`` order: the results to return (no
    view query's). ``ingest`` hands a view row to the aggregate queries; ``sink``, when
    given, sees every view row as (view, ts, id, values)."""
    out, rows = split_blocks(graph, plan, blocks)
    while rows:
        rows.sort(key=lambda row: row[0])  # stable: rows of one ts in the order found
        found: list[ResultBlock] = []
        for ts, name, values in rows:
            view = graph.views[name.lower()]
            row_id = graph.next_ids[name.lower()]
            graph.next_ids[name.lower()] = row_id + 1
            if sink is not None:
                sink(view.name, ts, row_id, values)
            found += pipeline.push_derived(plan.stream_number(view.name), ts, values, row_id)
            ingest(view.name, ts, values, row_id)
        kept, rows = split_blocks(graph, plan, found)
        out += kept
    return out
