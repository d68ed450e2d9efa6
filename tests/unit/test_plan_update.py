"""Registration changes between batches: plans updated from the previous plan
(mqo/plan_update.py) instead of compiled whole.

The updated plan shares the whole-compiled plan's lists and kernel tables, appends the
new queries' own, and takes removed queries' streams away. These tests run hundreds of
queries with queries removed and registered again between batches against the exact
reference (tests/references/reference.py), with the whole-compile limit at its default and forced
low (so both updates and whole compiles happen mid-stream), and check the updated
plans and tables against plans and tables built whole (``check=True`` runs
``mqo.plan_update.check_plan`` on every plan).
"""

from __future__ import annotations

import gc
import random
import weakref
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mqo
import mqo.plan_update
from mqo.live_lists import LiveLevels
from mqo.plan import Levels, Repeated
from tests.differential.test_exact_differential import matcher, run_batches, run_push, run_replay
from tests.references.exact_workloads import Push, Register, Unregister, Workload, many_queries

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")


def churned(workload: Workload, seed: int, every: int = 40) -> Workload:
    """``workload`` with, every ``every`` pushes, one query removed and (mostly) one
    removed earlier registered again: the long run of one stream becomes batches with
    registration changes between them."""
    rnd = random.Random(seed)
    live = {op.query.name: op.query for op in workload.ops if isinstance(op, Register)}
    gone: dict = {}
    ops = []
    pushes = 0
    for op in workload.ops:
        if isinstance(op, Push):
            pushes += 1
            if pushes % every == 0 and live:
                name = rnd.choice(sorted(live))
                gone[name] = live.pop(name)
                ops.append(Unregister(name))
                if rnd.random() < 0.7:
                    back = rnd.choice(sorted(gone))
                    live[back] = gone.pop(back)
                    ops.append(Register(live[back]))
        ops.append(op)
    return Workload(workload.schema, workload.lateness, ops)


@pytest.mark.parametrize("min_delta", [mqo.plan_update.MIN_DELTA, 4])
def test_churn_between_batches(min_delta: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mqo.plan_update, "MIN_DELTA", min_delta)
    run_batches(churned(many_queries(1, n_queries=100, run=300), 1, every=20), matcher(order="AJW"))


@pytest.mark.slow
@pytest.mark.parametrize("min_delta", [mqo.plan_update.MIN_DELTA, 4])
def test_churn_between_batches_large(min_delta: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mqo.plan_update, "MIN_DELTA", min_delta)
    run_batches(churned(many_queries(2, n_queries=150, run=600), 2), matcher(order="adaptive"))


@pytest.mark.slow
def test_churn_replay() -> None:
    run_replay(churned(many_queries(3, n_queries=150, run=600), 3, every=25), matcher(order="JWA"))


