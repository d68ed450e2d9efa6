"""Workloads that hunt the boundaries of exact arithmetic (docs/ARCHITECTURE.md, "Exact numbers").

The data come first; the queries are then built around a **witness**: one pushed tuple
per alias, close in time. Every constant is derived from the witness's exact values so
that the witness lies exactly on the predicate's boundary (``c = y - k*x`` for
``k * A.x + c OP B.y``), or a small step off it, and so that MAXWINDOW and window offsets
equal the witness's time gaps. Values come from a small per-workload pool, so many other
pairs sit on the same boundaries. Numbers are chosen where doubles go wrong:

* factors 3, -3, 0.1, 1.5, 7, 0.3333333333 (as a decimal) and 1/3 (as ``1 / 3`` or
  ``x / 3``); constants with no finite decimal are written ``p / q``;
* INTEGER and FLOAT columns with up to three decimals, magnitudes from 1e-6 to 1e15 (and
  integers past 2**53, where doubles stop being exact);
* timestamps in decimal seconds from bases up to 1.7e9, ties, window offsets like
  ``A.ts <= B.ts + 0.1``, MAXWINDOW like ``0.3 sec``, ``100 ms``, ``0.005 min``;
* NULLs (missing, None, NaN), division by zero, late tuples at and past ``M - L`` with
  decimal lateness, heartbeats, registrations and removals mid-stream.

One generator serves two drivers (:class:`Chooser`): hypothesis (small workloads that
shrink) and :class:`random.Random` (large ones, too big for hypothesis' buffer). The
first query of a workload is made TRUE on its witness, so nearly every workload has
results (see :func:`measure_useful`; ``python -m tests.references.exact_workloads`` prints it).
A :class:`Workload` prints as a runnable repro script (:meth:`Workload.script`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from tests.references.exact_ops import (
    Chooser,
    Heartbeat,
    Idle,
    Op,
    Push,
    Register,
    Unregister,
    Workload,
    apply_reference,
    arrow_batch,
    csv_cell,
)
from tests.references.exact_queries import TAGS, dnf_size, make_query
from tests.references.reference import FLOAT, INTEGER, STRING, And, Column, Query, Schema, Stream

STREAMS = ("A", "B", "C")
TYPE_SPELLINGS = {INTEGER: ("INTEGER", "INT", "BIGINT"), FLOAT: ("FLOAT", "DOUBLE", "REAL"), STRING: ("STRING",)}
# Magnitudes: 10**e for the pool's numbers; 53 means integers just past 2**53.
SCALES = (0, -1, 1, 2, -3, 3, -6, 6, 9, 12, 15, 53)
# The issue's values, and doubles' own decimals (the repr of 1/3, of 0.1 + 0.2, ...):
# 3 * 0.3333333333333333 is not 1, though the double nearest 1/3 is that double.
CLASSIC = tuple(
    Fraction(t)
    for t in (
        *("3", "10", "9", "0.3", "2.3", "0.1", "0.2", "0.7", "0.8", "1.1", "2.2", "3.3"),
        *("0.3333333333333333", "0.30000000000000004", "2.9999999999999996", "0.7999999999999999"),
    )
)
TS_BASES = tuple(Fraction(t) for t in ("0", "0.1", "7.3", "1000.01", "86400.5", "1700000000.123"))
TS_STEPS = tuple(Fraction(t) for t in ("0.1", "0", "0.2", "0.3", "0.1", "0.05", "0.001", "0.7", "1", "1.5"))
LATENESS = ("0", "0", "0.1", "0.3", "0.05", "0.2", "1.5")

__all__ = [
    "Heartbeat",
    "Idle",
    "Push",
    "Register",
    "Unregister",
    "Workload",
    "apply_reference",
    "arrow_batch",
    "build_workload",
    "csv_cell",
    "many_queries",
    "measure_useful",
    "random_workload",
    "workloads",
]


# ------------------------------------------------------------------------ data


def make_schema(c: Chooser, n_streams: int) -> Schema:
    """Streams A, B (and C) with numeric columns x, y and sometimes a STRING tag. The
    order of declaration varies too: the engine normalizes joins by it, and
    ``C.z = A.z - 2`` went wrong only with C declared first."""
    names = list(STREAMS[:n_streams])
    if c.chance(40):
        names.reverse()
    streams = []
    for name in names:
        cols = []
        for col in ("x", "y"):
            ctype = c.pick((FLOAT, INTEGER))
            cols.append(Column(col, ctype, c.pick(TYPE_SPELLINGS[ctype])))
        if c.chance(35):
            cols.append(Column("tag", STRING))
        streams.append(Stream(name, tuple(cols)))
    return Schema(tuple(streams))


def make_pool(c: Chooser) -> tuple[list[Fraction], list[int]]:
    """A few FLOAT values (up to three decimals) and INTEGER values at one magnitude."""
    scale = c.pick(SCALES)
    if c.chance(30):
        floats = [c.pick(CLASSIC) for _ in range(4)]
        return floats, [int(v) for v in floats if v.denominator == 1] + [3, 10, 9]
    floats, ints = [], []
    for _ in range(c.integer(2, 5)):
        if scale == 53:
            ints.append(2**53 + c.integer(-3, 3))
            floats.append(Fraction(2**52 + c.integer(-3, 3)) + Fraction(c.integer(0, 1), 2))
            continue
        mantissa = Fraction(c.integer(-40, 40), 10 ** c.pick((1, 0, 2, 3)))
        floats.append(mantissa * Fraction(10) ** scale)
        ints.append(c.integer(-12, 12) * 10 ** max(scale, 0) + c.integer(-3, 3))
    return floats, ints


def make_value(
    c: Chooser, col: Column, pool: tuple[list[Fraction], list[int]], tags: Sequence[str] = TAGS
) -> tuple[bool, Any]:
    """(given, value) for one column; ``given`` False means the key is left out (NULL)."""
    if col.type == STRING:
        return (False, None) if c.chance(8) else (True, c.pick(tags))
    if c.chance(8):
        how = c.pick(("missing", "none", "nan"))
        if how == "nan" and col.type == FLOAT:
            return True, float("nan")
        return how != "missing", None
    floats, ints = pool
    if col.type == INTEGER:
        return True, c.pick(ints) if c.chance(85) else c.integer(-5, 5)
    value = c.pick(floats) if c.chance(85) else Fraction(c.integer(-30, 30), 10)
    # a FLOAT column may be given a Python int (x = 3 for x * 0.1 = 0.3)
    return True, int(value) if value.denominator == 1 and c.chance(30) else float(value)


def next_ts(c: Chooser, now: Fraction, top: Fraction | None, lateness: Fraction) -> Fraction:
    """The next tuple's ts: mostly a decimal step forward (or a tie); sometimes exactly
    ``M - L`` (not late), a step before it (late) or within the lateness."""
    if top is None or not c.chance(12):
        return now + c.pick(TS_STEPS)
    kind = c.pick(("edge", "late", "within"))
    if kind == "edge":
        return top - lateness
    if kind == "late":
        return top - lateness - c.pick((*TS_STEPS[:4], Fraction(1, 1000)))
    return top - lateness * Fraction(c.integer(0, 4), 4)


def make_timeline(
    c: Chooser,
    schema: Schema,
    most: int,
    lateness: Fraction,
    pool: Any,
    run: tuple[str, int] | None = None,
    tags: Sequence[str] = TAGS,
) -> list[Op]:
    """Pushes (3 to ``most``) and heartbeats (see :func:`next_ts`). ``run``: (stream, k)
    appends k tuples of one stream (a large batch) that revisit the times of the others,
    in ts order, so they meet them in joins and tie with them; the caller raises the
    lateness to match. Each tuple but the first three is preceded by a "one more?" choice
    rather than a count drawn up front, so hypothesis shrinks a failing workload by
    cutting its tail or dropping a tuple, without upsetting the choices after it."""
    ops: list[Op] = []
    now = c.pick(TS_BASES)
    top: Fraction | None = None  # M, as the generator sees it
    explicit_ids = c.pick(("auto", "auto", "explicit", "mixed"))
    pushed = {s.name: 0 for s in schema.streams}

    def push(stream: Stream, ts: Fraction) -> None:
        nonlocal top, now
        top = ts if top is None else max(top, ts)
        now = max(now, ts)
        values = {}
        for col in stream.columns:
            given, value = make_value(c, col, pool, tags)
            if given:
                values[col.name] = value
        ident = None
        if explicit_ids == "explicit" or (explicit_ids == "mixed" and c.chance(50)):
            ident = 10**6 + 7 * pushed[stream.name]  # unique per stream, never an automatic id
        pushed[stream.name] += 1
        ops.append(Push(stream.name, float(ts), values, ident))

    n = 0
    while n < most and (n < 3 or not c.chance(8)):
        n += 1
        stream = c.pick(schema.streams)
        if top is not None and c.chance(6):
            beat = top + c.pick(TS_STEPS)
            ops.append(Heartbeat(float(beat)))
            top, now = max(top, beat), max(now, beat)
        push(stream, max(next_ts(c, now, top, lateness), Fraction(0)))
    if run is not None:
        prefix = sorted(Fraction(repr(op.ts)) for op in ops if isinstance(op, Push))
        last = prefix[0]
        for k in range(run[1]):
            ts = prefix[k * len(prefix) // run[1]] + c.pick((Fraction(0), Fraction(1, 10), Fraction(1, 1000)))
            last = max(ts, last)
            push(schema.stream(run[0]), last)
    return ops


def accepted(ops: Sequence[Op], lateness: Fraction) -> list[int]:
    """Indexes of the pushes that are not late (rule 4)."""
    top: Fraction | None = None
    out = []
    for i, op in enumerate(ops):
        if isinstance(op, Heartbeat | Push):
            ts = Fraction(repr(op.ts))
            if isinstance(op, Push) and top is not None and ts < top - lateness:
                continue
            top = ts if top is None else max(top, ts)
            if isinstance(op, Push):
                out.append(i)
    return out


# -------------------------------------------------------------------- workloads


def build_workload(
    c: Chooser,
    *,
    max_tuples: int = 24,
    max_queries: int = 5,
    churn: bool = True,
    run: int = 0,
    lateness: str | None = None,
    self_joins: int = 30,
    bare: int = 0,
    heavy_churn: bool = False,
    select_expressions: bool = False,
    empty_strings: bool = False,
    contradictions: int = 30,
) -> Workload:
    """A whole workload. ``churn``: queries may be registered and removed mid-stream;
    ``run``: that many tuples of stream A at the end (one large batch); ``self_joins``:
    the percentage of queries reading a stream under several aliases; ``bare``: the
    percentage of queries (after the first) without WINDOW or WHERE; ``heavy_churn``:
    most queries registered mid-stream and half of them removed again;
    ``select_expressions``: SELECT lists with arithmetic and constants;
    ``empty_strings``: tags may be '' (not NULL; a CSV file could not tell them apart);
    ``contradictions``: the percentage of workloads given queries that never match, as
    many as the others' disjuncts past their first (see below)."""
    schema = make_schema(c, c.integer(2, 3))
    late = Fraction(lateness if lateness is not None else c.pick(LATENESS))
    pool = make_pool(c)
    tags = (*TAGS, "") if empty_strings else TAGS
    timeline = make_timeline(c, schema, max_tuples, late, pool, ("A", run) if run else None, tags)
    if run:
        stamps = [Fraction(repr(op.ts)) for op in timeline if isinstance(op, Push | Heartbeat)]
        late = max(late, max(stamps) - min(stamps))  # the run is not late
    ok = accepted(timeline, late)
    # (position in the timeline to register before, query); the first at the start,
    # the others each after a "one more?" choice (see make_timeline)
    placed: list[tuple[int, Query]] = []
    mid_stream, removed = (80, 50) if heavy_churn else (30, 20)
    for q in range(max_queries):
        if q and not c.chance(80 if heavy_churn else 60):
            break
        at = 0 if q == 0 or not churn or not c.chance(mid_stream) else c.integer(0, len(timeline) - 1)
        later = [i for i in ok if i >= at] or ok
        plain = q > 0 and c.chance(bare)
        query = make_query(
            c,
            schema,
            f"q{q + 1}",
            timeline,
            later,
            designated=q == 0,
            self_joins=self_joins,
            bare=plain,
            expressions=select_expressions,
            contradictions=5 if contradictions else 0,
        )
        placed.append((at, query))
    if contradictions and c.chance(contradictions):
        # as many queries that never match (no slot) as the others have disjuncts past
        # their first, registered at the start: the plan then has as many slots as
        # queries, yet not one each (a compiler that took one for the other gave the
        # queries between a disjunction and a contradiction each other's matches)
        conditions = [[cond for cond in (q.where, q.window) if cond is not None] for _, q in placed]
        extra = sum(dnf_size(And(tuple(conds)))[0] - 1 for conds in conditions if conds)
        for _ in range(min(extra, 3)):
            name = f"q{len(placed) + 1}"
            false = make_query(
                c, schema, name, timeline, ok, designated=False, self_joins=self_joins, contradictions=100
            )
            placed.insert(c.integer(1, len(placed)), (0, false))
    removals: list[tuple[int, str]] = []
    if churn:
        for at, query in placed[1:]:
            if c.chance(removed):
                removals.append((c.integer(at, len(timeline)), query.name))
    by_argument = {query.name: c.chance(20) for _, query in placed}
    ops: list[Op] = []
    for i, op in enumerate([*timeline, None]):
        ops.extend(Register(q, by_argument[q.name]) for at, q in placed if at == i)
        ops.extend(Unregister(name) for at, name in removals if at == i)
        if op is not None:
            ops.append(op)
    return Workload(schema, float(late), ops)


