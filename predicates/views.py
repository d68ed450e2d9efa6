"""Views: ``CREATE VIEW name AS SELECT ...``, a named query other queries read.

A **match view**'s rows are its query's results: ``ts`` the result's (the largest
``ts`` among its tuples), ``id`` 0, 1, 2, ... in the order the rows are made, and one
column per SELECT item. A column is named by its ``AS`` name, else by the column it
reads (``B.pressure`` gives ``pressure``); an expression needs ``AS``. A column
reading a stream's column has that column's type (``ts`` FLOAT, ``id`` INTEGER); an
expression is FLOAT (what a result's value of it is: a double), a string literal STRING.

An **aggregate view** (``CREATE VIEW hot AS SELECT B.auction AS auction, COUNT(*) AS
bids FROM Bid B [RANGE 10 sec SLIDE 5 sec] GROUP BY B.auction``) has one row per
(window, group) its query emits: ``ts`` the window's end, ``id`` in the order made,
a column per SELECT item, named as a match view's are (an aggregate needs ``AS``).
Types: a GROUP BY column its own; ``COUNT`` INTEGER; ``SUM``, ``MIN`` and ``MAX`` the
type of their column; ``AVG``, ``STDDEV``, ``VARIANCE`` and any other expression
FLOAT. ISTREAM/DSTREAM choose which rows it emits. How its rows are clocked:
:mod:`mqo.views`.

A view is a stream of the catalog (:attr:`~predicates.catalog.StreamSchema.view`) from
its registration on; the queries of one text after a ``CREATE VIEW`` are bound against
a copy of the catalog with the view in it (:func:`compile_view`,
:func:`predicates.frontend.front_end`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from predicates.aggregate import AggregateQuery, compile_aggregate
from predicates.ast import Aggregate, ColumnRef, ColumnType, Query, SelectItem, StringLit
from predicates.catalog import IMPLICIT_COLUMNS, Catalog, Column, StreamSchema
from predicates.errors import QueryError
from predicates.normalize import ColumnOrder, normalize
from predicates.records import CompiledQuery, from_normalized
from predicates.semantic import bind

_CREATE_VIEW = re.compile(r"\bcreate\s+view\b", re.IGNORECASE)
_AS = re.compile(r"(?:\s|--[^\n]*(?:\n|$))*as\b", re.IGNORECASE)


def mentions_view(text: str) -> bool:
    """Whether ``text`` may hold a ``CREATE VIEW`` (False: it surely does not)."""
    return "view" in text.lower() and _CREATE_VIEW.search(text) is not None


@dataclass(frozen=True)
class ViewDefinition:
    """A compiled ``CREATE VIEW``: the view's stream (``schema``), the match or
    aggregate query that makes its rows (named as the view), the streams and views it
    reads, and its text."""

    name: str
    schema: StreamSchema
    query: CompiledQuery | AggregateQuery
    reads: tuple[str, ...]
    text: str

    @property
    def aggregate(self) -> bool:
        """Whether its rows are an aggregate query's (one per window and group)."""
        return isinstance(self.query, AggregateQuery)

    def renamed(self, name: str) -> ViewDefinition:
        if name != self.name:
            raise QueryError(f"view {self.name} is named by its CREATE VIEW; it cannot be registered as {name}")
        return self


def compile_view(query: Query, catalog: Catalog, name: str, order: ColumnOrder, max_disjuncts: int) -> ViewDefinition:
    """The view of a parsed ``CREATE VIEW`` (its errors carry their positions)."""
    assert query.view_span is not None
    source = query.source
    if catalog.get(name) is not None:
        kind = "view" if catalog.require(name).view else "stream"
        raise QueryError(f"a {kind} named {name} exists already", source, query.view_span)
    for read in query.from_:
        if read.stream.lower() == name.lower():
            raise QueryError(
                f"view {name} reads itself; a view reads streams and views registered before it (no cycle)",
                source,
                read.span,
            )
    if query.select is None or any(item.star_of is not None for item in query.select):
        raise QueryError(
            f"view {name} must list its columns (SELECT * gives no column names a stream can have)",
            source,
            query.span,
            hint="write SELECT B.pressure AS pressure, H.vib AS vib ...",
        )
    items = _named_items(query, name)
    # the query's own text is what follows AS: a text that compiles back to this query
    text = source.text[query.span.start : query.span.end]
    after_name = source.text[query.view_span.end : query.span.end]
    select_text = after_name[_AS.match(after_name).end() :].strip()  # type: ignore[union-attr]
    if query.is_aggregate:
        aq = compile_aggregate(dataclasses.replace(query, view_span=None), catalog, name, order, max_disjuncts)
        aq = dataclasses.replace(aq, text=select_text)
        names = [item.name or "" for item in items]  # (every item is named by now)
        columns = tuple(Column(n, _aggregate_type(out)) for n, (_, out) in zip(names, aq.outputs, strict=True))
        schema = StreamSchema(name, columns, view=True)
        return ViewDefinition(name, schema, aq, (aq.stream,), text)
    bound = bind(dataclasses.replace(query, select=tuple(items)), catalog, name)
    columns = tuple(Column(out.name, _type_of(out.expr)) for out in bound.outputs)
    compiled = from_normalized(normalize(bound, order, max_disjuncts), text=select_text)
    schema = StreamSchema(name, columns, view=True)
    return ViewDefinition(name, schema, compiled, tuple(dict.fromkeys(bound.streams)), text)


def _named_items(query: Query, name: str) -> list[SelectItem]:
    """The SELECT items, each named (its ``AS``, else the column it reads); a name
    twice, or ``ts``/``id``, is an error."""
    source = query.source
    items: list[SelectItem] = []
    seen: set[str] = set()
    for item in query.select or ():
        column = item.name
        if column is None:
            if not isinstance(item.expr, ColumnRef):
                what = "aggregate" if isinstance(item.expr, Aggregate) else "expression"
                raise QueryError(f"a column of view {name} needs a name: add AS name to this {what}", source, item.span)
            column = item.expr.name
        if column.lower() in IMPLICIT_COLUMNS:
            raise QueryError(
                f"view {name} cannot have a column named {column}: its rows' ts and id are their own",
                source,
                item.span,
                hint=f"a row's ts is its result's and its id its number; rename it, e.g. AS {column}_of",
            )
        if column.lower() in seen:
            raise QueryError(f"view {name} has two columns named {column}; rename one with AS", source, item.span)
        seen.add(column.lower())
        items.append(dataclasses.replace(item, name=column))
    return items


def _aggregate_type(expr: object) -> ColumnType:
    """The type of an aggregate view's column (module docstring)."""
    if isinstance(expr, Aggregate):
        if expr.func == "COUNT":
            return ColumnType.INTEGER
        if expr.func in ("SUM", "MIN", "MAX") and isinstance(expr.arg, ColumnRef) and expr.arg.ctype is not None:
            return expr.arg.ctype
        return ColumnType.FLOAT
    return _type_of(expr)


def _type_of(expr: object) -> ColumnType:
    if isinstance(expr, ColumnRef) and expr.ctype is not None:
        return expr.ctype  # (``ts`` FLOAT, ``id`` INTEGER: the implicit columns' types)
    if isinstance(expr, StringLit):
        return ColumnType.STRING
    return ColumnType.FLOAT


__all__ = ["ViewDefinition", "compile_view", "mentions_view"]
