"""The NAME=FILE options through the real ``mqo`` command (:mod:`runtime.io.named_paths`):
``match --input``, ``--table`` and ``--output-view``, ``profile --input`` and ``serve
--input``. Each bad value is refused with status 2, a one-line message naming the
option and the value as given, and no traceback; nothing runs and nothing is written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli.clirun import match, mqo, strict_lines, write

DDL = "REGISTER STREAM B (pressure FLOAT); REGISTER STREAM H (beatrate INTEGER);\n"
QUERIES = """CREATE TABLE patients (id INTEGER, ward STRING) KEY (id);

CREATE VIEW pairs AS SELECT B.pressure AS pressure, H.beatrate AS rate
FROM B, H MAXWINDOW 5 sec WHERE B.pressure > 100;

Query ID: q
SELECT * FROM H, patients P WHERE H.beatrate = P.id;
"""


def files(tmp_path: Path) -> dict[str, str]:
    return {
        "schema": write(tmp_path / "s.ddl", DDL),
        "queries": write(tmp_path / "q.mqo", QUERIES),
        "b": write(tmp_path / "b.csv", "ts,pressure\n1,120\n"),
        "h": write(tmp_path / "h.csv", "ts,beatrate\n2,7\n"),
        "p": write(tmp_path / "p.csv", "id,ward\n7,ICU\n"),
        "out": str(tmp_path / "out.jsonl"),
    }


def refused(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 2, done.stderr
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert "warning" not in done.stderr  # refused before the run looks at the workload


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--input", "B", "--input 'B': no '='; give STREAM=FILE (for example B=blood.csv)"),
        ("--input", " = {b}", "--input ' = {b}': no stream before '='; give STREAM=FILE"),
        ("--input", "B= ", "--input 'B= ': no file after '='; give STREAM=FILE"),
        (
            "--input",
            "Bx={b}",
            "--input 'Bx={b}': the schema declares no stream 'Bx' (did you mean 'B'?) (streams: B, H",
        ),
        ("--table", "patients", "--table 'patients': no '='; give TABLE=FILE (for example patients=patients.csv)"),
        ("--table", "={p}", "--table '={p}': no table before '='"),
        ("--table", "patients=", "--table 'patients=': no file after '='"),
        ("--table", "patient={p}", "--table 'patient={p}': the query file declares no table 'patient'"),
        ("--output-view", "pairs", "--output-view 'pairs': no '='; give VIEW=FILE (for example pairs=pairs.jsonl)"),
        ("--output-view", "=v.jsonl", "--output-view '=v.jsonl': no view before '='"),
        ("--output-view", "pairs=", "--output-view 'pairs=': no file after '='"),
        ("--output-view", "pair=v.jsonl", "--output-view 'pair=v.jsonl': the query file declares no view 'pair'"),
    ],
)
def test_match_refuses_a_bad_value(tmp_path: Path, option: str, value: str, message: str) -> None:
    paths = files(tmp_path)
    inputs = [f"B={paths['b']}", f"H={paths['h']}"]
    if option == "--input":
        inputs = [value.format(**paths), f"H={paths['h']}"]
        extra: tuple[str, ...] = ("--table", f"patients={paths['p']}")
    else:
        extra = (option, value.format(**paths))
        if option != "--table":
            extra += ("--table", f"patients={paths['p']}")
    done = match(*extra, "--output", paths["out"], schema=paths["schema"], queries=paths["queries"], inputs=inputs)
    refused(done, "mqo match: error: " + message.format(**paths))
    assert not Path(paths["out"]).exists()


def test_every_name_is_checked_before_a_file_is_read(tmp_path: Path) -> None:
    paths = files(tmp_path)
    missing = str(tmp_path / "missing.csv")
    done = match(schema=paths["schema"], queries=paths["queries"], inputs=[f"B={missing}", f"X={paths['h']}"])
    refused(done, f"--input 'X={paths['h']}': the schema declares no stream 'X'")
    assert "not found" not in done.stderr
    # the form of every option is read before the queries are: a missing query file is not reached
    done = match("--output-view", "pairs", schema=paths["schema"], queries=str(tmp_path / "none.mqo"), inputs=[])
    refused(done, "give at least one --input")
    done = match("--table", "patients", schema=paths["schema"], queries=str(tmp_path / "none.mqo"), inputs=["B=x"])
    refused(done, "--table 'patients': no '='")


def test_one_file_per_view_but_several_per_stream_and_table(tmp_path: Path) -> None:
    paths = files(tmp_path)
    view = ("--output-view", f"pairs={tmp_path / 'a.jsonl'}", "--output-view", f"PAIRS={tmp_path / 'b.jsonl'}")
    done = match(*view, schema=paths["schema"], queries=paths["queries"], inputs=[f"B={paths['b']}"])
    refused(done, f"--output-view 'PAIRS={tmp_path / 'b.jsonl'}': view PAIRS is given twice (first as 'pairs=")
    # a stream's files and a table's are several: kept in the order given, with spaces around name and path dropped
    h2 = write(tmp_path / "h2.csv", "ts,beatrate\n3,8\n")
    p2 = write(tmp_path / "p2.csv", "id,ward\n8,GEN\n")
    done = match(
        "--table",
        f" patients = {paths['p']} ",
        "--table",
        f"PATIENTS={p2}",
        "--output",
        paths["out"],
        schema=paths["schema"],
        queries=paths["queries"],
        inputs=[f"B={paths['b']}", f"H={paths['h']}", f" h = {h2}"],
    )
    assert done.returncode == 0, done.stderr
    # h= and H= are one stream: one count of automatic ids (the second file's row is H 1, not H 0 again)
    got = [(r["ids"]["H"], r["values"]["P.ward"]) for r in strict_lines(Path(paths["out"]).read_text())]
    assert got == [(0, "ICU"), (1, "GEN")]


def test_profile_refuses_a_bad_input(tmp_path: Path) -> None:
    paths = files(tmp_path)
    common = ["profile", "--schema", paths["schema"], "--queries", paths["queries"], "--out", str(tmp_path / "p")]
    done = mqo(*common, "--input", "B")
    refused(done, "mqo profile: error: --input 'B': no '='; give STREAM=FILE (for example B=blood.csv)")
    done = mqo(*common, "--input", f"Hx={paths['h']}")
    refused(done, f"mqo profile: error: --input 'Hx={paths['h']}': the schema declares no stream 'Hx'")
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["B"], "--input 'B': no '='; give STREAM=DIR (for example B=incoming/B)"),
        (["=in/B"], "--input '=in/B': no stream before '='"),
        (["B= "], "--input 'B= ': no directory after '='"),
        (["B=in/B", "b=in/b"], "--input 'b=in/b': stream b is given twice (first as 'B=in/B'); give one --input per"),
    ],
)
def test_serve_refuses_a_bad_input(tmp_path: Path, values: list[str], message: str) -> None:
    paths = files(tmp_path)
    (tmp_path / "queries").mkdir()
    options = [a for v in values for a in ("--input", v)]
    done = mqo(
        "serve",
        "--schema",
        paths["schema"],
        "--queries",
        str(tmp_path / "queries"),
        "--output",
        str(tmp_path / "out"),
        "--checkpoint",
        str(tmp_path / "ck"),
        "--once",
        *options,
        cwd=tmp_path,
    )
    refused(done, "mqo serve: error: " + message)
    assert not (tmp_path / "out").exists() and not (tmp_path / "ck").exists()
