"""The join and window phase of a batch over two streams, as columns: a prototype.

docs/columnar-join.md is the design. This module hands the plan and the prepared rows
of two streams to the kernel :func:`indexes.join_kernels.join_rows` as flat arrays and
decides exactly, in Python, what the kernel leaves to it:

* :class:`PairTables`: what the plan holds for the slots reading exactly the two
  streams: their mask as words, every join and window list between the streams (op,
  factor and constants as doubles, prefix and suffix checkpoint rows, the users as
  CSR), the MAXWINDOW and registration levels with their slot masks;
* :class:`PairRows`: the rows of both streams in arrival order (ts, the lists'
  columns as float64, the candidate words of the rows that have some, late flags);
* :func:`join_batch`: the kernel's (row, partner, slot) triples, the fallback pairs
  decided through the lists' own exact evaluation (``CompiledList.evaluate_pair``,
  ``plan.slots_within``, ``plan.slots_since``), and the slots that need a check of
  their own (residuals, a query of several disjuncts reported once per pair) checked
  as the engine's ``_emit`` checks them.

Only the slots over exactly the two streams are decided here: single-stream results
stay with :mod:`mqo.alone`, slots over one of the two and a third stream with the
engine; slots over both and more, self-joins and lists that compare strings or
booleans are refused (:class:`Unsupported`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from indexes.exact import EXACT_INTEGERS, RELATIVE_BAND, to_float
from indexes.join_kernels import OP_CODES, join_rows
from indexes.kill_bitsets import bitset_to_int, words_for
from indexes.stored import StoredTuple
from mqo.batch_input import NUMERIC
from mqo.plan import CompiledList, CompiledPlan
from mqo.prepare import PreparedBatch
from mqo.results import ResultBlock
from mqo.row_layout import row_layout
from predicates import ColumnType, Kind

CHUNK = 16_384  # prepared rows masked at a time (a batch's candidate words are not copied whole)


class Unsupported(Exception):
    """A plan or batch the prototype does not decide (see the module docstring)."""


def words_of(flags: np.ndarray, words: int) -> np.ndarray:
    """A bitset row (``uint64`` words) with bit ``q`` set where ``flags[q]``."""
    padded = np.zeros(words * 64, bool)
    padded[: len(flags)] = flags
    return np.packbits(padded, bitorder="little").view("<u8").astype(np.uint64)


def _stride(n: int, words: int, budget_bits: int = 1 << 26) -> int:
    """The kill tables' stride rule (indexes.kill_table): a power of two keeping a table under budget."""
    stride = 1
    while (n // stride + 2) * words * 64 > budget_bits and stride < n:
        stride *= 2
    return stride


def _integer(plan: CompiledPlan, stream: int, position: int) -> bool:
    """Whether a row position of a stream holds integers (``id``, INTEGER and BYTE columns)."""
    if position < 2:
        return position == 1
    return plan.streams[stream].columns[position - 2].ctype in (ColumnType.INTEGER, ColumnType.BYTE)


@dataclass
class PairTables:
    """The plan's flat arrays for the slots over exactly streams ``s0`` and ``s1``."""

    plan: CompiledPlan
    streams: tuple[int, int]
    words: int
    mask: np.ndarray
    lists: list[CompiledList]
    columns: tuple[dict[int, int], dict[int, int]]  # per side: row position -> column of ``vals``
    integer_columns: tuple[list[int], list[int]]  # per side: the columns holding integers
    arrays: dict[str, Any]
    reach: float
    special: np.ndarray  # the slots of ``mask`` needing a check of their own (bools per slot)

    @classmethod
    def of(cls, plan: CompiledPlan, s0: int, s1: int) -> PairTables:
        if any(plan.roles_of[s] for s in range(plan.n_real)):
            raise Unsupported("self-joins")
        pair = (1 << s0) | (1 << s1)
        masks = plan.slot_stream_mask
        if np.any(((masks & pair) == pair) & ((masks & ~pair) != 0)):
            raise Unsupported("queries over these two streams and more")
        mine = masks == pair
        words = words_for(plan.n_slots)
        lo_s, hi_s = min(s0, s1), max(s0, s1)
        lists = list(plan.pair_lists[Kind.JOIN][lo_s][hi_s]) + list(plan.pair_lists[Kind.WINDOW][lo_s][hi_s])
        columns: tuple[dict[int, int], dict[int, int]] = ({}, {})
        side_of = {s0: 0, s1: 1}
        op, kf, left_side, left_col, right_col, n, cbase, stride, rbase, obase = ([] for _ in range(10))
        unit, k_exact, same_kind = [], [], []
        consts, c_exact, prefix, suffix, offsets, users = [], [], [], [], [], []
        n_consts = n_rows = n_offsets = n_users = 0
        from indexes.kernels import build_checkpoints  # numba, on first use

        for lst in lists:
            if not lst.numeric or lst.right_pos is None or lst.right_stream is None:
                raise Unsupported(f"list {lst.key} compares strings or booleans")
            ls, rs = side_of[lst.left_stream], side_of[lst.right_stream]
            lcol = columns[ls].setdefault(lst.left_pos, len(columns[0]) + len(columns[1]))
            rcol = columns[rs].setdefault(lst.right_pos, len(columns[0]) + len(columns[1]))
            floats = np.asarray(lst.covering.floats, np.float64)
            own = lst.offsets - lst.offsets[0]
            flat = np.ascontiguousarray(lst.own_users, np.int32)
            st = _stride(lst.n, words)
            factor = lst.key.factor
            assert factor is not None  # (a numeric two-column list has one)
            op.append(OP_CODES[lst.key.op])
            kf.append(to_float(factor))
            left_side.append(ls)
            left_col.append(lcol)
            right_col.append(rcol)
            n.append(lst.n)
            cbase.append(n_consts)
            stride.append(st)
            rbase.append(n_rows)
            obase.append(n_offsets)
            consts.append(floats)
            # which constants are the doubles they are kept as (else a Fraction's nearest double)
            exact_c = np.ones(lst.n, bool) if lst.doubles else np.array([type(c) is float for c in lst.values], bool)
            c_exact.append(exact_c)
            unit.append(factor == 1)
            k_exact.append(Fraction(to_float(factor)) == factor)
            same_kind.append(
                _integer(plan, lst.left_stream, lst.left_pos) == _integer(plan, lst.right_stream, lst.right_pos)
            )
            own64 = np.ascontiguousarray(own, np.int64)
            prefix.append(build_checkpoints(own64, flat, lst.n, st, words, False))
            suffix.append(build_checkpoints(own64, flat, lst.n, st, words, True))
            offsets.append(own64 + n_users)
            users.append(flat)
            n_consts += lst.n
            n_rows += len(prefix[-1])
            n_offsets += len(own64)
            n_users += len(flat)
        windows, sinces = plan.windows, plan.sinces
        level_masks = [words_of(plan.slot_window_level >= i, words) for i in range(len(windows))]
        since_masks = [words_of(plan.slot_since_level <= i, words) for i in range(len(sinces))]
        empty_rows = np.zeros((0, words), np.uint64)
        arrays: dict[str, Any] = {
            "l_op": np.array(op, np.int64),
            "l_kf": np.array(kf, np.float64),
            "l_left_side": np.array(left_side, np.int64),
            "l_left_col": np.array(left_col, np.int64),
            "l_right_col": np.array(right_col, np.int64),
            "l_n": np.array(n, np.int64),
            "l_cbase": np.array(cbase, np.int64),
            "consts": np.concatenate(consts) if consts else np.zeros(0),
            "c_exact": np.concatenate(c_exact) if c_exact else np.zeros(0, bool),
            "l_unit": np.array(unit, bool),
            "l_k_exact": np.array(k_exact, bool),
            "l_same_kind": np.array(same_kind, bool),
            "l_stride": np.array(stride, np.int64),
            "l_rbase": np.array(rbase, np.int64),
            "prefix_rows": np.concatenate(prefix) if prefix else empty_rows,
            "suffix_rows": np.concatenate(suffix) if suffix else empty_rows,
            "l_obase": np.array(obase, np.int64),
            "offsets": np.concatenate(offsets) if offsets else np.zeros(0, np.int64),
            "users": np.concatenate(users) if users else np.zeros(0, np.int32),
            "w_floats": np.array(windows.floats, np.float64),
            "w_masks": np.array(level_masks, np.uint64).reshape(len(windows), words),
            "s_floats": np.array(sinces.floats, np.float64),
            "s_masks": np.array(since_masks, np.uint64).reshape(len(sinces), words),
        }
        integer = tuple(
            [col for pos, col in columns[side].items() if _integer(plan, (s0, s1)[side], pos)] for side in (0, 1)
        )
        widest = float(max(windows.floats)) if len(windows) else 0.0
        special = np.zeros(plan.n_slots, bool)
        special[: len(plan.slot_special)] = plan.slot_special
        return cls(
            plan,
            (s0, s1),
            words,
            words_of(mine, words),
            lists,
            columns,
            integer,  # type: ignore[arg-type]
            arrays,
            widest,
            special & mine,
        )


@dataclass
class PairRows:
    """The rows of both streams that can be part of a result (some candidate over the
    two streams, not late), in arrival order, as :func:`indexes.join_kernels.join_rows`
    reads them: a row without such a candidate (every row ``store='candidates'`` does not
    store, most rows of (b)) is never a partner and ends no result, so it is not laid out."""

    pos: np.ndarray  # each row's arrival position
    side: np.ndarray
    row: np.ndarray  # each row's index in its prepared batch
    ts: np.ndarray
    vals: np.ndarray
    cand: np.ndarray
    wlo: np.ndarray
    whi: np.ndarray
    big: np.ndarray
    by_ts: np.ndarray
    sorted_ts: np.ndarray
    side_start: np.ndarray

    @classmethod
    def of(
        cls,
        tables: PairTables,
        prepared: tuple[PreparedBatch, PreparedBatch],
        side: np.ndarray,
        row: np.ndarray,
        late: np.ndarray,
    ) -> PairRows:
        words = tables.words
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # per side: positions, batch rows, words
        for k, prep in enumerate(prepared):
            if prep.stream != tables.streams[k]:
                raise Unsupported("prepared batches in the tables' stream order")
            at = np.flatnonzero(side == k)
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
                    parts.append((keep[stays], batch_rows[stays], masked[live][stays]))
        pos = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
        order = np.argsort(pos, kind="stable")
        pos = pos[order]
        live_side = side[pos].astype(np.int64)
        batch_row = (np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64))[order]
        cand = (np.concatenate([p[2] for p in parts]) if parts else np.zeros((0, words), np.uint64))[order]
        nz = cand != 0
        wlo = np.argmax(nz, axis=1) if len(cand) else np.zeros(0, np.int64)
        whi = words - np.argmax(nz[:, ::-1], axis=1) if len(cand) else np.zeros(0, np.int64)
        n = len(pos)
        ts = np.empty(n, np.float64)
        vals = np.full((n, len(tables.columns[0]) + len(tables.columns[1])), np.nan)
        big = np.zeros(n, bool)
        for k, prep in enumerate(prepared):
            at = np.flatnonzero(live_side == k)
            rows = batch_row[at]
            ts[at] = prep.ts[rows]
            layout = row_layout(tables.plan, prep.stream)
            for p, col in tables.columns[k].items():
                if p == 0:
                    vals[at, col] = prep.ts[rows]
                elif p == 1:
                    vals[at, col] = prep.ids[rows].astype(np.float64)
                else:
                    numeric = layout.numeric_row.get(p)
                    if numeric is None:
                        raise Unsupported("a join column that is not numeric")
                    vals[at, col] = prep.columns[NUMERIC][numeric][rows]
            for col in tables.integer_columns[k]:
                with np.errstate(invalid="ignore"):
                    big[at] |= np.abs(vals[at, col]) >= EXACT_INTEGERS
        by_ts = np.concatenate(
            [np.flatnonzero(live_side == k)[np.argsort(ts[live_side == k], kind="stable")] for k in (0, 1)]
        )
        side_start = np.array([0, int((live_side == 0).sum()), n], np.int64)
        return cls(
            pos,
            live_side,
            batch_row,
            ts,
            vals,
            cand,
            wlo.astype(np.int64),
            whi.astype(np.int64),
            big,
            by_ts,
            ts[by_ts],
            side_start,
        )


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
    tables: PairTables, rows: PairRows, capacity: int = 1 << 14
) -> tuple[PairResults, tuple[np.ndarray, np.ndarray]]:
    """The kernel over every row: its result blocks, and its fallback pairs as
    ``(rows, partners)`` in :attr:`PairResults` form with no words (decided by the caller)."""
    a = tables.arrays
    found: list[tuple[np.ndarray, ...]] = []
    fallback: list[tuple[np.ndarray, np.ndarray]] = []
    start = 0
    total = len(rows.side)
    # a little past the widest MAXWINDOW: the kernel decides each pair's span exactly
    extent = float(np.abs(rows.ts).max()) if total else 0.0
    reach = tables.reach + RELATIVE_BAND * (extent + tables.reach) * 4 + 1e-300
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
            rows.by_ts,
            rows.sorted_ts,
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


