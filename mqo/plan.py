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

:func:`mqo.plan_compile.compile_plan` builds it from the registry.
"""

from __future__ import annotations

import bisect
import math
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any, NamedTuple, TypeVar

import numpy as np

from indexes.covering import NOTHING, CoveringList, Satisfied, compare, first_true
from indexes.exact import at_least, span_sign
from indexes.kill_bitsets import DEFAULT_BUDGET_BYTES, KillBitsets, ListUsers, stream_bitset, words_for
from indexes.kill_table import KillTable, mask_of, mask_of_flags
from mqo.expressions import TestFn, ValueFn
from mqo.memory import release_freed_memory
from mqo.registry import RegisteredQuery
from predicates import INDEXED_KINDS, Catalog, Kind, ListKey, Residual, StreamSchema
from predicates.normalize import to_float
from predicates.numbers import exact

TYPES = INDEXED_KINDS
Derived = TypeVar("Derived")  # what a per-stream maker derives from a plan (CompiledPlan.per_stream)


class Repeated(NamedTuple):
    """One value for ``count`` records in a row (:meth:`Levels.of_runs`)."""

    value: Any
    count: int


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
        return cls.of_runs([per_record])

    @classmethod
    def of_runs(cls, runs: list[list[Any] | Repeated]) -> Levels:
        """The levels of the records' values given run by run: a list of each record's,
        or one value for a run of records (a block's rows: no list of a million equal
        values made, nor a set of them)."""
        seen: set[Any] = set()  # (in record order: of equal values, the first is kept)
        for run in runs:
            if isinstance(run, Repeated):
                if run.count:
                    seen.add(run.value)
            else:
                seen.update(run)
        distinct = sorted(seen)  # (a float and a Fraction compare exactly)
        n = sum(run.count if isinstance(run, Repeated) else len(run) for run in runs)
        if len(distinct) == 1:  # (the usual case: one MAXWINDOW, one horizon)
            return cls(distinct, [to_float(distinct[0])], np.zeros(n, np.int32))
        number = {v: i for i, v in enumerate(distinct)}
        parts = [
            np.full(run.count, number[run.value], np.int32)
            if isinstance(run, Repeated)
            else np.fromiter((number[v] for v in run), np.int32, len(run))
            for run in runs
            if not isinstance(run, Repeated) or run.count
        ]
        level_of = np.concatenate(parts) if parts else np.zeros(0, np.int32)
        return cls(distinct, [to_float(v) for v in distinct], level_of)

    def __len__(self) -> int:
        return len(self.values)

    def exact(self, k: int) -> Fraction:
        return exact(self.values[k])


@dataclass(eq=False)
class CompiledList:
    """One predicate list, ready to evaluate: ``left OP factor*right + c``.

    ``constants`` are in exact ascending order: floats that mean what they print as,
    or Fractions (:func:`predicates.numbers.faithful`), or strings and booleans.
    ``integer``: the left column holds integers.

    The users of position ``p`` are ``users[offsets[p]:offsets[p + 1]]``: ``users`` is
    the plan's one array of every list's users and ``offsets`` a view of the plan's one
    array of positions, from position ``csr_base`` on (``plan_compile.SharedCsr``), so
    the kernel tables read the plan's arrays instead of keeping a copy."""

    kind: Kind
    index: int
    key: ListKey
    base: int
    constants: Sequence[Any]  # a float64 view of the plan's constants when ``doubles``
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
    csr_base: int = 0

    @property
    def n(self) -> int:
        return len(self.constants)

    @property
    def values(self) -> Sequence[Any]:
        """The constants as Python values (a view of doubles read as floats)."""
        return self.constants.data if isinstance(self.constants, np.ndarray) else self.constants

    @property
    def own_users(self) -> np.ndarray:
        """The users of every position, in covering order (a view)."""
        return self.users[self.offsets[0] : self.offsets[-1]]

    @cached_property
    def covering(self) -> CoveringList:
        if self.right_pos is None:
            return CoveringList(self.key.op, self.constants, integer=self.integer, doubles=self.doubles)
        if not self.numeric:
            return CoveringList(self.key.op, [0])  # strings, booleans: compared as they are
        return CoveringList(self.key.op, self.constants, factor=self.key.factor, doubles=self.doubles)

    @cached_property
    def kill(self) -> KillTable:
        return KillTable.from_csr(self.offsets - self.offsets[0], self.own_users, self.slot_bits)

    def as_users(self) -> ListUsers:
        return ListUsers(self.key.op, self.offsets, self.users, self.csr_base)

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
    """``plan.slots[q]``: Slot objects made on first use. It refers to its plan weakly:
    a plan replaced by the next is then freed at once, with its kernel tables, not
    when a garbage collection finds the cycle."""

    def __init__(self, plan: CompiledPlan) -> None:
        self._plan = weakref.ref(plan)
        self._made: dict[int, Slot] = {}

    def __len__(self) -> int:
        return self._live().n_slots

    def __getitem__(self, q: int) -> Slot:  # type: ignore[override]
        slot = self._made.get(q)
        if slot is None:
            slot = self._made[q] = self._live()._make_slot(q)
        return slot

    def _live(self) -> CompiledPlan:
        plan = self._plan()
        assert plan is not None, "the slots of a plan that was freed"
        return plan

    def __iter__(self) -> Iterator[Slot]:
        return (self[q] for q in range(len(self)))


