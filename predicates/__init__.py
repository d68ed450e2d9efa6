"""The language layer of mqo: DDL and query parsing, semantic checks, normalization.

No dependency on the rest of mqo. The entry points are :class:`Catalog` (streams from
DDL) and :func:`compile` (query text to the query records the registry keeps, or the
parser's positioned error; all or nothing), with :func:`compile_many` its form for a
list of texts and :func:`compile_read` for texts the template cache reads whole (a
query file's parts, :mod:`predicates.query_file`). There is one reader of the language (:mod:`predicates.lexer`,
:mod:`predicates.parser`, :mod:`predicates.semantic`, :mod:`predicates.normalize`,
put together in :mod:`predicates.frontend`); what comes before it are caches keyed on
what the lexer reads (:mod:`predicates.template_cache`, :mod:`predicates.token_cache`).
"""

from predicates.aggregate import AggregateQuery
from predicates.ast import Aggregate, BoolLit, ColumnRef, ColumnType, Negate, Number, StringLit
from predicates.catalog import Catalog, Column, StreamSchema, split_role
from predicates.entry import compile, compile_many, compile_read
from predicates.errors import MqoError, QueryError, Source, Span, did_you_mean
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
from predicates.numbers import to_float
from predicates.parser import parse_ddl, parse_duration, parse_queries, parse_query
from predicates.semantic import BoundQuery, OutputColumn, bind
from predicates.tables import split_tables

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
    "Negate",
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
    "compile",
    "compile_many",
    "compile_read",
    "did_you_mean",
    "format_constant",
    "most_covering_first",
    "parse_ddl",
    "parse_duration",
    "parse_queries",
    "parse_query",
    "split_role",
    "split_tables",
    "to_float",
]
