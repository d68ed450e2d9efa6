"""The queries registered since a whole compile, kept in place (:mod:`mqo.plan_update`).

A registration must cost what it adds, not a rebuild: :class:`LiveDelta` keeps the
queries registered since the base plan (the last one compiled whole) in structures
that take an insertion, and each update makes a plan of views of them:

* **slots** are numbered after the base's, in registration order, and never
  renumbered: the per-slot arrays have spare room (a plan's are views of their first
  ``n_slots``); a removed query keeps its slots with no streams (dead), as a removed
  query of the base does;
* **lists**: each list key of the added queries has one list, its positions a
  segment of arrays shared by all of them, with spare room
  (:class:`~mqo.live_lists.LiveLists`): a
  predicate is inserted in covering order (a new position, or one more user of an
  equal constant) by moving the segment's tail, and only lists a change touches get a
  new :class:`~mqo.plan.CompiledList` (views of the segment);
* **kernel tables**: an added attribute list has no checkpoint rows, only "none" and
  "all users" rows (its failed users are walked, ``WALK_STRIDE``), so an insertion
  sets one bit per row; per stream, the rows live in one table with spare rows
  (:class:`~mqo.live_lists.KernelRows`), the second part of the stream's
  :class:`~indexes.kill_bitsets.KillBitsets`.

An update's plan is valid until the next update (the views it holds are then moved
under it); the base plan is never written.
"""

from __future__ import annotations

import itertools
import weakref
from array import array
from collections.abc import Callable
from typing import Any

import numpy as np

from indexes.kill_bitsets import PER_LIST, KillBitsets, bitset_of, words_for
from mqo.expressions import TestFn, compile_test
from mqo.live_lists import FIRST_ROOM, KernelRows, LiveLevels, LiveList, LiveLists, with_room
from mqo.plan import TYPES, CompiledList, CompiledPlan, ContextCode
from mqo.plan_compile import arrange_lists, context_code_of, list_shape
from mqo.prepare import stream_masks
from mqo.registry import RegisteredQuery
from predicates import Kind, ListKey, StreamSchema
from predicates.records import Conjunction

_WORD = (1 << 64) - 1
FIRST_STORAGE = 1024  # positions of the shared arrays at first (doubled when they fill)


