"""SUM and AVG of INTEGER columns are exact near and past 64 bits: a sum that fits is
returned exactly whatever it passes on the way (2^62 + 2^62 - 5), AVG is the correctly
rounded quotient of the exact sum, and a SUM past 64 bits is NULL with a warning,
never an error that stops the run or loses another query's rows."""

from __future__ import annotations

import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
from tests.cli.clirun import match
from tests.differential.test_aggregation import DDL, compare, run_engine
from tests.references.agg_reference import RefQuery, evaluate

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
near_edges = st.one_of(
    st.none(),
    st.sampled_from([INT_MAX, INT_MIN, 2**62, -(2**62), INT_MAX - 1, INT_MIN + 1, 2**53 + 1, -5, 0, 1]),
    st.integers(INT_MIN, INT_MAX),
)
CALLS = [("COUNT", None), ("SUM", "H.alert"), ("AVG", "H.alert"), ("MIN", "H.alert"), ("MAX", "H.alert")]


def _expected(func: str, value: Any) -> Any:
    """What the engine gives for the reference's exact value: a SUM that does not fit
    an INTEGER is NULL; an AVG is the double nearest the exact quotient."""
    if value is None:
        return None
    if func == "AVG":
        return float(Fraction(value))
    if func == "SUM" and not INT_MIN <= value <= INT_MAX:
        return None
    return int(value)  # the reference's exact Fraction of a whole number


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 7.0]), near_edges, st.integers(0, 1)), max_size=12),
    st.sampled_from([(1, 1, False), (3, 1, False), (2, 2, False), (2, 1, True), (3, 3, True)]),
    st.booleans(),
    st.booleans(),
)
def test_integer_sums_and_averages_equal_the_reference(tuples, window, grouped, batch) -> None:
    size, slide, rows = window
    data = sorted(((ts, {"alert": v, "patient": p}) for ts, v, p in tuples), key=lambda t: t[0])
    q = RefQuery("q", "H", Fraction(size), Fraction(slide), [], ["H.patient"] if grouped else [], CALLS, rows=rows)
    expected = evaluate([q], data, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = run_engine([q], data, 0.0, batch)
    names = [f"{func}({'*' if column is None else column})" for func, column in CALLS]
    got_rows = sorted(
        (
            r["window_start"],
            r["window_end"],
            tuple(map(str, r["group"].values())),
            repr([r["values"][n] for n in names]),
        )
        for r in got
    )
    want_rows = sorted(
        (
            float(r.start),
            float(r.end),
            tuple(map(str, r.group)),
            repr([_expected(func, r.values[n]) for (func, _), n in zip(CALLS, names, strict=True)]),
        )
        for r in expected
    )
    assert got_rows == want_rows  # repr: an int is not a float, None is NULL


def test_the_issue_cases() -> None:
    m = mqo.Matcher(DDL, missing="null")
    m.register_query("Query ID: s SELECT SUM(H.alert), AVG(H.alert) FROM H [RANGE 10] GROUP BY H.patient;")
    m.register_query("Query ID: c SELECT COUNT(*) FROM H [RANGE 10];")
    cases = {0: [2**62, 2**62, -5], 1: [2**62, 2**62], 2: [INT_MAX, INT_MAX, 1], 3: [INT_MIN, INT_MIN]}
    for patient, values in cases.items():
        for v in values:
            m.push("H", ts=1.0, values={"patient": patient, "alert": v})
    with pytest.warns(UserWarning, match=r"query s: SUM\(H.alert\): the sum passes 64 bits in 3 row"):
        rows = m.flush().rows
    got = {r.group.get("patient"): r.values for r in rows if r.query == "s"}
    assert got[0] == {"SUM(H.alert)": 2**63 - 5, "AVG(H.alert)": float(Fraction(2**63 - 5, 3))}
    assert got[1] == {"SUM(H.alert)": None, "AVG(H.alert)": float(2**62)}
    assert got[2] == {"SUM(H.alert)": None, "AVG(H.alert)": float(Fraction(2**64 - 1, 3))}
    assert got[3] == {"SUM(H.alert)": None, "AVG(H.alert)": -(2.0**63)}
    assert [r.values for r in rows if r.query == "c"] == [{"COUNT(*)": 10}]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_cli_an_overflowing_sum_loses_no_other_row(tmp_path: Path, fmt: str) -> None:
    (tmp_path / "s.ddl").write_text(DDL)
    (tmp_path / "q.mqo").write_text(
        "Query ID: big\nSELECT SUM(H.alert) FROM H [RANGE 10];\nQuery ID: n\nSELECT COUNT(*) FROM H [RANGE 10];\n"
    )
    (tmp_path / "h.csv").write_text(f"ts,patient,beatrate,vib,alert\n1,1,1.0,1.0,{INT_MAX}\n2,1,1.0,1.0,1\n")
    out = tmp_path / f"out.{fmt}"
    done = match(
        "--output", str(out), "--format", fmt,
        schema=str(tmp_path / "s.ddl"), queries=str(tmp_path / "q.mqo"), inputs=[f"H={tmp_path / 'h.csv'}"],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # the command's own warning line, not Python's file:line form naming mqo's source
    assert "mqo match: warning: query big: SUM(H.alert): the sum passes 64 bits in 1 row(s)" in done.stderr
    assert "UserWarning" not in done.stderr and ".py:" not in done.stderr
    text = (tmp_path / "out.aggregates.csv").read_text() if fmt == "csv" else out.read_text()
    if fmt == "csv":
        lines = text.splitlines()
        assert len(lines) == 3 and lines[1].startswith("big,0.0,10.0,") and lines[2].startswith("n,0.0,10.0,")
        header = lines[0].split(",")
        big, n = (dict(zip(header, line.split(","), strict=True)) for line in lines[1:])
        assert big["SUM(H.alert)"] == "" and n["COUNT(*)"] == "2"
    else:
        assert '"SUM(H.alert)":null' in text and '"COUNT(*)":2' in text


# ------------------------------------------------- ts and id are columns too

TS_ID_CALLS = [
    ("COUNT", "H.ts"),
    ("MAX", "H.ts"),
    ("MIN", "H.ts"),
    ("SUM", "H.ts"),
    ("AVG", "H.ts"),
    ("MIN", "H.id"),
    ("MAX", "H.id"),
    ("SUM", "H.id"),
    ("AVG", "H.id"),
    ("COUNT", "H.id"),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_ts_and_id_in_aggregates_equal_the_reference(data: Any) -> None:
    """``GROUP BY H.ts``, ``MAX(H.ts)``, ``MIN(H.id)``, ``COUNT(H.ts)``, ... as for any
    column (they gave NULL and 0)."""
    n = data.draw(st.integers(1, 15))
    # ids past 2**53 (no exact double), but sums of 15 that fit: a SUM past 64 bits is the test above's
    ids = data.draw(st.lists(st.integers(-(2**59), 2**59), min_size=n, max_size=n, unique=True))
    ts, tuples = 0.0, []
    for tid in ids:
        ts = max(0.0, ts + data.draw(st.sampled_from([0.0, 0.25, 1.0, 3.0, -1.0])))
        tuples.append((ts, {"ts": ts, "id": tid, "alert": data.draw(st.integers(-2, 2))}))
    calls = [("COUNT", None), *data.draw(st.lists(st.sampled_from(TS_ID_CALLS), min_size=1, max_size=4, unique=True))]
    group_by = data.draw(st.sampled_from([[], ["H.ts"], ["H.id"], ["H.ts", "H.alert"]]))
    slide = data.draw(st.sampled_from([Fraction(1, 2), Fraction(1), Fraction(2)]))
    q = RefQuery("q", "H", slide * data.draw(st.integers(1, 3)), slide, [], group_by, calls)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare([q], tuples, data.draw(st.sampled_from([0.0, 1.0])), batch=data.draw(st.booleans()))


def test_ts_and_id_group_and_aggregate_in_count_windows() -> None:
    m = mqo.Matcher(DDL, missing="null")
    m.register_query("Query ID: r SELECT H.id, MAX(H.ts), COUNT(H.ts), MIN(H.id) FROM H [ROWS 2] GROUP BY H.id;")
    for i, tid in enumerate([7, 2**62, 7]):
        m.push("H", ts=float(i), values={}, id=tid if i < 2 else None)
    rows = [(r.group["id"], r.values["MAX(H.ts)"], r.values["COUNT(H.ts)"], r.values["MIN(H.id)"]) for r in m.flush()]
    assert rows == [(7, 0.0, 1, 7), (2**62, 1.0, 1, 2**62), (2, 2.0, 1, 2)]


def test_ids_at_the_int64_ends_are_groups_of_their_own() -> None:
    m = mqo.Matcher(DDL, missing="null")
    m.register_query("SELECT H.id, COUNT(*) FROM H [RANGE 10] GROUP BY H.id;")
    m.push_batch("H", {"ts": [1.0, 1.0, 1.0], "id": [INT_MIN, INT_MIN + 1, INT_MAX]})
    assert sorted(r.group["id"] for r in m.flush()) == [INT_MIN, INT_MIN + 1, INT_MAX]
