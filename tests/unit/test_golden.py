"""Golden fixtures: query files and the normalized form they must give.

Each ``tests/fixtures/golden/<name>.mqo`` is compiled against its schema (``<name>.ddl``
if present, else ``schema.ddl``) and rendered; the rendering must equal
``<name>.expected``. The thesis' workloads are read where they live
(experiments/workloads, see tests/conftest.py); their renderings are
``thesis_<name>.expected`` here. After an intended change, regenerate with
``MQO_UPDATE_GOLDEN=1 python -m pytest tests/unit/test_golden.py`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import mqo
from predicates import Catalog, NormalizedQuery, format_constant
from predicates.frontend import compile_queries
from tests.conftest import WORKLOADS, workload_schema

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
UPDATE = os.environ.get("MQO_UPDATE_GOLDEN") == "1"


def schema_for(path: Path) -> Path:
    if path.parent == WORKLOADS:
        return workload_schema(path)
    own = path.with_suffix(".ddl")
    return own if own.exists() else GOLDEN / "schema.ddl"


def expected_for(path: Path) -> Path:
    if path.parent == WORKLOADS:
        return GOLDEN / f"thesis_{path.stem}.expected"
    return path.with_suffix(".expected")


def render(queries: list[NormalizedQuery]) -> str:
    lines = []
    for nq in queries:
        streams = ", ".join(
            (a if a == s else f"{s} AS {a}") + (f" (role {r})" if r != s else "")
            for (a, s), r in zip(nq.aliases, nq.bound.roles, strict=True)
        )
        window = f" MAXWINDOW {format_constant(nq.bound.maxwindow)}" if nq.bound.maxwindow is not None else ""
        lines.append(f"query {nq.name}: FROM {streams}{window}")
        lines.append("  select: " + ", ".join(o.name for o in nq.outputs))
        if not nq.disjuncts:
            lines.append("  never matches")
        for i, conj in enumerate(nq.disjuncts, start=1):
            lines.append(f"  disjunct {i}:")
            for p in sorted(conj.predicates, key=lambda p: (p.kind.value, p.describe())):
                lines.append(f"    {p.kind.value:<9} {p.describe():<32} list: {p.key.describe()}")
            for r in conj.residuals:
                lines.append(f"    residual  {r.text}")
            if not conj.predicates and not conj.residuals:
                lines.append("    (no condition)")
    return "\n".join(lines) + "\n"


CASES = sorted(GOLDEN.glob("*.mqo")) + sorted(WORKLOADS.glob("*.mqo"))


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_golden_normalization(path: Path):
    catalog = Catalog.from_ddl(schema_for(path).read_text())
    got = render(compile_queries(path.read_text(), catalog, source_name=path.name))
    expected_path = expected_for(path)
    if UPDATE or not expected_path.exists():
        expected_path.write_text(got)
        if not UPDATE:
            pytest.fail(f"{expected_path.name} did not exist; written now, review it")
    assert got == expected_path.read_text()


def test_golden_explain_of_the_running_example():
    matcher = mqo.Matcher((WORKLOADS / "streams.ddl").read_text())
    matcher.register_queries((WORKLOADS / "fig3_3_running_example.mqo").read_text())
    got = matcher.explain() + "\n"
    expected_path = GOLDEN / "explain_running_example.txt"
    if UPDATE or not expected_path.exists():
        expected_path.write_text(got)
        if not UPDATE:
            pytest.fail("explain_running_example.txt did not exist; written now, review it")
    assert got == expected_path.read_text()
