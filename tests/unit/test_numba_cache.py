"""An unwritable numba cache does not break ``import`` (indexes/numba_config.py).

The kernels are copied into a temporary tree whose ``__pycache__`` is a plain file,
with the user's cache directory under a plain file too, so numba finds no place to
cache; the copy is imported in a separate process (as root, permissions would not
stop a write, so files stand in the way instead)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

CALL_A_KERNEL = """
import numpy as np
import indexes.kernels as k
cand = np.array([[0, 64 | 1]], np.uint64)
mask = np.array([0, 64], np.uint64)
assert k.__file__.startswith({tree!r}), k.__file__
print(k.count_bits(cand, mask).tolist())
"""


def run_copy(tmp_path: Path, tmpdir: Path) -> subprocess.CompletedProcess[str]:
    tree = tmp_path / "tree"
    shutil.copytree(REPO / "indexes", tree / "indexes", ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "indexes" / "__pycache__").write_text("in the way")
    blocker = tmp_path / "blocker"
    blocker.write_text("in the way")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(tree), str(REPO)]),
        PYTHONDONTWRITEBYTECODE="1",
        XDG_CACHE_HOME=str(blocker),
        HOME=str(blocker),
        TMPDIR=str(tmpdir),
    )
    code = CALL_A_KERNEL.format(tree=str(tree))
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path
    )


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="needs the JIT")
def test_kernels_are_cached_in_a_per_user_temporary_directory(tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = run_copy(tmp_path, tmpdir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[1]"
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "kernels are cached in" in warnings[0] and str(tmpdir) in warnings[0]
    assert any(tmpdir.rglob("*.nbi")), "nothing was cached in the fallback directory"


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="needs the JIT")
def test_kernels_compile_without_a_cache_when_nothing_is_writable(tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    uid = os.getuid() if hasattr(os, "getuid") else 0
    (tmpdir / f"mqo-numba-cache-{uid}").write_text("in the way")
    proc = run_copy(tmp_path, tmpdir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[1]"
    assert "Traceback" not in proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "compiled without a cache" in warnings[0]


LAZY = """
import sys
import numpy as np
import mqo
assert "numba" not in sys.modules, "import mqo imported numba"
m = mqo.Matcher("REGISTER STREAM E (a FLOAT);")
m.register_query("SELECT * FROM E WHERE E.a > 1")
print("numba" in sys.modules)
print(len(m.push("E", 0.0, {"a": 2.0})), "numba" in sys.modules)
print(len(m.push_batch("E", {"ts": np.array([1.0, 2.0]), "a": np.array([0.0, 5.0])})), "numba" in sys.modules)
"""


def test_import_leaves_numba_for_first_use() -> None:
    """``import mqo``, making a matcher and registering queries do not import numba:
    the kernels load when the first tuple (a batch of one) needs them."""
    done = subprocess.run([sys.executable, "-c", LAZY], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "1", "True", "1", "True"]
