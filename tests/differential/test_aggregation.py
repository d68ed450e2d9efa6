"""Windowed aggregate queries: language, engine against the reference, DuckDB."""

from __future__ import annotations

import json
import math
import warnings
from collections import Counter
from fractions import Fraction
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
from mqo.aggregation.aggregator import Aggregator
from predicates import QueryError
from tests.references.agg_reference import RefQuery, evaluate, exact

DDL = "REGISTER STREAM H (patient INTEGER, beatrate FLOAT, vib FLOAT, alert INTEGER);"

EXAMPLE = """Query ID: hr_high
SELECT H.patient, AVG(H.beatrate) AS avg_rate, MAX(H.vib), COUNT(*)
FROM H [RANGE 10 min SLIDE 1 min]
WHERE H.alert = 1 AND H.vib > 80
GROUP BY H.patient
HAVING AVG(H.beatrate) > 100;
"""


# ------------------------------------------------------------------ language


@pytest.mark.parametrize(
    "text, message",
    [
        ("SELECT COUNT(*) FROM H", "needs a window"),
        ("SELECT COUNT(*) FROM H [RANGE 0 sec]", "longer than zero"),
        ("SELECT COUNT(*) FROM H [SLIDE 1 min]", "expected RANGE or ROWS"),
        ("SELECT COUNT(*) FROM H [RANGE UNBOUNDED]", "needs SLIDE"),
        ("SELECT H.vib, COUNT(*) FROM H [RANGE 1 min]", "neither grouped nor aggregated"),
        ("SELECT SUM(*) FROM H [RANGE 1 min]", "only COUNT takes '*'"),
        ("SELECT COUNT(*) FROM H [RANGE 1 min] WHERE COUNT(*) > 2", "not allowed in WHERE"),
        ("SELECT AVG(H.nope) FROM H [RANGE 1 min]", "unknown column 'nope'"),
        ("SELECT COUNT(*) FROM H [RANGE 1 min], B", "one stream"),
        ("SELECT COUNT(*) FROM H [RANGE 1 min SLIDE 1 min", "expected ']'"),
        ("SELECT COUNT(*) FROM H [ROWS 0]", "whole number of rows above zero"),
        ("SELECT COUNT(*) FROM H [ROWS 5 SLIDE 1.5]", "whole number of rows above zero"),
    ],
)
def test_aggregate_errors_name_the_place(text: str, message: str) -> None:
    m = mqo.Matcher(DDL + "REGISTER STREAM B (x FLOAT);")
    with pytest.raises(QueryError) as err:
        m.register_query(text)
    assert message in str(err.value)
    assert "^" in str(err.value)  # the caret under the place
    assert m.query_ids == []


def test_window_spellings_mean_the_same() -> None:
    m = mqo.Matcher(DDL)
    m.register_queries(
        [
            "Query ID: a SELECT COUNT(*) FROM H [RANGE 2 min SLIDE 1 min];",
            "Query ID: b SELECT COUNT(*) FROM H [RANGE 120 s, FREQUENCY 60 s];",
        ]
    )
    for i in range(10):
        m.push("H", ts=i * 25.0, values={"patient": 1, "beatrate": 1.0, "vib": 1.0, "alert": 1})
    rows = m.flush().to_pylist()
    a = [(r["window_end"], r["values"]) for r in rows if r["query"] == "a"]
    b = [(r["window_end"], r["values"]) for r in rows if r["query"] == "b"]
    assert a == b and a


def test_match_paths_refuse_aggregate_queries_clearly() -> None:
    from predicates import Catalog
    from predicates.frontend import compile_queries

    catalog = Catalog()
    catalog.register_ddl(DDL)
    registry = mqo.Matcher(DDL).registry
    for compile_one in (lambda t: compile_queries(t, catalog), registry.compile_one):
        with pytest.raises(QueryError, match="aggregate query"):
            compile_one("SELECT COUNT(*) FROM H [RANGE 1 min] WHERE H.vib > 3")


