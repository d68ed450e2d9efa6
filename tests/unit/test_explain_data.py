"""``Matcher.explain_data()``: the plan's account as plain data, checked against what was
registered and pushed (the text ``explain()`` writes from it is pinned byte for byte by
tests/unit/test_golden.py and the CLI tests)."""

from __future__ import annotations

import json
import re
import warnings
from fractions import Fraction
from typing import Any

import mqo

DDL = (
    "REGISTER STREAM B (pressure FLOAT, temp FLOAT);"
    "REGISTER STREAM H (patient INTEGER, beatrate INTEGER, vib FLOAT);"
    "REGISTER STREAM T (fluct FLOAT, name VARCHAR);"
)
MATCH = {
    # constants registered out of order: the list holds them in covering order
    "a": "SELECT * FROM B WHERE B.pressure > 20 AND B.temp < 3",
    "b": "SELECT * FROM B WHERE B.pressure > 5 OR B.temp = 5",
    "b2": "SELECT * FROM B WHERE B.pressure > 10 AND B.temp < -1.5",
    "c": "SELECT B.pressure, H.vib FROM B, H MAXWINDOW 5 sec WHERE B.pressure > H.vib + 1 AND H.ts > B.ts",
    "c2": "SELECT * FROM B, H MAXWINDOW 2 sec WHERE B.pressure > H.vib - 3",
    "d": "SELECT * FROM B b1, B b2 WHERE b2.pressure > b1.pressure + 20 MAXWINDOW 2.5 sec",
    "e": "SELECT * FROM T WHERE T.name = 'x' AND T.fluct * T.fluct > 2",
    "never": "SELECT * FROM B WHERE 1 > 2",  # a contradiction: no disjunct, no slot
    "fast": "SELECT p.pressure, p.rate FROM pairs p WHERE p.rate > 100",
}
VIEWS = [
    "CREATE VIEW pairs AS SELECT B.pressure AS pressure, H.beatrate AS rate"
    " FROM B, H MAXWINDOW 5 sec WHERE B.pressure > H.vib;",
    "CREATE VIEW hi AS SELECT p.rate AS rate FROM pairs p WHERE p.rate > 100;",
]
AGGREGATES = {
    "g": "SELECT ISTREAM H.patient, AVG(H.beatrate) FROM H [RANGE 2 SLIDE 1] GROUP BY H.patient",
    "g2": "SELECT COUNT(*), MAX(H.vib) FROM H [RANGE UNBOUNDED SLIDE 1] WHERE H.vib > 3",
    "r": "SELECT DSTREAM MIN(H.vib) FROM H [ROWS 6 SLIDE 2] GROUP BY H.patient",
}
PUSHED = 120


def workload(order: str = "adaptive") -> mqo.Matcher:
    m = mqo.Matcher(DDL, order=order)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mqo.NeverMatchesWarning)
        m.register_queries(VIEWS[:1])
        for name in ("a", "b", "b2", "c", "c2", "d", "e", "never", "fast"):
            m.register_query(MATCH[name], query_id=name)
        m.register_queries(VIEWS[1:])
        for name, text in AGGREGATES.items():
            m.register_query(text, query_id=name)
    for i in range(PUSHED):
        m.push("B", 1.0 * i, {"pressure": float(i % 37), "temp": float(i % 7)})
        m.push("H", i + 0.5, {"patient": i % 3, "beatrate": 90 + i % 20, "vib": float(i % 11)})
        if i % 2:
            m.push("T", i + 0.7, {"fluct": float(i % 5), "name": "x"})
    return m


