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
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tests.references.exact_language import FLOAT, INTEGER, Col, Column, Item, Query, Schema, Stream
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


class ViewReference(Reference):
    """The exact reference with views (rules 1-4)."""

    def __init__(self, schema: Schema, allowed_lateness: Any = 0, **settings: Any) -> None:
        super().__init__(schema, allowed_lateness, **settings)
        self.base = schema
        self.views: dict[str, View] = {}
        self.view_ids: dict[str, int] = {}
        self.rows: dict[str, list[tuple[Fraction, int, dict[str, Any]]]] = {}  # per view, in the order made

    def create_view(self, view: View) -> str:
        stream = view.stream(self.schema)
        self.schema = Schema((*self.schema.streams, stream))
        self.stored[view.name], self.stamps[view.name] = [], []
        self.views[view.name] = view
        self.view_ids[view.name] = 0
        self.rows[view.name] = []
        return self.register(view.query)

    def drop_view(self, name: str) -> None:
        self.unregister(name)
        del self.views[name]
        self.schema = Schema(tuple(s for s in self.schema.streams if s.name != name))
        del self.stored[name], self.stamps[name]

    def push(
        self, stream: str, ts: float, values: Mapping[str, Any] | None = None, id: int | None = None
    ) -> list[Result]:
        assert stream not in self.views, "a view's rows come from its query"
        return self._fed(super().push(stream, ts, values, id))

    def heartbeat(self, ts: float, stream: str | None = None) -> None:
        if stream is None:  # every declared stream (a view has no clock)
            for name in [s.name for s in self.base.streams]:
                super().heartbeat(ts, name)
        else:
            super().heartbeat(ts, stream)

    def _fed(self, results: Sequence[Result]) -> list[Result]:
        out = [r for r in results if r.query not in self.views]
        rows = [r for r in results if r.query in self.views]
        while rows:
            rows.sort(key=lambda r: r.ts)
            found: list[Result] = []
            for r in rows:
                found += self._view_row(r)
            out += [r for r in found if r.query not in self.views]
            rows = [r for r in found if r.query in self.views]
        return out

    def _view_row(self, result: Result) -> list[Result]:
        """A view's result as a tuple of its stream (rules 2 and 3)."""
        name = result.query
        view = self.views[name]
        values = dict(result.values)
        row: dict[str, Any] = {col: values[self._output(view, col, expr)] for col, expr in view.columns(self.schema)}
        row["ts"] = result.ts
        row["id"] = self.view_ids[name]
        self.view_ids[name] += 1
        self.rows[name].append((result.ts, row["id"], {k: v for k, v in row.items() if k not in ("ts", "id")}))
        found: list[Result] = []
        for reg in list(self.queries.values()):
            if name in reg.query.streams:
                found += self._results(reg, name, row)
        at = bisect.bisect_right(self.stamps[name], result.ts)
        self.stamps[name].insert(at, result.ts)
        self.stored[name].insert(at, row)
        return found

    @staticmethod
    def _output(view: View, col: str, expr: Any) -> str:
        """The name the view query's result gives the value of column ``col``."""
        for item in view.query.select or ():
            if isinstance(item, Item) and item.col == expr:
                return item.output
        return col


def view_rows(reference: ViewReference, name: str) -> list[tuple[float, dict[str, Any]]]:
    """A view's rows in the order made, as (ts, values) with numbers as doubles (what
    :func:`tests.references.agg_reference.evaluate` reads)."""
    types = {c.name: c.type for c in reference.schema.stream(name).columns}

    def number(column: str, v: Any) -> Any:
        if not isinstance(v, Fraction):
            return v
        return int(v) if types[column] == INTEGER else float(v)

    return [(float(ts), {k: number(k, v) for k, v in values.items()}) for ts, _, values in reference.rows[name]]
