"""Registration changes between single pushes, against the exact reference.

A plan update (mqo/plan_update.py) keeps the queries registered since the last whole
compile in place (``mqo.live_delta.LiveDelta``): each update inserts the predicates of
the queries registered since the last one into the kept lists and marks the removed
ones' slots dead, and removed queries of the base wait as dead slots for a share of
the base's slots (``dead_limit``). Hypothesis interleaves
removals, registrations of new queries, re-registrations of a removed name and pushes,
with the limits forced low so both updates and whole compiles happen mid-stream;
``check=True`` checks every plan against one compiled whole and the kept structures'
invariants (``LiveDelta._check``) after every change, and the results are checked against the
reference (tests/references/reference.py).
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
import mqo.live_delta
import mqo.plan_compile
import mqo.plan_update
from predicates import Kind
from tests.differential.test_exact_differential import (
    batch_ids,
    compare,
    compare_late,
    engine_op,
    matcher,
    run_batches,
    run_push,
)
from tests.references.exact_workloads import (
    Push,
    Register,
    Unregister,
    Workload,
    apply_reference,
    arrow_batch,
    many_queries,
)
from tests.references.reference import engine_results

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


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    change_every=st.integers(1, 5),
    min_delta=st.integers(2, 12),
    batch_share=st.sampled_from([0.3, 0.7]),
)
def test_changes_between_pushes_and_batches(seed: int, change_every: int, min_delta: int, batch_share: float) -> None:
    """Changes interleaved with single pushes and one-tuple batches, chosen at random
    per tuple: both read the same kept structures (the attribute kernels' lists and
    rows, the masks kept in place), each after any mix of changes."""
    workload = interleaved(many_queries(seed, n_queries=30, run=60), seed, change_every, 3)
    rnd = random.Random(seed)
    ref = workload.reference()
    ids = workload.effective_ids()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mqo.plan_update, "MIN_DELTA", min_delta)
        eng = matcher(check=True)(workload)
        for step, op in enumerate(workload.ops):
            where = f"step {step} ({op!r})"
            if isinstance(op, Push) and rnd.random() < batch_share:
                stream = workload.schema.stream(op.stream)
                table = arrow_batch(stream, [op], batch_ids(workload, [step], ids))
                compare(where, engine_results(eng.push_batch(stream.name, table).matches()), apply_reference(ref, op))
            elif isinstance(op, Push):
                got = engine_results(eng.push(op.stream, op.ts, dict(op.values), id=op.id))
                compare(where, got, apply_reference(ref, op))
            else:
                engine_op(eng, ref, op, where)
            compare_late(where, eng, ref)


DDL = "REGISTER STREAM E (a FLOAT, b INTEGER); REGISTER STREAM F (a FLOAT, b INTEGER);"


def brute(queries: dict[str, tuple[float, int, int]], a: float, b: int) -> list[str]:
    """The filters ``E.a >= x AND E.b <= y AND E.b > z`` that hold for (a, b)."""
    return sorted(name for name, (x, y, z) in queries.items() if a >= x and y >= b > z)


def text(name: str, x: float, y: int, z: int) -> str:
    return f"Query ID: {name}\nSELECT * FROM E WHERE E.a >= {x} AND E.b <= {y} AND E.b > {z}"


def test_changes_are_kept_in_place() -> None:
    """Registrations after a whole compile go into the kept lists in place: the kept
    structures are one object from update to update, slots keep their numbers, a list
    a change does not touch keeps its compiled list (nothing rebuilt for it), equal
    constants share a position (ties), a removed query (the last of its list, too)
    keeps its slot with no streams, a name registered again is another query; FLOAT
    and INTEGER columns, and a join registered between filters. Every plan is checked
    against one compiled whole (``check=True``) and every answer against the filters
    evaluated here."""
    m = mqo.Matcher(DDL, check=True)
    queries = {f"s{i}": (float(i % 5), 100 - i, i // 4) for i in range(100)}
    m.register_queries([text(name, *q) for name, q in queries.items()])
    whole = m.ensure_plan()
    assert whole.base_plan is None
    events = [(2.5, 20), (4.0, 3), (0.0, 99), (3.0, 50)]

    def check(ts: float) -> None:
        for k, (a, b) in enumerate(events):
            got = sorted(r.query for r in m.push("E", ts + k / 10, {"a": a, "b": b}))
            assert got == brute(queries, a, b), (a, b)

    check(1.0)
    # ties: the same constants as registered queries and as each other
    for name, q in [("t0", (2.0, 50, 3)), ("t1", (2.0, 50, 3)), ("t2", (4.0, 50, 7))]:
        m.register_query(text(name, *q))
        queries[name] = q
    plan = m.ensure_plan()
    live = whole._delta_part
    assert plan.base_plan is whole and live is not None
    assert [plan.record_names[int(r)] for r in plan.slot_record[100:]] == ["t0", "t1", "t2"]
    ge = next(lst for lst in plan.lists[Kind.ATTRIBUTE][len(whole.lists[Kind.ATTRIBUTE]) :] if lst.key.op == ">=")
    assert list(ge.values) == [2.0, 4.0] and ge.users_of(0).tolist() == [100, 101], "a tie shares a position"
    check(2.0)
    # a query touching only F: the lists of E are not rebuilt
    before = {id(lst) for lst in plan.lists[Kind.ATTRIBUTE]}
    m.register_query("Query ID: f0\nSELECT * FROM F WHERE F.b = 7")
    plan = m.ensure_plan()
    assert whole._delta_part is live, "the kept structures are one object from update to update"
    kept = [lst for lst in plan.lists[Kind.ATTRIBUTE] if lst.left_stream == 0]
    assert all(id(lst) in before for lst in kept), "a list the change did not touch was rebuilt"
    assert sorted(r.query for r in m.push("F", 3.0, {"a": 0.0, "b": 7})) == ["f0"]
    # a join over both streams, between filters
    m.register_query(
        "Query ID: j0\nSELECT * FROM E, F WINDOW F.ts <= E.ts MAXWINDOW 5 sec WHERE E.b = F.b AND E.a > 1.5"
    )
    m.push("F", 4.0, {"a": 0.0, "b": 42})
    found = m.push("E", 4.5, {"a": 2.0, "b": 42})
    assert sorted(r.query for r in found) == sorted(["j0", *brute(queries, 2.0, 42)])
    # the last query of a list goes (F.b = 7: its only user), then a name comes again
    m.unregister_query("f0")
    assert m.push("F", 5.0, {"a": 0.0, "b": 7}) == []
    m.unregister_query("t2")
    del queries["t2"]
    m.register_query(text("t2", 1.0, 60, 10))
    queries["t2"] = (1.0, 60, 10)
    m.unregister_query("s7")
    del queries["s7"]
    plan = m.ensure_plan()
    assert plan.base_plan is whole and whole._delta_part is live
    assert plan.slot_stream_mask[7] == 0 and plan.record_names[int(plan.slot_record[-1])] == "t2"
    check(6.0)
    found = m.push_batch("E", {"ts": [7.0, 7.1], "a": [2.5, 4.0], "b": [20, 3]}).matches()
    assert sorted(r.query for r in found) == sorted(brute(queries, 2.5, 20) + brute(queries, 4.0, 3))


def test_kept_strings_disjunctions_and_residuals() -> None:
    """Added queries whose lists hold strings (kept as values, not doubles), with OR
    (several slots per query) and a residual, registered, removed and registered again
    between pushes: each answer as the predicates evaluated here, each plan checked
    against one compiled whole."""
    m = mqo.Matcher("REGISTER STREAM E (a FLOAT, s VARCHAR);", check=True)
    m.register_queries([f"Query ID: b{i}\nSELECT * FROM E WHERE E.a > {i}" for i in range(30)])
    m.ensure_plan()
    tests = {f"b{i}": (lambda a, s, i=i: a > i) for i in range(30)}
    added = {
        "w0": ("E.s = 'x' OR E.a < 1/3", lambda a, s: s == "x" or a < Fraction(1, 3)),
        "w1": ("E.s = 'y' AND E.a >= 2", lambda a, s: s == "y" and a >= 2),
        "w2": ("E.s >= 'x' OR E.s = 'a'", lambda a, s: s >= "x" or s == "a"),
        "w3": ("E.a * E.a > 10 AND E.s != 'x'", lambda a, s: a * a > 10 and s != "x"),
    }
    events = [(0.25, "x"), (3.0, "y"), (5.0, "a"), (0.1, "b"), (4.0, "x")]
    for k, (name, (where, test)) in enumerate([*added.items(), ("w0", added["w0"]), ("w2", added["w2"])]):
        if name in tests:
            m.unregister_query(name)
            del tests[name]
        m.register_query(f"Query ID: {name}\nSELECT * FROM E WHERE {where}")
        tests[name] = test
        for j, (a, s) in enumerate(events):
            got = sorted(r.query for r in m.push("E", 10.0 * k + j, {"a": a, "s": s}))
            assert got == sorted(q for q, t in tests.items() if t(Fraction(a), s)), (name, a, s)
    assert m.ensure_plan().base_plan is not None


@pytest.mark.parametrize("ctype", ["FLOAT", "INTEGER"])
def test_many_insertions_move_lists(ctype: str) -> None:
    """Lists outgrow their room and move (and the shared arrays grow): the kept
    structures stay right, checked against a whole compile after every change, with
    constants that need exact cuts (1/3, 2.5 on an INTEGER column) among them."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mqo.plan_update, "MIN_DELTA", 400)
        patch.setattr(mqo.live_delta, "FIRST_STORAGE", 16)
        m = mqo.Matcher(f"REGISTER STREAM E (x {ctype});", check=True)
        m.register_queries([f"Query ID: q{i}\nSELECT * FROM E WHERE E.x < {i}" for i in range(20)])
        m.ensure_plan()
        want = {f"q{i}": float(i) for i in range(20)}
        rnd = random.Random(7)
        for k in range(150):
            c = ["1/3", "2.5", str(rnd.randint(-30, 30)), str(rnd.randint(0, 5))][k % 4]
            m.register_query(f"Query ID: n{k}\nSELECT * FROM E WHERE E.x < {c}")
            want[f"n{k}"] = float(Fraction(c))
            if k % 3 == 0:
                gone = rnd.choice(sorted(want))
                m.unregister_query(gone)
                del want[gone]
            x = rnd.randint(-31, 31)
            got = sorted(r.query for r in m.push("E", float(k), {"x": x}))
            assert got == sorted(name for name, c in want.items() if x < c), (k, x)
        plan = m.ensure_plan()
        assert plan.base_plan is not None and plan.base_plan._delta_part.storage.moved >= 3, "the arrays never grew"
