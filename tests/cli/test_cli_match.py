"""``mqo match`` and ``mqo explain`` end to end: runtime/cli.py, io/inputs.py, io/writers.py, local/match.py.

The CLI runs in-process (``runtime.cli.main``, output captured with ``capsys``) on real
files written to ``tmp_path``; one test runs it as a separate process to show that a bad
input exits with status 2 and no traceback.
"""

from __future__ import annotations

import csv
import gc
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runtime.cli import main
from tests.conftest import EXAMPLES

ICU = EXAMPLES / "icu"
DDL = str(ICU / "streams.ddl")
QUERIES = str(ICU / "running_example.mqo")
ICU_INPUTS = [f"{s}={ICU / f'{s}.csv'}" for s in "BHKT"]
EXPECTED_LINE = '{"query":"3","ts":1.0,"ids":{"T":0,"H":0},"values":{"H.alert":1}}'

# Two single-stream streams, so the order of results shows the order of arrival.
AB_DDL = "REGISTER STREAM A (x FLOAT, tag STRING);\nREGISTER STREAM B (y FLOAT);\n"
AB_QUERIES = "Query ID: a\nSELECT * FROM A;\nQuery ID: b\nSELECT * FROM B;\n"


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def match_args(*inputs: str, schema: str = DDL, queries: str = QUERIES, extra: tuple[str, ...] = ()) -> list[str]:
    args = ["match", "--schema", schema, "--queries", queries]
    for spec in inputs:
        args += ["--input", spec]
    return args + list(extra)


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def ab(tmp_path: Path) -> tuple[str, str]:
    return write(tmp_path / "ab.ddl", AB_DDL), write(tmp_path / "ab.mqo", AB_QUERIES)


# ============================================================ the running example


def test_running_example_jsonl_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, *match_args(*ICU_INPUTS))
    assert rc == 0, err
    assert out.splitlines() == [EXPECTED_LINE]
    assert re.search(r"^tuples:\s+16 \(", err, re.M)
    assert re.search(r"^results:\s+1 ", err, re.M)
    assert re.search(r"^late:\s+0$", err, re.M)
    assert re.search(r"^rejected:\s+0$", err, re.M)


def test_jsonl_on_a_standard_output_without_a_byte_buffer(tmp_path: Path) -> None:
    """Results are written as UTF-8 bytes; a standard output put in place as text only
    (``io.StringIO``) still gets every line, non-ASCII text included, after what was
    printed before."""
    import contextlib
    import io

    ddl = write(tmp_path / "s.ddl", "REGISTER STREAM A (tag STRING);\n")
    queries = write(tmp_path / "q.mqo", "Query ID: q\nSELECT * FROM A;\n")
    data = write(tmp_path / "a.csv", "ts,tag\n1,naïve\n2,日本\n")
    out = io.StringIO()
    out.write("before\n")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(match_args(f"A={data}", schema=ddl, queries=queries)) == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == "before"
    assert [(r["query"], r["values"]["A.tag"]) for r in jsonl("\n".join(lines[1:]))] == [("q", "naïve"), ("q", "日本")]


