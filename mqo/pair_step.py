"""The columnar join step of :meth:`Pipeline.replay <mqo.pipeline.Pipeline.replay>`.

For every pair of declared streams that some query reads exactly, the slots over that
pair are decided for a whole replay round at once by :func:`mqo.columnar_join.decide`
(the numba kernel over the round's rows and the rows kept from earlier rounds), not
one tuple at a time by the engine. The engine still decides every other slot, and
still stores every tuple it stores (its window state stays the one truth for
snapshots, for queries over three streams and for plans to come); what a
:class:`PairStep` keeps beside it is a columnar copy of the stored rows that can meet
a later row over its pair, made again from the window state whenever the two may
differ:

* the plan changed (a registration; the candidates of a stored row are the plan's);
* a tuple of the pair came in by another door (``push``, ``push_batch``), or a replay
  was left before its end (its rows are then partly in the window state);
* a snapshot was loaded.

Kept rows older than the clock's purge horizon go at the start of each round: they
cannot meet a row that is not late (docs/columnar-join.md, "Late tuples, purging").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from indexes.exact import EXACT_INTEGERS
from indexes.kill_bitsets import bitset_to_int
from mqo.columnar_join import PairRows, decide, to_blocks
from mqo.engine import Engine
from mqo.pair_tables import PairTables, Unsupported
from mqo.plan import CompiledPlan
from mqo.prepare import PreparedBatch
from mqo.results import ResultBlock
from mqo.state import WindowState


class PairStep:
    """The slots over exactly one pair of streams, decided a round at a time."""

    def __init__(self, tables: PairTables, kept: PairRows, kept_rows: list[tuple[Any, ...]]) -> None:
        self.tables = tables
        self.mask = bitset_to_int(tables.mask)
        self.kept = kept  # rows of earlier rounds that can meet a later row
        self.kept_rows = kept_rows  # and their stored rows
        self._next: tuple[PairRows, list[tuple[Any, ...]]] | None = None  # what a round keeps once it ends

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
        none = np.full(len(rows), -1, np.int64)
        self._next = (PairRows.arranged(rows.side, rows.ts, rows.vals, rows.cand, rows.big, none, none, none), stored)
        return rows.pos[results.rows[order]], [blocks[k] for k in order.tolist()], len(results)

    def commit(self, horizon: float) -> None:
        """The round ended: its rows are kept, those before ``horizon`` dropped."""
        if self._next is not None:
            self.kept, self.kept_rows = self._next
            self._next = None
        if len(self.kept) and self.kept.ts.min() < horizon:
            stays = self.kept.ts >= horizon
            self.kept_rows = [row for row, keep in zip(self.kept_rows, stays.tolist(), strict=True) if keep]
            self.kept = self.kept.take(stays)


class PairSteps:
    """The pair steps of one plan, with the slots they take from the engine."""

    def __init__(self, plan: CompiledPlan, steps: list[PairStep]) -> None:
        self.plan = plan
        self.steps = steps
        self.mask = 0
        for step in steps:
            self.mask |= step.mask
        self.streams = {s for step in steps for s in step.tables.streams}
        self.running = False  # a round began and has not ended: the kept rows may lag the window state

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

    def commit(self, horizon: float) -> None:
        for step in self.steps:
            step.commit(horizon)
        self.running = False
