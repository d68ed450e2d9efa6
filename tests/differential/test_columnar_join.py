"""The columnar join step (mqo.columnar_join, mqo.pair_step) against the engine, result for result.

Small generated two-stream workloads: values drawn from small pools so that joins tie
and land on their constants' boundaries (constants taken from the data, factors and
offsets that are not dyadic, INTEGER and FLOAT columns, NULLs), timestamps out of
order within the lateness and some late, several MAXWINDOWs, window predicates,
queries with OR and with residuals, and enough queries in some workloads that slots
pass the 64-bit word boundaries. The engine's results are those of ``Matcher.push``,
one tuple at a time; the step's, one ``join_batch`` call over both streams'
prepared batches in the same arrival order, or ``Matcher.replay`` in rounds (the step
keeps the rows of earlier rounds) with registrations, pushed tuples and a snapshot
restored between rounds. The results must be equal, and so must the step's result
blocks handed over as the engine's.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mqo
from mqo.batch import MatchBatch
from mqo.columnar_join import join_batch
from mqo.pair_tables import PairTables, Unsupported

DDL = "REGISTER STREAM A (x FLOAT, y INTEGER, z FLOAT); REGISTER STREAM B (x FLOAT, y INTEGER, w INTEGER);"
FLOATS = (0.1, 0.2, 0.3, 0.5, 1.0, 1.5, 2.0, 0.7, 3.3)
INTS = (-2, 0, 1, 2, 3, 5)
TIMES = (0.0, 0.1, 0.2, 0.3, 0.5, 1.0, 1.1, 1.2, 1.5, 2.0, 2.3, 2.5, 3.0, 3.1, 4.0)
pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")


def _value(rng: random.Random, pool: tuple[Any, ...]) -> Any:
    return None if rng.random() < 0.1 else rng.choice(pool)


def _constant(rng: random.Random, pool: tuple[Any, ...]) -> str:
    """A constant: one of the data's values (ties), a non-dyadic decimal, or a fraction's text."""
    pick = rng.random()
    if pick < 0.5:
        return repr(rng.choice(pool))
    if pick < 0.8:
        return rng.choice(("0.1", "0.3", "-0.2", "1.1", "0"))
    return rng.choice(("1/3", "2/7"))


def _condition(rng: random.Random) -> str:
    op = rng.choice(("<", "<=", ">", ">=", "=", "!="))
    shape = rng.randrange(7)
    if shape == 0:
        return f"A.x {op} B.x + {_constant(rng, FLOATS)}"
    if shape == 1:
        return f"A.x {op} {rng.choice(('2', '0.1', '3', '1/3'))} * B.x + {_constant(rng, FLOATS)}"
    if shape == 2:
        return f"A.y {op} B.w + {_constant(rng, INTS)}"
    if shape == 3:
        return f"A.z {op} B.y - {_constant(rng, INTS)}"
    if shape == 4:
        return f"3 * A.y + 1 {op} B.y"
    if shape == 5:
        return f"A.x {op} {_constant(rng, FLOATS)}"
    return f"B.w {op} {_constant(rng, INTS)}"


KEYS = ("A.y = B.w", "A.x = B.x", "A.z = B.y", "A.y = B.w + 0", "B.y = A.z")  # equi-joins: INTEGER, FLOAT, mixed


def _query(rng: random.Random, k: int, key: str | None = None) -> str:
    """A query over A and B; with ``key``, every disjunct requires that equality."""
    window = rng.choice(("1", "2.5", "0.3", "10"))
    parts = [_condition(rng) for _ in range(rng.randrange(0 if key else 1, 4))]
    if rng.random() < 0.2:
        parts.append(f"A.x * B.x > {_constant(rng, FLOATS)}")  # a residual
    where = " AND ".join([key, *parts] if key else parts)
    if rng.random() < 0.2:
        where = f"({where}) OR ({' AND '.join([key, _condition(rng)] if key else [_condition(rng)])})"
    clause = ""
    if rng.random() < 0.4:
        clause = f" WINDOW A.ts {rng.choice(('<=', '>=', '<'))} B.ts + {rng.choice(('0', '0.1', '-0.2', '1/3'))}"
    return f"Query ID: q{k}\nSELECT * FROM A, B{clause} MAXWINDOW {window} WHERE {where};"


def _workload(seed: int, key: str | None = None) -> tuple[list[str], list[tuple[str, float, dict[str, Any], int]]]:
    rng = random.Random(seed)
    queries = [_query(rng, k, key) for k in range(rng.choice((6, 20, 90)))]
    arrivals = []
    clock = 0.0
    for i in range(rng.randrange(20, 60)):
        stream = rng.choice("AB")
        clock = max(clock, rng.choice(TIMES)) if rng.random() < 0.7 else clock
        ts = clock - rng.choice((0.0, 0.0, 0.1, 0.5, 2.0))  # out of order, late now and then
        if stream == "A":
            values = {"x": _value(rng, FLOATS), "y": _value(rng, INTS), "z": _value(rng, FLOATS)}
        else:
            values = {"x": _value(rng, FLOATS), "y": _value(rng, INTS), "w": _value(rng, INTS)}
        arrivals.append((stream, round(ts, 1), values, i))
    return queries, arrivals


def _matcher(queries: list[str], store: str = "all", emit: str = "arrival") -> mqo.Matcher:
    matcher = mqo.Matcher(DDL, allowed_lateness=0.5, missing="null", idle_timeout=None, store=store, emit=emit)
    for text in queries:
        matcher.register_query(text)
    return matcher


def _engine(
    queries: list[str], arrivals: list[tuple[str, float, dict[str, Any], int]], store: str = "all"
) -> set[tuple[str, int, int]]:
    matcher = _matcher(queries, store)
    found = set()
    for stream, ts, values, i in arrivals:
        for m in matcher.push(stream, ts, values, id=i):
            if len(m.ids) == 2:
                found.add((m.query, m.ids["A"], m.ids["B"]))
    return found


def _prepared(
    matcher: mqo.Matcher, arrivals: list[tuple[str, float, dict[str, Any], int]]
) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """Both streams' batches prepared, and the arrival order as (batch, row) per arrival."""
    prepared = []
    which = np.array([0 if s == "A" else 1 for s, *_ in arrivals], np.int64)
    row = np.zeros(len(arrivals), np.int64)
    for k, name in enumerate("AB"):
        mine = [a for a in arrivals if a[0] == name]
        row[which == k] = np.arange(len(mine))
        columns: dict[str, Any] = {"ts": np.array([a[1] for a in mine], np.float64)}
        columns["id"] = np.array([a[3] for a in mine], np.int64)
        for col in ("x", "y", "z") if name == "A" else ("x", "y", "w"):
            columns[col] = [a[2][col] for a in mine]
        prepared.append(matcher.prepare(name, columns))
    return prepared, which, row


