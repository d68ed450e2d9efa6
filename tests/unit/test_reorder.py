"""The adaptive reorderer: its choices, and that changing orders never changes results."""

from __future__ import annotations

import random
from collections import Counter
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mqo
from mqo.reorder import ALL_ORDERS, AdaptivePolicy, Average, TypeStats, order_name
from mqo.snapshot_codec import decode_snapshot, encode_snapshot
from predicates import Kind

# these tests push sparse tuples: a column left out is NULL
sparse_matcher = partial(mqo.Matcher, missing="null", time="global")

A, J, W = Kind.ATTRIBUTE, Kind.JOIN, Kind.WINDOW


def feed(policy: AdaptivePolicy, stream: int, n: int, costs: dict) -> None:
    """Tuples whose phases cost what ``costs`` says: {type: (fan-out, work per partial)}."""
    for _ in range(n):
        order = policy.order_for(stream)
        carried = 1.0
        phases = []
        for kind in order:
            fanout, work = costs[kind]
            entered = max(1, round(carried * 10))
            phases.append((kind, entered, round(entered * fanout), round(entered * work)))
            carried *= fanout
        policy.observe(stream, phases)


def test_the_cheapest_order_is_chosen():
    policy = AdaptivePolicy(["B"])
    # window filters hard and is cheap; joins multiply
    feed(policy, 0, 400, {A: (1.0, 1), J: (5.0, 20), W: (0.05, 2)})
    assert policy.orders[0][0] is W
    assert order_name(policy.orders[0]) in ("WAJ", "WJA")


def test_orders_follow_a_change_in_the_data():
    policy = AdaptivePolicy(["B"])
    feed(policy, 0, 400, {A: (0.05, 1), J: (1.0, 10), W: (1.0, 10)})
    assert policy.orders[0][0] is A
    feed(policy, 0, 600, {A: (1.0, 1), J: (0.02, 3), W: (3.0, 10)})
    assert policy.orders[0][:2] in ((J, A), (A, J))
    assert policy.switches, "the change was not acted on"


def test_hysteresis_keeps_the_order_when_alternatives_are_close():
    policy = AdaptivePolicy(["B"], hysteresis=0.2)
    feed(policy, 0, 1000, {A: (0.5, 10), J: (0.5, 10.5), W: (0.5, 10.2)})
    assert len(policy.switches) <= 1


class LooksAtEverything(AdaptivePolicy):
    """The reorderer as first written: every position's figures tested for drift
    after every tuple (the policy tests only the figures that tuple changed)."""

    def observe(self, stream: int, phases: list) -> None:
        stats = self.stats[stream]
        work_done = sum(phase[3] for phase in phases)
        if self.running[stream] == self.orders[stream]:
            self.typical[stream].add(work_done)
        elif work_done > self._budget(stream):
            self.shunned[stream].add(self.running[stream])
        for position, (kind, entered, left, work) in enumerate(phases):
            stats[(kind, position)].observe(entered, left, work)
            stats[(kind, None)].observe(entered, left, work)
        self.seen[stream] += 1
        self.total += 1
        seen = self.seen[stream]
        if seen < self.warmup:
            return
        if any(key[1] is not None and ts.drifted(self.drift) for key, ts in stats.items()):
            self.refresh(stream)
            return
        if (
            seen == self.warmup
            or seen == self.reset_at[stream] + self.settle
            or self.running[stream] != self.orders[stream]
        ):
            self._repick(stream)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([4, 32, 80]), st.sampled_from([0.3, 1.0]))
