"""The index structures of ``indexes/`` (and ``mqo.state.WindowState``) against plain-Python models.

In the style of sortedcontainers' own tests: seeded random stress runs (and hypothesis
for the covering lists) that mutate a structure and a naive model side by side, call
the structure's ``_check()`` invariant method after every mutation, and compare every
query the structure answers with the model's answer.
"""

from __future__ import annotations

import json
import math
import operator
import random

import pytest
from hypothesis import HealthCheck, settings

from indexes import value_index
from indexes.covering import CoveringList
from indexes.kill_table import KillTable
from indexes.stored import StoredTuple
from indexes.time_buckets import TimeBuckets
from indexes.value_index import ValueIndex
from mqo.state import WindowState

OPS = ("<", "<=", ">", ">=", "=", "!=")
NAN = float("nan")
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "=": operator.eq, "!=": operator.ne}
INF = float("inf")

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ============================================================ kill tables


def naive_or(users: list[int], positions) -> int:
    acc = 0
    for i in positions:
        acc |= users[i]
    return acc


def check_kill_table(users: list[int], slots: int, budget_bits: int, rnd: random.Random) -> KillTable:
    kt = KillTable(users, slots, budget_bits=budget_bits)
    kt._check()
    n = len(users)
    assert kt.n == n
    assert kt.any_user == naive_or(users, range(n))
    for i in range(n + 1):
        assert kt.prefix(i) == naive_or(users, range(i)), f"prefix({i})"
        assert kt.suffix(i) == naive_or(users, range(i, n)), f"suffix({i})"
    for _ in range(30):
        lo = rnd.randint(0, n)
        hi = rnd.randint(lo, n)
        inside = naive_or(users, range(lo, hi))
        outside = naive_or(users, [*range(lo), *range(hi, n)])
        assert kt.range(lo, hi) == inside
        assert kt.killed(lo, hi, False) == outside
        assert kt.killed(lo, hi, True) == inside
    all_slots = (1 << slots) - 1
    for cand in [0, all_slots, *(rnd.getrandbits(slots) for _ in range(20)), *(1 << q for q in range(slots))]:
        used = [i for i, u in enumerate(users) if u & cand]
        assert kt.first_used(cand) == (used[0] if used else -1), f"first_used({cand:b})"
        assert kt.last_used(cand) == (used[-1] if used else -1), f"last_used({cand:b})"
    return kt