@dataclass(eq=False)
class CompiledPlan:
    version: int
    catalog: Catalog
    streams: tuple[StreamSchema, ...]
    records: list[RegisteredQuery]
    # each record's query name: a result's name is one list read, where the registry's
    # objects cost several cache misses at a million queries
    record_names: list[str]
    context_code: dict[int, ContextCode]
    residual_code: dict[int, TestFn]
    slot_residuals: dict[int, tuple[Residual, ...]]
    slot_record: np.ndarray
    slot_disjunct: np.ndarray
    # each slot's context, numbered as in context_codes: made in the compile's own pass
    # over the records (looked up on a first result, it cost 9 ms at 20,000 queries)
    slot_context: np.ndarray
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
    # whose lists and kernel tables it shares
    base_plan: CompiledPlan | None = field(default=None, repr=False)
    # self-joins (see predicates.catalog.role_name): the declared stream each engine
    # stream reads, and each declared stream's roles after its first, in role order
    base_of: list[int] = field(default_factory=list)
    roles_of: list[tuple[int, ...]] = field(default_factory=list)
    _covered: dict[int, int] = field(default_factory=dict, repr=False)
    _kill_bitsets: dict[int, KillBitsets] = field(default_factory=dict, repr=False)
    # a base plan's changes since, kept in place from one update to the next
    # (:class:`mqo.live_delta.LiveDelta`)
    _delta_part: Any = field(default=None, repr=False)
    # what build_tables makes per stream before the stream's kernel tables (the batch
    # path's slot masks, given by the compiler: this module does not import it)
    stream_makers: tuple[Callable[[CompiledPlan, int], Any], ...] = field(default=(), repr=False)
    # what per_stream and derived made from this plan, by (maker, stream or -1)
    _derived: dict[tuple[Any, int], Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.slots = _Slots(self)

    @cached_property
    def context_codes(self) -> list[ContextCode]:
        """Every context's code, numbered as in :attr:`slot_context`."""
        return list(self.context_code.values())

    def query_names(self, q: int) -> str:
        return self.record_names[int(self.slot_record[q])]

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
        if not any(self.roles_of):
            return [() for _ in self.roles_of]  # (no self-join: no stream's slots made)
        slots = self.stream_slots
        return [tuple(r for r in roles if slots[r]) for roles in self.roles_of]

    # ------------------------------------------------------------- slot masks

    @cached_property
    def stream_slots(self) -> list[int]:
        """Per stream, the slots that read it."""
        return [mask_of_flags((self.slot_stream_mask >> s) & 1 == 1) for s in range(len(self.streams))]

    @cached_property
    def special_slots(self) -> int:
        """Slots whose results need a check of their own (residuals, several disjuncts)."""
        return mask_of_flags(self.slot_special)

    @cached_property
    def multi_stream_slots(self) -> int:
        """Slots over two or more streams (their tuples must be stored)."""
        return mask_of_flags((self.slot_stream_mask & (self.slot_stream_mask - 1)) != 0)

    @cached_property
    def connected(self) -> dict[Kind, list[list[int]]]:
        """Per type and pair of streams, the slots with a predicate of that type
        between the two."""
        n = len(self.streams)
        base = self.base_plan
        if base is not None:  # an updated plan: its base's, and the lists added since (after the base's)
            out = {k: [list(row) for row in rows] for k, rows in base.connected.items()}
        else:
            out = {k: [[0] * n for _ in range(n)] for k in (Kind.JOIN, Kind.WINDOW)}
        for kind in (Kind.JOIN, Kind.WINDOW):
            for lst in self.lists[kind][len(base.lists[kind]) if base is not None else 0 :]:
                a, b = lst.left_stream, lst.right_stream
                mask = mask_of(lst.own_users)
                out[kind][a][b] |= mask  # type: ignore[index]
                out[kind][b][a] |= mask  # type: ignore[index]
        return out

    @cached_property
    def order_matters(self) -> list[bool]:
        """Per stream: whether a slot reading it has a join or window predicate. Without
        one, the join and window phases of its tuples do nothing (completion alone grows
        their partials), so every order does the same work: the adaptive policy neither
        measures nor orders them (a single-stream query with OR goes through the engine
        for its once-per-query report, not for an order)."""
        return [bool(slots & self.paired_slots) for slots in self.stream_slots]

    @cached_property
    def paired_slots(self) -> int:
        """Slots with a join or window predicate."""
        paired = 0
        for kind in (Kind.JOIN, Kind.WINDOW):
            for row in self.connected[kind]:
                for mask in row:
                    paired |= mask
        return paired

    @cached_property
    def later_partner(self) -> list[list[int]]:
        """``later_partner[s][y]``: the slots with a window predicate that holds only when
        their tuple of ``y`` is at or after their tuple of ``s`` (``y.ts >= s.ts + c``
        with ``c >= 0``, exactly). A tuple of ``s`` newer than every stored tuple of ``y``
        ends no result of theirs (it is found when its tuple of ``y`` arrives): a bid
        joined with an aggregate view's row at its window's end costs no probe."""
        n = len(self.streams)
        out = [[0] * n for _ in range(n)]
        for lst in self.lists[Kind.WINDOW]:
            a, b, op = lst.left_stream, lst.right_stream, lst.key.op
            if b is None or lst.left_pos != 0 or lst.right_pos != 0 or not lst.numeric or lst.key.factor != 1:
                continue
            # a.ts OP b.ts + c: b is at or after a when (OP is <, <= or =) and c <= 0,
            # a at or after b when (OP is >, >= or =) and c >= 0
            for p, c in enumerate(lst.values):
                if op in ("<", "<=", "=") and c <= 0:
                    out[a][b] |= mask_of(lst.users_of(p))
                if op in (">", ">=", "=") and c >= 0:
                    out[b][a] |= mask_of(lst.users_of(p))
        return out

    @cached_property
    def _window_masks(self) -> list[int]:
        """Per window level, the slots whose MAXWINDOW is at least it."""
        return [mask_of_flags(self.slot_window_level >= i) for i in range(len(self.windows))]

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
        return [mask_of_flags(self.slot_since_level <= i) for i in range(len(self.sinces))]

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
            mask = mask_of_flags(((masks & ~np.int64(stream_mask)) == 0) & (masks != 0))  # 0: a removed query
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

    def per_stream(self, stream: int, make: Callable[[CompiledPlan, int], Derived]) -> Derived:
        """``make(self, stream)``, made once per plan, stream and ``make`` (what the
        batch path derives from the plan, :func:`mqo.prepare.prepare_batch`: one pushed
        tuple is a batch too)."""
        key = (make, stream)
        made: Derived | None = self._derived.get(key)
        if made is None:
            made = self._derived[key] = make(self, stream)
        return made

    def derived(self, make: Callable[[CompiledPlan], Derived]) -> Derived:
        """``make(self)``, made once per plan and ``make``: what the result path derives
        from the whole plan (its query names as Arrow, JSON heads, value types)."""
        key = (make, -1)  # (beside per_stream's entries: no stream is numbered -1)
        made: Derived | None = self._derived.get(key)
        if made is None:
            made = self._derived[key] = make(self)
        return made

    def build_tables(self) -> None:
        """Build now what the first tuple of each stream would otherwise build: every
        list's search arrays, each stream's slot masks and kernel tables (after a bulk
        registration, so the first event costs one batch, not a table build)."""
        for kind_lists in self.lists.values():
            for lst in kind_lists:
                _ = lst.covering
        for stream, lists in enumerate(self.attr_lists):
            if lists:
                # the stream's slot masks first, their slot-sized temporaries handed
                # back before the table is made (made by the first tuple, they stood
                # on top of the table at the peak)
                for make in self.stream_makers:
                    self.per_stream(stream, make)
                release_freed_memory(self.n_slots)
                self.kill_bitsets(stream)

    def kill_bitsets(self, stream: int, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> KillBitsets:
        """The batch kernels' tables for one stream's attribute lists (an updated plan
        extends its base plan's tables with its own lists')."""
        tables = self._kill_bitsets.get(stream)
        if tables is None:
            if self.base_plan is None:
                words = words_for(self.n_slots)
                base = stream_bitset(self.slot_stream_mask, stream, words)
                lists = [lst.as_users() for lst in self.attr_lists[stream]]
                tables = KillBitsets(lists, self.n_slots, base, budget_bytes)
                release_freed_memory(self.n_slots)
            else:  # the base's tables and the rows the changes since keep in place
                tables = self.base_plan._delta_part.kill_bitsets(self, stream, budget_bytes)
            self._kill_bitsets[stream] = tables
        return tables