def test_drift_is_found_as_when_every_figure_is_looked_at(seed, warmup, drift):
    """Regimes change under two streams (some tuples leave a phase empty); both
    policies pick the same orders, find the same changes and make the same switches."""
    rng = random.Random(seed)
    fast = AdaptivePolicy(["B", "H"], warmup=warmup, drift=drift, explore_every=7)
    slow = LooksAtEverything(["B", "H"], warmup=warmup, drift=drift, explore_every=7)
    costs, period = None, rng.choice([45, 300])
    for t in range(1500):
        if t == 700 and rng.random() < 0.5:  # settings changed on a live policy
            fast.drift = slow.drift = drift / 4
            fast.warmup = slow.warmup = warmup // 2
        if t % period == 0:
            costs = {k: (rng.choice([0.0, 0.02, 0.5, 1.0, 4.0]), rng.choice([1, 3, 10, 40])) for k in (A, J, W)}
        stream = rng.randrange(2)
        order = fast.order_for(stream)
        assert slow.order_for(stream) == order
        carried, phases = 1.0, []
        for kind in order:
            fanout, work = costs[kind]
            entered = round(carried * rng.choice([0, 5, 10, 20]))
            phases.append((kind, entered, round(entered * fanout), round(entered * work)))
            carried *= fanout
        fast.observe(stream, phases)
        slow.observe(stream, phases)
    assert (fast.orders, fast.changes, fast.switches) == (slow.orders, slow.changes, slow.switches)
    assert fast.changes  # the regimes did move the figures


@pytest.mark.parametrize("setting", ["drift", "warmup"])
def test_new_settings_on_a_live_policy_look_at_every_figure(setting):
    """A lower drift threshold (or warmup) can make a figure that no tuple changes
    count as drifted: the next tuple finds it, as when every figure is looked at."""
    warmup, slow_w = (32, 15) if setting == "drift" else (1000, 400)
    got = []
    for policy in (AdaptivePolicy(["B"], warmup=warmup, explore_every=10**9),
                   LooksAtEverything(["B"], warmup=warmup, explore_every=10**9)):  # fmt: skip
        for n, w in ((300, 10), (30, slow_w)):
            for _ in range(n):
                policy.order_for(0)
                policy.observe(0, [(A, 10, 10, 10), (J, 10, 10, 10), (W, 10, 10, 10 * w)])
        setattr(policy, setting, 0.1 if setting == "drift" else 1)
        for _ in range(5):
            policy.order_for(0)
            policy.observe(0, [(A, 0, 0, 0), (J, 0, 0, 0), (W, 0, 0, 0)])  # (no figure changes)
        got.append((policy.changes, policy.reset_at))
    assert got[0] == got[1] and got[0][0]


def test_a_policy_through_snapshot_bytes_decides_as_the_original():
    """``state()`` -> snapshot bytes -> ``from_state`` keeps every figure: fed the same
    tuples after it (a change of costs that makes both switch), the two choose the same
    orders at the same tuples, with the same estimates."""
    policy = AdaptivePolicy(["B", "H"], explore_every=7)
    before = {A: (0.5, 1), J: (1.0, 10), W: (1.0, 10)}
    feed(policy, 0, 150, before)
    feed(policy, 1, 40, before)
    policy.observe_list(3, 0.25)
    restored = AdaptivePolicy.from_state(decode_snapshot(encode_snapshot(policy.state())))
    after = {A: (1.0, 50), J: (0.1, 1), W: (1.0, 10)}
    for p in (policy, restored):
        feed(p, 0, 300, after)
        feed(p, 1, 100, after)
    assert policy.switches and restored.switches == policy.switches
    assert (restored.orders, restored.seen, restored.changes) == (policy.orders, policy.seen, policy.changes)
    assert restored.state() == policy.state()


def test_a_tuple_that_meets_no_query_reports_no_phases(monkeypatch):
    """A tuple that starts no partial (its queries' other stream stores nothing) gives
    the reorderer no phases, not the previous tuple's (of another stream, maybe)."""
    ddl = "REGISTER STREAM B (x FLOAT); REGISTER STREAM H (y FLOAT); REGISTER STREAM P (z FLOAT); REGISTER STREAM Q (w FLOAT);"
    m = mqo.Matcher(ddl, order="adaptive")
    m.register_query("SELECT * FROM B, H WHERE B.x > 1 AND H.y < B.x MAXWINDOW 10", "q")
    m.register_query("SELECT * FROM P, Q WHERE P.z > 1 AND Q.w < P.z MAXWINDOW 10", "r")
    seen = []
    observe = AdaptivePolicy.observe

    def spy(policy: AdaptivePolicy, stream: int, phases: list) -> None:
        seen.append((stream, list(phases)))
        observe(policy, stream, phases)

    monkeypatch.setattr(AdaptivePolicy, "observe", spy)
    for stream, ts, values in [("B", 1.0, {"x": 5.0}), ("H", 2.0, {"y": 1.0}), ("P", 3.0, {"z": 5.0})]:
        m.push(stream, ts, values)
    assert seen[1][1], "H's tuple joins B's: it has phases"
    assert seen[2] == (2, []), "P's tuple meets no stored Q tuple"


