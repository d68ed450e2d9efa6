"""The attribute phase of many tuples at once, before any of them is matched.

A tuple's attribute predicates depend on nothing but the tuple, so for a batch of one
stream they are decided for all rows together: every single-column numeric list's
satisfied range per row in one kernel call (:func:`attribute_ranges`, one binary search
per list and row; a pushed tuple is a batch of one), the other lists one by one, then
every row's candidate slots and flags by one :meth:`indexes.kill_bitsets.KillBitsets.select`
call (the :func:`indexes.kernels.prune_select` kernel). From its candidates
each row is classified:

* **single**: it satisfies single-stream queries that need nothing more, reported
  straight from the candidate bits;
* **engine**: it is a candidate of a multi-stream query (or of a query with residuals
  or OR), so it goes through the join engine, starting after the attribute phase;
* **store**: it must be kept in the window for later tuples (with ``store='all'``
  every tuple is; with ``store='candidates'`` only those a multi-stream query can
  still use);
* **dead**: none of these; it costs nothing more.

Rows are processed afterwards in arrival order (see ``Matcher.push_batch`` and the
CLI's merged runs), which keeps results exactly those of pushing one by one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from indexes.covering import kernel_form, own_cuts, search_comparisons
from indexes.exact import EXACT_INTEGERS
from indexes.kill_bitsets import bitset_of, bitset_to_int, set_bits, words_for
from mqo.batch_input import EXACT, NUMERIC
from mqo.plan import CompiledPlan
from mqo.row_layout import RowLayout, row_layout
from predicates import ColumnType, StreamSchema

SINGLE = 1
ENGINE = 2
STORE = 4


@dataclass
class PreparedBatch:
    """One stream's rows with their attribute phase done. ``cand`` holds the candidate
    slots (after the attribute predicates) of the flagged rows only; ``kept[i]`` is row
    i's index in it (-1 for rows without flags)."""

    stream: int
    schema: StreamSchema
    ts: np.ndarray
    ids: np.ndarray
    columns: dict[str, Any]
    cand: np.ndarray  # [flagged rows, words]
    kept: np.ndarray  # row -> index into cand, or -1
    single_mask: np.ndarray  # plain single-stream slots of this stream
    engine_mask: np.ndarray  # slots the engine decides
    flags: np.ndarray  # SINGLE | ENGINE | STORE per row
    # the same rows in the stream's further roles (self-joins), matched after these
    roles: list[PreparedBatch] = field(default_factory=list)
    pushed: tuple[Any, ...] | None = None  # a pushed tuple's row, already built: its one row
    # engine slots a row decides alone (single-stream queries of several disjuncts: mqo.alone)
    disjunct_mask: np.ndarray = field(default_factory=lambda: np.zeros(1, np.uint64))
    _disjunct_bits: int | None = field(default=None, repr=False)
    _engine_bits: int | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.ts)

    def visit_flags(self) -> np.ndarray:
        """Per row, the flags of its role 1 or'ed with its further roles' flags: nonzero
        when some role of the row has work."""
        flags = self.flags
        for role in self.roles:
            flags = flags | role.flags
        return flags

    def row(self, i: int) -> tuple[Any, ...]:
        """The stored row ``(ts, id, *values)`` of row i (integers as ints, NaN as NULL)."""
        if self.pushed is not None:
            return self.pushed
        values: list[Any] = [float(self.ts[i]), int(self.ids[i])]
        exact = self.columns.get(EXACT, {})
        for col in self.schema.columns:
            if col.name in exact:
                values.append(exact[col.name].value(i))
                continue
            column = self.columns.get(col.name)
            v = None if column is None else column[i]
            values.append(_stored_value(v, col.ctype in (ColumnType.INTEGER, ColumnType.BYTE)))
        return tuple(values)

    def rows(self, indexes: np.ndarray) -> list[tuple[Any, ...]]:
        """The stored rows of ``indexes``, as :meth:`row` makes them, made a column at a time."""
        if self.pushed is not None:
            return [self.pushed] * len(indexes)
        columns: list[list[Any]] = [self.ts[indexes].tolist(), self.ids[indexes].tolist()]
        exact = self.columns.get(EXACT, {})
        at = indexes.tolist()
        for col in self.schema.columns:
            if col.name in exact:
                columns.append([exact[col.name].value(i) for i in at])
                continue
            column = self.columns.get(col.name)
            if column is None:
                columns.append([None] * len(indexes))
                continue
            whole = col.ctype in (ColumnType.INTEGER, ColumnType.BYTE)
            if isinstance(column, np.ndarray) and column.dtype == np.float64:
                columns.append(_stored_floats(column[indexes], whole))
            elif isinstance(column, list) and col.ctype in (ColumnType.STRING, ColumnType.BOOLEAN):
                columns.append([column[i] for i in at])  # (str or bool, or None, already: batch_input._typed)
            else:
                columns.append([_stored_value(column[i], whole) for i in at])
        return list(zip(*columns, strict=True))

    def candidates(self, rows: np.ndarray) -> np.ndarray:
        """Candidate rows (``[len(rows), words]``) of ``rows``: none for a row the kernels
        left no candidate (kept -1; under an order whose first phase is not the attribute
        one such a row is still flagged ENGINE, and ``cand[-1]`` would be another row's)."""
        kept = self.kept[rows]
        if not len(self.cand):
            return np.zeros((len(kept), self.cand.shape[1]), np.uint64)
        out = self.cand[kept]
        out[kept < 0] = 0
        return out

    @property
    def disjunct_bits(self) -> int:
        """:attr:`disjunct_mask` as an int (made once)."""
        bits = self._disjunct_bits
        if bits is None:
            bits = self._disjunct_bits = bitset_to_int(self.disjunct_mask)
        return bits

    @property
    def engine_bits(self) -> int:
        """The slots a visit of a row may hand the engine, as an int (made once): the
        engine's less those decided alone."""
        bits = self._engine_bits
        if bits is None:
            bits = self._engine_bits = bitset_to_int(self.engine_mask & ~self.disjunct_mask)
        return bits

    def engine_cand(self, i: int) -> int:
        """Row i's candidate slots the engine decides (0 for a row the kernels left none)."""
        k = self.kept[i]
        return 0 if k < 0 else bitset_to_int(self.cand[k] & self.engine_mask)

    def engine_cands(self, rows: np.ndarray) -> list[int]:
        """:meth:`engine_cand` of each of ``rows``, masked a batch at a time."""
        return [bitset_to_int(words) for words in self.candidates(rows) & self.engine_mask]


