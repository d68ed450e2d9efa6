"""From query text to normalized queries, all or nothing.

:func:`compile_queries` is what every entry point (Python API, CLI, Spark stage) uses:
it parses a text of one or more queries, names each one (its ``Query ID:`` header, or
its 1-based position), binds and normalizes them, and either returns all of them or
raises the first :class:`~predicates.errors.QueryError`, naming the query it is in.
"""

from __future__ import annotations

from collections.abc import Container

from predicates.aggregate import AggregateQuery, compile_aggregate
from predicates.ast import Query
from predicates.catalog import Catalog, split_role
from predicates.errors import QueryError
from predicates.normalize import DEFAULT_MAX_DISJUNCTS, ColumnKey, ColumnOrder, NormalizedQuery, normalize
from predicates.parser import parse_queries
from predicates.records import CompiledQuery, from_normalized
from predicates.semantic import bind
from predicates.tables import TableDefinition, TableQuery, compile_table_query, declare, reads_tables, split_tables
from predicates.views import ViewDefinition, compile_view

FrontEndRecord = CompiledQuery | AggregateQuery | ViewDefinition | TableDefinition | TableQuery


def column_order(catalog: Catalog) -> ColumnOrder:
    """Canonical order of columns: stream declaration order, then role (a stream's
    first alias in FROM before its second, :func:`predicates.catalog.role_name`), then
    column order (declared columns first, then ``ts``, then ``id``)."""
    stream_rank = {name.lower(): i for i, name in enumerate(catalog.names())}

    def order(col: ColumnKey) -> tuple[int, int, int, str]:
        stream, role = split_role(col.stream)
        schema = catalog.get(stream)
        rank = stream_rank.get(stream.lower(), len(stream_rank))
        if schema is None:
            return (rank, role, 0, col.column)
        index = schema.index_of(col.column)
        if index is None:
            index = len(schema.columns) + (0 if col.column == "ts" else 1)
        return (rank, role, index, col.column)

    return order


def name_queries(queries: list[Query], *, first_position: int = 1, taken: Container[str] = ()) -> list[str]:
    """The id of each query; raises QueryError on an id given twice or ``taken``."""
    names: list[str] = []
    seen: dict[str, Query] = {}
    for i, query in enumerate(queries):
        name = query.name if query.name is not None else str(first_position + i)
        where = query.name_span if query.name_span is not None else query.span
        if name in seen:
            first = seen[name]
            line = first.source.line_col(first.span.start)[0]
            raise QueryError(
                f"query id {name} is given twice",
                query.source,
                where,
                hint=f"the first query with this id starts at line {line}"
                + ("" if query.name is not None else "; a query without a 'Query ID:' header is named by its position"),
            )
        if name in taken:
            raise QueryError(f"query id {name} is already registered", query.source, where)
        seen[name] = query
        names.append(name)
    return names


def compile_parsed(
    queries: list[Query],
    catalog: Catalog,
    names: list[str],
    *,
    max_disjuncts: int = DEFAULT_MAX_DISJUNCTS,
) -> list[NormalizedQuery]:
    order = column_order(catalog)
    return [normalize(bind(q, catalog, name), order, max_disjuncts) for q, name in zip(queries, names, strict=True)]


def compile_queries(
    text: str,
    catalog: Catalog,
    *,
    source_name: str = "<string>",
    first_position: int = 1,
    taken: Container[str] = (),
    max_disjuncts: int = DEFAULT_MAX_DISJUNCTS,
) -> list[NormalizedQuery]:
    """Parse, name, bind and normalize every query of ``text`` (all or nothing); an
    aggregate query is an error here (:func:`front_end` takes both kinds)."""
    queries, names = _parsed(text, source_name, first_position, taken)
    return compile_parsed(queries, catalog, names, max_disjuncts=max_disjuncts)


def front_end(
    text: str,
    catalog: Catalog,
    *,
    source_name: str = "<string>",
    first_position: int = 1,
    taken: Container[str] = (),
    max_disjuncts: int = DEFAULT_MAX_DISJUNCTS,
) -> list[FrontEndRecord]:
    """Every query of ``text`` as the record :func:`predicates.compile` gives, of all
    kinds, with no cache (all or nothing; errors carry their position in ``text``). The
    queries after a ``CREATE VIEW`` read the view as a stream; a text's ``CREATE TABLE``
    statements come first (:mod:`predicates.tables`) and all its queries read them."""
    queries_text, tables = split_tables(text, source_name)
    catalog = declare(tables, catalog, source_name, text)
    queries, names = _parsed(queries_text, source_name, first_position, taken)
    order = column_order(catalog)
    out: list[FrontEndRecord] = [*tables]
    for q, name in zip(queries, names, strict=True):
        if reads_tables(q, catalog):
            out.append(compile_table_query(q, catalog, name, order, max_disjuncts))
        elif q.view_span is not None:
            view = compile_view(q, catalog, name, order, max_disjuncts)
            out.append(view)
            catalog = catalog.with_view(view.schema)
            order = column_order(catalog)
        elif q.is_aggregate:
            out.append(compile_aggregate(q, catalog, name, order, max_disjuncts))
        else:
            out.append(from_normalized(normalize(bind(q, catalog, name), order, max_disjuncts)))
    return out


def _parsed(text: str, source_name: str, first_position: int, taken: Container[str]) -> tuple[list[Query], list[str]]:
    queries = parse_queries(text, source_name, first_position=first_position)
    return queries, name_queries(queries, first_position=first_position, taken=taken)
