"""The anchors' ``_check()`` methods (``check=True``) catch a corrupted structure.

Each structure is brought to a real state (a matcher with ``check=True`` run on a
workload, or the structure fed directly), its ``_check()`` passes, then one field is
corrupted and ``_check()`` must raise ``AssertionError``. A corruption of a live
matcher is also caught by its next operation: the checks are wired in. Passing on
generated workloads is held by the differential tests run under ``check=True``
(tests/differential: ``test_push_checked``, ``test_*_checked``) and by
tests/unit/test_kernels.py for the kernel tables.
"""

from __future__ import annotations

import copy
import heapq
import warnings
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import mqo
from indexes.kill_bitsets import KillBitsets, ListUsers, bitset_of, words_for
from mqo.aggregation.counts import CountStore
from mqo.aggregation.slices import SliceStore
from mqo.clock import Clock
from mqo.emit import HeldResults
from mqo.snapshot_codec import decode_snapshot, encode_snapshot

DDL = "REGISTER STREAM A (x FLOAT, k INTEGER); REGISTER STREAM B (y FLOAT);"
JOIN = "Query ID: j\nSELECT * FROM A, B MAXWINDOW 5 sec WHERE A.x = B.y"


def matcher(**options: Any) -> mqo.Matcher:
    """A matcher with ``check=True`` that has seen two lagging streams."""
    m = mqo.Matcher(DDL, check=True, allowed_lateness=2, idle_timeout=None, **options)
    m.register_query(JOIN)
    m.register_query("Query ID: s\nSELECT * FROM A WHERE A.x > 1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for t in range(30):
            m.push("A", float(t), {"x": float(t % 4), "k": t % 3})
            m.push("B", t - 1.5, {"y": float(t % 3)})
    return m


def caught(check: Callable[[], None], corrupt: Callable[[], None]) -> None:
    """``check`` passes, and raises AssertionError once ``corrupt`` has run."""
    check()
    corrupt()
    with pytest.raises(AssertionError):
        check()


# ------------------------------------------------------------------ clock


def _newest_back(c: Clock) -> None:
    c.newest[0] -= 10.0


def _mark_ahead(c: Clock) -> None:
    assert c.mark is not None
    c.mark = (max(c.newest) + 100.0, c.mark[1])


def _mark_behind(c: Clock) -> None:
    c.mark = (min(c.newest) - 100.0, 0)  # behind every stream: the watermark went back, too


def _lateness_number(c: Clock) -> None:
    c.lateness_of[1] = len(c.lateness)


def _lateness_value(c: Clock) -> None:
    c.lateness[0] = 3.0  # its exact value still says 2


def _horizon_ahead(c: Clock) -> None:
    assert c.mark is not None and c._horizon is not None
    c._horizon = ((c.mark[0] + 50.0, c.mark[1]), Fraction(0))


def _idle_flags(c: Clock) -> None:
    c.idle.append(False)


@pytest.mark.parametrize(
    "corrupt",
    [_newest_back, _mark_ahead, _mark_behind, _lateness_number, _lateness_value, _horizon_ahead, _idle_flags],
)
def test_clock_check_catches_corruption(corrupt: Callable[[Clock], None]) -> None:
    clock = matcher().clock
    caught(clock._check, lambda: corrupt(clock))


@pytest.mark.parametrize("check", [True, False])
def test_a_clock_going_back_is_caught_by_the_next_push(check: bool) -> None:
    """Under ``check=True`` every push checks the clock (here: a stream's newest ts
    went back); without it the same matcher goes on unchecked."""
    m = mqo.Matcher(DDL, check=check, allowed_lateness=2, idle_timeout=None)
    m.register_query(JOIN)
    m.push("A", 40.0, {"x": 1.0, "k": 0})
    m.push("B", 40.0, {"y": 1.0})
    m.clock.newest[1] -= 20.0
    if check:
        with pytest.raises(AssertionError, match="went back"):
            m.push("A", 41.0, {"x": 1.0, "k": 0})
    else:
        m.push("A", 41.0, {"x": 1.0, "k": 0})


def test_a_restored_clock_starts_its_checks_afresh() -> None:
    """A snapshot's time is the restored clock's: loading one behind this clock's is
    no going back."""
    m = matcher()
    early = m.clock.snapshot()
    m.push("A", 100.0, {"x": 1.0, "k": 0})
    m.push("B", 100.0, {"y": 1.0})
    m.clock._check()
    m.clock.load(early)
    m.clock._check()


def test_a_restored_matcher_is_checked_from_its_first_operation() -> None:
    m = matcher(emit="ordered")
    restored = mqo.Matcher.restore(decode_snapshot(encode_snapshot(m.snapshot())))
    assert restored.config.check
    restored.clock.newest[1] -= 5.0
    with pytest.raises(AssertionError, match="went back"):
        restored.push("A", 30.0, {"x": 0.0, "k": 0})


# ---------------------------------------------------------- held results


def held_matcher() -> mqo.Matcher:
    """An ordered matcher holding results: B lags A by 20 s."""
    m = mqo.Matcher(DDL, check=True, emit="ordered", idle_timeout=None)
    m.register_query(JOIN)
    m.register_query("Query ID: s\nSELECT * FROM A WHERE A.x > 1")
    for t in range(30):
        m.push("A", float(t), {"x": float(t % 4), "k": t % 3})
        m.push("B", t - 20.0, {"y": float(t % 3)})
    assert m.held_results > 3
    return m


def _heap_order(h: HeldResults) -> None:
    h._heap[0], h._heap[-1] = h._heap[-1], h._heap[0]


def _ts_key(h: HeldResults) -> None:
    ts, arrival, found, block = h._heap[-1]
    h._heap[-1] = (ts + 0.5, arrival, found, block)


def _found_twice(h: HeldResults) -> None:
    ts, arrival, _, block = h._heap[-1]
    h._heap[-1] = (ts, arrival, h._heap[0][2], block)
    heapq.heapify(h._heap)


def _no_query(h: HeldResults) -> None:
    h._heap[-1][3].slots = 0


@pytest.mark.parametrize("corrupt", [_heap_order, _ts_key, _found_twice, _no_query])
def test_held_results_check_catches_corruption(corrupt: Callable[[HeldResults], None]) -> None:
    m = held_matcher()
    held = m.pipeline.holding()
    caught(lambda: held._check(None, m.ensure_plan().n_slots, m.pipeline.arrived), lambda: corrupt(held))


def test_held_results_check_catches_a_result_the_watermark_passed() -> None:
    m = held_matcher()
    held, clock = m.pipeline.holding(), m.clock
    mark = clock.mark
    assert mark is not None and held.first_ts is not None
    held._check(lambda ts: clock.passed(ts, mark))
    later = (held.first_ts + 1.0, mark[1])  # a watermark past the first held result, not released at
    with pytest.raises(AssertionError, match="watermark has passed"):
        held._check(lambda ts: clock.passed(ts, later))


def test_a_corrupted_holder_is_caught_by_the_next_push() -> None:
    m = held_matcher()
    _ts_key(m.pipeline.holding())
    with pytest.raises(AssertionError, match="keyed by another ts"):
        m.push("A", 30.0, {"x": 0.0, "k": 0})  # moves no watermark: releases nothing


# ------------------------------------------------------------ slice stores


def slice_store() -> SliceStore:
    """A store of two columns (one INTEGER) and three groups over slices 1, 2, 5."""
    store = SliceStore(["x", "k"], [False, True], Fraction(1))
    slices = np.array([1, 1, 2, 5, 5, 5], np.int64)
    codes = np.array([0, 1, 0, 2, 1, 0], np.int64)
    fvals = np.array([[1.5, 3.0], [np.nan, 1.0], [2.0, np.nan], [-1.0, 7.0], [0.5, 2.0], [4.0, -3.0]])
    ivals = np.nan_to_num(fvals[:, [1, 1]]).astype(np.int64)
    store.add(slices, codes, [("a",), ("b",), ("c",)], fvals, ivals, None)
    return store


def _slices_disordered(s: SliceStore) -> None:
    s.nums = s.nums[::-1].copy()


def _slice_without_data(s: SliceStore) -> None:
    s.rows[1] = 0
    s.fpart[1] = 0
    s.ipart[1] = 0


def _min_above_max(s: SliceStore) -> None:
    from indexes.slice_fields import MAX, MIN

    s.fpart[0, 0, 0, MIN] = s.fpart[0, 0, 0, MAX] + 1


def _exact_min_apart(s: SliceStore) -> None:
    from indexes.slice_fields import IMIN

    s.ipart[0, 0, 1, IMIN] -= 1


def _counted_past_rows(s: SliceStore) -> None:
    from indexes.slice_fields import N

    s.ipart[0, 0, 0, N] = s.rows[0, 0] + 1


def _data_past_the_held(s: SliceStore) -> None:
    s.rows[len(s.nums), 0] = 1


def _group_codes(s: SliceStore) -> None:
    s.groups[("b",)] = 0


def _partial_shapes(s: SliceStore) -> None:
    s.ipart = s.ipart[:, :, :1]


@pytest.mark.parametrize(
    "corrupt",
    [
        _slices_disordered,
        _slice_without_data,
        _min_above_max,
        _exact_min_apart,
        _counted_past_rows,
        _data_past_the_held,
        _group_codes,
        _partial_shapes,
    ],
)
def test_slice_store_check_catches_corruption(corrupt: Callable[[SliceStore], None]) -> None:
    store = slice_store()
    store._check()
    dropped = copy.deepcopy(store)
    dropped.drop_before(2)  # dropping keeps the invariants too
    dropped._check()
    caught(store._check, lambda: corrupt(store))


AGGREGATES = (
    "Query ID: t\nSELECT A.k, COUNT(*), SUM(A.k), MIN(A.x) FROM A [RANGE 10 SLIDE 5] GROUP BY A.k",
    "Query ID: r\nSELECT COUNT(*), MAX(A.k) FROM A [ROWS 3 SLIDE 2] GROUP BY A.k",
)


def aggregating(check: bool = True) -> mqo.Matcher:
    m = mqo.Matcher(DDL, check=check, allowed_lateness=2, idle_timeout=None)
    for text in AGGREGATES:
        m.register_query(text)
    m.set_idle("B")  # B sends nothing: it does not hold the watermark back
    for t in range(40):
        m.push("A", float(t), {"x": float(t % 4), "k": t % 3})
    return m


def test_a_corrupted_slice_store_is_caught_by_the_next_push() -> None:
    m = aggregating()
    assert m.aggregator is not None
    (store,) = m.aggregator.stores.values()
    assert store.slices_kept > 1
    store.nums = store.nums[::-1].copy()
    with pytest.raises(AssertionError, match="ascending"):
        m.push("A", 40.0, {"x": 1.0, "k": 0})


# ------------------------------------------------------------ count stores


def count_store() -> CountStore:
    m = aggregating()
    assert m.aggregator is not None
    (store,) = m.aggregator.count_stores.values()
    assert store.group_states and all(not g.store.empty for g in store.group_states)
    return store


def _taken(c: CountStore) -> None:
    c.taken += 1


def _first_ts_lost(c: CountStore) -> None:
    first = c.group_states[0].first_ts
    del first[max(first)]


def _slice_missing_a_row(c: CountStore) -> None:
    c.group_states[0].store.rows[0, 0] -= 1


def _pending_of_no_group(c: CountStore) -> None:
    C = len(c.columns)
    c.pending.append(
        (np.array([100.0]), np.array([99]), np.array([len(c.group_keys)]), np.zeros((1, C)), np.zeros((1, C), np.int64))
    )
    c.taken += 1


def _grain(c: CountStore) -> None:
    c.grain = 4


def _group_slices(c: CountStore) -> None:
    c.group_states[0].store.nums[-1] += 1


@pytest.mark.parametrize(
    "corrupt", [_taken, _first_ts_lost, _slice_missing_a_row, _pending_of_no_group, _grain, _group_slices]
)
def test_count_store_check_catches_corruption(corrupt: Callable[[CountStore], None]) -> None:
    store = count_store()
    caught(store._check, lambda: corrupt(store))


def test_a_corrupted_count_store_is_caught_by_the_next_emission_only_under_check() -> None:
    for check in (True, False):
        m = aggregating(check)
        assert m.aggregator is not None
        (store,) = m.aggregator.count_stores.values()
        store.taken += 1
        if check:
            with pytest.raises(AssertionError, match="rows lost or doubled"):
                m.flush()
        else:
            m.flush()


# ------------------------------------------------------------ kernel tables


BUDGET = 400  # bytes per table: strides of 4 to 16 for 40 positions


def kernel_tables(op: str, extended: bool = False) -> KillBitsets:
    """Tables over two lists of 70 slots (the first with a stride above 1: rows stand
    for the users of several positions), and a second part over 30 slots more."""
    rng = np.random.default_rng(7)

    def users(n: int, slots: range) -> ListUsers:
        per = [rng.choice(list(slots), size=int(rng.integers(0, 4)), replace=False) for _ in range(n)]
        offsets = np.concatenate([[0], np.cumsum([len(u) for u in per])]).astype(np.int64)
        flat = np.concatenate(per).astype(np.int32) if per else np.zeros(0, np.int32)
        return ListUsers(op, offsets, flat)

    first = KillBitsets(
        [users(40, range(70)), users(9, range(70))], 70, bitset_of(np.arange(70), words_for(70)), BUDGET
    )
    if not extended:
        return first
    return first.extended([users(25, range(70, 100))], 100, bitset_of(np.arange(100), words_for(100)), BUDGET)


def _stride(t: KillBitsets) -> None:
    t.strides[0] = 3


def _mode(t: KillBitsets) -> None:
    t.modes[0] = 7


def _per_list_length(t: KillBitsets) -> None:
    t.ns = t.ns[:-1]


def _part(t: KillBitsets) -> None:
    t.part[0] = 2


def _checkpoint_row(t: KillBitsets) -> None:
    l = len(t.modes) - 1  # the last list: in the second part when there is one
    table = t.table2 if t.part[l] else t.table
    table[int(t.any_rows[l]), 0] ^= np.uint64(1 << 5)


def _middle_row(t: KillBitsets) -> None:
    mode, stride, n = int(t.modes[0]), int(t.strides[0]), int(t.ns[0])
    assert stride > 1
    first = int(t.prefix_rows[0]) if mode in (0, 2) else int(t.suffix_rows[0])
    j = (n // stride + 2) // 2
    t.table[first + j] = 0 if t.table[first + j].any() else np.uint64(1)


def _user_out_of_range(t: KillBitsets) -> None:
    t.users[int(t.offsets[int(t.csr_base[0])])] = t.n_slots


def _table_rows(t: KillBitsets) -> None:
    t.any_rows[0] = t.table.shape[0] + 5


KERNEL_CORRUPTIONS = [
    _stride,
    _mode,
    _per_list_length,
    _part,
    _checkpoint_row,
    _middle_row,
    _user_out_of_range,
    _table_rows,
]


@pytest.mark.parametrize(
    ("op", "extended", "corrupt"),
    [
        (op, extended, corrupt)
        for op in ("<", ">", "=", "!=")
        for extended in (False, True)
        for corrupt in KERNEL_CORRUPTIONS
        if not (op == "!=" and corrupt is _middle_row)  # a list of != has one row
    ],
)
def test_kernel_tables_check_catches_corruption(
    op: str, extended: bool, corrupt: Callable[[KillBitsets], None]
) -> None:
    tables = kernel_tables(op, extended)
    caught(tables._check, lambda: corrupt(tables))


def test_a_matchers_kernel_tables_are_checked_when_a_plan_is_attached() -> None:
    m = matcher()
    tables = m.ensure_plan().kill_bitsets(0)
    tables._check()
    tables.strides[0] = 3
    with pytest.raises(AssertionError, match="stride"):
        m.pipeline.attach(m.ensure_plan())