def join_batch(
    tables: PairTables,
    prepared: tuple[PreparedBatch, PreparedBatch],
    side: np.ndarray,
    row: np.ndarray,
    late: np.ndarray,
    capacity: int = 1 << 14,
) -> PairResults:
    """The two-stream results of rows arriving in this order (row ``row[j]`` of
    ``prepared[side[j]]`` arrives j-th; ``late[j]``: it is late, neither matched nor
    stored), exactly as the engine reports them (``capacity``: result pairs per
    kernel call to begin with)."""
    rows = PairRows.of(tables, prepared, side, row, late)
    results, (fa, fb) = run_kernel(tables, rows, capacity)
    decided = [
        (j, r, _decide_pair(tables, rows, prepared, j, r)) for j, r in zip(fa.tolist(), fb.tolist(), strict=True)
    ]
    decided = [(j, r, mask) for j, r, mask in decided if mask]
    if decided:
        results = _with_blocks(results, tables.words, decided)
    if tables.special.any():
        results = _special_checked(tables, rows, prepared, results)
    results.rows = rows.pos[results.rows]  # (laid-out rows -> arrival positions)
    results.partners = rows.pos[results.partners]
    return results


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


def _stored_row(rows: PairRows, prepared: tuple[PreparedBatch, PreparedBatch], j: int) -> tuple[Any, ...]:
    return prepared[int(rows.side[j])].row(int(rows.row[j]))


