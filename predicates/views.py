"""Views: ``CREATE VIEW name AS SELECT ...``, a named match query other queries read.

A view's rows are its query's results: ``ts`` the result's (the largest ``ts`` among
its tuples), ``id`` 0, 1, 2, ... in the order the rows are made, and one column per
SELECT item. A column is named by its ``AS`` name, else by the column it reads
(``B.pressure`` gives ``pressure``); an expression needs ``AS``. A column reading a
stream's column has that column's type (``ts`` FLOAT, ``id`` INTEGER); an expression
is FLOAT (what a result's value of it is: a double), a string literal STRING.

A view is a stream of the catalog (:attr:`~predicates.catalog.StreamSchema.view`) from
its registration on; the queries of one text after a ``CREATE VIEW`` are bound against
a copy of the catalog with the view in it (:func:`compile_view`,
:func:`predicates.frontend.front_end`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from predicates.ast import ColumnRef, ColumnType, Query, SelectItem, StringLit
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
    """A compiled ``CREATE VIEW``: the view's stream (``schema``), the match query that
    makes its rows (named as the view), the streams and views it reads, and its text."""

    name: str
    schema: StreamSchema
    query: CompiledQuery
    reads: tuple[str, ...]
    text: str

    def renamed(self, name: str) -> ViewDefinition:
        if name != self.name:
            raise QueryError(f"view {self.name} is named by its CREATE VIEW; it cannot be registered as {name}")
        return self


def compile_view(query: Query, catalog: Catalog, name: str, order: ColumnOrder, max_disjuncts: int) -> ViewDefinition:
    """The view of a parsed ``CREATE VIEW`` (its errors carry their positions)."""
    assert query.view_span is not None
    source = query.source
    if query.is_aggregate:
        raise QueryError(
            f"view {name} is an aggregate query; a view is a match query (aggregate views are not supported yet)",
            source,
            query.view_span,
            hint="aggregate over a view instead: CREATE VIEW v AS SELECT ...; SELECT AVG(v.x) FROM v [RANGE ...]",
        )
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
    items: list[SelectItem] = []
    seen: dict[str, SelectItem] = {}
    for item in query.select:
        column = item.name
        if column is None:
            if not isinstance(item.expr, ColumnRef):
                raise QueryError(
                    f"a column of view {name} needs a name: add AS name to this expression", source, item.span
                )
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
        named = dataclasses.replace(item, name=column)
        seen[column.lower()] = named
        items.append(named)
    bound = bind(dataclasses.replace(query, select=tuple(items)), catalog, name)
    columns = tuple(Column(out.name, _type_of(out.expr)) for out in bound.outputs)
    text = source.text[query.span.start : query.span.end]
    # the query's own text is what follows AS: a text that compiles back to this query
    after_name = source.text[query.view_span.end : query.span.end]
    select_text = after_name[_AS.match(after_name).end() :].strip()  # type: ignore[union-attr]
    compiled = from_normalized(normalize(bound, order, max_disjuncts), text=select_text)
    schema = StreamSchema(name, columns, view=True)
    return ViewDefinition(name, schema, compiled, tuple(dict.fromkeys(bound.streams)), text)


def _type_of(expr: object) -> ColumnType:
    if isinstance(expr, ColumnRef) and expr.ctype is not None:
        return expr.ctype  # (``ts`` FLOAT, ``id`` INTEGER: the implicit columns' types)
    if isinstance(expr, StringLit):
        return ColumnType.STRING
    return ColumnType.FLOAT


__all__ = ["ViewDefinition", "compile_view", "mentions_view"]
