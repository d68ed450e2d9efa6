"""Registration changes without a recompile: a plan updated from the previous one.

Compiling a plan sorts every predicate of every query and builds every list's search
arrays and kernel tables: about 0.1 s at 20,000 subscriptions. A matching service
registers and cancels subscriptions all the time, so :func:`update_plan` makes the
next plan from the previous one instead, in time proportional to what changed:

* the **base plan** (the last one compiled whole) keeps its slots, lists, search
  arrays and kernel tables, shared, untouched;
* queries registered since are compiled on their own (a small plan) and appended:
  their slots after the base's, their lists after the base's lists (a list key may
  then have two lists, one per part: each query's predicates are in exactly one of
  them, so the QED test is unchanged), their kernel tables in a second, narrow
  table over the new slots' words (:meth:`indexes.kill_bitsets.KillBitsets.extended`);
* a removed query of the base keeps its slot numbers, with no streams: no tuple
  starts with it as a candidate, so it can never be reported.

When the added queries outgrow :func:`delta_limit` (about the square root of the
base's slots), or the removed ones :func:`dead_limit` (a share of them), the next
plan is compiled whole again: an update costs a fixed part plus O(changes since), a
whole compile O(slots), so the cost of a change, amortized, stays O(sqrt(slots)).
The queries added since the base are kept in a registry of their own
(:class:`DeltaPart`) from one update to the next, so an update registers only the
changes since the last one, and compiles that part in the base's numbering.
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction
from typing import Any

import numpy as np

from indexes.kill_bitsets import KillBitsets
from mqo.plan import CompiledPlan, Levels
from mqo.plan_compile import arrange_lists, compile_plan
from mqo.registry import QueryRegistry, RegisteredQuery
from predicates import Kind
from predicates.normalize import to_float

TYPES = (Kind.ATTRIBUTE, Kind.JOIN, Kind.WINDOW)
MIN_DELTA = 64
DEAD_SHARE = 16  # removed queries of the base kept as dead slots: up to 1/16 of its slots


def delta_limit(base_slots: int) -> int:
    """How many queries may be added before the plan is compiled whole."""
    return max(MIN_DELTA, int(math.sqrt(base_slots)))


def dead_limit(base_slots: int) -> int:
    """How many of the base plan's queries may be removed before the plan is compiled
    whole. A removed query costs an update nothing but a bit cleared (it keeps its
    slot, with no streams), and matching nothing more than while it was registered,
    so removals wait for a larger share than additions do: a service that replaces
    subscriptions compiles whole half as often."""
    return max(MIN_DELTA, base_slots // DEAD_SHARE)


def update_plan(previous: CompiledPlan, registry: QueryRegistry, version: int) -> CompiledPlan | None:
    """The plan for ``registry`` made from ``previous`` (the plan before the latest
    changes), or None when the changes are too many and a whole compile is due."""
    base = previous.base_plan or previous
    newest_order = int(base.record_orders[-1]) if len(base.record_orders) else -1
    dead = set(previous.dead_records)
    for order in registry.removed_since(previous.removal_mark):
        if order <= newest_order:
            k = int(np.searchsorted(base.record_orders, order))
            if k < len(base.record_orders) and base.record_orders[k] == order:
                dead.add(k)
    added = registry.newest(newest_order)
    too_many = len(added) > delta_limit(base.n_slots) or len(dead) > dead_limit(base.n_slots)
    if too_many or len(base.streams) != base.n_real + len(registry.roles):
        return None  # too many changes, or a new role of a self-join (a new stream)
    if base._delta_part is None:
        base._delta_part = DeltaPart(registry)
    part = base._delta_part.synced(registry, added)
    delta = compile_plan(part, version, after=base)  # numbered after the base's lists and slots
    return _merged(base, delta, added, frozenset(dead), version, registry.removal_mark)


class DeltaPart:
    """The queries registered since a base plan, as a registry of their own kept from
    one update to the next: an update adds the queries registered since the last one
    and removes those unregistered since (O(changes)), instead of registering every
    query added since the base again."""

    def __init__(self, registry: QueryRegistry) -> None:
        self.registry = QueryRegistry(registry.catalog, registry.max_disjuncts)
        self.orders: list[int] = []  # the main registry's order of each query kept, in order
        self.names: list[str] = []

    def synced(self, registry: QueryRegistry, added: list[RegisteredQuery]) -> QueryRegistry:
        """The part holding exactly ``added`` (the live queries registered since the
        base, in order), by their orders in ``registry`` (a name unregistered and
        registered again is another query)."""
        wanted = [rq.order for rq in added]
        live = set(wanted)
        part = self.registry
        part.roles = list(registry.roles)  # the same stream numbers as the base
        if any(order not in live for order in self.orders):
            kept = [(o, name) for o, name in zip(self.orders, self.names, strict=True) if o in live]
            for o, name in zip(self.orders, self.names, strict=True):
                if o not in live:
                    part.remove(name)
            self.orders = [o for o, _ in kept]
            self.names = [name for _, name in kept]
        k = len(self.orders)
        if wanted[:k] != self.orders:  # (orders only grow: the kept ones come first)
            self.__init__(registry)  # type: ignore[misc]  # (never seen: made anew, to be safe)
            part, k = self.registry, 0
            part.roles = list(registry.roles)
        new = added[k:]
        if new:
            part.add([rq.compiled for rq in new], [rq.since_ts for rq in new])  # all or nothing
            self.orders += wanted[k:]
            self.names += [rq.name for rq in new]
        return part

    def _check(self, added: list[RegisteredQuery]) -> None:
        """Assert the part holds ``added``, in order, with their texts' facts."""
        kept = list(self.registry)
        assert [rq.name for rq in kept] == [rq.name for rq in added] == self.names, "the part's queries differ"
        assert len(self.orders) == len(set(self.orders)) and self.orders == sorted(self.orders), "orders disorder"
        for mine, theirs in zip(kept, added, strict=True):
            assert mine.compiled is theirs.compiled and mine.since_ts == theirs.since_ts, f"{mine.name} differs"
        self.registry._check()