class LiveDelta:
    """The base plan's added queries and removed ones, in place (see the module)."""

    def __init__(self, base: CompiledPlan) -> None:
        # (the base holds this object: a weak reference back, so a base replaced by a
        # whole compile is freed at once, not when a collection finds the cycle)
        self._base = weakref.ref(base)
        self.n_base = base.n_slots
        self.newest_order = int(base.record_orders[-1]) if len(base.record_orders) else -1
        self.base_newest = self.newest_order  # the base's newest query's order
        self.n_base_records = len(base.records)
        self.removal_mark = base.removal_mark
        streams = base.streams
        number = {s.name.lower(): i for i, s in enumerate(streams)}
        self.stream_number: Callable[[str], int] = lambda name: number[name.lower()]
        self.schema_of: Callable[[str], StreamSchema] = lambda name: streams[number[name.lower()]]
        # the per-slot and per-record facts, the base's copied once, with room
        room = self.n_base + 64
        self.slot_arrays = {
            name: with_room(getattr(base, name), room)
            for name in (
                "slot_record",
                "slot_disjunct",
                "slot_context",
                "slot_window",
                "slot_window_level",
                "slot_since_level",
                "slot_stream_mask",
                "slot_special",
            )
        }
        self.n_slots = self.n_base
        self.records: list[RegisteredQuery] = list(base.records)
        self.record_names = list(base.record_names)
        self.record_first_slot: list[int] = []  # of each added record
        self.record_of_order: dict[int, int] = {}  # the added records', by registry order
        self.dead: set[int] = set()  # removed records (the base's and added ones)
        self.dead_base = 0
        self.windows = LiveLevels(base.windows, len(base.records))
        self.sinces = LiveLevels(base.sinces, len(base.records))
        self.context_code = dict(base.context_code)
        self.context_codes: list[ContextCode] = list(self.context_code.values())
        self.context_number = {key: i for i, key in enumerate(self.context_code)}
        self.residual_code: dict[int, TestFn] = dict(base.residual_code)
        self.slot_residuals = dict(base.slot_residuals)
        self.storage = LiveLists(FIRST_STORAGE, 4 * FIRST_STORAGE)
        self.lists: dict[ListKey, LiveList] = {}
        self.kind_lists: dict[Kind, list[LiveList]] = {k: [] for k in TYPES}
        # each added list's compiled list as the last plan had it (kept in its place, so
        # a plan replaces only the lists changed since), and the lists changed since
        self.kind_compiled: dict[Kind, list[Any]] = {k: [] for k in TYPES}
        self.changed: dict[int, LiveList] = {}
        self.bits_end = dict(base.bits)
        self.kernel_rows: dict[int, KernelRows] = {}
        self.masks: dict[int, np.ndarray] = {}  # per stream read so far: prepare.stream_masks, in place
        # per stream: (which base tables and how many added lists, the joined per-list arrays)
        self._joined: dict[int, tuple[tuple[int, int], dict[str, np.ndarray]]] = {}
        self._seen_moves = 0

    @property
    def base(self) -> CompiledPlan:
        base = self._base()
        assert base is not None, "the changes of a base plan that was freed"
        return base

    # ------------------------------------------------------------ changes

    @property
    def added_slots(self) -> int:
        return self.n_slots - self.n_base

    def remove(self, order: int) -> None:
        """The query of registry order ``order`` is removed: its slots keep their
        numbers, with no streams; its MAXWINDOW holds no tuple back any more."""
        if order in self.record_of_order:
            record = self.record_of_order[order]
            first = self.record_first_slot[record - self.n_base_records]
            slots = range(first, first + len(self.records[record].disjuncts))
        elif order > self.base_newest:
            return  # registered and removed again between two updates: never added
        else:
            base = self.base
            record = int(base.record_orders.searchsorted(order))
            if record == len(base.record_orders) or base.record_orders[record] != order:
                return
            slots = base_slots(base.slot_record, record)
            self.dead_base += 1
        self.dead.add(record)
        arrays = self.slot_arrays
        for masks in self.masks.values():
            for q in slots:
                masks[:, q >> 6] &= np.uint64(~(1 << (q & 63)) & _WORD)
        span = slice(slots.start, slots.stop)
        arrays["slot_stream_mask"][span] = 0
        arrays["slot_window"][span] = 0.0
        level = self.windows.set(record, 0.0, arrays["slot_window_level"], self.n_slots)
        arrays["slot_window_level"][span] = level

    def add(self, rq: RegisteredQuery) -> None:
        """Register ``rq`` after the others: its slots, facts and predicates."""
        record = len(self.records)
        disjuncts = rq.disjuncts
        first = self.n_slots
        count = len(disjuncts)
        self._room(first + count)
        context = rq.context
        code_key = id(context)
        if code_key not in self.context_code:
            self.context_code[code_key] = code = context_code_of(context, self.stream_number, self.schema_of)
            self.context_number[code_key] = len(self.context_codes)
            self.context_codes.append(code)
        code = self.context_code[code_key]
        window = (rq.exact_maxwindow or 0.0) if context.multi_stream else 0.0
        arrays = self.slot_arrays
        window_level = self.windows.append(window, arrays["slot_window_level"], self.n_slots)
        since_level = self.sinces.append(rq.since_ts, arrays["slot_since_level"], self.n_slots)
        special = count > 1 or any(residuals for _, residuals in disjuncts)
        slots = slice(first, first + count)
        arrays["slot_record"][slots] = record
        arrays["slot_disjunct"][slots] = np.arange(count)
        arrays["slot_context"][slots] = self.context_number[code_key]
        arrays["slot_window"][slots] = self.windows.floats[window_level]
        arrays["slot_window_level"][slots] = window_level
        arrays["slot_since_level"][slots] = since_level
        arrays["slot_stream_mask"][slots] = code.stream_mask
        arrays["slot_special"][slots] = special
        self.records.append(rq)
        self.record_names.append(rq.name)
        self.record_first_slot.append(first)
        self.record_of_order[rq.order] = record
        self.newest_order = rq.order
        self.n_slots = first + count
        for stream, masks in self.masks.items():
            for q in range(first, first + count):
                self._mark(masks, stream, q)
        for d, (preds, residuals) in enumerate(disjuncts):
            if residuals:
                self.slot_residuals[first + d] = residuals
                for r in residuals:
                    if id(r) not in self.residual_code:
                        self.residual_code[id(r)] = compile_test(r.comparison, self.stream_number, self.schema_of)
            if preds.keys:
                self._insert_conjunction(preds, first + d)

    def _room(self, n_slots: int) -> None:
        arrays = self.slot_arrays
        if n_slots > len(arrays["slot_record"]):
            size = max(n_slots, self.n_base + 2 * (len(arrays["slot_record"]) - self.n_base))
            for name, array in arrays.items():
                arrays[name] = with_room(array[: self.n_slots], size)
        words = words_for(n_slots)
        for rows in self.kernel_rows.values():
            rows.widen(words - (self.n_base >> 6))
        for stream, masks in self.masks.items():
            if masks.shape[1] < words:
                self.masks[stream] = wider = np.zeros((3, words), np.uint64)
                wider[:, : masks.shape[1]] = masks

    def _mark(self, masks: np.ndarray, stream: int, q: int) -> None:
        """Slot ``q``'s bits in ``stream``'s masks: [single-stream plain ones, those the
        engine decides, multi-stream ones] (as :func:`mqo.prepare.stream_masks` sets
        them)."""
        arrays = self.slot_arrays
        mask = int(arrays["slot_stream_mask"][q])
        if not (mask >> stream) & 1:
            return
        only = mask == 1 << stream
        bit = np.uint64(1 << (q & 63))
        masks[0 if only and not arrays["slot_special"][q] else 1, q >> 6] |= bit
        if not only:
            masks[2, q >> 6] |= bit

    def stream_masks(self, stream: int, words: int) -> np.ndarray:
        """Stream ``stream``'s masks (see :meth:`_mark`) over ``words`` words, kept in
        place from the first read on: the base's, less the removed queries', with the
        added ones'."""
        masks = self.masks.get(stream)
        if masks is None:
            base = self.base.per_stream(stream, stream_masks)[0]
            masks = self.masks[stream] = np.zeros((3, words), np.uint64)
            masks[:, : base.shape[1]] = base
            slot_record = self.base.slot_record
            for record in self.dead:
                if record < len(self.base.records):
                    for q in base_slots(slot_record, record):
                        masks[:, q >> 6] &= ~np.uint64(1 << (q & 63))
            for q in range(self.n_base, self.n_slots):
                self._mark(masks, stream, q)
        assert masks.shape[1] == words, "masks over other words than the plan's"
        return masks

    def _list(self, key: ListKey) -> LiveList:
        live = self.lists.get(key)
        if live is None:
            kind = key.kind
            index = len(self.base.lists[kind]) + len(self.kind_lists[kind])
            shape = list_shape(key, self.stream_number, self.schema_of)
            live = LiveList(key, index, shape, self.storage.segment(FIRST_ROOM, FIRST_ROOM))
            live.bit_base, live.bit_room = self.bits_end[kind], FIRST_ROOM
            self.bits_end[kind] += FIRST_ROOM
            self.lists[key] = live
            self.kind_lists[kind].append(live)
            live.kept, live.kept_at = self.kind_compiled[kind], len(self.kind_compiled[kind])
            live.kept.append(None)
            self.changed[id(live)] = live
            if kind == Kind.ATTRIBUTE:
                stream = shape["left_stream"]
                rows = self.kernel_rows.get(stream)
                if rows is None:
                    width = words_for(self.n_slots) - (self.n_base >> 6)
                    rows = self.kernel_rows[stream] = KernelRows(self.n_base >> 6, width)
                rows.add(live, key.op)
        return live

    def _insert_conjunction(self, preds: Conjunction, slot: int) -> None:
        """The predicates of one disjunct of slot ``slot``: when they are doubles for
        lists of doubles (the usual case) in one kernel call, else one by one."""
        lists = [self._list(key) for key in preds.keys]
        values = preds.values
        new = None
        if type(values) is array and len({id(live) for live in lists}) == len(lists):
            new = self.storage.insert_doubles(lists, np.frombuffer(values, np.float64), slot)
        if new is None:
            for live, value in zip(lists, values, strict=True):
                self._insert(live, value, slot)
            return
        rows: dict[int, list[int]] = {}  # the lists' kernel rows, per stream
        for live in lists:
            if live.rows:
                rows.setdefault(live.shape["left_stream"], []).extend(live.rows)
        for stream, stream_rows in rows.items():
            self.kernel_rows[stream].set_rows(np.array(stream_rows, np.intp), slot)
        bits_end, changed = self.bits_end, self.changed
        for live in lists:
            live.compiled = None
            changed[id(live)] = live
            if live.n > live.bit_room:
                live.bit_base, live.bit_room = bits_end[live.kind], 2 * live.bit_room
                bits_end[live.kind] += live.bit_room

    def _insert(self, live: LiveList, value: Any, slot: int) -> None:
        """One predicate of slot ``slot``: into its list, its kernel rows and bits."""
        self.storage.insert(live, value, slot)
        live.compiled = None
        self.changed[id(live)] = live
        if live.rows:
            self.kernel_rows[live.shape["left_stream"]].set_user(live, slot)
        if live.n > live.bit_room:
            live.bit_base, live.bit_room = self.bits_end[live.kind], 2 * live.bit_room
            self.bits_end[live.kind] += live.bit_room

    # -------------------------------------------------------------- plans

    def plan(self, version: int, removal_mark: int) -> CompiledPlan:
        """The plan of the base and the changes so far: views of the kept arrays."""
        base, n, n_records = self.base, self.n_slots, len(self.records)
        self.removal_mark = removal_mark
        if self.storage.moved != self._seen_moves:  # every list's views are of the old arrays
            self._seen_moves = self.storage.moved
            for live in self.lists.values():
                live.compiled = None
                self.changed[id(live)] = live
        for live in self.changed.values():
            live.kept[live.kept_at] = self._compiled(live)
        self.changed = {}
        lists: dict[Kind, list[CompiledList]] = {kind: base.lists[kind] + self.kind_compiled[kind] for kind in TYPES}
        attr_lists, pair_lists, indexed, attr_list_mask = arrange_lists(lists, len(base.streams), base)
        windows = self.windows.levels(n_records)
        retention, retention_exact = self.windows.largest()
        views = {name: array[:n] for name, array in self.slot_arrays.items()}
        plan = CompiledPlan(
            version=version,
            catalog=base.catalog,
            streams=base.streams,
            records=self.records,
            record_names=self.record_names,
            context_code=self.context_code,
            residual_code=self.residual_code,
            slot_residuals=self.slot_residuals,
            windows=windows,
            sinces=self.sinces.levels(n_records),
            lists=lists,
            bits=dict(self.bits_end),
            attr_lists=attr_lists,
            pair_lists=pair_lists,
            indexed_positions=indexed,
            attr_list_mask=attr_list_mask,
            retention_window=retention,
            retention_window_exact=retention_exact,
            _stream_number=base._stream_number,
            record_orders=base.record_orders,
            base_of=base.base_of,
            roles_of=base.roles_of,
            removal_mark=removal_mark,
            base_plan=base,
            **views,
        )
        plan.__dict__["context_codes"] = self.context_codes  # (the cached property, kept in place)
        return plan

    def _compiled(self, live: LiveList) -> CompiledList:
        if live.compiled is None:
            storage, s, n = self.storage, live.start, live.n
            doubles = live.objects is None
            live.compiled = CompiledList(
                kind=live.kind,
                index=live.index,
                key=live.key,
                base=live.bit_base,
                constants=storage.constants[s : s + n] if doubles else list(live.objects),  # type: ignore[arg-type]
                offsets=storage.offsets[s : s + n + 1],
                users=storage.users,
                slot_bits=self.n_slots,
                doubles=doubles,
                csr_base=s,
                **live.shape,
            )
        return live.compiled

    def kill_bitsets(self, plan: CompiledPlan, stream: int, budget_bytes: int) -> KillBitsets:
        """Stream ``stream``'s kernel tables for ``plan`` (made by :meth:`plan`): the
        base's, shared, and the added lists' rows as they are now; a tuple's candidates
        start from the stream's slots."""
        words = words_for(plan.n_slots)
        masks = self.stream_masks(stream, words)
        base_row = masks[0] | masks[1]
        shared = self.base.kill_bitsets(stream, budget_bytes)
        rows = self.kernel_rows.get(stream)
        if rows is None:
            empty = {name: np.zeros(0, np.int8 if name in ("modes", "part") else np.int64) for name in PER_LIST}
            width = words - (self.n_base >> 6)
            second = (np.zeros((1, max(width, 1)), np.uint64), np.zeros(1, np.int32), np.zeros(0, np.int32))
            return shared.joined(empty, second, plan.n_slots, base_row)
        width = words - rows.first_word
        rows.widen(width)
        table = rows.table[: max(rows.rows, 1), :width]
        storage = self.storage
        # both parts' per-list arrays kept from the last join while no list was added
        # (a plan is valid until the next update: its arrays are then written over)
        known = self._joined.get(stream)
        merged = known[1] if known is not None and known[0] == (id(shared), len(rows.lists)) else None
        second = (table, storage.offsets, storage.users)
        tables = shared.joined(rows.arrays(), second, plan.n_slots, base_row, merged)
        self._joined[stream] = ((id(shared), len(rows.lists)), {name: getattr(tables, name) for name in PER_LIST})
        return tables

    # ------------------------------------------------------------- checks

    def _check(self, live_orders: list[int]) -> None:
        """Assert the kept structures' invariants: ``live_orders``, the registry's
        orders of the queries registered since the base and not removed, are the live
        added records, in order; slots and records agree; every list's segment is in
        covering order inside its room, apart from the others', with its users among
        the added slots; bit blocks apart; each kernel row the OR of its list's users;
        each stream's masks kept in place those its slots' facts give."""
        base, n, arrays = self.base, self.n_slots, self.slot_arrays
        streams, special = arrays["slot_stream_mask"][:n], arrays["slot_special"][:n]
        for stream, masks in self.masks.items():
            of_stream = (streams >> stream) & 1 == 1
            single = of_stream & (streams == 1 << stream) & ~special
            want = [single, of_stream & ~single, of_stream & (streams != 1 << stream)]
            for row, flags in zip(masks, want, strict=True):
                assert (row == bitset_of(np.flatnonzero(flags), len(row))).all(), f"stream {stream}: masks differ"
        added = self.records[len(base.records) :]
        assert [rq.order for k, rq in enumerate(added, len(base.records)) if k not in self.dead] == live_orders, (
            "the added queries differ from the registry's"
        )
        assert all(self.record_of_order[rq.order] == k for k, rq in enumerate(added, len(base.records))), "orders"
        assert len(self.record_names) == len(self.records) and len(self.record_first_slot) == len(added)
        assert all(len(a) >= n for a in arrays.values()), "slot arrays shorter than the slots"
        for k, rq in enumerate(added, len(base.records)):
            first = self.record_first_slot[k - len(base.records)]
            slots = slice(first, first + len(rq.disjuncts))
            assert (arrays["slot_record"][slots] == k).all(), f"{rq.name}: its slots' record"
            mask = 0 if k in self.dead else self.context_code[id(rq.context)].stream_mask
            assert (arrays["slot_stream_mask"][slots] == mask).all(), f"{rq.name}: its slots' streams"
        for k in self.dead:
            assert self.windows.values[self.windows.level_of[k]] == 0, "a removed query's MAXWINDOW holds tuples"
        assert self.dead_base == sum(1 for k in self.dead if k < len(base.records)), "removed base queries"
        self.windows._check(len(self.records), self.dead)
        self.sinces._check(len(self.records), ())
        for kind in TYPES:
            for live, compiled in zip(self.kind_lists[kind], self.kind_compiled[kind], strict=True):
                assert id(live) in self.changed or compiled is live.compiled, "a kept compiled list out of date"
        taken: list[tuple[int, int, str]] = []
        blocks: list[tuple[int, int, Kind]] = []
        storage = self.storage
        for live in self.lists.values():
            s, size = live.start, live.n
            taken.append((s, s + live.room, "positions"))
            taken.append((live.first_user, live.first_user + live.user_room, "users"))
            blocks.append((live.bit_base, live.bit_base + live.bit_room, live.kind))
            assert size < live.room and live.m <= live.user_room and size <= live.bit_room, "a list past its room"
            offsets = storage.offsets[s : s + size + 1]
            assert offsets[0] == live.first_user and offsets[-1] == live.first_user + live.m, "a list's users"
            assert (np.diff(offsets) > 0).all(), "a position without users"
            users = storage.users[live.first_user : live.first_user + live.m]
            assert not len(users) or (users.min() >= self.n_base and users.max() < n), "a user"
            if live.objects is None:
                assert (np.diff(storage.constants[s : s + size]) > 0).all(), "constants out of covering order"
            else:
                assert len(live.objects) == size and live.order_keys == [live.order_key(c) for c in live.objects]
                assert all(a < b for a, b in itertools.pairwise(live.order_keys)), "order"
            if live.rows:
                rows = self.kernel_rows[live.shape["left_stream"]]
                want = bitset_of(users - 64 * rows.first_word, rows.table.shape[1])
                for r in live.rows:
                    assert (rows.table[r] == want).all(), "a kernel row is not its list's users"
        for what in ("positions", "users"):
            mine_taken = sorted(t for t in taken if t[2] == what)
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(mine_taken)), f"segments of {what} overlap"
        for kind in TYPES:
            mine = sorted(b for b in blocks if b[2] == kind)
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(mine)), "bit blocks overlap"
            assert not mine or (mine[0][0] >= base.bits[kind] and mine[-1][1] <= self.bits_end[kind]), "bits"


def base_slots(slot_record: np.ndarray, record: int) -> range:
    """The slots of record ``record`` (``slot_record`` ascending: a record's slots are a
    run). The record is searched as a number of the array's own type: numpy casts the
    whole array to a Python int's int64 first (``slot_record`` is int32: 8 us at 20,000
    slots, a millisecond at a million)."""
    key = slot_record.dtype.type(record)
    return range(int(slot_record.searchsorted(key)), int(slot_record.searchsorted(key, "right")))
