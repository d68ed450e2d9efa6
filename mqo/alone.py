"""Rows whose results they decide alone: single-stream results without the engine.

A row's single-stream results depend on the row only. The plain single-stream
queries' (flag ``SINGLE``) are read off its candidate bits; so are those of a
single-stream query with several disjuncts and no residuals (``B.auction = 7 OR
B.auction = 9``): its disjuncts are slots of their own, consecutive, decided by the
attribute kernels like any, and the query holds when one of them survives. The engine
would report the lowest such slot of each query once (its ``_emit``: a disjunct's
single-stream window and registration time always pass, a tuple not late being at or
after every registration's horizon, as for the plain slots), which is what
:func:`first_of_records` keeps. So such a row needs no visit of the engine.

:func:`alone_rows` picks, in a replay (:meth:`mqo.pipeline.Pipeline.replay`), the rows
whose only work is these results: not stored (no join reads them), no other slot of the
engine's, no further role, and no slot in ``apart`` (a view query's, whose rows must
go in before the next row: :mod:`mqo.views`). Their results are made a chunk at a time
(:func:`alone_blocks`), one block per row, and handed over row by row, in arrival order
(each at its own row: a Spark task keeps the results of the rows it owns).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from indexes.kill_bitsets import set_bits
from indexes.stored import StoredTuple
from mqo.prepare import ENGINE, STORE, PreparedBatch
from mqo.results import ResultBlock

if TYPE_CHECKING:
    from mqo.batch import SingleResults
    from mqo.pair_step import PairSteps
    from mqo.pipeline import Pipeline
    from mqo.plan import CompiledPlan

ALONE_CHUNK = 4096  # rows of one block list a replay yields at once (results held in memory)


def first_of_records(plan: CompiledPlan, row_of: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, slot) pairs, row-major and slots ascending within a row (what
    :func:`~indexes.kill_bitsets.set_bits` gives), less every slot whose query has a
    lower slot in the same row: a query's disjuncts are consecutive slots."""
    if len(slots) < 2:
        return row_of, slots
    records = plan.slot_record[slots]
    keep = np.ones(len(slots), bool)
    keep[1:] = (row_of[1:] != row_of[:-1]) | (records[1:] != records[:-1])
    return row_of[keep], slots[keep]


