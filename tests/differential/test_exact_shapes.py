"""The engine against the exact reference on the shapes of workload that hunt the matcher's
own logic rather than its arithmetic: deep AND/OR/NOT conditions (DNF), every spelling
of the six static orders, empty strings (not NULL), lateness 0 (every tuple out of
order is late) against positive lateness, queries that come and go mid-stream without
conditions (so every assignment within MAXWINDOW is a result and the retention horizon
shows), SELECT arithmetic, and an adaptive order that changes all the time.

Workloads come from tests/references/exact_workloads.py (witness-built boundaries,
non-dyadic factors, NULLs, ties, strings, self-joins, residuals, late tuples);
runners and comparison from test_exact_differential.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.differential.test_exact_differential import ORDERS, SETTINGS, matcher, record, run_push
from tests.references.exact_workloads import Workload, workloads

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")  # late tuples are expected

ORDER_SPELLINGS = ORDERS + tuple(f"static:{o}" for o in ORDERS)


@settings(max_examples=200, **SETTINGS)
@given(workload=workloads(lateness="0", empty_strings=True), order=st.sampled_from(ORDER_SPELLINGS))
def test_in_order_every_order_spelling(workload: Workload, order: str) -> None:
    """Lateness 0: a tuple older than the newest is late, every tuple moves the horizon."""
    record(workload)
    run_push(workload, matcher(order=order))


@pytest.mark.parametrize("lateness", ["0.3", "1.5"])
@settings(max_examples=100, **SETTINGS)
@given(data=st.data(), order=st.sampled_from(ORDER_SPELLINGS))
def test_out_of_order_every_order_spelling(lateness: str, data: Any, order: str) -> None:
    """Positive lateness: tuples out of order within the bound give timestamp-order results."""
    workload = data.draw(workloads(lateness=lateness, empty_strings=True), label="workload")
    record(workload)
    run_push(workload, matcher(order=order))


@settings(max_examples=150, **SETTINGS)
@given(workload=workloads(max_queries=8, bare=70, heavy_churn=True), order=st.sampled_from((*ORDERS, "adaptive")))
def test_registration_churn(workload: Workload, order: str) -> None:
    """Queries without conditions registered and removed mid-stream: a query registered
    now sees only what the horizon kept, a removed one reports nothing more."""
    record(workload)
    run_push(workload, matcher(order=order))


@settings(max_examples=80, **SETTINGS)
@given(
    workload=workloads(select_expressions=True, empty_strings=True), order=st.sampled_from(("AJW", "JWA", "adaptive"))
)
def test_select_expressions(workload: Workload, order: str) -> None:
    """SELECT lists with arithmetic over one or two aliases, constants, ``expr name``
    without AS (computed in doubles: tests/references/reference.py, rule 8)."""
    record(workload)
    run_push(workload, matcher(order=order))


def restless(eng: Any) -> None:
    """An adaptive policy that explores every other tuple: the order changes all the time."""
    eng.ensure_plan()  # builds the plan, and with it the policy of new registrations
    if eng.policy is not None:
        eng.policy.explore_every = 2
        eng.policy.warmup = 1


@settings(max_examples=150, **SETTINGS)
@given(workload=workloads(max_tuples=40))
def test_changing_orders_mid_stream_changes_no_result(workload: Workload) -> None:
    record(workload)
    run_push(workload, matcher(order="adaptive"), tune=restless)


@settings(max_examples=100, **SETTINGS)
@given(workload=workloads(max_tuples=60, max_queries=6))
def test_adaptive_order_on_longer_streams(workload: Workload) -> None:
    """The adaptive reorderer as configured by default, long enough to explore and switch."""
    record(workload)
    run_push(workload, matcher(order="adaptive"))


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(workload=workloads(max_tuples=60, max_queries=10, bare=40, heavy_churn=True), order=st.sampled_from(ORDERS))
def test_registration_churn_large(workload: Workload, order: str) -> None:
    record(workload)
    run_push(workload, matcher(order=order))
