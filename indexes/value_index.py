"""Join exploitation structure: an ordered index of one stream column's values.

The contract is the red-black tree's: insert, delete and the start of a range scan in
O(log n), the scan itself O(k) for k tuples returned. Tuples are kept ordered by the
key ``(value, seq)``, so equal values stay in arrival order and a tuple is deleted by
identity without scanning its duplicates. NULL and NaN values are not indexed: no
predicate can hold on them.

The layout is sortedcontainers' (a list of sorted blocks of at most ``2 * LOAD`` keys,
beside the last key of each block, so a key is found by two binary searches and
inserted into a block of at most a few thousand), written out here for what the window
state does: every stored tuple is added once and removed once, and a key is made once
per call instead of by a key function per tuple, which costs as much as the rest of an
insert.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Any

from indexes.covering import is_null
from indexes.stored import StoredTuple

_POS = float("inf")
LOAD = 1000  # a block is split past 2 * LOAD keys and merged with a neighbour under LOAD // 2

Key = tuple[Any, int]


def _key_of(item: tuple[Key, StoredTuple]) -> Key:
    return item[0]


class ValueIndex:
    __slots__ = ("_keys", "_maxes", "_size", "_tuples", "position")

    def __init__(self, position: int) -> None:
        self.position = position
        self._keys: list[list[Key]] = []  # the blocks' keys, ascending; no block is empty
        self._tuples: list[list[StoredTuple]] = []  # the blocks' tuples, beside their keys
        self._maxes: list[Key] = []  # each block's last key
        self._size = 0

    def add(self, t: StoredTuple) -> bool:
        """Index ``t``; False (and nothing stored) when its value is NULL."""
        return self.add_run((t,)) == 1

    def add_run(self, tuples: Iterable[StoredTuple]) -> int:
        """Index each of ``tuples``, as :meth:`add` one at a time would; how many were
        not NULL. The run's keys go in ascending, each search of the blocks starting at
        the block the key before went to: O(k log k + k log n) for k tuples."""
        position = self.position
        run: list[tuple[Key, StoredTuple]] = []
        for t in tuples:
            value = t.row[position]
            if value is None or value != value:  # (is_null, written out: once per stored tuple)
                continue
            run.append(((value, t.seq), t))
        if len(run) > 1:
            run.sort(key=_key_of)
        maxes, block_keys, block_tuples = self._maxes, self._keys, self._tuples
        pos = 0
        for key, t in run:
            if not maxes:
                block_keys.append([key])
                block_tuples.append([t])
                maxes.append(key)
                continue
            # (the keys before this one are at most it: its block is at pos or after)
            pos = bisect_right(maxes, key, pos)
            if pos == len(maxes):  # past every key: at the end of the last block
                pos -= 1
                keys = block_keys[pos]
                keys.append(key)
                block_tuples[pos].append(t)
                maxes[pos] = key
            else:
                keys = block_keys[pos]
                i = bisect_right(keys, key)
                keys.insert(i, key)
                block_tuples[pos].insert(i, t)
            if len(keys) > 2 * LOAD:
                self._split(pos)
        self._size += len(run)
        return len(run)

    def remove(self, t: StoredTuple) -> None:
        """Forget ``t`` (a NULL-valued tuple was never indexed); ValueError if it is not here."""
        value = t.row[self.position]
        if is_null(value):
            return
        key = (value, t.seq)
        maxes = self._maxes
        pos = bisect_left(maxes, key)
        if pos < len(maxes):
            keys = self._keys[pos]
            i = bisect_left(keys, key)
            tuples = self._tuples[pos]
            if tuples[i] is t:  # (a key at or past ``key`` is in the block: i is in it)
                del keys[i]
                del tuples[i]
                self._size -= 1
                if not keys:
                    del self._keys[pos], self._tuples[pos], maxes[pos]
                else:
                    maxes[pos] = keys[-1]
                    if len(keys) < LOAD // 2 and len(maxes) > 1:
                        self._merge(pos)
                return
        raise ValueError(f"{t!r} is not in the value index")

    def _split(self, pos: int) -> None:
        keys, tuples = self._keys[pos], self._tuples[pos]
        self._keys.insert(pos + 1, keys[LOAD:])
        self._tuples.insert(pos + 1, tuples[LOAD:])
        del keys[LOAD:], tuples[LOAD:]
        self._maxes[pos] = keys[-1]
        self._maxes.insert(pos + 1, self._keys[pos + 1][-1])

    def _merge(self, pos: int) -> None:
        """Block ``pos`` (not the only one) joins its neighbour; split again if too long."""
        first = pos if pos + 1 < len(self._maxes) else pos - 1
        self._keys[first] += self._keys[first + 1]
        self._tuples[first] += self._tuples[first + 1]
        del self._keys[first + 1], self._tuples[first + 1], self._maxes[first + 1]
        self._maxes[first] = self._keys[first][-1]
        if len(self._keys[first]) > 2 * LOAD:
            self._split(first)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[StoredTuple]:
        return chain.from_iterable(self._tuples)

    def range(
        self, lo: Any = None, hi: Any = None, lo_inclusive: bool = True, hi_inclusive: bool = True
    ) -> Iterator[StoredTuple]:
        """Tuples with ``lo <(=) value <(=) hi``; None means unbounded on that side."""
        maxes = self._maxes
        if not maxes:
            return iter(())
        # seq bounds -1 and +inf place the range boundary before or after all tuples
        # with a value equal to the bound.
        if lo is None:
            first, start = 0, 0
        else:
            low = (lo, -1 if lo_inclusive else _POS)
            first = bisect_left(maxes, low)
            if first == len(maxes):
                return iter(())
            start = bisect_left(self._keys[first], low)
        if hi is None:
            last = len(maxes) - 1
            end = len(self._keys[last])
        else:
            high = (hi, _POS if hi_inclusive else -1)
            last = bisect_right(maxes, high)
            if last == len(maxes):
                last -= 1
                end = len(self._keys[last])
            else:
                end = bisect_right(self._keys[last], high)
        tuples = self._tuples
        if first == last:
            return iter(tuples[first][start:end])
        if first > last:
            return iter(())
        middle = [tuples[pos] for pos in range(first + 1, last)]
        return chain(tuples[first][start:], chain.from_iterable(middle), tuples[last][:end])

    def _check(self) -> None:
        pos = self.position
        assert all(self._keys), "empty block kept"
        assert len(self._keys) == len(self._tuples) == len(self._maxes), "blocks out of step"
        assert all(len(keys) <= 2 * LOAD for keys in self._keys), "block not split"
        assert self._maxes == [keys[-1] for keys in self._keys], "block maxima out of step"
        assert [len(keys) for keys in self._keys] == [len(tuples) for tuples in self._tuples], "block sizes differ"
        keys = [key for block in self._keys for key in block]
        assert keys == [(t.row[pos], t.seq) for t in self], "keys out of step with their tuples"
        assert keys == sorted(keys), "value index out of order"
        assert len(keys) == self._size, "size out of step"
        assert all(not is_null(t.row[pos]) for t in self), "NULL value indexed"
        assert len({t.seq for t in self}) == len(self), "tuple indexed twice"
