"""Per-stream event time against the exact reference (tests/references/reference.py, rule 4):
lagging streams, out-of-order tuples within and beyond a stream's own lateness,
per-stream and global heartbeats, idle streams that rejoin, through every entry
(``push``, ``push_batch``, ``prepare`` + ``replay``, snapshot and restore)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.differential.test_exact_differential import EXPENSIVE, matcher, record, run_batches, run_push, run_replay
from tests.references.exact_ops import Push, Workload, apply_reference
from tests.references.lag_workloads import lagging_workloads, random_lagging


@settings(max_examples=40, **EXPENSIVE)
@given(workload=lagging_workloads(), order=st.sampled_from(("adaptive", "AJW", "WJA")))
def test_push(workload: Workload, order: str) -> None:
    record(workload)
    run_push(workload, matcher(order=order))


@settings(max_examples=25, **EXPENSIVE)
@given(workload=lagging_workloads(), order=st.sampled_from(("AJW", "JWA")))
def test_push_batch(workload: Workload, order: str) -> None:
    record(workload)
    run_batches(workload, matcher(order=order))


@settings(max_examples=25, **EXPENSIVE)
@given(workload=lagging_workloads(), order=st.sampled_from(("AJW", "WAJ")))
def test_prepare_replay(workload: Workload, order: str) -> None:
    record(workload)
    run_replay(workload, matcher(order=order))


@settings(max_examples=15, **EXPENSIVE)
@given(workload=lagging_workloads(), data=st.data())
def test_snapshot_restore_mid_stream(workload: Workload, data: Any) -> None:
    record(workload)
    at = data.draw(st.sets(st.integers(0, len(workload.ops)), max_size=3))
    run_push(workload, matcher(order="AJW"), restore_at=frozenset(at))


@settings(max_examples=10, **EXPENSIVE)
@given(workload=lagging_workloads(), order=st.sampled_from(("AJW",)))
def test_push_checked(workload: Workload, order: str) -> None:
    record(workload)
    run_push(workload, matcher(order=order, check=True))


def test_lagging_workloads_have_results_and_late_tuples() -> None:
    """The generator reaches what it is for: results, and late tuples of lagging streams."""
    runs = [random_lagging(seed) for seed in range(150)]
    with_results = sum(any(w.reference_runs()) for w in runs)
    late = 0
    for w in runs:
        ref = w.reference()
        for op in w.ops:
            apply_reference(ref, op)
        late += ref.late_count > 0
    assert with_results > 75 and late > 20, (with_results, late)
    assert any(len({op.stream for op in w.ops if isinstance(op, Push)}) > 1 for w in runs)
