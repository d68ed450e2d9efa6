"""``mqo serve --engine local`` against the exact reference.

A workload's operations are cut into steps: each step drops its query files (a
registration is a new ``.mqo`` file, a removal deletes the file or drops an
``UNREGISTER`` file) and one CSV file per stream, and the service takes one step.
The reference is fed the same: the step's registrations and removals first, then the
step's tuples in the order the service merges them (smallest ts first, ties by the
order of ``--input``). Results come from the step's result files.
"""

from __future__ import annotations

import csv
import heapq
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.local.serve import LocalService
from runtime.stopping import StopFlag
from tests.differential.test_exact_differential import EXPENSIVE, REPO, compare, read_jsonl, record
from tests.references.exact_workloads import Heartbeat, Push, Register, Unregister, Workload, csv_cell, workloads
from tests.references.reference import Result, exact_result

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning", "ignore::mqo.NeverMatchesWarning")


def steps_of(workload: Workload, cuts: list[bool]) -> list[list[Any]]:
    """The operations in steps: a registration or removal after a tuple starts a new
    step (the service takes a step's queries before its data), and so does a cut."""
    # (an empty step, queries only, is a step too)
    steps: list[list[Any]] = [[]]
    pushed = False
    ids = workload.effective_ids()
    for i, op in enumerate(workload.ops):
        if isinstance(op, Heartbeat):
            continue
        command = isinstance(op, Register | Unregister)
        # a removal of a query registered in this step waits for the next (query
        # files of one step are taken in name order, not in the order written)
        undo = isinstance(op, Unregister) and any(
            isinstance(o, Register) and o.query.name == op.name for o, _ in steps[-1]
        )
        if (command and pushed) or undo or (isinstance(op, Push) and cuts[i % len(cuts)] and pushed):
            steps.append([])
            pushed = False
        steps[-1].append((op, ids[i]))
        pushed = pushed or isinstance(op, Push)
    return steps


def drop_step(workload: Workload, step: list[Any], number: int, root: Path, by_file: bool) -> list[Any]:
    """Write the step's query and data files; the step's tuples in merged order."""
    for op, _ in step:
        if isinstance(op, Register):
            (root / "q" / f"{op.query.name}.mqo").write_text(op.query.to_text() + "\n")
        elif isinstance(op, Unregister):
            if by_file:
                (root / "q" / f"{op.name}.mqo").unlink()
            else:
                (root / "q" / f"drop-{op.name}.mqo").write_text(f"-- remove it\nUNREGISTER {op.name};\n")
    per_stream = []
    for k, stream in enumerate(workload.schema.streams):
        rows = [(op, ident) for op, ident in step if isinstance(op, Push) and op.stream == stream.name]
        if not rows:
            continue
        text = io.StringIO()
        out = csv.writer(text)
        out.writerow(["ts", "id", *(c.name for c in stream.columns)])
        for op, ident in rows:
            out.writerow([repr(op.ts), ident, *(csv_cell(op.values.get(c.name), c.type) for c in stream.columns)])
        # written aside and moved in, as the service asks of writers
        folder = root / "in" / stream.name
        (folder / f".{number:04d}.tmp").write_text(text.getvalue())
        (folder / f".{number:04d}.tmp").rename(folder / f"{number:04d}.csv")
        per_stream.append([(op.ts, k, n, op, ident) for n, (op, ident) in enumerate(rows)])
    return [(op, ident) for *_, op, ident in heapq.merge(*per_stream, key=lambda item: (item[0], item[1]))]


def make_service(workload: Workload, root: Path) -> LocalService:
    for folder in ["q", *(f"in/{s.name}" for s in workload.schema.streams)]:
        (root / folder).mkdir(parents=True, exist_ok=True)
    inputs = {s.name: str(root / "in" / s.name) for s in workload.schema.streams}
    return LocalService(
        workload.schema.ddl(),
        inputs,
        str(root / "q"),
        str(root / "out"),
        str(root / "ck"),
        allowed_lateness=workload.lateness,
        time=workload.time,
        log=io.StringIO(),
    )


def results_in(folder: Path) -> Iterator[Result]:
    for path in sorted(folder.glob("results-*.jsonl")):
        for r in read_jsonl(path):
            yield exact_result(r["query"], r["ts"], r["ids"], r["values"])


def late_in(folder: Path) -> int:
    return sum(len(read_jsonl(p)) for p in folder.glob("late-*.jsonl"))