def alone_slots(
    plan: CompiledPlan, prepared: PreparedBatch, rows: np.ndarray, plain: bool = True, disjuncts: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """The single-stream results of ``rows`` (flagged rows of ``prepared``) as (index
    into ``rows``, slot), rows in order and slots ascending within a row: the plain
    slots (unless not ``plain``) and the first surviving disjunct of each query decided
    alone (unless not ``disjuncts``)."""
    cand = prepared.candidates(rows)
    disjuncts = disjuncts and bool(prepared.disjunct_mask.any())
    mask = prepared.single_mask if plain else np.zeros_like(prepared.single_mask)
    row_of, slots = set_bits(cand, mask | prepared.disjunct_mask if disjuncts else mask)
    return first_of_records(plan, row_of, slots) if disjuncts else (row_of, slots)


def single_block(
    plan: CompiledPlan, prepared: PreparedBatch, i: int, plain: bool, alone: int, t: StoredTuple
) -> ResultBlock:
    """The single-stream results of row i of ``prepared``, a visited row, tuple ``t``:
    its plain slots if ``plain``, and the first disjunct that holds of each query
    decided alone among ``alone`` (its candidates among :attr:`PreparedBatch.disjunct_bits`).
    Disjuncts alone are read off the int (a row's few set bits: no array call)."""
    members: list[StoredTuple | None] = [None] * len(plan.streams)
    members[prepared.stream] = t
    if plain:
        slots = alone_slots(plan, prepared, np.array([i]), True, bool(alone))[1]
    else:
        slots = first_disjuncts(plan, alone)
    return ResultBlock(slots, members, t.row[0])


def first_disjuncts(plan: CompiledPlan, alone: int) -> np.ndarray:
    """The set bits of ``alone`` ascending, less each slot whose query has a lower one
    among them (:func:`first_of_records` of one row)."""
    record = plan.slot_record
    slots: list[int] = []
    last = -1
    while alone:
        low = alone & -alone
        slot = low.bit_length() - 1
        alone ^= low
        if record[slot] != last:
            slots.append(slot)
            last = record[slot]
    return np.array(slots, np.int64)


def alone_rows(prepared: PreparedBatch, apart: np.ndarray | None) -> np.ndarray:
    """Per row of ``prepared``, whether its only work is single-stream results that no
    query of ``apart`` (a bitset, or None) is among (see the module docstring)."""
    flags = prepared.flags
    alone = (flags != 0) & (flags & STORE == 0)
    for role in prepared.roles:
        alone &= role.flags == 0
    engine = alone & (flags & ENGINE != 0)
    if engine.any() or apart is not None:
        picked = np.flatnonzero(alone)
        cand = prepared.candidates(picked)
        busy = (cand & (prepared.engine_mask & ~prepared.disjunct_mask)).any(axis=1)
        if apart is not None:
            busy |= (cand & apart).any(axis=1)
        alone[picked[busy]] = False
    return alone


def alone_blocks(
    plan: CompiledPlan, prepared: PreparedBatch, rows: np.ndarray, seqs: np.ndarray
) -> tuple[np.ndarray, list[ResultBlock]]:
    """The results of ``rows`` (rows of ``prepared`` decided alone): the indexes into
    ``rows`` of those that have some, ascending, and one result block each, its tuple
    numbered ``seqs[k]`` (as a visit would number it)."""
    row_of, slots = alone_slots(plan, prepared, rows)
    if not len(slots):
        return np.zeros(0, np.int64), []
    bounds = [*np.flatnonzero(np.diff(row_of, prepend=-1)).tolist(), len(slots)]
    hit = row_of[bounds[:-1]]
    n, s = len(plan.streams), prepared.stream
    blocks: list[ResultBlock] = []
    for k, (row, seq) in enumerate(zip(prepared.rows(rows[hit]), seqs[hit].tolist(), strict=True)):
        members: list[Any] = [None] * n
        members[s] = StoredTuple(s, seq, row)
        blocks.append(ResultBlock(slots[bounds[k] : bounds[k + 1]], members, row[0]))
    return hit, blocks


def run_blocks(
    plan: CompiledPlan, prepared: list[PreparedBatch], which: np.ndarray, row_indexes: np.ndarray, seq: int
) -> list[tuple[int, ResultBlock]]:
    """The results of a run of rows decided alone (row ``row_indexes[j]`` of
    ``prepared[which[j]]`` the j-th to arrive): (j, its result block) for each row with
    results, in arrival order; the j-th row's tuple is numbered ``seq + j``."""
    seqs = np.arange(seq, seq + len(which), dtype=np.int64)
    found: list[tuple[int, ResultBlock]] = []
    for k, prep in enumerate(prepared):
        mine = np.flatnonzero(which == k)
        if len(mine):
            hit, blocks = alone_blocks(plan, prep, row_indexes[mine], seqs[mine])
            found += zip(mine[hit].tolist(), blocks, strict=True)
    if len(prepared) > 1:
        found.sort(key=lambda pair: pair[0])
    return found


def in_arrival_order(
    prepared: list[PreparedBatch], which: np.ndarray, row_indexes: np.ndarray, apart: np.ndarray | None, runs: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For rows arriving in this order (row ``row_indexes[j]`` of ``prepared[which[j]]``
    arrives j-th): each row's ts, every role's flags or'ed, its role 1's flags, its
    stream, and (if ``runs``) whether it is one :func:`alone_rows` picks."""
    n = len(which)
    ts = np.empty(n, np.float64)
    flags = np.empty(n, np.int8)
    own = np.empty(n, np.int8)
    streams = np.empty(n, np.int64)
    alone = np.zeros(n, bool)
    for k, prep in enumerate(prepared):
        chosen = which == k
        at = row_indexes[chosen]
        ts[chosen] = prep.ts[at]
        flags[chosen] = prep.visit_flags()[at]
        own[chosen] = prep.flags[at]
        streams[chosen] = prep.stream
        if runs:
            alone[chosen] = alone_rows(prep, apart)[at]
    return ts, flags, own, streams, alone


def alone_runs(
    pipeline: Pipeline,
    prepared: list[PreparedBatch],
    which: np.ndarray,
    row_indexes: np.ndarray,
    positions: np.ndarray,
    pairs: PairSteps | None,
) -> Iterator[tuple[int, list[ResultBlock]]]:
    """A replay's results of the rows at ``positions`` (each decided alone), made a run of
    at most :data:`ALONE_CHUNK` rows at a time: (position, its block) per row, the rows
    numbered and counted as the pipeline's (``pairs``: the replay's columnar step, told
    the last position handed over)."""
    assert pipeline.plan is not None
    for start in range(0, len(positions), ALONE_CHUNK):
        run = positions[start : start + ALONE_CHUNK]
        found = run_blocks(pipeline.plan, prepared, which[run], row_indexes[run], pipeline.seq)
        pipeline.seq += len(run)  # as visiting them numbers them
        pipeline.counters.results += sum(len(block) for _, block in found)
        at = run.tolist()
        for k, block in found:
            if pairs is not None:
                pairs.upto = at[k]
            yield at[k], [block]


def alone_singles(
    pipeline: Pipeline,
    prepared: list[PreparedBatch],
    which: np.ndarray,
    row_indexes: np.ndarray,
    positions: np.ndarray,
    pairs: PairSteps | None,
) -> list[SingleResults]:
    """:func:`alone_runs` for a caller that keeps every result of a batch together
    (:meth:`mqo.pipeline.Pipeline.push_batch`): the results of the rows at
    ``positions`` as columns, one :class:`~mqo.batch.SingleResults` per prepared batch,
    no object per row."""
    from mqo.batch import SingleResults

    assert pipeline.plan is not None
    out = []
    for k, prep in enumerate(prepared):
        rows = row_indexes[positions[which[positions] == k]]
        row_of, slots = alone_slots(pipeline.plan, prep, rows)
        if len(slots):
            out.append(SingleResults(prep.stream, prep.rows(rows), row_of, slots))
            pipeline.counters.results += len(slots)
    pipeline.seq += len(positions)  # as visiting them numbers them
    if pairs is not None and len(positions):
        pairs.upto = int(positions[-1])
    return out