def test_exploration_runs_every_order_now_and_then():
    policy = AdaptivePolicy(["B"], explore_every=5)
    seen = Counter()
    for _ in range(200):
        order = policy.order_for(0)
        seen[order] += 1
        policy.observe(0, [(k, 1, 1, 1) for k in order])
    assert set(seen) == set(ALL_ORDERS)
    assert seen[policy.orders[0]] > 100


def test_attribute_lists_most_selective_first():
    policy = AdaptivePolicy(["B"])

    class L:
        def __init__(self, index):
            self.index = index

    lists = [L(0), L(1), L(2)]
    for _ in range(50):
        policy.observe_list(0, 0.9)
        policy.observe_list(1, 0.05)
        policy.observe_list(2, 0.5)
    assert [lst.index for lst in policy.list_order(lists, lists)] == [1, 2, 0]


def test_explain_shows_the_order_and_its_statistics(thesis_ddl, running_example):
    m = sparse_matcher(thesis_ddl, allowed_lateness=10)
    m.register_queries(running_example)
    for ts in range(60):
        m.push("B", ts, {"pressure": ts % 200, "temp": 100})
        m.push("H", ts + 0.5, {"beatrate": 52, "vib": ts % 100})
        m.push("T", ts + 0.7, {"fluct": 103, "degree": 1, "incr": ts % 100})
    text = m.explain()
    assert "Evaluation order: adaptive" in text
    assert "T tuples (60 seen): order" in text
    assert "fan-out" in text and "estimated work per tuple" in text
    static = sparse_matcher(thesis_ddl, order="WJA")
    static.register_queries(running_example)
    assert "Evaluation order: static WJA" in static.explain()


# That changing orders mid-stream changes no result is held against the exact reference:
# tests/differential/test_exact_shapes.py::test_changing_orders_mid_stream_changes_no_result.


def test_streams_whose_order_cannot_matter_are_not_measured_and_the_others_still_reorder():
    """S's one query reads S alone (with OR: its tuples go through the engine, to be
    reported once per query): every order does the same work for them, so the policy
    measures none; B and H, joined with a window that filters hard, still get an order
    of their own, window first for H, and the results are those of a static order."""
    ddl = "REGISTER STREAM B (x FLOAT); REGISTER STREAM H (y FLOAT); REGISTER STREAM S (k INTEGER);"
    queries = [
        "Query ID: joined\nSELECT * FROM B, H WINDOW H.ts >= B.ts AND H.ts <= B.ts + 0.5 MAXWINDOW 100 WHERE B.x < H.y",
        "Query ID: either\nSELECT * FROM S WHERE S.k = 1 OR S.k = 2 OR S.k = 1",
    ]
    found = {}
    for order in ("adaptive", "AJW"):
        m = mqo.Matcher(ddl, order=order)
        m.register_queries(queries)
        out = []
        for i in range(400):
            out += m.push("B", i * 0.25, {"x": float(i % 7)})
            out += m.push("H", i * 0.25 + 0.1, {"y": 10.0})
            out += m.push("S", i * 0.25 + 0.2, {"k": i % 3})
        found[order] = sorted((r.query, r.ts, sorted(r.ids.items())) for r in out)
        if order == "adaptive":
            policy = m.policy
            assert policy is not None
            assert policy.seen == [400, 400, 0]
            assert policy.orders[1][0] is W, "H's tuples: the window filters hard, so it goes first"
    assert found["adaptive"] == found["AJW"]  # (in another order within a tuple's results)
    assert sum(1 for q, _, _ in found["AJW"] if q == "either") == sum(1 for i in range(400) if i % 3)  # once a tuple