def test_the_heap_is_frozen_only_when_main_runs_as_the_program(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Called with arguments (in-process, as here) main leaves the caller's heap alone;
    as the program it freezes it, so that the exit skips a garbage collection."""
    frozen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    assert run(capsys, *match_args(*ICU_INPUTS))[1].splitlines() == [EXPECTED_LINE]
    assert not frozen
    monkeypatch.setattr(sys, "argv", ["mqo", *match_args(*ICU_INPUTS)])
    assert main() == 0
    assert capsys.readouterr().out.splitlines() == [EXPECTED_LINE]
    assert frozen == [True]


def test_running_example_jsonl_file_and_quiet(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_path = tmp_path / "matches.jsonl"
    rc, out, err = run(capsys, *match_args(*ICU_INPUTS, extra=("--output", str(out_path), "-q")))
    assert rc == 0
    assert out == "" and err == ""
    assert out_path.read_text().splitlines() == [EXPECTED_LINE]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["matches.jsonl"]  # no late or reject files


@pytest.mark.parametrize("how", ["extension", "flag"])
def test_running_example_csv(capsys: pytest.CaptureFixture[str], tmp_path: Path, how: str) -> None:
    out_path = tmp_path / ("r.csv" if how == "extension" else "r.txt")
    extra = ("--output", str(out_path), "-q") + (("--format", "csv") if how == "flag" else ())
    rc, _, err = run(capsys, *match_args(*ICU_INPUTS, extra=extra))
    assert rc == 0, err
    with out_path.open(newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    assert header[:3] == ["query", "ts", "ids"]
    assert set(header[3:]) == {"H.alert", "B.alert"}  # every SELECT value name over all queries
    assert len(body) == 1
    rec = dict(zip(header, body[0], strict=True))
    assert rec["query"] == "3"
    assert float(rec["ts"]) == 1.0
    assert json.loads(rec["ids"]) == {"T": 0, "H": 0}
    assert rec["H.alert"] == "1"
    assert rec["B.alert"] == ""  # NULL: query 3 has no such value


def test_running_example_parquet(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_path = tmp_path / "r.parquet"
    rc, _, err = run(capsys, *match_args(*ICU_INPUTS, extra=("--output", str(out_path), "-q")))
    assert rc == 0, err
    table = pq.read_table(out_path)
    assert table.column_names[:3] == ["query", "ts", "ids"]
    assert set(table.column_names[3:]) == {"H.alert", "B.alert"}
    assert table.schema.field("ts").type == pa.float64()
    assert table.schema.field("H.alert").type == pa.int64()
    (rec,) = table.to_pylist()
    assert rec["query"] == "3"
    assert rec["ts"] == 1.0
    assert dict(rec["ids"]) == {"T": 0, "H": 0}
    assert rec["H.alert"] == 1
    assert rec["B.alert"] is None


def test_parquet_output_needs_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, *match_args(*ICU_INPUTS, extra=("--format", "parquet")))
    assert rc == 2
    assert "Parquet" in err and "Traceback" not in err
    assert out == ""


# ============================================================ merge order and lateness


def test_inputs_merge_by_ts_then_input_order(capsys: pytest.CaptureFixture[str], tmp_path: Path, ab) -> None:
    ddl, queries = ab
    a = write(tmp_path / "a.csv", "ts,x,tag\n1,10,p\n3,11,q\n3,12,r\n")
    b = write(tmp_path / "b.csv", "ts,y\n2,20\n3,21\n")
    rc, out, err = run(capsys, *match_args(f"A={a}", f"B={b}", schema=ddl, queries=queries, extra=("-q",)))
    assert rc == 0, err
    got = [(r["query"], r["ts"], r["ids"]) for r in jsonl(out)]
    assert got == [
        ("a", 1.0, {"A": 0}),
        ("b", 2.0, {"B": 0}),
        ("a", 3.0, {"A": 1}),
        ("a", 3.0, {"A": 2}),
        ("b", 3.0, {"B": 1}),
    ]
    # the other input order: ties at ts 3 now go to B first
    rc, out, _ = run(capsys, *match_args(f"B={b}", f"A={a}", schema=ddl, queries=queries, extra=("-q",)))
    assert [(r["query"], r["ts"]) for r in jsonl(out)] == [("a", 1.0), ("b", 2.0), ("b", 3.0), ("a", 3.0), ("a", 3.0)]


def test_two_files_of_one_stream_share_ids_in_arrival_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, ab
) -> None:
    ddl, queries = ab
    a1 = write(tmp_path / "a1.csv", "ts,x,tag\n1,1,first\n3,3,first\n")
    a2 = write(tmp_path / "a2.csv", "ts,x,tag\n2,2,second\n3,4,second\n")
    rc, out, err = run(capsys, *match_args(f"A={a1}", f"A={a2}", schema=ddl, queries=queries, extra=("-q",)))
    assert rc == 0, err
    got = [(r["ids"]["A"], r["values"]["A.x"], r["values"]["A.tag"]) for r in jsonl(out)]
    assert got == [(0, 1.0, "first"), (1, 2.0, "second"), (2, 3.0, "first"), (3, 4.0, "second")]


@pytest.mark.parametrize("engine", ["local", "spark"])
@pytest.mark.parametrize(
    ("second", "message"),
    [
        ("ts,id,x,tag\n2,7,2,b\n", "id 7"),
        ("ts,x,tag\n2,2,b\n", "give ids in every file of a stream or in none"),
    ],
)
def test_files_of_one_stream_must_agree_on_ids(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, ab, engine: str, second: str, message: str
) -> None:
    # Checked while reading, before any Spark work, so both engines refuse alike.
    ddl, queries = ab
    a1 = write(tmp_path / "a1.csv", "ts,id,x,tag\n1,7,1,a\n")
    a2 = write(tmp_path / "a2.csv", second)
    args = match_args(f"A={a1}", f"A={a2}", schema=ddl, queries=queries, extra=("-q", "--engine", engine))
    rc, out, err = run(capsys, *args)
    assert rc == 2 and out == ""
    assert message in err and a2 in err


def test_out_of_order_tuple_is_late(capsys: pytest.CaptureFixture[str], tmp_path: Path, ab) -> None:
    ddl, queries = ab
    a = write(tmp_path / "a.csv", "ts,x,tag\n1,1,on-time\n5,2,on-time\n3,3,late\n")
    out_path = tmp_path / "out.jsonl"
    # one clock: B, declared but silent, does not hold time back
    extra = ("--output", str(out_path), "--allowed-lateness", "0", "--time", "global")
    rc, _, err = run(capsys, *match_args(f"A={a}", schema=ddl, queries=queries, extra=extra))
    assert rc == 0, err
    assert [r["values"]["A.x"] for r in jsonl(out_path.read_text())] == [1.0, 2.0]
    late_path = tmp_path / "out.jsonl.late.jsonl"
    (late,) = jsonl(late_path.read_text())
    assert (
        late["stream"] == "A" and late["ts"] == 3.0 and late["values"]["x"] == 3.0 and late["values"]["tag"] == "late"
    )
    assert re.search(r"^late:\s+1 -> .*out\.jsonl\.late\.jsonl$", err, re.M)
    assert re.search(r"^results:\s+2 ", err, re.M)


def test_late_file_option_and_default_name_on_stdout(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ab
) -> None:
    ddl, queries = ab
    a = write(tmp_path / "a.csv", "ts,x,tag\n5,2,x\n3,3,x\n")
    late_path = tmp_path / "elsewhere.jsonl"
    extra = ("--late", str(late_path), "--time", "global")
    rc, _, err = run(capsys, *match_args(f"A={a}", schema=ddl, queries=queries, extra=extra))
    assert rc == 0, err
    assert [r["ts"] for r in jsonl(late_path.read_text())] == [3.0]
    assert str(late_path) in err
    monkeypatch.chdir(tmp_path)  # results on stdout: the late file is mqo.late.jsonl here
    rc, _, err = run(capsys, *match_args(f"A={a}", schema=ddl, queries=queries, extra=("--time", "global")))
    assert rc == 0, err
    assert [r["ts"] for r in jsonl((tmp_path / "mqo.late.jsonl").read_text())] == [3.0]


def test_allowed_lateness_matches_the_late_tuple(capsys: pytest.CaptureFixture[str], tmp_path: Path, ab) -> None:
    ddl, queries = ab
    a = write(tmp_path / "a.csv", "ts,x,tag\n1,1,x\n5,2,x\n3,3,x\n")
    out_path = tmp_path / "out.jsonl"
    extra = ("--output", str(out_path), "--allowed-lateness", "2")
    rc, _, err = run(capsys, *match_args(f"A={a}", schema=ddl, queries=queries, extra=extra))
    assert rc == 0, err
    assert [r["values"]["A.x"] for r in jsonl(out_path.read_text())] == [1.0, 2.0, 3.0]
    assert not (tmp_path / "out.jsonl.late.jsonl").exists()
    assert re.search(r"^late:\s+0$", err, re.M)


@pytest.mark.parametrize(("lateness", "expected"), [("0", []), ("10", [3])])
def test_running_example_with_a_late_t_tuple(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lateness: str, expected: list[int]
) -> None:
    """T's tuple at ts 1 comes after one at ts 5: late with lateness 0, matched with H's ts-0 tuple with 10."""
    t = write(tmp_path / "T.csv", "ts,fluct,degree,incr\n5,1,1,1\n1,103,101,98\n")
    out_path = tmp_path / "o.jsonl"
    inputs = [f"B={ICU / 'B.csv'}", f"H={ICU / 'H.csv'}", f"K={ICU / 'K.csv'}", f"T={t}"]
    extra = ("--output", str(out_path), "--allowed-lateness", lateness, "-q")
    rc, _, _ = run(capsys, *match_args(*inputs, extra=extra))
    assert rc == 0
    results = jsonl(out_path.read_text())
    assert [int(r["query"]) for r in results] == expected
    if expected:
        assert results[0] == {"query": "3", "ts": 1.0, "ids": {"T": 1, "H": 0}, "values": {"H.alert": 1}}
        assert not (tmp_path / "o.jsonl.late.jsonl").exists()
    else:
        (late,) = jsonl((tmp_path / "o.jsonl.late.jsonl").read_text())
        assert (late["stream"], late["ts"], late["id"]) == ("T", 1.0, 1)


# ============================================================ bad input

B_HEADER = "ts,pressure,temp,alert\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (B_HEADER + "1,150,101,0\n2,abc,101,0\n", [":3:", "column 'pressure'", "'abc'", "not a number"]),
        (B_HEADER + "1,150,101,0\n2,97,101,1.5\n", [":3:", "column 'alert'", "'1.5'", "not an integer"]),
        (B_HEADER + "1,150,101,0\n2,97,101\n", [":3:", "expected 4 fields", "found 3"]),
        (B_HEADER + "1,150,101,0\n2,97,101,0,7\n", [":3:", "expected 4 fields", "found 5"]),
        (B_HEADER + "1,150,101,0\n,97,101,0\n", [":3:", "column 'ts'", "(empty)"]),
        (B_HEADER + "1,150,101,0\nsoon,97,101,0\n", [":3:", "column 'ts'", "'soon'"]),
        (B_HEADER + "1,150,101,0\n\n2,abc,101,0\n", [":4:", "column 'pressure'"]),  # blank lines count
        ("ts,pressure,temp\n1,150,101\n", [":1:", "lacks", "alert"]),
        ("ts,presure,temp,alert\n1,150,101,0\n", [":1:", "'presure'", "did you mean 'pressure'"]),
        ("time,pressure,temp,alert\n1,150,101,0\n", [":1:", "no 'ts' column"]),
        ("ts,pressure,temp,alert,ts\n1,150,101,0,1\n", [":1:", "'ts'", "twice"]),
        ("", [":1:", "empty"]),
        ("\n", [":1:", "empty"]),
    ],
    ids=[
        "float-type", "int-type", "too-few-fields", "too-many-fields", "empty-ts", "text-ts", "after-blank-line",
        "missing-column", "unknown-column", "no-ts-column", "duplicate-column", "empty-file", "blank-file",
    ],
)  # fmt: skip
def test_bad_csv_exits_2_naming_file_line_and_column(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, expected: list[str]
) -> None:
    path = write(tmp_path / "blood.csv", text)
    rc, out, err = run(capsys, *match_args(f"B={path}", extra=("--output", str(tmp_path / "o.jsonl"))))
    assert rc == 2
    assert path in err
    for fragment in expected:
        assert fragment in err
    assert "Traceback" not in err
    assert out == ""


def test_header_order_case_and_crlf_line_endings(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    b = tmp_path / "B.csv"
    b.write_bytes(b"Alert,pressure,TS,temp\r\n0,150,1,101\r\n1,97,2,100\r\n")
    queries = write(tmp_path / "q.mqo", "SELECT * FROM B WHERE B.pressure < 100;\n")
    rc, out, err = run(capsys, *match_args(f"B={b}", queries=queries, extra=("-q",)))
    assert rc == 0, err
    assert jsonl(out) == [
        {"query": "1", "ts": 2.0, "ids": {"B": 1}, "values": {"B.pressure": 97.0, "B.temp": 100.0, "B.alert": 1}}
    ]
    b.write_bytes(b"ts,pressure,temp,alert\r\n1,150,101,0\r\n2,x,101,0\r\n")
    rc, _, err = run(capsys, *match_args(f"B={b}", queries=queries, extra=("-q",)))
    assert rc == 2 and f"{b}:3: column 'pressure'" in err


def test_progress_bar_on_request(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """With progress, registering and compiling are announced as they happen (a large
    query file takes seconds), then the tuples' bar; without, none of it."""
    rc, _, err = run(capsys, *match_args(*ICU_INPUTS, extra=("--progress", "--output", str(tmp_path / "o.jsonl"))))
    assert rc == 0
    assert "16/16 tuples" in err and "100.0%" in err
    lines = err.splitlines()
    assert lines[0] == f"mqo match: registering the queries of {QUERIES}..."
    assert re.fullmatch(r"mqo match: 3 queries registered in \d+\.\d s; compiling the plan\.\.\.", lines[1])
    assert re.fullmatch(r"mqo match: plan compiled in \d+\.\d s", lines[2])
    assert err.index("plan compiled") < err.index("16/16 tuples")
    rc, _, err = run(capsys, *match_args(*ICU_INPUTS, extra=("--no-progress", "--output", str(tmp_path / "o.jsonl"))))
    assert "tuples/s" not in err and "registering" not in err and "compiling" not in err


def test_csv_with_byte_order_mark(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    b = tmp_path / "B.csv"
    b.write_bytes(b"\xef\xbb\xbfts,pressure,temp,alert\n1,150,101,0\n")
    queries = write(tmp_path / "q.mqo", "SELECT B.pressure FROM B;\n")
    rc, out, err = run(capsys, *match_args(f"B={b}", queries=queries, extra=("-q",)))
    assert rc == 0, err
    assert [r["values"] for r in jsonl(out)] == [{"B.pressure": 150.0}]


def test_duplicate_ids_in_an_input_are_a_bad_row(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    b = write(tmp_path / "B.csv", "ts,id,pressure,temp,alert\n1,5,150,101,0\n2,5,97,101,0\n")
    rc, _, err = run(capsys, *match_args(f"B={b}", extra=("-q", "--output", str(tmp_path / "o.jsonl"))))
    assert rc == 2
    assert f"{b}:3" in err and "id" in err


def test_bad_row_message_format(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path / "b.csv", B_HEADER + "1,150,101,0\n2,97,hot,0\n")
    rc, _, err = run(capsys, *match_args(f"B={path}", extra=("-q",)))
    assert rc == 2
    # (the lines before it warn that queries read streams without input)
    assert err.strip().splitlines()[-1] == f"{path}:3: column 'temp': 'hot' is not a number"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("X={B}", ["--input 'X={B}': the schema declares no stream 'X'"]),
        ("Bx={B}", ["the schema declares no stream 'Bx'", "did you mean 'B'"]),
        ("B={missing}", ["not found", "{missing}"]),
        ("B={dir}", ["directory", "{dir}"]),
        ("B", ["STREAM=FILE"]),
    ],
    ids=["unknown-stream", "did-you-mean", "missing-file", "directory", "no-equals"],
)
def test_bad_input_specs(capsys: pytest.CaptureFixture[str], tmp_path: Path, spec: str, expected: list[str]) -> None:
    paths = {"B": str(ICU / "B.csv"), "missing": str(tmp_path / "nope.csv"), "dir": str(tmp_path)}
    rc, out, err = run(capsys, *match_args(spec.format(**paths), extra=("-q",)))
    assert rc == 2
    for fragment in expected:
        assert fragment.format(**paths) in err
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("which", ["schema", "queries"])
def test_missing_schema_or_query_file(capsys: pytest.CaptureFixture[str], tmp_path: Path, which: str) -> None:
    missing = str(tmp_path / "nope")
    kwargs = {"schema": missing} if which == "schema" else {"queries": missing}
    rc, _, err = run(capsys, *match_args(*ICU_INPUTS, **kwargs))
    assert rc == 2
    assert "not found" in err and missing in err


@pytest.mark.parametrize("which", ["schema", "queries"])
def test_a_schema_or_query_file_that_is_not_utf8_names_its_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, which: str
) -> None:
    given = Path(DDL if which == "schema" else QUERIES).read_bytes()
    bad = tmp_path / "bad"
    bad.write_bytes(b"-- first line\n-- caf\xff\n" + given)
    rc, _, err = run(capsys, *match_args(*ICU_INPUTS, **{which: str(bad)}))
    assert rc == 2 and "Traceback" not in err
    assert f"file {bad}:2: not UTF-8 text (invalid start byte at byte 20)" in err


