"""The compiled plan: the registry laid out as bits and lists the matcher runs on.

Compiling numbers everything the matcher touches per tuple:

* **slots**: one per disjunct of each registered query (a query without OR is one
  slot). Candidate sets are bit masks over slots.
* **bit positions**: each predicate type (attribute, join, window) has its own bit
  space; each list owns a contiguous block of it, in covering order, so the thesis'
  BitPosition ``list:pred`` is bit ``base(list) + pred``. A slot's **QED** is, per
  type, the mask of the bits of its predicates.
* **lists** (:class:`CompiledList`): the covering-order constants, the users of each
  position and their :class:`~indexes.kill_table.KillTable`, and where to read the
  operands in a stored row.
* **connectivity**: per type and pair of streams, the slots that have a predicate of
  that type between the two streams; this decides which partial results may grow
  through which exploitation structure.

A plan is immutable; registering or unregistering a query compiles a new one (bulk
registration compiles once). Compiling is O(total predicates + lists * slots / 64).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from indexes.covering import NOTHING, CoveringList, Satisfied, compare
from indexes.kill_table import KillTable
from mqo.expressions import TestFn, ValueFn, column_position, compile_test, compile_value
from mqo.registry import QueryRegistry, RegisteredQuery
from predicates import Catalog, Kind, ListKey, StreamSchema
from predicates.normalize import to_float

TYPES = (Kind.ATTRIBUTE, Kind.JOIN, Kind.WINDOW)
LETTER = {Kind.ATTRIBUTE: "A", Kind.JOIN: "J", Kind.WINDOW: "W"}
KIND_OF_LETTER = {v: k for k, v in LETTER.items()}


@dataclass(eq=False)
class CompiledList:
    """One predicate list, ready to evaluate: ``left OP factor*right + c``."""

    kind: Kind
    index: int
    key: ListKey
    base: int
    covering: CoveringList
    kill: KillTable
    left_stream: int
    left_pos: int
    right_stream: int | None
    right_pos: int | None
    factor: float | None
    numeric: bool

    @property
    def n(self) -> int:
        return self.covering.n

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
        if right is None or right != right:
            return NOTHING
        return self.covering.satisfied(left, self.factor * right)  # type: ignore[operator]


@dataclass(eq=False)
class Slot:
    """One disjunct of one query: the unit candidate sets are made of."""

    index: int
    query: RegisteredQuery
    disjunct: int
    streams: tuple[int, ...]
    stream_mask: int
    window: float
    since_ts: float
    qed: dict[Kind, int]
    positions: list[tuple[Kind, int, int]]
    residuals: tuple[TestFn, ...]
    residual_texts: tuple[str, ...]
    aliases: dict[int, str]
    outputs: tuple[tuple[str, ValueFn], ...]
    multi_disjunct: bool = False

    @property
    def name(self) -> str:
        return self.query.name


@dataclass(eq=False)
class CompiledPlan:
    version: int
    catalog: Catalog
    streams: tuple[StreamSchema, ...]
    slots: list[Slot]
    lists: dict[Kind, list[CompiledList]]
    bits: dict[Kind, int]
    attr_lists: list[list[CompiledList]]
    pair_lists: dict[Kind, list[list[list[CompiledList]]]]
    connected: dict[Kind, list[list[int]]]
    stream_slots: list[int]
    attr_block: list[int]
    max_window: float
    retention_window: float
    indexed_positions: list[set[int]]
    attr_list_mask: list[int]
    window_levels: list[tuple[float, int]]
    _stream_number: dict[str, int] = field(repr=False)
    _covered: dict[int, int] = field(default_factory=dict, repr=False)

    def stream_number(self, name: str) -> int:
        return self._stream_number[name.lower()]

    def covered_slots(self, stream_mask: int) -> int:
        """Slots all of whose streams are in ``stream_mask``."""
        mask = self._covered.get(stream_mask)
        if mask is None:
            mask = 0
            for slot in self.slots:
                if not slot.stream_mask & ~stream_mask:
                    mask |= 1 << slot.index
            self._covered[stream_mask] = mask
        return mask

    def window_of(self, slots: int) -> float:
        """The largest MAXWINDOW among ``slots``."""
        for window, mask in self.window_levels:
            if slots & mask:
                return window
        return 0.0

    def slot_mask(self, slots: Sequence[int]) -> int:
        mask = 0
        for s in slots:
            mask |= 1 << s
        return mask


def compile_plan(registry: QueryRegistry, version: int, budget_bits: int | None = None) -> CompiledPlan:
    catalog = registry.catalog
    streams = tuple(catalog)
    number = {s.name.lower(): i for i, s in enumerate(streams)}
    n_streams = len(streams)

    def stream_number(name: str) -> int:
        return number[name.lower()]

    def schema_of(name: str) -> StreamSchema:
        return streams[number[name.lower()]]

    # Slots, and which slots use each (list, constant).
    slots: list[Slot] = []
    users: dict[ListKey, dict[Any, int]] = {key: {} for key in registry.lists()}
    slot_preds: list[list[tuple[ListKey, Any]]] = []
    for rq in registry:
        nq = rq.normalized
        alias_of = {stream_number(stream): alias for alias, stream in nq.aliases}
        stream_ids = tuple(sorted(alias_of))
        mask = 0
        for s in stream_ids:
            mask |= 1 << s
        outputs = tuple((out.name, compile_value(out.expr, stream_number, schema_of)) for out in nq.outputs)
        for d, conj in enumerate(nq.disjuncts):
            index = len(slots)
            for pred in conj.predicates:
                per = users[pred.key]
                per[pred.constant] = per.get(pred.constant, 0) | (1 << index)
            slot_preds.append([(p.key, p.constant) for p in conj.predicates])
            slots.append(
                Slot(
                    index=index,
                    query=rq,
                    disjunct=d,
                    streams=stream_ids,
                    stream_mask=mask,
                    window=nq.maxwindow if len(stream_ids) > 1 else 0.0,
                    since_ts=rq.since_ts,
                    qed={k: 0 for k in TYPES},
                    positions=[],
                    residuals=tuple(compile_test(r.comparison, stream_number, schema_of) for r in conj.residuals),
                    residual_texts=tuple(r.text for r in conj.residuals),
                    aliases=alias_of,
                    outputs=outputs,
                    multi_disjunct=len(nq.disjuncts) > 1,
                )
            )
    slot_bits = len(slots)
    kill_kwargs = {} if budget_bits is None else {"budget_bits": budget_bits}

    lists: dict[Kind, list[CompiledList]] = {k: [] for k in TYPES}
    bits = {k: 0 for k in TYPES}
    position_of: dict[tuple[ListKey, Any], tuple[CompiledList, int]] = {}
    for key in registry.lists():
        constants = registry.constants(key)
        kind = key.kind
        left_schema = schema_of(key.left.stream)
        right_stream = right_pos = None
        if key.right is not None:
            right_stream = stream_number(key.right.stream)
            right_pos = column_position(schema_of(key.right.stream), key.right.column)
        numeric = key.family == "number"
        values = [to_float(c) if numeric and c is not None else c for c in constants]
        if not numeric and key.right is not None:
            values = [0]  # one predicate, no constant: x OP y
        lst = CompiledList(
            kind=kind,
            index=len(lists[kind]),
            key=key,
            base=bits[kind],
            covering=CoveringList(key.op, values),
            kill=KillTable([users[key][c] for c in constants], slot_bits, **kill_kwargs),
            left_stream=stream_number(key.left.stream),
            left_pos=column_position(left_schema, key.left.column),
            right_stream=right_stream,
            right_pos=right_pos,
            factor=to_float(key.factor) if key.factor is not None else None,
            numeric=numeric,
        )
        lists[kind].append(lst)
        bits[kind] += lst.n
        for i, c in enumerate(constants):
            position_of[(key, c)] = (lst, i)

    for slot, preds in zip(slots, slot_preds, strict=True):
        for key, constant in preds:
            lst, i = position_of[(key, constant)]
            slot.qed[lst.kind] |= 1 << (lst.base + i)
            slot.positions.append((lst.kind, lst.index, i))

    attr_lists: list[list[CompiledList]] = [[] for _ in range(n_streams)]
    attr_block = [0] * n_streams
    attr_list_mask = [0] * n_streams
    pair_lists: dict[Kind, list[list[list[CompiledList]]]] = {
        k: [[[] for _ in range(n_streams)] for _ in range(n_streams)] for k in (Kind.JOIN, Kind.WINDOW)
    }
    connected: dict[Kind, list[list[int]]] = {
        k: [[0] * n_streams for _ in range(n_streams)] for k in (Kind.JOIN, Kind.WINDOW)
    }
    indexed: list[set[int]] = [set() for _ in range(n_streams)]
    for lst in lists[Kind.ATTRIBUTE]:
        attr_lists[lst.left_stream].append(lst)
        attr_block[lst.left_stream] |= lst.block
        attr_list_mask[lst.left_stream] |= 1 << lst.index
    for kind in (Kind.JOIN, Kind.WINDOW):
        for lst in lists[kind]:
            a, b = lst.left_stream, lst.right_stream
            assert b is not None and lst.right_pos is not None
            pair_lists[kind][a][b].append(lst)
            pair_lists[kind][b][a].append(lst)
            connected[kind][a][b] |= lst.kill.any_user
            connected[kind][b][a] |= lst.kill.any_user
            if lst.left_pos != 0:
                indexed[a].add(lst.left_pos)
            if lst.right_pos != 0:
                indexed[b].add(lst.right_pos)

    stream_slots = [0] * n_streams
    by_window: dict[float, int] = {}
    for slot in slots:
        for s in slot.streams:
            stream_slots[s] |= 1 << slot.index
        by_window[slot.window] = by_window.get(slot.window, 0) | (1 << slot.index)

    return CompiledPlan(
        version=version,
        catalog=catalog,
        streams=streams,
        slots=slots,
        lists=lists,
        bits=bits,
        attr_lists=attr_lists,
        pair_lists=pair_lists,
        connected=connected,
        stream_slots=stream_slots,
        attr_block=attr_block,
        max_window=max((s.window for s in slots), default=0.0),
        retention_window=registry.max_window(),
        indexed_positions=indexed,
        attr_list_mask=attr_list_mask,
        window_levels=sorted(by_window.items(), reverse=True),
        _stream_number=number,
    )