def test_an_order_whose_trial_costs_more_than_it_is_spread_over_is_not_tried_again_until_a_drift():
    """A view's row run window first meets thousands of stored tuples where its join
    meets one: trying such an order costs more than the ``explore_every`` tuples the
    trial is spread over, so it is tried once, and again only after the figures drift."""
    policy = AdaptivePolicy(["V"], explore_every=5)
    tried: Counter = Counter()

    def run(n: int, usual: int) -> None:
        for _ in range(n):
            order = policy.order_for(0)
            window_first = order[0] is W
            tried[window_first] += 1
            work = 10_000 if window_first else usual
            policy.observe(0, [(order[0], 1, 1, work), (order[1], 1, 1, 0), (order[2], 1, 1, 0)])

    run(400, 3)
    assert tried[True] == 2, "each window-first order (WAJ, WJA) is tried once"
    assert policy.shunned[0] == {(W, A, J), (W, J, A)}
    assert decode_policy(policy).shunned == policy.shunned
    run(200, 300)  # the usual work jumps a hundredfold: the figures drift, every order may be tried again
    assert policy.changes and tried[True] > 2


def decode_policy(policy: AdaptivePolicy) -> AdaptivePolicy:
    return AdaptivePolicy.from_state(decode_snapshot(encode_snapshot({"p": policy.state()}))["p"])


def test_a_trial_past_its_budget_stops_and_the_tuple_is_matched_in_its_own_order():
    """H's rows join the bids of their last 30 s on price: tried window first, one row
    would meet every bid of the window. The trial stops once its work passes what
    ``explore_every`` of H's usual tuples cost, the order is shunned, and the row is
    matched in H's own order: the results are a static order's, and H's rows never
    fetched the window's bids."""
    ddl = "REGISTER STREAM B (price INTEGER); REGISTER STREAM H (price INTEGER);"
    query = (
        "Query ID: top\nSELECT * FROM B, H WINDOW B.ts <= H.ts AND B.ts > H.ts - 30 MAXWINDOW 30 "
        "WHERE B.price = H.price"
    )
    found = {}
    for order in ("adaptive", "AJW"):
        m = mqo.Matcher(ddl, order=order)
        m.register_query(query)
        if m.policy is not None:
            m.policy.explore_every = 2  # (a trial every other H row)
        out = []
        bids = 0
        for second in range(60):
            for k in range(100):
                out += m.push("B", second + k / 100, {"price": (second * 100 + k) % 997})
                bids += 1
            out += m.push("H", second + 0.995, {"price": (second * 100 + 7) % 997})
        found[order] = sorted((r.ts, sorted(r.ids.items())) for r in out)
        if order == "adaptive":
            policy = m.policy
            assert policy is not None
            assert policy.shunned[1] & {(W, A, J), (W, J, A), (A, W, J)}, "a window-first order was tried"
            assert m.counters.retrieved < bids // 10, "no H row fetched a window of bids"
    assert found["adaptive"] == found["AJW"]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 200), st.integers(0, 5000)), max_size=60),
       st.sampled_from([0, 7, 30]))  # fmt: skip
def test_type_stats_take_each_measurement_as_average_add_does(measurements, quicken_at):
    """``TypeStats.observe`` writes ``Average.add``'s rule out for speed: the figures it
    keeps are those of the four averages fed one by one, to the last bit (a refresh
    in the middle makes the fast ones re-learn)."""
    stats = TypeStats()
    fanout, cost, slow_fanout, slow_cost = (Average(a.rate, fresh=a.fresh) for a in
                                            (stats.fanout, stats.cost, stats.slow_fanout, stats.slow_cost))  # fmt: skip
    for n, (entered, left, work) in enumerate(measurements):
        if n == quicken_at:
            stats.refresh()
            fanout.quicken()
            cost.quicken()
            slow_fanout.value, slow_cost.value = fanout.value, cost.value
        stats.observe(entered, left, work)
        if entered:
            for avg, x in ((fanout, left / entered), (cost, work / entered),
                           (slow_fanout, left / entered), (slow_cost, work / entered)):  # fmt: skip
                avg.add(x)
    assert [stats.fanout, stats.cost, stats.slow_fanout, stats.slow_cost] == [fanout, cost, slow_fanout, slow_cost]


