"""Count windows ([ROWS n], [ROWS n SLIDE m]): engine against the reference and DuckDB."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
from tests.differential.test_aggregation import COLUMNS, DDL, FUNCS, agrees, run_engine
from tests.references.agg_reference import RefQuery, evaluate


@st.composite
def workloads(draw: Any) -> tuple[list[RefQuery], list[tuple[float, dict[str, Any]]], float]:
    """Ties, NULLs, late tuples, registration and removal while running; count
    windows with and without a time window next to them."""
    n = draw(st.integers(1, 40))
    tuples = []
    ts = 0.0
    for _ in range(n):
        step = draw(st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.5, -1.0, -3.0, 0.1, 30.0]))
        ts = max(0.0, ts + step)
        values = {
            "patient": draw(st.one_of(st.none(), st.integers(0, 2))),
            "beatrate": draw(st.one_of(st.none(), st.sampled_from([0.1, 0.2, 0.3, 1.5, -2.25, 1e15]))),
            "vib": draw(st.one_of(st.none(), st.floats(-100, 100, allow_nan=False).map(lambda x: round(x, 2)))),
            "alert": draw(st.one_of(st.none(), st.integers(-3, 3))),
        }
        tuples.append((ts, values))
    lateness = draw(st.sampled_from([0.0, 0.0, 0.5, 2.0, 5.5]))
    queries = []
    for q in range(draw(st.integers(1, 5))):
        rows = draw(st.integers(0, 3)) > 0
        if rows:
            size = Fraction(draw(st.integers(1, 7)))
            slide = size if draw(st.booleans()) else Fraction(draw(st.integers(1, 7)))
        else:
            slide = Fraction(draw(st.sampled_from([1, 2, 5])))
            size = slide * draw(st.integers(1, 3))
        where = []
        for _ in range(draw(st.integers(0, 2))):
            col = draw(st.sampled_from(list(COLUMNS)))
            const = draw(st.integers(-2, 2)) if COLUMNS[col] == "int" else draw(st.sampled_from([0.3, 1.5, 0.0]))
            where.append((f"H.{col}", draw(st.sampled_from(["<", "<=", ">", ">=", "=", "!="])), const))
        group_by = draw(st.sampled_from([[], ["H.patient"], ["H.alert", "H.patient"]]))
        calls = [("COUNT", None)]
        for _ in range(draw(st.integers(0, 3))):
            f = draw(st.sampled_from(FUNCS))
            c = draw(st.sampled_from(["H.patient", "H.beatrate", "H.vib", "H.alert"]))
            if (f, c) not in calls:
                calls.append((f, c))
        having = None
        if draw(st.integers(0, 3)) == 0:
            having = ("COUNT", None, draw(st.sampled_from([">", ">=", "="])), draw(st.integers(1, 3)))
        reg = draw(st.sampled_from([0, 0, n // 3, n // 2, n]))
        removed = None if not draw(st.booleans()) else draw(st.integers(reg, n))
        queries.append(RefQuery(f"q{q}", "H", size, slide, where, group_by, calls, having, reg, removed, rows))
    return queries, tuples, lateness


def compare(queries: list[RefQuery], tuples: list, lateness: float, batch: bool = False, **options: Any) -> None:
    """Every window of the reference once, with its bounds and values (count windows
    may share an end, so rows are paired by their values within one key)."""
    expected = evaluate(queries, tuples, lateness)
    got = run_engine(queries, tuples, lateness, batch, **options)
    by_query = {q.name: q for q in queries}

    def key(query: str, start: Any, end: Any, group: Any) -> tuple:
        return (query, start, end, tuple(map(str, group)))

    pool: dict[tuple, list[dict[str, Any]]] = {}
    for r in got:
        pool.setdefault(key(r["query"], r["window_start"], r["window_end"], r["group"].values()), []).append(r)
    for r in expected:
        start = -math.inf if r.start is None else float(r.start)
        k = key(r.query, start, float(r.end), r.group)
        calls = [f"{f}({'*' if c is None else c})" for f, c in by_query[r.query].calls]
        candidates = pool.get(k, [])
        same = [
            g
            for g in candidates
            if all(agrees(r.values[name], g["values"][name], name.split("(")[0]) for name in calls)
        ]
        assert same, (k, r.values, candidates)
        candidates.remove(same[0])
    assert not any(pool.values()), pool


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_count_windows_equal_reference(workload: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(*workload)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_count_windows_in_batches_equal_reference(workload: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(*workload, batch=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.booleans())
def test_count_windows_equal_reference_checked(workload: Any, batch: bool) -> None:
    """``check=True``: the count stores' invariants (``CountStore._check``, and their
    slice stores') hold after every registration, ingest and emission."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(*workload, batch=batch, check=True)


