"""The window state: every stored tuple, in time buckets and value indexes.

One :class:`StreamStore` per stream holds the stream's tuples in
:class:`~indexes.time_buckets.TimeBuckets` (every tuple) and one
:class:`~indexes.value_index.ValueIndex` per column that a join list may probe. The
same tuple object is referenced from all of them.

When the plan changes, :meth:`WindowState.configure` adds the indexes new join lists
need (built from the stored tuples), drops unused ones, and re-buckets if the bucket
width changed. ``snapshot``/``restore`` turn the state into plain data and back, which
is what a checkpoint (or Spark's state store) keeps.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from indexes.covering import is_null
from indexes.stored import StoredTuple
from indexes.time_buckets import TimeBuckets
from indexes.value_index import ValueIndex

if TYPE_CHECKING:
    from mqo.plan import CompiledPlan
    from predicates import StreamSchema

DEFAULT_BUCKETS_PER_WINDOW = 4


def auto_bucket_width(max_window: float, allowed_lateness: float) -> float:
    """A quarter of the time a tuple stays stored (1 second when that is zero)."""
    span = max_window + allowed_lateness
    return span / DEFAULT_BUCKETS_PER_WINDOW if span > 0 else 1.0


class StreamStore:
    __slots__ = ("buckets", "values")

    def __init__(self, width: float) -> None:
        self.buckets = TimeBuckets(width)
        self.values: dict[int, ValueIndex] = {}

    def purge(self, horizon: float) -> int:
        dropped = self.buckets.purge_before(horizon)
        if self.values:
            for t in dropped:
                for index in self.values.values():
                    index.remove(t)
        return len(dropped)


class WindowState:
    def __init__(self, n_streams: int, width: float = 1.0) -> None:
        self.width = width
        self.streams = [StreamStore(width) for _ in range(n_streams)]
        self._purged_to = float("-inf")
        # how often tuples came or went, in all and per stream: what the engine keeps of
        # the other streams (mqo.feeds.Feeds) holds while the difference does
        self.changes = 0
        self.changed = [0] * n_streams

    def __len__(self) -> int:
        return sum(len(s.buckets) for s in self.streams)

    def __iter__(self) -> Iterator[StoredTuple]:
        for store in self.streams:
            yield from store.buckets

    def configure(self, indexed_positions: list[set[int]], width: float) -> None:
        """Match the indexes to a plan: ``indexed_positions[s]`` are the row positions
        of stream ``s`` that need a value index."""
        while len(self.streams) < len(indexed_positions):
            self.streams.append(StreamStore(self.width))
            self.changed.append(0)
        self.changes += 1  # (a tuple's bucket may change: counted as a change of every stream)
        if width != self.width:
            self.width = width
            self._purged_to = float("-inf")
            for store in self.streams:
                old = list(store.buckets)
                store.buckets = TimeBuckets(width)
                for t in old:
                    store.buckets.add(t)
        for store, wanted in zip(self.streams, indexed_positions, strict=False):
            for pos in list(store.values):
                if pos not in wanted:
                    del store.values[pos]
            for pos in wanted:
                if pos not in store.values:
                    index = ValueIndex(pos)
                    index.add_run(store.buckets)  # (one run: the index orders it by value and seq)
                    store.values[pos] = index

    def insert(self, t: StoredTuple) -> None:
        self.insert_run(t.stream, (t,))

    def insert_run(self, s: int, tuples: Sequence[StoredTuple]) -> None:
        """:meth:`insert` of each of ``tuples`` (of stream ``s``) in turn, each
        structure given the whole run at once (:meth:`TimeBuckets.add_run`,
        :meth:`ValueIndex.add_run`)."""
        store = self.streams[s]
        store.buckets.add_run(tuples)
        for index in store.values.values():
            index.add_run(tuples)
        self.changes += len(tuples)
        self.changed[s] += len(tuples)

    def clear(self, s: int) -> None:
        """Forget every tuple of stream ``s`` (its indexes stay, empty)."""
        store = self.streams[s]
        fresh = StreamStore(self.width)
        fresh.values = {pos: ValueIndex(pos) for pos in store.values}
        self.streams[s] = fresh
        self.changes += 1
        self.changed[s] += 1

    def purge(self, horizon: float) -> int:
        """Drop the buckets entirely older than ``horizon``; returns tuples dropped.
        Nothing is looked at until the horizon reaches a new bucket."""
        bucket = math.floor(horizon / self.width)
        if bucket <= self._purged_to:
            return 0
        self._purged_to = bucket
        dropped = 0
        for s, store in enumerate(self.streams):
            gone = store.purge(horizon)
            if gone:
                dropped += gone
                self.changes += 1
                self.changed[s] += 1
        return dropped

    def feeding(self, s: int, stream_slots: list[int], later: list[int]) -> tuple[int, list[float], list[int]]:
        """What a tuple of stream ``s`` may end results with, for :class:`mqo.feeds.Feeds`
        (``stream_slots``: the slots reading each stream; ``later``: per stream, the slots
        that want its tuple at or after ``s``'s, ``CompiledPlan.later_partner[s]``): the
        slots reading ``s`` whose other streams all store a tuple; the newest ts stored
        by each other stream some of those want later, ascending; and for each count k
        of them, the slots of the first k (a tuple newer than those k finds no partner
        for those slots)."""
        mine = stream_slots[s]
        cand = mine
        wanted: list[tuple[float, int]] = []
        for y, store in enumerate(self.streams):
            reads = stream_slots[y] & mine if y < len(stream_slots) else 0
            if y == s or not reads:
                continue
            newest = store.buckets.newest_ts()
            if newest is None:  # (stores nothing)
                cand &= ~reads
            elif later[y] & mine:
                wanted.append((newest, later[y] & mine))
        wanted.sort(key=lambda item: item[0])
        dead = [0]
        for _, slots in wanted:
            dead.append(dead[-1] | slots)
        return cand, [newest for newest, _ in wanted], dead

    def snapshot(self) -> dict[str, Any]:
        """Plain data: per stream, the stored rows with their arrival numbers."""
        return {
            "width": self.width,
            "streams": [[(t.seq, t.row) for t in store.buckets] for store in self.streams],
        }

    @classmethod
    def restore(cls, data: dict[str, Any], indexed_positions: list[set[int]]) -> WindowState:
        state = cls(len(data["streams"]), data["width"])
        for s, rows in enumerate(data["streams"]):
            for seq, row in rows:
                state.streams[s].buckets.add(StoredTuple(s, seq, tuple(row)))
        state.configure(indexed_positions, data["width"])
        return state

    def _check(self) -> None:
        for s, store in enumerate(self.streams):
            store.buckets._check()
            members = {id(t) for t in store.buckets}
            assert all(t.stream == s for t in store.buckets), "tuple stored under the wrong stream"
            for index in store.values.values():
                index._check()
                assert {id(t) for t in index} <= members, "value index holds a tuple the buckets do not"
                expected = sum(1 for t in store.buckets if not is_null(t.row[index.position]))
                assert len(index) == expected, "value index misses stored tuples"


def stream_names(streams: Sequence[StreamSchema]) -> list[str]:
    """The names of a plan's stream schemas."""
    return [schema.name for schema in streams]


def moved_state(state: WindowState, old: CompiledPlan, new: CompiledPlan) -> WindowState:
    """The stored tuples of ``old``'s streams under ``new``'s numbers (by name; a
    stream ``new`` lacks, a view removed, lets its tuples go)."""
    number = {schema.name: s for s, schema in enumerate(new.streams)}
    moved = WindowState(len(new.streams), state.width)
    for s, schema in enumerate(old.streams):
        to = number.get(schema.name)
        if to is not None:
            for t in state.streams[s].buckets:
                moved.insert(StoredTuple(to, t.seq, t.row))
    return moved
