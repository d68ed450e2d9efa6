"""A plan made at once by a bulk registration (mqo/registrations.py: the plan and its
kernel tables are built by the registration call, not by the first event) against a
plan made one registration at a time, with registration changes mid-stream.

The same workload runs on two matchers: one registers each run of consecutive
registrations with one ``register_queries`` call (the bulk path, its threshold forced
low so these runs take it), the other one query at a time (plans compiled lazily and
updated). Both are checked against the exact reference (tests/references/reference.py)
and so against each other, event by event; ``check=True`` checks every plan against a
plan compiled whole, kernel tables included.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import mqo
import mqo.registrations
from tests.differential.test_exact_differential import apply_reference, compare, engine_op, matcher
from tests.references.exact_workloads import Push, Register, Unregister, Workload, many_queries
from tests.references.reference import engine_results
from tests.unit.test_plan_update import churned

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")


def run_bulk_beside_single(workload: Workload, check: bool) -> int:
    """Both matchers through the workload (each beside a reference of its own); the
    number of plans the bulk one made at registration time."""
    bulk, bulk_ref = matcher(check=check)(workload), workload.reference()
    single, single_ref = matcher(check=check)(workload), workload.reference()
    made_early = 0
    ops = workload.ops
    step = 0
    while step < len(ops):
        op = ops[step]
        where = f"step {step} ({op!r})"
        if isinstance(op, Register):
            run = [op]
            while step + len(run) < len(ops) and isinstance(ops[step + len(run)], Register):
                run.append(ops[step + len(run)])  # type: ignore[arg-type]
            assert bulk.register_queries([r.query.to_text() for r in run]) == [r.query.name for r in run], where
            made_early += bulk.registrations.plan is not None
            for r in run:
                apply_reference(bulk_ref, r)
                engine_op(single, single_ref, r, where)
            step += len(run)
            continue
        for eng, ref, name in ((bulk, bulk_ref, "bulk"), (single, single_ref, "single")):
            if isinstance(op, Push):
                got = engine_results(eng.push(op.stream, op.ts, dict(op.values), id=op.id))
                compare(f"{where} on the {name} matcher", got, apply_reference(ref, op))
            else:
                engine_op(eng, ref, op, where)
        step += 1
    return made_early


def staggered(workload: Workload, run: int, every: int) -> Workload:
    """``workload`` with nine tenths of its first registrations (of queries never removed)
    held back and registered mid-stream, ``run`` at a time after every ``every`` pushes."""
    first_push = next(k for k, op in enumerate(workload.ops) if isinstance(op, Push))
    removed = {op.name for op in workload.ops if isinstance(op, Unregister)}
    registers = [op for op in workload.ops[:first_push] if isinstance(op, Register) and op.query.name not in removed]
    held = registers[len(registers) // 10 :]
    ops, pushes = [], 0
    for op in workload.ops:
        if isinstance(op, Register) and op in held:
            continue
        ops.append(op)
        if isinstance(op, Push):
            pushes += 1
            if pushes % every == 0 and held:
                ops += held[:run]
                held = held[run:]
    return Workload(workload.schema, workload.lateness, ops + held)


@pytest.mark.parametrize("check", [False, True])
def test_bulk_plan_matches_one_at_a_time(check: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mqo.registrations, "BULK", 8)
    base = many_queries(5, n_queries=80 if check else 150, run=200)
    workload = staggered(churned(base, 5, every=10), run=40, every=20)
    assert run_bulk_beside_single(workload, check) >= 2  # the first run and some mid-stream


def test_bulk_registrations_in_many_calls_compile_at_doubling_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registering in many bulk calls makes the plan early only when the queries since
    the last plan at least double it (so the compiles cost O(queries) in all), and the
    plan made by the first event after the last call matches what the brute force does."""
    monkeypatch.setattr(mqo.registrations, "BULK", 4)
    m = mqo.Matcher("REGISTER STREAM E (a INTEGER, b FLOAT);")
    rng = np.random.default_rng(7)
    lo = rng.integers(0, 100, 200)
    hi = lo + rng.integers(0, 50, 200)
    made = []
    for start in range(0, 200, 10):
        texts = [
            f"Query ID: q{k}\nSELECT * FROM E WHERE E.a >= {lo[k]} AND E.a <= {hi[k]}" for k in range(start, start + 10)
        ]
        m.register_queries(texts)
        made.append(m.registrations.plan is not None)
    # 10 (first), 20, 40, 80, 160 queries: five plans made early, none in between
    assert [i for i, early in enumerate(made) if early] == [0, 1, 3, 7, 15]
    lo, hi = np.concatenate([lo, lo]), np.concatenate([hi, hi])  # 200 more, the same intervals
    m.register_queries(
        [f"Query ID: q{k}\nSELECT * FROM E WHERE E.a >= {lo[k]} AND E.a <= {hi[k]}" for k in range(200, 400)]
    )
    made_early = m.registrations.plan
    assert made_early is not None  # 200 more: at least as many as the plan held
    m.push("E", -1.0, {"a": -1, "b": 0.5})
    assert m.registrations.plan is made_early  # the first event used it: nothing compiled again
    for ts, a in enumerate(rng.integers(0, 160, 50).tolist()):
        got = {r.query for r in m.push("E", float(ts), {"a": a, "b": 0.5})}
        assert got == {f"q{k}" for k in range(400) if lo[k] <= a <= hi[k]}, (ts, a)