def constant_of(key: str, text: str) -> Fraction | None:
    """The number a predicate's text puts where its list's key says ``c`` (None: a
    string constant): ``B.pressure > 20`` under ``B.pressure > c``, ``B.pressure > H.vib - 3``
    under ``B.pressure > H.vib + c``."""
    prefix = key[: -len(" + c")] if key.endswith(" + c") else key[: -len("c")]
    assert text.startswith(prefix.rstrip()), (key, text)
    rest = text[len(prefix.rstrip()) :].strip()
    if not rest:
        return Fraction(0)
    if rest.startswith("'"):
        return None
    found = re.fullmatch(r"([+-])? ?(\d+(?:\.\d+)?)", rest)
    assert found is not None, (key, text)
    value = Fraction(found.group(2))
    return -value if found.group(1) == "-" else value


def test_explain_data_is_json_and_names_only_registered_queries() -> None:
    m = workload()
    data = m.explain_data()
    assert json.loads(json.dumps(data, allow_nan=False)) == data  # plain data: no tuple, Fraction or numpy value
    ids = set(m.query_ids)
    match_ids = {q["id"] for q in data["queries"]}
    # every registered query, and only those: a query that can never match has no slot
    assert match_ids | set(data["never_match"]) | set(data["aggregates"]["queries"]) == ids
    assert match_ids == set(MATCH) - {"never"} | {"pairs", "hi"} and data["never_match"] == ["never"]
    assert data["registered"] == len(match_ids) + 1 and data["slots"] == len(data["queries"])
    assert [q["slot"] for q in data["queries"] if q["id"] == "b"] == ["b[1]", "b[2]"]  # one slot per disjunct
    slots = {q["slot"] for q in data["queries"]}
    for lst in data["lists"]:
        for p in lst["predicates"]:
            assert p["queries"] and set(p["queries"]) <= ids and set(p["slots"]) <= slots
        assert lst["readers"] == sorted({q for p in lst["predicates"] for q in p["queries"]})


def test_lists_are_in_covering_order_and_agree_with_each_querys_bits() -> None:
    data = workload().explain_data()
    by_position = {}
    for kind in "AJW":
        lists = [lst for lst in data["lists"] if lst["kind"] == kind]
        assert [lst["index"] for lst in lists] == list(range(len(lists)))
        bits = [p["bit"] for lst in lists for p in lst["predicates"]]
        assert bits == list(range(data["bits"][kind]))  # each type's bits, list after list
        for lst in lists:
            positions = [f"{lst['index']}:{i}" for i in range(len(lst["predicates"]))]
            assert [p["position"] for p in lst["predicates"]] == positions
            constants = [constant_of(lst["key"], p["text"]) for p in lst["predicates"]]
            numbers = [c for c in constants if c is not None]
            assert numbers == sorted(set(numbers))  # ascending, each constant once
            for p in lst["predicates"]:
                by_position[(kind, p["position"])] = p
    pressure = next(lst for lst in data["lists"] if lst["key"] == "B.pressure > c")
    assert [p["text"] for p in pressure["predicates"]] == [
        "B.pressure > 5",
        "B.pressure > 10",
        "B.pressure > 20",
    ]
    assert [p["slots"] for p in pressure["predicates"]] == [["b[1]"], ["b2"], ["a"]]
    join = next(lst for lst in data["lists"] if lst["key"] == "B.pressure > H.vib + c")
    assert [p["slots"] for p in join["predicates"]] == [["c2"], ["pairs"], ["c"]]
    for q in data["queries"]:  # a query's bits are exactly the predicates that name it
        mine = {(b["kind"], b["position"]) for b in q["bits"]}
        named = {at for at, p in by_position.items() if q["slot"] in p["slots"]}
        assert mine == named, q["slot"]
        assert all(by_position[(b["kind"], b["position"])]["bit"] == b["bit"] for b in q["bits"])