@st.composite
def workloads(draw: Any, **options: Any) -> Workload:
    """Hypothesis strategy for :func:`build_workload` (options as there)."""
    return build_workload(Chooser(draw=draw), **options)


def random_workload(seed: int, **options: Any) -> Workload:
    return build_workload(Chooser(rnd=random.Random(seed)), **options)


def many_queries(seed: int, n_queries: int = 200, run: int = 1000) -> Workload:
    """Hundreds of queries (a few shapes, many constants) and a batch of ``run`` tuples of
    stream A at the end, all registered at the start."""
    c = Chooser(rnd=random.Random(seed))
    w = build_workload(c, max_tuples=60, max_queries=1, churn=False, run=run, self_joins=0)
    timeline = [op for op in w.ops if not isinstance(op, Register)]
    ok = accepted(timeline, Fraction(repr(w.lateness)))
    # no self-joins: over a run of 1,000 tuples of one stream (ties and all) they would
    # have results by the hundred thousand
    queries = [
        make_query(c, w.schema, f"m{q}", timeline, ok, c.chance(25), narrow=True, self_joins=0)
        for q in range(n_queries)
    ]
    return Workload(w.schema, w.lateness, [*(Register(q) for q in queries), *timeline])


def measure_useful(n: int = 300, seed: int = 0, **options: Any) -> float:
    """Share of ``n`` seeded workloads with at least one result (on the reference)."""
    useful = 0
    for k in range(n):
        w = random_workload(seed + k, **options)
        useful += any(w.reference_runs())
    return useful / n


if __name__ == "__main__":
    print(f"workloads with results: {measure_useful():.1%} of 300 seeded workloads")
