"""Join exploitation structure: an ordered index of one stream column's values.

The contract is the red-black tree's: insert, delete and the start of a range scan in
O(log n), the scan itself O(k) for k tuples returned. Tuples are kept ordered by value,
and tuples of equal value by ``seq`` (arrival order), so a scan returns them in the same
order however they were added. NULL and NaN values are not indexed: no predicate can
hold on them.

The layout is sortedcontainers' (a list of sorted blocks of at most ``2 * LOAD`` keys,
beside the last key of each block, so a key is found by two binary searches and
inserted into a block of at most a few thousand), written out here for what the window
state does: every stored tuple is added once and removed once. The keys are the bare
values: ``seq`` breaks ties only among equal values, where a tuple almost always
arrives after those already stored, and comparing ``(value, seq)`` pairs in every
search costs about as much as the rest of an insert.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from itertools import chain, pairwise
from operator import attrgetter
from typing import Any

from indexes.covering import is_null
from indexes.stored import StoredTuple

LOAD = 1000  # a block is split past 2 * LOAD keys and merged with a neighbour under LOAD // 2

_seq_of = attrgetter("seq")


class ValueIndex:
    __slots__ = ("_keys", "_maxes", "_size", "_tuples", "position")

    def __init__(self, position: int) -> None:
        self.position = position
        self._keys: list[list[Any]] = []  # the blocks' values, ascending; no block is empty
        self._tuples: list[list[StoredTuple]] = []  # the blocks' tuples, beside their values
        self._maxes: list[Any] = []  # each block's last value
        self._size = 0

    def add(self, t: StoredTuple) -> bool:
        """Index ``t``; False (and nothing stored) when its value is NULL."""
        return self.add_run((t,)) == 1

    def add_run(self, tuples: Iterable[StoredTuple]) -> int:
        """Index each of ``tuples``, as :meth:`add` one at a time would; how many were
        not NULL. The run's values go in ascending, each search of the blocks starting
        at the block the value before went to: O(k log k + k log n) for k tuples (a run
        out of seq order sorted by value and seq; a tuple older than stored ones of the
        same value placed among them by :meth:`_place_among_equals`, O(log n))."""
        position = self.position
        run: list[StoredTuple] = []
        for t in tuples:
            value = t.row[position]
            if value is None or value != value:  # (is_null, written out: once per stored tuple)
                continue
            run.append(t)
        if len(run) > 1:
            if all(a.seq < b.seq for a, b in pairwise(run)):  # (stable: equal values stay in seq order)
                run.sort(key=lambda t: t.row[position])
            else:  # (a run out of arrival order: a state's tuples in ts order)
                run.sort(key=lambda t: (t.row[position], t.seq))
        maxes, block_keys, block_tuples = self._maxes, self._keys, self._tuples
        pos = 0
        for t in run:
            value = t.row[position]
            if not maxes:
                block_keys.append([value])
                block_tuples.append([t])
                maxes.append(value)
                continue
            # (the values before this one are at most it: its block is at pos or after)
            pos = bisect_right(maxes, value, pos)
            if pos == len(maxes):  # past every value: at the end of the last block
                pos -= 1
                keys = block_keys[pos]
                i = len(keys)
            else:
                keys = block_keys[pos]
                i = bisect_right(keys, value)
            # after every equal value (the one before it, here or ending the block before),
            # unless one of them arrived later than t
            if i:
                older = keys[i - 1] != value or block_tuples[pos][i - 1].seq < t.seq
            else:
                older = not pos or maxes[pos - 1] != value or block_tuples[pos - 1][-1].seq < t.seq
            if not older:
                pos, i = self._place_among_equals(value, t.seq)
                keys = block_keys[pos]
            keys.insert(i, value)
            block_tuples[pos].insert(i, t)
            maxes[pos] = keys[-1]
            if len(keys) > 2 * LOAD:
                self._split(pos)
        self._size += len(run)
        return len(run)

    def _place_among_equals(self, value: Any, seq: int) -> tuple[int, int]:
        """Where a tuple of ``value`` and ``seq`` goes among the stored tuples of the
        same value, some of them later than ``seq`` (they are in seq order, possibly
        over several blocks): the block by a binary search of the blocks holding the
        value on the seq of their last equal one, then the place in it. O(log n)."""
        maxes, block_keys, block_tuples = self._maxes, self._keys, self._tuples
        first = bisect_left(maxes, value)  # (the first block holding the value)
        last = min(bisect_right(maxes, value), len(maxes) - 1)
        if block_keys[last][0] != value:  # (the block after those ending with the value holds none)
            last -= 1

        def last_equal(pos: int) -> int:
            keys = block_keys[pos]
            return block_tuples[pos][bisect_right(keys, value) - 1].seq

        pos = bisect_right(range(first, last + 1), seq, key=last_equal) + first
        keys, tuples = block_keys[pos], block_tuples[pos]
        lo, hi = bisect_left(keys, value), bisect_right(keys, value)
        return pos, bisect_right(tuples, seq, lo, hi, key=_seq_of)

    def remove(self, t: StoredTuple) -> None:
        """Forget ``t`` (a NULL-valued tuple was never indexed); ValueError if it is not here."""
        value = t.row[self.position]
        if is_null(value):
            return
        maxes = self._maxes
        pos = bisect_left(maxes, value)
        while pos < len(maxes):
            keys, tuples = self._keys[pos], self._tuples[pos]
            i = hi = bisect_left(keys, value)
            if i < len(keys) and tuples[i] is not t:  # (a purge takes the oldest first: mostly i)
                hi = bisect_right(keys, value, i)
                i = bisect_left(tuples, t.seq, i, hi, key=_seq_of)
            if i < len(keys) and tuples[i] is t:
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
            if i < len(keys):  # (a later tuple, or a greater value, is here: t would be before it)
                break
            pos += 1
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
        # an inclusive bound starts before (ends after) the values equal to it, an
        # exclusive one after (before) them
        if lo is None:
            first, start = 0, 0
        else:
            after = bisect_left if lo_inclusive else bisect_right
            first = after(maxes, lo)
            if first == len(maxes):
                return iter(())
            start = after(self._keys[first], lo)
        if hi is None:
            last = len(maxes) - 1
            end = len(self._keys[last])
        else:
            before = bisect_right if hi_inclusive else bisect_left
            last = before(maxes, hi)
            if last == len(maxes):
                last -= 1
                end = len(self._keys[last])
            else:
                end = before(self._keys[last], hi)
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
        assert keys == [t.row[pos] for t in self], "keys out of step with their tuples"
        ordered = [(t.row[pos], t.seq) for t in self]
        assert ordered == sorted(ordered), "value index out of order (by value, then seq)"
        assert len(keys) == self._size, "size out of step"
        assert all(not is_null(t.row[pos]) for t in self), "NULL value indexed"
        assert len({t.seq for t in self}) == len(self), "tuple indexed twice"
