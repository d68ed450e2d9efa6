"""Dependencies as users need them: the local engine runs on the core dependencies
alone, every declared dependency is used, and a missing extra is named with the
command that installs it."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib

import pytest

from tests.conftest import EXAMPLES, REPO

# Import names of the distributions pyproject.toml declares (where they differ).
IMPORT_NAME = {"pytest-timeout": "pytest_timeout", "pytest-xdist": "xdist"}
# Tools run as commands or pytest plugins, never imported by the project's code.
TOOLS = {"pytest", "pytest-timeout", "pytest-xdist", "ruff", "coverage", "hypothesis", "mypy"}


def _declared() -> dict[str, list[str]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    groups = {"core": project["dependencies"], **project["optional-dependencies"]}
    names: dict[str, list[str]] = {}
    for group, specs in groups.items():
        for spec in specs:
            name = spec.split(";")[0].split("[")[0]
            for stop in "<>=!~ ":
                name = name.split(stop)[0]
            if name != "mqo":
                names.setdefault(group, []).append(name)
    return names


def _imported_top_names() -> set[str]:
    found: set[str] = set()
    for folder in ("mqo", "predicates", "indexes", "runtime", "experiments", "tests"):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    found.update(alias.name.partition(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    found.add(node.module.partition(".")[0])
    return found


def test_every_declared_dependency_is_imported() -> None:
    imported = _imported_top_names()
    # pytest.importorskip("duckdb") and similar imports by string count as imports too
    strings = " ".join(p.read_text(encoding="utf-8") for p in (REPO / "tests").rglob("*.py"))
    unused = [
        name
        for names in _declared().values()
        for name in names
        if name not in TOOLS
        and IMPORT_NAME.get(name, name).replace("-", "_") not in imported
        and f'"{name}"' not in strings
    ]
    assert unused == []


def test_core_dependencies_exclude_spark_plots_and_sql() -> None:
    core = set(_declared()["core"])
    assert core.isdisjoint({"pyspark", "pandas", "matplotlib", "duckdb"})


def test_local_match_imports_no_extra() -> None:
    """The README's local demo, run in a fresh interpreter, never imports an extra:
    it works after ``pip install mqo`` alone."""
    script = f"""
import sys
from runtime.cli import main
ex = {str(EXAMPLES / "icu")!r}
status = main(["match", "--schema", ex + "/streams.ddl", "--queries", ex + "/running_example.mqo",
               "--input", "B=" + ex + "/B.csv", "--input", "H=" + ex + "/H.csv",
               "--input", "K=" + ex + "/K.csv", "--input", "T=" + ex + "/T.csv", "--quiet"])
extras = sorted(m for m in ("pyspark", "pandas", "matplotlib", "duckdb") if m in sys.modules)
print("status", status, "extras", extras)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "status 0 extras []"
    assert '"query":"3"' in done.stdout


def test_a_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from runtime.workload import CliError, require

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real(name, *a))
    with pytest.raises(
        CliError, match=r"--engine spark needs pyspark, which is not installed: pip install 'mqo\[spark\]'"
    ):
        require(["pyspark", "numpy"], "--engine spark")
    require(["numpy"], "anything")  # installed: no error
