"""Registered queries by context (``named_contexts``): what the result encoders,
``Matcher.value_types`` and the CLI's warnings read instead of a record per query. A
table block of many rows is one pair; the layouts and types over them are those read
off each record, with query objects, blocks, removals and views among them."""

from __future__ import annotations

import numpy as np
import pytest

import mqo
from mqo import named_contexts, query_layouts
from mqo.result_encoding import expression_type, union_types

DDL = """
REGISTER STREAM B (pressure FLOAT, temp FLOAT, alert INTEGER);
REGISTER STREAM H (beatrate FLOAT, vib FLOAT, alert INTEGER);
"""


def per_record_layouts(records) -> dict:  # type: ignore[no-untyped-def]
    """The layouts read off each record, one at a time (the way before)."""
    return {rq.name: tuple((out.name, expression_type(out.expr)) for out in rq.context.bound.outputs) for rq in records}


def registered(m: mqo.Matcher, removed: bool) -> None:
    m.register_queries("Query ID: one\nSELECT B.pressure AS p, B.alert + 1 AS a FROM B WHERE B.temp > 3")
    table = {"id": np.array([f"t{i}" for i in range(300)], object), "lo": np.arange(300.0)}
    m.register_table("SELECT B.pressure, H.vib FROM B, H MAXWINDOW 5 WHERE B.temp > :lo", table, id_column="id")
    m.register_queries("Query ID: two\nSELECT H.alert AS p FROM H WHERE H.vib < 2")
    m.register_table(
        "SELECT * FROM H WHERE H.vib >= :lo",
        {"id": np.array([f"u{i}" for i in range(100)], object), "lo": np.arange(100.0)},
        id_column="id",
    )
    m.register_queries("CREATE VIEW hot AS SELECT B.temp AS t FROM B WHERE B.temp > 50")
    if removed:
        for name in ("t3", "t299", "one", "u0"):
            m.unregister_query(name)


@pytest.mark.parametrize("removed", [False, True])
def test_the_layouts_by_context_are_those_of_each_record(removed: bool) -> None:
    m = mqo.Matcher(DDL)
    registered(m, removed)
    records = m.registry.records()
    pairs = list(named_contexts(records))
    assert sum(len(names) for _, names in pairs) == len(records) and len(pairs) < 10
    assert [name for _, names in pairs for name in names] == [rq.name for rq in records]
    want = per_record_layouts(records)
    got = query_layouts(records)
    assert {name: dict(layout.objects)["values"] for name, layout in got.items()} == {
        name: tuple((n, n, t) for n, t in members) for name, members in want.items()
    }
    assert query_layouts(list(records)) == got  # (records one by one: the same)
    # the value types leave the views out, and agree with the per-record union
    views = m.registrations.views
    plain = [rq for rq in records if rq.name not in views]
    assert m.value_types() == union_types(query_layouts(plain).values(), "values")
    assert "t" not in m.value_types() and "p" in m.value_types()


def test_the_commands_warning_names_the_starved_queries_of_a_block() -> None:
    """``mqo match``'s warning for queries reading a stream without input names them in
    registration order, a table block's rows among them (read by context, not a record
    per row)."""
    from runtime.workload import workload_warnings

    m = mqo.Matcher(DDL)
    registered(m, removed=True)
    warnings = workload_warnings(m, "q.mqo", ["B"])
    starved = [rq.name for rq in m.registry.records() if "H" in rq.context.streams]
    assert starved[:3] == ["t0", "t1", "t2"] and len(starved) == 298 + 1 + 99
    assert warnings == [
        f"queries {', '.join(starved[:5])} and {len(starved) - 5:,} more read stream H, which has no --input;"
        " they cannot match"
    ]
