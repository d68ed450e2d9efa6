"""The exact reference of views (README, "Views"): a view's rows recomputed from its
definition with the exact reference (:mod:`tests.references.reference`), sharing no
code with the engine (it imports nothing from ``mqo``, ``predicates``, ``indexes`` or
``runtime``).

The rules, on top of the reference's:

1. ``CREATE VIEW v AS <query>`` registers ``<query>`` under the id ``v``: its results
   are those of that query registered at that point (rule 6: from the horizon on).
2. Each result of ``v`` is a row of the stream ``v``: ``ts`` the result's, ``id`` the
   number of rows ``v`` made before, a column per SELECT item (named by the item's
   name, else by the column it reads; a column reading a stream's column has its type,
   ``ts`` FLOAT and ``id`` INTEGER, an expression FLOAT) holding the result's value.
3. The results found by one tuple are taken apart: those of views become rows, sorted
   by ts (stable), and each is matched as a tuple of its view's stream arriving then,
   one generation after another (rows made by view rows come after all of them); a
   view row is never late and moves no clock (a view's time is its inputs'). View
   results are not reported.
4. Queries read a view like a stream (rule 7), aggregates over a view read its rows in
   the order made (:func:`view_rows`).

Aggregate views (:class:`AggView`, ``CREATE VIEW v AS SELECT ... FROM s [RANGE d SLIDE
w] ... GROUP BY ...``):

5. Rows: per window ``(k*w - d, k*w]`` and group of the rows of ``s`` in it that pass
   WHERE (a declared stream's rows: its tuples that are not late; a view's: all its
   rows), one row with ``ts = k*w``, the group columns and the aggregates (exact:
   COUNT, SUM, MIN, MAX as the values are; AVG of integers the double nearest the
   quotient). A view created when the newest ts of any declared stream (tuples and
   heartbeats) is ``R`` has the windows starting at or after ``R``. ISTREAM keeps a
   group's row when the group was absent from window ``k - 1`` or had other values;
   DSTREAM gives, at window ``k``, a row per group of window ``k - 1`` absent from it,
   with that group's previous values (windows before the view's first are empty).
6. A stream's level: 0 declared, a match view's its inputs' highest, an aggregate
   view's one more than its input's. After every push (late or not), heartbeat and
   idle declaration, with watermark ``W``: level by level, the windows ending before
   ``W`` not given yet (at ``flush``: all) are given; a level's rows are sorted by ts,
   then view (creation order), then group key (NULL first), numbered, and fed in as
   rule 3 feeds a generation. The reference keeps every tuple (a row behind ``W``
   meets every stored tuple within MAXWINDOW of it).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tests.references.exact_language import FLOAT, INTEGER, Col, Column, Item, Query, Schema, Stream, exact
from tests.references.exact_relations import HOLDS
from tests.references.reference import Reference, Result


@dataclass(frozen=True)
class View:
    """``CREATE VIEW query.name AS query`` (every SELECT item a named item)."""

    query: Query

    @property
    def name(self) -> str:
        return self.query.name

    def columns(self, schema: Schema) -> list[tuple[str, Any]]:
        """(column name, SELECT expression) in order."""
        assert self.query.select is not None, "a view lists its columns"
        out = []
        for item in self.query.select:
            assert isinstance(item, Item)
            name = item.name if item.name else item.col.name  # type: ignore[union-attr]
            out.append((name, item.col))
        return out

    def stream(self, schema: Schema) -> Stream:
        """The view's stream (rule 2)."""
        sources = dict(self.query.sources)
        cols = []
        for name, expr in self.columns(schema):
            if isinstance(expr, Col):
                if expr.name == "ts":
                    ctype = FLOAT
                elif expr.name == "id":
                    ctype = INTEGER
                else:
                    ctype = schema.stream(sources[expr.alias]).column(expr.name).type
            else:
                ctype = FLOAT
            cols.append(Column(name, ctype))
        return Stream(self.name, tuple(cols))

    def to_text(self) -> str:
        return f"CREATE VIEW {self.name} AS\n" + self.query.to_text(header=False)