@pytest.mark.parametrize("budget_bits", [1, 3, 16, 64, 1 << 26])
def test_kill_table_seeded_stress(budget_bits: int) -> None:
    rnd = random.Random(budget_bits)
    strides = set()
    for _ in range(60):
        slots = rnd.randint(1, 24)
        n = rnd.choice([0, 1, 2, 3, rnd.randint(4, 80)])
        users = []
        for _ in range(n):
            k = rnd.choice([0, 1, 1, 1, 2, 3])  # usually one or a few users, sometimes none
            mask = 0
            for _ in range(k):
                mask |= 1 << rnd.randrange(slots)
            users.append(mask)
        kt = check_kill_table(users, slots, budget_bits, rnd)
        strides.add(kt.stride)
        assert kt.stride >= 1 and kt.stride & (kt.stride - 1) == 0, "stride is a power of two"
        if kt.stride > 1:
            assert (n // (kt.stride // 2) + 2) * max(1, slots) > budget_bits, "stride larger than needed"
    if budget_bits <= 16:
        assert max(strides) > 1, "tiny budgets should force checkpoint strides > 1"
    if budget_bits == 1 << 26:
        assert strides == {1}


def test_kill_table_stride_exceeds_length() -> None:
    users = [1, 2, 0, 4, 8]
    kt = KillTable(users, 4, budget_bits=1)
    assert kt.stride >= len(users)
    check_kill_table(users, 4, 1, random.Random(0))


def test_kill_table_with_covering_list_is_the_qed_test() -> None:
    """killed(*satisfied(x)) = OR of the users of exactly the predicates that failed."""
    rnd = random.Random(7)
    for _ in range(500):
        op = rnd.choice(OPS)
        constants = sorted(rnd.choice([-2, -1, 0, 0.5, 1, 3]) for _ in range(rnd.randint(0, 10)))
        users = [1 << rnd.randrange(8) for _ in constants]
        cl = CoveringList(op, constants)
        kt = KillTable(users, 8, budget_bits=rnd.choice([1, 8, 1 << 26]))
        left = rnd.choice([-3, -2, -1, 0, 0.5, 0.75, 1, 3, 4, None, NAN])
        held = [left is not None and left == left and _OPS[op](left, c) for c in constants]
        sat = cl.satisfied(left)
        assert kt.killed(*sat) == naive_or(users, [i for i, ok in enumerate(held) if not ok])


# ============================================================ value indexes


def expected_range(model: list[StoredTuple], pos: int, lo, hi, lo_inc: bool, hi_inc: bool) -> list[StoredTuple]:
    def inside(v) -> bool:
        if lo is not None and (v < lo or (v == lo and not lo_inc)):
            return False
        return not (hi is not None and (v > hi or (v == hi and not hi_inc)))

    live = [t for t in model if not (t.row[pos] is None or t.row[pos] != t.row[pos])]
    live.sort(key=lambda t: (t.row[pos], t.seq))
    return [t for t in live if inside(t.row[pos])]


def same(a, b) -> bool:
    return [id(t) for t in a] == [id(t) for t in b]


@pytest.mark.parametrize(
    ("pool", "bounds"),
    [
        ([-2, -1, -1, 0, 0.5, 1, 1, 1, 2.5, 7, None, NAN], [None, -3, -1, 0, 0.25, 1, 2.5, 8]),
        (["", "a", "a", "ab", "b", "B", None], [None, "", "a", "aa", "b", "c"]),
    ],
    ids=["numbers", "strings"],
)
@pytest.mark.parametrize("position", [2, 3])
@pytest.mark.parametrize("load", [value_index.LOAD, 2, 5])
@pytest.mark.parametrize("arrival", ["in order", "shuffled"])
def test_value_index_seeded_stress(
    pool: list, bounds: list, position: int, load: int, arrival: str, monkeypatch
) -> None:
    """Also with blocks of a few keys: split, merged, emptied and ranged across; and with
    tuples added out of seq order (as a restore or a new index adds them, in ts order),
    which must still come out in seq order among equal values, across blocks."""
    monkeypatch.setattr(value_index, "LOAD", load)
    rnd = random.Random(hash((position, len(pool), load, arrival)))
    index = ValueIndex(position)
    model: list[StoredTuple] = []
    seqs = list(range(1000))
    if arrival == "shuffled":
        rnd.shuffle(seqs)
    seq = 0
    for step in range(400):
        if model and rnd.random() < (0.35 if step < 250 else 0.6):  # (grows, then shrinks)
            t = model.pop(rnd.randrange(len(model)))
            index.remove(t)
        else:  # one tuple, or a run of them at once (add_run: as a replay stores a quiet run)
            run = []
            for _ in range(1 if rnd.random() < 0.7 else rnd.randint(2, 12)):
                row = [float(seq), seqs[seq], rnd.choice(pool), rnd.choice(pool)]
                row[position] = rnd.choice(pool)
                run.append(StoredTuple(0, seqs[seq], tuple(row)))
                seq += 1
            nulls = sum(t.row[position] is None or t.row[position] != t.row[position] for t in run)
            if len(run) == 1:
                assert index.add(run[0]) is (not nulls)
            else:
                assert index.add_run(run) == len(run) - nulls
            model += run
        index._check()
        everything = expected_range(model, position, None, None, True, True)
        assert len(index) == len(everything)
        assert same(index, everything)
        for _ in range(4 if step % 10 else 20):
            lo, hi = rnd.choice(bounds), rnd.choice(bounds)
            lo_inc, hi_inc = rnd.random() < 0.5, rnd.random() < 0.5
            got = list(index.range(lo, hi, lo_inc, hi_inc))
            assert same(got, expected_range(model, position, lo, hi, lo_inc, hi_inc)), (lo, hi, lo_inc, hi_inc)


def test_value_index_duplicates_keep_arrival_order_and_remove_by_identity() -> None:
    index = ValueIndex(2)
    ts = [StoredTuple(0, seq, (0.0, seq, 5.0)) for seq in range(5)]
    for t in reversed(ts):
        index.add(t)
        index._check()
    assert same(index.range(5.0, 5.0), ts)
    assert list(index.range(5.0, 5.0, lo_inclusive=False)) == []
    assert list(index.range(5.0, 5.0, hi_inclusive=False)) == []
    index.remove(ts[2])
    index._check()
    assert same(index, [ts[0], ts[1], ts[3], ts[4]])
    with pytest.raises(ValueError):
        index.remove(ts[2])


def test_value_index_ignores_null_values() -> None:
    index = ValueIndex(2)
    for seq, value in enumerate([None, NAN, 1.0]):
        t = StoredTuple(0, seq, (0.0, seq, value))
        index.add(t)
        index._check()
        index.remove(t)  # removing a NULL-valued tuple is a no-op, a real one leaves
        index._check()
    assert len(index) == 0


def test_value_index_on_ts_position() -> None:
    index = ValueIndex(0)
    tuples = [StoredTuple(0, i, (ts, i)) for i, ts in enumerate([3.0, -1.5, 3.0, 0.0])]
    for t in tuples:
        index.add(t)
    index._check()
    assert [t.seq for t in index.range(-1.5, 3.0, lo_inclusive=False)] == [3, 0, 2]


# ============================================================ time buckets


def model_range(model: list[StoredTuple], lo, hi, lo_inc: bool, hi_inc: bool) -> list[StoredTuple]:
    out = []
    for t in sorted(model, key=lambda t: (t.ts, t.seq)):
        ts = t.ts
        if lo is not None and (ts < lo or (ts == lo and not lo_inc)):
            continue
        if hi is not None and (ts > hi or (ts == hi and not hi_inc)):
            continue
        out.append(t)
    return out


def bucket_of(ts: float, width: float) -> int:
    """The bucket a tuple goes to (float division, as the structure computes it)."""
    return math.floor(ts / width)


@pytest.mark.parametrize("width", [0, -1, -0.5, NAN, INF, -INF])
def test_time_buckets_invalid_width(width: float) -> None:
    with pytest.raises(ValueError, match="width"):
        TimeBuckets(width)


# exact widths, and widths whose bucket boundaries k * width round (0.1, 0.3, 1/3)
@pytest.mark.parametrize("width", [1, 0.5, 0.25, 2.5, 3, 0.1, 0.3, 1 / 3])
@pytest.mark.parametrize("in_order", [True, False], ids=["in-order", "out-of-order"])
def test_time_buckets_seeded_stress(width: float, in_order: bool) -> None:
    rnd = random.Random(f"{width}-{in_order}")
    tb = TimeBuckets(width)
    assert tb.width == float(width)
    model: list[StoredTuple] = []
    seq = 0
    now = -20.0
    horizon = -math.inf
    for step in range(700):
        r = rnd.random()
        if r < 0.6:
            if in_order:
                now += rnd.choice([0, 0, 0.1, 0.25, 0.5, 1, 1.3, 3])
                ts = now
            else:
                ts = round(now + rnd.uniform(-6, 6), rnd.choice([0, 1, 2]))
                now += rnd.choice([0, 0.1, 0.5, 1])
            if ts < horizon:
                continue  # purged time is never written again, as in the matcher
            t = StoredTuple(0, seq, (ts, seq))
            seq += 1
            if rnd.random() < 0.3:  # a run at once (add_run), its first tuple and those after it
                run = [t]
                for _ in range(rnd.randint(1, 8)):
                    later = max(horizon, ts + rnd.choice([-0.5, 0, 0, 0.1, 0.3, 1, 2]))
                    run.append(StoredTuple(0, seq, (later, seq)))
                    seq += 1
                tb.add_run(run)
                model += run
            else:
                tb.add(t)
                model.append(t)
        elif r < 0.75 and model:
            t = model.pop(rnd.randrange(len(model)))
            tb.remove(t)
        elif r < 0.85:
            h = round(now - rnd.uniform(0, 8), rnd.choice([0, 1, 2]))
            before = {id(t) for t in model}
            dropped = tb.purge_before(h)
            dropped_ids = {id(t) for t in dropped}
            assert dropped_ids <= before and len(dropped_ids) == len(dropped)
            assert all(t.ts < h for t in dropped), "purge dropped a tuple at or after the horizon"
            kept = [t for t in model if id(t) not in dropped_ids]
            assert all(id(t) not in dropped_ids for t in model if t.ts >= h)
            dropped_buckets = {bucket_of(t.ts, width) for t in dropped}
            limit = bucket_of(h, width)
            for key in dropped_buckets:
                assert key < limit, "dropped the bucket of h or a later one"
            for t in kept:
                key = bucket_of(t.ts, width)
                assert key not in dropped_buckets, "dropped part of a bucket"
                assert key >= limit, "kept a whole bucket before the bucket of h"
            model = kept
            horizon = max(horizon, h)
        else:
            continue
        tb._check()
        assert len(tb) == len(model)
        assert same(tb, sorted(model, key=lambda t: (t.ts, t.seq))), "iteration not in (ts, arrival) order"
        assert tb.bucket_count == len({bucket_of(t.ts, width) for t in model})
        assert tb.oldest_ts() == (min(t.ts for t in model) if model else None)
        for _ in range(3 if step % 20 else 15):
            choices = [None, *(t.ts for t in rnd.sample(model, min(3, len(model)))), now - rnd.uniform(-2, 9)]
            lo, hi = rnd.choice(choices), rnd.choice(choices)
            lo_inc, hi_inc = rnd.random() < 0.5, rnd.random() < 0.5
            got = list(tb.range(lo, hi, lo_inc, hi_inc))
            assert same(got, model_range(model, lo, hi, lo_inc, hi_inc)), (lo, hi, lo_inc, hi_inc)
            # the engine's fetch: into a dict by seq (after what it holds), or only
            # counted when more than the room its budget leaves
            inclusive = model_range(model, lo, hi, True, True)
            assert tb.count(lo, hi) == len(inclusive)
            if lo is not None and hi is not None:
                held = {-1: None}
                room = rnd.choice([None, 0, len(inclusive) - 1, len(inclusive), len(inclusive) + 5])
                assert tb.gather(lo, hi, held, room) == len(inclusive)  # type: ignore[arg-type]
                fetched = [] if room is not None and len(inclusive) > room else inclusive
                assert list(held) == [-1, *(t.seq for t in fetched)]
                assert same(list(held.values())[1:], fetched)


def test_time_buckets_negative_and_fractional_timestamps() -> None:
    tb = TimeBuckets(0.5)
    stamps = [-1.75, -1.5, -0.5, -0.25, -0.0, 0.0, 0.3, 0.5, 0.75, -1.5]
    tuples = [StoredTuple(0, i, (ts, i)) for i, ts in enumerate(stamps)]
    for t in tuples:
        tb.add(t)
        tb._check()
    assert [t.seq for t in tb] == [0, 1, 9, 2, 3, 4, 5, 6, 7, 8]
    assert [t.seq for t in tb.range(-1.5, -0.25)] == [1, 9, 2, 3]
    assert [t.seq for t in tb.range(-1.5, -0.25, lo_inclusive=False, hi_inclusive=False)] == [2]
    assert [t.seq for t in tb.range(None, -1.5, hi_inclusive=False)] == [0]
    assert [t.seq for t in tb.range(0.0, None)] == [4, 5, 6, 7, 8]
    assert [t.seq for t in tb.range(0.0, None, lo_inclusive=False)] == [6, 7, 8]
    assert [t.seq for t in tb.range(1.0, -1.0)] == []
    dropped = tb.purge_before(-0.4)  # drops [-2, -1.5) and [-1.5, -1); [-0.5, 0) reaches past -0.4
    assert sorted(t.seq for t in dropped) == [0, 1, 9]
    tb._check()
    assert [t.seq for t in tb] == [2, 3, 4, 5, 6, 7, 8]
    assert tb.purge_before(-0.4) == []


def test_time_buckets_remove() -> None:
    tb = TimeBuckets(1)
    a, b, c = (StoredTuple(0, i, (1.5, i)) for i in range(3))
    for t in (a, b, c):
        tb.add(t)
    tb.remove(b)
    tb._check()
    assert same(tb, [a, c])
    with pytest.raises(KeyError):
        tb.remove(b)  # bucket still there, tuple gone
    tb.remove(a)
    tb.remove(c)
    tb._check()
    assert len(tb) == 0 and tb.bucket_count == 0 and tb.oldest_ts() is None
    with pytest.raises(KeyError):
        tb.remove(a)  # no bucket at all
    assert list(tb.range()) == []


def test_time_buckets_late_tuple_goes_after_equal_timestamps() -> None:
    tb = TimeBuckets(10)
    first = [StoredTuple(0, i, (float(ts), i)) for i, ts in enumerate([1, 2, 2, 5])]
    for t in first:
        tb.add(t)
    late = StoredTuple(0, 4, (2.0, 4))
    tb.add(late)
    tb._check()
    assert [t.seq for t in tb] == [0, 1, 2, 4, 3]


def test_time_buckets_purge_keeps_tuples_at_the_horizon_with_inexact_width() -> None:
    tb = TimeBuckets(0.1)
    t = StoredTuple(0, 0, (74.8, 0))
    tb.add(t)
    tb.purge_before(74.8)
    assert same(tb, [t])


# ============================================================ window state


def check_state_against_model(state: WindowState, model: list[list[StoredTuple]], indexed: list[set[int]]) -> None:
    state._check()
    assert len(state) == sum(len(m) for m in model)
    for s, store in enumerate(state.streams):
        assert same(store.buckets, sorted(model[s], key=lambda t: (t.ts, t.seq)))
        assert store.buckets.width == state.width
        assert set(store.values) == set(indexed[s])
        for pos, index in store.values.items():
            assert same(index, expected_range(model[s], pos, None, None, True, True))


def test_window_state_seeded_stress() -> None:
    rnd = random.Random(11)
    indexed = [{2}, {2, 3}, set()]
    state = WindowState(3, 1.0)
    state.configure(indexed, 1.0)
    model: list[list[StoredTuple]] = [[], [], []]
    seq = 0
    now = 0.0
    horizon = -math.inf
    for step in range(500):
        r = rnd.random()
        if r < 0.75:
            now += rnd.choice([0, 0.25, 0.5, 1])
            ts = max(horizon, now - rnd.choice([0, 0, 0, 1.5]))  # some late tuples
            s = rnd.randrange(3)
            row = (ts, seq, rnd.choice([None, -1, 0, 0, 2.5, 7]), rnd.choice([None, 1, 1, 3]))
            t = StoredTuple(s, seq, row)
            seq += 1
            state.insert(t)
            model[s].append(t)
        elif r < 0.9:
            h = now - rnd.choice([1, 2.5, 4])
            n = state.purge(h)
            before = sum(len(m) for m in model)
            alive = {id(t) for t in state}
            for m in model:
                assert all(id(t) in alive for t in m if t.ts >= h), "purge dropped a tuple at or after h"
            model = [[t for t in m if id(t) in alive] for m in model]
            assert n == before - sum(len(m) for m in model)
            horizon = max(horizon, h)
        else:
            width = rnd.choice([0.5, 1.0, 2.0, 0.25])
            if rnd.random() < 0.5:
                indexed = [rnd.choice([set(), {2}, {3}, {2, 3}, {0}]) for _ in range(3)]
            state.configure(indexed, width)
            assert state.width == width
        check_state_against_model(state, model, indexed)
        if step % 50 == 0:
            restored = WindowState.restore(json.loads(json.dumps(state.snapshot())), indexed)
            restored._check()
            assert restored.snapshot() == state.snapshot()
            for a, b in zip(restored.streams, state.streams, strict=True):
                assert set(a.values) == set(b.values)
                for pos in a.values:
                    assert [(t.seq, t.row) for t in a.values[pos]] == [(t.seq, t.row) for t in b.values[pos]]


def test_window_state_snapshot_restore_round_trip() -> None:
    indexed = [{2}, {3}]
    state = WindowState(2, 0.5)
    state.configure(indexed, 0.5)
    rows = [(0, (1.0, 0, 5.0, "x")), (1, (1.25, 0, None, "y")), (0, (0.5, 1, 5.0, None)), (1, (3.0, 1, 2.0, "a"))]
    for seq, (s, row) in enumerate(rows):
        state.insert(StoredTuple(s, seq, row))
        state._check()
    snap = state.snapshot()
    assert snap["width"] == 0.5
    restored = WindowState.restore(json.loads(json.dumps(snap)), indexed)  # plain data: survives JSON
    restored._check()
    assert restored.width == 0.5
    assert restored.snapshot() == snap
    for s in range(2):
        assert [(t.stream, t.seq, t.row) for t in restored.streams[s].buckets] == [
            (t.stream, t.seq, t.row) for t in state.streams[s].buckets
        ]
    assert [t.seq for t in restored.streams[0].values[2]] == [0, 2]  # value 5.0 twice, by seq
    assert [t.row[3] for t in restored.streams[1].values[3]] == ["a", "y"]
    restored.purge(1.0)
    restored._check()
    assert len(restored) == 3 and len(state) == 4  # independent copies


def test_window_state_rebuckets_when_width_changes() -> None:
    state = WindowState(1, 1.0)
    state.configure([{2}], 1.0)
    tuples = [StoredTuple(0, i, (ts, i, float(i % 3))) for i, ts in enumerate([0.1, 0.6, 1.2, 1.2, 3.9, 2.0])]
    for t in tuples:
        state.insert(t)
    state._check()
    assert state.streams[0].buckets.bucket_count == 4
    order = [t.seq for t in state]
    state.configure([{2}], 4.0)
    state._check()
    assert state.width == 4.0 and state.streams[0].buckets.width == 4.0
    assert state.streams[0].buckets.bucket_count == 1
    assert [t.seq for t in state] == order
    index = state.streams[0].values[2]
    state.configure([{2}], 0.5)
    state._check()
    assert state.streams[0].values[2] is index, "a kept index is not rebuilt"
    assert state.streams[0].buckets.bucket_count == 5
    assert [t.seq for t in state] == order
    assert state.purge(1.0) == 2
    state._check()


def test_window_state_configure_adds_drops_indexes_and_streams() -> None:
    state = WindowState(1, 1.0)
    state.configure([set()], 1.0)
    t0 = StoredTuple(0, 0, (1.0, 0, 3.0, None))
    t1 = StoredTuple(0, 1, (2.0, 1, 1.0, 4.0))
    state.insert(t0)
    state.insert(t1)
    state.configure([{2, 3}, {2}], 1.0)  # new indexes built from stored tuples; a second stream appears
    state._check()
    assert len(state.streams) == 2
    assert same(state.streams[0].values[2], [t1, t0])
    assert same(state.streams[0].values[3], [t1])
    t2 = StoredTuple(1, 2, (2.5, 0, 9.0))
    state.insert(t2)
    state._check()
    assert same(state.streams[1].values[2], [t2])
    state.configure([{3}, set()], 1.0)
    state._check()
    assert set(state.streams[0].values) == {3} and state.streams[1].values == {}


def test_window_state_check_accepts_nan_values() -> None:
    state = WindowState(1, 1.0)
    state.configure([{2}], 1.0)
    state.insert(StoredTuple(0, 0, (1.0, 0, NAN)))
    state._check()
