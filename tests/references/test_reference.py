"""Hand-computed cases for the exact reference (tests/references/reference.py), so that the
differential tests compare the engine against something trustworthy: Kleene logic,
NULLs and division by zero, strings, exact numbers, results once when their last tuple
arrives, self-joins, late tuples, the retention horizon seen by queries registered
mid-stream, and arrival order."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.references.exact_ops import Push, Register, Workload, apply_reference
from tests.references.exact_workloads import workloads
from tests.references.reference import (
    FLOAT,
    INTEGER,
    STRING,
    And,
    Bin,
    Cmp,
    Col,
    Column,
    Cond,
    Duration,
    Expr,
    Item,
    Neg,
    Not,
    Num,
    Or,
    Query,
    Reference,
    Schema,
    Str,
    Stream,
    evaluate,
    truth,
)

SCHEMA = Schema(
    (
        Stream("B", (Column("x", FLOAT), Column("y", FLOAT), Column("tag", STRING))),
        Stream("H", (Column("y", FLOAT), Column("n", INTEGER))),
        Stream("K", (Column("z", FLOAT),)),
    )
)
F = Fraction


def c(ref: str) -> Col:
    alias, name = ref.split(".")
    return Col(alias, name)


def n(text: str) -> Expr:
    return Neg(Num(text[1:])) if text.startswith("-") else Num(text)


def env(b: dict[str, Any] | None = None, h: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """One B and one H tuple, columns NULL unless given."""
    return {
        "B": {"x": None, "y": None, "tag": None, "ts": F(0), "id": 0, **(b or {})},
        "H": {"y": None, "n": None, "ts": F(0), "id": 0, **(h or {})},
    }


X_LT_3 = Cmp("<", c("B.x"), n("3"))
Y_GT_0 = Cmp(">", c("B.y"), n("0"))


@pytest.mark.parametrize(
    ("cond", "b", "expected"),
    [
        (X_LT_3, {"x": F(2)}, True),
        (X_LT_3, {"x": F(3)}, False),
        (X_LT_3, {}, None),
        (Not(X_LT_3), {}, None),
        (Not(X_LT_3), {"x": F(5)}, True),
        (And((X_LT_3, Y_GT_0)), {"x": F(1)}, None),
        (And((X_LT_3, Y_GT_0)), {"x": F(4)}, False),  # FALSE AND UNKNOWN
        (Or((X_LT_3, Y_GT_0)), {"x": F(1)}, True),  # TRUE OR UNKNOWN
        (Or((X_LT_3, Y_GT_0)), {"x": F(4)}, None),  # FALSE OR UNKNOWN
        (Not(Or((X_LT_3, Y_GT_0))), {"x": F(4)}, None),
        (Not(And((X_LT_3, Y_GT_0))), {"x": F(4)}, True),
        (Cmp("=", c("B.x"), c("B.x")), {}, None),  # NULL is not equal to itself
        (Cmp("!=", c("B.x"), n("1")), {"x": F(2)}, True),
        (Cmp("=", Bin("*", c("B.x"), n("2")), n("7")), {"x": F(7, 2)}, True),
        (Cmp("<", Bin("/", c("B.x"), n("0")), n("1")), {"x": F(1)}, None),  # division by zero is NULL
        (Not(Cmp(">", Bin("/", c("B.x"), c("B.y")), n("1"))), {"x": F(1), "y": F(0)}, None),
        (Cmp(">", Neg(c("B.x")), n("2")), {"x": F(-5, 2)}, True),
        (Cmp(">", Bin("*", c("B.x"), c("B.y")), n("2")), {"x": F(1), "y": F(2)}, False),
        # exact numbers: 3 * 0.1 is 0.3, and 0.1 + 0.2 is 0.3
        (Cmp("=", Bin("*", c("B.x"), n("0.1")), n("0.3")), {"x": F(3)}, True),
        (Cmp("=", Bin("+", c("B.x"), n("0.2")), n("0.3")), {"x": F("0.1")}, True),
        (Cmp("=", Bin("*", n("3"), c("B.x")), n("1")), {"x": F("0.3333333333333333")}, False),
        (Cmp("=", c("B.tag"), Str("a")), {"tag": "a"}, True),
        (Cmp("<", c("B.tag"), Str("ab")), {"tag": "a"}, True),
        (Cmp("<", c("B.tag"), Str("ab")), {"tag": "b"}, False),
        (Cmp(">", c("B.tag"), Str("B")), {"tag": "a"}, True),  # code-point order: 'B' < 'a'
        (Cmp("=", c("B.tag"), Str("a")), {}, None),
    ],
)
def test_single_tuple_truth(cond: Cond, b: dict[str, Any], expected: bool | None) -> None:
    assert truth(cond, env(b)) is expected


@pytest.mark.parametrize(
    ("cond", "b", "h", "expected"),
    [
        (Cmp("<=", c("B.x"), Bin("+", Bin("*", n("2"), c("H.y")), n("1"))), {"x": F(5)}, {"y": F(2)}, True),
        (Cmp("<=", c("B.x"), Bin("+", Bin("*", n("2"), c("H.y")), n("1"))), {"x": F(11, 2)}, {"y": F(2)}, False),
        (Cmp("<=", c("B.ts"), Bin("+", c("H.ts"), n("0.1"))), {"ts": F("2.1")}, {"ts": F(2)}, True),
        (Cmp("<=", c("B.ts"), Bin("+", c("H.ts"), n("0.1"))), {"ts": F("2.2")}, {"ts": F(2)}, False),
        (Cmp(">", Bin("+", c("B.x"), c("H.y")), n("0")), {"x": F(1)}, {}, None),
        (Or((Cmp("=", c("B.x"), n("1")), Cmp("=", c("H.y"), n("1")))), {"x": F(1)}, {}, True),
        (Cmp("=", c("B.id"), c("H.id")), {"id": 3}, {"id": 3}, True),
    ],
)
def test_two_tuple_truth(cond: Cond, b: dict[str, Any], h: dict[str, Any], expected: bool | None) -> None:
    assert truth(cond, env(b, h)) is expected


def ids(results: list[Any]) -> list[tuple[str, tuple[tuple[str, int], ...]]]:
    return sorted((r.query, r.ids) for r in results)


def query(name: str, *streams: str, window: str = "5", where: Cond | None = None, **kw: Any) -> Query:
    sources = tuple((s.split()[-1], s.split()[0]) for s in streams)
    return Query(name, sources, Duration(window) if len(streams) > 1 else None, where, **kw)


def test_single_stream_reports_each_matching_tuple() -> None:
    ref = Reference(SCHEMA)
    ref.register(query("q", "B", where=X_LT_3))
    (r,) = ref.push("B", 0, {"x": 1, "y": 2, "tag": "a"})
    assert (r.query, r.ts, r.ids) == ("q", 0, (("B", 0),))
    assert dict(r.values) == {"B.x": 1, "B.y": 2, "B.tag": "a"}
    assert ref.push("B", 0, {"x": 3}) == []
    assert ref.push("B", 1, {"y": 0}) == []  # NULL x
    assert ref.push("B", 1, {"x": float("nan")}) == []  # NaN is NULL
    (r,) = ref.push("B", 2, {"x": -1, "y": float("nan")})
    assert r.ids == (("B", 4),)  # automatic ids count every push of the stream
    assert dict(r.values)["B.y"] is None  # NaN is reported as NULL
    assert evaluate(Bin("-", c("B.x"), n("1")), {"B": {"x": None}}) is None


def test_a_join_is_reported_once_when_its_last_tuple_arrives() -> None:
    ref = Reference(SCHEMA)
    ref.register(query("q", "B", "H", window="2", where=Cmp("=", c("B.y"), c("H.y"))))
    assert ref.push("B", 0, {"y": 1}) == []  # B0
    assert ref.push("B", 1, {"y": 2}) == []  # B1
    assert ids(ref.push("H", 1, {"y": 1, "n": 5})) == [("q", (("B", 0), ("H", 0)))]
    assert ids(ref.push("B", 1, {"y": 1})) == [("q", (("B", 2), ("H", 0)))]
    # H1 at 3: B0 is 3 s older (outside), B2 2 s older (inclusive)
    assert ids(ref.push("H", 3, {"y": 1})) == [("q", (("B", 2), ("H", 1)))]


def test_or_is_reported_once() -> None:
    ref = Reference(SCHEMA)
    either = Or((Cmp("=", c("B.x"), n("1")), Cmp("=", c("H.y"), n("1")), Cmp("=", c("B.x"), c("H.y"))))
    ref.register(query("q", "B", "H", where=either))
    ref.push("B", 0, {"x": 1})
    assert len(ref.push("H", 0, {"y": 1})) == 1


def test_a_self_join_gives_the_new_tuple_to_either_alias_or_both() -> None:
    ref = Reference(SCHEMA)
    ref.register(query("q", "B b1", "B b2", window="1", select=(Item(c("b1.x")), Item(c("b2.x")))))
    assert ids(ref.push("B", 0, {"x": 1})) == [("q", (("b1", 0), ("b2", 0)))]
    got = ids(ref.push("B", F("0.5"), {"x": 2}))
    assert got == [("q", (("b1", 0), ("b2", 1))), ("q", (("b1", 1), ("b2", 0))), ("q", (("b1", 1), ("b2", 1)))]


def test_three_streams_without_condition_is_a_windowed_cross_product() -> None:
    ref = Reference(SCHEMA)
    ref.register(query("q", "B", "H", "K", window="1"))
    ref.push("B", 0, {})  # B0
    ref.push("B", 1, {})  # B1
    ref.push("H", 1, {})  # H0
    assert ref.push("H", 2, {}) == []  # H1: no K yet
    got = ids(ref.push("K", 2, {"z": 3}))  # B0 is 2 s older than K0
    assert got == [("q", (("B", 1), ("H", 0), ("K", 0))), ("q", (("B", 1), ("H", 1), ("K", 0)))]


def test_maxwindow_units_are_exact() -> None:
    ref = Reference(SCHEMA)
    ref.register(Query("ms", (("B", "B"), ("H", "H")), Duration("100", "ms")))
    ref.register(Query("min", (("B", "B"), ("H", "H")), Duration("0.005", "min")))  # 0.3 s
    ref.push("B", 7.3, {})
    assert ids(ref.push("H", 7.4, {})) == [("min", (("B", 0), ("H", 0))), ("ms", (("B", 0), ("H", 0)))]
    assert ids(ref.push("H", 7.6, {})) == [("min", (("B", 0), ("H", 1)))]  # 7.6 - 7.3 is 0.3 exactly


def test_late_tuples() -> None:
    ref = Reference(SCHEMA, time="global")
    ref.register(query("q", "B", "H"))
    ref.push("B", 5, {})  # B0
    assert ref.push("H", 4, {}) == []  # late: 4 < 5
    assert ref.late == [("H", 4, 0)]
    assert ids(ref.push("H", 5, {})) == [("q", (("B", 0), ("H", 1)))]  # the late H0 took id 0
    ref.heartbeat(8)
    assert ref.push("B", 7.5, {}) == []  # late after the heartbeat
    ref.heartbeat(3)  # no effect
    assert len(ref.push("B", 8, {})) == 1  # H1 (ts 5) is 3 s older


def test_the_lateness_bound_is_inclusive_and_late_tuples_are_never_stored() -> None:
    ref = Reference(SCHEMA, allowed_lateness=2, time="global")
    ref.register(query("q", "B", "H", window="1"))
    ref.push("B", 5, {})  # B0
    assert ref.push("H", 3, {}) == [] and ref.late == []  # 3 == 5 - 2: accepted
    assert ids(ref.push("B", 4, {})) == [("q", (("B", 1), ("H", 0)))]
    assert ref.push("H", 2.5, {}) == []  # late
    assert ids(ref.push("B", 3, {})) == [("q", (("B", 2), ("H", 0)))]  # not with the late H1


def test_registration_sees_stored_tuples_at_or_after_the_horizon() -> None:
    ref = Reference(SCHEMA, time="global")
    ref.register(query("w2", "B", "H", window="2"))  # Wmax = 2
    ref.push("B", 0, {})  # B0; H = -2
    ref.push("B", 3, {})  # B1; H = 1
    ref.register(query("w10", "B", "H", window="10"))  # since = 1
    # w10's window holds B0, but B0 is older than its since (1)
    assert ids(ref.push("H", 4, {})) == [("w10", (("B", 1), ("H", 0))), ("w2", (("B", 1), ("H", 0)))]
    ref.register(query("late10", "B", "H", window="10"))  # Wmax = 10: H stays at 1
    assert ref.queries["late10"].since == 1


def test_a_heartbeat_moves_the_horizon_a_new_query_starts_from() -> None:
    ref = Reference(SCHEMA, time="global")
    ref.push("B", 0, {})  # no query: Wmax = 0, H = 0
    ref.register(query("early", "B", "H"))
    assert ids(ref.push("H", 1, {})) == [("early", (("B", 0), ("H", 0)))]
    ref.heartbeat(6)  # H = 6 - 5 = 1
    ref.register(query("later", "B", "H"))
    assert ref.queries["later"].since == 1
    # H0 (ts 1) is exactly 5 s older and not older than 1
    assert ids(ref.push("B", 6, {})) == [("early", (("B", 1), ("H", 0))), ("later", (("B", 1), ("H", 0)))]


def test_an_unregistered_query_reports_nothing() -> None:
    ref = Reference(SCHEMA)
    ref.register(query("a", "B"))
    ref.register(query("b", "B"))
    ref.unregister("a")
    assert ids(ref.push("B", 0, {})) == [("b", (("B", 0),))]
    with pytest.raises(KeyError):
        ref.unregister("a")
    with pytest.raises(ValueError, match="already registered"):
        ref.register(query("b", "B"))


def _run(ref: Reference, ops: list[Any]) -> Counter:
    return Counter(r for op in ops for r in apply_reference(ref, op))


@settings(max_examples=100, deadline=None)
@given(workload=workloads(churn=False), data=st.data())
def test_results_do_not_depend_on_arrival_order(workload: Workload, data: Any) -> None:
    """With every query registered first, explicit ids and no tuple late, the results
    of the whole run are the same whatever the arrival order (each assignment once, when
    its last tuple arrives): a shuffled run against the timestamp-sorted one."""
    registers = [op for op in workload.ops if isinstance(op, Register)]
    pushes = [Push(p.stream, p.ts, p.values, id=i) for i, p in enumerate(workload.ops) if isinstance(p, Push)]
    shuffled = data.draw(st.permutations(pushes), label="arrival order")
    in_order = sorted(pushes, key=lambda p: F(repr(p.ts)))
    got = _run(Reference(workload.schema, allowed_lateness=10**10, time="global"), [*registers, *shuffled])
    want = _run(Reference(workload.schema, time="global"), [*registers, *in_order])
    assert got == want
