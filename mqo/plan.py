"""The compiled plan: the registry laid out as bits and lists the matcher runs on.

Compiling numbers everything the matcher touches per tuple:

* **slots**: one per disjunct of each registered query (a query without OR is one
  slot). Candidate sets are bit masks over slots. Per-slot facts (query, window,
  registration horizon, streams) are arrays; the per-slot objects the Python engine
  reads when it reports a result are made on first use.
* **bit positions**: each predicate type (attribute, join, window) has its own bit
  space; each list owns a contiguous block of it in covering order, so the thesis'
  BitPosition ``list:pred`` is bit ``base(list) + pred``. A slot's **QED** is, per
  type, the mask of the bits of its predicates.
* **lists** (:class:`CompiledList`): the distinct constants in covering order, the
  slots using each one (CSR arrays), and, made when first needed, the Python
  :class:`~indexes.kill_table.KillTable` of the per-tuple engine and the
  :class:`~indexes.kill_bitsets.KillBitsets` of the batch kernels.
* **connectivity**: per type and pair of streams, the slots that have a predicate of
  that type between the two streams; this decides which partial results may grow
  through which exploitation structure.

The registry keeps every predicate as a row (query, disjunct, list, constant); one
sort of all rows by (list, constant) gives every list's distinct constants and the
slots using each. Compiling is O(P log P) for P predicate occurrences.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np

from indexes.covering import NOTHING, CoveringList, Satisfied, compare, first_true
from indexes.exact import at_least, span_sign
from indexes.kill_bitsets import DEFAULT_BUDGET_BYTES, KillBitsets, ListUsers, bitset_of, words_for
from indexes.kill_table import KillTable, mask_of
from mqo.expressions import TestFn, ValueFn, column_position, compile_test, compile_value
from mqo.registry import QueryRegistry, RegisteredQuery
from predicates import INDEXED_KINDS, Catalog, ColumnType, Kind, ListKey, Residual, StreamSchema
from predicates.catalog import role_schema, split_role
from predicates.normalize import to_float
from predicates.numbers import exact
from predicates.templates import Context

TYPES = INDEXED_KINDS


@dataclass(eq=False)
class Levels:
    """Distinct exact values (MAXWINDOWs, registration horizons) in ascending order,
    and for each record the number of its value (``level_of``). Few distinct values
    recur over many queries, so slot masks are kept per level."""

    values: list[Any]  # floats that mean what they print as, or Fractions
    floats: list[float]
    level_of: np.ndarray

    @classmethod
    def of(cls, per_record: list[Any]) -> Levels:
        distinct = sorted(set(per_record), key=_ascending)
        number = {v: i for i, v in enumerate(distinct)}
        level_of = np.fromiter((number[v] for v in per_record), np.int32, len(per_record))
        return cls(distinct, [to_float(v) for v in distinct], level_of)

    def __len__(self) -> int:
        return len(self.values)

    def exact(self, k: int) -> Fraction:
        return exact(self.values[k])


def _ascending(value: Any) -> tuple[int, Fraction]:
    """Sort key of an exact value that may be -inf ("since the start")."""
    if value == -math.inf:
        return (0, Fraction(0))
    return (1, exact(value))


@dataclass(eq=False)
class CompiledList:
    """One predicate list, ready to evaluate: ``left OP factor*right + c``.

    ``constants`` are in exact ascending order: floats that mean what they print as,
    or Fractions (:func:`predicates.numbers.faithful`), or strings and booleans.
    ``integer``: the left column holds integers."""

    kind: Kind
    index: int
    key: ListKey
    base: int
    constants: list[Any]
    offsets: np.ndarray
    users: np.ndarray
    slot_bits: int
    left_stream: int
    left_pos: int
    right_stream: int | None
    right_pos: int | None
    factor: float | None
    numeric: bool
    integer: bool = False
    doubles: bool = False  # every constant a float that means what it prints as

    @property
    def n(self) -> int:
        return len(self.constants)

    @cached_property
    def covering(self) -> CoveringList:
        if self.right_pos is None:
            return CoveringList(self.key.op, self.constants, integer=self.integer, doubles=self.doubles)
        if not self.numeric:
            return CoveringList(self.key.op, [0])  # strings, booleans: compared as they are
        return CoveringList(self.key.op, self.constants, factor=self.key.factor, doubles=self.doubles)

    @cached_property
    def kill(self) -> KillTable:
        return KillTable.from_csr(self.offsets, self.users, self.slot_bits)

    def as_users(self) -> ListUsers:
        return ListUsers(self.key.op, self.offsets, self.users)

    def users_of(self, position: int) -> np.ndarray:
        return self.users[self.offsets[position] : self.offsets[position + 1]]

    @property
    def block(self) -> int:
        """The list's bits in its type's bit space."""
        return ((1 << self.n) - 1) << self.base

    def sat_bits(self, sat: Satisfied) -> int:
        lo, hi, negated = sat
        run = ((1 << (hi - lo)) - 1) << lo if hi > lo else 0
        if negated:
            run = ((1 << self.n) - 1) & ~run
        return run << self.base

    def evaluate_row(self, row: Sequence[Any]) -> Satisfied:
        """Attribute list on one row (one column, or two columns of the same stream)."""
        if self.right_pos is None:
            return self.covering.satisfied(row[self.left_pos])
        return self._pair(row[self.left_pos], row[self.right_pos])

    def evaluate_pair(self, left_row: Sequence[Any], right_row: Sequence[Any]) -> Satisfied:
        """Join or window list on the rows of its left and right streams."""
        return self._pair(left_row[self.left_pos], right_row[self.right_pos])  # type: ignore[index]

    def _pair(self, left: Any, right: Any) -> Satisfied:
        if not self.numeric:
            return (0, 1, False) if compare(left, self.key.op, right) else NOTHING
        return self.covering.satisfied_pair(left, right)


@dataclass(eq=False)
class Slot:
    """One disjunct of one query: what the engine needs to report its results."""

    index: int
    query: RegisteredQuery
    disjunct: int
    streams: tuple[int, ...]
    stream_mask: int
    window: float
    window_value: float | Fraction  # MAXWINDOW as kept: a float that prints as it, or a Fraction
    since_ts: float | Fraction
    residuals: tuple[TestFn, ...]
    residual_texts: tuple[str, ...]
    aliases: dict[int, str]
    outputs: tuple[tuple[str, ValueFn], ...]
    multi_disjunct: bool

    @property
    def name(self) -> str:
        return self.query.name


@dataclass(eq=False)
class ContextCode:
    """What every query of a context shares once compiled: aliases and SELECT functions."""

    aliases: dict[int, str]
    streams: tuple[int, ...]
    stream_mask: int
    outputs: tuple[tuple[str, ValueFn], ...]


class _Slots(Sequence[Slot]):
    """``plan.slots[q]``: Slot objects made on first use."""

    def __init__(self, plan: CompiledPlan) -> None:
        self._plan = plan
        self._made: dict[int, Slot] = {}

    def __len__(self) -> int:
        return self._plan.n_slots

    def __getitem__(self, q: int) -> Slot:  # type: ignore[override]
        slot = self._made.get(q)
        if slot is None:
            slot = self._made[q] = self._plan._make_slot(q)
        return slot

    def __iter__(self) -> Iterator[Slot]:
        return (self[q] for q in range(len(self)))


@dataclass(eq=False)
class CompiledPlan:
    version: int
    catalog: Catalog
    streams: tuple[StreamSchema, ...]
    records: list[RegisteredQuery]
    context_code: dict[int, ContextCode]
    residual_code: dict[int, TestFn]
    slot_residuals: dict[int, tuple[Residual, ...]]
    slot_record: np.ndarray
    slot_disjunct: np.ndarray
    slot_window: np.ndarray
    slot_window_level: np.ndarray
    windows: Levels
    slot_since_level: np.ndarray
    sinces: Levels
    slot_stream_mask: np.ndarray
    slot_special: np.ndarray
    lists: dict[Kind, list[CompiledList]]
    bits: dict[Kind, int]
    attr_lists: list[list[CompiledList]]
    pair_lists: dict[Kind, list[list[list[CompiledList]]]]
    indexed_positions: list[set[int]]
    attr_list_mask: list[int]
    retention_window: float
    retention_window_exact: Fraction
    _stream_number: dict[str, int] = field(repr=False)
    record_orders: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    removal_mark: int = 0  # the registry's removal log read up to here (mqo.plan_update)
    # a plan updated in place of a recompile (mqo.plan_update): the fully compiled plan
    # whose lists and kernel tables it shares, and that plan's records removed since
    base_plan: CompiledPlan | None = field(default=None, repr=False)
    dead_records: frozenset[int] = frozenset()
    # self-joins (see predicates.catalog.role_name): the declared stream each engine
    # stream reads, and each declared stream's roles after its first, in role order
    base_of: list[int] = field(default_factory=list)
    roles_of: list[tuple[int, ...]] = field(default_factory=list)
    _covered: dict[int, int] = field(default_factory=dict, repr=False)
    _kill_bitsets: dict[int, KillBitsets] = field(default_factory=dict, repr=False)
    _per_stream: dict[tuple[Any, int], Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.slots = _Slots(self)

    @cached_property
    def context_codes(self) -> list[ContextCode]:
        """Every context's code, numbered as in :attr:`slot_context`."""
        return list(self.context_code.values())

    @cached_property
    def slot_context(self) -> np.ndarray:
        """The number (in :attr:`context_codes`) of each slot's context."""
        number = {key: i for i, key in enumerate(self.context_code)}
        per_record = np.array([number[id(rq.context)] for rq in self.records], np.int32)
        return per_record[self.slot_record] if self.n_slots else np.zeros(0, np.int32)

    def query_names(self, q: int) -> str:
        return self.records[int(self.slot_record[q])].name

    @cached_property
    def json_prefixes(self) -> list[str]:
        """``{"query":<name>`` for every slot, JSON-encoded once."""
        import json

        names = [json.dumps(rq.name, ensure_ascii=False) for rq in self.records]
        return ['{"query":' + names[r] for r in self.slot_record.tolist()]

    @property
    def n_slots(self) -> int:
        return len(self.slot_record)

    @property
    def max_window(self) -> float:
        return self.retention_window

    def stream_number(self, name: str) -> int:
        """The number of a declared stream (roles have numbers, but no name to push to)."""
        return self._stream_number[name.lower()]

    @property
    def n_real(self) -> int:
        """How many declared streams there are: streams ``0 .. n_real-1``; roles follow."""
        return len(self.roles_of)

    @cached_property
    def live_roles(self) -> list[tuple[int, ...]]:
        """Per declared stream, its roles after the first that some query reads: a
        tuple of the stream is matched in role 1, then in each of these, in order."""
        slots = self.stream_slots
        return [tuple(r for r in roles if slots[r]) for roles in self.roles_of]

    def _mask(self, selected: np.ndarray) -> int:
        return mask_of(np.flatnonzero(selected).tolist())

    # ------------------------------------------------------------- slot masks

    @cached_property
    def stream_slots(self) -> list[int]:
        """Per stream, the slots that read it."""
        return [self._mask((self.slot_stream_mask >> s) & 1 == 1) for s in range(len(self.streams))]

    @cached_property
    def special_slots(self) -> int:
        """Slots whose results need a check of their own (residuals, several disjuncts)."""
        return self._mask(self.slot_special)

    @cached_property
    def multi_stream_slots(self) -> int:
        """Slots over two or more streams (their tuples must be stored)."""
        return self._mask((self.slot_stream_mask & (self.slot_stream_mask - 1)) != 0)

    @cached_property
    def connected(self) -> dict[Kind, list[list[int]]]:
        """Per type and pair of streams, the slots with a predicate of that type
        between the two."""
        n = len(self.streams)
        out = {k: [[0] * n for _ in range(n)] for k in (Kind.JOIN, Kind.WINDOW)}
        for kind in (Kind.JOIN, Kind.WINDOW):
            for lst in self.lists[kind]:
                a, b = lst.left_stream, lst.right_stream
                mask = mask_of(lst.users.tolist())
                out[kind][a][b] |= mask  # type: ignore[index]
                out[kind][b][a] |= mask  # type: ignore[index]
        return out

    @cached_property
    def _window_masks(self) -> list[int]:
        """Per window level, the slots whose MAXWINDOW is at least it."""
        return [self._mask(self.slot_window_level >= i) for i in range(len(self.windows))]

    def slots_within(self, lo: float, hi: float) -> int:
        """Slots whose MAXWINDOW allows a result with timestamps from ``lo`` to ``hi``."""
        windows = self.windows
        n = len(windows)
        i = first_true(
            0,
            n,
            lambda k: span_sign(lo, hi, windows.values[k], windows.floats[k]) <= 0,
            bisect.bisect_left(windows.floats, hi - lo),
        )
        return self._window_masks[i] if i < n else 0

    def window_of(self, slots: int) -> tuple[float, float | Fraction]:
        """The largest MAXWINDOW among ``slots`` (as a double, and as kept: a float
        that means what it prints as, or a Fraction)."""
        windows, masks = self.windows, self._window_masks
        for k in range(len(windows) - 1, -1, -1):
            if slots & masks[k]:  # masks shrink as windows grow: the first hit is the largest
                return windows.floats[k], windows.values[k]
        return 0.0, Fraction(0)

    @cached_property
    def _since_masks(self) -> list[int]:
        """Per registration horizon, the slots registered at or before it."""
        return [self._mask(self.slot_since_level <= i) for i in range(len(self.sinces))]

    def slots_since(self, oldest_ts: float) -> int:
        """Slots registered early enough to see a tuple with timestamp ``oldest_ts``."""
        sinces = self.sinces
        count = first_true(
            0,
            len(sinces),
            lambda k: sinces.floats[k] != -math.inf and not at_least(oldest_ts, sinces.values[k], sinces.floats[k]),
            bisect.bisect_right(sinces.floats, oldest_ts),
        )
        return self._since_masks[count - 1] if count else 0

    def covered_slots(self, stream_mask: int) -> int:
        """Slots all of whose streams are in ``stream_mask``."""
        mask = self._covered.get(stream_mask)
        if mask is None:
            masks = self.slot_stream_mask
            mask = self._mask(((masks & ~np.int64(stream_mask)) == 0) & (masks != 0))  # 0: a removed query
            self._covered[stream_mask] = mask
        return mask

    # ---------------------------------------------------------------- slots

    def _make_slot(self, q: int) -> Slot:
        rq = self.records[int(self.slot_record[q])]
        code = self.context_code[id(rq.context)]
        residuals = self.slot_residuals.get(q, ())
        return Slot(
            index=q,
            query=rq,
            disjunct=int(self.slot_disjunct[q]),
            streams=code.streams,
            stream_mask=code.stream_mask,
            window=float(self.slot_window[q]),
            window_value=self.windows.values[int(self.slot_window_level[q])],
            since_ts=self.sinces.values[int(self.slot_since_level[q])],
            residuals=tuple(self.residual_code[id(r)] for r in residuals),
            residual_texts=tuple(r.text for r in residuals),
            aliases=code.aliases,
            outputs=code.outputs,
            multi_disjunct=len(rq.disjuncts) > 1,
        )

    @cached_property
    def _positions(self) -> list[list[tuple[Kind, int, int]]]:
        out: list[list[tuple[Kind, int, int]]] = [[] for _ in range(self.n_slots)]
        for kind in TYPES:
            for lst in self.lists[kind]:
                for p in range(lst.n):
                    for u in lst.users_of(p).tolist():
                        out[u].append((kind, lst.index, p))
        return out

    def slot_positions(self, q: int) -> list[tuple[Kind, int, int]]:
        """(type, list, position) of every predicate of slot ``q``."""
        return self._positions[q]

    def slot_qed(self, q: int) -> dict[Kind, int]:
        """The slot's QED: per type, the bits of its predicates."""
        qed = {k: 0 for k in TYPES}
        for kind, li, p in self._positions[q]:
            qed[kind] |= 1 << (self.lists[kind][li].base + p)
        return qed

    def per_stream(self, stream: int, make: Callable[[CompiledPlan, int], Any]) -> Any:
        """``make(self, stream)``, made once per plan, stream and ``make`` (what the
        batch path derives from the plan, :func:`mqo.prepare.prepare_batch`: one pushed
        tuple is a batch too)."""
        key = (make, stream)
        made = self._per_stream.get(key)
        if made is None:
            made = self._per_stream[key] = make(self, stream)
        return made

    def kill_bitsets(self, stream: int, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> KillBitsets:
        """The batch kernels' tables for one stream's attribute lists (an updated plan
        extends its base plan's tables with its own lists')."""
        tables = self._kill_bitsets.get(stream)
        if tables is None:
            words = words_for(self.n_slots)
            base = bitset_of(np.flatnonzero((self.slot_stream_mask >> stream) & 1 == 1), words)
            lists = [lst.as_users() for lst in self.attr_lists[stream]]
            if self.base_plan is None:
                tables = KillBitsets(lists, self.n_slots, base, budget_bytes)
            else:
                shared = self.base_plan.kill_bitsets(stream, budget_bytes)
                added = lists[len(self.base_plan.attr_lists[stream]) :]
                tables = shared.extended(added, self.n_slots, base, budget_bytes)
            self._kill_bitsets[stream] = tables
        return tables


def compile_plan(registry: QueryRegistry, version: int) -> CompiledPlan:
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

    records = list(registry)
    n_records = len(records)
    compiled = [rq.compiled for rq in records]
    n_disjuncts = np.fromiter((len(c.disjuncts) for c in compiled), np.int64, n_records)
    slot_base = np.zeros(n_records + 1, np.int64)
    np.cumsum(n_disjuncts, out=slot_base[1:])
    n_slots = int(slot_base[-1])
    slot_record = np.repeat(np.arange(n_records, dtype=np.int32), n_disjuncts)
    slot_disjunct = (np.arange(n_slots, dtype=np.int64) - slot_base[slot_record]).astype(np.int16)

    # per distinct context first (queries share a few), then spread to records in bulk
    number_of_context: dict[int, int] = {}
    distinct: list[Context] = []
    numbers: list[int] = []
    for c in compiled:
        k = number_of_context.get(id(c.context))
        if k is None:
            k = number_of_context[id(c.context)] = len(distinct)
            distinct.append(c.context)
        numbers.append(k)
    record_context = np.array(numbers, np.int64)
    context_code = {id(ctx): _context_code(ctx, stream_number, schema_of) for ctx in distinct}
    context_mask = np.array([code.stream_mask for code in context_code.values()], np.int64)
    context_multi = np.array([ctx.multi_stream for ctx in distinct], bool)
    record_mask = context_mask[record_context] if n_records else np.zeros(0, np.int64)
    multi = context_multi[record_context] if n_records else np.zeros(0, bool)
    windows = Levels.of([c.maxwindow or 0.0 if m else 0.0 for c, m in zip(compiled, multi.tolist(), strict=True)])
    record_window = np.array(windows.floats, np.float64)[windows.level_of] if n_records else np.zeros(0)

    # queries with residuals or several disjuncts are the special ones
    residual_code: dict[int, TestFn] = {}
    record_special = np.zeros(n_records, bool)
    slot_residuals: dict[int, tuple[Residual, ...]] = {}
    for i in [i for i, c in enumerate(compiled) if len(c.disjuncts) != 1 or c.disjuncts[0][1]]:
        disjuncts = compiled[i].disjuncts
        record_special[i] = len(disjuncts) > 1
        for d, (_, residuals) in enumerate(disjuncts):
            if residuals:
                record_special[i] = True
                slot_residuals[int(slot_base[i]) + d] = residuals
                for r in residuals:
                    if id(r) not in residual_code:
                        residual_code[id(r)] = compile_test(r.comparison, stream_number, schema_of)
    slot_window = record_window[slot_record] if n_slots else np.zeros(0)
    slot_window_level = windows.level_of[slot_record] if n_slots else np.zeros(0, np.int32)
    sinces = Levels.of([rq.since_ts for rq in records])
    slot_since_level = sinces.level_of[slot_record] if n_slots else np.zeros(0, np.int32)
    slot_stream_mask = record_mask[slot_record] if n_slots else np.zeros(0, np.int64)
    slot_special = record_special[slot_record] if n_slots else np.zeros(0, bool)

    rows = registry.rows()
    live = rows["live"]
    row_numbers = np.flatnonzero(live)
    orders = np.fromiter((rq.order for rq in records), np.int64, n_records)
    row_record = np.searchsorted(orders, rows["order"][live])
    row_slot = slot_base[row_record] + rows["disjunct"][live].astype(np.int64)
    row_key = rows["key"][live]
    row_value = rows["value"][live]
    # rows grouped by list (a stable radix sort when list ids fit 16 bits), then each
    # list's rows by constant: the order of a lexsort on (key, value), in less time
    narrow = row_key.astype(np.int16) if registry.key_ids < 2**15 else row_key
    by_key = np.argsort(narrow, kind="stable")
    bounds = np.searchsorted(row_key[by_key], np.arange(registry.key_ids + 1, dtype=row_key.dtype))

    exact_row_numbers = np.fromiter((r for r, v in rows["objects"].items() if isinstance(v, Fraction)), np.int64)
    lists: dict[Kind, list[CompiledList]] = {k: [] for k in TYPES}
    bits = {k: 0 for k in TYPES}
    for key in registry.lists():
        kid = registry.key_id(key)
        chosen = by_key[bounds[kid] : bounds[kid + 1]]
        chosen = chosen[np.argsort(row_value[chosen], kind="stable")]
        slots = row_slot[chosen]
        objects = rows["objects"]
        doubles = False
        if key.family == "number" and not (key.right is not None and key.factor is None):
            exact_rows = np.isin(row_numbers[chosen], exact_row_numbers) if len(exact_row_numbers) else None
            doubles = exact_rows is None or not exact_rows.any()
            if doubles:
                constants, offsets, users = _distinct_numeric(row_value[chosen], slots)
            else:
                # a few constants are not doubles (1/3): those lists sort exactly
                values = [
                    objects[int(row_numbers[c])] if is_exact else float(row_value[c])
                    for c, is_exact in zip(chosen.tolist(), exact_rows.tolist(), strict=True)
                ]
                constants, offsets, users = _distinct_objects(values, slots, key=exact)
        else:
            values = [objects[int(row_numbers[c])] for c in chosen]
            constants, offsets, users = _distinct_objects(values, slots)
        right_stream = right_pos = None
        if key.right is not None:
            right_stream = stream_number(key.right.stream)
            right_pos = column_position(schema_of(key.right.stream), key.right.column)
        lst = CompiledList(
            kind=key.kind,
            index=len(lists[key.kind]),
            key=key,
            base=bits[key.kind],
            constants=constants,
            offsets=offsets,
            users=users,
            slot_bits=n_slots,
            left_stream=stream_number(key.left.stream),
            left_pos=column_position(schema_of(key.left.stream), key.left.column),
            right_stream=right_stream,
            right_pos=right_pos,
            factor=to_float(key.factor) if key.factor is not None else None,
            numeric=key.family == "number",
            integer=_holds_integers(schema_of(key.left.stream), key.left.column),
            doubles=doubles,
        )
        lists[key.kind].append(lst)
        bits[key.kind] += lst.n

    attr_lists, pair_lists, indexed, attr_list_mask = arrange_lists(lists, n_streams)

    return CompiledPlan(
        version=version,
        catalog=catalog,
        streams=streams,
        records=records,
        context_code=context_code,
        residual_code=residual_code,
        slot_residuals=slot_residuals,
        slot_record=slot_record,
        slot_disjunct=slot_disjunct,
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
    )


def arrange_lists(lists: dict[Kind, list[CompiledList]], n_streams: int) -> tuple[Any, Any, Any, Any]:
    """Attribute lists per stream, join and window lists per pair of streams, the
    indexed columns per stream and each stream's attribute lists as a mask."""
    attr_lists: list[list[CompiledList]] = [[] for _ in range(n_streams)]
    attr_list_mask = [0] * n_streams
    pair_lists: dict[Kind, list[list[list[CompiledList]]]] = {
        k: [[[] for _ in range(n_streams)] for _ in range(n_streams)] for k in (Kind.JOIN, Kind.WINDOW)
    }
    indexed: list[set[int]] = [set() for _ in range(n_streams)]
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


def _context_code(context: Context, stream_number: Any, schema_of: Any) -> ContextCode:
    bound = context.bound
    aliases = {stream_number(role): alias for alias, role in bound.role_aliases}
    ids = tuple(sorted(aliases))
    mask = 0
    for s in ids:
        mask |= 1 << s
    outputs = tuple((out.name, compile_value(out.expr, stream_number, schema_of)) for out in bound.outputs)
    return ContextCode(aliases, ids, mask, outputs)


def _distinct_numeric(values: np.ndarray, slots: np.ndarray) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """Distinct constants (ascending; ``values`` is sorted) and, as CSR arrays, the
    slots using each."""
    if not len(values):
        return [], np.zeros(1, np.int64), np.zeros(0, np.int32)
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    offsets = np.append(starts, len(values)).astype(np.int64)
    return values[starts].tolist(), offsets, slots.astype(np.int32)


def _holds_integers(schema: StreamSchema, column: str) -> bool:
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