@dataclass(frozen=True)
class AggView:
    """``CREATE VIEW name AS SELECT [op] s.g AS g, ..., FUNC(s.c) AS out, ... FROM
    source s [RANGE range_ SLIDE slide] [WHERE s.c op k AND ...] [GROUP BY s.g, ...]``."""

    name: str
    source: str
    range_: Fraction
    slide: Fraction
    group_by: tuple[str, ...]
    calls: tuple[tuple[str, str, str | None], ...]  # (column name, func, column read or None for COUNT(*))
    where: tuple[tuple[str, str, str], ...] = ()  # (column, op, literal as written)
    op: str = "RSTREAM"

    def columns(self, source: Stream) -> tuple[Column, ...]:
        types = {c.name: c.type for c in source.columns}
        out = [Column(g, types[g]) for g in self.group_by]
        for name, func, column in self.calls:
            if func == "COUNT":
                out.append(Column(name, INTEGER))
            elif func in ("SUM", "MIN", "MAX"):
                out.append(Column(name, types[column]))  # type: ignore[index]
            else:
                out.append(Column(name, FLOAT))
        return tuple(out)

    def to_text(self) -> str:
        def seconds(x: Fraction) -> str:
            return f"{x.numerator} sec" if x.denominator == 1 else f"{float(x)!r} sec"

        items = [f"s.{g} AS {g}" for g in self.group_by]
        items += [f"{func}({'*' if col is None else 's.' + col}) AS {name}" for name, func, col in self.calls]
        op = "" if self.op == "RSTREAM" else self.op + " "
        text = f"CREATE VIEW {self.name} AS\nSELECT {op}{', '.join(items)}\n"
        text += f"FROM {self.source} s [RANGE {seconds(self.range_)} SLIDE {seconds(self.slide)}]"
        if self.where:
            text += " WHERE " + " AND ".join(f"s.{c} {o} {k}" for c, o, k in self.where)
        if self.group_by:
            text += " GROUP BY " + ", ".join(f"s.{g}" for g in self.group_by)
        return text + ";"


@dataclass
class _AggState:
    view: AggView
    since: Fraction | None  # windows start at or after it (None: every window)
    given: set[int]  # the windows given so far (their k)
    level: int