def rows_in_order(prepared: list[PreparedBatch], which: np.ndarray, row_indexes: np.ndarray) -> list[tuple[Any, ...]]:
    """The stored rows of row ``row_indexes[j]`` of ``prepared[which[j]]`` for each j, in
    that order (each batch's made a column at a time, :meth:`PreparedBatch.rows`)."""
    return _in_order(prepared, which, row_indexes, PreparedBatch.rows)


def engine_cands_in_order(prepared: list[PreparedBatch], which: np.ndarray, row_indexes: np.ndarray) -> list[int]:
    """:meth:`PreparedBatch.engine_cands` of row ``row_indexes[j]`` of ``prepared[which[j]]``
    for each j, in that order."""
    return _in_order(prepared, which, row_indexes, PreparedBatch.engine_cands)


def _in_order(
    prepared: list[PreparedBatch],
    which: np.ndarray,
    row_indexes: np.ndarray,
    made: Callable[[PreparedBatch, np.ndarray], list[Any]],
) -> list[Any]:
    """What ``made`` gives for row ``row_indexes[j]`` of ``prepared[which[j]]`` for each j,
    in that order (made a batch at a time)."""
    if len(prepared) == 1:
        return made(prepared[0], row_indexes)
    out: list[Any] = [None] * len(which)
    for k, prep in enumerate(prepared):
        mine = np.flatnonzero(which == k)
        for at, item in zip(mine.tolist(), made(prep, row_indexes[mine]), strict=True):
            out[at] = item
    return out


