"""The README's examples run and print what the README says they print."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

README = (REPO / "README.md").read_text()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, re.S)


def block_with(text: str) -> str:
    found = [b for b in python_blocks() if text in b]
    assert len(found) == 1, f"expected one README python block using {text!r}"
    return found[0]


@contextlib.contextmanager
def in_repo():
    before = os.getcwd()
    os.chdir(REPO)
    try:
        yield
    finally:
        os.chdir(before)


def test_python_example_prints_the_documented_match():
    block = block_with('m.push("T"')
    expected = re.search(r"^# (\[Match.*\])$", block, re.M)
    assert expected is not None
    out = io.StringIO()
    with in_repo(), contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    assert out.getvalue().strip() == expected.group(1)


def test_push_batch_example_prints_the_documented_table():
    namespace: dict = {}
    out = io.StringIO()
    with in_repo(), contextlib.redirect_stdout(out):
        exec(compile(block_with('m.push("T"'), "README.md", "exec"), namespace)
        out.seek(0)
        out.truncate()
        exec(compile(block_with("push_batch"), "README.md", "exec"), namespace)
    expected = re.search(r"^# (\[\{.*\])$", block_with("push_batch"), re.M)
    assert expected is not None
    assert out.getvalue().strip() == expected.group(1)


def test_register_table_example_prints_the_documented_lines():
    block = block_with("register_table")
    expected = re.findall(r"^# (.*)$", block, re.M)
    out = io.StringIO()
    with in_repo(), contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {"mqo": __import__("mqo")})
    assert out.getvalue().strip().splitlines() == expected


@pytest.mark.spark
def test_spark_embedding_example_gives_the_running_example_result(spark_session):
    block = block_with("match_batch(")
    namespace: dict = {}
    with in_repo(), contextlib.redirect_stdout(io.StringIO()):
        exec(compile(block, "README.md", "exec"), namespace)
    rows = namespace["results"].collect()
    assert [(r["query"], r["ts"], dict(r["ids"]), r["H.alert"]) for r in rows] == [("3", 1.0, {"T": 0, "H": 0}, 1)]


@pytest.mark.parametrize("marker", ["hr_high", "last3"])
def test_aggregation_examples_print_the_documented_rows(marker: str) -> None:
    block = block_with(f"Query ID: {marker}")
    expected = "\n".join(line[2:] for line in block.splitlines() if line.startswith("# "))
    out = io.StringIO()
    with in_repo(), contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    assert out.getvalue().strip() == expected.strip()


def test_self_join_python_example_prints_the_documented_results():
    block = block_with("B b1, B b2")
    expected = "\n".join(line[2:] for line in block.splitlines() if line.startswith("# "))
    out = io.StringIO()
    with in_repo(), contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    assert out.getvalue().strip() == expected.strip()


def test_ordered_emission_example_prints_the_documented_releases():
    block = block_with('emit="ordered"')
    expected = "\n".join(line[2:] for line in block.splitlines() if line.startswith("# "))
    out = io.StringIO()
    with in_repo(), contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    assert out.getvalue().strip() == expected.strip()


def test_self_join_cli_example_prints_the_documented_lines():
    (block,) = [b for b in re.findall(r"```bash\n(.*?)```", README, re.S) if "pressure_rise.mqo" in b]
    command, _, shown = block.partition("\n{")
    argv = command.replace("\\\n", " ").split()
    assert argv[0] == "mqo"
    done = subprocess.run(
        [sys.executable, "-m", "runtime.cli", *argv[1:]], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == ("{" + shown).strip()
