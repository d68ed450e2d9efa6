"""Plan slots under every mix of query shapes (differential, against a brute force).

A compiled plan numbers one slot per disjunct: a contradiction has none, a disjunction
several, a table's row one. The compiler reads slots from the records' slot base, the
tables' constants from their blocks and the other queries' from the registry's rows;
a shortcut taken on one of those counts (79b94c0: as many slots as queries read as one
slot each) hands one query's matches to another. Here tables, texts with disjunctions
and contradictions, removals and pushes are interleaved at random; after every change
the matches of each event are checked against an exact evaluation in Python that shares
nothing with the engine (Fractions and ints; INTEGER constants past 2**53 included).
"""

from __future__ import annotations

import gc
import warnings
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
import mqo.registrations
from mqo.snapshot_codec import decode_snapshot, encode_snapshot

DDL = "REGISTER STREAM B (pressure FLOAT, temp FLOAT, alert INTEGER);"
OPS = ("<", "<=", ">", ">=", "=")
BIG = 2**53
# constants as written: decimals, and integers on both sides of 2**53 for the INTEGER column
DECIMALS = st.sampled_from(["0", "1", "-1", "2.5", "-0.5", "0.1", "3", "7", "1/3", "10/3"])  # (1/3: an exact constant)
INTEGERS = st.sampled_from(["0", "1", "-2", "3", "2.5", "-0.5", str(BIG), str(BIG + 1), str(BIG - 1), str(-BIG - 1)])
TEMPLATE = "SELECT * FROM B WHERE B.pressure < :c1 AND B.alert >= :k"

Disjunct = list[tuple[str, str, str]]  # (column, operator, constant as written)


@st.composite
def disjuncts(draw: Any) -> Disjunct:
    preds = []
    for _ in range(draw(st.integers(1, 2))):
        column = draw(st.sampled_from(("pressure", "temp", "alert")))
        constant = draw(INTEGERS if column == "alert" else DECIMALS)
        preds.append((column, draw(st.sampled_from(OPS)), constant))
    return preds


@st.composite
def operations(draw: Any) -> list[tuple[str, Any]]:
    ops: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(2, 9))):
        kind = draw(st.sampled_from(("text", "text", "text", "table", "remove", "again", "restore")))
        if kind == "text":
            # 0 disjuncts: a contradiction; 2 or 3: a disjunction (several slots); one
            # text (register_query, compiled with the others at the next push) or a few
            # (register_queries, which builds or updates the plan itself)
            queries = []
            for _ in range(draw(st.sampled_from((1, 1, 3)))):
                n = draw(st.sampled_from((0, 0, 1, 2, 2, 3, -1)))
                # (-1: a column both below and at a constant; it keeps its slot, its
                # lists simply never meet)
                never: Disjunct = [("temp", "<", "0"), ("temp", ">=", "0")]
                queries.append([never] if n < 0 else [draw(disjuncts()) for _ in range(n)])
            ops.append(("text", queries))
        elif kind == "table":
            n = draw(st.integers(1, 4))
            c1 = draw(st.lists(st.sampled_from((-1.0, 0.0, 2.5, 3.0, 10.0, 1 / 3)), min_size=n, max_size=n))
            k = draw(st.lists(st.sampled_from((0, 1, 3, BIG - 1, BIG + 1)), min_size=n, max_size=n))
            ops.append(("table", (c1, k)))
        elif kind in ("remove", "again"):
            ops.append((kind, draw(st.integers(0, 100))))
        else:
            ops.append(("restore", None))
        if draw(st.integers(0, 2)) == 0:  # (else the next change joins this one in one compile)
            ops.append(("push", draw(st.integers(0, 2**16))))
    ops.append(("push", draw(st.integers(0, 2**16))))
    return ops


def condition_text(query: list[Disjunct]) -> str:
    if not query:
        return "1 > 2"  # a contradiction: constants compared give the query no slot
    return " OR ".join("(" + " AND ".join(f"B.{c} {op} {k}" for c, op, k in d) + ")" for d in query)


