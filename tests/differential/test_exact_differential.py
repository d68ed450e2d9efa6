"""Exact differential tests: every engine path against the exact reference.

Workloads (tests/references/exact_workloads.py) put data on the boundaries of predicates with
non-dyadic factors and offsets, decimal timestamps, windows and lateness; the reference
(tests/references/reference.py) decides them in exact arithmetic, as docs/ARCHITECTURE.md's
"Exact numbers" requires, without any of the engine's code. Results are compared as
multisets of (query, ts, ids, values) with every number exact (``Fraction(repr(x))`` of
a reported float), and late counts after every operation (after every batch or segment
where the path takes many tuples at once).

Paths: ``Matcher.push`` under the six static orders, ``adaptive`` and ``check=True``
(which also compares the kernels' attribute decisions with the lists' row by row); ``push_batch``
(small batches, and >= 1,000 rows against hundreds of queries); ``prepare`` +
``replay``; ``store="candidates"``; ``snapshot`` -> ``restore`` mid-stream; the CLI in
a subprocess; the Spark batch and streaming stages (tests/spark/test_exact_spark.py); and
one matcher fed through every door in turn (tests/differential/test_mixed_doors.py).

A failure prints the workload and a script that replays it (``Workload.script``).
"""

from __future__ import annotations

import ast
import csv
import heapq
import json
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, event, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

import mqo
import mqo.pipeline
from mqo.batch import MatchBatch
from mqo.snapshot_codec import decode_snapshot, encode_snapshot
from tests.references.exact_workloads import (
    Heartbeat,
    Idle,
    Push,
    Register,
    Unregister,
    Workload,
    apply_reference,
    arrow_batch,
    csv_cell,
    many_queries,
    measure_useful,
    workloads,
)
from tests.references.reference import Reference, Result, engine_results, exact_result

REPO = Path(__file__).resolve().parents[2]
# the exact reference and every workload generator printed for it
REFERENCE_MODULES = (
    "reference.py",
    "exact_language.py",
    "exact_ops.py",
    "exact_queries.py",
    "exact_workloads.py",
    "lag_workloads.py",
    "thesis_queries.py",
    "agg_reference.py",
)
ORDERS = ("AJW", "AWJ", "JAW", "JWA", "WAJ", "WJA")

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")  # late tuples are expected

SETTINGS: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    # Shrinking takes minutes per bug here (each try regenerates a workload); one bug
    # per test at a time keeps a run on an engine with several bugs bearable.
    "report_multiple_bugs": False,
}
# A subprocess (or a Spark job) per example: no shrinking, which could take hundreds of
# runs; the in-process tests shrink the same bugs, and the failing workload is printed.
EXPENSIVE: dict[str, Any] = {**SETTINGS, "phases": (Phase.explicit, Phase.reuse, Phase.generate)}


# ----------------------------------------------------------------- comparing


def show(results: Counter) -> str:
    return "\n".join(f"    {n} x {r}" for r, n in sorted(results.items(), key=str)) or "    (none)"


def compare(where: str, got: Iterable[Result], want: Iterable[Result]) -> None:
    """Fail unless ``got`` and ``want`` are equal as multisets."""
    g, w = Counter(got), Counter(want)
    if g != w:
        # an AssertionError, not pytest.fail(pytrace=False): that would hide the
        # falsifying example and the repro script hypothesis attaches as notes
        raise AssertionError(
            f"{where}: results differ\n  missing (reference only):\n{show(w - g)}\n  extra (engine only):\n{show(g - w)}"
        )


def compare_late(where: str, engine: Any, ref: Reference) -> None:
    assert engine.late_count == ref.late_count, f"{where}: late count {engine.late_count} != {ref.late_count}"


def record(workload: Workload) -> None:
    """Note the repro script; count workloads with results (``--hypothesis-show-statistics``)."""
    if not currently_in_test_context():
        return
    note(f"workload:\n{workload.describe()}")
    note(f"repro script:\n{workload.script()}")
    useful = any(workload.reference_runs())
    event("workload with results" if useful else "workload without results")


