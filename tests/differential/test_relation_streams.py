"""ISTREAM / DSTREAM / RSTREAM on aggregate queries: the engine against the exact
reference (tests/references/exact_relations.py, derived from the aggregate
reference's windows), through push, push_batch and snapshots; and the rules users
rely on, case by case."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
from predicates import QueryError
from tests.differential.test_aggregation import DDL, agrees
from tests.references.exact_relations import RelQuery, relation_streams

# aggregates the engine computes exactly (COUNT, MIN, MAX; SUM and AVG of INTEGERs), so
# "the values changed" is decided alike; FLOAT sums are compensated doubles (README)
EXACT_CALLS = [
    ("SUM", "H.alert"),
    ("AVG", "H.alert"),
    ("MIN", "H.vib"),
    ("MAX", "H.vib"),
    ("MAX", "H.beatrate"),
    ("MIN", "H.patient"),
    ("COUNT", "H.vib"),
]
HAVINGS = [
    ("COUNT", None, ">", 1),
    ("COUNT", None, "=", 1),
    ("SUM", "H.alert", ">", 0),
    ("MAX", "H.vib", ">=", 20.5),
]


@st.composite
def workloads(draw: Any) -> tuple[list[RelQuery], list[tuple[float, dict[str, Any]]], float]:
    """Ties, NULLs, late tuples, groups that come and go, HAVING, queries registered
    and removed while tuples flow; time windows (sliding, tumbling, landmark) and count
    windows."""
    n = draw(st.integers(1, 40))
    tuples = []
    ts = 0.0
    for _ in range(n):
        step = draw(st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.5, 7.0, -1.0, -3.0, 30.0]))
        ts = max(0.0, ts + step)
        values = {
            "patient": draw(st.one_of(st.none(), st.integers(0, 3))),
            "beatrate": draw(st.one_of(st.none(), st.sampled_from([0.1, 1.5, 99.5, -2.25]))),
            "vib": draw(st.one_of(st.none(), st.sampled_from([0.0, 10.0, 20.5, 33.25]))),
            "alert": draw(st.one_of(st.none(), st.integers(-2, 2))),
        }
        tuples.append((ts, values))
    lateness = draw(st.sampled_from([0.0, 0.0, 1.0, 5.5]))
    queries = []
    for q in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["range", "range", "tumble", "landmark", "rows"]))
        slide = Fraction(draw(st.sampled_from([1, 2, 5])))
        size: Fraction | None = slide * draw(st.integers(1, 3))
        if kind == "tumble":
            size = slide
        elif kind == "landmark":
            size = None
        elif kind == "rows":
            size, slide = Fraction(draw(st.integers(1, 4))), Fraction(draw(st.integers(1, 4)))
        where = []
        if draw(st.booleans()) and draw(st.booleans()):
            where.append(("H.alert", draw(st.sampled_from([">", "!=", "<="])), draw(st.integers(-1, 1))))
        group_by = draw(st.sampled_from([[], ["H.patient"], ["H.patient"], ["H.alert", "H.patient"]]))
        calls: list[tuple[str, str | None]] = [("COUNT", None)]
        for _ in range(draw(st.integers(0, 2))):
            call = draw(st.sampled_from(EXACT_CALLS))
            if call not in calls:
                calls.append(call)
        having = draw(st.sampled_from(HAVINGS)) if draw(st.booleans()) else None
        reg = 0 if kind == "landmark" else draw(st.sampled_from([0, 0, n // 3, n // 2]))
        removed = None if kind == "landmark" or not draw(st.booleans()) else draw(st.integers(reg, n))
        op = draw(st.sampled_from(["ISTREAM", "DSTREAM", "ISTREAM", "DSTREAM", "RSTREAM"]))
        queries.append(
            RelQuery(f"q{q}", "H", size, slide, where, group_by, calls, having, reg, removed, kind == "rows", op)
        )
    return queries, tuples, lateness


def run_engine(
    queries: list[RelQuery], tuples: list, lateness: float, batch: bool = False, cuts: frozenset[int] = frozenset()
) -> list[dict[str, Any]]:
    """The rows of a matcher fed ``tuples`` one at a time (``batch``: as batches of one
    row), the queries registered and removed at their tuples; before tuple ``i`` in
    ``cuts`` the matcher is replaced by one restored from its snapshot's bytes."""
    m = mqo.Matcher(DDL, allowed_lateness=lateness, late_sink=lambda t: None, missing="null")
    out: list[dict[str, Any]] = []
    events: dict[int, list[tuple[str, RelQuery]]] = {}
    for q in queries:
        events.setdefault(q.registered_at, []).append(("add", q))
        if q.removed_at is not None:
            events.setdefault(q.removed_at, []).append(("remove", q))
    for i in range(len(tuples) + 1):
        if i in cuts:
            blob = mqo.encode_snapshot(m.snapshot())
            m = mqo.Matcher.restore(mqo.decode_snapshot(blob), late_sink=lambda t: None)
        for what, q in sorted(events.get(i, []), key=lambda e: e[0]):
            if what == "add":
                m.register_query(q.text())
            else:
                out += m.poll_aggregates().to_pylist()
                m.unregister_query(q.name)
        if i == len(tuples):
            break
        ts, values = tuples[i]
        if batch:
            m.push_batch("H", {"ts": [ts], **{k: [v] for k, v in values.items()}})
        else:
            m.push("H", ts=ts, values=values)
    return out + m.flush().to_pylist()


