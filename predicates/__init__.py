"""The language layer of mqo: DDL and query parsing, semantic checks, normalization.

Pure Python with no dependency on the rest of mqo. The usual entry points are
:class:`Catalog` (streams from DDL) and :func:`compile` (query text to the query records
the registry keeps, or the front end's positioned error; all or nothing).
:func:`front_end` is the same without caches (both kinds of query);
:func:`compile_queries` gives the match front end's own :class:`NormalizedQuery` objects.
"""

from predicates.aggregate import AggregateQuery
from predicates.ast import Aggregate, BoolLit, ColumnRef, ColumnType, Number, StringLit
from predicates.catalog import Catalog, Column, StreamSchema
from predicates.entry import compile, compile_many, looks_aggregate
from predicates.errors import MqoError, QueryError, Source, Span, did_you_mean
from predicates.frontend import column_order, compile_parsed, compile_queries, front_end, name_queries
from predicates.normalize import (
    DEFAULT_MAX_DISJUNCTS,
    INDEXED_KINDS,
    ColumnKey,
    Conjunct,
    Kind,
    ListKey,
    NormalizedQuery,
    Predicate,
    Residual,
    format_constant,
    most_covering_first,
)
from predicates.parser import parse_ddl, parse_duration, parse_queries, parse_query
from predicates.semantic import BoundQuery, OutputColumn, bind

__all__ = [
    "DEFAULT_MAX_DISJUNCTS",
    "INDEXED_KINDS",
    "Aggregate",
    "AggregateQuery",
    "BoolLit",
    "BoundQuery",
    "Catalog",
    "Column",
    "ColumnKey",
    "ColumnRef",
    "ColumnType",
    "Conjunct",
    "Kind",
    "ListKey",
    "MqoError",
    "NormalizedQuery",
    "Number",
    "OutputColumn",
    "Predicate",
    "QueryError",
    "Residual",
    "Source",
    "Span",
    "StreamSchema",
    "StringLit",
    "bind",
    "column_order",
    "compile",
    "compile_many",
    "compile_parsed",
    "compile_queries",
    "did_you_mean",
    "format_constant",
    "front_end",
    "looks_aggregate",
    "most_covering_first",
    "name_queries",
    "parse_ddl",
    "parse_duration",
    "parse_queries",
    "parse_query",
]