def engine_op(eng: Any, ref: Reference, op: Any, where: str) -> None:
    """A registration, removal or heartbeat on both."""
    engine_only(eng, op, where)
    apply_reference(ref, op)


def engine_only(eng: Any, op: Any, where: str) -> None:
    """A registration, removal or heartbeat on the engine (the reference's side is
    computed beforehand: :func:`expected`)."""
    if isinstance(op, Register):
        assert eng.register_query(*op.call_args()) == op.query.name, where
    elif isinstance(op, Unregister):
        eng.unregister_query(op.name)
    elif isinstance(op, Idle):
        eng.set_idle(op.stream)
    else:
        assert isinstance(op, Heartbeat)
        beat = (op.ts,) if op.stream is None else (op.stream, op.ts)
        assert not eng.heartbeat(*beat), f"{where}: a heartbeat reported results"


Expected = list[tuple[list[Result], int]]


def expected(workload: Workload) -> Expected:
    """The reference's results of every op and its late count after it. The reference
    takes its ops one at a time whatever the engine path, so one pass serves every
    runner of the same workload."""
    ref = workload.reference()
    return [(apply_reference(ref, op), ref.late_count) for op in workload.ops]


# --------------------------------------------------------------- the runners


def run_push(
    workload: Workload,
    make: Callable[[Workload], Any],
    restore_at: frozenset[int] = frozenset(),
    tune: Callable[[Any], None] | None = None,
) -> None:
    """Every op through ``Matcher.push`` (and register/unregister/heartbeat); before the
    ops in ``restore_at`` the matcher is replaced by ``restore(snapshot())``; ``tune``
    is called with the matcher before every op."""
    ref = workload.reference()
    eng = make(workload)
    for step, op in enumerate(workload.ops):
        if tune is not None:
            tune(eng)
        where = f"step {step} ({op!r})"
        if step in restore_at:
            eng = mqo.Matcher.restore(decode_snapshot(encode_snapshot(eng.snapshot())))
        if isinstance(op, Push):
            got = engine_results(eng.push(op.stream, op.ts, dict(op.values), id=op.id))
            compare(where, got, apply_reference(ref, op))
        else:
            engine_op(eng, ref, op, where)
        compare_late(where, eng, ref)


def runs(workload: Workload, same_stream: bool) -> list[tuple[int, list[int]]]:
    """Maximal runs of consecutive pushes (of one stream if ``same_stream``): (first
    step, op indexes); other ops are runs of their own with an empty list."""
    out: list[tuple[int, list[int]]] = []
    for i, op in enumerate(workload.ops):
        if not isinstance(op, Push):
            out.append((i, []))
            continue
        last = out[-1][1] if out else []
        if last and (not same_stream or workload.ops[last[0]].stream == op.stream):  # type: ignore[union-attr]
            last.append(i)
        else:
            out.append((i, [i]))
    return out


def batch_ids(workload: Workload, indexes: list[int], ids: list[int | None]) -> list[int] | None:
    """Ids for a batch: None (automatic) when no tuple gives one, else every tuple's."""
    if all(workload.ops[i].id is None for i in indexes):  # type: ignore[union-attr]
        return None
    return [ids[i] for i in indexes]  # type: ignore[misc]


def compare_step(where: str, eng: Any, want: Expected, step: int, got: Iterable[Result], indexes: list[int]) -> None:
    """The engine's results of the ops ``indexes`` (a batch or segment ending the
    workload's step ``step``) and its late count then, against the reference's."""
    compare(where, got, [r for i in indexes for r in want[i][0]])
    late = want[step][1]
    assert eng.late_count == late, f"{where}: late count {eng.late_count} != {late}"


