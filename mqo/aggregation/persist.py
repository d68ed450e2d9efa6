"""The aggregator's state in a matcher snapshot (:meth:`mqo.Matcher.snapshot`), as
plain data: dicts with str keys, lists, str, int (any size), float (inf and nan
allowed), bool, None and numpy arrays of numbers or bools (no object arrays);
Fractions as strings (``"1/3"``). Nothing is pickled, and restoring runs no code
of the snapshot's.

A snapshot holds the aggregate queries as text (with their names, registration
horizons, next windows and the stores they read), the shared filters (their keys,
names and texts, so the restored private pipeline numbers them alike), each slice
store and count store as its :meth:`state` (slices, partials, group keys, the rows of
count windows not final yet), an ISTREAM/DSTREAM query's relation at its last window
(:meth:`Relation.state`) and the rows emitted but not yet taken, as columns. A
restored aggregator emits exactly what the original would have from that point on.

Restoring takes lists wherever tuples or arrays were written (a JSON round trip
makes lists of both), so the snapshot's own codec may write arrays as it likes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from mqo.aggregation.aggregator import Aggregator, RegisteredAggregate
from mqo.aggregation.counts import CountStore
from mqo.aggregation.relations import Relation, relation_of
from mqo.aggregation.results import AggregateBatch, AggregateChunk
from mqo.aggregation.slices import SliceStore, plain
from mqo.config import MatcherConfig
from predicates import Catalog
from predicates.aggregate import AggregateQuery


def aggregate_snapshot(aggregator: Aggregator, pending: AggregateBatch) -> dict[str, Any]:
    """The aggregator and the rows ``pending`` (emitted, not taken) as plain data."""
    return {
        "filters": [
            {
                "key": _nested(key),
                "name": fid,
                "text": aggregator.filter_texts[fid],
                "users": sorted(aggregator.filter_users[fid]),
            }
            for key, fid in aggregator.filters.items()
        ],
        "queries": [
            {
                "name": name,
                "text": reg.query.text,
                "store": _store_key(reg.store_key),
                "since": None if reg.since is None else str(reg.since),
                "next_k": reg.next_k,
                # ISTREAM/DSTREAM: the relation at the last window (absent: RSTREAM, or a
                # snapshot from before these operators, which had none)
                **({} if reg.relation is None else {"relation": reg.relation.state()}),
            }
            for name, reg in aggregator.queries.items()
        ],
        "filters_made": aggregator.filters_made,
        "arrived": aggregator.arrived,
        "stores": [{"key": _store_key(key), "state": store.state()} for key, store in aggregator.stores.items()],
        "count_stores": [
            {"key": _store_key(key), "state": store.state()} for key, store in aggregator.count_stores.items()
        ],
        "pending": [[_chunk(c) for c in part] for part in pending.parts],
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
    for f in data["filters"]:
        fid, text = f["name"], f["text"]
        compiled = aggregator._registry.compile_one(text).renamed(fid)
        aggregator._registry.add([compiled], -math.inf)
        aggregator.filters[_tuples(f["key"])] = fid
        aggregator.filter_texts[fid] = text
        aggregator.filter_users[fid] = set(f["users"])
    texts = [q["text"] for q in data["queries"]]
    compiled_queries = compile_texts(texts) if texts else []
    for q, aq in zip(data["queries"], compiled_queries, strict=True):
        name = q["name"]
        if not isinstance(aq, AggregateQuery):
            raise ValueError(f"snapshot query {name} is not an aggregate query")
        aq = dataclasses.replace(aq, name=name)
        since = None if q["since"] is None else Fraction(q["since"])
        next_k = None if q["next_k"] is None else int(q["next_k"])
        relation = relation_of(aq.stream_op)
        if relation is not None and "relation" in q:
            relation = Relation.from_state(q["relation"])
        aggregator.queries[name] = RegisteredAggregate(aq, _key_of(q["store"]), since, next_k, relation)
    aggregator.filters_made = int(data["filters_made"])
    aggregator.arrived = int(data["arrived"])
    aggregator.stores = {_key_of(s["key"]): SliceStore.from_state(s["state"]) for s in data["stores"]}
    aggregator.count_stores = {_key_of(s["key"]): CountStore.from_state(s["state"]) for s in data["count_stores"]}
    aggregator._stale = True
    return aggregator, AggregateBatch([[_chunk_of(c) for c in part] for part in data["pending"]])


def _nested(key: Any) -> Any:
    """A filter key (tuples of tuples of texts) as lists."""
    return [_nested(k) for k in key] if isinstance(key, tuple) else key


def _tuples(key: Any) -> Any:
    """Lists back to the tuples of a filter key."""
    return tuple(_tuples(k) for k in key) if isinstance(key, list) else key


def _store_key(key: tuple) -> list[Any]:
    """A store's key: ``(stream, filter, GROUP BY, grid, landmark query or "")`` of a
    slice store, ``(stream, filter, GROUP BY, "rows", number)`` of a count store."""
    stream, fid, group_by, kind, last = key
    return [stream, fid, list(group_by), kind if kind == "rows" else str(kind), last]


def _key_of(data: list[Any]) -> tuple:
    stream, fid, group_by, kind, last = data
    if kind == "rows":
        return (stream, fid, tuple(group_by), "rows", int(last))
    return (stream, fid, tuple(group_by), Fraction(kind), last)


def _chunk(chunk: AggregateChunk) -> dict[str, Any]:
    return {
        "query": chunk.query,
        "position": chunk.position,
        "starts": np.asarray(chunk.starts, np.float64),
        "ends": np.asarray(chunk.ends, np.float64),
        "group_by": list(chunk.group_by),
        "keys": [[plain(v) for v in key] for key in chunk.keys],
        "codes": np.asarray(chunk.codes, np.int64),
        "names": list(chunk.names),
        "values": [[plain(v) for v in column] for column in chunk.values],
    }


def _chunk_of(data: dict[str, Any]) -> AggregateChunk:
    return AggregateChunk(
        data["query"],
        int(data["position"]),
        np.asarray(data["starts"], np.float64).reshape(-1),
        np.asarray(data["ends"], np.float64).reshape(-1),
        tuple(data["group_by"]),
        [tuple(key) for key in data["keys"]],
        np.asarray(data["codes"], np.int64).reshape(-1),
        list(data["names"]),
        [list(column) for column in data["values"]],
    )