def _stored_floats(picked: np.ndarray, whole: bool) -> list[Any]:
    """:func:`_stored_value` of each of ``picked``, a column's doubles: a column of whole
    numbers within int64 (the most of an INTEGER column) converted at once."""
    if whole:
        # (finite first: floor and the bound compare NaN and inf as they must not be taken)
        within = len(picked) and np.isfinite(picked).all() and (np.abs(picked) < 2.0**63).all()
        if within and (np.floor(picked) == picked).all():
            return picked.astype(np.int64).tolist()
        return [None if v != v else int(v) if v.is_integer() else v for v in picked.tolist()]
    if np.isnan(picked).any():
        return [None if v != v else v for v in picked.tolist()]
    return picked.tolist()


def _stored_value(v: Any, whole: bool) -> Any:
    """A batch's value as a stored row holds it: NaN as NULL, a whole number of an
    INTEGER or BYTE column as an int, other numbers as floats."""
    if isinstance(v, float | np.floating):
        if v != v:
            return None
        return int(v) if whole and float(v).is_integer() else float(v)
    return v


def prepare_batch(
    plan: CompiledPlan,
    stream: int,
    ts: np.ndarray,
    ids: np.ndarray,
    columns: dict[str, Any],
    store_all: bool,
    pushed: tuple[Any, ...] | None = None,
    attributes_first: bool = True,
) -> PreparedBatch:
    """The attribute phase of a batch of declared stream ``stream``, in each role the
    plan's queries read it in (:attr:`PreparedBatch.roles`). ``pushed``: the batch is
    one pushed tuple, whose stored row this is. Unless ``attributes_first`` (a static
    order whose first phase is a join or window phase), every row goes to the engine,
    which forms its pairs before applying the attribute decisions made here."""
    parts = [_prepare_one(plan, stream, ts, ids, columns, store_all)]
    if stream < plan.n_real:
        parts += [_prepare_one(plan, r, ts, ids, columns, store_all) for r in plan.live_roles[stream]]
    for part in parts:
        part.pushed = pushed
        if not attributes_first and part.engine_mask.any():
            part.flags |= ENGINE
    prepared = parts[0]
    prepared.roles = parts[1:]
    return prepared


def check_prepared(plan: CompiledPlan, prepared: PreparedBatch, attributes_first: bool = True) -> None:
    """``check=True``: every row's flags and candidates, as the kernels decided them,
    are those the attribute lists give when decided one row at a time (as
    :func:`prepare_batch` was told: ``attributes_first``)."""
    for part in (prepared, *prepared.roles):
        s = part.stream
        masks = [bitset_to_int(m) for m in plan.per_stream(s, stream_masks)[0]]
        for i in range(len(part)):
            row = part.row(i)
            killed = 0
            for lst in plan.attr_lists[s]:
                killed |= lst.kill.killed(*lst.evaluate_row(row))
            want = plan.stream_slots[s] & ~killed
            code = sum(bit for bit, mask in zip((SINGLE, ENGINE, STORE), masks, strict=True) if want & mask)
            if not attributes_first and masks[1]:
                code |= ENGINE  # every row to the engine, which applies the attributes later
            assert part.flags[i] & (SINGLE | ENGINE) == code & (SINGLE | ENGINE), f"row {i}: kernel flags differ"
            assert part.flags[i] & STORE >= code & STORE, f"row {i}: a tuple a join needs would not be stored"
            if part.kept[i] >= 0:
                got = bitset_to_int(part.cand[part.kept[i]])
                assert got == want, f"row {i}: kernel candidates {got:#x}, per row {want:#x}"
        for kernel_part in plan.per_stream(s, _kernel_parts):  # the kernel reads each list's own cuts
            for k, l in enumerate(kernel_part.chosen.tolist()):
                at, end = int(kernel_part.starts[k]), int(kernel_part.ends[k])
                lt, le = plan.attr_lists[s][l].covering.cuts()
                assert (kernel_part.lt[at:end] == lt).all() and (kernel_part.le[at:end] == le).all(), f"list {l}: cuts"