def run_batches(
    workload: Workload,
    make: Callable[[Workload], Any],
    want: Expected | None = None,
    sizes: list[int] | None = None,
    after: Callable[[Any], None] | None = None,
) -> None:
    """Each run of one stream's consecutive pushes through one ``push_batch`` (or, given
    ``sizes``, through batches of those sizes in turn); ``want`` is the reference's side
    (:func:`expected`), computed here if not given; ``after(matcher)`` after each batch."""
    want = expected(workload) if want is None else want
    eng = make(workload)
    ids = workload.effective_ids()
    turn = 0
    for step, run in runs(workload, same_stream=True):
        op = workload.ops[step]
        if not run:
            where = f"step {step} ({op!r})"
            engine_only(eng, op, where)
            compare_step(where, eng, want, step, [], [])
            continue
        while run:
            size = len(run) if sizes is None else sizes[turn % len(sizes)]
            indexes, run, turn = run[:size], run[size:], turn + 1
            where = f"step {indexes[0]} ({workload.ops[indexes[0]]!r}), batch of {len(indexes)}"
            pushes = [workload.ops[i] for i in indexes]
            stream = workload.schema.stream(op.stream)  # type: ignore[union-attr]
            table = arrow_batch(stream, pushes, batch_ids(workload, indexes, ids))  # type: ignore[arg-type]
            got = engine_results(eng.push_batch(stream.name, table).matches())
            compare_step(where, eng, want, indexes[-1], got, indexes)
            if after is not None:
                after(eng)


def run_replay(
    workload: Workload,
    make: Callable[[Workload], Any],
    want: Expected | None = None,
    size: int | None = None,
    after: Callable[[Any], None] | None = None,
) -> None:
    """Each run of consecutive pushes (any streams), or each ``size`` of them, prepared per
    stream with ``Matcher.prepare`` and matched with ``Matcher.replay`` in arrival order;
    ``want`` and ``after`` as in :func:`run_batches`."""
    want = expected(workload) if want is None else want
    eng = make(workload)
    ids = workload.effective_ids()
    segments = []
    for step, run in runs(workload, same_stream=False):
        cut = size or max(len(run), 1)
        segments += [(step, [])] if not run else [(run[k], run[k : k + cut]) for k in range(0, len(run), cut)]
    for step, indexes in segments:
        op = workload.ops[step]
        where = f"step {step} ({op!r}), segment of {len(indexes)}"
        if not indexes:
            engine_only(eng, op, where)
            compare_step(where, eng, want, step, [], [])
            continue
        compare_step(where, eng, want, indexes[-1], replayed(eng, workload, indexes, ids), indexes)
        if after is not None:
            after(eng)


def replayed(eng: Any, workload: Workload, indexes: list[int], ids: list[Any]) -> list[Result]:
    """The results of the pushes ``indexes`` (any streams) prepared per stream with
    ``Matcher.prepare`` and matched with ``Matcher.replay`` in arrival order."""
    streams = [s.name for s in workload.schema.streams]
    mine = {s: [i for i in indexes if workload.ops[i].stream == s] for s in streams}  # type: ignore[union-attr]
    prepared = []
    for s in streams:
        pushes = [workload.ops[i] for i in mine[s]]
        given = [ids[i] for i in mine[s]]  # explicit ids: prepare would number in batch order
        prepared.append(eng.prepare(s, arrow_batch(workload.schema.stream(s), pushes, given)))  # type: ignore[arg-type]
    which = np.array([streams.index(workload.ops[i].stream) for i in indexes], np.int64)  # type: ignore[union-attr]
    rows = np.array([mine[streams[k]].index(i) for k, i in zip(which, indexes, strict=True)], np.int64)
    found = MatchBatch(eng.ensure_plan())
    for _, blocks in eng.replay(prepared, which, rows):
        found.blocks.extend(blocks)
    return engine_results(found.matches())


