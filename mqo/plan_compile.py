"""Compiling the registry into a :class:`~mqo.plan.CompiledPlan`.

The registry keeps every predicate as a row (query, disjunct, list, constant); one
sort of all rows by (list, constant) gives every list's distinct constants and the
slots using each. Compiling is O(P log P) for P predicate occurrences.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from indexes.covering_sort import Scratch, sort_into
from indexes.kill_bitsets import positions_type
from mqo.expressions import TestFn, column_position, compile_test, compile_value
from mqo.plan import TYPES, CompiledList, CompiledPlan, ContextCode, Levels, Repeated
from mqo.prepare import stream_masks
from mqo.registered import BlockRun, RecordList, RegisteredRow
from mqo.registry import QueryRegistry
from predicates import ColumnType, Kind, Residual, StreamSchema
from predicates.catalog import role_schema, split_role
from predicates.normalize import to_float
from predicates.numbers import exact
from predicates.records import Context, RowBlock, RowQuery


def compile_plan(registry: QueryRegistry, version: int) -> CompiledPlan:
    """The plan of every query in ``registry``."""
    catalog = registry.catalog
    real = tuple(catalog)
    # the engine's streams: the declared ones, then the roles of self-joins (B#2, ...)
    roles = []
    for role in registry.roles:
        base, k = split_role(role)
        roles.append(role_schema(catalog.require(base), k))
    streams = real + tuple(roles)
    number = {s.name.lower(): i for i, s in enumerate(streams)}
    n_streams = len(streams)
    base_of = list(range(len(real))) + [number[split_role(r.name)[0].lower()] for r in roles]
    roles_of = [tuple(r for r in range(len(real), n_streams) if base_of[r] == s) for s in range(len(real))]

    def stream_number(name: str) -> int:
        return number[name.lower()]

    def schema_of(name: str) -> StreamSchema:
        return streams[number[name.lower()]]

    records = registry.records()
    n_records = len(records)
    facts = _RecordFacts(records)
    # each record's first slot, made only when some record has several (else slot =
    # record): a record-sized int64 array less beside the lists' sorts
    slot_base: np.ndarray | None = None
    if facts.one_each:  # one disjunct per record (the usual case): slot = record
        n_slots = n_records
        slot_record = np.arange(n_records, dtype=np.int32)
        slot_disjunct = np.zeros(n_slots, np.int16)
    else:
        slot_base = np.zeros(n_records + 1, np.int64)
        np.cumsum(facts.n_disjuncts, out=slot_base[1:])
        n_slots = int(slot_base[-1])
        slot_record = np.repeat(np.arange(n_records, dtype=np.int32), facts.n_disjuncts)
        slot_disjunct = (np.arange(n_slots, dtype=np.int64) - slot_base[slot_record]).astype(np.int16)

    distinct = facts.contexts
    record_context = facts.context_numbers
    context_code = {id(ctx): context_code_of(ctx, stream_number, schema_of) for ctx in distinct}
    context_mask = np.array([code.stream_mask for code in context_code.values()], np.int64)
    windows = Levels.of_runs(facts.windows)

    # queries with residuals or several disjuncts are the special ones
    residual_code: dict[int, TestFn] = {}
    record_special = np.zeros(n_records, bool)
    slot_residuals: dict[int, tuple[Residual, ...]] = {}
    for i in facts.special:
        disjuncts = records.disjuncts_of(i)
        record_special[i] = len(disjuncts) > 1
        for d, (_, residuals) in enumerate(disjuncts):
            if residuals:
                record_special[i] = True
                slot_residuals[(i if slot_base is None else int(slot_base[i])) + d] = residuals
                for r in residuals:
                    if id(r) not in residual_code:
                        residual_code[id(r)] = compile_test(r.comparison, stream_number, schema_of)
    slot_window = _per_slot(np.array(windows.floats, np.float64), windows.level_of, slot_record)
    slot_window_level = _per_slot(np.arange(len(windows), dtype=np.int32), windows.level_of, slot_record)
    sinces = Levels.of_runs(facts.sinces)
    slot_since_level = _per_slot(np.arange(len(sinces), dtype=np.int32), sinces.level_of, slot_record)
    slot_stream_mask = _per_slot(context_mask, record_context, slot_record)
    slot_context = _per_slot(np.arange(len(distinct), dtype=np.int32), record_context, slot_record)
    slot_special = record_special[slot_record] if record_special.any() else np.zeros(n_slots, bool)
    # the per-record arrays are done with: not held while the lists are sorted (the
    # compile's peak, at a million records)
    del record_context, record_special
    facts.release()

    orders = facts.orders
    by_list = _ListRows(registry, orders, slot_base)
    csr = SharedCsr(by_list.size)
    lists: dict[Kind, list[CompiledList]] = {k: [] for k in TYPES}
    bits = {k: 0 for k in TYPES}
    for key in registry.lists():
        constants, offsets, users, doubles, csr_base = by_list.of(registry.key_id(key), number_list(key), csr)
        lst = CompiledList(
            kind=key.kind,
            index=len(lists[key.kind]),
            key=key,
            base=bits[key.kind],
            constants=constants,
            offsets=offsets,
            users=users,
            slot_bits=n_slots,
            doubles=doubles,
            csr_base=csr_base,
            **list_shape(key, stream_number, schema_of),
        )
        lists[key.kind].append(lst)
        bits[key.kind] += lst.n

    attr_lists, pair_lists, indexed, attr_list_mask = arrange_lists(lists, n_streams)

    return CompiledPlan(
        version=version,
        catalog=catalog,
        streams=streams,
        records=records,
        record_names=records.names if records.names is not None else list(registry.queries),  # (in record order)
        context_code=context_code,
        residual_code=residual_code,
        slot_residuals=slot_residuals,
        slot_record=slot_record,
        slot_disjunct=slot_disjunct,
        slot_context=slot_context,
        slot_window=slot_window,
        slot_window_level=slot_window_level,
        windows=windows,
        slot_since_level=slot_since_level,
        sinces=sinces,
        slot_stream_mask=slot_stream_mask,
        slot_special=slot_special,
        lists=lists,
        bits=bits,
        attr_lists=attr_lists,
        pair_lists=pair_lists,
        indexed_positions=indexed,
        attr_list_mask=attr_list_mask,
        retention_window=windows.floats[-1] if n_records else 0.0,
        retention_window_exact=windows.exact(len(windows) - 1) if n_records else Fraction(0),
        _stream_number={name: i for name, i in number.items() if i < len(real)},
        record_orders=orders,
        base_of=base_of,
        roles_of=roles_of,
        removal_mark=registry.removal_mark,
        stream_makers=(stream_masks,),
    )


def _per_slot(values: np.ndarray, number_of: np.ndarray, slot_record: np.ndarray) -> np.ndarray:
    """Each slot's value of a per-record fact, ``values[number_of[record]]``. With one
    value for every slot (the usual case: one context, one MAXWINDOW, one horizon) it
    is filled, not gathered, and a zero fill is ``np.zeros``, whose pages stay
    unwritten, so not resident (at a million slots, 20 MB fewer per plan)."""
    n = len(slot_record)
    if len(values) == 1:
        value = values[0]
        zero = value == 0 and not np.signbit(value)  # (-0.0 is kept as it is)
        return np.zeros(n, values.dtype) if zero else np.full(n, value, values.dtype)
    return values[number_of[slot_record]] if n else np.zeros(0, values.dtype)


def arrange_lists(
    lists: dict[Kind, list[CompiledList]], n_streams: int, base: CompiledPlan | None = None
) -> tuple[Any, Any, Any, Any]:
    """Attribute lists per stream, join and window lists per pair of streams, the
    indexed columns per stream and each stream's attribute lists as a mask. With
    ``base`` (a plan whose lists are the first of ``lists`` of each type), its
    arrangement copied and only the lists after its own arranged."""
    attr_lists: list[list[CompiledList]] = [[] for _ in range(n_streams)]
    attr_list_mask = [0] * n_streams
    pair_lists: dict[Kind, list[list[list[CompiledList]]]] = {
        k: [[[] for _ in range(n_streams)] for _ in range(n_streams)] for k in (Kind.JOIN, Kind.WINDOW)
    }
    indexed: list[set[int]] = [set() for _ in range(n_streams)]
    if base is not None:
        attr_lists = [list(of_stream) for of_stream in base.attr_lists]
        attr_list_mask = list(base.attr_list_mask)
        pair_lists = {k: [[list(p) for p in row] for row in rows] for k, rows in base.pair_lists.items()}
        indexed = [set(positions) for positions in base.indexed_positions]
        lists = {kind: of_kind[len(base.lists[kind]) :] for kind, of_kind in lists.items()}
    for lst in lists[Kind.ATTRIBUTE]:
        attr_lists[lst.left_stream].append(lst)
        attr_list_mask[lst.left_stream] |= 1 << lst.index
    for kind in (Kind.JOIN, Kind.WINDOW):
        for lst in lists[kind]:
            a, b = lst.left_stream, lst.right_stream
            assert b is not None and lst.right_pos is not None
            pair_lists[kind][a][b].append(lst)
            pair_lists[kind][b][a].append(lst)
            if lst.left_pos != 0:
                indexed[a].add(lst.left_pos)
            if lst.right_pos != 0:
                indexed[b].add(lst.right_pos)
    return attr_lists, pair_lists, indexed, attr_list_mask


def number_list(key: Any) -> bool:
    """A list whose constants are numbers compared by value (ordered exactly): not a
    list of strings or booleans, nor a two-column list without a factor."""
    return bool(key.family == "number" and not (key.right is not None and key.factor is None))


def list_shape(key: Any, stream_number: Callable[[str], int], schema_of: Callable[[str], StreamSchema]) -> dict:
    """What a list's :class:`~mqo.plan.CompiledList` reads of its key: its streams,
    column positions, factor and the kinds of its values."""
    right_stream = right_pos = None
    if key.right is not None:
        right_stream = stream_number(key.right.stream)
        right_pos = column_position(schema_of(key.right.stream), key.right.column)
    return {
        "left_stream": stream_number(key.left.stream),
        "left_pos": column_position(schema_of(key.left.stream), key.left.column),
        "right_stream": right_stream,
        "right_pos": right_pos,
        "factor": to_float(key.factor) if key.factor is not None else None,
        "numeric": key.family == "number",
        "integer": holds_integers(schema_of(key.left.stream), key.left.column),
    }


def context_code_of(context: Context, stream_number: Any, schema_of: Any) -> ContextCode:
    bound = context.bound
    aliases = {stream_number(role): alias for alias, role in bound.role_aliases}
    ids = tuple(sorted(aliases))
    mask = 0
    for s in ids:
        mask |= 1 << s
    outputs = tuple((out.name, compile_value(out.expr, stream_number, schema_of)) for out in bound.outputs)
    return ContextCode(aliases, ids, mask, outputs)


class SharedCsr:
    """Every list's users in one array, its positions' offsets (into it) in another,
    and the constants of lists of doubles in a third, position for position, written
    as the lists are made: a list's ``offsets`` (and such ``constants``) are views, so
    the kernel tables and the attribute kernel read the plan's arrays in place
    (:mod:`indexes.kill_bitsets`, :func:`mqo.prepare.attribute_ranges`), and no list
    keeps arrays of its own. ``rows``: the users of all lists; the other arrays are
    made that long too (a position has at least one user), and their unused ends are
    never written, so never resident."""

    def __init__(self, rows: int) -> None:
        self.users = np.empty(rows, np.int32)
        self.offsets = np.empty(rows + 1, positions_type(rows))
        self.offsets[0] = 0
        self.constants = np.empty(rows, np.float64)
        self.positions = 0
        self.used = 0
        self.scratch = Scratch()  # (add_sorted's work arrays, reused list after list)

    def add(self, constants: Any, offsets: np.ndarray, users: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, int]:
        """A list's constants (a float64 array when doubles) and CSR arrays (offsets
        from 0) written in: its constants, offsets view, the shared users and its first
        position."""
        n, m = len(offsets) - 1, len(users)
        p, u = self.positions, self.used
        self.users[u : u + m] = users
        np.add(offsets, u, out=self.offsets[p : p + n + 1])  # its end is the next list's start
        if isinstance(constants, np.ndarray):
            self.constants[p : p + n] = constants
            constants = self.constants[p : p + n]
        self.positions, self.used = p + n, u + m
        return constants, self.offsets[p : p + n + 1], self.users, p

    def add_sorted(self, values: np.ndarray, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """A list of doubles from its rows (constant, int32 slot; in any order, the
        constants possibly a strided column) sorted by constant straight into the shared
        arrays (:func:`indexes.covering_sort.sort_into`): as :meth:`add` returns it, with
        no list-sized array kept but the shared ones."""
        m, p, u = len(values), self.positions, self.used
        n = sort_into(values, slots, self.users[u : u + m], self.offsets[p:], self.constants[p:], u, self.scratch)
        self.positions, self.used = p + n, u + m
        return self.constants[p : p + n], self.offsets[p : p + n + 1], self.users, p


class _RecordFacts:
    """What the compiler reads of each record: its disjuncts' count, its context's
    number (``contexts``: the distinct ones, by first use), its MAXWINDOW as written
    (0 for a single-stream query), its horizon and order, and the special ones (more
    than one conjunction of indexed predicates). A run of a block's rows has one
    disjunct per row and its block's facts: filled for the whole run at once, no row
    looked at (:class:`~mqo.registered.BlockRun`); a run of objects, one pass over them
    (at a million records every pass is mostly cache misses)."""

    def __init__(self, records: RecordList) -> None:
        self.contexts: list[Context] = []
        # each record's MAXWINDOW and horizon, run by run (one value for a block's run)
        self.windows: list[list[Any] | Repeated] = []
        self.sinces: list[list[Any] | Repeated] = []
        self.special: list[int] = []
        number_of: dict[int, int] = {}
        counts: list[np.ndarray] = []
        numbers: list[np.ndarray] = []
        orders: list[np.ndarray] = []
        windows, sinces = self.windows, self.sinces
        # (counts of disjuncts and contexts' numbers are below 2**31: int32, half the
        # bytes of the record-sized arrays held while the plan's slots are made)
        for start, run in zip(records.starts, records.runs, strict=False):
            m = len(run)
            if isinstance(run, BlockRun):
                block = run.block
                context = block.context
                counts.append(np.ones(m, np.int32))
                numbers.append(np.full(m, self._number(context, number_of), np.int32))
                windows.append(Repeated((block.maxwindow or 0.0) if context.multi_stream else 0.0, m))
                sinces.append(Repeated(run.since_ts, m))
                orders.append(run.orders)
                if block.residuals:
                    self.special += range(start, start + m)
                continue
            n_disjuncts: list[int] = []
            context_numbers: list[int] = []
            run_windows: list[Any] = []
            last_block: RowBlock | None = None
            block_facts: tuple[int, Any, bool] = (0, 0.0, False)
            for i, rq in enumerate(run, start):
                compiled = None if type(rq) is RegisteredRow else rq.compiled
                if compiled is None or type(compiled) is RowQuery:
                    block = rq.block if compiled is None else compiled.block  # type: ignore[attr-defined,union-attr]
                    if block is not last_block:
                        last_block = block
                        context = block.context
                        window = (block.maxwindow or 0.0) if context.multi_stream else 0.0
                        block_facts = (self._number(context, number_of), window, bool(block.residuals))
                    k, window, special = block_facts
                    n = 1
                else:
                    context = compiled.context
                    k = number_of.get(id(context), -1)
                    if k < 0:
                        k = self._number(context, number_of)
                    window = (compiled.maxwindow or 0.0) if context.multi_stream else 0.0
                    disjuncts = compiled.disjuncts
                    n = len(disjuncts)
                    special = n != 1 or bool(disjuncts[0][1])
                n_disjuncts.append(n)
                context_numbers.append(k)
                run_windows.append(window)
                if special:
                    self.special.append(i)
            counts.append(np.array(n_disjuncts, np.int32))
            numbers.append(np.array(context_numbers, np.int32))
            windows.append(run_windows)
            sinces.append([rq.since_ts for rq in run])
            orders.append(np.fromiter((rq.order for rq in run), np.int64, m))
        self.n_disjuncts = _joined(counts, np.int32)
        self.one_each = bool((self.n_disjuncts == 1).all())
        self.context_numbers = _joined(numbers, np.int32)
        # (one run, a block's: its orders as they are, not a copy)
        self.orders = _joined(orders, np.int64).astype(np.int64, copy=False)

    def release(self) -> None:
        """Let the per-record counts and context numbers go (read into the slots'
        arrays by then)."""
        self.n_disjuncts = self.context_numbers = _NO_RECORDS

    def _number(self, context: Context, number_of: dict[int, int]) -> int:
        k = number_of.get(id(context))
        if k is None:
            k = number_of[id(context)] = len(self.contexts)
            self.contexts.append(context)
        return k


_NO_RECORDS = np.zeros(0, np.int32)


def _joined(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    """The runs' arrays one after the other (one run's as it is: no copy)."""
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def holds_integers(schema: StreamSchema, column: str) -> bool:
    found = schema.lookup(column)
    return found is not None and found[1] in (ColumnType.INTEGER, ColumnType.BYTE)


def _distinct_objects(
    values: list[Any], slots: np.ndarray, key: Callable[[Any], Any] | None = None
) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """Distinct constants in ascending order (by ``key``), and the slots using each."""
    if key is None:
        distinct = sorted(set(values), key=lambda v: (v is None, v))
    else:
        distinct = sorted(set(values), key=key)
    where = {v: i for i, v in enumerate(distinct)}
    inverse = np.array([where[v] for v in values], np.int64)
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse, minlength=len(distinct))
    offsets = np.zeros(len(distinct) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return distinct, offsets, slots[order].astype(np.int32)


_DOUBLE = object()  # (a row's constant is its double)
# up to this many rows of doubles, every list's constants come from one sort of all rows
# (:class:`_SortedRows`); more (a whole compile), each list's are sorted on their own
WHOLE_SORT_ROWS = 1 << 16


class _ListRows:
    """Every live predicate's constant and slot, grouped by list: the rows of queries
    registered one by one (in the registry's columns, sorted by list once) and the
    tables' blocks (a list's constants are a column of its block, taken as they are:
    no row is made per predicate). ``slot_base``: each record's first slot (None when
    every record has one slot, its number)."""

    def __init__(self, registry: QueryRegistry, orders: np.ndarray, slot_base: np.ndarray | None) -> None:
        rows = registry.column_rows()
        live = rows["live"]
        everyone = bool(live.all())

        def alive(column: np.ndarray) -> np.ndarray:
            return column if everyone else column[live]

        # the column row numbers of the live rows (None: all are live, each its own)
        self.row_numbers = None if everyone else np.flatnonzero(live)
        self.row_slot = _slots_of(alive(rows["order"]), orders, slot_base)
        if slot_base is not None:
            self.row_slot += alive(rows["disjunct"])
        self.row_key = alive(rows["key"])
        self.row_value = alive(rows["value"])
        self.objects = rows["objects"]
        self.exact_row_numbers = np.fromiter((r for r, v in self.objects.items() if isinstance(v, Fraction)), np.int64)
        # rows grouped by list (a stable radix sort when list ids fit 16 bits), then each
        # list's rows by constant (:meth:`of`): the order of a lexsort on (key, value)
        narrow = self.row_key.astype(np.int16) if registry.key_ids < 2**15 else self.row_key
        self.by_key = np.argsort(narrow, kind="stable")
        self.bounds = np.zeros(registry.key_ids + 1, np.int64)
        np.cumsum(np.bincount(self.row_key, minlength=registry.key_ids), out=self.bounds[1:])
        self.blocks = [
            (_slots_of(block_orders, orders, slot_base), kids, values)
            for block_orders, kids, values in registry.block_parts()
        ]
        self.size = len(self.row_key) + sum(values.size for _, _, values in self.blocks)
        # few rows of doubles only (a plan update's part): every list's distinct constants
        # from one sort of all rows, a list then a slice (per-list sorts cost more in
        # calls than in work there)
        self.sorted: _SortedRows | None = None
        if not self.blocks and not len(self.exact_row_numbers) and len(self.row_key) <= WHOLE_SORT_ROWS:
            self.sorted = _SortedRows(self.row_key, self.row_value, self.row_slot, self.bounds)

    def of(self, kid: int, numbers: bool, csr: SharedCsr) -> tuple[Any, np.ndarray, np.ndarray, bool, int]:
        """List ``kid`` written into ``csr``: its distinct constants in ascending order,
        CSR offsets and users (as :meth:`SharedCsr.add` gives them), whether its
        constants are all doubles (a list of ``numbers`` with no exact constant such
        as 1/3), and its first position."""
        if numbers and self.sorted is not None:
            constants, offsets, users, first = csr.add(*self.sorted.of(kid))
            return constants, offsets, users, True, first
        chosen = self.by_key[self.bounds[kid] : self.bounds[kid + 1]]
        values = [self.row_value[chosen]]
        slots = [self.row_slot[chosen]]
        for block_slots, kids, table in self.blocks:
            for j in np.flatnonzero(kids == kid).tolist():
                values.append(table[:, j])
                slots.append(block_slots)
        if len(values) > 1 and not len(chosen):  # (only blocks': no copy joins an empty part to them)
            values, slots = values[1:], slots[1:]
        # (one column of a block is strided by its row: read in place, no copy made)
        all_values = np.concatenate(values) if len(values) > 1 else values[0]
        all_slots = np.concatenate(slots) if len(slots) > 1 else slots[0]
        del values, slots
        exact_rows = None
        if numbers and len(self.exact_row_numbers):
            exact_rows = np.isin(self._numbers(chosen), self.exact_row_numbers)
        if numbers and (exact_rows is None or not exact_rows.any()):
            constants, offsets, users, first = csr.add_sorted(all_values, all_slots)
            return constants, offsets, users, True, first
        # the registry's rows first (their constants as objects where kept so), then
        # the blocks' doubles
        objects = self.objects
        kept = [objects.get(r, _DOUBLE) for r in self._numbers(chosen).tolist()]
        if numbers:
            assert exact_rows is not None
            kept = [v if is_exact else _DOUBLE for v, is_exact in zip(kept, exact_rows.tolist(), strict=True)]
        kept += [_DOUBLE] * (len(all_values) - len(kept))
        python = [v if k is _DOUBLE else k for v, k in zip(all_values.tolist(), kept, strict=True)]
        constants, offsets, users, first = csr.add(
            *_distinct_objects(python, all_slots, key=exact if numbers else None)
        )
        return constants, offsets, users, False, first

    def _numbers(self, chosen: np.ndarray) -> np.ndarray:
        """The column row numbers of live rows ``chosen`` (where other constants are kept)."""
        return chosen if self.row_numbers is None else self.row_numbers[chosen]


class _SortedRows:
    """Every row sorted by (list, constant) at once, each list's distinct constants and
    CSR arrays then slices of the whole's (rows of doubles only: :class:`_ListRows`)."""

    def __init__(self, keys: np.ndarray, values: np.ndarray, slots: np.ndarray, bounds: np.ndarray) -> None:
        order = np.lexsort((values, keys))
        n = len(order)
        by_row, by_key = values[order], keys[order]
        first = np.empty(n, bool)
        first[:1] = True
        np.not_equal(by_row[1:], by_row[:-1], out=first[1:])
        first[1:] |= by_key[1:] != by_key[:-1]
        starts = np.flatnonzero(first)
        self.constants = by_row[starts].astype(np.float64, copy=False)
        self.offsets = np.append(starts, n).astype(np.int64)  # the rows of each distinct constant
        self.users = slots[order].astype(np.int32)
        self.bounds = bounds
        self.first_constant = np.searchsorted(starts, bounds)  # each list's first, among all lists' constants

    def of(self, kid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """List ``kid``'s distinct constants, its CSR offsets (from 0) and users, as
        as :meth:`SharedCsr.add` takes them."""
        a, b = int(self.first_constant[kid]), int(self.first_constant[kid + 1])
        first_row, end_row = int(self.bounds[kid]), int(self.bounds[kid + 1])
        return self.constants[a:b], self.offsets[a : b + 1] - first_row, self.users[first_row:end_row]


def _slots_of(row_orders: np.ndarray, orders: np.ndarray, slot_base: np.ndarray | None) -> np.ndarray:
    """The first slot of each row's query (``orders``: the records' orders, ascending),
    as int32 (a slot number's type in the plan), made without an int64 copy of a
    table's million rows where the records are numbered without gaps."""
    if len(orders) and int(orders[-1]) - int(orders[0]) == len(orders) - 1:
        # numbered without gaps (no removal since): no search
        if slot_base is None:
            slots = np.empty(len(row_orders), np.int32)
            return np.subtract(row_orders, orders[0], out=slots, casting="unsafe")
        record = row_orders - orders[0]
    else:
        record = np.searchsorted(orders, row_orders)
    return (record if slot_base is None else slot_base[record]).astype(np.int32)