def _merged(
    base: CompiledPlan, delta: CompiledPlan, added: list, dead: frozenset[int], version: int, removal_mark: int
) -> CompiledPlan:
    n_base = base.n_slots
    n_records = len(base.records)
    slot_record = np.concatenate([base.slot_record, delta.slot_record + n_records]).astype(np.int32)
    slot_disjunct = np.concatenate([base.slot_disjunct, delta.slot_disjunct])
    base_dead_slots = None
    if dead:
        dead_records = np.zeros(n_records, bool)
        dead_records[np.fromiter(dead, np.int64, len(dead))] = True
        base_dead_slots = dead_records[base.slot_record]
    base_masks = base.slot_stream_mask
    if base_dead_slots is not None:
        base_masks = np.where(base_dead_slots, 0, base_masks)
    slot_stream_mask = np.concatenate([base_masks, delta.slot_stream_mask])
    slot_special = np.concatenate([base.slot_special, delta.slot_special])

    # a removed query's MAXWINDOW no longer holds tuples back (as if compiled whole)
    windows = _combined(base.windows, delta.windows, dead)
    sinces = _combined(base.sinces, delta.sinces, frozenset())
    record_window = np.array(windows.floats, np.float64)[windows.level_of]
    top = int(windows.level_of.max()) if len(windows.level_of) else -1

    lists = {kind: base.lists[kind] + delta.lists[kind] for kind in TYPES}
    attr_lists, pair_lists, indexed, attr_list_mask = arrange_lists(lists, len(base.streams))
    # the base's contexts keep their numbers, the delta's new ones follow
    new_contexts = {key: code for key, code in delta.context_code.items() if key not in base.context_code}
    context_code = {**base.context_code, **new_contexts}
    # each slot's context number, from the base's (not one lookup per record again)
    number = {key: i for i, key in enumerate(context_code)}
    renumber = np.array([number[key] for key in delta.context_code], np.int32)
    plan = CompiledPlan(
        version=version,
        catalog=base.catalog,
        streams=base.streams,
        records=base.records + added,
        record_names=base.record_names + delta.record_names,
        context_code=context_code,
        residual_code={**base.residual_code, **delta.residual_code},
        slot_residuals={**base.slot_residuals, **{q + n_base: r for q, r in delta.slot_residuals.items()}},
        slot_record=slot_record,
        slot_disjunct=slot_disjunct,
        slot_context=np.concatenate([base.slot_context, renumber[delta.slot_context]]).astype(np.int32),
        slot_window=record_window[slot_record],
        slot_window_level=windows.level_of[slot_record],
        windows=windows,
        slot_since_level=sinces.level_of[slot_record],
        sinces=sinces,
        slot_stream_mask=slot_stream_mask,
        slot_special=slot_special,
        lists=lists,
        bits=delta.bits,
        attr_lists=attr_lists,
        pair_lists=pair_lists,
        indexed_positions=indexed,
        attr_list_mask=attr_list_mask,
        retention_window=windows.floats[top] if top >= 0 else 0.0,
        retention_window_exact=windows.exact(top) if top >= 0 else Fraction(0),
        _stream_number=base._stream_number,
        record_orders=base.record_orders,
        base_of=base.base_of,
        roles_of=base.roles_of,
        removal_mark=removal_mark,
        base_plan=base,
        dead_records=dead,
    )
    return plan


