"""Aggregates over real timestamps: gaps of 1e9 s, tuples far in the past, huge and
fine windows, timestamps and heartbeats near the ends of the doubles. Memory is
bounded by the slices that hold data, never by the span of time: the cases that
allocated a whole gap run in a subprocess under a 3 GiB address-space limit."""

from __future__ import annotations

import json
import math
import resource
import subprocess
import sys
import textwrap
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import mqo
from mqo.aggregation import aggregator
from predicates import QueryError
from tests.cli.clirun import COMMAND, strict_lines
from tests.differential.test_aggregation import COLUMNS, FUNCS, compare
from tests.references.agg_reference import RefQuery, evaluate, exact

LIMIT = 3 << 30  # bytes of address space: a whole-gap allocation (tens of GiB) fails under it
DDL = "REGISTER STREAM S (sensor INTEGER, temp FLOAT, name STRING);"


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def run_limited(code: str) -> Any:
    """``code`` (which prints one JSON value last) in a fresh interpreter under the limit."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limited,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def _rows(window: str, points: list[float], lateness: float = 0.0, extra: str = "") -> list[dict[str, Any]]:
    """Rows of ``SELECT COUNT(*), SUM(S.temp), MAX(S.sensor) FROM S [window]`` over one
    tuple per point (sensor i, temp i + 0.5), polled after every push and flushed, run
    under the memory limit."""
    return run_limited(
        f"""
        import json, mqo
        m = mqo.Matcher({DDL!r}, allowed_lateness={lateness!r}, late_sink=lambda t: None{extra})
        m.register_query("SELECT COUNT(*), SUM(S.temp), MAX(S.sensor) FROM S [{window}]")
        rows = []
        for i, ts in enumerate({points!r}):
            m.push("S", ts, {{"sensor": i, "temp": i + 0.5, "name": "a"}})
            rows += m.poll_aggregates().to_pylist()
        rows += m.flush().to_pylist()
        print(json.dumps(rows))
        """
    )


def _expected(range_: Fraction | None, slide: Fraction, points: list[float], lateness: float = 0.0) -> list[tuple]:
    calls = [("COUNT", None), ("SUM", "S.temp"), ("MAX", "S.sensor")]
    q = RefQuery("1", "S", range_, slide, [], [], calls)
    tuples = [(ts, {"sensor": i, "temp": i + 0.5, "name": "a"}) for i, ts in enumerate(points)]
    return sorted(
        (float(r.end), r.values["COUNT(*)"], float(r.values["SUM(S.temp)"]), r.values["MAX(S.sensor)"])
        for r in evaluate([q], tuples, lateness)
    )


def _got(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted(
        (r["window_end"], r["values"]["COUNT(*)"], r["values"]["SUM(S.temp)"], r["values"]["MAX(S.sensor)"])
        for r in rows
    )


@pytest.mark.parametrize(
    "window, range_, slide, points",
    [
        # the cases: a gap of 1e9 s (29.8 GiB dense), 0 -> 1.7e12 (49.5 TiB dense)
        ("RANGE 10 SLIDE 1", 10, 1, [0.0, 1e9]),
        ("RANGE 10 SLIDE 1", 10, 1, [0.0, 1.7e12, 1.7e12 + 3]),
        # epoch seconds with a day's outage, and a fine grid
        ("RANGE 1 min SLIDE 10 sec", 60, 10, [1.7e9, 1.7e9 + 5, 1.7e9 + 86_400, 1.7e9 + 86_401]),
        ("RANGE 0.3 SLIDE 0.1", Fraction(3, 10), Fraction(1, 10), [0.05, 1e9 + 0.25, 1e9 + 0.3]),
        # windows that were refused with a numba overflow or a 328 GiB request
        ("RANGE 1e300", Fraction(10**300), Fraction(10**300), [0.0, 1e9, 1e300]),
        ("RANGE 10 SLIDE 0.001", 10, Fraction(1, 1000), [0.0, 1e9]),
        # timestamps whose slice numbers pass int64: exact Python ints
        ("RANGE 10 SLIDE 1", 10, 1, [0.0, 1e300, 1.7976931348623157e308]),
        ("RANGE 10 SLIDE 5", 10, 5, [-1e300, 1e19, 1e19 + 5]),
    ],
)
def test_a_gap_in_time_costs_nothing(window: str, range_: Any, slide: Any, points: list[float]) -> None:
    got = _got(_rows(window, points))
    assert got == _expected(Fraction(range_), Fraction(slide), points)


def test_a_tuple_far_in_the_past_of_a_held_clock() -> None:
    """An unfed declared stream holds the watermark at -inf (idle_timeout None), so a
    tuple at -1e9 after ts 1 and 2 is not late: it lands a billion slices before them."""
    ddl = DDL + " REGISTER STREAM T (x INTEGER);"
    rows = run_limited(
        f"""
        import json, mqo
        m = mqo.Matcher({ddl!r}, idle_timeout=None)
        m.register_query("SELECT COUNT(*), MIN(S.temp) FROM S [RANGE 10 SLIDE 1]")
        for ts, temp in ((1.0, 1.5), (2.0, 2.5), (-1e9, -7.5)):
            m.push("S", ts, {{"sensor": 1, "temp": temp, "name": "a"}})
        store, = m.aggregator.stores.values()
        print(json.dumps([store.slices_kept, m.flush().to_pylist()]))
        """
    )
    kept, flushed = rows
    assert kept == 3
    ends = {r["window_end"]: r["values"]["COUNT(*)"] for r in flushed}
    assert len(ends) == 10 + 11 and ends[-1e9] == 1 and ends[2.0] == 2 and ends[11.0] == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_sparse_slices_equal_the_reference_over_a_billion_seconds(data: Any) -> None:
    """Timestamps spread over 1e9 s (gaps of every size, tuples back within the
    lateness), windows of several sizes and slides, dyadic and not (0.1, 0.3)."""
    n = data.draw(st.integers(1, 25))
    ts, tuples = 0.0, []
    for _ in range(n):
        step = data.draw(st.sampled_from([0.0, 0.1, 0.3, 1.0, 7.0, -2.0, 3600.0, 86_400.0, 1e6, 1e8, 3e8, 1e9]))
        ts = min(max(0.0, ts + step), 1e9)
        values = {
            "patient": data.draw(st.one_of(st.none(), st.integers(0, 2))),
            "beatrate": data.draw(st.sampled_from([0.1, 0.2, 0.3, 1.5, -2.25])),
            "vib": data.draw(st.floats(-100, 100, allow_nan=False).map(lambda x: round(x, 2))),
            "alert": data.draw(st.integers(-3, 3)),
        }
        tuples.append((ts, values))
    lateness = data.draw(st.sampled_from([0.0, 2.5, 3600.0]))
    queries = []
    for q in range(data.draw(st.integers(1, 4))):
        slide = data.draw(st.sampled_from([Fraction(1, 10), Fraction(3, 10), Fraction(1), Fraction(60), Fraction(7)]))
        range_ = slide * data.draw(st.integers(1, 5)) + data.draw(st.sampled_from([0, 0, Fraction(1, 10)]))
        calls = [("COUNT", None)] + [
            (data.draw(st.sampled_from(FUNCS)), f"H.{data.draw(st.sampled_from(list(COLUMNS)))}") for _ in range(2)
        ]
        group_by = data.draw(st.sampled_from([[], ["H.patient"]]))
        reg = data.draw(st.sampled_from([0, 0, n // 2]))
        queries.append(RefQuery(f"q{q}", "H", range_, slide, [], group_by, list(dict.fromkeys(calls)), None, reg))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare(queries, tuples, lateness, batch=data.draw(st.booleans()))


@pytest.mark.parametrize(
    "window, many",
    [
        ("RANGE 1e300 SLIDE 1", "1e+300 windows"),
        ("RANGE 1e300 SLIDE 1e-300", "1e+600 windows"),  # past a double: an OverflowError once
        ("RANGE 1 h SLIDE 1 ms", "3,600,000 windows"),
        ("RANGE 1e20 SLIDE 1", "1e+20 windows"),
        ("RANGE 1e15 SLIDE 1", "1e+15 windows"),
        ("RANGE 10 SLIDE 0.000000001", "10,000,000,000 windows"),
        ("ROWS 100000000 SLIDE 1", "100,000,000 windows"),
    ],
)
def test_windows_a_tuple_falls_in_are_limited_at_registration(window: str, many: str) -> None:
    m = mqo.Matcher(DDL)
    text = f"SELECT COUNT(*) FROM S [{window}]"
    with pytest.raises(QueryError) as err:
        m.register_query(text)
    message = str(err.value)
    assert many in message and "at most 1,000,000" in message
    assert f":1:{text.index('[') + 1}:" in message  # the window's position
    assert m.aggregator is None or len(m.aggregator) == 0


@pytest.mark.parametrize("window", ["RANGE 10 SLIDE 1", "RANGE UNBOUNDED SLIDE 1", "ROWS 2"])
def test_far_heartbeats_leave_the_matcher_working(window: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """heartbeat(1e19) and heartbeat(1e300) pass every window; later calls work (a
    landmark reports its windows a step at a time, never all of 1e19 at once)."""
    monkeypatch.setattr(aggregator, "LANDMARK_STEP", 1000)  # the step, small enough for a test
    m = mqo.Matcher(DDL)
    m.register_query(f"SELECT COUNT(*) FROM S [{window}]")
    m.push("S", 1.0, {"sensor": 1, "temp": 1.5, "name": "a"})
    m.push("S", 2.0, {"sensor": 1, "temp": 1.5, "name": "a"})
    m.heartbeat(1e19)
    first = m.poll_aggregates().to_pylist()
    assert first and first[0]["values"]["COUNT(*)"] in (1, 2)
    if "UNBOUNDED" in window:  # ends 1, 2, ..., a thousand per emission, in order
        # (end 1 after the push at 2, then the heartbeat's thousand and the poll's)
        assert [r["window_end"] for r in first] == [float(k) for k in range(1, 2002)]
        assert [r.window_end for r in m.poll_aggregates()] == [float(k) for k in range(2002, 3002)]
    m.heartbeat(1e300)
    assert m.poll_aggregates() is not None
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(mqo.TupleError, match="finite number"):
            m.heartbeat(bad)
    with pytest.warns(UserWarning, match="late tuple"):  # late now: reported, not counted
        assert m.push("S", 3.0, {"sensor": 1, "temp": 1.5, "name": "a"}) == []
    assert m.late_count == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a landmark has more ends than one call reports
        m.flush()


def test_cli_aggregate_over_a_gap_of_a_billion_seconds_and_ts_1e300(tmp_path: Path) -> None:
    (tmp_path / "s.ddl").write_text(DDL)
    (tmp_path / "q.mqo").write_text("Query ID: w\nSELECT COUNT(*), SUM(S.temp) FROM S [RANGE 10 SLIDE 1];\n")
    (tmp_path / "s.csv").write_text("ts,sensor,temp,name\n0,1,1.5,a\n1000000000,2,2.5,b\n1e300,3,3.5,c\n")
    out = tmp_path / "out.jsonl"
    args = ["match", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q.mqo")]
    done = subprocess.run(
        [*COMMAND, *args, "--input", f"S={tmp_path / 's.csv'}", "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limited,
    )
    assert done.returncode == 0, done.stderr
    rows = strict_lines(out.read_text())
    assert [(r["window_end"], r["values"]["COUNT(*)"]) for r in rows] == [(float(k), 1) for k in range(10)] + [
        (float(k), 1) for k in range(10**9, 10**9 + 10)
    ] + [(1e300, 1)] * 10  # ten windows past 1e300, whose ends print alike


def _near(k: int) -> st.SearchStrategy[float]:
    """Doubles at and next to the decimal k/10 (k/10, k*0.1 and the doubles either side):
    a window's end and a watermark that meet or nearly meet; and near 1e15, where the
    doubles are 0.125 apart, so a watermark (``1000000000000000.1`` less 0.05) and a
    window's end (``1e15``) are one double and still not equal."""
    return st.sampled_from(
        [k / 10, k * 0.1, math.nextafter(k / 10, -math.inf), math.nextafter(k / 10, math.inf), 1e15 + k * 0.125]
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["0.1", "0.3", "0.7", "1", "2.5"]),
    st.integers(1, 3),
    st.lists(st.integers(0, 30).flatmap(_near), min_size=1, max_size=14),
    st.sampled_from([0.0, 0.05, 0.1, 0.25, 0.3]),
)
@example("0.1", 1, [1e15, 1e15 + 0.125], 0.05)  # the watermark 1e15 + 0.05 and the end 1e15: one double
@example("0.1", 2, [0.1, 0.30000000000000004, 0.4], 0.1)
def test_a_window_is_emitted_once_the_watermark_passes_its_end(
    slide_text: str, per: int, points: list[float], lateness: float
) -> None:
    """Polled after every push, the rows emitted so far are those of the windows ending
    before the newest ts less the lateness (the reference's rule), exactly: windows
    whose end and the watermark are the same decimal, or doubles apart, on slides
    that are no binary fraction (0.1, 0.3, 0.7)."""
    slide = Fraction(slide_text)
    calls = [("COUNT", None), ("MAX", "S.sensor")]
    query = RefQuery("w", "S", slide * per, slide, [], [], calls)
    tuples = [(ts, {"sensor": i, "temp": 0.5, "name": "a"}) for i, ts in enumerate(points)]
    final = evaluate([query], tuples, lateness)
    m = mqo.Matcher(DDL, allowed_lateness=lateness, late_sink=lambda t: None)
    m.register_query(query.text())
    emitted: list[float] = []
    newest: Fraction | None = None
    for i, (ts, values) in enumerate(tuples):
        m.push("S", ts, values)
        emitted += [r["window_end"] for r in m.poll_aggregates().to_pylist()]
        if newest is None or exact(ts) >= newest - exact(lateness):
            newest = exact(ts) if newest is None else max(newest, exact(ts))
        closed = sorted(float(r.end) for r in final if r.end < newest - exact(lateness))
        assert sorted(emitted) == closed, f"after push {i} (ts {ts!r})"
    emitted += [r["window_end"] for r in m.flush().to_pylist()]
    assert sorted(emitted) == sorted(float(r.end) for r in final)
