"""``mqo serve`` with windowed aggregate queries: rows as the Python API gives them
over the same steps, across restarts from the checkpoint, a stopped step done again
byte for byte, CSV and Parquet in files of their own."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
from runtime.local.serve import LocalService
from runtime.stopping import StopFlag

DDL = "REGISTER STREAM H (patient INTEGER, vib FLOAT);"
QUERIES = {
    "a.mqo": "Query ID: per_patient SELECT H.patient, COUNT(*), AVG(H.vib), MAX(H.vib)"
    " FROM H [RANGE 4 sec SLIDE 2 sec] GROUP BY H.patient;",
    "b.mqo": "Query ID: last3 SELECT H.patient, SUM(H.vib), MIN(H.vib) FROM H [ROWS 3 SLIDE 2] GROUP BY H.patient;\n"
    "Query ID: hot SELECT * FROM H WHERE H.vib > 8;",
    "c.mqo": "Query ID: tumbling SELECT COUNT(H.vib), STDDEV(H.vib) FROM H [RANGE 5 sec] WHERE H.vib < 9;",
}

Step = tuple[list[str], list[tuple[float, int | None, float | None]]]


@st.composite
def steps(draw: Any) -> list[Step]:
    out: list[Step] = []
    ts = 0.0
    names = list(QUERIES)
    for k in range(draw(st.integers(1, 6))):
        files = [n for n in names if draw(st.integers(0, 2)) == 0] if k else [names[0]]
        names = [n for n in names if n not in files]
        rows = []
        for _ in range(draw(st.integers(0, 8))):
            ts = max(0.0, ts + draw(st.sampled_from([0.0, 0.5, 1.0, 1.5, -1.0, 3.0])))
            patient = draw(st.one_of(st.none(), st.integers(0, 1)))
            vib = draw(st.one_of(st.none(), st.sampled_from([0.1, 0.2, 2.5, 9.0, 10.0])))
            rows.append((ts, patient, vib))
        out.append((files, rows))
    return out


def make_service(root: Path, fmt: str = "jsonl") -> LocalService:
    for sub in ("q", "in"):
        (root / sub).mkdir(exist_ok=True)
    return LocalService(
        DDL,
        {"H": str(root / "in")},
        str(root / "q"),
        str(root / "out"),
        str(root / "ck"),
        fmt=fmt,
        allowed_lateness=1.5,
        log=io.StringIO(),
    )


def drop(root: Path, number: int, step: Step) -> None:
    files, rows = step
    for name in files:
        (root / "q" / name).write_text(QUERIES[name] + "\n")
    if rows:
        text = io.StringIO()
        out = csv.writer(text)
        out.writerow(["ts", "patient", "vib"])
        out.writerows([repr(ts), "" if p is None else p, "" if v is None else repr(v)] for ts, p, v in rows)
        (root / "in" / f"{number:03d}.csv").write_text(text.getvalue())


def api_rows(plan: list[Step]) -> list[dict[str, Any]]:
    """The same steps through the Python API: queries, tuples one by one, the rows
    emitted by the step's end."""
    m = mqo.Matcher(DDL, allowed_lateness=1.5, late_sink=lambda t: None)
    out: list[dict[str, Any]] = []
    for files, rows in plan:
        for name in files:
            m.register_queries(QUERIES[name])
        for ts, patient, vib in rows:  # one file a step: its rows in file order
            m.push("H", ts=ts, values={"patient": patient, "vib": vib})
        out += m.poll_aggregates().to_pylist()
    return out


def served_rows(out: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(out.glob("results-*.jsonl")):
        rows += [r for r in map(json.loads, path.read_text().splitlines()) if "window_end" in r]
    return rows


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(plan=steps(), restart=st.booleans())
def test_serve_emits_what_the_api_emits(tmp_path_factory: Any, plan: list[Step], restart: bool) -> None:
    root = tmp_path_factory.mktemp("serve")
    service = make_service(root)
    for number, step in enumerate(plan, start=1):
        drop(root, number, step)
        if restart:  # from the checkpoint every step: the aggregate state goes through it
            service = make_service(root)
        service.step()
    got = served_rows(root / "out")
    want = api_rows(plan)
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, want))


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(plan=steps(), fmt=st.sampled_from(["jsonl", "csv", "parquet"]))
def test_a_stopped_step_is_done_again_with_aggregates(tmp_path_factory: Any, plan: list[Step], fmt: str) -> None:
    straight, stopped = tmp_path_factory.mktemp("straight"), tmp_path_factory.mktemp("stopped")
    plain, broken = make_service(straight, fmt), make_service(stopped, fmt)
    for number, step in enumerate(plan, start=1):
        drop(straight, number, step)
        drop(stopped, number, step)
        plain.step()
        flag = StopFlag()
        flag.signum = 2  # as if Ctrl-C came while the step was being matched
        if broken.step(flag).interrupted:
            assert not list((stopped / "out").glob(f"*-{number:06d}*"))
            broken = make_service(stopped, fmt)
            broken.step()
    names = sorted(p.name for p in (straight / "out").iterdir())
    assert names == sorted(p.name for p in (stopped / "out").iterdir())
    for name in names:
        assert (straight / "out" / name).read_bytes() == (stopped / "out" / name).read_bytes(), name


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_aggregate_rows_get_a_file_of_their_own(tmp_path: Path, fmt: str) -> None:
    plan: list[Step] = [
        (list(QUERIES), [(float(i), i % 2, float(i % 11)) for i in range(12)]),
        ([], [(20.0, 0, 1.0)]),
    ]
    service = make_service(tmp_path, fmt)
    for number, step in enumerate(plan, start=1):
        drop(tmp_path, number, step)
        service.step()
    out = tmp_path / "out"
    if fmt == "csv":
        with open(out / "aggregates-000001.csv", newline="") as f:
            first = list(csv.DictReader(f))
    else:
        first = pq.read_table(out / "aggregates-000001.parquet").to_pylist()
    want = [r for r in api_rows(plan[:1])]
    assert [(r["query"], float(r["window_end"])) for r in first] == [(r["query"], r["window_end"]) for r in want]
    assert (out / f"aggregates-000002.{fmt}").exists() and (out / f"results-000001.{fmt}").exists()
