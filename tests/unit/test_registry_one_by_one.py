"""Queries registered and removed one at a time (``register_query``, ``unregister_query``)
keep the registry's lists and use counts right (``QueryRegistry._check`` after every
change, under ``check=True``) and match as a matcher given the same queries at once,
also when a list's key objects change under it: declaring a view gives the compile
caches anew, so later queries bring equal keys that are other objects than the ones
the registry first kept for their lists."""

from __future__ import annotations

import random

import mqo

DDL = "REGISTER STREAM E (a FLOAT, b FLOAT, c FLOAT);"


def text(name: str, rnd: random.Random) -> str:
    columns = rnd.sample(["a", "b", "c"], rnd.randint(1, 3))
    conditions = [f"E.{c} {rnd.choice(['<', '>=', '<='])} {rnd.randint(0, 20) / 2}" for c in columns]
    return f"Query ID: {name}\nSELECT * FROM E WHERE " + " AND ".join(conditions)


def matches(m: mqo.Matcher, events: list[dict[str, float]], start: float) -> list[set[str]]:
    return [{r.query for r in m.push("E", start + k, event)} for k, event in enumerate(events)]


def test_one_at_a_time_across_new_key_objects() -> None:
    rnd = random.Random(7)
    events = [{c: rnd.randint(0, 20) / 2 for c in "abc"} for _ in range(6)]
    m = mqo.Matcher(DDL, check=True)
    live: dict[str, str] = {}
    for step in range(120):
        if step == 40:  # the compile caches anew: equal list keys, other objects
            m.register_query("CREATE VIEW hot AS SELECT E.a AS a FROM E WHERE E.a > 5;")
        if live and rnd.random() < 0.45:
            name = rnd.choice(sorted(live))
            m.unregister_query(name)
            del live[name]
        else:
            live[f"q{step}"] = text(f"q{step}", rnd)
            assert m.register_query(live[f"q{step}"]) == f"q{step}"
        if step % 10 == 9:
            m.ensure_plan()  # (check=True: the registry's invariants, the plan against a whole compile)
    registry = m.registrations.registry
    registry._check()
    assert sorted(q.name for q in registry if q.name != "hot") == sorted(live)
    fresh = mqo.Matcher(DDL)
    fresh.register_queries(list(live.values()))
    got = [found - {"hot"} for found in matches(m, events, 1000.0)]
    assert got == matches(fresh, events, 1000.0)


def test_a_list_dropped_and_needed_again() -> None:
    m = mqo.Matcher(DDL, check=True)
    m.register_query("Query ID: x\nSELECT * FROM E WHERE E.a > 1")
    m.push("E", 1.0, {"a": 2.0, "b": 0.0, "c": 0.0})
    m.unregister_query("x")  # the list of E.a > c goes with its last query
    assert m.registrations.registry.lists() == []
    m.register_query("Query ID: y\nSELECT * FROM E WHERE E.a > 3")
    assert [r.query for r in m.push("E", 2.0, {"a": 4.0, "b": 0.0, "c": 0.0})] == ["y"]
    assert m.push("E", 3.0, {"a": 2.0, "b": 0.0, "c": 0.0}) == []