def test_streams_windows_order_views_and_aggregates() -> None:
    m = workload()
    data = m.explain_data()
    assert [s["name"] for s in data["streams"]][:3] == ["B", "H", "T"]
    assert data["streams"][1]["columns"][0] == {"name": "patient", "type": "INTEGER"}
    assert data["roles"] == ["B#2"]
    queries = {q["slot"]: q for q in data["queries"]}
    assert queries["c"]["maxwindow"] == "5" and queries["c"]["maxwindow_seconds"] == 5.0
    assert queries["d"]["maxwindow"] == "2.5" and queries["a"]["maxwindow"] is None
    assert queries["d"]["from"] == [
        {"alias": "b1", "stream": "B", "role": "B"},
        {"alias": "b2", "stream": "B", "role": "B#2"},
    ]
    residual = data["residuals"]
    assert [(r["slot"], r["id"]) for r in residual] == [("e", "e")] and "T.fluct" in residual[0]["text"]
    sharing = data["sharing"]
    assert sharing["occurrences"] >= sharing["distinct"] > 0
    assert sharing["ratio"] == sharing["occurrences"] / sharing["distinct"]

    order = data["order"]
    assert order["mode"] == "adaptive"
    seen = {s["stream"]: s for s in order["streams"]}
    assert seen["B"]["seen"] == PUSHED and seen["H"]["seen"] == PUSHED
    # T's one query reads T alone: every order does the same work for its tuples, none is measured
    assert "T" not in seen
    for s in order["streams"]:
        assert set(s["fanout"]) == set(s["work"]) == {"A", "J", "W"}
        assert sorted(s["estimated_work"]) == sorted(["AJW", "AWJ", "JAW", "JWA", "WAJ", "WJA"])
        assert s["order"] in s["estimated_work"]

    views = {v["name"]: v for v in data["views"]}
    assert views["pairs"]["level"] == 1 and views["pairs"]["inputs"] == ["B", "H"]
    assert views["pairs"]["readers"] == ["fast", "hi"]  # in registration order
    assert views["pairs"]["columns"] == [{"name": "pressure", "type": "FLOAT"}, {"name": "rate", "type": "INTEGER"}]
    assert views["hi"]["level"] == 2 and views["hi"]["inputs"] == ["pairs"] and views["hi"]["readers"] == []

    agg = data["aggregates"]
    assert sorted(agg["queries"]) == sorted(AGGREGATES)
    readers: dict[str, Any] = {r["query"]: r for store in agg["stores"] for r in store["readers"]}
    assert readers["g"]["stream_op"] == "ISTREAM" and readers["g"]["size_seconds"] == 2.0
    assert readers["g2"]["size_seconds"] is None and readers["g2"]["calls"] == ["COUNT(*)", "MAX(vib)"]
    assert [s["landmark"] for s in agg["stores"] if "g2" in [r["query"] for r in s["readers"]]] == [True]
    counted = {r["query"]: r for cs in agg["count_stores"] for r in cs["readers"]}
    assert counted["r"]["rows"] == 6 and counted["r"]["slide_rows"] == 2 and counted["r"]["stream_op"] == "DSTREAM"
    assert {u for f in agg["filters"] for u in f["readers"]} == set(AGGREGATES)


def test_the_text_is_written_from_the_data() -> None:
    m = workload()
    data = m.explain_data()
    text = m.explain()
    assert m.explain_data() == data  # asking does not change the matcher
    for lst in data["lists"]:
        assert f"  list {lst['index']}: {lst['key']}    [{lst['note']}]" in text
        for p in lst["predicates"]:
            assert f" {p['text']}" in text and f"bit {p['bit']}" in text
    for s in data["order"]["streams"]:
        assert f"{s['stream']} tuples ({s['seen']:,} seen): order {s['order']}" in text


def test_a_static_order_and_an_empty_matcher() -> None:
    data = workload(order="WJA").explain_data()
    assert data["order"] == {"mode": "static WJA", "streams": [], "switches": None}
    empty = mqo.Matcher(DDL).explain_data()
    assert empty["lists"] == [] and empty["queries"] == [] and empty["views"] == []
    assert empty["aggregates"] is None and empty["order"]["streams"] == []
    assert json.loads(json.dumps(empty)) == empty