def _columnar(
    queries: list[str],
    arrivals: list[tuple[str, float, dict[str, Any], int]],
    store: str = "all",
    capacity: int = 1 << 14,
) -> set[tuple[str, int, int]]:
    matcher = _matcher(queries, store)
    prepared, which, row = _prepared(matcher, arrivals)
    plan = matcher.ensure_plan()
    streams = np.array([plan.stream_number("A"), plan.stream_number("B")], np.int64)
    ts = np.array([a[1] for a in arrivals], np.float64)
    late = matcher.late_probe(streams[which], ts)
    tables = PairTables.of(plan, int(streams[0]), int(streams[1]))
    joined = join_batch(tables, prepared, which, row, late, capacity)
    found = set(joined.ids())
    blocks = joined.blocks()
    a, b = int(streams[0]), int(streams[1])
    handed = {
        (plan.query_names(q), block.tuples[a].id, block.tuples[b].id)  # type: ignore[union-attr]
        for block in blocks
        for q in block.numbers().tolist()
    }
    assert handed == found and sum(len(block) for block in blocks) == len(joined.results)
    return found


def _changed(matcher: mqo.Matcher, change: str, rng: random.Random, k: int) -> mqo.Matcher:
    """``matcher`` after a change before round ``k`` (the same on both sides)."""
    if change == "register":
        matcher.register_query(_query(rng, 1000 + k))
    elif change == "unregister":
        matcher.unregister_query(f"q{k - 1}")
    elif change == "push":
        matcher.push("B", 2.0, {"x": 0.3, "y": 1, "w": 2}, id=10_000 + k)
    elif change == "restore":
        return mqo.Matcher.restore(matcher.snapshot())
    return matcher


