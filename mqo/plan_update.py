"""Registration changes without a recompile: a plan updated from the previous one.

Compiling a plan sorts every predicate of every query and builds every list's search
arrays and kernel tables: about 0.1 s at 20,000 subscriptions. A matching service
registers and cancels subscriptions all the time, so :func:`update_plan` makes the
next plan from the previous one instead, in time proportional to what changed:

* the **base plan** (the last one compiled whole) keeps its slots, lists, search
  arrays and kernel tables, shared, untouched;
* the changes since are kept in place (:class:`~mqo.live_delta.LiveDelta`): an added
  query's slots after the base's, its predicates inserted into one list per key (a
  list key may then have two lists, the base's and the kept one: each query's
  predicates are in exactly one of them, so the QED test is unchanged), their kernel
  rows in a second part of each stream's tables; an update takes only the changes
  since the last one, and the plan is made of views of what is kept;
* a removed query keeps its slot numbers, with no streams: no tuple starts with it
  as a candidate, so it can never be reported.

When the added slots outgrow :func:`delta_limit`, or the removed queries of the base
:func:`dead_limit` (shares of the base's slots), the next plan is compiled whole
again: an update costs O(changes since the last one), a whole compile O(slots), once
per O(slots) changes.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from indexes.kill_bitsets import KillBitsets
from mqo.live_delta import LiveDelta
from mqo.plan import CompiledPlan
from mqo.plan_compile import compile_plan
from mqo.registry import QueryRegistry
from predicates import Kind

TYPES = (Kind.ATTRIBUTE, Kind.JOIN, Kind.WINDOW)
MIN_DELTA = 64
DELTA_SHARE = 16  # slots added since the base, kept in place: up to 1/16 of its slots
DEAD_SHARE = 16  # removed queries of the base kept as dead slots: up to 1/16 of its slots


def delta_limit(base_slots: int) -> int:
    """How many slots may be added before the plan is compiled whole. An added slot
    costs an update its insertions only, but a tuple walks the users its predicates
    fail in the kept lists (they have no checkpoint rows), so they wait for a share of
    the base's slots: then a whole compile, O(slots), comes once per O(slots) changes."""
    return max(MIN_DELTA, base_slots // DELTA_SHARE)


def dead_limit(base_slots: int) -> int:
    """How many of the base plan's queries may be removed before the plan is compiled
    whole. A removed query costs an update nothing but a bit cleared (it keeps its
    slot, with no streams), and matching nothing more than while it was registered,
    so removals wait for a larger share than additions do: a service that replaces
    subscriptions compiles whole half as often."""
    return max(MIN_DELTA, base_slots // DEAD_SHARE)


def update_plan(previous: CompiledPlan, registry: QueryRegistry, version: int) -> CompiledPlan | None:
    """The plan for ``registry`` made from ``previous`` (the plan before the latest
    changes), or None when the changes are too many and a whole compile is due. The
    changes since the base plan are kept in place (:class:`~mqo.live_delta.LiveDelta`):
    an update takes only those since the last one."""
    base = previous.base_plan or previous
    if len(base.streams) != base.n_real + len(registry.roles):
        return None  # a new role of a self-join (a new stream)
    live: LiveDelta | None = base._delta_part
    if live is None:
        live = LiveDelta(base)
    removed = registry.removed_since(live.removal_mark)
    added = registry.newest(live.newest_order)
    new_slots = sum(len(rq.disjuncts) for rq in added)
    if live.added_slots + new_slots > delta_limit(base.n_slots) or live.dead_base + len(removed) > dead_limit(
        base.n_slots
    ):
        return None  # (an overestimate of the removals: some may be of queries never added)
    if previous.roles_of and any(previous.roles_of):
        _ = previous.live_roles  # (read by the next attach: made before the kept arrays change)
    base._delta_part = None  # (kept again once the update is done: a failed one is compiled whole next)
    for order in removed:
        live.remove(order)
    for rq in added:
        live.add(rq)
    plan = live.plan(version, registry.removal_mark)
    base._delta_part = live
    return plan


def check_plan(plan: CompiledPlan, registry: QueryRegistry) -> None:
    """The plan against one compiled whole from ``registry`` (``check=True``; slow):
    the same queries with the same facts and predicates per (query, disjunct), and
    kernel tables that prune exactly as tables built whole over the plan's lists."""
    fresh = compile_plan(registry, -1)
    base = plan.base_plan
    if base is not None and base._delta_part is not None:
        newest = registry.newest(int(base.record_orders[-1]) if len(base.record_orders) else -1)
        base._delta_part._check([rq.order for rq in newest])
    assert plan.retention_window_exact == fresh.retention_window_exact, "retention window differs"
    if base is not None:  # the slots each pair of streams connects, made from the base's, as from every list
        assert plan.connected == dataclasses.replace(plan, base_plan=None).connected, "connected slots differ"
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
