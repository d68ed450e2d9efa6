"""Running the real ``mqo`` command in a subprocess, and reading what it wrote strictly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

COMMAND = [sys.executable, "-m", "runtime.cli"]


def mqo(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``mqo ARGS`` as a separate process; its status, stdout and stderr."""
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_lines(text: str) -> list[dict[str, Any]]:
    """Every line of a JSON-lines text read by a strict parser (no NaN, no Infinity),
    and the text ends with a newline (no cut line)."""
    assert text == "" or text.endswith("\n"), "the last line is cut"
    return [json.loads(line, parse_constant=_no_constant) for line in text.splitlines()]


def match(*args: str, schema: str, queries: str, inputs: list[str], cwd: Path | None = None):
    spec = [a for s in inputs for a in ("--input", s)]
    return mqo("match", "--schema", schema, "--queries", queries, *spec, *args, cwd=cwd)