def compare(queries: list[RelQuery], tuples: list, lateness: float, **options: Any) -> list[dict[str, Any]]:
    """Every row of the reference once, with its bounds and values, and no other."""
    expected = relation_streams(queries, tuples, lateness)
    got = run_engine(queries, tuples, lateness, **options)
    by_query = {q.name: q for q in queries}

    def key(query: str, start: Any, end: Any, group: Any) -> tuple:
        return (query, start, end, tuple(map(str, group)))

    pool: dict[tuple, list[dict[str, Any]]] = {}
    for r in got:
        pool.setdefault(key(r["query"], r["window_start"], r["window_end"], r["group"].values()), []).append(r)
    for r in expected:
        start = -math.inf if r.start is None else float(r.start)
        k = key(r.query, start, float(r.end), r.group)
        names = [f"{f}({'*' if c is None else c})" for f, c in by_query[r.query].calls]
        candidates = pool.get(k, [])
        same = [g for g in candidates if all(agrees(r.values[n], g["values"][n], n.split("(")[0]) for n in names)]
        assert same, (k, r.values, candidates)
        candidates.remove(same[0])
    assert not any(pool.values()), pool
    return got


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_relation_streams_equal_reference(workload: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(*workload)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_relation_streams_in_batches_equal_reference(workload: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(*workload, batch=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.data())
def test_relation_streams_across_snapshots_equal_reference(workload: Any, data: Any) -> None:
    """The relation at the last window is in the snapshot: a matcher restored from
    its bytes at any point reports what the reference does."""
    queries, tuples, lateness = workload
    cuts = frozenset(data.draw(st.lists(st.integers(1, len(tuples)), min_size=1, max_size=3)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(queries, tuples, lateness, cuts=cuts, batch=data.draw(st.booleans()))


def test_whole_batches_equal_pushes() -> None:
    """One push_batch of the whole input (in ts order) reports what pushes do."""
    tuples = [(float(t), {"patient": t % 3 if t % 7 else None, "alert": 1, "vib": float(t % 4)}) for t in range(60)]
    queries = [
        RelQuery("i", "H", Fraction(6), Fraction(2), [], ["H.patient"], [("COUNT", None)], ("COUNT", None, ">", 1)),
        RelQuery("d", "H", Fraction(6), Fraction(2), [], ["H.patient"], [("MAX", "H.vib")], None, op="DSTREAM"),
    ]
    queries[0].op = "ISTREAM"
    pushed = compare(queries, tuples, 0.0)
    m = mqo.Matcher(DDL, missing="null")
    m.register_queries([q.text() for q in queries])
    columns = {c: [v.get(c) for _, v in tuples] for c in ("patient", "alert", "vib")}
    m.push_batch("H", {"ts": [t for t, _ in tuples], **columns})
    batched = m.poll_aggregates().to_pylist() + m.flush().to_pylist()
    assert sorted(map(str, batched)) == sorted(map(str, pushed)) and pushed


# ----------------------------------------------------------------- the rules


def _rows(m: mqo.Matcher, points: list[tuple[float, int, float]]) -> list[tuple[float, float, Any, Any]]:
    for ts, patient, rate in points:
        m.push("H", ts=ts, values={"patient": patient, "beatrate": rate, "vib": 0.0, "alert": 1})
    rows = m.poll_aggregates().rows + m.flush().rows
    return [(r.window_start, r.window_end, r.group.get("patient"), r.values.get("AVG(H.beatrate)")) for r in rows]


def test_istream_with_having_fires_once_when_the_condition_starts_to_hold() -> None:
    m = mqo.Matcher(DDL)
    m.register_query(
        "SELECT ISTREAM H.patient, AVG(H.beatrate) FROM H [RANGE 2 SLIDE 1] GROUP BY H.patient"
        " HAVING AVG(H.beatrate) > 100 AND COUNT(*) > 0"
    )
    # patient 1 above 100 from ts 3 on, at a constant rate: one row, when it starts
    rows = _rows(m, [(0.5, 1, 90.0), (1.5, 1, 90.0), (2.5, 1, 150.0), (3.5, 1, 150.0), (4.5, 1, 150.0)])
    assert rows == [(1.0, 3.0, 1, 120.0), (2.0, 4.0, 1, 150.0)]  # new, then its value changed


def test_dstream_reports_the_last_values_at_the_window_the_group_is_gone() -> None:
    m = mqo.Matcher(DDL)
    m.register_query("SELECT DSTREAM H.patient, AVG(H.beatrate) FROM H [RANGE 2 SLIDE 1] GROUP BY H.patient")
    # patient 2's last tuple is at ts 1.5: in windows (0, 2] and (1, 3], gone from (2, 4]
    rows = _rows(m, [(0.5, 1, 80.0), (1.5, 2, 70.0), (3.5, 1, 60.0), (9.5, 1, 50.0)])
    # patient 1 is gone from (1, 3] (its ts 0.5 left), back in (2, 4], gone again at
    # (4, 6] (ts 3.5 left) and, at the end of input, from (10, 12]
    assert rows == [(1.0, 3.0, 1, 80.0), (2.0, 4.0, 2, 70.0), (4.0, 6.0, 1, 60.0), (10.0, 12.0, 1, 50.0)]


def test_explain_names_the_operator() -> None:
    m = mqo.Matcher(DDL)
    m.register_queries(
        "Query ID: a\nSELECT ISTREAM COUNT(*) FROM H [RANGE 2 SLIDE 1];"
        "Query ID: b\nSELECT DSTREAM H.patient, COUNT(*) FROM H [ROWS 3] GROUP BY H.patient;"
        "Query ID: c\nSELECT COUNT(*) FROM H [RANGE 2 SLIDE 1];"
    )
    text = m.explain()
    assert "a: RANGE 2 s SLIDE 1 s reads COUNT(*) (ISTREAM: changes since the previous window)" in text
    assert "b: ROWS 3 SLIDE 3 reads COUNT(*) (DSTREAM: changes since the group's previous window)" in text
    assert "c: RANGE 2 s SLIDE 1 s reads COUNT(*)\n" in text + "\n"


def test_rstream_is_the_default() -> None:
    points = [(0.5, 1, 80.0), (1.5, 2, 70.0), (3.5, 1, 60.0)]
    text = "SELECT H.patient, AVG(H.beatrate) FROM H [RANGE 2 SLIDE 1] GROUP BY H.patient"
    runs = []
    for query in (text, text.replace("SELECT", "SELECT RSTREAM")):
        m = mqo.Matcher(DDL)
        m.register_query(query)
        runs.append(_rows(m, points))
    assert runs[0] == runs[1] and len(runs[0]) == 6


@pytest.mark.parametrize("op", ["ISTREAM", "DSTREAM", "RSTREAM"])
def test_match_queries_refuse_the_operators_at_their_place(op: str) -> None:
    m = mqo.Matcher(DDL)
    for text in (f"SELECT {op} * FROM H WHERE H.vib > 3", f"SELECT {op} H.vib FROM H WHERE H.vib > 3"):
        with pytest.raises(QueryError) as err:
            m.register_queries([text, "SELECT * FROM H WHERE H.vib > 1"])
        message = str(err.value)
        assert f"{op} applies to aggregate queries" in message and ":1:8:" in message and "^~~~~~~" in message
    assert m.query_ids == []  # nothing half-registered


def test_a_column_named_like_an_operator_is_still_a_column() -> None:
    m = mqo.Matcher("REGISTER STREAM S (istream FLOAT);")
    m.register_query("SELECT istream FROM S WHERE S.istream > 1")
    assert [r.values for r in m.push("S", ts=1.0, values={"istream": 2.0})] == [{"S.istream": 2.0}]


def test_snapshot_without_relation_state_restores_as_rstream_only() -> None:
    """A snapshot of an earlier version holds no relation state (it had no ISTREAM
    queries): its RSTREAM queries restore and go on as before."""
    m = mqo.Matcher(DDL)
    m.register_query("Query ID: r\nSELECT COUNT(*) FROM H [RANGE 2 SLIDE 1]")
    m.push("H", ts=0.5, values={"patient": 1, "beatrate": 1.0, "vib": 0.0, "alert": 1})
    data = m.snapshot()
    assert all("relation" not in q for q in data["aggregates"]["queries"])
    restored = mqo.Matcher.restore(mqo.decode_snapshot(mqo.encode_snapshot(data)))
    assert [r.values for r in restored.flush()] == [{"COUNT(*)": 1}, {"COUNT(*)": 1}]
