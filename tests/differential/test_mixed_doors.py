"""One matcher, tuples through every door in turn, against the exact reference.

Each door is checked alone elsewhere (tests/differential/test_exact_differential.py). A
service uses several on one matcher: ``mqo serve`` replays each step's files and takes a
checkpoint (a snapshot) between steps, the HTTP service takes pushes and batches, and
any caller may look at ``Matcher.state``. The doors keep different things (the columnar
join step keeps rows as arrays, the engine stores tuples with their attribute outcome),
and each door hands the window over to the next; a tuple stored through one door and
met through another was once missed (a snapshot between two replay rounds). Here a
workload's tuples go in segments, each through a door drawn for it (``push`` one at a
time, ``push_batch`` per run of one stream, ``prepare``/``replay``), with a snapshot, a
look at the state or a restore drawn between segments.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import mqo
from mqo.snapshot_codec import decode_snapshot, encode_snapshot
from tests.differential.test_exact_differential import (
    SETTINGS,
    Expected,
    compare_step,
    engine_only,
    expected,
    matcher,
    record,
    replayed,
    runs,
)
from tests.references.exact_workloads import Push, Workload, arrow_batch, many_queries, workloads
from tests.references.reference import engine_results

DOORS = ("push", "batch", "replay")
BETWEEN = ("nothing", "snapshot", "state", "restore")


def through(eng: mqo.Matcher, workload: Workload, indexes: list[int], door: str, ids: list[Any]) -> list[Any]:
    """The results of the pushes ``indexes`` through ``door`` (every tuple with its id
    given: the doors number automatic ids each their own way)."""
    ops: list[Push] = [workload.ops[i] for i in indexes]  # type: ignore[misc]
    if door == "push":
        return [
            r
            for i, op in zip(indexes, ops, strict=True)
            for r in engine_results(eng.push(op.stream, op.ts, dict(op.values), id=ids[i]))
        ]
    if door == "batch":
        got = []
        start = 0
        while start < len(ops):  # each run of one stream's tuples in one batch
            end = start + 1
            while end < len(ops) and ops[end].stream == ops[start].stream:
                end += 1
            run = indexes[start:end]
            stream = workload.schema.stream(ops[start].stream)
            table = arrow_batch(stream, [workload.ops[i] for i in run], [ids[i] for i in run])
            got += engine_results(eng.push_batch(stream.name, table).matches())
            start = end
        return got
    return replayed(eng, workload, indexes, ids)


def run_mixed(workload: Workload, eng: mqo.Matcher, draw: Any, want: Expected | None = None) -> None:
    """The workload's pushes in segments of 1 to 12, each through a drawn door, with a
    drawn act between segments; every segment's results and the late count after it
    against the reference's."""
    want = expected(workload) if want is None else want
    ids = workload.effective_ids()
    for step, run in runs(workload, same_stream=False):
        if not run:
            op = workload.ops[step]
            engine_only(eng, op, f"step {step} ({op!r})")
            compare_step(f"step {step} ({op!r})", eng, want, step, [], [])
            continue
        while run:
            size = draw(st.integers(1, 12), label="segment")
            door = draw(st.sampled_from(DOORS), label="door")
            segment, run = run[:size], run[size:]
            got = through(eng, workload, segment, door, ids)
            compare_step(f"pushes {segment[0]}..{segment[-1]} through {door}", eng, want, segment[-1], got, segment)
            act = draw(st.sampled_from(BETWEEN), label="then")
            if act == "snapshot":
                eng.snapshot()
            elif act == "state":
                assert eng.state is not None
            elif act == "restore":
                eng = mqo.Matcher.restore(decode_snapshot(encode_snapshot(eng.snapshot())))


@settings(max_examples=40, **SETTINGS)
@given(workload=workloads(max_tuples=40), order=st.sampled_from(("AJW", "JWA", "adaptive")), data=st.data())
def test_doors_in_turn(workload: Workload, order: str, data: Any) -> None:
    record(workload)
    run_mixed(workload, matcher(order=order)(workload), data.draw)


@settings(max_examples=4, **SETTINGS)
@given(seed=st.integers(0, 50), data=st.data())
def test_doors_in_turn_many_queries(seed: int, data: Any) -> None:
    """Hundreds of queries (pairs the columnar join step takes among them) and a run of
    300 tuples of one stream at the end."""
    workload = many_queries(seed, n_queries=120, run=300)
    run_mixed(workload, matcher(order="AJW")(workload), data.draw)