@settings(max_examples=15, **EXPENSIVE)
@given(
    workload=workloads(max_tuples=16),
    cuts=st.lists(st.booleans(), min_size=1, max_size=6),
    by_file=st.booleans(),
    restart_every=st.sampled_from((0, 1, 2)),
)
def test_serve_steps_match_the_reference(
    tmp_path_factory: Any, workload: Workload, cuts: list[bool], by_file: bool, restart_every: int
) -> None:
    """Registrations and removals between steps, tuples in several files per stream,
    late tuples across steps, restarts from the checkpoint: the results and late
    tuples of all steps are the reference's."""
    record(workload)
    root = tmp_path_factory.mktemp("serve")
    ref = workload.reference()
    want: list[Result] = []
    service = make_service(workload, root)
    for number, step in enumerate(steps_of(workload, cuts), start=1):
        for op, _ in step:
            if isinstance(op, Register):
                ref.register(op.query)
            elif isinstance(op, Unregister):
                ref.unregister(op.name)
        for op, ident in drop_step(workload, step, number, root, by_file):
            want.extend(ref.push(op.stream, op.ts, dict(op.values), id=ident))
        if restart_every and number % restart_every == 0:
            service = make_service(workload, root)
        service.step()
    compare("mqo serve", list(results_in(root / "out")), want)
    assert late_in(root / "out") == ref.late_count


@settings(max_examples=8, **EXPENSIVE)
@given(workload=workloads(max_tuples=16, churn=False), cuts=st.lists(st.booleans(), min_size=1, max_size=4))
def test_a_stopped_step_is_done_again(tmp_path_factory: Any, workload: Workload, cuts: list[bool]) -> None:
    """A step stopped half-way commits nothing; a service restarted from the
    checkpoint does it again and writes the same files as a run never stopped."""
    record(workload)
    straight, stopped = tmp_path_factory.mktemp("straight"), tmp_path_factory.mktemp("stopped")
    steps = steps_of(workload, cuts)
    plain, broken = make_service(workload, straight), make_service(workload, stopped)
    for number, step in enumerate(steps, start=1):
        drop_step(workload, step, number, straight, True)
        drop_step(workload, step, number, stopped, True)
        plain.step()
        flag = StopFlag()
        flag.signum = 2  # as if Ctrl-C came while the step was being matched
        report = broken.step(flag)
        if report.interrupted:
            assert not list((stopped / "out").glob(f"results-{number:06d}*"))
            broken = make_service(workload, stopped)
            broken.step()
    names = sorted(p.name for p in (straight / "out").iterdir())
    assert names == sorted(p.name for p in (stopped / "out").iterdir())
    for name in names:
        assert (straight / "out" / name).read_bytes() == (stopped / "out" / name).read_bytes(), name


def test_a_join_finds_a_partner_from_an_earlier_step(tmp_path: Path) -> None:
    """A tuple stored in one step joins a tuple of a later step, though the service took
    a checkpoint in between: A is read by a pair query (A, B), decided by the columnar
    join step, and by a query over A, C and D, decided by the engine, which stores A's
    tuple beside the step (once, that tuple was then missed by the pair query)."""
    for folder in ("q", "in/A", "in/B", "in/C", "in/D"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "q" / "joins.mqo").write_text(
        "Query ID: ab\nSELECT * FROM A, B MAXWINDOW 100 WHERE A.x <= B.x;\n"
        "Query ID: acd\nSELECT * FROM A, C, D MAXWINDOW 100 WHERE A.x <= C.x AND C.x <= D.x;\n"
    )
    service = LocalService(
        " ".join(f"REGISTER STREAM {s} (x INTEGER);" for s in "ABCD"),
        {s: str(tmp_path / "in" / s) for s in "ABCD"},
        str(tmp_path / "q"),
        str(tmp_path / "out"),
        str(tmp_path / "ck"),
        log=io.StringIO(),
    )
    (tmp_path / "in" / "A" / "1.csv").write_text("ts,x\n1,5\n")
    service.step()
    (tmp_path / "in" / "B" / "2.csv").write_text("ts,x\n2,7\n3,4\n")
    service.step()
    found = [r for path in sorted((tmp_path / "out").glob("results-*.jsonl")) for r in read_jsonl(path)]
    assert [(r["query"], r["ids"]) for r in found] == [("ab", {"A": 0, "B": 0})]