class ViewReference(Reference):
    """The exact reference with views (rules 1-4)."""

    def __init__(self, schema: Schema, allowed_lateness: Any = 0, **settings: Any) -> None:
        super().__init__(schema, allowed_lateness, **settings)
        self.base = schema
        self.views: dict[str, View] = {}
        self.view_ids: dict[str, int] = {}
        self.rows: dict[str, list[tuple[Fraction, int, dict[str, Any]]]] = {}  # per view, in the order made
        self.aggs: dict[str, _AggState] = {}  # aggregate views, in creation order
        # every row an aggregate view reads, per stream or view: (ts, row) in arrival order
        self.history: dict[str, list[tuple[Fraction, dict[str, Any]]]] = {}

    def create_view(self, view: View) -> str:
        stream = view.stream(self.schema)
        self.schema = Schema((*self.schema.streams, stream))
        self.stored[view.name], self.stamps[view.name] = [], []
        self.views[view.name] = view
        self.view_ids[view.name] = 0
        self.rows[view.name] = []
        return self.register(view.query)

    def create_agg_view(self, view: AggView) -> None:
        """Rules 5 and 6: the view's stream, its windows from the newest ts on."""
        stream = Stream(view.name, view.columns(self.schema.stream(view.source)))
        self.schema = Schema((*self.schema.streams, stream))
        self.stored[view.name], self.stamps[view.name] = [], []
        self.view_ids[view.name] = 0
        self.rows[view.name] = []
        newest = [t for t in self.newest.values() if t is not None]
        self.aggs[view.name] = _AggState(view, max(newest) if newest else None, set(), 1 + self._level(view.source))
        self.history.setdefault(view.source, [])
        self.prune = False  # rule 6: rows behind the watermark meet every stored tuple

    def _level(self, stream: str) -> int:
        if stream in self.aggs:
            return self.aggs[stream].level
        if stream in self.views:
            return max((self._level(s) for _, s in self.views[stream].query.sources), default=0)
        return 0

    def drop_view(self, name: str) -> None:
        if name in self.aggs:
            del self.aggs[name]
            self.schema = Schema(tuple(s for s in self.schema.streams if s.name != name))
            del self.stored[name], self.stamps[name]
            return
        self.unregister(name)
        del self.views[name]
        self.schema = Schema(tuple(s for s in self.schema.streams if s.name != name))
        del self.stored[name], self.stamps[name]

    def push(
        self, stream: str, ts: float, values: Mapping[str, Any] | None = None, id: int | None = None
    ) -> list[Result]:
        assert stream not in self.views and stream not in self.aggs, "a view's rows come from its query"
        late = self.late_count
        found = super().push(stream, ts, values, id)
        if stream in self.history and self.late_count == late:  # rule 5: its tuples that are not late
            row = {c.name: exact((values or {}).get(c.name), c.type) for c in self.schema.stream(stream).columns}
            self.history[stream].append((exact(ts), row))
        return self._fed(found) + self._emit()

    def heartbeat(self, ts: float, stream: str | None = None) -> list[Result]:  # type: ignore[override]
        if stream is None:  # every declared stream (a view has no clock)
            for name in [s.name for s in self.base.streams]:
                super().heartbeat(ts, name)
        else:
            super().heartbeat(ts, stream)
        return self._emit()

    def flush(self) -> list[Result]:
        """End of input: every aggregate view's windows holding data (rule 6)."""
        return self._emit(flush=True)

    def _fed(self, results: Sequence[Result]) -> list[Result]:
        rows = [(r.ts, r.query, self._match_values(r)) for r in results if r.query in self.views]
        return [r for r in results if r.query not in self.views] + self._feed(rows)

    def _feed(self, rows: list[tuple[Fraction, str, dict[str, Any]]]) -> list[Result]:
        """Rule 3: generation after generation, each in ts order (stable)."""
        out: list[Result] = []
        while rows:
            rows.sort(key=lambda r: r[0])
            found: list[Result] = []
            for ts, name, values in rows:
                found += self._view_row(ts, name, values)
            out += [r for r in found if r.query not in self.views]
            rows = [(r.ts, r.query, self._match_values(r)) for r in found if r.query in self.views]
        return out

    def _match_values(self, result: Result) -> dict[str, Any]:
        view = self.views[result.query]
        values = dict(result.values)
        return {col: values[self._output(view, col, expr)] for col, expr in view.columns(self.schema)}

    def _view_row(self, ts: Fraction, name: str, values: dict[str, Any]) -> list[Result]:
        """A view's row as a tuple of its stream (rules 2 and 3)."""
        row: dict[str, Any] = dict(values)
        row["ts"] = ts
        row["id"] = self.view_ids[name]
        self.view_ids[name] += 1
        self.rows[name].append((ts, row["id"], dict(values)))
        if name in self.history:
            self.history[name].append((ts, row))
        found: list[Result] = []
        for reg in list(self.queries.values()):
            if name in reg.query.streams:
                found += self._results(reg, name, row)
        at = bisect.bisect_right(self.stamps[name], ts)
        self.stamps[name].insert(at, ts)
        self.stored[name].insert(at, row)
        return found

    # ------------------------------------------------------------ aggregate views

    def _emit(self, flush: bool = False) -> list[Result]:
        """Rule 6: level by level, the windows ending before the watermark (all at ``flush``)."""
        if not self.aggs or (self.watermark is None and not flush):
            return []
        out: list[Result] = []
        for level in sorted({a.level for a in self.aggs.values()}):
            keyed = []
            for order, state in enumerate(self.aggs.values()):
                if state.level == level:
                    for ts, key, values in self._windows(state, None if flush else self.watermark):
                        keyed.append((ts, order, key, state.view.name, values))
            keyed.sort(key=lambda r: r[:3])
            out += self._feed([(ts, name, values) for ts, _, _, name, values in keyed])
        return out

    def _windows(self, state: _AggState, before: Fraction | None) -> list[tuple[Fraction, Any, dict[str, Any]]]:
        """The rows of the windows of ``state`` ending before ``before`` (None: all) not given yet."""
        view = state.view
        members = [(t, row) for t, row in self.history[view.source] if self._passes(view, row)]
        ks: set[int] = set()
        for t, _ in members:
            ks.update(range(math.ceil(t / view.slide), math.ceil((t + view.range_) / view.slide)))
        if view.op == "DSTREAM":
            ks |= {k + 1 for k in ks}
        out = []
        for k in sorted(ks):
            end = k * view.slide
            if k in state.given or (before is not None and not end < before):
                continue
            if state.since is not None and end - view.range_ < state.since:
                continue
            state.given.add(k)
            now, previous = self._relation(state, members, k), self._relation(state, members, k - 1)
            if view.op == "RSTREAM":
                rows = now
            elif view.op == "ISTREAM":
                rows = {g: v for g, v in now.items() if g not in previous or previous[g] != v}
            else:
                rows = {g: v for g, v in previous.items() if g not in now}
            for group, values in rows.items():
                key = tuple((v is not None, v) for v in group)
                out.append((end, key, values))
        return out

    def _relation(self, state: _AggState, members: list[tuple[Fraction, dict[str, Any]]], k: int) -> dict:
        """Window ``k``'s groups and their rows' values (empty before the view's first window)."""
        view = state.view
        end = k * view.slide
        start = end - view.range_
        if state.since is not None and start < state.since:
            return {}
        groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for t, row in members:
            if start < t <= end:
                groups.setdefault(tuple(row[g] for g in view.group_by), []).append(row)
        out = {}
        for group, rows in groups.items():
            values: dict[str, Any] = dict(zip(view.group_by, group, strict=True))
            for name, func, column in view.calls:
                values[name] = _aggregate(func, [] if column is None else [r[column] for r in rows], len(rows))
            out[group] = values
        return out

    @staticmethod
    def _passes(view: AggView, row: dict[str, Any]) -> bool:
        for column, op, literal in view.where:
            value = row[column]
            if value is None or not HOLDS[op](value, Fraction(literal)):
                return False
        return True

    @staticmethod
    def _output(view: View, col: str, expr: Any) -> str:
        """The name the view query's result gives the value of column ``col``."""
        for item in view.query.select or ():
            if isinstance(item, Item) and item.col == expr:
                return item.output
        return col


def _aggregate(func: str, values: list[Any], count: int) -> Any:
    """An aggregate of exact values (None skipped) as the view's row holds it (rule 5)."""
    if func == "COUNT":
        return count
    present = [v for v in values if v is not None]
    if not present:
        return None
    if func == "SUM":
        return sum(present, Fraction(0))
    if func == "MIN":
        return min(present)
    if func == "MAX":
        return max(present)
    assert func == "AVG"
    return exact(float(sum(present, Fraction(0)) / len(present)), FLOAT)  # the double nearest the quotient


def view_rows(reference: ViewReference, name: str) -> list[tuple[float, dict[str, Any]]]:
    """A view's rows in the order made, as (ts, values) with numbers as doubles (what
    :func:`tests.references.agg_reference.evaluate` reads)."""
    types = {c.name: c.type for c in reference.schema.stream(name).columns}

    def number(column: str, v: Any) -> Any:
        if not isinstance(v, Fraction):
            return v
        return int(v) if types[column] == INTEGER else float(v)

    return [(float(ts), {k: number(k, v) for k, v in values.items()}) for ts, _, values in reference.rows[name]]