def _decide_pair(
    tables: PairTables, rows: PairRows, prepared: tuple[PreparedBatch, PreparedBatch], j: int, r: int
) -> int:
    """The slots pair (j, r) satisfies, decided as the engine decides them (exact lists,
    MAXWINDOW and registration levels), for a pair the kernel left undecided."""
    plan = tables.plan
    cand = bitset_to_int(rows.cand[j] & rows.cand[r])
    by_stream = {tables.streams[int(rows.side[j])]: _stored_row(rows, prepared, j)}
    by_stream[tables.streams[int(rows.side[r])]] = _stored_row(rows, prepared, r)
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
    tables: PairTables, rows: PairRows, prepared: tuple[PreparedBatch, PreparedBatch], results: PairResults
) -> PairResults:
    """``results`` after the checks of slots with residuals or several disjuncts
    (``Engine._emit``): residuals on the pair's rows, and one report per query and
    pair (its lowest slot, as the engine's slot order reports it)."""
    plan = tables.plan
    pair, entry, slots = results.entries()
    at = np.flatnonzero(tables.special[slots])
    if not len(at):
        return results
    words = results.words.copy()
    seen: set[tuple[str, int]] = set()
    for k in at.tolist():  # (pair by pair, slots ascending)
        p, q = int(pair[k]), int(slots[k])
        j, r = int(results.rows[p]), int(results.partners[p])
        slot = plan.slots[q]
        holds = True
        if slot.residuals:
            members: list[Any] = [None] * len(plan.streams)
            members[tables.streams[int(rows.side[j])]] = _stored_row(rows, prepared, j)
            members[tables.streams[int(rows.side[r])]] = _stored_row(rows, prepared, r)
            holds = all(test(members) for test in slot.residuals)
        if holds and slot.multi_disjunct:
            holds = (slot.query.name, p) not in seen
            seen.add((slot.query.name, p))
        if not holds:
            words[entry[k]] &= ~np.uint64(1 << (q & 63))
    keep = words != 0
    counts = np.array([keep[a:b].sum() for a, b in zip(results.starts[:-1], results.starts[1:], strict=True)], np.int64)
    alive = counts > 0
    return PairResults(
        results.rows[alive],
        results.partners[alive],
        np.concatenate([[0], np.cumsum(counts[alive])]).astype(np.int64),
        results.word_index[keep],
        words[keep],
        results.fallback_pairs,
    )


