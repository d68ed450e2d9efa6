"""Join exploitation structure: an ordered index of one stream column's values.

The contract is the red-black tree's: insert, delete and the start of a range scan in
O(log n), the scan itself O(k) for k tuples returned. It is built on
``sortedcontainers.SortedKeyList`` keyed by ``(value, seq)``, so equal values stay in
arrival order and a tuple is deleted by identity without scanning its duplicates.
NULL and NaN values are not indexed: no predicate can hold on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sortedcontainers import SortedKeyList

from indexes.covering import is_null
from indexes.stored import StoredTuple

_NEG = float("-inf")
_POS = float("inf")


class ValueIndex:
    __slots__ = ("_items", "position")

    def __init__(self, position: int) -> None:
        self.position = position
        pos = position
        self._items: SortedKeyList = SortedKeyList(key=lambda t: (t.row[pos], t.seq))

    def add(self, t: StoredTuple) -> bool:
        """Index ``t``; False (and nothing stored) when its value is NULL."""
        if is_null(t.row[self.position]):
            return False
        self._items.add(t)
        return True

    def remove(self, t: StoredTuple) -> None:
        if is_null(t.row[self.position]):
            return
        self._items.remove(t)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[StoredTuple]:
        return iter(self._items)

    def range(
        self, lo: Any = None, hi: Any = None, lo_inclusive: bool = True, hi_inclusive: bool = True
    ) -> Iterator[StoredTuple]:
        """Tuples with ``lo <(=) value <(=) hi``; None means unbounded on that side."""
        # seq bounds -1 and +inf place the range boundary before or after all tuples
        # with a value equal to the bound.
        min_key = None if lo is None else (lo, -1 if lo_inclusive else _POS)
        max_key = None if hi is None else (hi, _POS if hi_inclusive else -1)
        found: Iterator[StoredTuple] = self._items.irange_key(min_key, max_key)
        return found

    def _check(self) -> None:
        self._items._check()
        pos = self.position
        keys = [(t.row[pos], t.seq) for t in self._items]
        assert keys == sorted(keys), "value index out of order"
        assert all(not is_null(t.row[pos]) for t in self._items), "NULL value indexed"
        assert len({t.seq for t in self._items}) == len(self._items), "tuple indexed twice"
