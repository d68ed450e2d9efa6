"""The matcher through its public API: the thesis' running example, lateness,
heartbeats, registration changes while tuples flow, and clear errors."""

from __future__ import annotations

import copy
import json
import pickle
import random
import warnings
from functools import partial

import pytest

import mqo
from mqo.matcher import ORDERS
from mqo.results import TupleError
from predicates import Kind
from tests.conftest import WORKLOADS

# these tests push sparse tuples: a column left out is NULL
sparse_matcher = partial(mqo.Matcher, missing="null", time="global")  # one clock; per-stream time: test_time.py

H_TUPLES = [(0, 6, 98), (1, 1, 90), (2, 7, 98), (3, 2, 98), (4, 8, 89)]
K_TUPLES = [(1, 150), (2, 100), (3, 150), (5, 150), (6, 75)]
B_TUPLES = [(1, 150, 101), (2, 97, 101), (4, 35, 101), (5, 100, 101), (8, 150, 101)]


def feed_figure_3_16(m: mqo.Matcher) -> list:
    out = []
    for ts, p, t in B_TUPLES:
        out += m.push("B", ts, {"pressure": p, "temp": t, "alert": 0})
    for ts, b, v in H_TUPLES:
        out += m.push("H", ts, {"beatrate": b, "vib": v, "alert": 1})
    for ts, f in K_TUPLES:
        out += m.push("K", ts, {"fluid": f})
    return out


@pytest.mark.parametrize("order", ORDERS)
def test_running_example_gives_query_3_with_h_at_ts_0(order, thesis_ddl, running_example):
    m = sparse_matcher(thesis_ddl, allowed_lateness=8, order=order)
    m.register_queries(running_example)
    assert feed_figure_3_16(m) == []
    matches = m.push("T", 1, {"fluct": 103, "degree": 101, "incr": 98})
    assert [mqo_dict(x) for x in matches] == [
        {"query": "3", "ts": 1.0, "ids": {"T": 0, "H": 0}, "values": {"H.alert": 1}}
    ]
    assert m.late_count == 0
    m.state._check()


def mqo_dict(match):
    return match.as_dict()


def test_late_tuple_is_reported_not_matched(thesis_ddl, running_example):
    seen = []
    m = sparse_matcher(thesis_ddl, late_sink=seen.append)
    m.register_queries(running_example)
    feed_figure_3_16(m)
    assert m.push("T", 1, {"fluct": 103, "degree": 101, "incr": 98}) == []
    # fed stream by stream, every H and K tuple (ts <= 6) comes after B's ts 8: late too
    assert m.late_count == 11 and m.counters.late == 11
    assert [t.stream for t in seen] == ["H"] * 5 + ["K"] * 5 + ["T"]
    late = seen[-1]
    assert (late.stream, late.ts, late.id) == ("T", 1.0, 0)
    assert late.values == {"fluct": 103.0, "degree": 101.0, "incr": 98.0}
    assert "the newest ts (8) of the stream furthest behind" in late.reason
    assert list(m.late_tuples) == seen


