"""Self-joins: a stream read under several aliases (docs/ARCHITECTURE.md, "Data model" and "Semantics").

Every scenario runs through ``push`` (the six static orders and adaptive), ``push_batch``
and ``prepare`` + ``replay``, against the exact reference (tests/references/reference.py), which
models aliases of one stream straight from the definition of a result. The hypothesis
differential tests (tests/differential/test_exact_differential.py) draw self-joins too; these are
the cases named in the issue, spelled out.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest

import mqo
from tests.differential.test_exact_differential import ORDERS, matcher, run_batches, run_push, run_replay
from tests.references.exact_ops import Heartbeat, Idle, Push, Register, Unregister, Workload
from tests.references.reference import (
    FLOAT,
    INTEGER,
    And,
    Bin,
    Cmp,
    Col,
    Column,
    Duration,
    Num,
    Query,
    Reference,
    Schema,
    Stream,
    engine_results,
)

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")

SCHEMA = Schema(
    (
        Stream("B", (Column("pressure", FLOAT), Column("alert", INTEGER))),
        Stream("H", (Column("vib", FLOAT),)),
    )
)
WINDOW = Duration("5", "sec")


def b(alias: str, col: str = "pressure") -> Col:
    return Col(alias, col)


def rise(name: str = "rise", step: str = "20", ordered: bool = True) -> Query:
    """The README's query: b2.pressure > b1.pressure + step AND b1.ts < b2.ts (without
    the time order when not ``ordered``: then b2 may be the older tuple)."""
    cond = Cmp(">", b("b2"), Bin("+", b("b1"), Num(step)))
    if ordered:
        cond = And((cond, Cmp("<", b("b1", "ts"), b("b2", "ts"))))
    return Query(name, (("b1", "B"), ("b2", "B")), WINDOW, cond)


def pushes(values: list[tuple[float, float | None, int | None]], stream: str = "B") -> list[Push]:
    out = []
    for ts, pressure, alert in values:
        given = {} if pressure is None else {"pressure": pressure}
        if alert is not None:
            given["alert"] = alert
        out.append(Push(stream, ts, given))
    return out


# ties, NULLs, equal values: pairs of a tuple with itself and with its twins
DATA = pushes(
    [(1, 90, 1), (1, 90, 1), (2, 111, 0), (2, None, 1), (3, 130.5, None), (3, 90, 1), (7, 151, 0), (8, 90, 1)]
)


def every_path(workload: Workload) -> None:
    for order in (*ORDERS, "adaptive"):
        run_push(workload, matcher(order=order))
    run_push(workload, matcher(order="AJW", check=True))
    run_batches(workload, matcher(order="adaptive"))
    run_replay(workload, matcher(order="WJA"))


def reference_results(workload: Workload) -> list:
    ref = workload.reference()
    out = []
    for op in workload.ops:
        if isinstance(op, Register):
            ref.register(op.query)
        elif isinstance(op, Push):
            out += ref.push(op.stream, op.ts, op.values, op.id)
    return out


def test_the_readme_query_on_every_path():
    every_path(Workload(SCHEMA, 0, [Register(rise()), *DATA]))


@pytest.mark.parametrize(
    ("op", "with_itself"),
    [("<=", True), ("<", False), (">=", True), ("=", True), ("!=", False)],
)
def test_a_tuple_joins_with_itself_only_when_the_predicates_allow_it(op, with_itself):
    query = Query("q", (("b1", "B"), ("b2", "B")), WINDOW, Cmp(op, b("b1", "ts"), b("b2", "ts")))
    workload = Workload(SCHEMA, 0, [Register(query), *DATA])
    every_path(workload)
    results = reference_results(workload)
    selves = [r for r in results if dict(r.ids)["b1"] == dict(r.ids)["b2"]]
    assert bool(selves) == with_itself
    # (t, u) and (u, t) are two assignments: both are reported when both hold
    if op in ("=", "!="):
        pairs = Counter((dict(r.ids)["b1"], dict(r.ids)["b2"]) for r in results)
        assert all(pairs[(y, x)] == n for (x, y), n in pairs.items())


def test_every_assignment_of_three_aliases_exactly_once():
    """No predicate but MAXWINDOW: every triple of tuples within 5 s, in every order,
    the same tuple in several aliases included: counted against a plain enumeration."""
    query = Query("all3", (("x", "B"), ("y", "B"), ("z", "B")), WINDOW, None)
    workload = Workload(SCHEMA, 0, [Register(query), *DATA])
    every_path(workload)
    stamps = [Fraction(p.ts) for p in DATA]
    expected = sum(
        1
        for i in range(len(stamps))
        for j in range(len(stamps))
        for k in range(len(stamps))
        if max(stamps[i], stamps[j], stamps[k]) - min(stamps[i], stamps[j], stamps[k]) <= 5
    )
    m = mqo.Matcher(SCHEMA.ddl(), missing="null")
    m.register_query(query.to_text())
    got = [r for p in DATA for r in m.push(p.stream, p.ts, dict(p.values))]
    assert len(got) == expected
    assert len({(r.query, tuple(sorted(r.ids.items()))) for r in got}) == expected  # none twice


def test_three_aliases_with_predicates_and_a_mixed_from():
    three = Query(
        "three",
        (("a", "B"), ("b", "B"), ("c", "B")),
        Duration("6", "sec"),
        And(
            (
                Cmp("<=", b("a", "ts"), b("b", "ts")),
                Cmp("<", b("a"), b("c")),
                Cmp("=", b("b", "alert"), b("c", "alert")),
            )
        ),
    )
    mixed = Query(
        "mixed",
        (("b1", "B"), ("H", "H"), ("b2", "B")),
        WINDOW,
        And((Cmp(">", Col("H", "vib"), b("b1")), Cmp(">=", b("b2"), Bin("-", b("b1"), Num("0.5"))))),
    )
    heart = [Push("H", ts, {"vib": vib}) for ts, vib in [(1, 100), (2.5, 95), (3, 131), (7.5, 200)]]
    data = sorted([*DATA, *heart], key=lambda p: p.ts)
    every_path(Workload(SCHEMA, 0, [Register(three), Register(mixed), Register(rise()), *data]))


def test_registration_changes_refill_a_role_from_its_stream():
    """A self-join registered mid-stream sees the stored tuples in every alias; after
    the last self-join goes, a new one starts from the stream's tuples again."""
    ops = [
        Register(Query("plain", (("B", "B"), ("H", "H")), WINDOW, Cmp(">", Col("H", "vib"), b("B")))),
        *DATA[:3],
        Register(rise("r1", ordered=False)),
        *DATA[3:5],
        Unregister("r1"),
        DATA[5],
        Register(rise("r2", "0.5", ordered=False)),
        Push("H", 3, {"vib": 100}),
        *DATA[6:],
    ]
    every_path(Workload(SCHEMA, 0, ops))
    run_push(Workload(SCHEMA, 0, ops), matcher(order="JWA"), restore_at=frozenset({4, 6, 9}))