def _all_results(matches: Any) -> list[tuple[str, tuple[tuple[str, int], ...]]]:
    return [(m.query, tuple(sorted(m.ids.items()))) for m in matches]


def _pushed(queries: list[str], rounds: list[list[Any]], store: str, emit: str, change: str, seed: int) -> list[Any]:
    matcher = _matcher(queries, store, emit)
    found = []
    for k, arrivals in enumerate(rounds):
        if k:
            matcher = _changed(matcher, change, random.Random(seed), k)
        for stream, ts, values, i in arrivals:
            found += _all_results(matcher.push(stream, ts, values, id=i))
    return sorted(found + _all_results(matcher.flush_results().matches()))


def _replayed(queries: list[str], rounds: list[list[Any]], store: str, emit: str, change: str, seed: int) -> list[Any]:
    matcher = _matcher(queries, store, emit)
    found = []
    took = False
    for k, arrivals in enumerate(rounds):
        if k:
            matcher = _changed(matcher, change, random.Random(seed), k)
        prepared, which, row = _prepared(matcher, arrivals)
        batch = MatchBatch(matcher.ensure_plan())
        for _, blocks in matcher.replay(prepared, which, row):
            batch.blocks.extend(blocks)
        found += _all_results(batch.matches())
        took = took or bool(matcher.pipeline._pairs and matcher.pipeline._pairs.steps)
    assert took, "the replays never took the columnar step"
    return sorted(found + _all_results(matcher.flush_results().matches()))


@pytest.mark.parametrize("seed", range(40))
def test_replay_in_rounds_equals_push(seed: int) -> None:
    """Rows replayed in rounds: pairs across rounds come from the rows the step keeps,
    which it makes again from the window state after a registration, a pushed tuple or
    a restored snapshot; held results (``emit='ordered'``) and late tuples as pushed."""
    queries, arrivals = _workload(seed)
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(arrivals)), 2))
    rounds = [arrivals[: cuts[0]], arrivals[cuts[0] : cuts[1]], arrivals[cuts[1] :]]
    store = ("all", "candidates")[seed % 2]
    emit = "ordered" if seed % 5 == 4 else "arrival"
    change = ("none", "register", "unregister", "push", "restore")[seed % 5]
    assert _replayed(queries, rounds, store, emit, change, seed) == _pushed(queries, rounds, store, emit, change, seed)


@pytest.mark.parametrize("seed", range(60))
def test_columnar_join_equals_engine(seed: int) -> None:
    """Every tuple stored (``store='all'``) or only those a query can use (``'candidates'``,
    as ``mqo match``); output arrays that hold one result pair at first (the kernel stops
    and goes on from the row that did not fit) or many."""
    queries, arrivals = _workload(seed)
    store = ("all", "candidates")[seed % 2]
    capacity = 1 if seed % 3 == 0 else 1 << 14
    assert _columnar(queries, arrivals, store, capacity) == _engine(queries, arrivals, store)


def _keyed(seed: int) -> tuple[list[str], list[tuple[str, float, dict[str, Any], int]]]:
    """Every query an equi-join on one of :data:`KEYS` (with more conditions, OR, residuals)."""
    return _workload(seed, KEYS[seed % len(KEYS)])


def _tables(queries: list[str]) -> PairTables:
    plan = _matcher(queries).ensure_plan()
    return PairTables.of(plan, plan.stream_number("A"), plan.stream_number("B"))


@pytest.mark.parametrize("seed", range(40))
def test_equi_join_probe_equals_engine(seed: int) -> None:
    """Every slot requires one equality: the kernel meets only the partners of a row's
    own key (NULL keys meet none). The same results as the engine; and none lost when
    one query without the equality (or with it shifted by a constant) makes the kernel
    walk every partner again."""
    queries, arrivals = _keyed(seed)
    assert _tables(queries).key is not None
    store = ("all", "candidates")[seed % 2]
    assert _columnar(queries, arrivals, store, 1 if seed % 3 == 0 else 1 << 14) == _engine(queries, arrivals, store)
    other = "Query ID: other\nSELECT * FROM A, B MAXWINDOW 1 WHERE " + ("A.y = B.w + 1" if seed % 2 else "A.x <= B.x")
    assert _tables([*queries, other]).key is None
    assert _columnar([*queries, other], arrivals, store) == _engine([*queries, other], arrivals, store)


