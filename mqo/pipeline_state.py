"""A :class:`mqo.pipeline.Pipeline`'s state as snapshot data, and back; what a change
of plan does to the window state, and the invariants ``check=True`` asserts on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from indexes.stored import StoredTuple
from mqo.reorder import AdaptivePolicy
from mqo.results import LateTuple
from mqo.state import WindowState
from predicates import Kind

if TYPE_CHECKING:
    from mqo.pipeline import Pipeline
    from mqo.plan import CompiledPlan


def pipeline_snapshot(pipeline: Pipeline) -> dict[str, Any]:
    """``pipeline``'s matching state as plain data (see :meth:`mqo.Matcher.snapshot`)."""
    assert pipeline.state is not None
    plan = pipeline.plan
    return {
        "clock": pipeline.clock.snapshot(),
        "seq": pipeline.seq,
        "next_ids": [builder.next_id for builder in pipeline.row_builders],
        "counters": pipeline.counters.as_dict(),
        "state": pipeline.state.snapshot(),
        "streams": [schema.name for schema in plan.streams] if plan is not None else None,
        "late": [late_data(late) for late in pipeline.late_tuples],
        "order": _order_snapshot(pipeline),
        "arrived": pipeline.arrived,
        "replayed": pipeline.replayed,
        "held": None if pipeline.held is None else pipeline.held.snapshot(plan),
        "retention_cap": None if pipeline.retention_cap is None else list(pipeline.retention_cap),
    }


def load_pipeline(pipeline: Pipeline, data: Mapping[str, Any], plan: CompiledPlan) -> None:
    """``pipeline`` continues from :func:`pipeline_snapshot` data, on ``plan`` (the same queries)."""
    state, renumbered = renumbered_state(data["state"], data.get("streams"), plan)
    pipeline.state = WindowState.restore(state, plan.indexed_positions)
    pipeline.plan = None  # the restored state's roles are as they were: none to fill
    pipeline.row_builders = []
    pipeline.attach(plan)
    pipeline.clock.load(data["clock"])
    pipeline.seq = data["seq"]
    for builder, next_id in zip(pipeline.row_builders, data["next_ids"], strict=True):
        builder.restart_ids(next_id)
    pipeline.counters.load(data["counters"])
    pipeline.late_tuples.extend(LateTuple(**late) for late in data.get("late", ()))
    pipeline.arrived = data.get("arrived", pipeline.counters.tuples)
    pipeline.replayed = int(data.get("replayed", 0))  # (a snapshot made before it was kept: 0)
    cap = data.get("retention_cap")
    pipeline.retention_cap = None if cap is None else (float(cap[0]), int(cap[1]))
    if pipeline.held is not None:
        pipeline.held.load(data.get("held") or (), plan)
    elif data.get("held"):
        raise ValueError("the snapshot holds results of emit='ordered'; restore it with emit='ordered'")
    order = None if renumbered else data.get("order")  # per-stream statistics: of other streams
    engine = pipeline.engine
    if order is not None and pipeline.policy is not None and engine is not None:
        # the adaptive order's statistics and the engine's list order: with them
        # the restored matcher evaluates, and orders results, as this one would
        pipeline.policy = AdaptivePolicy.from_state(order["policy"])
        engine.list_observer = pipeline.policy.observe_list
        # (a plan compiled again after an unregister numbers its lists otherwise: a
        # stream's saved order is taken only where it is an order of the stream's lists)
        by_index = plan.lists[Kind.ATTRIBUTE]
        for s, saved in enumerate(order["attribute_lists"][: len(plan.attr_lists)]):
            if sorted(saved) == sorted(lst.index for lst in plan.attr_lists[s]):
                engine.attr_lists[s] = [by_index[i] for i in saved]


def _order_snapshot(pipeline: Pipeline) -> dict[str, Any] | None:
    if pipeline.policy is None or pipeline.engine is None:
        return None
    lists = [[lst.index for lst in per_stream] for per_stream in pipeline.engine.attr_lists]
    return {"policy": pipeline.policy.state(), "attribute_lists": lists}


def renumbered_state(state: Mapping[str, Any], names: list[str] | None, plan: CompiledPlan) -> tuple[Any, bool]:
    """Snapshot state data with its streams numbered as ``plan`` numbers them. A plan
    compiled from the same queries in another order (or from a query set changed since,
    as the Spark control stream does) may number the roles of self-joins otherwise; a
    role the snapshot lacks starts with its stream's tuples (see ``Pipeline._fill_roles``)."""
    wanted = [schema.name for schema in plan.streams]
    if names is None or names == wanted:
        return state, False
    stored_of = dict(zip(names, state["streams"], strict=False))  # stream name -> its stored tuples
    live = {r for roles in plan.live_roles for r in roles}
    streams = [
        stored_of.get(name, stored_of.get(plan.streams[plan.base_of[s]].name, []) if s in live else [])
        for s, name in enumerate(wanted)
    ]
    return {**state, "streams": streams}, True


def late_data(late: LateTuple) -> dict[str, Any]:
    """A late tuple as snapshot data."""
    return {
        "stream": late.stream,
        "ts": late.ts,
        "id": late.id,
        "values": dict(late.values),
        "watermark": late.watermark,
        "allowed_lateness": late.allowed_lateness,
    }


def fill_roles(state: WindowState, old: CompiledPlan, new: CompiledPlan) -> None:
    """On a change of plan: a role that a query reads now and none did before starts
    with its stream's stored tuples (a query registered while tuples flow sees those, in
    every role); a role no query reads any more lets its tuples go."""
    was = {r for roles in old.live_roles for r in roles} if old.n_real == new.n_real else set()
    for s, roles in enumerate(new.roles_of):
        for r in roles:
            live = r in new.live_roles[s]
            if live == (r in was):
                continue
            state.clear(r)
            if live:  # (one run, in ts order: each index takes it as it needs it)
                state.insert_run(r, [StoredTuple(r, t.seq, t.row) for t in state.streams[s].buckets])


def check_plan(pipeline: Pipeline, plan: CompiledPlan) -> None:
    """``check=True``: the invariants of a plan the pipeline attaches, and of its state."""
    for kind in plan.lists:
        for lst in plan.lists[kind]:
            lst.covering._check()
            lst.kill._check()
    for s in range(len(plan.streams)):
        plan.kill_bitsets(s)._check()
    assert pipeline.state is not None
    pipeline.state._check()
    if pipeline.held is not None:
        pipeline.held._check(None, plan.n_slots)
