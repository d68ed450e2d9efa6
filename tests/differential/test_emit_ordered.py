"""``emit='ordered'`` against the exact reference (tests/references/reference.py).

The reference knows nothing of emission: it reports each result when its last tuple
arrives, and keeps the watermark ``W`` (rule 4). What ordered emission must release is
derived from that here (:class:`Expected`): after every operation, exactly the
results found so far with ``ts < W`` that were not released before, except those of a
query unregistered before they were due (withdrawn: a removed query reports nothing
more). So at every step the released results are complete up to the watermark and
contain nothing beyond it; the whole output is sorted by ``ts``, ties by the arrival
of the result's last tuple; and after :meth:`mqo.Matcher.flush_results` it equals
arrival mode's output as a multiset. Paths: ``push`` (with snapshot and restore
mid-stream), ``push_batch``, ``prepare`` + ``replay``, heartbeats and idle streams;
processing-time idleness with an injected clock.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mqo
from mqo.batch import MatchBatch
from mqo.snapshot_codec import decode_snapshot, encode_snapshot
from tests.differential.test_exact_differential import SETTINGS, batch_ids, compare, record, runs
from tests.references.exact_ops import (
    Heartbeat,
    Idle,
    Push,
    Register,
    Unregister,
    Workload,
    apply_reference,
    arrow_batch,
)
from tests.references.exact_workloads import workloads
from tests.references.lag_workloads import lagging_workloads
from tests.references.reference import Reference, Result, engine_results

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")


class Expected:
    """What ordered emission releases, worked out from the reference's results and its
    watermark; and a check of the order of everything released."""

    def __init__(self, ref: Reference) -> None:
        self.ref = ref
        self.held: list[tuple[Result, int]] = []  # (result, arrival of its last tuple)
        self.arrivals = 0
        self.released: list[tuple[Fraction, int]] = []  # (ts, arrival) of what came out

    def apply(self, op: Any) -> None:
        """One operation on the reference; its results are held."""
        if isinstance(op, Push):
            self.arrivals += 1
        if isinstance(op, Unregister):
            self.held = [(r, a) for r, a in self.held if r.query != op.name]
        found = apply_reference(self.ref, op)
        self.held.extend((r, self.arrivals) for r in found)

    def due(self) -> list[tuple[Result, int]]:
        """The held results the watermark has passed (they are held no more)."""
        w = self.ref.watermark
        if w is None:
            return []
        out = [(r, a) for r, a in self.held if r.ts < w]
        self.held = [(r, a) for r, a in self.held if not r.ts < w]
        return out

    def check(self, where: str, got: list[Result], due: list[tuple[Result, int]]) -> None:
        """``got`` (released now, in order) is exactly ``due``, and continues the order
        of everything released before: by ts, then the arrival of the last tuple."""
        compare(where, got, [r for r, _ in due])
        arrival_of: dict[Result, list[int]] = {}
        for r, a in due:
            arrival_of.setdefault(r, []).append(a)
        for r in got:
            a = min(arrival_of[r])  # equal results (rare): taken in arrival order
            arrival_of[r].remove(a)
            key = (r.ts, a)
            assert not self.released or self.released[-1] <= key, f"{where}: {key} after {self.released[-1]}"
            self.released.append(key)


def ordered(workload: Workload, **options: Any) -> mqo.Matcher:
    return mqo.Matcher(
        workload.schema.ddl(),
        allowed_lateness=workload.lateness,
        missing="null",
        time=workload.time,
        stream_lateness=workload.stream_lateness,
        idle_timeout=None,
        emit="ordered",
        **options,
    )


def other_op(eng: mqo.Matcher, op: Any) -> list[Any]:
    """A registration, removal, heartbeat or idle declaration; what it releases."""
    if isinstance(op, Register):
        eng.register_query(op.query.to_text())
        return []
    if isinstance(op, Unregister):
        eng.unregister_query(op.name)
        return []
    if isinstance(op, Idle):
        return eng.set_idle(op.stream)
    assert isinstance(op, Heartbeat)
    return eng.heartbeat(*((op.ts,) if op.stream is None else (op.stream, op.ts)))


def finish(where: str, eng: mqo.Matcher, model: Expected) -> None:
    """End of input: everything held comes out, in order."""
    assert eng.held_results == len(model.held), f"{where}: holds {eng.held_results}, expected {len(model.held)}"
    rest, model.held = model.held, []
    model.check(where, engine_results(eng.flush_results().matches()), rest)
    assert eng.held_results == 0


def run_push(workload: Workload, order: str, restore_at: frozenset[int] = frozenset(), **options: Any) -> None:
    model = Expected(workload.reference())
    eng = ordered(workload, order=order, **options)
    for step, op in enumerate(workload.ops):
        where = f"step {step} ({op!r})"
        if step in restore_at:
            eng = mqo.Matcher.restore(decode_snapshot(encode_snapshot(eng.snapshot())))
        if isinstance(op, Push):
            got = eng.push(op.stream, op.ts, dict(op.values), id=op.id)
        else:
            got = other_op(eng, op)
        model.apply(op)
        model.check(where, engine_results(got), model.due())
    finish("end", eng, model)


def run_batches(workload: Workload, order: str, **options: Any) -> None:
    model = Expected(workload.reference())
    eng = ordered(workload, order=order, **options)
    ids = workload.effective_ids()
    for step, indexes in runs(workload, same_stream=True):
        op = workload.ops[step]
        where = f"step {step} ({op!r}), batch of {len(indexes)}"
        if not indexes:
            got = other_op(eng, op)
            model.apply(op)
        else:
            pushes = [workload.ops[i] for i in indexes]
            stream = workload.schema.stream(op.stream)  # type: ignore[union-attr]
            table = arrow_batch(stream, pushes, batch_ids(workload, indexes, ids))  # type: ignore[arg-type]
            got = eng.push_batch(stream.name, table).matches()
            for p in pushes:
                model.apply(p)
        model.check(where, engine_results(got), model.due())
    finish("end", eng, model)


def run_replay(workload: Workload, order: str, **options: Any) -> None:
    """Segments of pushes through prepare + replay; after every yield the results
    released so far are those due by the watermark after that row."""
    model = Expected(workload.reference())
    eng = ordered(workload, order=order, **options)
    ids = workload.effective_ids()
    streams = [s.name for s in workload.schema.streams]
    for step, indexes in runs(workload, same_stream=False):
        op = workload.ops[step]
        if not indexes:
            model.apply(op)
            model.check(f"step {step} ({op!r})", engine_results(other_op(eng, op)), model.due())
            continue
        mine = {s: [i for i in indexes if workload.ops[i].stream == s] for s in streams}  # type: ignore[union-attr]
        prepared = []
        for s in streams:
            pushes = [workload.ops[i] for i in mine[s]]
            given = [ids[i] for i in mine[s]]
            prepared.append(eng.prepare(s, arrow_batch(workload.schema.stream(s), pushes, given)))  # type: ignore[arg-type]
        which = np.array([streams.index(workload.ops[i].stream) for i in indexes], np.int64)  # type: ignore[union-attr]
        rows = np.array([mine[streams[k]].index(i) for k, i in zip(which, indexes, strict=True)], np.int64)
        due: list[tuple[Result, int]] = []
        applied = 0
        for j, blocks in eng.replay(prepared, which, rows):
            while applied <= j:
                model.apply(workload.ops[indexes[applied]])
                due.extend(model.due())
                applied += 1
            model.check(
                f"segment at {step}, row {j}", engine_results(MatchBatch(eng.ensure_plan(), blocks).matches()), due
            )
            due = []
        while applied < len(indexes):
            model.apply(workload.ops[indexes[applied]])
            due.extend(model.due())
            applied += 1
        compare(f"segment at {step}: due but not released", [], [r for r, _ in due])
    finish("end", eng, model)


@settings(max_examples=40, **SETTINGS)
@given(workload=lagging_workloads(), order=st.sampled_from(("adaptive", "AJW", "WJA")))
def test_push_lagging(workload: Workload, order: str) -> None:
    record(workload)
    run_push(workload, order)


@settings(max_examples=30, **SETTINGS)
@given(workload=workloads(), order=st.sampled_from(("adaptive", "JAW")))
def test_push_registration_changes(workload: Workload, order: str) -> None:
    """Queries registered and removed while results are held (global time)."""
    record(workload)
    run_push(workload, order)


@settings(max_examples=20, **SETTINGS)
@given(workload=lagging_workloads(), data=st.data())
def test_snapshot_restore_holds_results(workload: Workload, data: Any) -> None:
    record(workload)
    at = data.draw(st.sets(st.integers(0, len(workload.ops)), max_size=3))
    run_push(workload, "AJW", restore_at=frozenset(at))


@settings(max_examples=25, **SETTINGS)
@given(workload=st.one_of(lagging_workloads(), workloads()), order=st.sampled_from(("AJW", "adaptive")))
def test_push_batch(workload: Workload, order: str) -> None:
    record(workload)
    run_batches(workload, order)


@settings(max_examples=25, **SETTINGS)
@given(workload=st.one_of(lagging_workloads(), workloads()), order=st.sampled_from(("WAJ", "adaptive")))
def test_prepare_replay(workload: Workload, order: str) -> None:
    record(workload)
    run_replay(workload, order)


@settings(max_examples=15, **SETTINGS)
@given(
    workload=st.one_of(lagging_workloads(), workloads()),
    how=st.sampled_from((run_push, run_batches, run_replay)),
)
def test_checked(workload: Workload, how: Any) -> None:
    """``check=True``: the clock's and the held results' invariants hold after every
    tuple, batch, heartbeat and idle declaration (``Clock._check``,
    ``HeldResults._check``), and what is released is still exactly what is due."""
    record(workload)
    how(workload, "AJW", check=True)


@settings(max_examples=10, **SETTINGS)
@given(workload=lagging_workloads(), data=st.data())
def test_snapshot_restore_checked(workload: Workload, data: Any) -> None:
    """``check=True`` travels with the snapshot: a restored clock and holder are
    checked as they are loaded and after every operation from there."""
    record(workload)
    at = data.draw(st.sets(st.integers(0, len(workload.ops)), max_size=3))
    run_push(workload, "AJW", restore_at=frozenset(at), check=True)


# ------------------------------------------------------------- by example

DDL = "CREATE STREAM B (x FLOAT); CREATE STREAM H (y FLOAT);"
JOIN = "Query ID: j\nSELECT * FROM B, H MAXWINDOW 10 sec WHERE B.x = H.y"


def test_lagging_stream_all_matched_in_order_and_bounded() -> None:
    """H lags 60 s behind B (allowed lateness 5): nothing is late, ordered output is
    sorted and equals arrival mode's as a multiset, and what is held stays within the
    lag (a minute of results, not the whole input)."""
    arrival = mqo.Matcher(DDL, allowed_lateness=5, idle_timeout=None)
    ordered_m = mqo.Matcher(DDL, allowed_lateness=5, idle_timeout=None, emit="ordered")
    found: dict[str, list[Any]] = {"arrival": [], "ordered": []}
    most_held = 0
    for m in (arrival, ordered_m):
        m.register_query(JOIN)
    for t in range(2000):
        for name, m in (("arrival", arrival), ("ordered", ordered_m)):
            found[name] += m.push("B", float(t), {"x": float(t % 7)})
            found[name] += m.push("H", float(t - 60), {"y": float(t % 5)})
        most_held = max(most_held, ordered_m.held_results)
    assert arrival.late_count == ordered_m.late_count == 0
    found["ordered"] += ordered_m.flush_results().matches()
    assert Counter(map(repr, found["arrival"])) == Counter(map(repr, found["ordered"]))
    stamps = [m.ts for m in found["ordered"]]
    assert stamps == sorted(stamps) and len(stamps) > 1000
    # results held: those at or after the watermark (~65 s behind B's newest), ~2 per second
    per_second = len(stamps) / 2000
    assert 0 < most_held <= 2 * 66 * per_second + 10, (most_held, per_second)


def test_idle_timeout_releases_results() -> None:
    """A silent stream holds results back until idle_timeout passes (processing time);
    release() then gives them, in order."""
    now = [0.0]
    m = mqo.Matcher(DDL + "CREATE STREAM K (z FLOAT);", idle_timeout=30, emit="ordered", now=lambda: now[0])
    m.register_query("SELECT * FROM B WHERE B.x > 0")
    m.register_query(JOIN)
    assert m.push("B", 5.0, {"x": 1.0}) == [] and m.push("H", 7.0, {"y": 1.0}) == []
    assert m.push("B", 2.0, {"x": 2.0}) == []  # K has sent nothing: the watermark is -inf
    assert len(m.release()) == 0 and m.held_results == 3
    now[0] = 20.0
    assert m.push("B", 20.0, {"x": 0.0}) == [] and m.push("H", 21.0, {"y": 5.0}) == []  # K still holds back
    now[0] = 31.0  # K silent for 31 s: idle; B and H spoke 11 s ago
    got = m.release().matches()
    assert [(r.query, r.ts) for r in got] == [("1", 2.0), ("1", 5.0), ("j", 7.0)]
    assert m.held_results == 0


def test_ties_in_ts_by_arrival_then_registration() -> None:
    m = mqo.Matcher(DDL, emit="ordered", idle_timeout=None, allowed_lateness=10)
    m.register_query("Query ID: late\nSELECT * FROM B WHERE B.x >= 0")
    m.register_query("Query ID: early\nSELECT * FROM B WHERE B.x >= 1")
    m.push("B", 3.0, {"x": 1.0}, id=10)
    m.push("B", 1.0, {"x": 2.0}, id=11)
    m.push("B", 3.0, {"x": 0.0}, id=12)
    m.heartbeat("H", 100)
    got = m.heartbeat(100)
    assert [(r.ts, r.ids["B"], r.query) for r in got] == [
        (1.0, 11, "late"),
        (1.0, 11, "early"),
        (3.0, 10, "late"),
        (3.0, 10, "early"),
        (3.0, 12, "late"),
    ]


def test_released_when_the_watermark_passes_not_at_it() -> None:
    """A result at exactly the watermark waits: a tuple at that ts is not late yet."""
    m = mqo.Matcher(DDL, emit="ordered", idle_timeout=None, allowed_lateness=0.1)
    m.register_query("SELECT * FROM B WHERE B.x > 0")
    m.heartbeat("H", 1e9)
    assert m.push("B", 0.2, {"x": 1.0}) == []
    assert m.push("B", 0.3, {"x": 0.0}) == []  # watermark 0.3 - 0.1 = 0.2 exactly: not past 0.2
    assert [r.ts for r in m.push("B", 0.30000000000000004, {"x": 0.0})] == [0.2]


def test_unregistered_query_withdraws_held_results() -> None:
    m = mqo.Matcher(DDL, emit="ordered", idle_timeout=None, allowed_lateness=5)
    a = m.register_query("SELECT * FROM B WHERE B.x > 0")
    m.register_query("Query ID: keep\nSELECT * FROM B WHERE B.x > 1")
    m.heartbeat("H", 1e9)
    m.push("B", 1.0, {"x": 2.0})
    m.unregister_query(a)
    m.register_query("Query ID: after\nSELECT * FROM B WHERE B.x > 5")  # a new plan renumbers slots
    assert [(r.query, r.ts) for r in m.push("B", 10.0, {"x": 9.0})] == [("keep", 1.0)]
    assert [(r.query, r.ts) for r in m.flush_results().matches()] == [("keep", 10.0), ("after", 10.0)]


def test_snapshot_of_held_results_needs_ordered() -> None:
    m = mqo.Matcher(DDL, emit="ordered", idle_timeout=None)
    m.register_query("SELECT * FROM B WHERE B.x > 0")
    m.push("B", 1.0, {"x": 2.0})
    snap = m.snapshot()
    with pytest.raises(ValueError, match="emit='ordered'"):
        mqo.Matcher.restore(snap, emit="arrival")
    assert [r.ts for r in mqo.Matcher.restore(snap).flush_results().matches()] == [1.0]


def test_emit_is_checked() -> None:
    with pytest.raises(ValueError, match="emit must be one of arrival, ordered"):
        mqo.Matcher(DDL, emit="sorted")


@pytest.mark.parametrize("how", ["push", "push_batch"])
def test_external_time_takes_the_watermark_from_heartbeats(how: str) -> None:
    """time='external' (the Spark streaming stage's matchers): tuples do not move the
    watermark, heartbeats do; a tuple older than it is late; no lateness applies."""
    m = mqo.Matcher(DDL, time="external", allowed_lateness=100, emit="ordered")
    m.register_query("SELECT * FROM B WHERE B.x > 0")

    def push(ts: float) -> list[Any]:
        if how == "push":
            return m.push("B", ts, {"x": 1.0})
        return m.push_batch("B", {"ts": np.array([ts]), "x": np.array([1.0])}).matches()

    assert push(50.0) == [] and push(500.0) == [] and m.watermark == -np.inf
    assert [r.ts for r in m.heartbeat(60.0)] == [50.0] and m.watermark == 60.0
    assert push(59.9) == [] and m.late_count == 1  # older than the watermark: late (allowed_lateness does not apply)
    assert push(60.0) == [] and m.late_count == 1
    assert [r.ts for r in m.heartbeat(1000.0)] == [60.0, 500.0]


def test_aggregates_alike_under_ordered_emission() -> None:
    """Aggregate queries are emitted by their windows; emit='ordered' changes nothing
    there (their filter matches feed the slices at once), and match queries beside
    them come out in ts order."""
    found = {}
    for emit in ("arrival", "ordered"):
        m = mqo.Matcher("REGISTER STREAM H (p INTEGER, rate FLOAT);", emit=emit)
        m.register_queries(
            "Query ID: avg\nSELECT H.p, AVG(H.rate), COUNT(*) FROM H [RANGE 2 min SLIDE 1 min] "
            "WHERE H.rate > 50 GROUP BY H.p;\nQuery ID: hot\nSELECT * FROM H WHERE H.rate > 90;"
        )
        matches = []
        for i in range(30):
            matches += m.push("H", 20.0 * i, {"p": i % 3, "rate": 40.0 + 3 * i})
        rows = [*m.poll_aggregates(), *m.flush()]
        matches += m.flush_results().matches()
        found[emit] = ([(r.query, r.window_start, r.window_end, r.group, r.values) for r in rows], matches)
    assert found["arrival"][0] == found["ordered"][0] and len(found["ordered"][0]) > 10
    assert found["arrival"][1] == found["ordered"][1] and len(found["ordered"][1]) > 5


@pytest.mark.parametrize("emit", ["arrival", "ordered"])
def test_snapshot_right_after_unregister(emit: str) -> None:
    """A snapshot taken right after a removal records the plan compiled whole (its
    list numbers), not the updated plan the next tuple would have made."""
    ddl = "CREATE STREAM A (x FLOAT, y FLOAT); CREATE STREAM B (x FLOAT, y FLOAT);"
    m = mqo.Matcher(ddl, emit=emit, idle_timeout=None, allowed_lateness=1)
    m.register_query("Query ID: q1\nSELECT * FROM A, B MAXWINDOW 2 sec WHERE A.x + B.x <= 0.1 AND A.x <= 0")
    m.register_query("Query ID: q2\nSELECT * FROM A, B MAXWINDOW 2 sec WHERE A.x <= 0 OR A.ts <= 0.1")
    m.register_query("Query ID: q3\nSELECT * FROM A WHERE A.x <= 0")
    for i in range(6):
        m.push("A", 0.1 * (i + 1), {"x": 0.0, "y": 0.0})
    m.unregister_query("q2")
    restored = mqo.Matcher.restore(decode_snapshot(encode_snapshot(m.snapshot())))
    for eng in (m, restored):
        found = eng.push("B", 0.7, {"x": 0.1, "y": 0.0}) + eng.flush_results().matches()
        assert sorted((r.query, r.ts) for r in found if r.query == "q1") == [("q1", 0.7)] * 6


def test_a_heartbeat_of_every_stream_is_one_event() -> None:
    """``heartbeat(ts)`` moves every stream at once: a stream it wakes from idleness
    (here C, 60 s of lateness) holds the watermark back again, so nothing is released
    on the strength of the other streams having moved first."""
    m = mqo.Matcher(
        "CREATE STREAM A (x FLOAT); CREATE STREAM B (x FLOAT); CREATE STREAM C (x FLOAT);",
        stream_lateness={"C": 60.0},
        idle_timeout=None,
        emit="ordered",
    )
    m.register_query("Query ID: q\nSELECT * FROM A WHERE A.ts <= 100.1")
    for stream, ts in [("A", 100.1), ("C", 100.1), ("A", 100.7), ("B", 100.1)]:
        assert m.push(stream, ts, {"x": 0.0}) == []
    assert m.set_idle("C") == [] and m.watermark == 100.1
    assert m.heartbeat(100.2) == []  # C speaks again: its watermark is 40.2
    assert (m.watermark, m.held_results) == (100.1, 1)
    assert [r.ts for r in m.heartbeat(200.0)] == [100.1]