def _combined(first: Levels, second: Levels, zeroed: frozenset[int]) -> Levels:
    """The levels of ``first``'s records then ``second``'s; the records numbered in
    ``zeroed`` get the value 0."""
    appended = _appended(first, second, zeroed)
    if appended is not None:
        return appended
    extra = [0.0] if zeroed else []
    distinct = sorted(set(first.values) | set(second.values) | set(extra))  # floats and Fractions compare exactly
    number = {v: i for i, v in enumerate(distinct)}
    renumber_first = np.array([number[v] for v in first.values], np.int32)
    renumber_second = np.array([number[v] for v in second.values], np.int32)
    # registrations come in time order: new values usually sort after the first's,
    # whose numbers then stay (no pass over every record to renumber them)
    unchanged = np.array_equal(renumber_first, np.arange(len(renumber_first)))
    level_first = first.level_of if unchanged else renumber_first[first.level_of]
    level_of = np.concatenate([level_first, renumber_second[second.level_of]]).astype(np.int32)
    if zeroed:
        level_of[np.fromiter(zeroed, np.int64, len(zeroed))] = number[0.0]
    return Levels(distinct, [to_float(v) for v in distinct], level_of)


def _appended(first: Levels, second: Levels, zeroed: frozenset[int]) -> Levels | None:
    """:func:`_combined` when ``second`` only adds values above ``first``'s (the usual
    case: registration horizons grow with time): ``first``'s numbers stay, and the cost
    is O(``second``), not O(distinct values); None otherwise."""
    values = first.values
    if not values or (zeroed and values[0] != 0.0):
        return None
    top = values[-1]
    new = []
    number: dict[Any, int] = {}
    for v in set(second.values):
        if v > top:
            new.append(v)
            continue
        k = bisect.bisect_left(values, v)
        if values[k] != v:  # between two of first's values: they would be renumbered
            return None
        number[v] = k
    new.sort()
    number.update({v: len(values) + i for i, v in enumerate(new)})
    renumber = np.array([number[v] for v in second.values], np.int32)
    level_of = np.concatenate([first.level_of, renumber[second.level_of]]).astype(np.int32)
    if zeroed:
        level_of[np.fromiter(zeroed, np.int64, len(zeroed))] = 0
    return Levels(values + new, first.floats + [to_float(v) for v in new], level_of)


def check_plan(plan: CompiledPlan, registry: QueryRegistry) -> None:
    """The plan against one compiled whole from ``registry`` (``check=True``; slow):
    the same queries with the same facts and predicates per (query, disjunct), and
    kernel tables that prune exactly as tables built whole over the plan's lists."""
    fresh = compile_plan(registry, -1)
    base = plan.base_plan
    if base is not None and base._delta_part is not None:
        base._delta_part._check(registry.newest(int(base.record_orders[-1]) if len(base.record_orders) else -1))
    assert plan.retention_window_exact == fresh.retention_window_exact, "retention window differs"
    assert plan.record_names == [rq.name for rq in plan.records], "a record's name differs"
    codes = plan.context_codes
    for record, context in zip(plan.slot_record.tolist(), plan.slot_context.tolist(), strict=True):
        assert codes[context] is plan.context_code[id(plan.records[record].context)], "a slot's context differs"
    assert _slot_facts(plan) == _slot_facts(fresh), "an updated plan differs from the plan compiled whole"
    rng = np.random.default_rng(plan.version)
    for s, lists in enumerate(plan.attr_lists):
        if not lists:
            continue
        tables = plan.kill_bitsets(s)
        whole = KillBitsets([lst.as_users() for lst in lists], plan.n_slots, tables.base)
        count = 8
        lo = np.zeros((len(lists), count), np.int64)
        hi = np.array([[lst.n] * count for lst in lists], np.int64).reshape(len(lists), count)
        for i in range(count):
            for l, lst in enumerate(lists):
                if rng.random() < 0.5:
                    a = int(rng.integers(-1, lst.n + 1))
                    lo[l, i] = a
                    if lst.key.op in ("=", "!="):
                        hi[l, i] = int(rng.integers(max(a, 0), lst.n + 1))
                    elif lst.key.op in (">", ">="):
                        lo[l, i] = min(a, 0)
                        hi[l, i] = int(rng.integers(0, lst.n + 1))
        assert (tables.prune(lo, hi) == whole.prune(lo, hi)).all(), f"stream {s}: kernel tables differ"


def _slot_facts(plan: CompiledPlan) -> dict:
    """Per live (query, disjunct): streams, MAXWINDOW, registration horizon, whether
    special, and its predicates as sorted (list key, constant) pairs."""
    predicates: dict[int, list] = {}
    for kind in TYPES:
        for lst in plan.lists[kind]:
            values = lst.values
            for position in range(lst.n):
                for u in lst.users_of(position).tolist():
                    predicates.setdefault(u, []).append((repr(lst.key), repr(values[position])))
    facts = {}
    for q in range(plan.n_slots):
        mask = int(plan.slot_stream_mask[q])
        if not mask:
            continue
        rq = plan.records[int(plan.slot_record[q])]
        facts[(rq.name, int(plan.slot_disjunct[q]))] = (
            mask,
            plan.windows.values[int(plan.slot_window_level[q])],
            plan.sinces.values[int(plan.slot_since_level[q])],
            bool(plan.slot_special[q]),
            sorted(predicates.get(q, [])),
        )
    return facts
