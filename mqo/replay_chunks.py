"""The rows a replay visits, a chunk at a time, and those it stores without a visit.

A replay (:meth:`mqo.pipeline.Pipeline.replay`) makes the stored rows, engine
candidates and watermarks of the rows it visits a chunk at a time
(:func:`visited_chunk`), and with them the quiet runs below.

Most rows of a stream that only meets later rows of another (bids before the window
rows of the views they join, NEXMark's Q7) end no result when they arrive: every
stream their slots read stores nothing at or after their ts that those slots want
(:meth:`mqo.feeds.Feeds.ends_nothing`, over the slots a visit hands the engine). The
engine would return at once for each; such a row need only be stored, with the
attribute outcome the batch kernels gave it. A replay stores a run of them at a time,
between two rows it visits: the run's rows are of one stream, none is late, none has
results of its own (single-stream ones, plain or of a query decided alone, or the
columnar step's) or further roles, and no row decided alone, nor any yield to the
caller (which may feed view rows in), comes between them, so that nothing but the
run's own stream changes while it is stored; the run is yielded as its last row, with
no results.

Each pair of tuples is still found exactly once: a row stored this way finds nothing
when it arrives, and every tuple after it meets it in the window state as it would
have. The adaptive order sees only the rows it is asked to match (a row stored this
way is not one of the tuples it measures).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from indexes.stored import StoredTuple
from mqo.clock import MarkList, marks_at
from mqo.prepare import ENGINE, SINGLE, STORE, PreparedBatch, engine_cands_in_order, rows_in_order

if TYPE_CHECKING:
    from mqo.pipeline import Pipeline


def visited_chunk(
    prepared: list[PreparedBatch],
    which: np.ndarray,
    row_indexes: np.ndarray,
    own: np.ndarray,
    late: np.ndarray,
    marks: MarkList,
    at: np.ndarray,
    paired: dict[int, Any],
    before: np.ndarray,
) -> tuple[list[tuple[Any, ...]], np.ndarray]:
    """The replay's rows ``at`` (positions in arrival order; ``marks``: the watermark
    before each row, ``paired``: the rows with the columnar step's results,
    ``before``: per visited row, the rows decided alone before it): per row ``(k, i,
    own flags, late, stored row, engine candidates, watermark after it)``, and where
    each row's quiet run ends (:func:`quiet_runs`)."""
    which_at = which[at]
    stored = rows_in_order(prepared, which_at, row_indexes[at])
    cands = engine_cands_in_order(prepared, which_at, row_indexes[at])
    after = marks_at(marks, at + 1)
    lists = (which_at.tolist(), row_indexes[at].tolist(), own[at].tolist(), late[at].tolist())
    parts = list(zip(*lists, stored, cands, after, strict=True))
    return parts, quiet_runs(prepared, which_at, row_indexes[at], own[at], late[at], np.isin(at, list(paired)), before)


def quiet_runs(
    prepared: list[PreparedBatch],
    which: np.ndarray,
    row_indexes: np.ndarray,
    own: np.ndarray,
    late: np.ndarray,
    paired: np.ndarray,
    before: np.ndarray,
) -> np.ndarray:
    """For a chunk of visited rows (row c is row ``row_indexes[c]`` of
    ``prepared[which[c]]``, with flags ``own[c]``; ``paired``: it has the columnar
    step's results; ``before``: the rows decided alone before it), where the run of
    rows that may be stored without a visit starting at each row ends (exclusive; the
    row itself when it may not: late, with single-stream results, plain or of a query
    decided alone, with the columnar step's results or with further roles)."""
    n = len(which)
    quiet = ~late & ~paired & (own & SINGLE == 0)
    stream = np.empty(n, np.int64)
    for k, prep in enumerate(prepared):
        mine = np.flatnonzero(which == k)
        stream[mine] = prep.stream
        if prep.roles:
            quiet[mine] = False
        elif prep.disjunct_mask.any():
            quiet[mine] &= ~(prep.candidates(row_indexes[mine]) & prep.disjunct_mask).any(axis=1)
    # a run: quiet rows in a row, of one stream, with no row decided alone between them
    cut = np.flatnonzero(~quiet[1:] | ~quiet[:-1] | (stream[1:] != stream[:-1]) | (before[1:] != before[:-1])) + 1
    ends = np.append(cut, n)[np.searchsorted(cut, np.arange(n), side="right")]
    return np.where(quiet, ends, np.arange(n))


def store_quietly(pipeline: Pipeline, parts: list[tuple[Any, ...]], prepared: list[PreparedBatch]) -> None:
    """Store the rows of ``parts`` (a run :func:`quiet_runs` found and
    :meth:`mqo.engine.Engine.ends_nothing` cleared; each ``(k, i, flags, late, row,
    cand, mark)``) in turn, as a visit would after the engine found them nothing."""
    engine, state = pipeline.engine, pipeline.state
    assert engine is not None and state is not None
    s = prepared[parts[0][0]].stream
    seq = pipeline.seq
    pipeline.seq = seq + len(parts)
    pipeline.counters.quiet += len(parts)
    tuples = [StoredTuple(s, seq + r, part[4]) for r, part in enumerate(parts)]
    matched = [r for r, part in enumerate(parts) if part[2] & ENGINE]
    engine.keep_outcomes([tuples[r] for r in matched], [parts[r][5] for r in matched])
    state.insert_run(s, [t for t, part in zip(tuples, parts, strict=True) if part[2] & STORE])
    if pipeline.config.check:
        state._check()


def run_cut(pipeline: Pipeline, parts: list[tuple[Any, ...]], c: int, count: int) -> int:
    """How many of the ``count`` rows of a quiet run from ``parts[c]`` on to store
    before the run is yielded, so that a run ends where a visit of each row would have
    yielded something: at the row where the caller wants a yield
    (:attr:`Pipeline.yield_at`, aggregate views' emission), and under ordered emission
    at the first row whose watermark releases a held result (the run's rows add none)."""
    if pipeline.yield_at is not None:
        count = min(count, max(1, pipeline.yield_at - pipeline.visits))
    held = pipeline.held
    first = None if held is None else held.first_ts
    if first is not None:
        passed, mark_at = pipeline.clock.passed, 6  # (a part's watermark after its row)
        for r in range(c, c + count):
            if passed(first, parts[r][mark_at]):
                return r - c + 1
    return count
