"""The join and window step over two streams, as columns.

docs/columnar-join.md is the design. The rows of both streams that can be part of a
result go to the kernel :func:`indexes.join_kernels.join_rows` as flat arrays
(:class:`PairRows`, beside the plan's :class:`~mqo.pair_tables.PairTables`), and what
the kernel leaves is decided here, exactly, as the engine decides it:

* the **fallback pairs** (a tie the doubles cannot decide, an integer past 2**53)
  through the lists' own exact evaluation (``CompiledList.evaluate_pair``,
  ``plan.slots_within``, ``plan.slots_since``);
* the **special slots** (residuals, a query of several disjuncts reported once per
  pair) checked as the engine's ``_emit`` checks them.

:func:`decide` is the step; :mod:`mqo.pair_step` runs it in :meth:`Pipeline.replay
<mqo.pipeline.Pipeline.replay>` with the rows kept from earlier replays, and
:func:`join_batch` over one batch alone (what the differential tests compare with the
engine one tuple at a time).

Only the slots over exactly the two streams are decided here: single-stream results
stay with :mod:`mqo.alone`, slots over one of the two and a third stream with the
engine; plans with slots over both and more, self-joins and lists that compare strings
or booleans are refused (:class:`~mqo.pair_tables.Unsupported`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexes.exact import EXACT_INTEGERS, RELATIVE_BAND
from indexes.kill_bitsets import bitset_to_int
from indexes.stored import StoredTuple
from mqo.batch_input import NUMERIC
from mqo.pair_tables import PairTables, Unsupported
from mqo.prepare import PreparedBatch
from mqo.results import ResultBlock
from mqo.row_layout import row_layout

CHUNK = 4096  # prepared rows masked at a time (a batch's candidate words are not copied whole)


@dataclass
class PairRows:
    """The rows of both streams that can be part of a result (some candidate over the
    two streams, not late), in arrival order, as :func:`indexes.join_kernels.join_rows`
    reads them: a row without such a candidate (every row ``store='candidates'`` does not
    store, most rows of (b)) is never a partner and ends no result, so it is not laid out.

    Rows kept from earlier replays come first (``pos`` -1; their order among themselves
    does not matter: they are partners only)."""

    side: np.ndarray  # 0 or 1: which of the two streams
    ts: np.ndarray
    vals: np.ndarray  # [rows, columns the lists read] as doubles, NaN for NULL
    cand: np.ndarray  # [rows, words]: the candidates over the two streams
    big: np.ndarray  # an integer the lists read is past 2**53 (its double is not the value)
    pos: np.ndarray  # the row's arrival position in its replay (-1: kept from an earlier one)
    batch: np.ndarray  # its prepared batch (-1: kept)
    row: np.ndarray  # its index in that batch
    wlo: np.ndarray  # the first and past-the-last nonzero word of ``cand``
    whi: np.ndarray
    by_ts: np.ndarray  # each side's rows sorted by ts (side 0's, then side 1's)
    side_start: np.ndarray

    def __len__(self) -> int:
        return len(self.side)

    @classmethod
    def arranged(
        cls,
        side: np.ndarray,
        ts: np.ndarray,
        vals: np.ndarray,
        cand: np.ndarray,
        big: np.ndarray,
        pos: np.ndarray,
        batch: np.ndarray,
        row: np.ndarray,
    ) -> PairRows:
        """The rows given, with the arrays the kernel derives from them."""
        words = cand.shape[1]
        nz = cand != 0
        wlo = np.argmax(nz, axis=1) if len(cand) else np.zeros(0, np.int64)
        whi = words - np.argmax(nz[:, ::-1], axis=1) if len(cand) else np.zeros(0, np.int64)
        by_ts = np.concatenate([np.flatnonzero(side == k)[np.argsort(ts[side == k], kind="stable")] for k in (0, 1)])
        side_start = np.array([0, int((side == 0).sum()), len(side)], np.int64)
        return cls(
            side,
            ts,
            vals,
            cand,
            big,
            pos,
            batch,
            row,
            wlo.astype(np.int64),
            whi.astype(np.int64),
            by_ts,
            side_start,
        )

    @classmethod
    def empty(cls, tables: PairTables) -> PairRows:
        n_cols = len(tables.columns[0]) + len(tables.columns[1])
        none = np.zeros(0, np.int64)
        return cls.arranged(
            none,
            np.zeros(0),
            np.zeros((0, n_cols)),
            np.zeros((0, tables.words), np.uint64),
            np.zeros(0, bool),
            none,
            none,
            none,
        )

    def take(self, keep: np.ndarray) -> PairRows:
        """The rows ``keep`` (indexes or a mask), in their order."""
        return PairRows.arranged(
            self.side[keep],
            self.ts[keep],
            self.vals[keep],
            self.cand[keep],
            self.big[keep],
            self.pos[keep],
            self.batch[keep],
            self.row[keep],
        )

    def then(self, later: PairRows) -> PairRows:
        """These rows, then ``later``'s."""
        return PairRows.arranged(
            *(np.concatenate([getattr(self, f), getattr(later, f)]) for f in _GIVEN)  # type: ignore[arg-type]
        )

    def stored(self, prepared: Sequence[PreparedBatch]) -> list[tuple[Any, ...]]:
        """The stored row ``(ts, id, *values)`` of each row (of a replay's ``prepared``)."""
        out: list[Any] = [None] * len(self)
        for k, prep in enumerate(prepared):
            at = np.flatnonzero(self.batch == k)
            if len(at):
                for j, made in zip(at.tolist(), prep.rows(self.row[at]), strict=True):
                    out[j] = made
        return out

    @classmethod
    def of(
        cls,
        tables: PairTables,
        prepared: Sequence[PreparedBatch],
        which: np.ndarray,
        row: np.ndarray,
        late: np.ndarray,
    ) -> PairRows:
        """Rows arriving in this order (row ``row[j]`` of ``prepared[which[j]]`` arrives
        j-th; ``late[j]``: it is late, neither matched nor stored): those of the two
        streams with a candidate over them, not late."""
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []  # positions, batch rows, words, batch
        for k, prep in enumerate(prepared):
            if prep.stream not in tables.streams or not len(prep.cand):
                continue
            at = np.flatnonzero(which == k)
            position = np.full(len(prep), -1, np.int64)
            position[row[at]] = at
            flagged = np.flatnonzero(prep.kept >= 0)
            row_of_kept = np.empty(len(prep.cand), np.int64)
            row_of_kept[prep.kept[flagged]] = flagged
            for start in range(0, len(prep.cand), CHUNK):  # the flagged rows' words, masked where they lie
                masked = prep.cand[start : start + CHUNK] & tables.mask
                live = (masked != 0).any(axis=1)
                batch_rows = row_of_kept[start : start + CHUNK][live]
                keep = position[batch_rows]
                stays = keep >= 0  # (a row the order leaves out)
                stays[stays] = ~late[keep[stays]]
                if stays.any():
                    parts.append((keep[stays], batch_rows[stays], masked[live][stays], k))
        if not parts:
            return cls.empty(tables)
        pos = np.concatenate([p[0] for p in parts])
        order = np.argsort(pos, kind="stable")
        pos = pos[order]
        batch = np.concatenate([np.full(len(p[0]), p[3], np.int64) for p in parts])[order]
        batch_row = np.concatenate([p[1] for p in parts])[order]
        cand = np.concatenate([p[2] for p in parts])[order]
        n = len(pos)
        side = np.zeros(n, np.int64)
        ts = np.empty(n, np.float64)
        vals = np.full((n, len(tables.columns[0]) + len(tables.columns[1])), np.nan)
        big = np.zeros(n, bool)
        for k in {p[3] for p in parts}:
            prep = prepared[k]
            s = tables.streams.index(prep.stream)
            at = np.flatnonzero(batch == k)
            rows = batch_row[at]
            side[at] = s
            ts[at] = prep.ts[rows]
            layout = row_layout(tables.plan, prep.stream)
            for p, col in tables.columns[s].items():
                if p == 0:
                    vals[at, col] = prep.ts[rows]
                elif p == 1:
                    vals[at, col] = prep.ids[rows].astype(np.float64)
                else:
                    numeric = layout.numeric_row.get(p)
                    if numeric is None:
                        raise Unsupported("a join column that is not numeric")
                    vals[at, col] = prep.columns[NUMERIC][numeric][rows]
            for col in tables.integer_columns[s]:
                with np.errstate(invalid="ignore"):
                    big[at] |= np.abs(vals[at, col]) >= EXACT_INTEGERS
        return cls.arranged(side, ts, vals, cand, big, pos, batch, batch_row)