def _prepare_one(
    plan: CompiledPlan,
    stream: int,
    ts: np.ndarray,
    ids: np.ndarray,
    columns: dict[str, Any],
    store_all: bool,
) -> PreparedBatch:
    schema = plan.streams[stream]
    masks, single_mask, engine_mask, matched = plan.per_stream(stream, stream_masks)
    if not matched:
        # no match query reads the stream (an aggregate-only stream): no kernel work,
        # and no row is wanted, so a replay visits only the late ones
        n = len(ts)
        flags = np.full(n, STORE if store_all else 0, np.int8)
        cand = np.zeros((0, words_for(plan.n_slots)), np.uint64)
        kept = np.full(n, -1, np.int64)
        prepared = PreparedBatch(stream, schema, ts, ids, columns, cand, kept, single_mask, engine_mask, flags)
        prepared.disjunct_mask = np.zeros_like(single_mask)
        return prepared
    lo, hi = attribute_ranges(plan, stream, ts, ids, columns)
    # the kernel's code bits are the masks' order: SINGLE, ENGINE, STORE
    flags, cand, kept = plan.kill_bitsets(stream).select(lo, hi, masks, STORE if store_all else 0)
    prepared = PreparedBatch(stream, schema, ts, ids, columns, cand, kept, single_mask, engine_mask, flags)
    prepared.disjunct_mask = plan.per_stream(stream, disjunct_mask)
    return prepared


def attribute_work(plan: CompiledPlan, stream: int) -> tuple[int, int]:
    """What deciding one row's attribute lists costs, counted as the per-tuple engine
    counts it (:class:`mqo.stats.Counters`): a binary search per list, and two bitset
    operations. The kernels decide every list of the stream."""
    lists = plan.attr_lists[stream]
    first, comparisons = 0, 0
    if plan.base_plan is not None:  # the base's lists as counted for the base, then the added ones
        first = len(plan.base_plan.attr_lists[stream])
        comparisons = plan.base_plan.per_stream(stream, attribute_work)[0]
    return comparisons + sum(search_comparisons(lst.n) for lst in lists[first:]), 2 * len(lists)