def matcher(**options: Any) -> Callable[[Workload], Any]:
    return lambda w: mqo.Matcher(
        w.schema.ddl(),
        allowed_lateness=w.lateness,
        missing="null",
        time=w.time,
        stream_lateness=w.stream_lateness,
        idle_timeout=None,
        **options,
    )


# ----------------------------------------------------------- the reference


def test_reference_imports_nothing_of_the_engine() -> None:
    """The reference (and the workloads it is printed from) must not share code with
    the engine: no import of predicates, mqo, indexes or runtime, directly or not."""
    engine = {"predicates", "mqo", "indexes", "runtime"}
    for name in REFERENCE_MODULES:
        tree = ast.parse((REPO / "tests" / "references" / name).read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not {m.split(".")[0] for m in imported} & engine, (name, imported)
    code = "import sys, tests.references.exact_workloads; print(sorted({m.split('.')[0] for m in sys.modules}))"
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert not set(json.loads(loaded.stdout.replace("'", '"'))) & engine


@settings(max_examples=60, **SETTINGS)
@given(workload=workloads())
def test_reference_pruning_changes_nothing(workload: Workload) -> None:
    """Dropping tuples older than the horizon is only a speed-up of the reference."""
    pruned, kept = (
        workload.reference(),
        workload.reference(prune=False),
    )
    for op in workload.ops:
        assert Counter(apply_reference(pruned, op)) == Counter(apply_reference(kept, op))
    assert pruned.late == kept.late


def test_workloads_are_useful() -> None:
    """Most workloads have results (the old strategies left 39-61% without any)."""
    share = measure_useful(200, seed=1000)
    assert share >= 0.8, f"only {share:.0%} of workloads have results"


# ------------------------------------------------------------ Matcher.push


@settings(max_examples=40, **SETTINGS)
@given(workload=workloads())
def test_push_every_order(workload: Workload) -> None:
    """Each workload under the six static orders and the adaptive one. One test rather
    than seven: the workload is generated (and, on a failure, shrunk) once."""
    record(workload)
    for order in (*ORDERS, "adaptive"):
        try:
            run_push(workload, matcher(order=order))
        except AssertionError as err:
            raise AssertionError(f"order {order}: {err}") from None


@settings(max_examples=25, **SETTINGS)
@given(workload=workloads(max_tuples=60))
def test_push_adaptive_longer(workload: Workload) -> None:
    """Longer streams, so that the adaptive reorderer explores and switches orders."""
    record(workload)
    run_push(workload, matcher(order="adaptive"))


@settings(max_examples=25, **SETTINGS)
@given(workload=workloads(), order=st.sampled_from(("AJW", "WJA", "adaptive")))
def test_push_checked(workload: Workload, order: str) -> None:
    """``check=True``: every index's invariants are checked after every change."""
    record(workload)
    run_push(workload, matcher(order=order, check=True))


@settings(max_examples=30, **SETTINGS)
@given(workload=workloads(churn=False), order=st.sampled_from(("AJW", "WAJ", "adaptive")))
def test_push_store_candidates(workload: Workload, order: str) -> None:
    """``store='candidates'`` (queries fixed at the start, as documented)."""
    record(workload)
    run_push(workload, matcher(order=order, store="candidates"))


@settings(max_examples=30, **SETTINGS)
@given(workload=workloads(), data=st.data())
def test_snapshot_restore_mid_stream(workload: Workload, data: Any) -> None:
    """``restore(snapshot())`` (through snapshot bytes) at one or two points, then carry on."""
    record(workload)
    points = data.draw(st.sets(st.integers(0, len(workload.ops) - 1), min_size=1, max_size=2), label="restore at")
    order = data.draw(st.sampled_from(("AJW", "JAW", "adaptive")), label="order")
    run_push(workload, matcher(order=order), frozenset(points))


# ------------------------------------------------------- batches and replay


@settings(max_examples=30, **SETTINGS)
@given(workload=workloads(max_tuples=40), order=st.sampled_from(("AJW", "WJA", "adaptive")))
def test_push_batch(workload: Workload, order: str) -> None:
    record(workload)
    run_batches(workload, matcher(order=order))


@settings(max_examples=30, **SETTINGS)
@given(workload=workloads(max_tuples=40), order=st.sampled_from(("AJW", "JWA", "adaptive")))
def test_prepare_replay(workload: Workload, order: str) -> None:
    record(workload)
    run_replay(workload, matcher(order=order))


@settings(max_examples=30, **SETTINGS)
@given(workload=workloads(max_tuples=40, churn=False), order=st.sampled_from(("AJW", "JWA", "adaptive")))
def test_prepare_replay_store_candidates(workload: Workload, order: str) -> None:
    """The CLI's way: ``store='candidates'`` (queries fixed at the start), where rows with
    single-stream results only (disjuncts too) are decided a run at a time (mqo.alone)."""
    record(workload)
    run_replay(workload, matcher(order=order, store="candidates"))


def test_push_batch_many_queries() -> None:
    """200 queries (a few shapes, many constants) and a batch of 1,000 tuples of one
    stream after ~60 tuples of all streams whose times it revisits."""
    run_batches(many_queries(1), matcher(order="AJW"))


def test_push_batch_takes_and_leaves_the_columnar_join_step() -> None:
    """Batches of 1 to 300 tuples in turn: ``push_batch`` takes the columnar join step
    for a batch of at least a quarter of the rows the step keeps, and leaves the pairs to
    the engine for a smaller one (the window state made whole, the step made again from
    it by the next large batch: mqo.pipeline.ROUND_SHARE); every batch against the
    reference, both ways taken."""
    taken: list[bool] = []

    def took(m: mqo.Matcher) -> None:
        pairs = m.pipeline._pairs
        taken.append(pairs is not None and bool(pairs.steps))

    run_batches(
        many_queries(5, n_queries=120, run=700), matcher(order="AJW"), sizes=[1, 300, 2, 1, 150, 3, 40], after=took
    )
    assert True in taken and False in taken, "the sizes did not make push_batch take the step and leave it"


def test_replay_goes_on_alike_after_a_snapshot_between_rounds() -> None:
    """A checkpoint between replay rounds (what ``mqo serve`` takes) makes the window
    state whole and the columnar join step is made again from it: the tuples the engine
    stored beside the step are then decided for the step's slots too (they were once
    missed: the engine had kept them as failing those slots)."""
    run_replay(many_queries(5, n_queries=120, run=200), matcher(order="AJW"), size=5, after=lambda m: m.snapshot())


@pytest.mark.slow
def test_replay_many_queries() -> None:
    run_replay(many_queries(2), matcher(order="adaptive", store="candidates"))


# ------------------------------------------------------------------ the CLI


def cli_inputs(workload: Workload, folder: Path) -> tuple[list[str], list[tuple[str, float, dict, int | None]]]:
    """One CSV file per stream (in the order of the pushes) and the tuples in the order
    ``mqo match`` merges them: smallest next ts first, ties by input order."""
    args, per_stream = [], []
    for k, stream in enumerate(workload.schema.streams):
        pushes = [op for op in workload.ops if isinstance(op, Push) and op.stream == stream.name]
        with_ids = any(p.id is not None for p in pushes)
        # a file gives ids for all its rows or for none; fill the others past any given one
        free = max((p.id for p in pushes if p.id is not None), default=0) + 1
        ids = [p.id if p.id is not None else free + n for n, p in enumerate(pushes)] if with_ids else None
        path = folder / f"{stream.name}.csv"
        with path.open("w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["ts", *(["id"] if ids else []), *(c.name for c in stream.columns)])
            for n, p in enumerate(pushes):
                cells = [csv_cell(p.values.get(c.name), c.type) for c in stream.columns]
                out.writerow([repr(p.ts), *([ids[n]] if ids else []), *cells])
        args += ["--input", f"{stream.name}={path}"]
        per_stream.append(
            [(p.ts, k, n, (stream.name, p.ts, p.values, ids[n] if ids else None)) for n, p in enumerate(pushes)]
        )
    merged = [item[3] for item in heapq.merge(*per_stream, key=lambda item: (item[0], item[1]))]
    return args, merged


@settings(max_examples=6, **EXPENSIVE)
@given(workload=workloads(churn=False), order=st.sampled_from(("adaptive", "AJW", "WJA")))
def test_cli_match(workload: Workload, order: str) -> None:
    record(workload)
    run_cli(workload, order)


def run_cli(workload: Workload, order: str) -> None:
    """``mqo match`` in a subprocess: DDL, queries and CSV files in, JSONL out."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "streams.ddl").write_text(workload.schema.ddl())
        (folder / "queries.mqo").write_text("\n\n".join(q.to_text() for q in workload.queries) + "\n")
        inputs, merged = cli_inputs(workload, folder)
        command = [sys.executable, "-m", "runtime.cli", "match", "--schema", str(folder / "streams.ddl")]
        command += ["--queries", str(folder / "queries.mqo"), *inputs, "--output", str(folder / "out.jsonl")]
        command += ["--late", str(folder / "late.jsonl"), "--allowed-lateness", repr(workload.lateness)]
        command += ["--order", order, "--time", workload.time, "--quiet"]
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        got = [exact_result(r["query"], r["ts"], r["ids"], r["values"]) for r in read_jsonl(folder / "out.jsonl")]
        late = read_jsonl(folder / "late.jsonl") if (folder / "late.jsonl").exists() else []
    ref = workload.reference()
    for q in workload.queries:
        ref.register(q)
    want = [r for stream, ts, values, ident in merged for r in ref.push(stream, ts, dict(values), id=ident)]
    compare(f"mqo match --order {order}", got, want)
    assert len(late) == ref.late_count, f"late tuples: {len(late)} != {ref.late_count}"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -------------------------------------------------------------- larger runs


@pytest.mark.slow
@pytest.mark.parametrize("order", [*ORDERS, "adaptive"])
@settings(max_examples=40, **SETTINGS)
@given(workload=workloads(max_tuples=60, max_queries=8))
def test_push_large(order: str, workload: Workload) -> None:
    record(workload)
    run_push(workload, matcher(order=order))


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(workload=workloads(max_tuples=80, max_queries=8), order=st.sampled_from(("AJW", "adaptive")))
def test_push_batch_large(workload: Workload, order: str) -> None:
    record(workload)
    run_batches(workload, matcher(order=order))


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(workload=workloads(max_tuples=80, max_queries=8), order=st.sampled_from(("AJW", "adaptive")))
def test_prepare_replay_large(workload: Workload, order: str) -> None:
    record(workload)
    run_replay(workload, matcher(order=order))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10, 13))
def test_many_queries_large(seed: int) -> None:
    """Up to 400 queries and batches up to 2,000 tuples, through push_batch and replay.
    Three seeds give each size (200 and 400 queries, 1,000 and 2,000 tuples) and two
    orders; each costs ~40 s of CPU, nearly all of it the exact reference."""
    workload = many_queries(seed, n_queries=400 if seed % 2 else 200, run=2000 if seed % 3 else 1000)
    want = expected(workload)  # the reference's pass is most of the time: one for both paths
    run_batches(workload, matcher(order="adaptive" if seed % 2 else "JWA"), want)
    run_replay(workload, matcher(order="AJW"), want)


@pytest.mark.slow
@settings(max_examples=12, **EXPENSIVE)
@given(workload=workloads(max_tuples=60, churn=False), order=st.sampled_from(ORDERS))
def test_cli_match_large(workload: Workload, order: str) -> None:
    record(workload)
    run_cli(workload, order)
