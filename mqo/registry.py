"""The query registry: which queries are registered and which predicates they use.

Identical predicates are stored once: each predicate list (one :class:`ListKey`) keeps
a reference count per constant, so registering a query that repeats a predicate costs
nothing in the lists, and unregistering frees a predicate (and its list) only when no
query uses it any more. Lists keep the order in which they were first needed, which
is the list numbering ``explain`` shows (the thesis numbers lists the same way).

The registry is the logical state; :mod:`mqo.plan` compiles it into the bit layout
and the structures the matcher runs on. ``version`` changes with every registration
change so a plan knows when it is stale.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from predicates import Catalog, Kind, ListKey, NormalizedQuery, Predicate
from predicates.normalize import Constant


@dataclass(eq=False)
class RegisteredQuery:
    """A registered query and when it joined (``since_ts``, DESIGN.md §5).

    ``since_ts`` is the matcher's retention horizon at registration: tuples older than
    it may already have been purged, so results of this query never include them.
    """

    normalized: NormalizedQuery
    since_ts: float
    order: int
    text: str = field(repr=False, default="")

    @property
    def name(self) -> str:
        return self.normalized.name

    @property
    def streams(self) -> tuple[str, ...]:
        return self.normalized.streams

    @property
    def maxwindow(self) -> float:
        return self.normalized.maxwindow

    @property
    def is_multi_stream(self) -> bool:
        return len(self.normalized.aliases) > 1


class QueryRegistry:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.queries: dict[str, RegisteredQuery] = {}
        self._lists: dict[ListKey, dict[Constant, int]] = {}
        self._order = 0
        self.version = 0

    def __len__(self) -> int:
        return len(self.queries)

    def __iter__(self) -> Iterator[RegisteredQuery]:
        return iter(self.queries.values())

    def __contains__(self, name: object) -> bool:
        return name in self.queries

    def add(self, queries: Iterable[NormalizedQuery], since_ts: float, texts: Iterable[str] | None = None) -> None:
        """Register normalized queries (already checked: names are free)."""
        text_list = list(texts) if texts is not None else None
        for i, nq in enumerate(queries):
            if nq.name in self.queries:
                raise ValueError(f"query id {nq.name} is already registered")
            text = text_list[i] if text_list is not None else ""
            self.queries[nq.name] = RegisteredQuery(nq, since_ts, self._order, text)
            self._order += 1
            for conj in nq.disjuncts:
                for pred in conj.predicates:
                    counts = self._lists.setdefault(pred.key, {})
                    counts[pred.constant] = counts.get(pred.constant, 0) + 1
        self.version += 1

    def remove(self, name: str) -> RegisteredQuery:
        """Unregister a query; frees the predicates and lists nobody else uses."""
        rq = self.queries.pop(name)
        for conj in rq.normalized.disjuncts:
            for pred in conj.predicates:
                counts = self._lists[pred.key]
                left = counts[pred.constant] - 1
                if left:
                    counts[pred.constant] = left
                else:
                    del counts[pred.constant]
                    if not counts:
                        del self._lists[pred.key]
        self.version += 1
        return rq

    def lists(self, kind: Kind | None = None) -> list[ListKey]:
        """Live list keys in the order they were first needed."""
        return [k for k in self._lists if kind is None or k.kind is kind]

    def constants(self, key: ListKey) -> list[Constant]:
        """The distinct constants of a list, in covering (ascending) order."""
        return sorted(self._lists[key])  # type: ignore[type-var]

    def uses(self, pred: Predicate) -> int:
        return self._lists.get(pred.key, {}).get(pred.constant, 0)

    def max_window(self) -> float:
        """The largest MAXWINDOW of the registered multi-stream queries (0 if none)."""
        return max((rq.maxwindow for rq in self.queries.values() if rq.is_multi_stream), default=0.0)

    def distinct_predicates(self) -> int:
        return sum(len(c) for c in self._lists.values())

    def predicate_occurrences(self) -> int:
        return sum(len(conj.predicates) for rq in self.queries.values() for conj in rq.normalized.disjuncts)

    def sharing_ratio(self) -> float:
        """Predicate occurrences over distinct predicates (1.0 = nothing shared)."""
        distinct = self.distinct_predicates()
        return self.predicate_occurrences() / distinct if distinct else 1.0

    def _check(self) -> None:
        counts: dict[ListKey, dict[Constant, int]] = {}
        for rq in self.queries.values():
            for conj in rq.normalized.disjuncts:
                for pred in conj.predicates:
                    per = counts.setdefault(pred.key, {})
                    per[pred.constant] = per.get(pred.constant, 0) + 1
        assert counts == self._lists, "reference counts out of step with the queries"
        assert all(self._lists.values()), "an empty list is kept"
