"""Benchmark (g): start-up, what a newcomer meets first.

The README's demo command (``mqo match`` on the thesis' running example) as a whole
process, with an empty numba cache (the first run after installing: the kernels are
compiled) and with the cache that run left (every later run); and ``mqo --help``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from experiments._common import compile_bytecode, forget_bytecode, row

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "icu"
DEMO = [
    "match",
    "--schema",
    str(EXAMPLE / "streams.ddl"),
    "--queries",
    str(EXAMPLE / "running_example.mqo"),
    *(arg for s in "BHKT" for arg in ("--input", f"{s}={EXAMPLE / f'{s}.csv'}")),
]


def _mqo() -> list[str]:
    found = shutil.which("mqo", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "runtime.cli"]


def _timed(args: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(args, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t0


def bench_startup(repeats: int = 3) -> list[dict[str, Any]]:
    """Cold and warm demo runs and ``mqo --help`` (best of ``repeats`` for the warm
    ones; the cold run once per fresh cache, the median of ``repeats``)."""
    mqo = _mqo()
    cold, warm, helps = [], [], []
    with tempfile.TemporaryDirectory(prefix="mqo-startup-") as tmp:
        for k in range(repeats):
            cache = Path(tmp) / f"cache{k}"
            # as on a fresh editable install: no numba cache, no bytecode of the project
            # (the first run writes it, whatever this machine's PYTHONDONTWRITEBYTECODE)
            env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            print(f"[bench] g: demo with an empty numba cache ({k + 1}/{repeats})", file=sys.stderr, flush=True)
            forget_bytecode()
            cold.append(_timed([*mqo, *DEMO], env, Path(tmp)))
            warm.append(_timed([*mqo, *DEMO], env, Path(tmp)))
            helps.append(_timed([*mqo, "--help"], env, Path(tmp)))
    compile_bytecode()  # (the runs above wrote it too; this makes sure of every module)
    cold_s = sorted(cold)[len(cold) // 2]
    return [
        row("g", "README demo, empty numba cache (first run after install), seconds", cold_s,
            target="<= 3 s", met=cold_s <= 3.0, note=f"median of {repeats}; whole process, kernels and the project's bytecode compiled"),
        row("g", "README demo, numba cache warm, seconds", min(warm), note=f"best of {repeats}"),
        row("g", "mqo --help, seconds", min(helps), target="<= 0.3 s", met=min(helps) <= 0.3,
            note=f"best of {repeats}"),
    ]  # fmt: skip