def test_late_tuple_without_a_sink_warns_once(thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    m.register_query("SELECT * FROM B WHERE B.pressure > 0")
    m.push("B", 10, {"pressure": 1})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m.push("B", 5, {"pressure": 1})
        m.push("B", 4, {"pressure": 1})
    assert len(caught) == 1 and "late tuple on stream B" in str(caught[0].message)
    assert m.late_count == 2


def test_within_lateness_results_equal_timestamp_order(thesis_ddl):
    query = "SELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 3 WHERE B.pressure < H.vib"
    in_order = [("B", 1, 1), ("H", 2, 5), ("B", 3, 2), ("H", 4, 9), ("B", 5, 1), ("H", 6, 0)]
    shuffled = [in_order[i] for i in (1, 0, 3, 2, 5, 4)]

    def run(tuples, lateness):
        m = sparse_matcher(thesis_ddl, allowed_lateness=lateness)
        m.register_query(query)
        out = []
        for stream, ts, v in tuples:
            values = {"pressure": v} if stream == "B" else {"vib": v}
            ident = {t: i for i, t in enumerate(x for x in in_order if x[0] == stream)}[(stream, ts, v)]
            out += [(r.ts, tuple(sorted(r.ids.items()))) for r in m.push(stream, ts, values, id=ident)]
        return sorted(out), m.late_count

    expected, late = run(in_order, 0)
    assert late == 0 and len(expected) == 3
    assert run(shuffled, 1) == (expected, 0)


def test_heartbeat_purges_quiet_streams(thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    m.register_query("SELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 2 WHERE B.pressure < H.vib")
    for ts in range(10):
        m.push("B", ts, {"pressure": 1.0})
    assert 0 < len(m.state) <= 4
    m.heartbeat(100)
    assert len(m.state) == 0
    assert m.watermark == 100
    assert m.push("H", 100, {"vib": 5}) == []
    m.state._check()


def test_state_stays_bounded_by_the_largest_window(thesis_ddl):
    m = sparse_matcher(thesis_ddl, bucket_width=1)
    m.register_query("SELECT * FROM B, H MAXWINDOW 5 WHERE B.pressure = H.vib")
    for ts in range(1000):
        m.push("B", ts, {"pressure": ts % 7})
        m.push("H", ts + 0.5, {"vib": ts % 5})
        assert len(m.state) <= 2 * (5 + 2) + 2
    m.state._check()


def test_registration_mid_stream_sees_earlier_tuples_in_the_window(thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    m.register_query("Query ID: small\nSELECT * FROM B, H MAXWINDOW 10 WHERE B.pressure = H.vib")
    m.push("B", 1, {"pressure": 7})
    m.push("H", 2, {"vib": 8})
    late_query = m.register_query("SELECT B.pressure FROM B, H MAXWINDOW 10 WHERE B.pressure < H.vib")
    assert late_query == "2"
    got = m.push("H", 3, {"vib": 7})
    assert sorted(r.query for r in got) == ["small"]
    got = m.push("H", 4, {"vib": 9})
    assert [(r.query, r.ids) for r in got] == [("2", {"B": 0, "H": 2})]
    # a result whose last tuple arrived before registration is not reported afterwards
    got = m.push("B", 5, {"pressure": 8.5})
    assert sorted((r.query, r.ids["H"]) for r in got) == [("2", 2)] or sorted((r.query, r.ids["H"]) for r in got) == [
        ("2", 3)
    ]


def test_query_with_a_larger_window_registered_late_never_uses_purged_tuples(thesis_ddl):
    m = sparse_matcher(thesis_ddl, bucket_width=1)
    m.register_query("SELECT * FROM B, H MAXWINDOW 2 WHERE B.pressure = H.vib")
    for ts in range(20):
        m.push("B", ts, {"pressure": 1.0})
    horizon = m.retention_horizon
    assert horizon == 19 - 2
    m.register_query("Query ID: wide\nSELECT * FROM B, H MAXWINDOW 100 WHERE B.pressure = H.vib")
    got = [r for r in m.push("H", 20, {"vib": 1.0}) if r.query == "wide"]
    # the wide query sees exactly the B tuples retained at its registration: ts >= 17
    assert sorted(r.ids["B"] for r in got) == [17, 18, 19]


def test_unregistered_query_reports_nothing_more(thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    qid = m.register_query("SELECT * FROM B WHERE B.pressure > 1")
    assert len(m.push("B", 1, {"pressure": 2})) == 1
    m.unregister_query(qid)
    assert m.push("B", 2, {"pressure": 2}) == []
    assert m.query_ids == []
    m.registry._check()
    with pytest.raises(KeyError, match="no query with id"):
        m.unregister_query(qid)


def test_unregistering_frees_unshared_predicates_and_lists(thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    a = m.register_query("SELECT * FROM B WHERE B.pressure < 5 AND B.temp > 1")
    m.register_query("SELECT * FROM B WHERE B.pressure < 5")
    assert m.registry.distinct_predicates() == 2
    m.unregister_query(a)
    assert m.registry.distinct_predicates() == 1
    assert [k.describe() for k in m.registry.lists()] == ["B.pressure < c"]
    m.registry._check()


def test_only_ensure_plan_and_the_calls_that_match_compile(thesis_ddl):
    """Reading the plan or the stored tuples compiles nothing; ``ensure_plan`` compiles
    once per registration change (the same plan until the next), and a push compiles
    first, so a query registered since matches at once."""
    m = sparse_matcher(thesis_ddl)
    m.register_query("Query ID: low\nSELECT * FROM B WHERE B.pressure > 1")
    assert m.registrations.plan is None and m.state is None
    plan = m.ensure_plan()
    assert m.ensure_plan() is plan and m.registrations.plan is plan and m.pipeline.plan is plan
    assert m.state is not None and len(m.state) == 0
    m.register_query("Query ID: high\nSELECT * FROM B WHERE B.pressure > 3")
    assert m.registrations.plan is None and m.pipeline.plan is plan  # not compiled yet
    assert sorted(r.query for r in m.push("B", 1, {"pressure": 5})) == ["high", "low"]
    assert m.registrations.plan is not None and m.registrations.plan is not plan
    assert m.pipeline.plan is m.registrations.plan


def test_or_query_reports_each_result_once(thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    m.register_query("SELECT * FROM B, H MAXWINDOW 5 WHERE B.pressure < 3 OR H.vib > 1 OR B.pressure < H.vib")
    m.push("B", 1, {"pressure": 1})
    got = m.push("H", 2, {"vib": 2})
    assert len(got) == 1


def test_queries_without_connecting_predicates_use_the_window(thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    m.register_query("SELECT * FROM B, K MAXWINDOW 2 WHERE B.pressure > 1 AND K.fluid < 5")
    m.push("K", 0, {"fluid": 1})
    m.push("K", 1, {"fluid": 9})
    m.push("K", 2, {"fluid": 2})
    got = m.push("B", 3, {"pressure": 4})
    assert sorted(r.ids["K"] for r in got) == [2]


def test_select_expressions_and_nulls(thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    m.register_query("SELECT B.pressure * 2 AS doubled, B.temp / B.alert AS ratio, B.temp FROM B WHERE B.pressure > 0")
    (r,) = m.push("B", 1, {"pressure": 2.5, "temp": 3.0, "alert": 0})
    assert r.values == {"doubled": 5.0, "ratio": None, "B.temp": 3.0}
    (r,) = m.push("B", 2, {"pressure": 1.0, "temp": float("nan")})
    assert r.values == {"doubled": 2.0, "ratio": None, "B.temp": None}


def test_nulls_and_nan_match_nothing(thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    m.register_query("SELECT * FROM B WHERE B.pressure != 3")
    m.register_query("SELECT * FROM B WHERE NOT (B.pressure > 3)")
    assert m.push("B", 1, {"pressure": None}) == []
    assert m.push("B", 2, {"pressure": float("nan")}) == []
    assert m.push("B", 3, {}) == []
    assert len(m.push("B", 4, {"pressure": 1})) == 2


@pytest.mark.parametrize("op", ["!=", "=", "<", ">="])
def test_two_text_columns_of_one_tuple_compare_as_written(op):
    """``B.tag != B.kind`` holds for 'a' and 'b': a comparison of two columns of one
    tuple compared as they are (texts, booleans) is decided as the other predicates,
    pushed one by one and in a batch, and a NULL side holds for no operator."""
    holds = {"!=": (True, False, True), "=": (False, True, False), "<": (True, False, False), ">=": (False, True, True)}
    pairs = [("a", "b"), ("c", "c"), ("d", "c")]
    m = mqo.Matcher("REGISTER STREAM B (x FLOAT, tag STRING, kind STRING);", missing="null")
    m.register_query(f"Query ID: q\nSELECT * FROM B WHERE B.tag {op} B.kind")
    one = [bool(m.push("B", float(k), {"x": 1.0, "tag": tag, "kind": kind})) for k, (tag, kind) in enumerate(pairs)]
    assert one == list(holds[op])
    batch = {"ts": [10.0, 11.0, 12.0, 13.0], "x": [1.0] * 4, "tag": [p[0] for p in pairs] + [None]}
    batch["kind"] = [p[1] for p in pairs] + ["z"]
    found = sorted(r.ids["B"] for r in m.push_batch("B", batch).matches())
    assert found == [3 + k for k, ok in enumerate(holds[op]) if ok]


def test_ids_are_given_or_counted_per_stream(thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    m.register_query("SELECT * FROM B WHERE B.pressure > 0")
    assert m.push("B", 1, {"pressure": 1})[0].ids == {"B": 0}
    assert m.push("B", 2, {"pressure": 1}, id=42)[0].ids == {"B": 42}
    assert m.push("B", 3, {"pressure": 1})[0].ids == {"B": 2}


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda m: m.push("Blood", 1, {}), "unknown stream 'Blood' (did you mean 'B'?)"),
        (lambda m: m.push("B", 1, {"presure": 1}), "stream B has no column 'presure' (did you mean 'pressure'?)"),
        (lambda m: m.push("B", 1, {"pressure": "high"}), "column pressure (FLOAT): expected a number, got 'high'"),
        (lambda m: m.push("B", float("nan"), {}), "ts must be a finite number"),
        (lambda m: m.push("B", "3", {}), "ts must be a finite number"),
        (lambda m: m.push("B", 1, {"ts": 3}), "pass ts as its own argument"),
        (lambda m: m.push("B", 1, {}, id=1.5), "id must be a 64-bit integer"),
        (lambda m: m.push("B", 1, {}, id=2**63), "id must be a 64-bit integer"),
        (lambda m: m.push("B", 1, {"alert": 0.5}), "column alert (INTEGER): expected an integer, got 0.5"),
        (lambda m: m.push("B", 1, {"alert": 2**63}), "column alert (INTEGER): expected a 64-bit integer"),
        (lambda m: m.push("B", 1, {"pressure": float("inf")}), "column pressure (FLOAT): expected a finite number"),
    ],
)
def test_bad_tuples_are_clear_errors(call, fragment, thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    m.register_query("SELECT * FROM B WHERE B.pressure > 0")
    with pytest.raises(TupleError) as err:
        call(m)
    assert fragment in str(err.value)


SENSORS = "REGISTER STREAM S (sensor INTEGER, temp FLOAT, name STRING);"


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ([1, 30.0, "a"], "got list [1, 30.0, 'a']"),
        ((1, 30.0, "a"), "got tuple"),
        ("sensor=1", "got str 'sensor=1'"),
        (7, "got int 7"),
        ({("sensor",): 1}.items(), "got dict_items"),
    ],
)
def test_values_that_are_not_a_mapping_are_a_tuple_error_naming_the_stream(values, fragment):
    m = mqo.Matcher(SENSORS)
    m.register_query("SELECT * FROM S WHERE S.temp > 0")
    with pytest.raises(TupleError) as err:
        m.push("S", 2, values)
    message = str(err.value)
    assert message.startswith("stream S: values must be a mapping of column -> value")
    assert "{'sensor': ..., 'temp': ..., 'name': ...}" in message and fragment in message


def _sensor_matcher() -> mqo.Matcher:
    m = mqo.Matcher(SENSORS, idle_timeout=None)
    m.register_queries(
        "Query ID: warm\nSELECT * FROM S WHERE S.temp > 20;\n"
        "Query ID: pair\nSELECT * FROM S a, S b MAXWINDOW 5 WHERE a.sensor = b.sensor AND a.ts < b.ts;\n"
        "Query ID: n\nSELECT S.sensor, COUNT(*), AVG(S.temp) FROM S [RANGE 10] GROUP BY S.sensor;"
    )
    return m


def test_a_refused_push_leaves_the_matcher_as_it_was():
    """Every kind of refused tuple, between good ones: the good ones get the results,
    ids and aggregate rows they get in a matcher that never saw the refused ones."""
    good = [(1, {"sensor": 1, "temp": 30.0, "name": "a"}), (2, {"sensor": 1, "temp": 10.0, "name": "b"})]
    refused = [
        [1, 30.0, "a"],
        "a",
        None,
        {"sensor": 1, "temp": 30.0},
        {"sensor": 1, "temp": 30.0, "name": "a", "humidity": 3},
        {"sensor": 1, "temp": "warm", "name": "a"},
    ]
    tried, clean = _sensor_matcher(), _sensor_matcher()
    seen: list = []
    expected: list = []
    for ts, values in good:
        for bad in refused:
            with pytest.raises(TupleError):
                tried.push("S", ts, bad)
        seen += tried.push("S", ts, values)
        expected += clean.push("S", ts, values)
    assert seen == expected and {m.query for m in seen} == {"warm", "pair"}
    assert [m.ids for m in seen if m.query == "pair"] == [{"a": 0, "b": 1}]
    assert tried.flush().to_pylist() == clean.flush().to_pylist() != []


def test_a_missing_column_is_an_error_unless_asked_for(thesis_ddl):
    strict = mqo.Matcher(thesis_ddl)
    strict.register_query("SELECT * FROM B WHERE B.pressure > 0")
    with pytest.raises(TupleError, match=r"stream B: no value for column\(s\) temp, alert"):
        strict.push("B", 1, {"pressure": 1.0})
    assert strict.push("B", 1, {"pressure": 1.0, "temp": None, "alert": 3})[0].values["B.temp"] is None
    sparse = sparse_matcher(thesis_ddl)
    sparse.register_query("SELECT * FROM B WHERE B.pressure > 0")
    assert sparse.push("B", 1, {"pressure": 1.0})[0].values["B.alert"] is None


def test_integers_stay_exact_in_64_bits(thesis_ddl):
    m = mqo.Matcher(thesis_ddl)
    m.register_query("SELECT * FROM B WHERE B.alert > 9007199254740992")
    big = 9007199254740993  # 2**53 + 1: not a double
    (match,) = m.push("B", 1, {"pressure": 1.0, "temp": 1.0, "alert": big}, id=2**63 - 1)
    assert match.values["B.alert"] == big and match.ids == {"B": 2**63 - 1}
    assert m.push("B", 2, {"pressure": 1.0, "temp": 1.0, "alert": 2**53}) == []


def test_register_queries_is_all_or_nothing(thesis_ddl, running_example):
    m = sparse_matcher(thesis_ddl)
    with pytest.raises(mqo.QueryError) as err:
        m.register_queries([running_example, "SELECT * FROM B WHERE B.nope < 1"])
    assert "unknown column 'nope'" in str(err.value)
    assert m.query_ids == []
    assert m.register_queries([running_example, "SELECT * FROM B"]) == ["1", "2", "3", "4"]


def test_query_ids_given_and_taken(thesis_ddl):
    m = sparse_matcher(thesis_ddl)
    assert m.register_query("SELECT * FROM B", query_id="alerts") == "alerts"
    with pytest.raises(mqo.QueryError, match="already registered"):
        m.register_query("SELECT * FROM H", query_id="alerts")
    with pytest.raises(mqo.QueryError, match="expected one query"):
        m.register_query("SELECT * FROM B; SELECT * FROM H")
    # a given id replaces the one the text would give (its header, or its position),
    # so only the given id must be free
    assert m.register_query("SELECT * FROM H", query_id="3") == "3"
    assert m.register_query("SELECT * FROM B", query_id="b") == "b"  # its position is 3
    assert m.register_query("Query ID: alerts\nSELECT * FROM K", query_id="k") == "k"
    assert m.query_ids == ["alerts", "3", "b", "k"]


def test_counters_count_the_work(thesis_ddl, running_example):
    m = sparse_matcher(thesis_ddl, allowed_lateness=8, order="WAJ")
    m.register_queries(running_example)
    feed_figure_3_16(m)
    m.push("T", 1, {"fluct": 103, "degree": 101, "incr": 98})
    c = m.counters
    assert c.tuples == 16 and c.results == 1 and c.late == 0
    assert c.comparisons > 0 and c.index_probes > 0 and c.intermediate > 0 and c.bitset_ops > 0
    assert c.selectivity(Kind.WINDOW) is not None
    snapshot = c.as_dict()
    assert set(snapshot["selectivity"]) == {"attribute", "join", "window"}
    c.reset()
    assert c.tuples == 0 and c.phase_in["join"] == 0


def test_unknown_order_is_rejected(thesis_ddl):
    with pytest.raises(ValueError, match="unknown evaluation order 'ABC'"):
        sparse_matcher(thesis_ddl, order="ABC")
    assert sparse_matcher(thesis_ddl, order="static:wja").config.static_order[0].value == "window"


def test_explain_from_python(thesis_ddl, running_example):
    m = sparse_matcher(thesis_ddl)
    m.register_queries(running_example)
    text = m.explain()
    assert "T.fluct = 51.5" in text and "sharing ratio" in text
    assert "1: FROM B, H, K, T  MAXWINDOW 4 s" in text


def test_public_api_is_explicit():
    assert set(mqo.__all__) >= {"Matcher", "QueryError", "MqoError"}
    for name in mqo.__all__:
        assert hasattr(mqo, name)


def test_restore_carries_on_exactly_under_the_adaptive_order(thesis_ddl):
    """Same results in the same order within every push, late tuples kept, after a
    snapshot and restore mid-stream (the adaptive order's statistics travel along)."""
    queries = (WORKLOADS / "fig5_13_overlap25.mqo").read_text()
    rnd = random.Random(3)
    pushes = []
    for i in range(1500):
        stream = rnd.choice("BHTK")
        values = {
            "B": {"pressure": rnd.randint(0, 200), "temp": rnd.randint(0, 200), "alert": rnd.randint(0, 1)},
            "H": {"beatrate": rnd.randint(0, 200), "vib": rnd.randint(0, 200), "alert": rnd.randint(0, 1)},
            "T": {"fluct": rnd.randint(0, 200), "degree": rnd.randint(0, 200), "incr": rnd.randint(0, 200)},
            "K": {"fluid": rnd.randint(0, 200)},
        }[stream]
        pushes.append((stream, i * 0.25 - rnd.choice([0, 0, 0, 3]), values))
    first = mqo.Matcher(thesis_ddl, allowed_lateness=2, late_sink=lambda late: None, time="global")
    first.register_queries(queries)
    for stream, ts, values in pushes[:900]:
        first.push(stream, ts, values)
    second = mqo.Matcher.restore(first.snapshot(), late_sink=lambda late: None)
    assert list(second.late_tuples) == list(first.late_tuples) and first.late_count
    for stream, ts, values in pushes[900:]:
        assert first.push(stream, ts, values) == second.push(stream, ts, values)


@pytest.mark.parametrize("order", ORDERS)
def test_no_partial_results_grow_toward_a_stream_that_stores_nothing(order, thesis_ddl, running_example):
    # every query of the running example reads T: until a T tuple is stored, B, H and K
    # tuples make no partial results at all, and the first T tuple finds the results
    m = sparse_matcher(thesis_ddl, allowed_lateness=8, order=order)
    m.register_queries(running_example)
    assert feed_figure_3_16(m) == []
    assert m.counters.intermediate == 0
    matches = m.push("T", 1, {"fluct": 103, "degree": 101, "incr": 98})
    assert [x.query for x in matches] == ["3"]
    assert m.counters.intermediate > 0


def test_a_matchs_ids_and_values_are_read_only() -> None:
    # the results of one tuple share their ids and values: a change to one result's
    # would change the others', so none is allowed; a copy can be changed
    m = mqo.Matcher("REGISTER STREAM S (x FLOAT, y FLOAT);")
    m.register_queries(["Query ID: a\nSELECT * FROM S WHERE S.x > 1", "Query ID: b\nSELECT * FROM S WHERE S.x > 2"])
    a, b = m.push("S", 1.0, {"x": 5.0, "y": 1.0})
    assert (a.query, b.query) == ("a", "b")
    assert a.values == b.values == {"S.x": 5.0, "S.y": 1.0}
    changes = [
        lambda d: d.__setitem__("S.x", 0.0),
        lambda d: d.__delitem__("S.x"),
        lambda d: d.update({"S.x": 0.0}),
        lambda d: d.pop("S.x"),
        lambda d: d.popitem(),
        lambda d: d.setdefault("S.z", 0.0),
        lambda d: d.clear(),
    ]
    for change in changes:
        for d in (a.values, a.ids):
            with pytest.raises(TypeError, match="read-only"):
                change(d)
    assert b.values == {"S.x": 5.0, "S.y": 1.0} and b.ids == {"S": 0}
    own = dict(a.values)
    own["S.x"] = 0.0
    assert own["S.x"] == 0.0 and a.values["S.x"] == 5.0
    # they travel like dicts
    assert pickle.loads(pickle.dumps(a)) == a
    assert copy.deepcopy(a) == a and copy.copy(a) == a
    assert json.loads(json.dumps(a.as_dict())) == {
        "query": "a",
        "ts": 1.0,
        "ids": {"S": 0},
        "values": {"S.x": 5.0, "S.y": 1.0},
    }
    # a match made by hand is read-only too, and keeps no tie to the dicts it was given
    given = {"S.x": 1.0}
    made = mqo.Match("q", 1.0, {"S": 3}, given)
    given["S.x"] = 2.0
    assert made.values == {"S.x": 1.0}
    with pytest.raises(TypeError, match="read-only"):
        made.ids["S"] = 4