def test_count_window_bounds_and_end_of_input() -> None:
    """[ROWS 3 SLIDE 2] per group: windows end at every 2nd row of the group; at the
    end of input the next window holds what it has."""
    q = RefQuery(
        "q", "H", Fraction(3), Fraction(2), [], ["H.patient"], [("COUNT", None), ("SUM", "H.alert")], rows=True
    )
    tuples = [(float(i), {"patient": i % 2, "alert": i}) for i in range(11)]
    compare([q], tuples, 0.0)
    got = [
        (r["group"]["patient"], r["window_start"], r["window_end"], r["values"]["COUNT(*)"])
        for r in run_engine([q], tuples, 0.0, False)
    ]
    assert sorted(got) == [
        (0, 0.0, 2.0, 2),
        (0, 2.0, 6.0, 3),
        (0, 6.0, 10.0, 3),
        (1, 1.0, 3.0, 2),
        (1, 3.0, 7.0, 3),
        (1, 7.0, 9.0, 2),
    ]


def test_late_row_within_lateness_takes_its_place() -> None:
    """ts 2.5 arrives after 3 (within the lateness): the first window is 1, 2, 2.5."""
    q = RefQuery("q", "H", Fraction(3), Fraction(3), [], [], [("COUNT", None), ("MAX", "H.vib")], rows=True)
    tuples = [(1.0, {"vib": 1.0}), (2.0, {"vib": 2.0}), (3.0, {"vib": 3.0}), (2.5, {"vib": 9.0}), (4.0, {"vib": 4.0})]
    compare([q], tuples, 1.0)
    rows = run_engine([q], tuples, 1.0, False)
    assert [(r["window_start"], r["window_end"], r["values"]["MAX(H.vib)"]) for r in rows] == [
        (1.0, 2.5, 9.0),
        (3.0, 4.0, 4.0),
    ]


