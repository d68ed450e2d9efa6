"""Shared windowed aggregation (the aggregation issue): many CQL/CSQL aggregate
queries over one set of stream slices. See :mod:`mqo.aggregation.aggregator`."""

from __future__ import annotations

import re

from mqo.aggregation.aggregator import Aggregator
from mqo.aggregation.results import AggregateBatch, AggregateRow
from predicates import Catalog
from predicates.aggregate import AggregateQuery, compile_aggregate
from predicates.frontend import name_queries
from predicates.normalize import ColumnOrder
from predicates.parser import parse_queries

__all__ = ["AggregateBatch", "AggregateQuery", "AggregateRow", "Aggregator", "aggregate_piece", "looks_aggregate"]

# a cheap look for what only aggregate queries have, before the fast match compiler
_LOOKS_AGGREGATE = re.compile(
    r"\[|\bgroup\s+by\b|\bhaving\b|\b(?:count|sum|avg|min|max|stddev|variance)\s*\(", re.IGNORECASE
)


def looks_aggregate(text: str) -> bool:
    # substring tests first: registering ten thousand match queries should not cost a
    # case-insensitive regular expression search over each of them
    if "[" not in text and "(" not in text:
        lower = text.lower()
        if "group" not in lower and "having" not in lower:
            return False
    return _LOOKS_AGGREGATE.search(text) is not None


def aggregate_piece(
    text: str, catalog: Catalog, position: int, source_name: str, order: ColumnOrder, max_disjuncts: int
) -> AggregateQuery | None:
    """The aggregate query of one query text, or None when it is a match query."""
    if not looks_aggregate(text):
        return None
    queries = parse_queries(text, source_name, first_position=position)
    if len(queries) != 1 or not queries[0].is_aggregate:
        return None
    (name,) = name_queries(queries, first_position=position)
    return compile_aggregate(queries[0], catalog, name, order, max_disjuncts)
