"""Ordered emission: results held until the watermark has passed them, then released
in timestamp order (``MatcherConfig.emit='ordered'``; docs/ARCHITECTURE.md, Time).

**When a result is final.** A tuple is late when its ``ts`` is older than the
matcher's watermark, and the watermark never goes back (:mod:`mqo.clock`). A new
result always contains a tuple that arrives from now on and is not late, and its
``ts`` is the largest of its members, so every result still to come has
``ts >= watermark``. A held result with ``ts < watermark`` (exactly, as the clock
decides lateness) can therefore have no result of a smaller or equal ``ts`` after it:
it is released. A result at exactly the watermark waits, since a tuple at that ``ts``
is not late and may still come.

**Order.** Released results are sorted by ``ts``, then by the arrival of the result's
last tuple (the one that completed it), then in the order arrival mode reports the
results of that tuple (within one assignment of tuples: query registration order).

**Bound.** Every held result has ``ts >= watermark``, and none is newer than the
newest ``ts`` seen; so the held results are those of the last ``lag`` seconds, ``lag``
being how far the watermark trails the newest tuple (the allowed lateness plus how
far the slowest active stream trails the fastest). A stream that holds the watermark
back (one that has sent nothing, until ``idle_timeout``) holds results back too.

Results are held as the engine's :class:`~mqo.engine.ResultBlock` objects (one
assignment of tuples, a mask of query slots) in a heap keyed (ts, arrival, found):
adding or releasing a block costs O(log n) for n held blocks. When registrations
change, the held blocks' slots are renumbered for the new plan; the results of a
query unregistered meanwhile are withdrawn, as a removed query reports nothing more.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from itertools import pairwise
from typing import Any

import numpy as np

from indexes.stored import StoredTuple
from mqo.batch import SingleResults
from mqo.plan import CompiledPlan
from mqo.results import ResultBlock

Entry = tuple[float, int, int, ResultBlock]  # (ts, arrival of the last tuple, found, block)


class HeldResults:
    """The results of an ordered matcher not yet released (see the module docstring)."""

    def __init__(self) -> None:
        self._heap: list[Entry] = []
        self._found = 0  # blocks added so far: the last key, so equal keys keep their order

    def __len__(self) -> int:
        """Held results (one per query of each held block)."""
        return sum(len(entry[3]) for entry in self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    @property
    def first_ts(self) -> float | None:
        """The smallest ts held (None when nothing is)."""
        return self._heap[0][0] if self._heap else None

    def add(self, blocks: Iterable[ResultBlock], arrival: int) -> None:
        """Hold ``blocks``, all completed by the tuple that arrived ``arrival``-th."""
        heap = self._heap
        for block in blocks:
            heapq.heappush(heap, (block.ts, arrival, self._found, block))
            self._found += 1

    def add_singles(self, singles: SingleResults, arrivals: np.ndarray, n_streams: int) -> None:
        """Hold the single-stream results of a batch (read off the candidate bits),
        one block per matched row; ``arrivals[r]`` is when row ``r`` arrived."""
        bounds = np.flatnonzero(np.diff(singles.row_of, prepend=-1, append=-1) != 0).tolist()
        for a, b in pairwise(bounds):
            r = int(singles.row_of[a])
            row = singles.rows[r]
            members: list[StoredTuple | None] = [None] * n_streams
            members[singles.stream] = StoredTuple(singles.stream, -1, row)
            # a copy: a view would keep the whole batch's slots while one block is held
            self.add([ResultBlock(singles.slots[a:b].copy(), members, row[0])], int(arrivals[r]))

    def release(self, passed: Callable[[float], bool]) -> list[ResultBlock]:
        """The held blocks whose ts the watermark has passed (``passed(ts)``: ts is
        older than the watermark), in order; they are held no more."""
        heap, out = self._heap, []
        while heap and passed(heap[0][0]):
            out.append(heapq.heappop(heap)[3])
        return out

    def release_all(self) -> list[ResultBlock]:
        """Every held block, in order (end of input)."""
        out = [entry[3] for entry in sorted(self._heap, key=lambda e: e[:3])]
        self._heap = []
        return out

    # -------------------------------------------------------- invariants

    def _check(
        self, passed: Callable[[float], bool] | None = None, n_slots: int | None = None, arrived: int | None = None
    ) -> None:
        """Assert the holder's invariants (``check=True``): heap order on (ts, arrival,
        found); each block keyed by its own ts (its newest member's), holding a query;
        ``found`` numbers distinct and below the count; arrivals up to ``arrived`` (the
        tuples in so far); slots below ``n_slots``; and, right after a release at a
        watermark (``passed``), no held result that watermark has passed."""
        heap = self._heap
        for i in range(1, len(heap)):
            assert heap[(i - 1) // 2][:3] <= heap[i][:3], "held results out of heap order"
        found = [entry[2] for entry in heap]
        assert len(set(found)) == len(found), "two held blocks with one found number"
        assert all(0 <= f < self._found for f in found), "a found number past the count"
        for ts, arrival, _, block in heap:
            assert block.ts == ts, "a held block keyed by another ts than its own"
            members = [t.row[0] for t in block.tuples if t is not None]
            assert members and max(members) == ts, "a held block's ts is not its newest member's"
            assert len(block) > 0, "a held block with no query"
            numbers = block.numbers()
            assert n_slots is None or int(numbers[-1]) < n_slots, "a held result of a slot the plan lacks"
            assert arrival > 0 and (arrived is None or arrival <= arrived), "a held result from a tuple not yet in"
            assert passed is None or not passed(ts), "a held result the watermark has passed"

    # ------------------------------------------------------------- plans

    def renumber(self, old: CompiledPlan, new: CompiledPlan) -> None:
        """The held blocks' slots, numbered for ``old``, as ``new`` numbers them: a slot
        is its query (the registry's record, not its name, which a new query may take
        again) and disjunct. Slots of queries ``new`` does not run are dropped, and
        blocks left with none."""
        if not self._heap or old is new:
            return
        where = _slot_numbers(new)
        moved = {}
        for q in range(old.n_slots):
            key = (old.records[int(old.slot_record[q])].order, int(old.slot_disjunct[q]))
            if key in where:
                moved[q] = where[key]
        kept: list[Entry] = []
        for ts, arrival, found, block in self._heap:
            mask = 0
            for q in block.numbers().tolist():
                if q in moved:
                    mask |= 1 << moved[q]
            if mask:
                block.slots = mask
                kept.append((ts, arrival, found, block))
        heapq.heapify(kept)
        self._heap = kept

    # ---------------------------------------------------------- snapshots

    def snapshot(self, plan: CompiledPlan) -> list[list[Any]]:
        """The held results as plain data: per block its keys, its slots as (query id,
        disjunct) and its member rows as (stream number, row)."""
        out = []
        for ts, arrival, found, block in sorted(self._heap, key=lambda e: e[:3]):
            slots = [
                [plan.record_names[int(plan.slot_record[q])], int(plan.slot_disjunct[q])]
                for q in block.numbers().tolist()
            ]
            members = [[t.stream, list(t.row)] for t in block.tuples if t is not None]
            out.append([ts, arrival, found, slots, members])
        return out

    def load(self, data: Iterable[list[Any]], plan: CompiledPlan) -> None:
        """Hold the results of :meth:`snapshot` again, on ``plan`` (the same queries)."""
        where = {
            (plan.record_names[int(plan.slot_record[q])], int(plan.slot_disjunct[q])): q for q in range(plan.n_slots)
        }
        n = len(plan.streams)
        self._heap = []
        for ts, arrival, found, slots, members in data:
            mask = 0
            for name, disjunct in slots:
                if (name, disjunct) not in where:
                    raise ValueError(f"the snapshot holds results of query {name!r}, which this matcher lacks")
                mask |= 1 << where[(name, disjunct)]
            tuples: list[StoredTuple | None] = [None] * n
            for stream, row in members:
                tuples[stream] = StoredTuple(stream, -1, tuple(row))
            self._heap.append((float(ts), int(arrival), int(found), ResultBlock(mask, tuples, float(ts))))
            self._found = max(self._found, int(found) + 1)
        heapq.heapify(self._heap)


def _slot_numbers(plan: CompiledPlan) -> Mapping[tuple[int, int], int]:
    """(record order, disjunct) -> slot, for the slots ``plan`` runs (an updated
    plan keeps a removed query's slots, with no streams)."""
    out = {}
    for q in range(plan.n_slots):
        if int(plan.slot_stream_mask[q]):
            out[(plan.records[int(plan.slot_record[q])].order, int(plan.slot_disjunct[q]))] = q
    return out