def test_late_tuples_count_once_and_only_declared_streams_keep_time():
    late = [Push("B", 2.5, {"pressure": 200.0})]  # behind B's watermark 8 - 1
    # H is idle: B alone (not its role B#2, which no tuple names) holds time
    ops = [Register(rise()), Idle("H"), *DATA, *late, Heartbeat(12, "B"), Push("B", 11.5, {"pressure": 300.0})]
    workload = Workload(SCHEMA, 1, ops, time="per-stream")
    every_path(workload)
    m = matcher(order="adaptive")(workload)
    m.register_query(rise().to_text())
    m.set_idle("H")
    for p in [*DATA, *late]:
        m.push(p.stream, p.ts, dict(p.values))
    assert m.late_count == 1
    assert set(m.stream_watermarks()) == {"B", "H"}
    with pytest.raises(mqo.TupleError, match="unknown stream 'B#2'"):
        m.push("B#2", 9, {"pressure": 1.0})


def test_snapshot_restore_keeps_the_roles_and_their_tuples():
    ops = [Register(rise()), Register(rise("r5", "5")), *DATA]
    run_push(Workload(SCHEMA, 0, ops), matcher(order="adaptive"), restore_at=frozenset(range(2, len(ops))))
    m = matcher(order="AJW")(Workload(SCHEMA, 0))
    m.register_query(rise().to_text())
    for p in DATA[:4]:
        m.push(p.stream, p.ts, dict(p.values))
    restored = mqo.Matcher.restore(m.snapshot())
    ref = Reference(SCHEMA)
    ref.register(rise())
    for p in DATA[:4]:
        ref.push(p.stream, p.ts, p.values)
    for p in DATA[4:]:
        assert Counter(engine_results(restored.push(p.stream, p.ts, dict(p.values)))) == Counter(
            ref.push(p.stream, p.ts, p.values)
        )


def test_explain_shows_one_list_for_the_same_roles_in_two_queries():
    m = mqo.Matcher(SCHEMA.ddl())
    m.register_query("SELECT * FROM B b1, B b2 WHERE b2.pressure > b1.pressure + 20 MAXWINDOW 5 sec", "one")
    m.register_query("SELECT * FROM B x, B y WHERE y.pressure - 30 > x.pressure MAXWINDOW 9 sec", "two")
    text = m.explain()
    assert "Roles (a stream's k-th alias in FROM reads role #k): B#2" in text
    assert text.count("list 0: B.pressure < B#2.pressure + c") == 1
    assert "B.pressure < B#2.pressure - 30   queries two" in text
    assert "B.pressure < B#2.pressure - 20   queries one" in text
    assert "FROM B AS x, B AS y (role B#2)" in text


def test_restoring_on_a_plan_that_numbers_the_roles_otherwise():
    """Stored tuples follow their role by name: a matcher restored ``like=`` one that
    registered the same self-joins in another order (the Spark stages rebuild plans from
    query texts) continues exactly as the snapshot's matcher does."""
    schema = Schema((*SCHEMA.streams, Stream("C", (Column("pressure", FLOAT), Column("alert", INTEGER)))))
    b_swing = rise("b_swing", ordered=False)  # b2 may be the older tuple: role 2's store counts
    c_swing = Query("c_swing", (("b1", "C"), ("b2", "C")), WINDOW, b_swing.where)
    first = mqo.Matcher(schema.ddl(), missing="null", order="AJW")
    for q in (c_swing, b_swing):
        first.register_query(q.to_text())
    second = mqo.Matcher(schema.ddl(), missing="null", order="AJW")
    for q in (b_swing, c_swing):
        second.register_query(q.to_text())
    assert first.ensure_plan().streams[3].name == "C#2" and second.ensure_plan().streams[3].name == "B#2"
    other = [Push("C", p.ts, {"pressure": 300 - p.values["pressure"]} if "pressure" in p.values else {}) for p in DATA]
    data = [*DATA, *other]
    data.sort(key=lambda p: p.ts)
    for p in data[:8]:
        first.push(p.stream, p.ts, dict(p.values))
    restored = mqo.Matcher.restore(first.snapshot(queries=False), like=second)
    found = 0
    for p in data[8:]:
        want = Counter(engine_results(first.push(p.stream, p.ts, dict(p.values))))
        assert Counter(engine_results(restored.push(p.stream, p.ts, dict(p.values)))) == want
        found += sum(want.values())
    assert found