def holds(query: list[Disjunct], event: dict[str, Any]) -> bool:
    def one(column: str, op: str, constant: str) -> bool:
        value = event[column]
        if value is None:
            return False
        left, right = Fraction(repr(value)), Fraction(constant)  # a double means its shortest decimal
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right, "=": left == right}[op]

    return any(all(one(*p) for p in d) for d in query)


def events(seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(4):
        out.append(
            {
                "pressure": float(rng.choice([-1.0, 0.0, 2.5, 3.0, 0.1, 9.5, 1 / 3, 10 / 3])),
                "temp": float(rng.choice([-0.5, 0.0, 1.0, 2.5, 7.0, 0.1])),
                "alert": int(rng.choice([0, 1, 3, -2, BIG - 1, BIG, BIG + 1, -BIG - 1])),
            }
        )
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations(), st.booleans(), st.booleans())
def test_each_query_keeps_its_own_matches(ops: list[tuple[str, Any]], batched: bool, bulk: bool) -> None:
    """``bulk``: every registration of two or more queries counts as a bulk one (the plan
    built then, and updated or rebuilt as the threshold doubles, removals between)."""
    threshold = mqo.registrations.BULK
    mqo.registrations.BULK = 2 if bulk else threshold
    try:
        run_operations(ops, batched)
    finally:
        mqo.registrations.BULK = threshold
        gc.unfreeze()


def run_operations(ops: list[tuple[str, Any]], batched: bool) -> None:
    m = mqo.Matcher(DDL)
    live: dict[str, list[Disjunct]] = {}
    removed: dict[str, list[Disjunct]] = {}
    ts = 0.0
    for step, (kind, arg) in enumerate(ops):
        if kind == "text":
            names = [f"x{step}_{i}" for i in range(len(arg))]
            texts = [f"SELECT * FROM B WHERE {condition_text(query)}" for query in arg]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", mqo.NeverMatchesWarning)
                if len(texts) == 1:
                    m.register_query(texts[0], query_id=names[0])
                else:
                    m.register_queries([f"Query ID: {n}\n{t};" for n, t in zip(names, texts, strict=True)])
            live.update(zip(names, arg, strict=True))
        elif kind == "table":
            c1, k = arg
            names = [f"t{step}_{i}" for i in range(len(c1))]
            table = {"c1": np.array(c1), "k": np.array(k, np.int64), "id": np.array(names, dtype=object)}
            m.register_table(TEMPLATE, table, id_column="id")
            for name, a, b in zip(names, c1, k, strict=True):
                live[name] = [[("pressure", "<", repr(a)), ("alert", ">=", str(b))]]
        elif kind == "remove" and live:
            name = sorted(live)[arg % len(live)]
            m.unregister_query(name)
            removed[name] = live.pop(name)
        elif kind == "again" and removed:
            # a removed query back under its name: its list keys equal, not identical, to
            # those the registry kept for the others
            name = sorted(removed)[arg % len(removed)]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", mqo.NeverMatchesWarning)
                m.register_query(f"SELECT * FROM B WHERE {condition_text(removed[name])}", query_id=name)
            live[name] = removed.pop(name)
        elif kind == "restore":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", mqo.NeverMatchesWarning)
                m = mqo.Matcher.restore(decode_snapshot(encode_snapshot(m.snapshot())))
        elif kind == "push":
            tuples = events(arg)
            if batched:
                stamps = [ts + 1 + i for i in range(len(tuples))]
                batch = {"ts": np.array(stamps), **{c: np.array([t[c] for t in tuples]) for c in tuples[0]}}
                found = sorted((mt.query, mt.ts) for mt in m.push_batch("B", batch).matches())
                want = sorted((q, s) for s, t in zip(stamps, tuples, strict=True) for q in live if holds(live[q], t))
                assert found == want, (ops, tuples)
            else:
                for i, t in enumerate(tuples):
                    found = sorted(mt.query for mt in m.push("B", ts + 1 + i, t))
                    assert found == sorted(q for q in live if holds(live[q], t)), (ops, t)
            ts += len(tuples)
