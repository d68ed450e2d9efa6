"""Hand-computed cases for the reference evaluator (tests/references/naive.py), so that the
differential tests compare the engine against something trustworthy."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from predicates import Catalog, bind, parse_queries
from tests.references.naive import ReferenceMatcher, evaluate_condition, evaluate_expr
from tests.references.strategies import Heartbeat, Push, Register, Unregister, Workload, workloads

DDL = """
REGISTER STREAM B (x FLOAT, y FLOAT, tag STRING);
REGISTER STREAM H (y FLOAT, n INTEGER);
REGISTER STREAM K (z FLOAT);
"""


def ids(results: list[dict]) -> list[tuple]:
    """The (query, ids) of each result, sorted: enough to tell which combinations matched."""
    return sorted((r["query"], tuple(sorted(r["ids"].items()))) for r in results)


def cond_value(where: str, b: dict | None = None, h: dict | None = None) -> bool | None:
    """Truth of ``where`` for one B tuple and one H tuple (columns default to NULL)."""
    catalog = Catalog.from_ddl(DDL)
    query = parse_queries(f"SELECT * FROM B, H MAXWINDOW 1 WHERE {where}", "<test>")[0]
    bound = bind(query, catalog, "t")
    env = {
        "B": {"x": None, "y": None, "tag": None, "ts": 0.0, "id": 0, **(b or {})},
        "H": {"y": None, "n": None, "ts": 0.0, "id": 0, **(h or {})},
    }
    return evaluate_condition(bound.condition, env)


# ------------------------------------------------------------- three-valued logic


@pytest.mark.parametrize(
    ("where", "b", "expected"),
    [
        ("B.x < 3", {"x": 2.0}, True),
        ("B.x < 3", {"x": 3.0}, False),
        ("B.x < 3", {}, None),
        ("NOT (B.x < 3)", {}, None),
        ("NOT (B.x < 3)", {"x": 5.0}, True),
        ("B.x < 3 AND B.y > 0", {"x": 1.0}, None),
        ("B.x < 3 AND B.y > 0", {"x": 4.0}, False),  # FALSE AND UNKNOWN
        ("B.x < 3 OR B.y > 0", {"x": 1.0}, True),  # TRUE OR UNKNOWN
        ("B.x < 3 OR B.y > 0", {"x": 4.0}, None),  # FALSE OR UNKNOWN
        ("NOT (B.x < 3 OR B.y > 0)", {"x": 4.0}, None),
        ("NOT (B.x < 3 AND B.y > 0)", {"x": 4.0}, True),
        ("B.x = B.x", {}, None),  # NULL is not equal to itself
        ("B.x != 1", {}, None),
        ("B.x <> 1", {"x": 2.0}, True),
        ("B.x * 2 = 7", {"x": 3.5}, True),
        ("B.x + 1 >= -2", {"x": -3.0}, True),
        ("B.x + 1 >= -2", {"x": -3.5}, False),
        ("B.x / 0 < 1", {"x": 1.0}, None),  # division by zero is NULL
        ("NOT (B.x / B.y > 1)", {"x": 1.0, "y": 0.0}, None),
        ("-B.x > 2", {"x": -2.5}, True),
        ("B.x * B.y > 2", {"x": 1.5, "y": 1.5}, True),
        ("B.x * B.y > 2", {"x": 1.0, "y": 2.0}, False),
        ("B.tag = 'a'", {"tag": "a"}, True),
        ("B.tag < 'ab'", {"tag": "a"}, True),
        ("B.tag < 'ab'", {"tag": "b"}, False),
        ("B.tag > 'B'", {"tag": "a"}, True),  # code-point order: 'B' < 'a'
        ("B.tag = 'a'", {}, None),
        ("B.x gt= 2 and B.x lt 3", {"x": 2.0}, True),
    ],
)
def test_single_tuple_truth(where: str, b: dict, expected: bool | None) -> None:
    assert cond_value(where, b) is expected


@pytest.mark.parametrize(
    ("where", "b", "h", "expected"),
    [
        ("B.x <= 2 * H.y + 1", {"x": 5.0}, {"y": 2.0}, True),
        ("B.x <= 2 * H.y + 1", {"x": 5.5}, {"y": 2.0}, False),
        ("H.y * -0.5 > B.x", {"x": -1.5}, {"y": 2.0}, True),
        ("H.y * -0.5 > B.x", {"x": -1.0}, {"y": 2.0}, False),
        ("B.ts <= H.ts + 1", {"ts": 3.0}, {"ts": 2.0}, True),
        ("B.ts <= H.ts + 1", {"ts": 3.5}, {"ts": 2.0}, False),
        ("B.x + H.y > 0", {"x": 1.0}, {}, None),
        ("B.x = 1 OR H.y = 1", {"x": 1.0}, {}, True),
        ("B.tag < 'b' AND B.y = H.y", {"tag": "a", "y": 2.0}, {"y": 2.0}, True),
        ("B.id = H.id", {"id": 3}, {"id": 3}, True),
    ],
)
def test_two_tuple_truth(where: str, b: dict, h: dict, expected: bool | None) -> None:
    assert cond_value(where, b, h) is expected


def test_expression_values() -> None:
    catalog = Catalog.from_ddl(DDL)
    query = parse_queries("SELECT B.x / B.y AS q, -B.x AS m, B.x - 1 AS d, 7 AS c FROM B", "<t>")[0]
    outputs = {o.name: o.expr for o in bind(query, catalog, "t").outputs}
    env = {"B": {"x": 3.0, "y": 0.0, "tag": None, "ts": 0.0, "id": 0}}
    assert evaluate_expr(outputs["q"], env) is None
    assert evaluate_expr(outputs["m"], env) == -3.0
    assert evaluate_expr(outputs["d"], env) == 2.0
    assert evaluate_expr(outputs["c"], env) == 7.0
    env["B"]["x"] = None
    assert evaluate_expr(outputs["m"], env) is None
    assert evaluate_expr(outputs["d"], env) is None


# ------------------------------------------------------------------ single stream


def test_single_stream_reports_each_matching_tuple() -> None:
    m = ReferenceMatcher(DDL)
    assert m.register_query("SELECT * FROM B WHERE B.x < 3") == "1"
    r = m.push("B", 0, {"x": 1, "y": 2, "tag": "a"})
    assert r == [{"query": "1", "ts": 0.0, "ids": {"B": 0}, "values": {"B.x": 1.0, "B.y": 2.0, "B.tag": "a"}}]
    assert m.push("B", 0, {"x": 3}) == []
    assert m.push("B", 1, {"y": 0}) == []  # NULL x
    assert m.push("B", 1, {"x": math.nan}) == []  # NaN is NULL
    r = m.push("B", 2, {"x": -1, "y": math.nan})
    assert r[0]["ids"] == {"B": 4}  # auto ids count every push of the stream
    assert r[0]["values"] == {"B.x": -1.0, "B.y": None, "B.tag": None}  # NaN is reported as NULL
    assert m.push("H", 2, {"y": 0}) == []  # another stream


def test_single_stream_has_no_window_check_and_sees_only_the_new_tuple() -> None:
    m = ReferenceMatcher(DDL)
    m.register_query("SELECT B.x FROM B MAXWINDOW 0 WHERE B.x > 0")
    assert len(m.push("B", 0, {"x": 1})) == 1
    assert len(m.push("B", 100, {"x": 1})) == 1


def test_query_ids() -> None:
    m = ReferenceMatcher(DDL)
    assert m.register_query("SELECT * FROM B") == "1"
    assert m.register_query("Query ID: alpha\nSELECT * FROM B") == "alpha"
    assert m.register_query("SELECT * FROM B", query_id="mine") == "mine"
    assert m.register_query("SELECT * FROM B") == "4"
    with pytest.raises(ValueError):
        m.register_query("SELECT * FROM B", query_id="mine")
    r = m.push("B", 0, {})
    assert sorted(x["query"] for x in r) == ["1", "4", "alpha", "mine"]


def test_explicit_ids_and_case_insensitive_names() -> None:
    m = ReferenceMatcher(DDL)
    m.register_query("select b.X as v from b")
    assert m.push("b", 1, {"X": 2}, id=77) == [{"query": "1", "ts": 1.0, "ids": {"B": 77}, "values": {"v": 2.0}}]
    assert m.push("B", 1, {"x": 2})[0]["ids"] == {"B": 1}


# -------------------------------------------------------------------------- joins


def test_join_reports_each_result_once_when_its_last_tuple_arrives() -> None:
    m = ReferenceMatcher(DDL)
    m.register_query("SELECT * FROM B, H MAXWINDOW 2 WHERE B.y = H.y")
    assert m.push("B", 0, {"y": 1}) == []  # B0
    assert m.push("B", 1, {"y": 2}) == []  # B1
    r = m.push("H", 1, {"y": 1, "n": 5})  # H0 joins B0
    assert ids(r) == [("1", (("B", 0), ("H", 0)))]
    assert r[0]["ts"] == 1.0
    assert r[0]["values"] == {"B.x": None, "B.y": 1.0, "B.tag": None, "H.y": 1.0, "H.n": 5.0}
    r = m.push("B", 1, {"y": 1})  # B2 joins H0 (same ts: the earlier arrival counts)
    assert ids(r) == [("1", (("B", 2), ("H", 0)))]
    r = m.push("H", 3, {"y": 1})  # H1: B0 is 3 s older (outside), B2 2 s older (inclusive)
    assert ids(r) == [("1", (("B", 2), ("H", 1)))]


def test_join_with_aliases_and_expressions() -> None:
    m = ReferenceMatcher(DDL)
    m.register_query("SELECT b.x + h.y AS s, h.* FROM B AS b, H h WINDOW b.ts <= h.ts MAXWINDOW 10 WHERE b.x < h.y")
    m.push("H", 0, {"y": 5})
    assert m.push("B", 1, {"x": 1}) == []  # b.ts > h.ts
    r = m.push("H", 2, {"y": 4, "n": 1})
    assert r == [{"query": "1", "ts": 2.0, "ids": {"b": 0, "h": 1}, "values": {"s": 5.0, "h.y": 4.0, "h.n": 1.0}}]


def test_or_is_reported_once() -> None:
    m = ReferenceMatcher(DDL)
    m.register_query("SELECT * FROM B, H MAXWINDOW 5 WHERE B.x = 1 OR H.y = 1 OR B.x = H.y")
    m.push("B", 0, {"x": 1})
    assert len(m.push("H", 0, {"y": 1})) == 1


def test_three_streams_without_condition_is_a_windowed_cross_product() -> None:
    m = ReferenceMatcher(DDL)
    m.register_query("SELECT K.z FROM B, H, K MAXWINDOW 1")
    m.push("B", 0, {})  # B0
    m.push("B", 1, {})  # B1
    m.push("H", 1, {})  # H0: no K yet
    assert m.push("H", 2, {}) == []  # H1
    r = m.push("K", 2, {"z": 3})  # K0 at 2: B1 (ts 1) with H0 or H1; B0 is 2 s older
    assert ids(r) == [("1", (("B", 1), ("H", 0), ("K", 0))), ("1", (("B", 1), ("H", 1), ("K", 0)))]
    assert all(x["ts"] == 2.0 and x["values"] == {"K.z": 3.0} for x in r)


def test_maxwindow_units() -> None:
    m = ReferenceMatcher(DDL)
    m.register_query("SELECT * FROM B, H MAX WINDOW 1500 ms", query_id="a")
    m.register_query("SELECT * FROM B, H MAXWINDOW 1 min", query_id="b")
    m.push("B", 0, {})
    assert ids(m.push("H", 1.5, {})) == [("a", (("B", 0), ("H", 0))), ("b", (("B", 0), ("H", 0)))]
    assert ids(m.push("H", 1.75, {})) == [("b", (("B", 0), ("H", 1)))]


# ---------------------------------------------------------------- late tuples


def test_late_tuples_without_lateness() -> None:
    m = ReferenceMatcher(DDL)
    m.register_query("SELECT * FROM B, H MAXWINDOW 5")
    m.push("B", 5, {})  # B0
    assert m.push("H", 4, {}) == []  # late: 4 < 5
    assert m.late == [("H", 4.0, 0)]
    assert ids(m.push("H", 5, {})) == [("1", (("B", 0), ("H", 1)))]  # late H0 consumed id 0
    m.heartbeat(8)
    assert m.push("B", 7.5, {}) == []  # late after the heartbeat
    assert m.late[-1] == ("B", 7.5, 1)
    m.heartbeat(3)  # no effect
    assert len(m.push("B", 8, {})) == 1  # H1 (ts 5) is 3 s older


def test_lateness_bound_is_inclusive_and_late_tuples_are_never_stored() -> None:
    m = ReferenceMatcher(DDL, allowed_lateness=2)
    m.register_query("SELECT * FROM B, H MAXWINDOW 1")
    m.push("B", 5, {})  # B0
    r = m.push("H", 3, {})  # 3 == 5 - 2: accepted; B0 is 2 s away
    assert r == [] and m.late == []
    assert ids(m.push("B", 4, {})) == [("1", (("B", 1), ("H", 0)))]
    assert m.push("H", 2.5, {}) == []  # late
    assert m.late == [("H", 2.5, 1)]
    assert ids(m.push("B", 3, {})) == [("1", (("B", 2), ("H", 0)))]  # not with the late H1


def test_out_of_order_within_lateness_gives_timestamp_order_results() -> None:
    m = ReferenceMatcher(DDL, allowed_lateness=10)
    m.register_query("SELECT * FROM B, H MAXWINDOW 1 WHERE B.ts < H.ts")
    m.push("H", 5, {})  # H0
    assert ids(m.push("B", 4, {})) == [("1", (("B", 0), ("H", 0)))]
    assert m.push("B", 6, {}) == []


# ------------------------------------------------------- registration and removal


def test_registration_sees_stored_tuples_at_or_after_the_horizon() -> None:
    m = ReferenceMatcher(DDL)
    m.register_query("SELECT * FROM B, H MAXWINDOW 2", query_id="w2")  # Wmax = 2
    m.push("B", 0, {})  # B0; H = -2
    m.push("B", 3, {})  # B1; H = 1
    m.register_query("SELECT * FROM B, H MAXWINDOW 10", query_id="w10")  # since = 1
    r = m.push("H", 4, {})
    # w10 would accept B0 by its window, but B0 is older than its since_ts (1).
    assert ids(r) == [("w10", (("B", 1), ("H", 0))), ("w2", (("B", 1), ("H", 0)))]
    # Now Wmax = 10: the horizon stays at max(1, 4 - 10) = 1.
    m.register_query("SELECT * FROM B, H MAXWINDOW 10", query_id="late10")
    assert m.queries["late10"][1] == 1.0
    r = m.push("H", 4, {})
    assert ids(r) == [
        ("late10", (("B", 1), ("H", 1))),
        ("w10", (("B", 1), ("H", 1))),
        ("w2", (("B", 1), ("H", 1))),
    ]


def test_horizon_follows_lateness_and_single_stream_queries_do_not_widen_it() -> None:
    m = ReferenceMatcher(DDL, allowed_lateness=1)
    m.register_query("SELECT * FROM B MAXWINDOW 100")
    m.heartbeat(10)
    assert m.horizon == 9.0
    m.register_query("SELECT * FROM B, H MAXWINDOW 3")
    assert m.horizon == 9.0  # registering changes nothing until time moves
    m.heartbeat(10)
    assert m.horizon == 9.0  # max(9, 10 - 1 - 3)
    m.heartbeat(14)
    assert m.horizon == 10.0
    m.unregister_query("2")
    m.push("B", 14, {})
    assert m.horizon == 13.0


def test_heartbeat_horizon_limits_a_new_query() -> None:
    m = ReferenceMatcher(DDL)
    m.push("B", 0, {})  # B0 with no query registered: Wmax = 0, so H = 0
    m.register_query("SELECT * FROM B, H MAXWINDOW 5", query_id="early")
    assert m.queries["early"][1] == 0.0
    assert ids(m.push("H", 1, {})) == [("early", (("B", 0), ("H", 0)))]
    m.heartbeat(6)  # H = 6 - 5 = 1
    m.register_query("SELECT * FROM B, H MAXWINDOW 5", query_id="later")
    assert m.queries["later"][1] == 1.0
    r = m.push("B", 6, {})  # H0 (ts 1) is exactly 5 s older and not older than 1
    assert ids(r) == [("early", (("B", 1), ("H", 0))), ("later", (("B", 1), ("H", 0)))]


def test_unregistered_query_reports_nothing() -> None:
    m = ReferenceMatcher(DDL)
    m.register_query("SELECT * FROM B", query_id="a")
    m.register_query("SELECT * FROM B", query_id="b")
    m.unregister_query("a")
    assert ids(m.push("B", 0, {})) == [("b", (("B", 0),))]
    with pytest.raises(KeyError):
        m.unregister_query("a")


def test_query_registered_later_joins_with_earlier_tuples() -> None:
    m = ReferenceMatcher(DDL)
    m.register_query("SELECT * FROM K", query_id="keep")  # single stream: Wmax stays 0
    m.push("B", 3, {"x": 1})  # H = 3
    m.register_query("SELECT * FROM B, H MAXWINDOW 5 WHERE B.x = 1", query_id="j")  # since = 3
    assert ids(m.push("H", 3, {})) == [("j", (("B", 0), ("H", 0)))]


# --------------------------------------------------------------- property checks


def _run(ref: ReferenceMatcher, workload: Workload) -> Counter:
    """Replay ``workload`` on ``ref``; every result as (query, ts, ids, values)."""
    out: Counter = Counter()
    for op in workload.ops:
        if isinstance(op, Register):
            ref.register_query(*op.call_args())
        elif isinstance(op, Unregister):
            ref.unregister_query(op.query_id)
        elif isinstance(op, Heartbeat):
            ref.heartbeat(op.ts)
        else:
            for r in ref.push(op.stream, op.ts, op.values, op.id):
                out[(r["query"], r["ts"], tuple(sorted(r["ids"].items())), repr(sorted(r["values"].items())))] += 1
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(workload=st.one_of(workloads(), workloads(churn=True)))
def test_generated_workloads_are_valid(workload: Workload) -> None:
    """Every generated query parses and binds, and the reference runs every workload."""
    _run(ReferenceMatcher(workload.ddl, workload.lateness), workload)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(workload=workloads(), data=st.data())
def test_results_do_not_depend_on_arrival_order(workload: Workload, data) -> None:
    """With every query registered first, explicit ids and no tuple late, the results of the
    whole run are the same whatever the arrival order (each combination once, when its last
    tuple arrives). Checked against the timestamp-sorted replay."""
    registers = [op for op in workload.ops if isinstance(op, Register)]
    pushes = [op for op in workload.ops if isinstance(op, Push)]
    pushes = [Push(p.stream, p.ts, p.values, id=i) for i, p in enumerate(pushes)]
    shuffled = data.draw(st.permutations(pushes), label="arrival order")
    in_order = sorted(pushes, key=lambda p: p.ts)
    late_ok = ReferenceMatcher(workload.ddl, allowed_lateness=1000)
    got = _run(late_ok, Workload(workload.ddl, 1000, registers + shuffled))
    want = _run(ReferenceMatcher(workload.ddl), Workload(workload.ddl, 0, registers + in_order))
    assert got == want
