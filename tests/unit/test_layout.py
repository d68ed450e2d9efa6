"""The code's layout rules (docs/ARCHITECTURE.md, Layers), read from the source.

Imports point down the layers only; the runtime and the experiments use the engine
through the public packages (``mqo``, ``predicates``), but for the documented
exceptions; no two modules import each other, directly or round a cycle (imports
inside functions count: they are deferred, not gone); and no module of the product is
over 600 lines. Imports under ``if TYPE_CHECKING:`` are for type hints only and are
left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("predicates", "indexes", "mqo", "runtime", "experiments")  # each may import those before it
PUBLIC = {"mqo", "predicates"}
# modules that measure the compiled plan's own lists (docs/ARCHITECTURE.md)
INSIDE_ALLOWED = {
    ("runtime.local.profile", "mqo.plan"),
    ("runtime.local.profile", "mqo.rows"),
    ("experiments.costmodel", "mqo.plan"),
}
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for layer in LAYERS for p in sorted((ROOT / layer).rglob("*.py"))}


def _imported(path: Path) -> set[str]:
    """Every absolute import of the file, outside ``if TYPE_CHECKING:`` blocks: the
    modules named, and ``module.name`` for each name imported from one."""
    found: set[str] = set()

    class Imports(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            test = node.test
            if getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING":
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            found.update(alias.name for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level == 0 and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)

    Imports().visit(ast.parse(path.read_text(), str(path)))
    return found


GRAPH = {name: {m for m in _imported(path) if m in MODULES and m != name} for name, path in MODULES.items()}


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def test_the_layout_is_read() -> None:
    assert {"mqo.matcher", "predicates.entry", "indexes.kernels", "runtime.cli", "experiments.bench"} <= set(GRAPH)
    assert "mqo.pipeline" in GRAPH["mqo.matcher"] and "predicates" in GRAPH["mqo.registrations"]


def test_imports_point_down_the_layers() -> None:
    up = sorted((m, d) for m, deps in GRAPH.items() for d in deps if _layer(d) > _layer(m))
    assert up == []


def test_runtime_and_experiments_use_the_public_api() -> None:
    inside = {
        (m, d)
        for m, deps in GRAPH.items()
        if _layer(m) >= LAYERS.index("runtime")
        for d in deps
        if _layer(d) < LAYERS.index("runtime") and d not in PUBLIC
    }
    assert sorted(inside - INSIDE_ALLOWED) == []


def test_no_import_cycle() -> None:
    """Tarjan's strongly connected components of the import graph: all of one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert cycles == []


@pytest.mark.parametrize("layer", ["predicates", "indexes", "mqo", "runtime"])
def test_no_module_over_600_lines(layer: str) -> None:
    long = {
        name: n
        for name, path in MODULES.items()
        if name.split(".")[0] == layer and (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_every_module_has_its_line_in_the_architecture() -> None:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    missing = [
        name
        for name, path in MODULES.items()
        if name.split(".")[0] in ("predicates", "indexes", "mqo", "runtime")
        and path.name != "__init__.py"
        and path.name not in text
    ]
    assert missing == []


# runtime/ by job: files in and out, the local engine, the local engine as an HTTP
# service, the Spark stages; the command line and what every command shares at the top.
# A job imports the ones before it only.
RUNTIME_JOBS = ("runtime.io", "runtime.local", "runtime.http", "runtime.spark")
RUNTIME_TOP = {"runtime", "runtime.cli", "runtime.workload", "runtime.stopping"}


def _job(module: str) -> str | None:
    return next((job for job in RUNTIME_JOBS if module == job or module.startswith(job + ".")), None)


def test_runtime_is_laid_out_by_job() -> None:
    runtime = [m for m in MODULES if m.split(".")[0] == "runtime"]
    assert sorted(m for m in runtime if m not in RUNTIME_TOP and _job(m) is None) == []
    across = sorted(
        (m, d)
        for m in runtime
        for d in GRAPH[m]
        if _job(m) is not None and _job(d) is not None and RUNTIME_JOBS.index(_job(d)) > RUNTIME_JOBS.index(_job(m))
    )
    assert across == []  # io reads and writes for both engines; the local engine never loads Spark


def test_no_private_name_is_imported_from_another_module() -> None:
    """A name with a leading underscore is its module's own: another module that needs
    it needs a public name (or the code moved to where it is used)."""
    private = sorted(
        f"{name} imports {imported}"
        for name, path in MODULES.items()
        for imported in _imported(path)
        if imported not in MODULES
        and (home := imported.rpartition(".")[0]) in MODULES
        and home != name
        and imported.rpartition(".")[2].startswith("_")
        and not imported.rpartition(".")[2].startswith("__")
    )
    assert private == []
