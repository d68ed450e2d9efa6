"""The README runs as written and prints what it says it prints.

Every ```python block runs on its own (a reader copies one block) in a fresh process,
from a fresh directory in which ``examples/`` is the repository's. Every ```bash or
```sh block runs in order in one shell, from one fresh directory (as a reader runs
them one after the other from a clone). What a block prints is compared with the
output block shown right after it (a plain ``` block), or, in a Python block, with
the ``# `` comment lines that end it (HTML comments may stand between).

A block the test cannot run says so right before it, where a reader sees why:
``<!-- readme-test: skip (reason) -->``; ``<!-- readme-test: spark -->`` runs it
under the ``spark`` marker (the Spark blocks share one process and its Spark, each in a
fresh namespace and directory); ``<!-- readme-test: run-from WORD (reason) -->`` runs the
block from the first command starting with WORD (the Quickstart's line installs first).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

README = (REPO / "README.md").read_text()
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```[ \t]*$", re.M | re.S)
MARK = re.compile(r"<!--\s*readme-test:\s*([\w-]+)\s*(.*?)\s*-->", re.S)
MARKUP = re.compile(r"<!--.*?-->", re.S)  # comments between a block and its output
CODE = {"python", "bash", "sh"}
SHELL = {"bash", "sh"}
KINDS = {"skip", "spark", "run-from"}
END_OF_BLOCK = "@@ end of README block @@"


@dataclass
class Block:
    lang: str
    code: str
    line: int  # of the opening fence in README.md
    mark: str | None = None  # skip, spark or run-from
    argument: str = ""  # the mark's reason, or run-from's word and reason
    expected: str | None = None  # what it prints, as the README shows it

    @property
    def name(self) -> str:
        return f"README.md:{self.line}"


def readme_blocks(text: str = README) -> list[Block]:
    """The code blocks, each with its mark and the output the README shows for it."""
    blocks: list[Block] = []
    previous_end = 0
    last: Block | None = None
    for fence in FENCE.finditer(text):
        gap = text[previous_end : fence.start()]
        previous_end = fence.end()
        lang, body = fence.group(1), fence.group(2)
        line = text.count("\n", 0, fence.start()) + 1
        if lang in CODE:
            marks = MARK.findall(gap)
            assert len(marks) <= 1, f"README.md:{line}: more than one readme-test mark"
            block = Block(lang, body, line)
            if marks:
                kind, argument = marks[0]
                assert kind in KINDS, f"README.md:{line}: unknown readme-test mark {kind!r}"
                assert kind == "spark" or argument.strip(), f"README.md:{line}: say why ({kind})"
                block.mark, block.argument = kind, argument
            blocks.append(block)
            last = block
        elif lang in ("", "text") and last is not None and not MARKUP.sub("", gap).strip() and last.expected is None:
            last.expected = body  # the output shown right after a block
            last = None
        else:
            last = None
    for block in blocks:
        if block.lang == "python" and block.expected is None:
            ending = re.search(r"(?:^# .*\n)+\Z", block.code, re.M)
            if ending is not None:
                block.expected = "".join(line[2:] + "\n" for line in ending.group(0).splitlines())
    return blocks


def runnable(block: Block) -> str:
    """The code to run: all of it, or from the run-from mark's first command."""
    if block.mark != "run-from":
        return block.code
    word = block.argument.split()[0]
    found = re.search(rf"(?:^|&&|;|\|)\s*({re.escape(word)}\s)", block.code, re.M)
    assert found is not None, f"{block.name}: no command starting with {word!r}"
    return block.code[found.start(1) :]


def same_output(got: str, expected: str) -> bool:
    return [line.rstrip() for line in got.strip().splitlines()] == [
        line.rstrip() for line in expected.strip().splitlines()
    ]


def reader_directory(tmp_path: Path) -> dict[str, str]:
    """A fresh directory holding the repository's ``examples/``, and an environment in
    which ``mqo`` and ``import mqo`` are this tree's."""
    (tmp_path / "examples").symlink_to(REPO / "examples")
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "mqo"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m runtime.cli "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


BLOCKS = readme_blocks()
PYTHON = [pytest.param(b, id=b.name) for b in BLOCKS if b.lang == "python" and b.mark not in ("skip", "spark")]
SPARK = [b for b in BLOCKS if b.lang == "python" and b.mark == "spark"]

