"""Aggregate state in Matcher.snapshot/restore: a matcher restored at any point goes
on with exactly the rows of the uninterrupted run."""

from __future__ import annotations

import json
import pickle
import warnings
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
from tests.differential import test_aggregation, test_count_windows
from tests.differential.test_aggregation import DDL
from tests.references.agg_reference import RefQuery


def run(queries: list[RefQuery], tuples: list, lateness: float, cuts: set[int], batch: bool) -> list[dict[str, Any]]:
    """Rows in emission order; before tuple ``i`` in ``cuts`` the matcher is replaced
    by one restored from its snapshot (through pickle, as checkpoints are)."""
    m = mqo.Matcher(DDL, allowed_lateness=lateness, late_sink=lambda t: None, missing="null")
    out: list[dict[str, Any]] = []
    events: dict[int, list[tuple[str, RefQuery]]] = {}
    for q in queries:
        events.setdefault(q.registered_at, []).append(("add", q))
        if q.removed_at is not None:
            events.setdefault(q.removed_at, []).append(("remove", q))
    for i in range(len(tuples) + 1):
        if i in cuts:
            m = mqo.Matcher.restore(pickle.loads(pickle.dumps(m.snapshot())), late_sink=lambda t: None)
        for what, q in sorted(events.get(i, []), key=lambda e: e[0]):
            if what == "add":
                m.register_query(q.text())
            else:
                m.unregister_query(q.name)
        if i == len(tuples):
            break
        ts, values = tuples[i]
        if batch:
            m.push_batch("H", {"ts": [ts], **{k: [v] for k, v in values.items()}})
        else:
            m.push("H", ts=ts, values=values)
        if i % 4 == 0:  # some rows wait in the matcher across a snapshot
            out += m.poll_aggregates().to_pylist()
    return out + m.flush().to_pylist()


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    assert [json.dumps(r, default=str) for r in a] == [json.dumps(r, default=str) for r in b]


@st.composite
def cases(draw: Any) -> tuple:
    source = draw(st.sampled_from([test_aggregation.workloads(), test_count_windows.workloads()]))
    queries, tuples, lateness = draw(source)
    cuts = set(draw(st.lists(st.integers(1, len(tuples)), min_size=1, max_size=3)))
    return queries, tuples, lateness, cuts, draw(st.booleans())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_restored_matcher_goes_on_identically(case: tuple) -> None:
    queries, tuples, lateness, cuts, batch = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same(run(queries, tuples, lateness, cuts, batch), run(queries, tuples, lateness, set(), batch))


def test_snapshot_holds_slices_and_pending_count_rows() -> None:
    m = mqo.Matcher(DDL, allowed_lateness=10.0, missing="null")
    m.register_queries(
        "Query ID: r SELECT H.patient, AVG(H.vib) FROM H [ROWS 4 SLIDE 2] GROUP BY H.patient;"
        "Query ID: t SELECT MAX(H.vib) FROM H [RANGE 5 sec SLIDE 1 sec];"
    )
    for i in range(30):
        m.push("H", ts=float(i), values={"patient": i % 3, "vib": float(i * i % 7)})
    data = m.snapshot()
    assert {q[0] for q in data["aggregates"]["queries"]} == {"r", "t"}
    restored = mqo.Matcher.restore(pickle.loads(pickle.dumps(data)))
    assert restored.aggregator is not None and m.aggregator is not None
    (store,) = restored.aggregator.count_stores.values()
    assert store.rows_held == 10  # within the lateness: not final yet
    for mm in (m, restored):
        mm.push("H", ts=25.5, values={"patient": 0, "vib": 100.0})  # late by less than the lateness
    _same(restored.flush().to_pylist(), m.flush().to_pylist())