def test_churn_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every plan (updated or whole) checked against one compiled whole, kernel tables
    included, while the results are checked against the reference."""
    monkeypatch.setattr(mqo.plan_update, "MIN_DELTA", 6)
    run_push(churned(many_queries(4, n_queries=60, run=150), 4, every=15), matcher(check=True))


DDL = "REGISTER STREAM E (a FLOAT, b FLOAT);"


def subscriptions(names: range) -> list[str]:
    return [f"Query ID: s{i}\nSELECT * FROM E WHERE E.a >= {i} AND E.b <= {1000 - i}" for i in names]


def expected(live: list[int], batch: dict) -> list[tuple[str, float]]:
    return sorted(
        (f"s{i}", float(ts))
        for ts, a, b in zip(batch["ts"], batch["a"], batch["b"], strict=True)
        for i in live
        if a >= i and b <= 1000 - i
    )


def test_registration_keeps_the_tables_built() -> None:
    """A registration or removal after the kernel tables are built reuses them: the
    next plan shares the whole-compiled plan's table, and only the new query's lists
    are built (in a second table)."""
    m = mqo.Matcher(DDL)
    m.register_queries(subscriptions(range(300)))
    batch = {"ts": np.arange(5.0), "a": np.array([0.0, 100, 200, 299, 400]), "b": np.array([650.0, 0, 700, 650, 1])}
    found = m.push_batch("E", batch).matches()
    assert sorted((r.query, r.ts) for r in found) == expected(list(range(300)), batch)
    whole = m.ensure_plan()
    table = whole.kill_bitsets(0).table
    m.register_query(subscriptions(range(300, 301))[0])
    m.unregister_query("s0")
    batch["ts"] = batch["ts"] + 10
    found = m.push_batch("E", batch).matches()
    assert m.ensure_plan().base_plan is whole and m.ensure_plan().kill_bitsets(0).table is table
    assert sorted((r.query, r.ts) for r in found) == expected(list(range(1, 301)), batch)
    # explain (and snapshots) see a plan compiled whole
    m.explain()
    assert m.ensure_plan().base_plan is None


def test_a_replaced_plan_is_freed_at_once() -> None:
    """A plan replaced by the next one (updated, or compiled whole) is freed as soon as
    nothing uses it, with its kernel tables: a service that registers and cancels all
    the time must not keep old plans until a garbage collection runs."""
    m = mqo.Matcher(DDL)
    m.register_queries(subscriptions(range(100)))
    batch = {"ts": np.arange(3.0), "a": np.array([0.0, 50, 99]), "b": np.array([650.0, 0, 700])}
    gc.collect()
    gc.disable()
    try:
        m.push_batch("E", batch)
        replaced = []
        for k in range(100, 104):
            replaced.append(weakref.ref(m.ensure_plan()))
            m.register_query(subscriptions(range(k, k + 1))[0])
            batch["ts"] = batch["ts"] + 10
            m.push_batch("E", batch)
        assert m.ensure_plan().base_plan is replaced[0](), "the updated plans share the first plan compiled whole"
        assert [r() is None for r in replaced[1:]] == [True] * 3, "an updated plan outlived the next"
        m.explain()  # a plan compiled whole replaces the updated one, and then its base
        assert m.ensure_plan().base_plan is None and replaced[0]() is None
    finally:
        gc.enable()


LEVEL_VALUES = st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.5, Fraction(1, 3), Fraction(1, 2), Fraction(0), 10.0])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.lists(LEVEL_VALUES, max_size=5), st.tuples(LEVEL_VALUES, st.integers(0, 4))), max_size=5))
def test_levels_of_runs_are_the_levels_of_every_record(runs: list) -> None:
    """Levels given run by run (a block's run as one value for its records) are those of
    every record's value listed: the same distinct values (of equal ones, the first in
    record order: 0.5 and 1/2, 0.0 and -0.0), their doubles and each record's level."""
    chunks = [Repeated(*run) if isinstance(run, tuple) else run for run in runs]
    every = [v for c in chunks for v in ([c.value] * c.count if isinstance(c, Repeated) else c)]
    got, want = Levels.of_runs(chunks), Levels.of(every)
    assert [(type(v), v) for v in got.values] == [(type(v), v) for v in want.values]
    assert [repr(f) for f in got.floats] == [repr(f) for f in want.floats]
    assert got.level_of.tolist() == want.level_of.tolist() and got.level_of.dtype == np.int32


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5, 3.0, Fraction(1, 3), Fraction(7, 3), 10.0]), min_size=0, max_size=8),
    st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5, 4.0, Fraction(1, 3), Fraction(10, 3), 20.0]), min_size=0, max_size=8),
    st.data(),
)
def test_levels_kept_in_place_are_the_levels_of_all(first: list, second: list, data: st.DataObject) -> None:
    """MAXWINDOW and horizon levels kept in place (values appended above the others, or
    between them, which renumbers the records and slots above) are what numbering every
    record at once gives: distinct values ascending, each record's own value, removed
    records at 0, and the largest level a record has."""
    live = LiveLevels(Levels.of(first), len(first))
    slot_levels = np.zeros(len(first) + len(second) + 1, np.int32)  # one slot per record
    slot_levels[: len(first)] = live.level_of[: len(first)]
    for k, value in enumerate(second):
        slot_levels[len(first) + k] = live.append(value, slot_levels, len(first) + k)
    removed = sorted(data.draw(st.sets(st.integers(0, len(first) + len(second) - 1)))) if first or second else []
    for r in removed:
        slot_levels[r] = live.set(r, 0.0, slot_levels, len(first) + len(second))
    every = [0.0 if i in removed else v for i, v in enumerate(first + second)]
    got = live.levels(len(every))
    assert [got.values[k] for k in got.level_of.tolist()] == every
    assert slot_levels[: len(every)].tolist() == got.level_of.tolist(), "a slot's level is not its record's"
    assert got.values == sorted(set(got.values)) and set(Levels.of(every).values) <= set(got.values)
    assert got.floats == [float(v) for v in got.values]
    live._check(len(every), removed)
    top = live.top()
    assert (got.values[top] if top >= 0 else None) == (max(every) if every else None)