def test_a_trial_past_its_budget_counts_what_it_would_fetch_by_time(monkeypatch):
    """A trial of another order that would fetch more tuples by time than its budget
    leaves (here W first: every bid of the window, where the running order probes the
    price's index) counts them without fetching them (``TimeBuckets.gather``), and is
    abandoned after the same work: the results and every figure of the policy are those
    of fetching them all."""
    from indexes.time_buckets import TimeBuckets
    from mqo.engine import Engine

    ddl = "REGISTER STREAM B (price INTEGER); REGISTER STREAM H (price INTEGER);"
    query = "SELECT * FROM B, H WINDOW B.ts <= H.ts AND B.ts > H.ts - 300 MAXWINDOW 300 WHERE B.price = H.price"
    rnd = random.Random(5)
    events = [("H" if i % 10 == 0 else "B", i / 10, {"price": rnd.randrange(400)}) for i in range(4000)]

    def run() -> tuple[list, dict]:
        matcher = mqo.Matcher(ddl)
        matcher.register_queries([query])
        found = [(m.ts, m.query, sorted(m.ids.items())) for event in events for m in matcher.push(*event)]
        return found, matcher.policy.state()

    counted = Counter()
    gather = TimeBuckets.gather

    def gather_counted(self, lo, hi, into, room=None):
        held = len(into)
        n = gather(self, lo, hi, into, room)
        if room is not None and n > room:
            counted["only counted"] += 1
            assert len(into) == held
        return n

    monkeypatch.setattr(TimeBuckets, "gather", gather_counted)
    abandon = AdaptivePolicy.abandon_trial

    def abandon_counted(self, *args):
        counted["abandoned"] += 1
        return abandon(self, *args)

    monkeypatch.setattr(AdaptivePolicy, "abandon_trial", abandon_counted)
    counting = run()
    assert counted["only counted"] > 0 and counted["abandoned"] > 0  # (the workload takes the path)
    abandoned = counted["abandoned"]
    monkeypatch.setattr(Engine, "_room", lambda self, found: None)  # every trial fetches all it finds
    counted.clear()
    fetching = run()
    assert counted["only counted"] == 0 and counted["abandoned"] == abandoned
    assert counting == fetching


def test_a_restore_after_an_unregister_keeps_each_stream_to_its_own_lists():
    """A snapshot's list order names lists by their number in the plan that took it; a
    plan compiled again on restore after an unregister numbers them otherwise, and a
    stream must not evaluate another stream's list on its rows (a TypeError comparing a
    string with a number, before): the restored matcher finds what the one it was taken
    from finds."""
    ddl = "REGISTER STREAM A (s STRING, t STRING, x INTEGER); REGISTER STREAM B (auction INTEGER, s STRING);"
    queries = {
        "q3": "SELECT * FROM B WHERE B.auction != 9",
        "q4": "SELECT * FROM A, B MAXWINDOW 5 WHERE A.x = B.auction AND A.t <= A.s",
        "q5": "SELECT * FROM A, B MAXWINDOW 2 WHERE A.s < B.s AND B.auction != 2 AND A.s >= 'c'"
        " AND (A.x != 3 OR B.auction >= 3)",
    }
    kept = mqo.Matcher(ddl, time="global", emit="ordered")
    for name, text in queries.items():
        kept.register_query(text, name)
    kept.unregister_query("q3")
    kept.push("A", 91.0, {"s": "c", "t": "B", "x": 7}, id=0)
    restored = mqo.Matcher.restore(kept.snapshot())
    found = [
        [
            (r.query, sorted(r.ids.items()))
            for r in [*m.push("B", 92.0, {"auction": 3, "s": "d"}, id=1), *m.flush_results().matches()]
        ]
        for m in (kept, restored)
    ]
    assert found[0] == found[1] == [("q5", [("A", 0), ("B", 1)])]
