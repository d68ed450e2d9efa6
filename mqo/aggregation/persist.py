"""The aggregator's state in a matcher snapshot (:meth:`mqo.Matcher.snapshot`).

A snapshot holds the aggregate queries as text (with their names, registration
horizons, next windows and the stores they read), the shared filters (their keys,
names and texts, so the restored private pipeline numbers them alike) and, pickled,
the slice stores and count stores: slices, partials, group keys, the rows of count
windows not final yet, and the rows emitted but not yet taken. A restored aggregator
therefore emits exactly what the original would have from that point on.
"""

from __future__ import annotations

import dataclasses
import math
import pickle
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from mqo.aggregation.aggregator import Aggregator, _Registered
from mqo.aggregation.results import AggregateBatch
from mqo.config import MatcherConfig
from predicates import Catalog
from predicates.aggregate import AggregateQuery


def aggregate_snapshot(aggregator: Aggregator, pending: AggregateBatch) -> dict[str, Any]:
    """The aggregator and the rows ``pending`` (emitted, not taken) as plain data."""
    return {
        "filters": [
            (key, fid, aggregator.filter_texts[fid], sorted(aggregator.filter_users[fid]))
            for key, fid in aggregator.filters.items()
        ],
        "queries": [
            (name, reg.query.text, reg.store_key, None if reg.since is None else str(reg.since), reg.next_k)
            for name, reg in aggregator.queries.items()
        ],
        "filters_made": aggregator.filters_made,
        "arrived": aggregator.arrived,
        "state": pickle.dumps(
            {"stores": aggregator.stores, "count_stores": aggregator.count_stores, "pending": pending},
            protocol=pickle.HIGHEST_PROTOCOL,
        ),
    }


def restore_aggregator(
    data: dict[str, Any],
    catalog: Catalog,
    config: MatcherConfig,
    compile_texts: Callable[[list[str]], list[Any]],
) -> tuple[Aggregator, AggregateBatch]:
    """The aggregator of :func:`aggregate_snapshot` data and its pending rows;
    ``compile_texts`` compiles query texts as the matcher does."""
    aggregator = Aggregator(catalog, config)
    for key, fid, text, users in data["filters"]:
        compiled = aggregator._registry.compiler.compile(text, 1).renamed(fid)
        aggregator._registry.add([compiled], -math.inf)
        aggregator.filters[key] = fid
        aggregator.filter_texts[fid] = text
        aggregator.filter_users[fid] = set(users)
    texts = [text for _, text, _, _, _ in data["queries"]]
    compiled_queries = compile_texts(texts) if texts else []
    for (name, _, store_key, since, next_k), aq in zip(data["queries"], compiled_queries, strict=True):
        if not isinstance(aq, AggregateQuery):
            raise ValueError(f"snapshot query {name} is not an aggregate query")
        aq = dataclasses.replace(aq, name=name)
        aggregator.queries[name] = _Registered(aq, store_key, None if since is None else Fraction(since), next_k)
    aggregator.filters_made = data["filters_made"]
    aggregator.arrived = data["arrived"]
    state = pickle.loads(data["state"])
    aggregator.stores = state["stores"]
    aggregator.count_stores = state["count_stores"]
    aggregator._stale = True
    return aggregator, state["pending"]