# --------------------------------------------------------------- the example


def test_issue_example_runs_and_shares_with_match_queries() -> None:
    m = mqo.Matcher(DDL)
    m.register_queries(EXAMPLE + "Query ID: hot SELECT * FROM H WHERE H.vib > 99;")
    matches = []
    for i in range(120):
        values = {"patient": i % 2, "beatrate": 90.0 + (i % 30), "vib": 81.0 + (i % 20), "alert": 1}
        matches += m.push("H", ts=10.0 * i, values=values)
    early = m.poll_aggregates()
    rows = early.to_pylist() + m.flush().to_pylist()
    assert matches and all(x.query == "hot" for x in matches)
    assert rows and all(r["query"] == "hr_high" and r["values"]["avg_rate"] > 100 for r in rows)
    # emitted while pushing: only windows that ended before the newest timestamp
    assert early and all(r.window_end < 10.0 * 119 for r in early)
    assert set(rows[0]) == {"query", "window_start", "window_end", "group", "values"}
    assert m.flush().rows == []  # nothing twice
    assert "slice edges every 60 s" in m.explain()


# ------------------------------------------------------- engine vs reference

COLUMNS = {"patient": "int", "beatrate": "float", "vib": "float", "alert": "int"}
FUNCS = ["COUNT", "SUM", "AVG", "MIN", "MAX", "STDDEV", "VARIANCE"]