def result_ids(
    tables: PairTables,
    results: PairResults,
    prepared: tuple[PreparedBatch, PreparedBatch],
    rows_side: np.ndarray,
    rows_row: np.ndarray,
) -> list[tuple[str, int, int]]:
    """Each result as (query, id of the first stream's tuple, id of the second's)."""
    plan = tables.plan
    out = []
    a, b, slots = results.triples()
    for j, r, q in zip(a.tolist(), b.tolist(), slots.tolist(), strict=True):
        ids = [0, 0]
        for x in (j, r):
            k = int(rows_side[x])
            ids[k] = int(prepared[k].ids[rows_row[x]])
        out.append((plan.query_names(q), ids[0], ids[1]))
    return out


def to_blocks(
    tables: PairTables,
    results: PairResults,
    prepared: tuple[PreparedBatch, PreparedBatch],
    side: np.ndarray,
    row: np.ndarray,
) -> list[ResultBlock]:
    """The results as the engine's :class:`~mqo.results.ResultBlock` objects (a slot
    mask and stored tuples per pair, arrival positions as their numbers): what today's
    result writers take, so their cost is that of handing the blocks over."""
    stored: dict[int, StoredTuple] = {}
    needed = np.unique(np.concatenate([results.rows, results.partners]))
    for k in (0, 1):  # each row's stored tuple, made once, its row made a column at a time
        mine = needed[side[needed] == k]
        made = prepared[k].rows(row[mine])
        stream = tables.streams[k]
        stored.update((j, StoredTuple(stream, j, values)) for j, values in zip(mine.tolist(), made, strict=True))
    n = len(tables.plan.streams)
    blocks = []
    raw = results.words.astype("<u8")
    starts = results.starts.tolist()
    index = results.word_index.tolist()
    for p, (j, r) in enumerate(zip(results.rows.tolist(), results.partners.tolist(), strict=True)):
        mask = 0
        for e in range(starts[p], starts[p + 1]):
            mask |= int(raw[e]) << (64 * index[e])
        members: list[StoredTuple | None] = [None] * n
        later, earlier = stored[j], stored[r]
        members[later.stream] = later
        members[earlier.stream] = earlier
        blocks.append(ResultBlock(mask, members, max(later.row[0], earlier.row[0])))
    return blocks
