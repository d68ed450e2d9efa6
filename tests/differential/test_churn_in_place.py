"""Registration changes between single pushes, against the exact reference.

A plan update (mqo/plan_update.py) keeps the queries registered since the last whole
compile in a registry of its own (``DeltaPart``) from one update to the next: each
update adds the queries registered since the last one and removes those unregistered
since, and removed queries of the base wait as dead slots for a share of the base's
slots (``dead_limit``) rather than the additions' limit. Hypothesis interleaves
removals, registrations of new queries, re-registrations of a removed name and pushes,
with the limits forced low so both updates and whole compiles happen mid-stream;
``check=True`` checks every plan against one compiled whole and the part's invariants
(``DeltaPart._check``) after every change, and the results are checked against the
reference (tests/references/reference.py).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
import mqo.plan_compile
import mqo.plan_update
from tests.differential.test_exact_differential import matcher, run_batches, run_push
from tests.references.exact_workloads import Push, Register, Unregister, Workload, many_queries

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning", "ignore::mqo.NeverMatchesWarning")


def interleaved(workload: Workload, seed: int, change_every: int, burst: int) -> Workload:
    """``workload``'s queries, half registered at the start and the rest registered,
    removed and registered again (under the same name) in bursts of up to ``burst``
    changes every ``change_every`` pushes."""
    rnd = random.Random(seed)
    registers = [op for op in workload.ops if isinstance(op, Register)]
    pushes = [op for op in workload.ops if not isinstance(op, Register)]
    start = len(registers) // 2
    waiting = [op.query for op in registers[start:]]
    live = {op.query.name: op.query for op in registers[:start]}
    gone: dict = {}
    ops: list = list(registers[:start])
    for k, op in enumerate(pushes):
        if isinstance(op, Push) and k % change_every == 0:
            for _ in range(rnd.randint(1, burst)):
                choice = rnd.random()
                if choice < 0.4 and live:  # a removal (of the base's queries or the ones added since)
                    name = rnd.choice(sorted(live))
                    gone[name] = live.pop(name)
                    ops.append(Unregister(name))
                elif choice < 0.7 and gone:  # a removed name registered again: another query
                    name = rnd.choice(sorted(gone))
                    live[name] = gone.pop(name)
                    ops.append(Register(live[name]))
                elif waiting:
                    query = waiting.pop()
                    live[query.name] = query
                    ops.append(Register(query))
        ops.append(op)
    return Workload(workload.schema, workload.lateness, ops)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    change_every=st.integers(1, 6),
    burst=st.integers(1, 4),
    min_delta=st.integers(2, 12),
    dead_share=st.sampled_from([1, 2, 16]),
    sort_whole=st.booleans(),
)
def test_changes_between_pushes(
    seed: int, change_every: int, burst: int, min_delta: int, dead_share: int, sort_whole: bool
) -> None:
    """Every push after any mix of changes finds what the reference finds; every plan,
    updated or whole, and the kept part checked (``check=True``); the lists' constants
    sorted all at once or list by list (``WHOLE_SORT_ROWS``: small parts, whole compiles)."""
    workload = interleaved(many_queries(seed, n_queries=30, run=60), seed, change_every, burst)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mqo.plan_update, "MIN_DELTA", min_delta)
        patch.setattr(mqo.plan_update, "DEAD_SHARE", dead_share)
        if not sort_whole:
            patch.setattr(mqo.plan_compile, "WHOLE_SORT_ROWS", 0)
        run_push(workload, matcher(check=True))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), change_every=st.integers(2, 10), min_delta=st.integers(2, 12))
def test_changes_between_batches(seed: int, change_every: int, min_delta: int) -> None:
    """The same through ``push_batch`` (the kernel tables of the updated plans)."""
    workload = interleaved(many_queries(seed, n_queries=40, run=120), seed, change_every, 3)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mqo.plan_update, "MIN_DELTA", min_delta)
        run_batches(workload, matcher(check=True))


def test_the_part_is_kept_between_updates() -> None:
    """An update adds to the kept part only what was registered since the last one: the
    part's registry is the same object, and a removed query leaves it."""
    ddl = "REGISTER STREAM E (a FLOAT, b FLOAT);"
    texts = [f"Query ID: s{i}\nSELECT * FROM E WHERE E.a >= {i} AND E.b <= {1000 - i}" for i in range(210)]
    m = mqo.Matcher(ddl, check=True)
    m.register_queries(texts[:200])
    whole = m.ensure_plan()
    m.register_query(texts[200])
    assert m.ensure_plan().base_plan is whole
    part = whole._delta_part.registry
    m.register_query(texts[201])
    m.unregister_query("s200")
    m.unregister_query("s3")
    plan = m.ensure_plan()
    assert plan.base_plan is whole and whole._delta_part.registry is part
    assert list(part.queries) == ["s201"]
    found = m.push("E", 1.0, {"a": 250.0, "b": 700.0})
    assert sorted(r.query for r in found) == sorted(
        f"s{i}" for i in range(202) if i not in (3, 200) and i <= 250 and 1000 - i >= 700
    )
