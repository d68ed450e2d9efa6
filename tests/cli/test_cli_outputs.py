"""``mqo match`` as a real process: its output paths, its options, its warnings, and
output that a strict reader takes (no NaN, no Infinity)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.cli.clirun import match, mqo, strict_lines, write
from tests.conftest import EXAMPLES

ICU = EXAMPLES / "icu"
ICU_ARGS = {
    "schema": str(ICU / "streams.ddl"),
    "queries": str(ICU / "running_example.mqo"),
    "inputs": [f"{s}={ICU / f'{s}.csv'}" for s in "BHKT"],
}
DDL = "REGISTER STREAM A (x FLOAT, n INTEGER, tag STRING);\n"
ALL_A = "Query ID: all\nSELECT * FROM A;\n"


@pytest.fixture
def a_stream(tmp_path: Path) -> dict[str, str]:
    return {"schema": write(tmp_path / "a.ddl", DDL), "queries": write(tmp_path / "a.mqo", ALL_A)}


def no_traceback(proc) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr


# ------------------------------------------------------------------- side files


def test_an_unwritable_reject_file_is_found_before_any_input_is_read(tmp_path: Path, a_stream) -> None:
    blocker = write(tmp_path / "not-a-dir", "")
    data = write(tmp_path / "a.csv", "ts,x,n,tag\n1,oops,1,k\n2,2,2,k\n")
    out = tmp_path / "o.jsonl"
    proc = match(
        "--output",
        str(out),
        "--on-bad-row",
        "skip",
        "--rejects",
        f"{blocker}/r.jsonl",
        **a_stream,
        inputs=[f"A={data}"],
    )
    assert proc.returncode == 2
    no_traceback(proc)
    assert f"{blocker}/r.jsonl" in proc.stderr and "reject file" in proc.stderr
    assert not out.exists()  # nothing matched, nothing written: the run never started


@pytest.mark.parametrize("option", ["--late", "--rejects", "--output"])
def test_a_missing_directory_is_named_before_the_input_is_read(tmp_path: Path, a_stream, option: str) -> None:
    # the input has a bad row: had it been read first, that would be the error
    data = write(tmp_path / "a.csv", "ts,x,n,tag\n1,oops,1,k\n")
    target = str(tmp_path / "nowhere" / "f.jsonl")
    proc = match(option, target, **a_stream, inputs=[f"A={data}"])
    assert proc.returncode == 2
    no_traceback(proc)
    assert target in proc.stderr and "does not exist" in proc.stderr
    assert "oops" not in proc.stderr


def test_side_files_of_an_earlier_run_are_replaced_or_removed(tmp_path: Path, a_stream) -> None:
    out = tmp_path / "o.jsonl"
    late, rejects = tmp_path / "o.jsonl.late.jsonl", tmp_path / "o.jsonl.rejects.jsonl"
    late.write_text('{"stale": true}\n')
    rejects.write_text('{"stale": true}\n')
    clean = write(tmp_path / "clean.csv", "ts,x,n,tag\n1,1,1,k\n")
    proc = match("--output", str(out), **a_stream, inputs=[f"A={clean}"])
    assert proc.returncode == 0, proc.stderr
    assert not late.exists() and not rejects.exists()  # this run had none: no files

    late.write_text('{"stale": true}\n')
    messy = write(tmp_path / "messy.csv", "ts,x,n,tag\n5,1,1,k\n3,2,2,k\n6,oops,3,k\n")
    proc = match("--output", str(out), "--on-bad-row", "skip", **a_stream, inputs=[f"A={messy}"])
    assert proc.returncode == 0, proc.stderr
    assert [t["ts"] for t in strict_lines(late.read_text())] == [3.0]
    assert [r["line"] for r in strict_lines(rejects.read_text())] == [4]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_a_full_device_is_a_clear_error(tmp_path: Path, fmt: str) -> None:
    proc = match("--output", "/dev/full", "--format", fmt, **ICU_ARGS)
    assert proc.returncode == 2
    no_traceback(proc)
    assert "/dev/full" in proc.stderr and "No space left on device" in proc.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_late_file_is_a_clear_error(tmp_path: Path, a_stream) -> None:
    data = write(tmp_path / "a.csv", "ts,x,n,tag\n5,1,1,k\n3,2,2,k\n")
    proc = match("--output", str(tmp_path / "o.jsonl"), "--late", "/dev/full", **a_stream, inputs=[f"A={data}"])
    assert proc.returncode == 2
    no_traceback(proc)
    assert "late-tuple file /dev/full" in proc.stderr


def test_an_output_that_is_an_input_is_refused(tmp_path: Path, a_stream) -> None:
    data = tmp_path / "a.csv"
    data.write_text("ts,x,n,tag\n1,1,1,k\n")
    proc = match("--output", str(data), **a_stream, inputs=[f"A={data}"])
    assert proc.returncode == 2 and "also an input" in proc.stderr
    assert data.read_text() == "ts,x,n,tag\n1,1,1,k\n"


def test_parquet_output_is_renamed_into_place_whole(tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    proc = match("--output", str(out), **ICU_ARGS)
    assert proc.returncode == 0, proc.stderr
    assert pq.read_table(out).num_rows == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.parquet"]  # no temporary file left


# ------------------------------------------------------------- strict output


OVERFLOW = "Query ID: big\nSELECT A.x * 1e300 AS big, A.x / (A.x - A.x) AS quotient, A.tag FROM A;\n"


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_values_that_are_not_finite_are_written_as_null_and_counted(tmp_path: Path, fmt: str) -> None:
    ddl = write(tmp_path / "a.ddl", DDL)
    queries = write(tmp_path / "q.mqo", OVERFLOW)
    data = write(tmp_path / "a.csv", 'ts,x,n,tag\n1,1e10,1,"NaN"\n2,2,2,Infinity\n')
    out = tmp_path / f"o.{fmt}"
    proc = match("--output", str(out), schema=ddl, queries=queries, inputs=[f"A={data}"])
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"warning: 1 computed value", proc.stderr)
    if fmt == "jsonl":
        rows = [r["values"] for r in strict_lines(out.read_text())]
    elif fmt == "csv":
        with out.open(newline="") as f:
            table = list(csv.DictReader(f))
        number = lambda v: float(v) if v else None  # noqa: E731 - an empty field is NULL
        rows = [{"big": number(r["big"]), "quotient": number(r["quotient"]), "A.tag": r["A.tag"]} for r in table]
    else:
        rows = [{k: r[k] for k in ("big", "quotient", "A.tag")} for r in pq.read_table(out).to_pylist()]
    # the text "NaN" quoted and "Infinity" in a STRING column are strings, not numbers
    assert rows == [
        {"big": None, "quotient": None, "A.tag": "NaN"},
        {"big": 2e300, "quotient": None, "A.tag": "Infinity"},
    ]


def test_every_file_a_run_writes_is_strict_json(tmp_path: Path, a_stream) -> None:
    data = write(tmp_path / "a.csv", "ts,x,n,tag\n5,1,1,NaN\n3,nan,2,k\n6,1e999,3,k\n7,-inf,4,k\n")
    out = tmp_path / "o.jsonl"
    proc = match("--output", str(out), "--on-bad-row", "skip", **a_stream, inputs=[f"A={data}"])
    assert proc.returncode == 0, proc.stderr
    assert strict_lines(out.read_text())[0]["values"] == {"A.x": 1.0, "A.n": 1, "A.tag": None}
    (late,) = strict_lines((tmp_path / "o.jsonl.late.jsonl").read_text())
    assert late["values"]["x"] is None
    rejects = strict_lines((tmp_path / "o.jsonl.rejects.jsonl").read_text())
    assert [(r["line"], r["column"], r["value"]) for r in rejects] == [(4, "x", "1e999"), (5, "x", "-inf")]


# ------------------------------------------------------------------ options


@pytest.mark.parametrize(
    ("option", "value", "fragment"),
    [
        ("--order", "XYZ", "is not an order"),
        ("--order", "AJJ", "is not an order"),
        ("--allowed-lateness", "-1", "not a finite number of seconds >= 0"),
        ("--allowed-lateness", "inf", "not a finite number of seconds >= 0"),
        ("--allowed-lateness", "nan", "not a finite number of seconds >= 0"),
        ("--allowed-lateness", "soon", "is not a duration"),
    ],
)
def test_bad_options_are_refused_by_the_argument_parser(option: str, value: str, fragment: str) -> None:
    proc = match(option, value, **ICU_ARGS)
    assert proc.returncode == 2
    no_traceback(proc)
    assert f"argument {option}" in proc.stderr and fragment in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("option", "value"), [("--order", "wja"), ("--order", "static:AJW"), ("--allowed-lateness", "500 ms")]
)
def test_good_options_in_other_spellings(tmp_path: Path, option: str, value: str) -> None:
    proc = match(option, value, **ICU_ARGS)
    assert proc.returncode == 0, proc.stderr
    assert len(strict_lines(proc.stdout)) == 1


def test_lateness_in_another_unit_decides_what_is_late(tmp_path: Path, a_stream) -> None:
    data = write(tmp_path / "a.csv", "ts,x,n,tag\n1.0,1,1,k\n1.6,2,2,k\n1.2,3,3,k\n")
    for lateness, late in (("300 ms", 1), ("0.5", 0)):
        proc = match(
            "--allowed-lateness", lateness, "--output", str(tmp_path / "o.jsonl"), **a_stream, inputs=[f"A={data}"]
        )
        assert proc.returncode == 0, proc.stderr
        assert re.search(rf"^late:\s+{late}\b", proc.stderr, re.M)


def test_profile_validates_lateness_too() -> None:
    proc = mqo("profile", "--schema", ICU_ARGS["schema"], "--queries", ICU_ARGS["queries"], "--input",
               ICU_ARGS["inputs"][0], "--allowed-lateness", "nan")  # fmt: skip
    assert proc.returncode == 2 and "--allowed-lateness" in proc.stderr
    no_traceback(proc)


# ------------------------------------------------------------------ warnings


def test_an_empty_query_file_is_a_warning(tmp_path: Path) -> None:
    queries = write(tmp_path / "none.mqo", "-- nothing here yet\n")
    proc = match(schema=ICU_ARGS["schema"], queries=queries, inputs=ICU_ARGS["inputs"])
    assert proc.returncode == 0
    assert f"warning: {queries} holds no queries; nothing can match" in proc.stderr
    proc = mqo("explain", "--schema", ICU_ARGS["schema"], "--queries", queries)
    assert proc.returncode == 0 and "holds no queries" in proc.stderr


def test_queries_whose_streams_get_no_input_are_named(tmp_path: Path) -> None:
    proc = match(schema=ICU_ARGS["schema"], queries=ICU_ARGS["queries"], inputs=ICU_ARGS["inputs"][:2])  # B and H
    assert proc.returncode == 0
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert any("queries 1, 2, 3 read stream T, which has no --input" in w for w in warnings), warnings
    assert any("query 1 reads stream K, which has no --input; it cannot match" in w for w in warnings), warnings
    full = match(**ICU_ARGS)
    assert "warning" not in full.stderr