def test_query_files_come_and_go(tmp_path: Path) -> None:
    """New, changed, broken and deleted query files; the errors name file, line and
    column; a broken change keeps the old queries; nothing stops the service."""
    (tmp_path / "q").mkdir()
    (tmp_path / "in" / "B").mkdir(parents=True)
    service = LocalService(
        "REGISTER STREAM B (pressure FLOAT);",
        {"B": str(tmp_path / "in" / "B")},
        str(tmp_path / "q"),
        str(tmp_path / "out"),
        str(tmp_path / "ck"),
        log=io.StringIO(),
    )
    out = tmp_path / "out"

    def data(number: int, rows: str) -> None:
        (tmp_path / "in" / "B" / f"{number}.csv").write_text("ts,pressure\n" + rows)

    (tmp_path / "q" / "high.mqo").write_text("Query ID: high\nSELECT * FROM B WHERE B.pressure > 100;\n")
    data(1, "1,150\n2,50\n")
    assert service.step().registered == 1
    assert [r["ids"] for r in read_jsonl(out / "results-000001.jsonl")] == [{"B": 0}]

    (tmp_path / "q" / "high.mqo").write_text("Query ID: high\nSELECT * FROM B WHERE B.pressure > 40;\n")
    (tmp_path / "q" / "bad.mqo").write_text("Query ID: bad\nSELECT * FROM B WHERE B.presure > 1;\n")
    data(2, "3,60\n")
    report = service.step()
    assert (report.registered, report.unregistered, report.query_errors) == (1, 1, 1)
    [error] = read_jsonl(out / "query-errors-000002.jsonl")
    assert error["file"].endswith("bad.mqo") and "bad.mqo:2:" in error["error"] and "pressure" in error["error"]
    assert [r["ts"] for r in read_jsonl(out / "results-000002.jsonl")] == [3.0]

    (tmp_path / "q" / "high.mqo").write_text("Query ID: high\nSELECT * FROM B WHERE B.nope > 40;\n")
    data(3, "4,70\n")
    report = service.step()
    assert report.query_errors == 1 and report.results == 1  # the old 'high' still runs

    (tmp_path / "q" / "high.mqo").unlink()
    data(4, "5,70\n")
    report = service.step()
    assert report.unregistered == 1 and report.results == 0
    assert service.matcher.query_ids == []
    files = sorted(out.iterdir())
    assert service.step().idle and sorted(out.iterdir()) == files  # nothing new, nothing written


def test_unreadable_data_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / "q").mkdir()
    (tmp_path / "in").mkdir()
    (tmp_path / "q" / "all.mqo").write_text("SELECT * FROM B;")
    (tmp_path / "in" / "1.csv").write_text("ts,temperature\n1,2\n")
    (tmp_path / "in" / "2.csv").write_text("ts,pressure\n1,oops\n2,3\n")
    service = LocalService(
        "REGISTER STREAM B (pressure FLOAT);",
        {"B": str(tmp_path / "in")},
        str(tmp_path / "q"),
        str(tmp_path / "out"),
        str(tmp_path / "ck"),
        log=io.StringIO(),
    )
    report = service.step()
    assert (report.bad_files, report.rejected, report.results) == (1, 1, 1)
    [bad] = read_jsonl(tmp_path / "out" / "input-errors-000001.jsonl")
    assert bad["file"].endswith("1.csv") and "temperature" in bad["error"]
    [row] = read_jsonl(tmp_path / "out" / "rejected-000001.jsonl")
    assert "oops" in json.dumps(row)


def test_cli_serve_once(tmp_path: Path) -> None:
    """``mqo serve --once`` on the shipped example; a second run with a new data file
    and an UNREGISTER file carries on from the checkpoint."""
    icu = REPO / "examples" / "icu"
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "running.mqo").write_text((icu / "running_example.mqo").read_text())
    command = [sys.executable, "-m", "runtime.cli", "serve", "--schema", str(icu / "streams.ddl")]
    command += ["--queries", str(tmp_path / "q"), "--output", str(tmp_path / "out")]
    command += ["--checkpoint", str(tmp_path / "ck"), "--once"]
    for s in "BHKT":
        (tmp_path / s).mkdir()
        (tmp_path / s / "0.csv").write_text((icu / f"{s}.csv").read_text())
        command += ["--input", f"{s}={tmp_path / s}"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "step 1:" in done.stderr
    [result] = read_jsonl(tmp_path / "out" / "results-000001.jsonl")
    assert (result["query"], result["ids"]) == ("3", {"T": 0, "H": 0})
    (tmp_path / "q" / "stop.mqo").write_text("UNREGISTER 3;\n")
    (tmp_path / "T" / "1.csv").write_text("ts,fluct,degree,incr\n9,103,101,98\n")
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "step 2: +0/-1 queries 1 data file(s), 1 tuples, 0 results" in done.stderr
    bad = subprocess.run([*command, "--input", f"X={tmp_path / 'B'}"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode != 0 and "no stream 'X'" in bad.stderr