@st.composite
def workloads(draw: Any) -> tuple[list[RefQuery], list[tuple[float, dict[str, Any]]], float]:
    n = draw(st.integers(1, 40))
    tuples = []
    ts = 0.0
    for _ in range(n):
        step = draw(st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.5, 7.0, -3.0, 30.0, 0.1]))
        ts = max(0.0, ts + step)
        values = {
            "patient": draw(st.one_of(st.none(), st.integers(0, 2))),
            "beatrate": draw(st.one_of(st.none(), st.sampled_from([0.1, 0.2, 0.3, 1.5, 99.5, -2.25, 1e15]))),
            "vib": draw(st.one_of(st.none(), st.floats(-100, 100, allow_nan=False).map(lambda x: round(x, 2)))),
            "alert": draw(st.one_of(st.none(), st.integers(-3, 3))),
        }
        tuples.append((ts, values))
    lateness = draw(st.sampled_from([0.0, 0.0, 2.0, 5.5]))
    queries = []
    for q in range(draw(st.integers(1, 5))):
        unbounded = draw(st.booleans()) and draw(st.booleans())
        slide = Fraction(draw(st.sampled_from([1, 2, 3, 5, 10]))) * draw(st.sampled_from([1, Fraction(1, 2)]))
        range_ = None if unbounded else slide * draw(st.integers(1, 4)) + draw(st.sampled_from([0, 0, 1]))
        where = []
        for _ in range(draw(st.integers(0, 2))):
            col = draw(st.sampled_from(list(COLUMNS)))
            const = draw(st.integers(-2, 2)) if COLUMNS[col] == "int" else draw(st.sampled_from([0.3, 1.5, 0.0, 50.0]))
            where.append((f"H.{col}", draw(st.sampled_from(["<", "<=", ">", ">=", "=", "!="])), const))
        group_by = draw(st.sampled_from([[], ["H.patient"], ["H.alert", "H.patient"]]))
        calls = [("COUNT", None)]
        for _ in range(draw(st.integers(0, 3))):
            f = draw(st.sampled_from(FUNCS))
            c = draw(st.sampled_from(["H.patient", "H.beatrate", "H.vib", "H.alert"]))
            if (f, c) not in calls:
                calls.append((f, c))
        having = None
        if draw(st.booleans()) and draw(st.booleans()):
            having = ("COUNT", None, draw(st.sampled_from([">", ">=", "="])), draw(st.integers(1, 3)))
        reg = 0 if unbounded else draw(st.sampled_from([0, 0, n // 2, n]))
        removed = None if unbounded or not draw(st.booleans()) else draw(st.integers(reg, n))
        queries.append(RefQuery(f"q{q}", "H", range_, slide, where, group_by, calls, having, reg, removed))
    return queries, tuples, lateness


def agrees(a: Any, b: Any, func: str) -> bool:
    """Whether the engine's value ``b`` of ``func`` is the reference's ``a``: equal for
    COUNT, MIN, MAX and an integer SUM; AVG, a FLOAT SUM, STDDEV and VARIANCE are
    doubles computed from the exact inputs, so within a relative tolerance."""
    if a is None or b is None:
        return a is None and b is None
    if func in ("COUNT", "MIN", "MAX") or (func == "SUM" and isinstance(b, int)):
        return exact(b) == (a if isinstance(a, Fraction) else exact(a))
    expected = float(a)
    tol = 1e-6 if func in ("STDDEV", "VARIANCE") else 1e-9
    return math.isclose(float(b), expected, rel_tol=tol, abs_tol=tol * 1e15)


def run_engine(
    queries: list[RefQuery], tuples: list, lateness: float, batch: bool, **options: Any
) -> list[dict[str, Any]]:
    m = mqo.Matcher(DDL, allowed_lateness=lateness, late_sink=lambda t: None, missing="null", **options)
    out: list[dict[str, Any]] = []
    events: dict[int, list[tuple[str, RefQuery]]] = {}
    for q in queries:
        events.setdefault(q.registered_at, []).append(("add", q))
        if q.removed_at is not None:
            events.setdefault(q.removed_at, []).append(("remove", q))
    for i in range(len(tuples) + 1):
        for what, q in sorted(events.get(i, []), key=lambda e: e[0]):
            if what == "add":
                m.register_query(q.text())
            else:
                out += m.poll_aggregates().to_pylist()
                m.unregister_query(q.name)
        if i == len(tuples):
            break
        ts, values = tuples[i]
        # "ts" and "id" among the values are for the reference (which reads them as
        # columns); the tuple's id is given to the engine as its id
        tid = values.get("id")
        values = {k: v for k, v in values.items() if k not in ("ts", "id")}
        if batch:
            ids = {} if tid is None else {"id": [tid]}
            m.push_batch("H", {"ts": [ts], **ids, **{k: [v] for k, v in values.items()}})
        else:
            m.push("H", ts=ts, values=values, id=tid)
    return out + m.flush().to_pylist()


def compare(queries: list[RefQuery], tuples: list, lateness: float, batch: bool = False, **options: Any) -> None:
    expected = evaluate(queries, tuples, lateness)
    got = run_engine(queries, tuples, lateness, batch, **options)
    by_query = {q.name: q for q in queries}
    key = lambda r: (r["query"], r["window_end"], tuple(map(str, r["group"].values())))  # noqa: E731
    got_keys = sorted(key(r) for r in got)
    exp_keys = sorted((r.query, float(r.end), tuple(map(str, r.group))) for r in expected)
    assert got_keys == exp_keys
    got_by = {key(r): r for r in got}
    for r in expected:
        row = got_by[(r.query, float(r.end), tuple(map(str, r.group)))]
        q = by_query[r.query]
        assert row["window_start"] == (-math.inf if r.start is None else float(r.start))
        for f, c in q.calls:
            name = f"{f}({'*' if c is None else c})"
            assert agrees(r.values[name], row["values"][name], f), (name, r.values[name], row["values"][name])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_engine_equals_reference(workload: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(*workload)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_push_batch_equals_reference(workload: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(*workload, batch=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.booleans())
def test_engine_equals_reference_checked(workload: Any, batch: bool) -> None:
    """``check=True``: the slice stores' invariants hold after every registration,
    ingest and emission (``SliceStore._check``), and the answers are the reference's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(*workload, batch=batch, check=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.booleans(), st.sampled_from([1, 2, 64]))
def test_windows_folded_in_runs_over_their_groups_equal_reference(workload: Any, batch: bool, runs: int) -> None:
    """A store with many groups folds its windows a run at a time over the groups
    holding data in each run's slices (``Aggregator._chunk``): forced on every store
    here (many groups are a matter of size, not of kind), the answers are the reference's."""
    from mqo.aggregation import aggregator

    with (
        warnings.catch_warnings(),
        patch.object(aggregator, "MANY_GROUPS", 0),
        patch.object(aggregator, "MAX_RUNS", runs),
    ):
        warnings.simplefilter("ignore")
        compare(*workload, batch=batch)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.booleans())
def test_stores_forgetting_their_groups_equal_reference(workload: Any, batch: bool) -> None:
    """A slice store forgets the groups with no data left in its held slices and
    numbers the rest anew (``SliceStore._forget_groups``): forced at every drop of
    slices here (a store forgets once it has thousands of groups), the answers are the
    reference's and the stores' invariants hold (``check=True``)."""
    from mqo.aggregation import slices

    with warnings.catch_warnings(), patch.object(slices, "FORGET_AT", 1):
        warnings.simplefilter("ignore")
        compare(*workload, batch=batch, check=True)


def test_boundaries_are_exact() -> None:
    """0.1 * 3 is not 0.3 in doubles; a tuple at ts 0.3 is in the window (0.2, 0.3]."""
    q = RefQuery("q", "H", Fraction(1, 10), Fraction(1, 10), [], [], [("COUNT", None)])
    tuples = [(0.3, {}), (0.30000000000000004, {}), (0.2, {}), (0.1, {})]
    compare([q], tuples, 1.0)
    got = run_engine([q], tuples, 1.0, False)
    assert {r["window_end"]: r["values"]["COUNT(*)"] for r in got} == {0.1: 1, 0.2: 1, 0.3: 1, 0.4: 1}


def test_late_tuples_are_reported_not_counted() -> None:
    late = []
    m = mqo.Matcher(DDL, allowed_lateness=5.0, late_sink=late.append, missing="null")
    m.register_query("SELECT COUNT(*) FROM H [RANGE 10 sec]")
    for ts in (1.0, 20.0, 16.0, 14.0):  # 14 < 20 - 5: late
        m.push("H", ts=ts, values={})
    rows = m.flush().to_pylist()
    assert [(r["window_end"], r["values"]["COUNT(*)"]) for r in rows] == [(10.0, 1), (20.0, 2)]
    assert [t.ts for t in late] == [14.0]


def test_memory_is_bounded_by_slices() -> None:
    m = mqo.Matcher(DDL, missing="null")
    m.register_query("SELECT MIN(H.vib), MAX(H.vib) FROM H [RANGE 1 min SLIDE 10 sec] GROUP BY H.patient")
    n = 20_000
    ts = np.arange(n, dtype=np.float64)
    for a in range(0, n, 1000):
        chunk = ts[a : a + 1000]
        m.push_batch("H", {"ts": chunk, "vib": np.sin(chunk), "patient": chunk % 3})
    assert m.aggregator is not None
    (store,) = m.aggregator.stores.values()
    assert store.slices_kept <= 8 and store.rows.shape[0] <= 64
    # windows ending at 10, 20, ..., 19990 hold all three groups; the one ending at 0 only ts 0
    assert len(m.poll_aggregates()) == 3 * (n // 10 - 1) + 1


def test_sums_of_integers_are_exact_past_doubles() -> None:
    m = mqo.Matcher(DDL, missing="null")
    m.register_query("SELECT SUM(H.alert), AVG(H.alert) FROM H [RANGE 10 sec]")
    for v in (2**53, 1, 1):
        m.push("H", ts=1.0, values={"alert": v})
    (row,) = m.flush()
    assert row.values["SUM(H.alert)"] == 2**53 + 2
    assert row.values["AVG(H.alert)"] == float(Fraction(2**53 + 2, 3))


# ------------------------------------------------------------------- DuckDB


def test_against_duckdb() -> None:
    import duckdb

    rng = np.random.default_rng(7)
    n = 3000
    ts = np.sort(rng.integers(0, 3600, n)).astype(np.float64)
    data = {
        "ts": ts,
        "patient": rng.integers(0, 4, n).astype(np.float64),
        "beatrate": np.round(rng.normal(90, 15, n), 1),
        "vib": np.round(rng.uniform(0, 100, n), 2),
        "alert": rng.integers(0, 2, n).astype(np.float64),
    }
    queries = [
        ("a", 600, 60, "H.alert = 1", "H.patient"),
        ("b", 300, 300, "H.vib > 50", None),
        ("c", 1800, 120, "H.beatrate >= 90 AND H.alert = 0", "H.patient"),
    ]
    m = mqo.Matcher(DDL)
    for name, d, s, where, group in queries:
        g = f" GROUP BY {group}" if group else ""
        sel = (group + ", ") if group else ""
        m.register_query(
            f"Query ID: {name} SELECT {sel}COUNT(*), SUM(H.vib), MIN(H.beatrate), MAX(H.beatrate), AVG(H.vib)"
            f" FROM H [RANGE {d} sec SLIDE {s} sec] WHERE {where}{g};"
        )
    m.push_batch("H", data)
    got = m.flush().to_pylist()
    names = ["COUNT(*)", "SUM(H.vib)", "MIN(H.beatrate)", "MAX(H.beatrate)", "AVG(H.vib)"]
    con = duckdb.connect()
    con.register("h", {k: v for k, v in data.items()})
    for name, d, s, where, group in queries:
        cond = where.replace("H.", "")
        gcol = group.replace("H.", "") if group else "0"
        sql = f"""
            WITH ends AS (SELECT range * {s} AS e FROM range(0, (3600 + {d}) // {s} + 2))
            SELECT e, {gcol} AS g, count(*), sum(vib), min(beatrate), max(beatrate), avg(vib)
            FROM ends JOIN h ON h.ts > e - {d} AND h.ts <= e
            WHERE {cond} GROUP BY e, g ORDER BY e, g"""
        expected = con.execute(sql).fetchall()
        mine = sorted(
            (r["window_end"], r["group"].get("patient", 0), *(r["values"][k] for k in names))
            for r in got
            if r["query"] == name
        )
        assert len(mine) == len(expected)
        for a, b in zip(mine, expected, strict=True):
            assert a[:3] == (b[0], b[1], b[2])
            assert math.isclose(a[3], b[3], rel_tol=1e-12) and a[4:6] == b[4:6]
            assert math.isclose(a[6], b[6], rel_tol=1e-12)


def test_aggregator_drops_stores_no_query_reads() -> None:
    m = mqo.Matcher(DDL)
    m.register_query("Query ID: a SELECT COUNT(*) FROM H [RANGE 1 min] WHERE H.vib > 1")
    m.register_query("Query ID: b SELECT SUM(H.vib) FROM H [RANGE 2 min] WHERE H.vib > 1")
    agg: Aggregator | None = m.aggregator
    assert agg is not None and len(agg.stores) == 1 and len(agg.filters) == 1
    m.unregister_query("a")
    m.unregister_query("b")
    assert not agg.stores and not agg.filters and m.query_ids == []


# ---------------------------------------------------------------------- CLI


def test_cli_runs_aggregate_and_match_queries_from_one_file(tmp_path: Any) -> None:
    import json

    from runtime.cli import main

    (tmp_path / "s.ddl").write_text(DDL)
    (tmp_path / "q.mqo").write_text(
        "Query ID: per_min SELECT COUNT(*), MAX(H.vib) FROM H [RANGE 1 min] WHERE H.alert = 1;\n"
        "Query ID: hot SELECT * FROM H WHERE H.vib > 8;\n"
    )
    lines = ["ts,patient,beatrate,vib,alert"] + [f"{i * 10},1,90.0,{i % 10},{i % 2}" for i in range(20)]
    (tmp_path / "h.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["match", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q.mqo")]
    assert main([*args, "--input", f"H={tmp_path / 'h.csv'}", "--output", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    windows = [r for r in records if r["query"] == "per_min"]
    assert [r["window_end"] for r in windows] == [60.0, 120.0, 180.0, 240.0]
    assert [r["values"]["COUNT(*)"] for r in windows] == [3, 3, 3, 1]
    assert windows[0] == {
        "query": "per_min",
        "window_start": 0.0,
        "window_end": 60.0,
        "group": {},
        "values": {"COUNT(*)": 3, "MAX(H.vib)": 5.0},
    }
    assert [r["ts"] for r in records if r["query"] == "hot"] == [90.0, 190.0]
    assert "slice edges every 60 s" in _explain(tmp_path)


def _explain(tmp_path: Any) -> str:
    import contextlib
    import io

    from runtime.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["explain", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q.mqo")])
    return buf.getvalue()


def test_spark_stage_refuses_aggregate_queries_clearly() -> None:
    from runtime.spark.spec import SparkStageError, stage_matcher

    with pytest.raises(SparkStageError, match=r"aggregate queries \(1\) do not run in the match stages; run them wi"):
        stage_matcher(["SELECT COUNT(*) FROM H [RANGE 1 min]"], DDL, {}, None)


def test_json_lines_are_the_rows() -> None:
    """The JSONL the CLI writes (built from columns) says what the Python rows say:
    string group keys that need escaping, NULL keys and values, landmark windows,
    HAVING and output expressions, rows of many queries in emission order."""
    m = mqo.Matcher("REGISTER STREAM S (who STRING, x FLOAT, n INTEGER);")
    m.register_queries(
        "Query ID: per_who SELECT S.who, COUNT(*), SUM(S.x), STDDEV(S.x), MAX(S.n)"
        " FROM S [RANGE 2 sec SLIDE 1 sec] GROUP BY S.who;\n"
        "Query ID: since SELECT COUNT(S.x) AS c, AVG(S.n) * 2 AS twice FROM S [RANGE UNBOUNDED SLIDE 2 sec];\n"
        "Query ID: busy SELECT S.who, MIN(S.x) FROM S [RANGE 1 sec] GROUP BY S.who HAVING MIN(S.x) > 1;\n"
    )
    whos = ['a "quoted" %s', "b\nline", None, "ü"]
    batch = {
        "ts": [0.5 * i for i in range(12)],
        "who": [whos[i % 4] for i in range(12)],
        "x": [None if i % 5 == 0 else i / 3 for i in range(12)],
        "n": [i * 7 for i in range(12)],
    }
    m.push_batch("S", batch)
    got = m.poll_aggregates()
    got.extend(m.flush())
    rows = [
        {**r, "window_start": None if r["window_start"] == -math.inf else r["window_start"]} for r in got.to_pylist()
    ]
    assert rows and {r["query"] for r in rows} == {"per_who", "since", "busy"}
    assert [json.loads(line) for line in got.json_text().splitlines()] == rows


def test_a_filter_of_many_slots_counts_a_tuple_once() -> None:
    """An OR takes one slot per disjunct; a tuple satisfying several disjuncts is
    counted once (the expected counts worked out here, from the tuples)."""
    m = mqo.Matcher(DDL)
    m.register_queries(
        "Query ID: q SELECT COUNT(*), SUM(H.vib) FROM H [RANGE 10 sec]"
        " WHERE H.vib > 10 OR H.alert = 1 OR H.patient = 2;"
    )
    rows = [(1.0 + 1.5 * i, i % 3, 5.0 + 3 * i, i % 2) for i in range(20)]  # ts, patient, vib, alert
    m.push_batch(
        "H",
        {
            "ts": [r[0] for r in rows],
            "patient": [r[1] for r in rows],
            "beatrate": [1.0] * len(rows),
            "vib": [r[2] for r in rows],
            "alert": [r[3] for r in rows],
        },
    )
    assert [s.name for s in m.aggregator._pipeline.plan.slots].count("f0_q") == 3  # type: ignore[union-attr]
    got = {(r.window_end, r.values["COUNT(*)"], r.values["SUM(H.vib)"]) for r in m.flush()}
    expected: dict[float, list[float]] = {}
    for ts, patient, vib, alert in rows:
        if vib > 10 or alert == 1 or patient == 2:
            expected.setdefault(math.ceil(ts / 10) * 10.0, []).append(vib)
    assert got == {(end, len(v), math.fsum(v)) for end, v in expected.items()}


@pytest.mark.parametrize("batch", [False, True])
def test_count_of_a_string_or_boolean_column_counts_its_non_null_values(batch: bool) -> None:
    m = mqo.Matcher("REGISTER STREAM E (tag STRING, ok BOOLEAN, k INTEGER);")
    m.register_query(
        "SELECT E.k, COUNT(E.tag) AS tags, COUNT(E.ok) AS oks, COUNT(*) AS n FROM E [RANGE 10] GROUP BY E.k"
    )
    rows = [(t * 1.5, ["a", None, "b"][t % 3], [True, False, None, None][t % 4], t % 2) for t in range(40)]
    if batch:
        m.push_batch("E", {"ts": [r[0] for r in rows], "tag": [r[1] for r in rows], "ok": [r[2] for r in rows],
                           "k": [r[3] for r in rows]})  # fmt: skip
    else:
        for ts, tag, ok, k in rows:
            m.push("E", ts, {"tag": tag, "ok": ok, "k": k})
    got = m.flush().rows
    assert got
    for row in got:
        inside = [r for r in rows if row.window_start < r[0] <= row.window_end and r[3] == row.group["k"]]
        assert row.values == {
            "E.k": row.group["k"],
            "tags": sum(r[1] is not None for r in inside),
            "oks": sum(r[2] is not None for r in inside),
            "n": len(inside),
        }


TEXT_DDL = "REGISTER STREAM E (k STRING, n INTEGER, x FLOAT);"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.5, 4.0]),
            st.one_of(st.none(), st.sampled_from(["", "a", "a\x00", "b", "é", "B"]), st.text(max_size=3)),
            st.one_of(st.none(), st.integers(-1, 1)),
        ),
        min_size=1,
        max_size=30,
    ).map(lambda rows: sorted(rows, key=lambda r: r[0])),
    st.sampled_from([["E.k"], ["E.k", "E.n"], ["E.n", "E.k"]]),
)
def test_groups_of_a_text_column_in_batches_equal_the_reference(rows: list[tuple], group_by: list[str]) -> None:
    """A GROUP BY text column (NULL, the empty text, a text ending in NUL, unicode)
    read off a whole batch at once: one group per distinct text, NULL its own."""
    query = RefQuery("g", "E", Fraction(2), Fraction(1), [], group_by, [("COUNT", None), ("SUM", "E.x")])
    tuples = [(ts, {"k": k, "n": n, "x": 0.5}) for ts, k, n in rows]
    m = mqo.Matcher(TEXT_DDL)
    m.register_query(query.text())
    m.push_batch(
        "E",
        {
            "ts": [ts for ts, _, _ in rows],
            "k": [k for _, k, _ in rows],
            "n": [n for _, _, n in rows],
            "x": [0.5] * len(rows),
        },
    )
    got = Counter((r["window_end"], tuple(r["group"].values()), r["values"]["COUNT(*)"]) for r in m.flush().to_pylist())
    expected = Counter((float(r.end), r.group, r.values["COUNT(*)"]) for r in evaluate([query], tuples, 0))
    assert got == expected