# The Spark blocks run one after the other in one process, so that one Spark (a JVM, the
# most of such a block's time) serves them all: each block's getOrCreate() finds it.
# Nothing else carries over: each block runs in a fresh namespace, from a fresh
# directory of its own, and between blocks the streaming queries it left are stopped and
# its temporary views dropped. Each block's printed text is written to its directory.
ONE_SPARK = """
import contextlib, io, json, os, sys, traceback
for block in json.load(open(sys.argv[1])):
    os.chdir(block["dir"])
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(block["code"], block["name"], "exec"), {"__name__": "__main__"})
    except BaseException:
        sys.exit(block["name"] + " failed:\\n" + traceback.format_exc())
    with open("printed.txt", "w") as f:
        f.write(printed.getvalue())
    from pyspark.sql import SparkSession
    spark = SparkSession.getActiveSession()
    if spark is not None:
        for query in spark.streams.active:
            query.stop()
        for table in spark.catalog.listTables():
            if table.isTemporary:
                spark.catalog.dropTempView(table.name)
"""


def test_the_readme_has_its_blocks_and_few_exemptions() -> None:
    assert len([b for b in BLOCKS if b.lang == "python"]) >= 8
    assert len([b for b in BLOCKS if b.lang in SHELL]) >= 5
    skipped = [b for b in BLOCKS if b.mark == "skip"]
    assert len(skipped) <= 3, [f"{b.name}: {b.argument}" for b in skipped]
    assert not [b for b in BLOCKS if b.lang in SHELL and b.mark == "spark"], "the shell session runs without Spark"
    # most blocks show what they print, and the test holds them to it
    assert len([b for b in BLOCKS if b.expected is not None and b.mark != "skip"]) >= 10


def test_blocks_and_their_marks_are_found() -> None:
    text = (
        "<!-- readme-test: skip (it installs) -->\n```bash\npip install x\n```\n\n"
        "```python\nprint(1)\n# 1\n```\n\n"
        "```bash\necho hi\n```\n\n```\nhi\n```\n\n"
        "```bash\necho a\n```\nprose\n```\nnot its output\n```\n"
        "<!-- readme-test: run-from mqo (install first) -->\n```bash\npip x && mqo match --q\n```\n"
    )
    skip, python, echo, prose, install = readme_blocks(text)
    assert (skip.mark, skip.argument, skip.line) == ("skip", "(it installs)", 2)
    assert python.expected == "1\n" and echo.expected == "hi\n" and prose.expected is None
    assert runnable(install) == "mqo match --q\n"


@pytest.mark.parametrize("block", PYTHON)
def test_python_block_runs_on_its_own_and_prints_what_the_readme_shows(block: Block, tmp_path: Path) -> None:
    env = reader_directory(tmp_path)
    script = tmp_path / "block.py"
    script.write_text(runnable(block))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{block.name} failed:\n{done.stderr[-3000:]}"
    if block.expected is not None:
        assert same_output(done.stdout, block.expected), f"{block.name} printed:\n{done.stdout}"


@pytest.mark.spark
def test_spark_python_blocks_run_on_their_own_and_print_what_the_readme_shows(tmp_path: Path) -> None:
    """As the other Python blocks, in one process (see ONE_SPARK)."""
    env = reader_directory(tmp_path)
    plan = []
    for block in SPARK:
        folder = tmp_path / block.name.replace(":", "-")
        folder.mkdir()
        (folder / "examples").symlink_to(REPO / "examples")
        plan.append({"name": block.name, "code": runnable(block), "dir": str(folder)})
    (tmp_path / "blocks.json").write_text(json.dumps(plan))
    done = subprocess.run(
        [sys.executable, "-c", ONE_SPARK, str(tmp_path / "blocks.json")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600 * len(SPARK),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for block, step in zip(SPARK, plan, strict=True):
        printed = (Path(step["dir"]) / "printed.txt").read_text()
        if block.expected is not None:
            assert same_output(printed, block.expected), f"{block.name} printed:\n{printed}"


def test_shell_blocks_run_in_order_and_print_what_the_readme_shows(tmp_path: Path) -> None:
    shell = [b for b in BLOCKS if b.lang in SHELL and b.mark != "skip"]
    env = reader_directory(tmp_path)
    parts = ["set -e"]
    for block in shell:
        parts += [f"# {block.name}", runnable(block), f"echo '{END_OF_BLOCK}'"]
    parts.append("wait  # a background job (the mqo serve session) has ended cleanly")
    done = subprocess.run(
        ["bash", "-c", "\n".join(parts)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    outputs = done.stdout.split(END_OF_BLOCK + "\n")
    ran = len(outputs) - 1
    assert done.returncode == 0 and ran == len(shell), (
        f"{shell[min(ran, len(shell) - 1)].name} failed (status {done.returncode}):\n{done.stderr[-3000:]}"
    )
    for block, printed in zip(shell, outputs, strict=False):
        if block.expected is not None:
            assert same_output(printed, block.expected), f"{block.name} printed:\n{printed}"