def test_a_bulk_registration_freezes_its_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a bulk registration the queries' objects are out of the collector's reach
    (a full collection while matching does not scan them again), and a matcher let go
    is still freed (nothing of it is kept alive by the freeze)."""
    import weakref

    monkeypatch.setattr(mqo.registrations, "BULK", 4)
    gc.unfreeze()
    m = mqo.Matcher("REGISTER STREAM E (a INTEGER);")
    before = gc.get_freeze_count()
    m.register_queries([f"SELECT * FROM E WHERE E.a >= {k}" for k in range(50)])
    assert gc.get_freeze_count() > before
    assert m.registrations.plan is not None
    plan = weakref.ref(m.registrations.plan)
    alive = weakref.ref(m)
    del m
    assert alive() is None and plan() is None
    gc.unfreeze()


# Slots per query: 2 (a disjunction), 0 (a contradiction) and 1, so that the queries
# have exactly as many slots as there are queries while not one slot each; a compiler
# that took "as many slots as queries" for "one slot per query" gave one query's
# matches another's name.
SLOT_COUNT_CASE = {
    "two": "SELECT * FROM B WHERE B.pressure > 5 OR B.temp = 5",
    "one": "SELECT * FROM B WHERE B.pressure > 10 AND B.temp < -1.5",
    "self": "SELECT * FROM B b1, B b2 WHERE b2.pressure > b1.pressure + 20 MAXWINDOW 2.5 sec",
    "other": "SELECT * FROM T WHERE T.fluct > 2",
    "none": "SELECT * FROM B WHERE 1 > 2",
}
SLOT_COUNT_DDL = "REGISTER STREAM B (pressure FLOAT, temp FLOAT); REGISTER STREAM T (fluct FLOAT);"
SLOT_COUNT_TUPLES = [
    ("B", 1.0, {"pressure": 11.0, "temp": -2.0}),  # two and one
    ("B", 1.5, {"pressure": 1.0, "temp": 5.0}),  # two (its second disjunct)
    ("T", 2.0, {"fluct": 3.0}),  # other
    ("B", 2.5, {"pressure": 40.0, "temp": 0.0}),  # two, and self with the tuple of ts 1.5
]
SLOT_COUNT_EXPECTED = [{"two", "one"}, {"two"}, {"other"}, {"two", "self"}]


@pytest.mark.parametrize("bulk", [False, True])
@pytest.mark.parametrize("order", [list(SLOT_COUNT_CASE), list(reversed(SLOT_COUNT_CASE))])
def test_queries_without_one_slot_each_keep_their_names(order: list[str], bulk: bool) -> None:
    m = mqo.Matcher(SLOT_COUNT_DDL)
    with pytest.warns(mqo.NeverMatchesWarning):
        if bulk:
            m.register_queries([f"Query ID: {name}\n{SLOT_COUNT_CASE[name]};" for name in order])
        else:
            for name in order:
                m.register_query(SLOT_COUNT_CASE[name], query_id=name)
    found = [{match.query for match in m.push(stream, ts, values)} for stream, ts, values in SLOT_COUNT_TUPLES]
    assert found == SLOT_COUNT_EXPECTED