def stream_masks(plan: CompiledPlan, stream: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """A stream's slots as bitsets: [single-stream plain ones, those the engine
    decides, multi-stream ones], the first two again on their own; and whether any
    match query reads the stream. The same for every batch of a plan."""
    words = words_for(plan.n_slots)
    if plan.base_plan is not None:  # kept in place by the changes since the base
        masks = plan.base_plan._delta_part.stream_masks(stream, words)
        return masks, masks[0], masks[1], bool(masks[0].any() or masks[1].any())
    of_stream = (plan.slot_stream_mask >> stream) & 1 == 1
    single = of_stream & (plan.slot_stream_mask == (1 << stream)) & ~plan.slot_special
    single_mask = bitset_of(np.flatnonzero(single), words)
    engine_mask = bitset_of(np.flatnonzero(of_stream & ~single), words)
    multi_mask = bitset_of(np.flatnonzero(of_stream & (plan.slot_stream_mask != (1 << stream))), words)
    masks = np.stack([single_mask, engine_mask, multi_mask])
    return masks, masks[0], masks[1], bool(single_mask.any() or engine_mask.any())


def disjunct_mask(plan: CompiledPlan, stream: int) -> np.ndarray:
    """The slots (a bitset) of ``stream``'s single-stream queries with several
    disjuncts and no residual in any: the engine slots a row decides alone
    (:mod:`mqo.alone`)."""
    masks = plan.per_stream(stream, stream_masks)[0]
    words = masks[1] & ~masks[2]  # the engine's single-stream slots: residuals or disjuncts
    if not words.any():
        return words
    slots = set_bits(words[None, :], words)[1]
    residual = np.fromiter((q in plan.slot_residuals for q in slots.tolist()), bool, len(slots))
    records = plan.slot_record[slots]
    # a query with a residual in one disjunct goes to the engine with all its disjuncts
    # (each query's results once: the engine's check of which it already reported)
    keep = ~np.isin(records, records[residual])
    return bitset_of(slots[keep], len(words))


@dataclass(frozen=True)
class _KernelLists:
    """Some of a stream's lists: the single-column numeric ones as
    :func:`indexes.attribute_kernels.list_ranges` takes them; the others (strings,
    booleans, two columns, ts and id) go one by one."""

    chosen: np.ndarray  # list numbers in the stream's order
    columns: np.ndarray  # per chosen list, its column's row in ``columns[NUMERIC]``
    ops: np.ndarray
    lt: np.ndarray
    le: np.ndarray
    starts: np.ndarray  # per chosen list, where its cuts are in ``lt`` and ``le``
    ends: np.ndarray
    integers: list[int]  # indexes into ``chosen`` of lists over integer columns
    others: list[int]  # list numbers (among all the stream's) decided one by one
    integer_rows: np.ndarray  # the rows of ``columns[NUMERIC]`` those lists read, once each


def _kernel_parts(plan: CompiledPlan, stream: int) -> list[_KernelLists]:
    """A stream's kernel lists in parts, one :func:`~indexes.attribute_kernels.list_ranges`
    call each: an updated plan (:mod:`mqo.plan_update`) shares its base plan's part
    and adds one of the lists of the queries registered since, so a registration
    costs what it adds, not a copy of every list's cuts."""
    base = plan.base_plan
    if base is None:
        return [_kernel_lists(plan, stream, 0)]
    return [*base.per_stream(stream, _kernel_parts), _kernel_lists(plan, stream, len(base.attr_lists[stream]))]


def _kernel_lists(plan: CompiledPlan, stream: int, first: int) -> _KernelLists:
    """The part of the stream's lists from number ``first`` on."""
    from indexes.attribute_kernels import OP_CODES

    row_of = plan.per_stream(stream, row_layout).numeric_row
    chosen, others, columns, ops, lts, les, bases = [], [], [], [], [], [], []
    integers = []
    shared: np.ndarray | None = None  # the plan's array of doubles, while every list's cuts are in it
    in_place = True
    for l, lst in enumerate(plan.attr_lists[stream][first:], first):
        if not lst.numeric or lst.right_pos is not None or lst.left_pos not in row_of:
            others.append(l)  # ts and id too: they are not columns of the batch
            continue
        if lst.integer:
            integers.append(len(chosen))
        chosen.append(l)
        columns.append(row_of[lst.left_pos])
        ops.append(OP_CODES[lst.key.op])
        if lst.doubles and (not lst.integer or own_cuts(lst.constants)):  # type: ignore[arg-type]
            # doubles are their own cuts: the list's constants, a view of the plan's array
            # at its first position (CompiledList), read there (check_prepared checks it)
            lt = le = lst.constants
            shared = lt.base if shared is None else shared  # type: ignore[union-attr]
            in_place = in_place and lt.base is shared  # type: ignore[union-attr]
        else:
            lt, le = lst.covering.cuts()
            in_place = False
        lts.append(lt)
        les.append(le)
        bases.append(lst.csr_base)
    sizes = np.fromiter(map(len, lts), np.int64, len(lts))
    if in_place and isinstance(shared, np.ndarray):
        lt = le = shared
        starts = np.array(bases, np.int64)
    else:
        starts = np.zeros(len(lts), np.int64)
        np.cumsum(sizes[:-1], out=starts[1:])
        lt = np.concatenate(lts) if lts else np.zeros(0)
        # doubles are their own cuts (lt is le): one array, not two copies of every constant
        le = lt if all(a is b for a, b in zip(lts, les, strict=True)) else np.concatenate(les)
    return _KernelLists(
        np.array(chosen, np.int64),
        np.array(columns, np.int64),
        np.array(ops, np.int64),
        lt,
        le,
        starts,
        starts + sizes,
        integers,
        others,
        np.unique(np.array(columns, np.int64)[integers]) if integers else np.zeros(0, np.int64),
    )


def attribute_ranges(
    plan: CompiledPlan, stream: int, ts: np.ndarray, ids: np.ndarray, columns: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """Every row's satisfied range in each of the stream's attribute lists, ``(lo, hi)``
    of shape [lists, rows] in the kernels' form: the single-column numeric lists in one
    kernel call, rows of integers past 2**53 then exactly, the other lists one by one."""
    from indexes.attribute_kernels import list_ranges

    lists = plan.attr_lists[stream]
    schema = plan.streams[stream]
    n = len(ts)
    lo = np.empty((len(lists), n), np.int64)
    hi = np.empty((len(lists), n), np.int64)
    for part in plan.per_stream(stream, _kernel_parts):
        if len(part.chosen):
            values = columns[NUMERIC]
            list_ranges(values, part.columns, part.ops, part.lt, part.le, part.starts, part.ends, part.chosen, lo, hi)
            # integers past 2**53 are not all doubles: their rows are decided exactly
            # (one test over every integer column first: such values are rare)
            if len(part.integer_rows) and (np.abs(values[part.integer_rows]) >= EXACT_INTEGERS).any():
                for k in part.integers:
                    column = values[part.columns[k]]
                    unsure = np.flatnonzero(np.abs(column) >= EXACT_INTEGERS)
                    if len(unsure):
                        l = int(part.chosen[k])
                        exact = _exact_values(lists[l].left_pos, schema, columns)
                        lists[l].covering.settle(unsure, lo[l], hi[l], column, None, exact)
        for l in part.others:
            lo[l], hi[l] = _ranges(lists[l], plan.per_stream(stream, row_layout), ts, ids, columns)
    return lo, hi


def _exact_values(position: int, schema: StreamSchema, columns: dict[str, Any]) -> np.ndarray | None:
    exact = columns.get(EXACT, {})
    if position < 2 or not exact:
        return None
    found = exact.get(schema.columns[position - 2].name)
    return None if found is None else found.values


def _column(position: int, layout: RowLayout, ts: np.ndarray, ids: np.ndarray, columns: dict[str, Any]) -> Any:
    if position == 0:
        return ts
    if position == 1:
        return ids.astype(np.float64)
    row = layout.numeric_row.get(position)
    if row is not None:
        return columns[NUMERIC][row]  # all NaN where the batch lacks the column
    column = columns.get(layout.schema.columns[position - 2].name)
    return [None] * len(ts) if column is None else column


def _ranges(lst: Any, layout: RowLayout, ts: np.ndarray, ids: np.ndarray, columns: dict[str, Any]) -> tuple:
    """Each row's satisfied range in one list, as the kernels take it."""
    schema = layout.schema
    left = _column(lst.left_pos, layout, ts, ids, columns)
    right = None if lst.right_pos is None else _column(lst.right_pos, layout, ts, ids, columns)
    if lst.numeric:
        exact_right = None if lst.right_pos is None else _exact_values(lst.right_pos, schema, columns)
        return lst.covering.satisfied_many(left, right, _exact_values(lst.left_pos, schema, columns), exact_right)
    # strings and booleans: each distinct value (or pair of values) decided once, as a
    # batch holds few of them (a channel, a state), and its rows take its answer
    keys = left if right is None else list(zip(left, right, strict=True))
    codes: dict[Any, int] = {}
    at = np.fromiter((codes.setdefault(key, len(codes)) for key in keys), np.int64, len(keys))
    op = lst.key.op
    answers = np.empty((len(codes), 2), np.int64)
    for key, code in codes.items():
        sat = lst.covering.satisfied(key) if right is None else lst._pair(*key)
        answers[code] = kernel_form(sat, op, lst.n)
    return answers[at, 0], answers[at, 1]
