"""Which tuples must meet: the equality key every multi-stream query shares.

A parallel runner (the Spark stages) may hash-partition tuples by a value only if every
result has all of its tuples in one partition. That holds when every disjunct of every
multi-stream query equates one column per stream across all of its streams
(``B.pid = H.pid AND H.pid = T.pid``, the names may differ per stream, the same columns
across queries): :func:`shared_equality_key` finds such columns from the registered
queries' normalized predicates. A self-join's aliases of one stream read roles of it
(``B``, ``B#2``; :func:`predicates.catalog.role_name`): all of them must be keyed by the
same column of the stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from predicates import Kind
from predicates.catalog import split_role


def _key_pairs(rq: Any) -> list[list[tuple[Any, Any]]]:
    """Per disjunct, (list key, constant) of each indexed predicate."""
    return [list(preds) for preds, _ in rq.disjuncts]


def _is_key_equality(key: Any, constant: Any) -> bool:
    if key.kind is not Kind.JOIN or key.op != "=" or key.right is None:
        return False
    if key.factor is not None and key.factor != 1:
        return False
    return constant is None or constant == 0


def shared_equality_key(queries: Iterable[Any]) -> dict[str, str] | None:
    """``{stream: column}`` such that every disjunct of every multi-stream query of
    ``queries`` (registered queries, e.g. a :class:`mqo.registry.QueryRegistry`) equates
    those columns across all of its streams (``B.pid = H.pid``, ``H.pid = T.pid``), or
    None. Partitioning by that value keeps every result in one partition."""
    disjuncts = []
    for rq in queries:
        if not rq.is_multi_stream:
            continue
        for pairs in _key_pairs(rq):
            # self-joins: a stream's roles (B, B#2) each need a column; all must be one
            roles = set(rq.context.bound.roles)
            disjuncts.append((roles, [key for key, c in pairs if _is_key_equality(key, c)]))
    if not disjuncts:
        return None
    candidates: list[dict[str, str]] = [{}]
    for streams, keys in disjuncts:
        components = _components(keys)
        grown: list[dict[str, str]] = []
        for cand in candidates:
            for comp in components:
                if not streams <= set(comp):
                    continue
                if any(s in cand and cand[s] not in comp[s] for s in streams):
                    continue
                options = [[cand[s]] if s in cand else sorted(comp[s]) for s in sorted(streams)]
                for choice in _product(options):
                    extended = dict(cand)
                    extended.update(zip(sorted(streams), choice, strict=True))
                    # every role of a stream partitioned by the stream's one column
                    consistent = all(extended.get(split_role(s)[0], c) == c for s, c in extended.items())
                    if consistent and extended not in grown:
                        grown.append(extended)
        candidates = grown[:64]
        if not candidates:
            return None
    return {s: c for s, c in candidates[0].items() if split_role(s)[1] == 1}


def _components(keys: Sequence[Any]) -> list[dict[str, set[str]]]:
    """Connected (stream, column) groups of the equality joins, as {stream: columns}."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for key in keys:
        a = (key.left.stream, key.left.column)
        b = (key.right.stream, key.right.column)
        parent[find(a)] = find(b)
    groups: dict[tuple[str, str], dict[str, set[str]]] = {}
    for node in list(parent):
        groups.setdefault(find(node), {}).setdefault(node[0], set()).add(node[1])
    return list(groups.values())


def _product(options: list[list[str]]) -> Iterator[tuple[str, ...]]:
    if not options:
        yield ()
        return
    for first in options[0]:
        for rest in _product(options[1:]):
            yield (first, *rest)