def test_memory_is_bounded_by_slices_of_rows() -> None:
    m = mqo.Matcher(DDL, missing="null", allowed_lateness=5.0)
    m.register_query("Query ID: g SELECT MIN(H.vib), AVG(H.vib) FROM H [ROWS 600 SLIDE 60] GROUP BY H.patient")
    m.register_query("Query ID: c SELECT COUNT(*) FROM H [ROWS 90]")
    n = 30_000
    ts = np.arange(n, dtype=np.float64) / 3
    for a in range(0, n, 1000):
        chunk = ts[a : a + 1000]
        m.push_batch("H", {"ts": chunk, "vib": np.sin(chunk), "patient": np.arange(a, a + len(chunk)) % 3})
    assert m.aggregator is not None
    stores = list(m.aggregator.count_stores.values())
    assert len(stores) == 2
    for store in stores:
        # the rows within the lateness (5 s at 3 rows/s) and n/g slices (+1 partial) per group
        assert store.rows_held <= 16
        assert store.slices_kept <= 3 * (600 // 60 + 1) + 1
        assert all(s.store.rows.shape[0] <= 64 for s in store.group_states)
    rows = m.poll_aggregates().to_pylist() + m.flush().to_pylist()
    assert sum(1 for r in rows if r["query"] == "c") == math.ceil(n / 90)
    assert sum(1 for r in rows if r["query"] == "g") == 3 * math.ceil(n / 3 / 60)


def test_registered_later_counts_the_rows_after_it() -> None:
    m = mqo.Matcher(DDL, missing="null")
    m.register_query("Query ID: a SELECT COUNT(*), SUM(H.alert) FROM H [ROWS 2]")
    m.push("H", ts=1.0, values={"alert": 1})
    m.register_query("Query ID: b SELECT COUNT(*), SUM(H.alert) FROM H [ROWS 2]")
    for ts in (2.0, 3.0, 4.0):
        m.push("H", ts=ts, values={"alert": int(ts)})
    m.unregister_query("a")
    m.push("H", ts=5.0, values={"alert": 5})
    rows = [(r.query, r.window_start, r.window_end, r.values["SUM(H.alert)"]) for r in m.flush()]
    assert rows == [("a", 1.0, 2.0, 3), ("b", 2.0, 3.0, 5), ("a", 3.0, 4.0, 7), ("b", 4.0, 5.0, 9)]
    assert m.aggregator is not None and len(m.aggregator.count_stores) == 1


def test_count_windows_against_duckdb() -> None:
    """Each window is DuckDB's ROWS frame at every m-th row of its partition."""
    import duckdb

    rng = np.random.default_rng(11)
    n = 4000
    ts = np.sort(rng.integers(0, 2000, n)).astype(np.float64)  # many ties, in arrival order
    data = {
        "ts": ts,
        "patient": rng.integers(0, 4, n).astype(np.float64),
        "beatrate": np.round(rng.normal(90, 15, n), 1),
        "vib": np.round(rng.uniform(0, 100, n), 2),
        "alert": rng.integers(0, 2, n).astype(np.float64),
    }
    queries = [
        ("a", 50, 10, "H.alert = 1", "H.patient"),
        ("b", 7, 7, "H.vib > 50", None),
        ("c", 3, 5, "H.beatrate >= 90", "H.patient"),
    ]
    m = mqo.Matcher(DDL)
    for name, size, slide, where, group in queries:
        g = f" GROUP BY {group}" if group else ""
        sel = (group + ", ") if group else ""
        m.register_query(
            f"Query ID: {name} SELECT {sel}COUNT(*), SUM(H.vib), MIN(H.beatrate), MAX(H.beatrate), AVG(H.vib)"
            f" FROM H [ROWS {size} SLIDE {slide}] WHERE {where}{g};"
        )
    for a in range(0, n, 700):
        m.push_batch("H", {k: v[a : a + 700] for k, v in data.items()})
    got = m.flush().to_pylist()
    names = ["COUNT(*)", "SUM(H.vib)", "MIN(H.beatrate)", "MAX(H.beatrate)", "AVG(H.vib)"]
    con = duckdb.connect()
    con.register("h", {**data, "arrival": np.arange(n)})
    for name, size, slide, where, group in queries:
        cond = where.replace("H.", "")
        gcol = group.replace("H.", "") if group else "0"
        frame = f"PARTITION BY {gcol} ORDER BY ts, arrival"
        sql = f"""
            WITH w AS (
                SELECT {gcol} AS g, row_number() OVER ({frame}) AS rn, count(*) OVER (PARTITION BY {gcol}) AS total,
                       first_value(ts) OVER ({frame} ROWS {size - 1} PRECEDING) AS s, ts AS e,
                       count(*) OVER ({frame} ROWS {size - 1} PRECEDING),
                       sum(vib) OVER ({frame} ROWS {size - 1} PRECEDING),
                       min(beatrate) OVER ({frame} ROWS {size - 1} PRECEDING),
                       max(beatrate) OVER ({frame} ROWS {size - 1} PRECEDING),
                       avg(vib) OVER ({frame} ROWS {size - 1} PRECEDING)
                FROM h WHERE {cond})
            SELECT * EXCLUDE (rn, total) FROM w WHERE rn % {slide} = 0 ORDER BY g, rn"""
        expected = con.execute(sql).fetchall()
        mine = [
            (r["group"].get("patient", 0), r["window_start"], r["window_end"], *(r["values"][k] for k in names))
            for r in got
            if r["query"] == name
        ]
        complete = {(g, e) for g, _, e, *_ in expected}
        # the end-of-input windows (not a ROWS frame at an m-th row): one per group at most
        tail = [r for r in mine if (r[0], r[2]) not in complete]
        assert len(tail) <= len({r[0] for r in mine})
        mine = sorted((r for r in mine if (r[0], r[2]) in complete), key=lambda r: (r[0], r[2]))
        assert len(mine) == len(expected)
        for a, b in zip(mine, sorted(expected, key=lambda r: (r[0], r[2])), strict=True):
            assert a[:4] == tuple(b[:4])
            assert math.isclose(a[4], b[4], rel_tol=1e-12) and a[5:7] == tuple(b[5:7])
            assert math.isclose(a[7], b[7], rel_tol=1e-12)


def test_integer_group_keys_past_doubles_stay_apart() -> None:
    """2**53 and 2**53 + 1 are one double but two groups, in time and count windows."""
    m = mqo.Matcher("REGISTER STREAM S (k INTEGER, x INTEGER);")
    m.register_query("Query ID: a SELECT S.k, COUNT(*) FROM S [RANGE 10 sec] GROUP BY S.k")
    m.register_query("Query ID: b SELECT S.k, COUNT(*) FROM S [ROWS 2] GROUP BY S.k")
    m.push_batch("S", {"ts": [1.0, 2.0, 3.0, 4.0], "k": [2**53, 2**53 + 1, 2**53 + 1, None], "x": [1, 2, 3, 4]})
    rows = sorted((r.query, r.group["k"] or 0, r.values["COUNT(*)"]) for r in m.flush())
    assert rows == [
        ("a", 0, 1),
        ("a", 2**53, 1),
        ("a", 2**53 + 1, 2),
        ("b", 0, 1),
        ("b", 2**53, 1),
        ("b", 2**53 + 1, 2),
    ]
    assert all(type(r[1]) is int for r in rows)


def test_explain_shows_count_stores() -> None:
    m = mqo.Matcher(DDL)
    m.register_queries(
        "Query ID: a SELECT COUNT(*) FROM H [ROWS 6 SLIDE 4] GROUP BY H.patient;"
        "Query ID: b SELECT MAX(H.vib) FROM H [ROWS 10] GROUP BY H.patient;"
    )
    text = m.explain()
    assert "count slices of 2 rows per group" in text
    assert "a: ROWS 6 SLIDE 4 reads COUNT(*)" in text and "b: ROWS 10 SLIDE 10 reads MAX(vib)" in text


def test_heartbeat_makes_rows_final() -> None:
    m = mqo.Matcher(DDL, allowed_lateness=5.0, missing="null")
    m.register_query("Query ID: a SELECT COUNT(*), SUM(H.alert) FROM H [ROWS 2]")
    for ts in (1.0, 2.0, 3.0, 4.0):
        m.push("H", ts=ts, values={"alert": int(ts)})
    assert len(m.poll_aggregates()) == 0  # the watermark is -1: a tuple at 0.5 may still come
    m.heartbeat(7.0)  # watermark 2: rows at 1 and 2 are final
    assert [(r.window_start, r.window_end, r.values["SUM(H.alert)"]) for r in m.poll_aggregates()] == [(1.0, 2.0, 3)]
    m.push("H", ts=2.5, values={"alert": 10})  # within the lateness: before the row at 3
    m.heartbeat(100.0)
    rows = [(r.window_start, r.window_end, r.values["SUM(H.alert)"]) for r in m.poll_aggregates()]
    assert rows == [(2.5, 3.0, 13)] and [r.values["COUNT(*)"] for r in m.flush()] == [1]


def test_a_removed_filters_name_is_not_reused() -> None:
    """Filters are numbered for good: after removals a new filter never takes the
    name of one still in use (it did: 'f1_b' twice)."""
    m = mqo.Matcher("REGISTER STREAM H (x FLOAT);")
    m.register_query("Query ID: a SELECT COUNT(*) FROM H [RANGE 1 sec] WHERE H.x > 1")
    m.register_query("Query ID: b SELECT COUNT(*) FROM H [ROWS 2] WHERE H.x > 2")
    m.register_query("Query ID: c SELECT SUM(H.x) FROM H [RANGE 1 sec] WHERE H.x > 2")
    m.unregister_query("a")
    m.unregister_query("b")
    m.register_query("Query ID: b SELECT COUNT(*) FROM H [ROWS 1] WHERE H.x > 3")
    for t in (0.5, 2.5, 3.5, 5.0):
        m.push("H", ts=t, values={"x": t})
    rows = sorted((r.query, r.window_end, *r.values.values()) for r in m.flush())
    assert rows == [("b", 3.5, 1), ("b", 5.0, 1), ("c", 3.0, 2.5), ("c", 4.0, 3.5), ("c", 5.0, 5.0)]


def test_cli_numbers_tied_rows_in_merged_arrival_order(tmp_path: Any) -> None:
    """Two files of one stream: tied rows are numbered in the order the inputs merge
    (the smallest next ts first, ties by the order of --input), as the API fed them so."""
    import json

    from runtime.cli import main

    (tmp_path / "s.ddl").write_text("REGISTER STREAM H (x INTEGER);")
    (tmp_path / "q.mqo").write_text("Query ID: pairs SELECT SUM(H.x), COUNT(*) FROM H [ROWS 2];")
    (tmp_path / "a.csv").write_text("ts,x\n5,1\n2,2\n")
    (tmp_path / "b.csv").write_text("ts,x\n2,4\n2,8\n")
    out = tmp_path / "out.jsonl"
    args = ["match", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q.mqo"), "-q"]
    args += ["--input", f"H={tmp_path / 'a.csv'}", "--input", f"H={tmp_path / 'b.csv'}", "--output", str(out)]
    assert main([*args, "--allowed-lateness", "10"]) == 0
    got = [json.loads(line) for line in out.read_text().splitlines()]
    # merged arrival: b's 2 (x=4), b's 2 (x=8), a's 5 (x=1), a's 2 (x=2);
    # by ts, ties by arrival: 2 (4), 2 (8), 2 (2), 5 (1)
    m = mqo.Matcher("REGISTER STREAM H (x INTEGER);", allowed_lateness=10)
    m.register_query("Query ID: pairs SELECT SUM(H.x), COUNT(*) FROM H [ROWS 2];")
    for ts, x in [(2, 4), (2, 8), (5, 1), (2, 2)]:
        m.push("H", ts=float(ts), values={"x": x})
    want = m.flush().to_pylist()
    assert got == want
    assert [r["values"]["SUM(H.x)"] for r in got] == [12, 3]