_GIVEN = ("side", "ts", "vals", "cand", "big", "pos", "batch", "row")


@dataclass
class PairResults:
    """Result blocks, one per pair of rows (arrival positions: the later row, its
    partner) with the slots it satisfies as nonzero words: those of pair ``k`` are
    ``word_index``/``words`` from ``starts[k]`` to ``starts[k + 1]`` (what the
    engine's ``ResultBlock`` holds as an int)."""

    rows: np.ndarray
    partners: np.ndarray
    starts: np.ndarray
    word_index: np.ndarray
    words: np.ndarray
    fallback_pairs: int

    def __len__(self) -> int:
        return int(np.bitwise_count(self.words).sum())

    def triples(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, partner, slot) per result, pair by pair, slots ascending."""
        pair, _, slots = self.entries()
        return self.rows[pair], self.partners[pair], slots

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(pair, word entry, slot) per result, pair by pair, slots ascending."""
        bits = np.unpackbits(self.words.astype("<u8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
        entry, bit = np.nonzero(bits)
        pair = np.repeat(np.arange(len(self.rows)), np.diff(self.starts))[entry]
        return pair, entry, self.word_index[entry] * 64 + bit


def run_kernel(
    tables: PairTables, rows: PairRows, start: int = 0, capacity: int = 1 << 14
) -> tuple[PairResults, tuple[np.ndarray, np.ndarray]]:
    """The kernel over the rows from ``start`` on (those before are partners only): its
    result blocks, and its fallback pairs as ``(rows, partners)`` (decided by the caller)."""
    from indexes.join_kernels import join_rows  # numba, on first use (importing mqo stays light)

    a = tables.arrays
    found: list[tuple[np.ndarray, ...]] = []
    fallback: list[tuple[np.ndarray, np.ndarray]] = []
    total = len(rows.side)
    # a little past the widest MAXWINDOW: the kernel decides each pair's span exactly
    extent = float(np.abs(rows.ts).max()) if total else 0.0
    reach = tables.reach + RELATIVE_BAND * (extent + tables.reach) * 4 + 1e-300
    key = tables.keys(rows.vals, rows.side)
    by_probe = rows.by_ts
    if tables.key is not None:  # each side's rows by key, then ts (by_ts is in ts order)
        by_probe = np.concatenate(
            [part[np.argsort(key[part], kind="stable")] for part in np.split(rows.by_ts, rows.side_start[1:2])]
        )
    while True:
        out_a = np.empty(capacity, np.int64)
        out_b = np.empty(capacity, np.int64)
        out_start = np.empty(capacity, np.int64)
        out_widx = np.empty(capacity * 4 + tables.words, np.int64)
        out_word = np.empty(capacity * 4 + tables.words, np.uint64)
        fb_a = np.empty(capacity // 4 + 16, np.int64)
        fb_b = np.empty(capacity // 4 + 16, np.int64)
        start_next, n_pairs, n_words, n_fb = join_rows(
            start,
            rows.side,
            rows.ts,
            rows.vals,
            rows.cand,
            rows.wlo,
            rows.whi,
            rows.big,
            key,
            by_probe,
            key[by_probe],
            rows.ts[by_probe],
            rows.side_start,
            reach,
            a["l_op"],
            a["l_kf"],
            a["l_left_side"],
            a["l_left_col"],
            a["l_right_col"],
            a["l_n"],
            a["l_cbase"],
            a["consts"],
            a["c_exact"],
            a["l_unit"],
            a["l_k_exact"],
            a["l_same_kind"],
            a["l_stride"],
            a["l_rbase"],
            a["prefix_rows"],
            a["suffix_rows"],
            a["l_obase"],
            a["offsets"],
            a["users"],
            a["w_floats"],
            a["w_masks"],
            a["s_floats"],
            a["s_masks"],
            out_a,
            out_b,
            out_start,
            out_widx,
            out_word,
            fb_a,
            fb_b,
        )
        found.append((out_a[:n_pairs], out_b[:n_pairs], out_start[:n_pairs], out_widx[:n_words], out_word[:n_words]))
        fallback.append((fb_a[:n_fb], fb_b[:n_fb]))
        if start_next >= total:
            break
        if start_next == start:  # one row's results did not fit: room for more
            capacity *= 4
        start = start_next
    offset = 0
    starts = []
    for part in found:  # each call's starts count from its own first word
        starts.append(part[2] + offset)
        offset += len(part[3])
    starts.append(np.array([offset], np.int64))
    return PairResults(
        np.concatenate([f[0] for f in found]),
        np.concatenate([f[1] for f in found]),
        np.concatenate(starts),
        np.concatenate([f[3] for f in found]),
        np.concatenate([f[4] for f in found]),
        sum(len(f[0]) for f in fallback),
    ), (np.concatenate([f[0] for f in fallback]), np.concatenate([f[1] for f in fallback]))


def decide(
    tables: PairTables, rows: PairRows, stored: Sequence[tuple[Any, ...]], start: int = 0, capacity: int = 1 << 14
) -> PairResults:
    """The two-stream results whose newest row is one of ``rows[start:]`` (the rows
    before ``start`` are partners only), exactly as the engine reports them: pairs of
    row indexes into ``rows``; ``stored``: each row's stored row (``capacity``: result
    pairs per kernel call to begin with)."""
    results, (fa, fb) = run_kernel(tables, rows, start, capacity)
    decided = [(j, r, _decide_pair(tables, rows, stored, j, r)) for j, r in zip(fa.tolist(), fb.tolist(), strict=True)]
    decided = [(j, r, mask) for j, r, mask in decided if mask]
    if decided:
        results = _with_blocks(results, tables.words, decided)
    if tables.special.any():
        results = _special_checked(tables, rows, stored, results)
    return results


@dataclass
class PairJoin:
    """The two-stream results of one batch (:func:`join_batch`)."""

    tables: PairTables
    rows: PairRows
    stored: list[tuple[Any, ...]]
    results: PairResults

    def ids(self) -> list[tuple[str, int, int]]:
        """Each result as (query, id of the first stream's tuple, id of the second's)."""
        plan = self.tables.plan
        out = []
        a, b, slots = self.results.triples()
        for j, r, q in zip(a.tolist(), b.tolist(), slots.tolist(), strict=True):
            ids = [0, 0]
            for x in (j, r):
                ids[int(self.rows.side[x])] = self.stored[x][1]
            out.append((plan.query_names(q), ids[0], ids[1]))
        return out

    def blocks(self) -> list[ResultBlock]:
        return to_blocks(self.tables, self.results, self.rows, self.stored)


def join_batch(
    tables: PairTables,
    prepared: Sequence[PreparedBatch],
    which: np.ndarray,
    row: np.ndarray,
    late: np.ndarray,
    capacity: int = 1 << 14,
) -> PairJoin:
    """The two-stream results of rows arriving in this order (row ``row[j]`` of
    ``prepared[which[j]]`` arrives j-th; ``late[j]``: it is late), with nothing stored before."""
    rows = PairRows.of(tables, prepared, which, row, late)
    stored = rows.stored(prepared)
    return PairJoin(tables, rows, stored, decide(tables, rows, stored, 0, capacity))


def _with_blocks(results: PairResults, words: int, blocks: list[tuple[int, int, int]]) -> PairResults:
    """``results`` and the blocks (row, partner, slot mask as an int) after them."""
    rows, partners, starts, index, values = [results.rows], [results.partners], [results.starts[:-1]], [], []
    at = int(results.starts[-1])
    for j, r, mask in blocks:
        row = np.frombuffer(mask.to_bytes(words * 8, "little"), "<u8").astype(np.uint64)
        nz = np.flatnonzero(row)
        rows.append(np.array([j], np.int64))
        partners.append(np.array([r], np.int64))
        starts.append(np.array([at], np.int64))
        index.append(nz)
        values.append(row[nz])
        at += len(nz)
    starts.append(np.array([at], np.int64))
    return PairResults(
        np.concatenate(rows),
        np.concatenate(partners),
        np.concatenate(starts),
        np.concatenate([results.word_index, *index]),
        np.concatenate([results.words, *values]),
        results.fallback_pairs,
    )


def _decide_pair(tables: PairTables, rows: PairRows, stored: Sequence[tuple[Any, ...]], j: int, r: int) -> int:
    """The slots pair (j, r) satisfies, decided as the engine decides them (exact lists,
    MAXWINDOW and registration levels), for a pair the kernel left undecided."""
    plan = tables.plan
    cand = bitset_to_int(rows.cand[j] & rows.cand[r])
    by_stream = {tables.streams[int(rows.side[j])]: stored[j], tables.streams[int(rows.side[r])]: stored[r]}
    for lst in tables.lists:
        if not cand & lst.kill.any_user:
            continue
        outcome = lst.evaluate_pair(by_stream[lst.left_stream], by_stream[lst.right_stream])  # type: ignore[index]
        cand &= ~lst.kill.killed(*outcome)
    if not cand:
        return 0
    t1, t2 = by_stream[tables.streams[0]][0], by_stream[tables.streams[1]][0]
    lo, hi = min(t1, t2), max(t1, t2)
    return cand & plan.slots_within(lo, hi) & plan.slots_since(lo)


def _special_checked(
    tables: PairTables, rows: PairRows, stored: Sequence[tuple[Any, ...]], results: PairResults
) -> PairResults:
    """``results`` after the checks of slots with residuals or several disjuncts
    (``Engine._emit``): residuals on the pair's rows, and one report per query and
    pair (its lowest slot, as the engine's slot order reports it)."""
    plan = tables.plan
    pair, entry, slots = results.entries()
    at = np.flatnonzero(tables.special[slots])
    if not len(at):
        return results
    pairs, qs = pair[at], slots[at]
    # per distinct slot (a few hundred at most): residuals to test, several disjuncts
    distinct, slot_of = np.unique(qs, return_inverse=True)
    made = [plan.slots[q] for q in distinct.tolist()]
    residual = np.array([bool(slot.residuals) for slot in made])[slot_of]
    multi = np.array([slot.multi_disjunct for slot in made])[slot_of]
    holds = np.ones(len(at), bool)
    for k in np.flatnonzero(residual).tolist():
        p = int(pairs[k])
        j, r = int(results.rows[p]), int(results.partners[p])
        members: list[Any] = [None] * len(plan.streams)
        members[tables.streams[int(rows.side[j])]] = stored[j]
        members[tables.streams[int(rows.side[r])]] = stored[r]
        holds[k] = all(test(members) for test in made[slot_of[k]].residuals)
    # a query with several disjuncts is reported once per pair, by its first slot that
    # holds (the entries go pair by pair, slots ascending; unique's first index is the
    # first in that order)
    reported = np.flatnonzero(holds & multi)
    if len(reported):
        records, inverse = np.unique(plan.slot_record[qs[reported]], return_inverse=True)
        names: dict[str, int] = {}  # (a query is its name: numbered by it, not by its record)
        query = np.array([names.setdefault(plan.record_names[r], len(names)) for r in records.tolist()])[inverse]
        key = pairs[reported].astype(np.int64) * len(names) + query
        again = np.ones(len(reported), bool)
        again[np.unique(key, return_index=True)[1]] = False
        holds[reported[again]] = False
    words = results.words.copy()
    dropped = np.flatnonzero(~holds)
    bits = np.left_shift(np.uint64(1), (qs[dropped] & 63).astype(np.uint64))
    np.bitwise_and.at(words, entry[at[dropped]], ~bits)
    keep = words != 0
    counts = np.add.reduceat(keep, results.starts[:-1]) if len(keep) else np.zeros(len(results.rows), np.int64)
    alive = counts > 0
    return PairResults(
        results.rows[alive],
        results.partners[alive],
        np.concatenate([[0], np.cumsum(counts[alive])]).astype(np.int64),
        results.word_index[keep],
        words[keep],
        results.fallback_pairs,
    )


def to_blocks(
    tables: PairTables, results: PairResults, rows: PairRows, stored: Sequence[tuple[Any, ...]]
) -> list[ResultBlock]:
    """The results as the engine's :class:`~mqo.results.ResultBlock` objects (the slot
    numbers and stored tuples per pair), in the order of ``results``: what the result
    writers take. A row's stored tuple is made once, however many pairs it is in."""
    made: dict[int, StoredTuple] = {}
    n = len(tables.plan.streams)
    streams = tables.streams
    pair, _, slots = results.entries()
    per_pair = np.split(slots, np.searchsorted(pair, np.arange(1, len(results.rows))))
    blocks = []
    side = rows.side
    for p, (j, r) in enumerate(zip(results.rows.tolist(), results.partners.tolist(), strict=True)):
        members: list[StoredTuple | None] = [None] * n
        for x in (j, r):
            t = made.get(x)
            if t is None:
                t = made[x] = StoredTuple(streams[int(side[x])], x, stored[x])
            members[t.stream] = t
        later, earlier = stored[j][0], stored[r][0]
        blocks.append(ResultBlock(per_pair[p], members, later if later >= earlier else earlier))
    return blocks
