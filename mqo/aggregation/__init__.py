"""Shared windowed aggregation (the aggregation issue): many CQL/CSQL aggregate
queries over one set of stream slices. See :mod:`mqo.aggregation.aggregator`."""

from __future__ import annotations

from mqo.aggregation.aggregator import Aggregator
from mqo.aggregation.results import AggregateBatch, AggregateRow
from predicates.aggregate import AggregateQuery

__all__ = ["AggregateBatch", "AggregateQuery", "AggregateRow", "Aggregator"]