@pytest.mark.parametrize("seed", range(20))
def test_equi_join_replay_in_rounds_equals_push(seed: int) -> None:
    """Equi-joins replayed in rounds, with the changes between rounds of
    :func:`test_replay_in_rounds_equals_push` (a registered query without the equality
    turns the probe off for the rounds after it)."""
    queries, arrivals = _keyed(seed)
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(arrivals)), 2))
    rounds = [arrivals[: cuts[0]], arrivals[cuts[0] : cuts[1]], arrivals[cuts[1] :]]
    store = ("all", "candidates")[seed % 2]
    change = ("none", "register", "unregister", "push", "restore")[seed % 5]
    assert _replayed(queries, rounds, store, "arrival", change, seed) == _pushed(
        queries, rounds, store, "arrival", change, seed
    )


# key values where doubles and exact values part: signed zeros, a non-dyadic sum's
# neighbours, integers one apart past 2**53, NULL
KEY_FLOATS = (-0.0, 0.0, 0.1, 0.3, 0.1 + 0.2, 2.0**53, 2.0**53 + 2, -1.5, None)
KEY_INTS = (0, -1, 2**53, 2**53 + 1, 2**53 + 2, 2**62, -(2**62), None)


@st.composite
def _keyed_arrivals(draw: st.DrawFn) -> list[tuple[str, float, dict[str, Any], int]]:
    arrivals = []
    for i in range(draw(st.integers(2, 24))):
        stream = draw(st.sampled_from("AB"))
        ts = draw(st.sampled_from((0.0, 0.1, 0.2, 0.3, 1.0, 1.1, 2.0)))
        x, z = draw(st.sampled_from(KEY_FLOATS)), draw(st.sampled_from(KEY_FLOATS))
        y, w = draw(st.sampled_from(KEY_INTS)), draw(st.sampled_from(KEY_INTS))
        values = {"x": x, "y": y, "z": z} if stream == "A" else {"x": z, "y": y, "w": w}
        arrivals.append((stream, ts, values, i))
    return arrivals


@settings(max_examples=60, deadline=None)
@given(arrivals=_keyed_arrivals(), key=st.sampled_from(("A.y = B.w", "A.x = B.x", "A.z = B.y", "B.w = A.y")))
def test_equi_join_probe_hunts_boundaries(arrivals: list[tuple[str, float, dict[str, Any], int]], key: str) -> None:
    """Keys drawn where a double and its value part (signed zeros, 0.1 + 0.2 against 0.3,
    integers one apart past 2**53, FLOAT against INTEGER), NULL keys and ties in ts: the
    probe by key gives the engine's results."""
    queries = [
        f"Query ID: k\nSELECT * FROM A, B MAXWINDOW 1 WHERE {key}",
        f"Query ID: k2\nSELECT * FROM A, B MAXWINDOW 0.2 WHERE {key} AND A.x <= B.x + 0.1",
        f"Query ID: k3\nSELECT * FROM A, B MAXWINDOW 2 WHERE ({key} AND B.y > 0) OR ({key} AND A.z < 0.3)",
    ]
    assert _tables(queries).key is not None
    assert _columnar(queries, arrivals) == _engine(queries, arrivals)


def test_fallback_pairs_are_decided_exactly() -> None:
    """Ties on a non-dyadic boundary (0.1 + 0.2 against 0.3) and a span equal to the
    MAXWINDOW leave the doubles unsure: those pairs go to the exact path and agree."""
    queries = [
        "Query ID: tie\nSELECT * FROM A, B MAXWINDOW 1 WHERE A.x <= B.x + 0.2",
        "Query ID: span\nSELECT * FROM A, B MAXWINDOW 0.3 WHERE A.y = B.w",
    ]
    arrivals = [
        ("B", 0.0, {"x": 0.1, "y": 1, "w": 2}, 0),
        ("A", 0.3, {"x": 0.3, "y": 2, "z": 0.0}, 1),
        ("A", 0.31, {"x": 0.30000000000000004, "y": 2, "z": 0.0}, 2),
    ]
    assert _columnar(queries, arrivals) == _engine(queries, arrivals) == {("tie", 1, 0), ("span", 1, 0)}