def test_no_input_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys, *match_args())
    assert rc == 2 and "--input" in err


def test_skip_bad_rows_writes_rejects_and_matches_the_rest(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    b = write(
        tmp_path / "B.csv",
        B_HEADER
        + "1,150,101,0\n"  # line 2: good
        + "2,abc,101,0\n"  # line 3: bad type
        + "3,97,101\n"  # line 4: field count
        + ",97,101,0\n"  # line 5: empty ts
        + "4,35,101,0\n"  # line 6: good
        + "5,100,101,0\n",  # line 7: good
    )
    queries = write(
        tmp_path / "q.mqo",
        "Query ID: hi\nSELECT B.pressure FROM B WHERE B.pressure > 50;\n" + Path(QUERIES).read_text(),
    )
    out_path = tmp_path / "o.jsonl"
    inputs = [f"B={b}", *ICU_INPUTS[1:]]
    extra = ("--output", str(out_path), "--on-bad-row", "skip")
    rc, _, err = run(capsys, *match_args(*inputs, queries=queries, extra=extra))
    assert rc == 0, err
    results = jsonl(out_path.read_text())
    assert [(r["ts"], r["values"]["B.pressure"]) for r in results if r["query"] == "hi"] == [(1.0, 150.0), (5.0, 100.0)]
    assert [r for r in results if r["query"] != "hi"] == [json.loads(EXPECTED_LINE)]  # the rest still matches
    rejects = jsonl((tmp_path / "o.jsonl.rejects.jsonl").read_text())
    assert [(r["file"], r["line"], r["column"]) for r in rejects] == [(b, 3, "pressure"), (b, 4, None), (b, 5, "ts")]
    assert "not a number" in rejects[0]["reason"] and rejects[0]["value"] == "abc"
    assert "fields" in rejects[1]["reason"]
    assert rejects[1]["raw"] == "3,97,101"
    assert re.search(r"^rejected:\s+3 -> .*o\.jsonl\.rejects\.jsonl$", err, re.M)
    assert re.search(r"^tuples:\s+14 \(B: 3, ", err, re.M)  # 3 good B rows + 11 H, K, T rows


def test_skip_with_rejects_option(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    b = write(tmp_path / "B.csv", B_HEADER + "1,x,101,0\n")
    rejects = tmp_path / "bad.jsonl"
    extra = ("--output", str(tmp_path / "o.jsonl"), "--on-bad-row", "skip", "--rejects", str(rejects), "-q")
    rc, _, _ = run(capsys, *match_args(f"B={b}", extra=extra))
    assert rc == 0
    assert [r["line"] for r in jsonl(rejects.read_text())] == [2]


def test_skip_does_not_excuse_a_bad_header(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    b = write(tmp_path / "B.csv", "ts,pressure,temp\n1,2,3\n")
    rc, _, err = run(capsys, *match_args(f"B={b}", extra=("--on-bad-row", "skip", "-q")))
    assert rc == 2 and f"{b}:1:" in err


def test_subprocess_bad_input_exits_2_without_traceback(tmp_path: Path) -> None:
    b = write(tmp_path / "B.csv", B_HEADER + "1,150,101,0\n2,97,lukewarm,0\n")
    proc = subprocess.run(
        [sys.executable, "-m", "runtime.cli", *match_args(f"B={b}", extra=("--output", str(tmp_path / "o.jsonl")))],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"{b}:3: column 'temp'" in proc.stderr


# ============================================================ NULLs


def test_empty_and_nan_fields_are_null_and_never_match(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ddl = write(tmp_path / "s.ddl", "REGISTER STREAM S (x FLOAT, n INTEGER, s STRING, b BOOLEAN);\n")
    queries = write(
        tmp_path / "s.mqo",
        "\n".join(
            [
                "Query ID: x_ne\nSELECT S.x FROM S WHERE S.x != 5;",
                "Query ID: x_lt\nSELECT S.x FROM S WHERE S.x < 100;",
                "Query ID: x_ge\nSELECT S.x FROM S WHERE S.x >= -100;",
                "Query ID: x_not\nSELECT S.x FROM S WHERE NOT (S.x < 100);",
                "Query ID: n_ne\nSELECT S.n FROM S WHERE S.n != 5;",
                "Query ID: s_ne\nSELECT S.s FROM S WHERE S.s != 'zzz';",
                "Query ID: b_eq\nSELECT S.b FROM S WHERE S.b = S.b;",
                "Query ID: tag\nSELECT S.x, S.n, S.s FROM S WHERE S.ts = 9;",
            ]
        ),
    )
    data = write(
        tmp_path / "s.csv",
        "ts,x,n,s,b\n1,,,,\n2,NaN,NULL,NULL,\n3,nan,null,,\n4,1,1,k,true\n9,NaN,,,\n",
    )
    rc, out, err = run(capsys, *match_args(f"S={data}", schema=ddl, queries=queries, extra=("-q",)))
    assert rc == 0, err
    results = jsonl(out)
    assert {r["query"] for r in results if r["ts"] != 9.0} == {"x_ne", "x_lt", "x_ge", "n_ne", "s_ne", "b_eq"}
    assert all(r["ts"] in (4.0, 9.0) for r in results), "a NULL satisfied a comparison"
    (tagged,) = [r for r in results if r["query"] == "tag"]
    assert tagged["values"] == {"S.x": None, "S.n": None, "S.s": None}  # NULL out, never NaN
    assert "NaN" not in out


@pytest.mark.parametrize("spelling", ["", "NaN", "nan", "NULL", "null"])
def test_null_spellings_in_every_column_type(capsys: pytest.CaptureFixture[str], tmp_path: Path, spelling: str) -> None:
    ddl = write(tmp_path / "s.ddl", "REGISTER STREAM S (x FLOAT, n INTEGER, s STRING, b BOOLEAN);\n")
    queries = write(tmp_path / "s.mqo", "SELECT * FROM S;\n")
    data = write(tmp_path / "s.csv", f"ts,x,n,s,b\n1,{spelling},{spelling},{spelling},{spelling}\n2,1.5,2,k,false\n")
    rc, out, err = run(capsys, *match_args(f"S={data}", schema=ddl, queries=queries, extra=("-q",)))
    assert rc == 0, err
    assert [r["values"] for r in jsonl(out)] == [
        {"S.x": None, "S.n": None, "S.s": None, "S.b": None},
        {"S.x": 1.5, "S.n": 2, "S.s": "k", "S.b": False},
    ]


def test_null_join_values_never_match(capsys: pytest.CaptureFixture[str], tmp_path: Path, ab) -> None:
    ddl, _ = ab
    queries = write(tmp_path / "j.mqo", "SELECT * FROM A, B MAXWINDOW 10 WHERE A.x = B.y;\n")
    a = write(tmp_path / "a.csv", "ts,x,tag\n1,,n\n2,NaN,n\n3,7,k\n")
    b = write(tmp_path / "b.csv", "ts,y\n4,\n5,nan\n6,7\n")
    rc, out, err = run(capsys, *match_args(f"A={a}", f"B={b}", schema=ddl, queries=queries, extra=("-q",)))
    assert rc == 0, err
    assert [r["ids"] for r in jsonl(out)] == [{"A": 2, "B": 2}]


# ============================================================ Parquet input

H_ROWS = {
    "ts": [0.0, 1.0, 2.0, 3.0, 4.0],
    "beatrate": [6.0, 1, 7, 2, 8],
    "vib": [98.0, 90, 98, 98, 89],
    "alert": [1] * 5,
}


def test_parquet_inputs_with_and_without_ids(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    t = tmp_path / "T.parquet"
    pq.write_table(pa.table({"ts": [1.0], "id": [42], "fluct": [103.0], "degree": [101.0], "incr": [98.0]}), t)
    h_ids = tmp_path / "H.parquet"
    pq.write_table(pa.table({**H_ROWS, "id": [10, 11, 12, 13, 14]}), h_ids)
    h_auto = tmp_path / "H_auto.parquet"
    pq.write_table(pa.table(H_ROWS), h_auto)
    rest = [f"B={ICU / 'B.csv'}", f"K={ICU / 'K.csv'}"]  # CSV and Parquet inputs mix

    rc, out, err = run(capsys, *match_args(*rest, f"H={h_ids}", f"T={t}", extra=("-q",)))
    assert rc == 0, err
    assert jsonl(out) == [{"query": "3", "ts": 1.0, "ids": {"T": 42, "H": 10}, "values": {"H.alert": 1}}]

    rc, out, err = run(capsys, *match_args(*rest, f"H={h_auto}", f"T={t}", extra=("-q",)))
    assert rc == 0, err
    assert jsonl(out) == [{"query": "3", "ts": 1.0, "ids": {"T": 42, "H": 0}, "values": {"H.alert": 1}}]


def test_parquet_nan_and_null_are_null(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ddl = write(tmp_path / "s.ddl", "REGISTER STREAM S (x FLOAT);\n")
    queries = write(tmp_path / "s.mqo", "SELECT S.x FROM S WHERE S.x != 5;\n")
    p = tmp_path / "s.parquet"
    pq.write_table(pa.table({"ts": [1.0, 2.0, 3.0], "x": pa.array([float("nan"), None, 1.0], pa.float64())}), p)
    rc, out, err = run(capsys, *match_args(f"S={p}", schema=ddl, queries=queries, extra=("-q",)))
    assert rc == 0, err
    assert [r["ts"] for r in jsonl(out)] == [3.0]


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (
            {"ts": [1.0], "fluct": ["abc"], "degree": [101.0], "incr": [98.0]},
            ["column 'fluct'", "string", "FLOAT", "floating-point"],
        ),
        ({"ts": [1.0], "fluct": [[1.0]], "degree": [101.0], "incr": [98.0]}, ["column 'fluct'"]),
        ({"ts": ["soon"], "fluct": [1.0], "degree": [101.0], "incr": [98.0]}, ["column 'ts'"]),
        ({"ts": [1.0], "fluct": [1.0], "degree": [101.0]}, ["lacks", "incr"]),
        ({"ts": [1.0], "flux": [1.0], "degree": [101.0], "incr": [98.0]}, ["'flux'", "did you mean 'fluct'"]),
        ({"ts": [1.0, None], "fluct": [1.0, 2.0], "degree": [1.0, 2.0], "incr": [1.0, 2.0]}, ["row 2", "NULL"]),
    ],
    ids=["string-for-float", "list-for-float", "string-ts", "missing-column", "unknown-column", "null-ts"],
)
def test_bad_parquet_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, table: dict, expected: list[str]
) -> None:
    p = tmp_path / "T.parquet"
    pq.write_table(pa.table(table), p)
    rc, out, err = run(capsys, *match_args(f"T={p}", extra=("-q",)))
    assert rc == 2
    assert str(p) in err
    for fragment in expected:
        assert fragment in err
    assert "Traceback" not in err and out == ""


def test_not_a_parquet_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = write(tmp_path / "T.parquet", "ts,fluct,degree,incr\n1,2,3,4\n")
    rc, _, err = run(capsys, *match_args(f"T={p}", extra=("-q",)))
    assert rc == 2 and p in err and "Parquet" in err


# ============================================================ explain

PREDICATE_LINE = re.compile(r"^\s+(\d+):(\d+)\s+bit (\d+)\s+(.*?)\s+queries (.+)$")
SECTIONS = {"Attribute": "A", "Join": "J", "Window": "W"}


def parse_explain(text: str) -> tuple[dict[str, list[tuple[int, int, str, set[str]]]], dict[str, set[tuple[str, str]]]]:
    """The predicates of each section as (list, position, text, users), and each query's
    (type, "list:pos") references."""
    preds: dict[str, list[tuple[int, int, str, set[str]]]] = {"A": [], "J": [], "W": []}
    bits: dict[str, set[tuple[str, str]]] = {}
    section = None
    query = None
    for line in text.splitlines():
        head = line.split(" ", 1)[0]
        if not line.startswith(" "):
            section = SECTIONS.get(head, "Q" if line.startswith("Queries and their bits") else None)
            continue
        if section in preds and (m := PREDICATE_LINE.match(line)):
            users = set(re.split(r"[,\s]+", m.group(5).strip()))
            preds[section].append((int(m.group(1)), int(m.group(2)), m.group(4).strip(), users))
        elif section == "Q":
            if m := re.match(r"^  (\S+): FROM ", line):
                query = m.group(1)
                bits[query] = set()
            elif query is not None:
                for part in line.strip().split(";"):
                    kind, _, refs = part.strip().partition(" ")
                    bits[query] |= {(kind, ref) for ref in re.findall(r"(\d+:\d+) \(bit \d+\)", refs)}
    return preds, bits


def flip(text: str) -> str:
    """``X op Y`` written the other way round."""
    left, op, right = text.split(" ", 2)
    return f"{right} {({'<': '>', '>': '<', '<=': '>=', '>=': '<=', '=': '='})[op]} {left}"


def test_explain_running_example(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "explain", "--schema", DDL, "--queries", QUERIES)
    assert rc == 0, err
    preds, bits = parse_explain(out)
    attr = {text: (lst, users) for lst, _, text, users in preds["A"]}
    assert set(attr) == {"H.beatrate = 52", "T.fluct = 51.5", "T.fluct = 103"}
    assert attr["H.beatrate = 52"][1] == {"1"}
    assert attr["T.fluct = 51.5"][1] == {"2"}
    assert attr["T.fluct = 103"][1] == {"3"}
    assert attr["T.fluct = 51.5"][0] == attr["T.fluct = 103"][0], "T.fluct = c constants share one list"
    assert attr["H.beatrate = 52"][0] != attr["T.fluct = 103"][0]

    join = {text: (lst, users) for lst, _, text, users in preds["J"]}
    assert join["B.pressure > T.fluct"][1] == {"1"}
    assert join["B.pressure > 2*T.fluct"][1] == {"2"}
    assert join["B.pressure > T.fluct"][0] != join["B.pressure > 2*T.fluct"][0], "different factors, different lists"
    assert len(preds["J"]) == 4 and len({lst for lst, *_ in preds["J"]}) == 4

    window = [text for _, _, text, _ in preds["W"]]
    assert len(window) == 4 and len({lst for lst, *_ in preds["W"]}) == 4
    for wanted in ["T.ts > B.ts", "B.ts > T.ts", "B.ts <= H.ts", "T.ts > H.ts"]:
        assert wanted in window or flip(wanted) in window, wanted

    # each query's bits are exactly the predicates that list it as a user
    assert set(bits) == {"1", "2", "3"}
    for q, refs in bits.items():
        used = {(kind, f"{lst}:{pos}") for kind, ps in preds.items() for lst, pos, _, users in ps if q in users}
        assert refs == used, f"query {q}"
    assert sorted(k for k, _ in bits["1"]) == ["A", "J", "J", "W"]
    assert sorted(k for k, _ in bits["2"]) == ["A", "J", "W", "W"]
    assert sorted(k for k, _ in bits["3"]) == ["A", "J", "W"]


def test_explain_bad_query_points_at_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    queries = write(
        tmp_path / "q.mqo",
        "Query ID: good\nSELECT * FROM B WHERE B.pressure < 90;\n\n"
        "Query ID: bad\nSELECT * FROM B\nWHERE B.presure < 90;\n",
    )
    rc, out, err = run(capsys, "explain", "--schema", DDL, "--queries", queries)
    assert rc == 2
    assert out == ""  # nothing explained, nothing half-registered
    lines = err.splitlines()
    assert lines[0].startswith(f"{queries}:6:7: ")
    assert "presure" in lines[0] and "did you mean 'pressure'" in lines[0] and "query bad" in lines[0]
    source = next(i for i, line in enumerate(lines) if "WHERE B.presure < 90;" in line)
    caret = lines[source + 1]
    assert caret.strip().startswith("^")
    assert caret.index("^") == lines[source].index("B.presure")
    assert "Traceback" not in err


def test_match_with_a_bad_query_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    queries = write(tmp_path / "q.mqo", "SELECT * FROM B, H WHERE B.temp > H.vib;\n")  # no MAXWINDOW
    rc, out, err = run(capsys, *match_args(*ICU_INPUTS, queries=queries))
    assert rc == 2 and out == ""
    assert re.match(rf"{re.escape(queries)}:1:\d+: ", err)
    assert "MAXWINDOW" in err.upper() and "Traceback" not in err
