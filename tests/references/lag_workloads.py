"""Exact workloads for per-stream event time (tests/references/reference.py, rule 4).

Each stream keeps its own clock: some lag far behind the others (60 s, as a gateway
that uploads every minute), some only a little; tuples arrive out of order within and
beyond their stream's lateness (the global one, or a stream's own); streams fall silent
(declared idle), send per-stream and global heartbeats, and rejoin. Queries are built
around witnesses among the accepted tuples as in :mod:`tests.references.exact_workloads`.
"""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from tests.references.exact_ops import Chooser, Heartbeat, Idle, Op, Push, Register, Workload, apply_reference
from tests.references.exact_queries import make_query
from tests.references.exact_workloads import LATENESS, TS_BASES, TS_STEPS, make_pool, make_schema, make_value

LAGS = tuple(Fraction(t) for t in ("0", "60", "0.3", "0", "1.5", "0.1"))
OWN_LATENESS = ("60", "0", "0.3", "2")


def build_lagging(c: Chooser, *, max_tuples: int = 24, max_queries: int = 4) -> Workload:
    schema = make_schema(c, c.integer(2, 3))
    late = Fraction(c.pick(LATENESS))
    own: dict[str, float] = {}
    if c.chance(40):
        own[c.pick(schema.streams).name] = float(c.pick(OWN_LATENESS))
    pool = make_pool(c)
    base = c.pick(TS_BASES) + 100
    clocks = {s.name: base - c.pick(LAGS) for s in schema.streams}
    pushed = dict.fromkeys(clocks, 0)
    ops: list[Op] = []
    n = 0
    while n < max_tuples and (n < 3 or not c.chance(8)):
        n += 1
        stream = c.pick(schema.streams)
        name = stream.name
        if c.chance(8):
            ops.append(Idle(name))
        if c.chance(6):
            clocks[name] += c.pick(TS_STEPS)
            ops.append(Heartbeat(float(clocks[name]), None if c.chance(70) else name))
        lateness = Fraction(repr(own.get(name, float(late))))
        how = c.pick(("ahead", "ahead", "same", "within", "at", "beyond"))
        if how == "ahead":
            ts = clocks[name] = clocks[name] + c.pick(TS_STEPS)
        elif how == "same":
            ts = clocks[name]
        elif how == "within":
            ts = clocks[name] - lateness * Fraction(c.integer(0, 4), 4)
        elif how == "at":
            ts = clocks[name] - lateness
        else:
            ts = clocks[name] - lateness - c.pick((*TS_STEPS[:4], Fraction(1, 1000)))
        values = {}
        for col in stream.columns:
            given, value = make_value(c, col, pool)
            if given:
                values[col.name] = value
        pushed[name] += 1
        ops.append(Push(name, float(max(ts, Fraction(0))), values))
    w = Workload(schema, float(late), ops, time="per-stream", stream_lateness=own)
    ref = w.reference()  # no queries yet: which pushes are accepted (witness candidates)
    accepted = []
    for i, op in enumerate(ops):
        before = ref.late_count
        apply_reference(ref, op)
        if isinstance(op, Push) and ref.late_count == before:
            accepted.append(i)
    queries = []
    for q in range(max_queries):
        if q and not c.chance(60):
            break
        queries.append(make_query(c, schema, f"q{q + 1}", ops, accepted or [0], designated=q == 0))
    return Workload(
        schema, float(late), [*(Register(q) for q in queries), *ops], time="per-stream", stream_lateness=own
    )


@st.composite
def lagging_workloads(draw: Any, **options: Any) -> Workload:
    return build_lagging(Chooser(draw=draw), **options)


def random_lagging(seed: int, **options: Any) -> Workload:
    return build_lagging(Chooser(rnd=random.Random(seed)), **options)