def test_integers_past_two_to_the_53() -> None:
    """INTEGER values whose doubles are not the values: their pairs are decided exactly
    (the kernel hands them over), with ties one apart at 2**53 and past 2**60."""
    queries = [
        "Query ID: eq\nSELECT * FROM A, B MAXWINDOW 5 WHERE A.y = B.w",
        "Query ID: lt\nSELECT * FROM A, B MAXWINDOW 5 WHERE A.y < B.w - 1",
        "Query ID: ne\nSELECT * FROM A, B MAXWINDOW 5 WHERE A.y != B.y + 1",
    ]
    big = (2**53, 2**53 + 1, 2**53 + 2, 2**60 + 3, 2**60 + 4, -5)
    arrivals = []
    for i, v in enumerate(big):
        arrivals.append(("A", 0.1 * i, {"x": 1.0, "y": v, "z": 0.0}, 2 * i))
        arrivals.append(("B", 0.1 * i, {"x": 1.0, "y": v - 1, "w": big[(i + 1) % len(big)]}, 2 * i + 1))
    expected = _engine(queries, arrivals)
    assert len(expected) > 10
    assert _columnar(queries, arrivals) == expected
    # equi-joins alone (the kernel probes by key): values one apart past 2**53 share a double
    keyed = [queries[0], "Query ID: eq2\nSELECT * FROM A, B MAXWINDOW 5 WHERE A.y = B.w AND A.x <= B.x"]
    arrivals += [("B", 0.9, {"x": 1.0, "y": 0, "w": v + d}, 100 + 3 * i + d) for i, v in enumerate(big) for d in (0, 1)]
    expected = _engine(keyed, arrivals)
    assert _tables(keyed).key is not None and len(expected) > 6
    assert _columnar(keyed, arrivals) == expected


@pytest.mark.parametrize(
    "ddl, query",
    [
        (DDL + " REGISTER STREAM C (x FLOAT);", "SELECT * FROM A, B, C MAXWINDOW 1 WHERE A.x < B.x AND B.x < C.x"),
        (DDL, "SELECT * FROM A a1, A a2, B MAXWINDOW 1 WHERE a1.x < a2.x AND a1.x < B.x"),
        ("REGISTER STREAM A (s TEXT); REGISTER STREAM B (s TEXT);", "SELECT * FROM A, B MAXWINDOW 1 WHERE A.s = B.s"),
    ],
)
def test_refuses_what_it_does_not_decide(ddl: str, query: str) -> None:
    """Queries over both streams and a third, self-joins and joins on text are refused
    whole (the engine decides them), never decided in part."""
    matcher = mqo.Matcher(ddl)
    matcher.register_query(query)
    plan = matcher.ensure_plan()
    with pytest.raises(Unsupported):
        PairTables.of(plan, plan.stream_number("A"), plan.stream_number("B"))


def _stored(matcher: mqo.Matcher) -> set[tuple[int, int]]:
    """The (stream, id) of the stored tuples that can still meet a later tuple."""
    state = matcher.state
    assert state is not None
    horizon = matcher.pipeline.clock.purge_horizon()
    return {(t.stream, t.id) for t in state if t.ts >= horizon}


@pytest.mark.parametrize("seed", range(12))
def test_replay_left_before_its_end_keeps_what_it_handed_over(seed: int) -> None:
    """A replay left after some row (a stop request, an error in the consumer): the
    window state then holds the tuples up to that row, as the engine alone (under
    ``check=True``) stores them, and a snapshot taken then restores to go on alike."""
    queries, arrivals = _workload(seed)
    states = []
    left_at = -1
    for check in (False, True):
        matcher = mqo.Matcher(DDL, allowed_lateness=0.5, missing="null", idle_timeout=None, check=check)
        for text in queries:
            matcher.register_query(text)
        prepared, which, row = _prepared(matcher, arrivals)
        replay = matcher.replay(prepared, which, row)
        for j, _ in replay:  # left at the first row handed over past the middle, then at that row
            if j >= len(arrivals) // 2 if left_at < 0 else j == left_at:
                left_at = j
                break
        del replay  # (the consumer lets the replay go)
        states.append((_stored(matcher), _stored(mqo.Matcher.restore(matcher.snapshot()))))
    assert states[0] == states[1]
    assert states[0][0] == states[0][1]
