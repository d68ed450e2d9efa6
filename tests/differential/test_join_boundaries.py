"""The join and window phases at their boundaries, against the exact reference.

Many stored tuples in one index probe (a run of one stream revisiting the others'
times: ties on join values, equal ts, the window's edges, non-dyadic constants, NULLs,
late tuples, queries registered and removed between batches), under every evaluation
order, pushed one by one or in batches, with ``check=True`` (the thesis' QED check of
every reported candidate) or not; the slots of the workload's queries are moved past
the 64-bit word boundaries of the kill tables (built as words by the kernels, read as
Python ints) by filler join queries registered first, which share the workload's join
and window lists but hold on no value the workloads draw.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.differential.test_exact_differential import (
    ORDERS,
    SETTINGS,
    matcher,
    record,
    run_batches,
    run_push,
)
from tests.references.exact_workloads import Workload, workloads

# each holds only past 1e300 (no workload value comes near): the reference need not know them
FILLERS = (
    "SELECT * FROM A, B MAXWINDOW 5 WHERE A.x > B.x + 1e300",
    "SELECT * FROM A, B MAXWINDOW 2.5 WHERE A.x <= B.x - 1e300",
    "SELECT * FROM A, B MAXWINDOW 1 WINDOW A.ts >= B.ts + 1e300",
    "SELECT * FROM A a1, A a2 MAXWINDOW 3 WHERE a1.y < a2.y - 1e300",
)


def with_fillers(make: Any, count: int) -> Any:
    """``make``, then ``count`` filler queries registered before the workload's."""

    def made(workload: Workload) -> Any:
        eng = make(workload)
        for k in range(count):
            eng.register_query(f"Query ID: filler{k}\n{FILLERS[k % len(FILLERS)]}")
        return eng

    return made


@settings(max_examples=30, **SETTINGS)
@given(data=st.data())
def test_join_every_order(data: Any) -> None:
    """Pushed one by one, under one of the six static orders or the adaptive one,
    sometimes with ``check=True`` (the QED check of every reported candidate)."""
    run = data.draw(st.sampled_from((0, 12, 40)), label="run")
    workload = data.draw(workloads(max_tuples=20, run=run), label="workload")
    fillers = data.draw(st.sampled_from((0, 1, 63, 64, 65, 130)), label="fillers")
    order = data.draw(st.sampled_from((*ORDERS, "adaptive")), label="order")
    check = data.draw(st.booleans(), label="check")
    record(workload)
    run_push(workload, with_fillers(matcher(order=order, check=check), fillers))


@settings(max_examples=20, **SETTINGS)
@given(data=st.data())
def test_join_batches(data: Any) -> None:
    """Runs of one stream through ``push_batch``, registrations changing between them."""
    workload = data.draw(workloads(max_tuples=20, run=40), label="workload")
    fillers = data.draw(st.sampled_from((0, 64, 65)), label="fillers")
    order = data.draw(st.sampled_from(("AJW", "JWA", "WJA", "adaptive")), label="order")
    record(workload)
    run_batches(workload, with_fillers(matcher(order=order), fillers))
