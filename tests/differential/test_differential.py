"""Differential tests: the engine (``mqo.Matcher``) against the reference (tests/references/naive.py).

Random workloads (tests/references/strategies.py) are replayed on both, operation by operation; the
results of every push must be equal as multisets, heartbeats must report nothing, and the
late counts must agree after every operation. A failure prints the workload and a script
that replays it (``Workload.script``).
"""

from __future__ import annotations

import math
from collections import Counter
from functools import partial

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import mqo
from predicates import parse_queries
from tests.conftest import WORKLOADS
from tests.references.naive import ReferenceMatcher
from tests.references.strategies import (
    ORDERS,
    Heartbeat,
    Push,
    Register,
    Unregister,
    Workload,
    fixed_query_workloads,
    workloads,
)

# these tests push sparse tuples: a column left out is NULL
sparse_matcher = partial(mqo.Matcher, missing="null", time="global")  # tests/references/naive.py keeps one clock

pytestmark = [
    pytest.mark.filterwarnings("ignore:late tuple:UserWarning"),  # late tuples are expected here
]

SETTINGS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
}


def canonical_value(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return "NaN (should be NULL)"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return value


def canonical(query: object, ts: object, ids: dict, values: dict) -> tuple:
    """A hashable form of one result, numbers as floats."""
    return (
        str(query),
        float(ts),
        tuple(sorted((str(a), i) for a, i in ids.items())),
        tuple(sorted((str(k), canonical_value(v)) for k, v in values.items())),
    )


def engine_results(matches) -> Counter:
    return Counter(canonical(m.query, m.ts, m.ids, m.values) for m in matches)


def reference_results(results: list[dict]) -> Counter:
    return Counter(canonical(r["query"], r["ts"], r["ids"], r["values"]) for r in results)


def describe(diff: Counter) -> str:
    return "\n".join(f"    {n} x {item}" for item, n in sorted(diff.items(), key=repr)) or "    (none)"


def replay(workload: Workload, order: str) -> None:
    """Run ``workload`` on the engine and the reference and fail at the first difference."""
    note(f"replay script:\n{workload.script(order)}")
    ref = ReferenceMatcher(workload.ddl, allowed_lateness=workload.lateness)
    # check=True: every index structure checks its invariants after every change
    eng = sparse_matcher(workload.ddl, allowed_lateness=workload.lateness, order=order, check=True)
    for step, op in enumerate(workload.ops):
        where = f"step {step} ({op!r}), order {order}"
        if isinstance(op, Register):
            text, qid = op.call_args()
            assert eng.register_query(text, qid) == ref.register_query(text, qid), where
        elif isinstance(op, Unregister):
            eng.unregister_query(op.query_id)
            ref.unregister_query(op.query_id)
        elif isinstance(op, Heartbeat):
            got = eng.heartbeat(op.ts)
            ref.heartbeat(op.ts)
            assert not got, f"{where}: a heartbeat reported results: {got!r}"
        else:
            assert isinstance(op, Push)
            got = engine_results(eng.push(op.stream, op.ts, values=dict(op.values), id=op.id))
            want = reference_results(ref.push(op.stream, op.ts, values=dict(op.values), id=op.id))
            if got != want:
                pytest.fail(
                    f"{where}: results differ\n  missing (reference only):\n{describe(want - got)}"
                    f"\n  extra (engine only):\n{describe(got - want)}",
                    pytrace=False,
                )
        assert eng.late_count == len(ref.late), f"{where}: late count {eng.late_count} != {len(ref.late)}"


@pytest.mark.parametrize("order", ORDERS)
@settings(max_examples=60, **SETTINGS)
@given(workload=workloads())
def test_engine_matches_reference(order: str, workload: Workload) -> None:
    replay(workload, order)


ORDER_SPELLINGS = ORDERS + tuple(f"static:{o}" for o in ORDERS)


@settings(max_examples=100, **SETTINGS)
@given(workload=workloads(lateness=st.just(0.0)), order=st.sampled_from(ORDER_SPELLINGS))
def test_engine_matches_reference_in_order(workload: Workload, order: str) -> None:
    """Lateness 0: tuples out of order are late and every tuple counts toward the horizon."""
    replay(workload, order)


@settings(max_examples=100, **SETTINGS)
@given(workload=workloads(lateness=st.sampled_from((1.0, 2.0, 3.5))), order=st.sampled_from(ORDER_SPELLINGS))
def test_engine_matches_reference_out_of_order(workload: Workload, order: str) -> None:
    """Positive lateness: out-of-order tuples within the bound give timestamp-order results."""
    replay(workload, order)


@settings(max_examples=100, **SETTINGS)
@given(
    workload=workloads(max_queries=10, lateness=st.sampled_from((0.0, 0.0, 1.0, 2.5)), churn=True),
    order=st.sampled_from(ORDERS),
)
def test_engine_matches_reference_under_registration_churn(workload: Workload, order: str) -> None:
    """Queries without conditions come and go mid-stream: every combination within the
    window is a result, so what a query may still see (the retention horizon) is exposed."""
    replay(workload, order)


def _thesis_workload(name: str) -> tuple[str, list[str]]:
    """The DDL and the query texts of a thesis workload in experiments/workloads."""
    ddl = (WORKLOADS / ("fig5_1.ddl" if name.startswith("fig5_1_") else "streams.ddl")).read_text()
    text = (WORKLOADS / name).read_text()
    return ddl, [text[q.span.start : q.span.end] for q in parse_queries(text, name)]


@pytest.mark.parametrize("name", sorted(p.name for p in WORKLOADS.glob("*.mqo")))
@settings(max_examples=30, **SETTINGS)
@given(data=st.data())
def test_engine_matches_reference_on_thesis_workloads(name: str, data) -> None:
    ddl, texts = _thesis_workload(name)
    workload = data.draw(fixed_query_workloads(ddl, texts), label="workload")
    replay(workload, data.draw(st.sampled_from(ORDERS), label="order"))


@settings(max_examples=100, **SETTINGS)
@given(workload=workloads(max_tuples=60))
def test_adaptive_order_matches_reference(workload: Workload) -> None:
    """The adaptive reorderer may change the order mid-stream; results must not change."""
    replay(workload, "adaptive")


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(workload=workloads(max_tuples=150, max_queries=12), order=st.sampled_from(ORDERS))
def test_engine_matches_reference_large(workload: Workload, order: str) -> None:
    replay(workload, order)
