"""The columnar join step of :meth:`Pipeline.replay <mqo.pipeline.Pipeline.replay>`.

For every pair of declared streams that some query reads exactly, the slots over that
pair are decided for a whole replay round at once by :func:`mqo.columnar_join.decide`
(the numba kernel over the round's rows and the rows kept from earlier rounds), not
one tuple at a time by the engine. The engine decides every other slot.

A :class:`PairStep` keeps, as arrays, the rows of earlier rounds that can meet a later
row over its pair. Where no slot of the engine reads a stream and one step only takes
it (a **free** stream: every query reading it and another stream is one of that step's),
the engine neither visits nor stores the rows the step keeps; it stores the others
(``store='all'``: a plan to come may want them). The window state is whole again
whenever it is read or the plan moves on: the kept rows of free streams go into it
(:meth:`PairSteps.spill`) before a snapshot, a change of plan, a tuple of the pair
coming in by another door (``push``, ``push_batch``) or a look at ``Matcher.state``,
and the steps are made again from it, each stored tuple's candidates decided by the
engine's own attribute test. A replay left before its end keeps the rows up to the
last it handed over.

Kept rows older than the clock's purge horizon go at the start of each round: they
cannot meet a row that is not late (docs/columnar-join.md, "Late tuples, purging").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from indexes.exact import EXACT_INTEGERS
from indexes.kill_bitsets import bitset_to_int, slots_of, words_for
from indexes.stored import StoredTuple
from mqo.columnar_join import CHUNK, PairRows, decide, to_blocks
from mqo.engine import Engine
from mqo.pair_tables import PairTables, Unsupported
from mqo.plan import CompiledPlan
from mqo.prepare import ENGINE, STORE, PreparedBatch
from mqo.results import ResultBlock
from mqo.state import WindowState

if TYPE_CHECKING:
    from mqo.pipeline import Pipeline


class PairStep:
    """The slots over exactly one pair of streams, decided a round at a time."""

    def __init__(self, tables: PairTables, kept: PairRows, kept_rows: list[tuple[Any, ...]]) -> None:
        self.tables = tables
        self.kept = kept  # rows of earlier rounds that can meet a later row
        self.kept_rows = kept_rows  # and their stored rows
        self.owned = np.zeros(len(kept), bool)  # a kept row the window state does not hold (a free stream's)
        self.free_sides = np.zeros(2, bool)  # which of the two streams are free (set by PairSteps)
        self._next: tuple[PairRows, list[tuple[Any, ...]], np.ndarray] | None = None  # what a round keeps
        self._positions = np.zeros(0, np.int64)  # the arrival positions of the round's rows in it

    @classmethod
    def rebuilt(cls, tables: PairTables, state: WindowState, engine: Engine) -> PairStep:
        """The step with the window state's stored tuples of the pair kept, their
        candidates decided by the engine's own attribute test (``Engine.attribute_kill``,
        as the engine decides a stored tuple it fetches)."""
        plan = tables.plan
        found: list[tuple[int, tuple[Any, ...], int]] = []
        for side, s in enumerate(tables.streams):
            slots = plan.stream_slots[s] & bitset_to_int(tables.mask)
            for t in state.streams[s].buckets if s < len(state.streams) else ():
                cand = slots & ~engine.attribute_kill(t, slots)
                if cand:
                    found.append((side, t.row, cand))
        if not found:
            return cls(tables, PairRows.empty(tables), [])
        n, words = len(found), tables.words
        side = np.array([f[0] for f in found], np.int64)
        rows = [f[1] for f in found]
        cand = np.zeros((n, words), np.uint64)
        vals = np.full((n, len(tables.columns[0]) + len(tables.columns[1])), np.nan)
        big = np.zeros(n, bool)
        for i, (k, row, mask) in enumerate(found):
            cand[i] = np.frombuffer(mask.to_bytes(words * 8, "little"), "<u8")
            for p, col in tables.columns[k].items():
                v = row[p]
                if v is not None:
                    vals[i, col] = float(v)
                    big[i] |= type(v) is int and abs(v) >= EXACT_INTEGERS
        ts = np.array([row[0] for row in rows], np.float64)
        none = np.full(n, -1, np.int64)
        return cls(tables, PairRows.arranged(side, ts, vals, cand, big, none, none, none), rows)

    def run(
        self, prepared: Sequence[PreparedBatch], which: np.ndarray, row_indexes: np.ndarray, late: np.ndarray
    ) -> tuple[np.ndarray, list[ResultBlock], int]:
        """The round's results over the pair: each block's arrival position (its newest
        row's), the blocks, and how many results they hold. The round's rows are kept
        for later rounds once :meth:`commit` says the round ended."""
        new = PairRows.of(self.tables, prepared, which, row_indexes, late)
        self._next = None
        if not len(new):
            return np.zeros(0, np.int64), [], 0
        start = len(self.kept)
        rows = self.kept.then(new) if start else new
        stored = self.kept_rows + new.stored(prepared)
        results = decide(self.tables, rows, stored, start)
        # a row's blocks by partner arrival: kept rows first, then this round's in order
        order = np.lexsort((results.partners, results.rows))
        blocks = to_blocks(self.tables, results, rows, stored)
        none = np.full(len(rows), -1, np.int64)  # (kept rows are of no batch; their ts order stays)
        owned = np.concatenate([self.owned, self.free_sides[new.side]])
        self._next = (dataclasses.replace(rows, pos=none, batch=none, row=none), stored, owned)
        self._positions = new.pos
        return rows.pos[results.rows[order]], [blocks[k] for k in order.tolist()], len(results)

    def commit(self, horizon: float, upto: int | None = None) -> None:
        """The round ended (or was left after arrival position ``upto``): its rows (up to
        there) are kept, and those before ``horizon`` dropped."""
        if self._next is not None:
            rows, stored, owned = self._next
            self._next = None
            if upto is not None:
                start = len(rows) - len(self._positions)
                keep = np.ones(len(rows), bool)
                keep[start:] = self._positions <= upto
                rows, stored, owned = rows.take(keep), _taken(stored, keep), owned[keep]
            self.kept, self.kept_rows, self.owned = rows, stored, owned
        if len(self.kept) and self.kept.ts.min() < horizon:
            stays = self.kept.ts >= horizon
            self.kept, self.kept_rows, self.owned = (
                self.kept.take(stays),
                _taken(self.kept_rows, stays),
                self.owned[stays],
            )


class PairSteps:
    """The pair steps of one plan, with the slots they take from the engine and the
    streams they free of it."""

    def __init__(self, plan: CompiledPlan, steps: list[PairStep]) -> None:
        self.plan = plan
        self.steps = steps
        self.words = np.zeros(words_for(plan.n_slots), np.uint64)  # the slots the steps take
        for step in steps:
            self.words |= step.tables.mask
        self.mask = bitset_to_int(self.words)
        self.streams = {s for step in steps for s in step.tables.streams}
        self.free = _free_streams(plan, steps, self.mask)
        for step in steps:
            step.free_sides = np.array([s in self.free for s in step.tables.streams], bool)
        self.running = False  # a round began and has not ended
        self.upto = -1  # and the last arrival position it handed over

    def engine_flags(
        self, prepared: Sequence[PreparedBatch], which: np.ndarray, row_indexes: np.ndarray, own: np.ndarray
    ) -> np.ndarray:
        """Each row's flags with the steps' work taken off: no ``ENGINE`` for a row all
        of whose engine candidates the steps take, no ``STORE`` for a row of a free
        stream that a step keeps."""
        out = own.copy()
        for k, prep in enumerate(prepared):
            if prep.stream not in self.streams or not len(prep.cand):
                continue
            at = np.flatnonzero(which == k)
            kept = prep.kept[row_indexes[at]]
            at, kept = at[kept >= 0], kept[kept >= 0]  # (rows without candidates keep their flags)
            rest_words = prep.engine_mask & ~self.words
            for start in range(0, len(at), CHUNK):
                cand = prep.cand[kept[start : start + CHUNK]]
                mine = (cand & self.words).any(axis=1)
                rest = (cand & rest_words).any(axis=1)
                flags = out[at[start : start + CHUNK]]
                flags[mine & ~rest] &= ~ENGINE
                if prep.stream in self.free:
                    flags[mine] &= ~STORE
                out[at[start : start + CHUNK]] = flags
        return out

    def spill(self, state: WindowState, seq: int, horizon: float) -> int:
        """Put the kept rows of free streams into the window state (numbered from
        ``seq``; a round under way keeps the rows up to the last handed over, and the
        purge ``horizon``); how many. The steps are then stale: made again from the state."""
        if self.running:
            self.commit(horizon, self.upto)
        put = 0
        for step in self.steps:
            streams = step.tables.streams
            for k in np.flatnonzero(step.owned).tolist():
                state.insert(StoredTuple(streams[int(step.kept.side[k])], seq + put, step.kept_rows[k]))
                put += 1
        return put

    @classmethod
    def of(cls, plan: CompiledPlan, state: WindowState, engine: Engine) -> PairSteps:
        """A step for every pair of declared streams (not views, not tables) that some
        query reads exactly and whose slots :class:`PairTables` takes."""
        steps = []
        masks = np.unique(plan.slot_stream_mask)
        for mask in masks.tolist():
            streams = [s for s in range(plan.n_real) if mask >> s & 1]
            if len(streams) != 2 or mask >> plan.n_real:
                continue
            if any(plan.streams[s].view or plan.streams[s].table_key for s in streams):
                continue
            try:
                tables = PairTables.of(plan, streams[0], streams[1])
            except Unsupported:
                continue
            steps.append(PairStep.rebuilt(tables, state, engine))
        return cls(plan, steps)

    def run(
        self, prepared: Sequence[PreparedBatch], which: np.ndarray, row_indexes: np.ndarray, late: np.ndarray
    ) -> tuple[dict[int, list[ResultBlock]], int]:
        """The round's results over every pair, by arrival position, and their count."""
        self.running = True
        by_row: dict[int, list[ResultBlock]] = {}
        count = 0
        for step in self.steps:
            positions, blocks, found = step.run(prepared, which, row_indexes, late)
            count += found
            for j, block in zip(positions.tolist(), blocks, strict=True):
                by_row.setdefault(j, []).append(block)
        return by_row, count

    def commit(self, horizon: float, upto: int | None = None) -> None:
        for step in self.steps:
            step.commit(horizon, upto)
        self.running = False


def _free_streams(plan: CompiledPlan, steps: list[PairStep], taken: int) -> set[int]:
    """The streams that only one step reads with another stream, and no slot of the
    engine: the engine need not store the rows that step keeps."""
    masks = plan.slot_stream_mask
    multi = (masks & (masks - 1)) != 0
    taken_flags = np.zeros(len(masks), bool)
    taken_flags[slots_of(taken)] = True
    free = set()
    for step in steps:
        for s in step.tables.streams:
            reads = multi & ((masks >> s) & 1 == 1)
            if not (reads & ~taken_flags).any() and sum(s in other.tables.streams for other in steps) == 1:
                free.add(s)
    return free


def _taken(items: list[Any], keep: np.ndarray) -> list[Any]:
    return [item for item, k in zip(items, keep.tolist(), strict=True) if k]


def steps_for(pipeline: Pipeline, steps: PairSteps | None) -> PairSteps | None:
    """The steps a replay of ``pipeline`` runs (``steps``: those it has): none under
    ``check=True`` (the engine checks every slot it decides) or an order that defers
    the attribute phase (candidates are then not decided before the joins); made for
    the pipeline's plan if it has none; a round left before its end closed first."""
    if pipeline.config.check or not pipeline.attributes_first:
        return None
    assert pipeline.plan is not None and pipeline.state is not None and pipeline.engine is not None
    if steps is None:
        return PairSteps.of(pipeline.plan, pipeline.state, pipeline.engine)
    if steps.running:  # a replay left before its end, not finished with yet
        steps.commit(pipeline.clock.purge_horizon(), steps.upto)
    return steps
