"""Ten thousand subscriptions registered from a table, from texts, and mixed (some one
by one, the rest a table), against the exact reference (tests/references/reference.py),
through removals that compact the registry, names registered again, and a snapshot
restored: the registry keeps a table's rows as columns (mqo/registered.py) and the plan
compile sorts each list's constants straight into its shared arrays
(``SharedCsr.add_sorted``); the matches must be the reference's on every event.
"""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

import mqo
from mqo.registered import BlockRows, BlockRun
from mqo.snapshot_codec import decode_snapshot, encode_snapshot
from tests.differential.test_exact_differential import compare
from tests.references.exact_language import And, Cmp, Col, Column, Query, Schema, Stream, const
from tests.references.reference import Reference, engine_results

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")

SCHEMA = Schema((Stream("E", (Column("a", "INTEGER"), Column("b", "INTEGER"), Column("x", "FLOAT"))),))
TEMPLATE = "SELECT * FROM E WHERE E.a >= :lo AND E.a <= :hi AND E.x >= :xlo AND E.x <= :xhi AND E.b <= :b"
N = 10_000


def table_of(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Interval subscriptions: small integers (constants shared by many: sorted packed
    with their slots), decimals of one place, and for ``b`` integers up to 2**53 - 1
    (a span too wide to pack: sorted by value)."""
    lo = rng.integers(-40, 40, n)
    xlo = np.round(rng.uniform(-5, 5, n), 1)
    b = rng.integers(-(2**40), 2**40, n)
    b[::997] = 2**53 - 1
    return {
        "id": np.array([f"s{k}" for k in range(n)], dtype=object),
        "lo": lo,
        "hi": lo + rng.integers(0, 30, n),
        "xlo": xlo,
        "xhi": np.round(xlo + rng.uniform(0, 4, n), 1),
        "b": b,
    }


def reference_query(name: str, row: dict[str, object]) -> Query:
    def number(v: object) -> Fraction:
        return Fraction(int(v)) if isinstance(v, (int, np.integer)) else Fraction(repr(float(v)))  # type: ignore[arg-type]

    conds = (
        Cmp(">=", Col("E", "a"), const(number(row["lo"]))),
        Cmp("<=", Col("E", "a"), const(number(row["hi"]))),
        Cmp(">=", Col("E", "x"), const(number(row["xlo"]))),
        Cmp("<=", Col("E", "x"), const(number(row["xhi"]))),
        Cmp("<=", Col("E", "b"), const(number(row["b"]))),
    )
    return Query(name, (("E", "E"),), where=And(conds))


def events(rng: random.Random, count: int, start: int) -> list[tuple[float, dict[str, object]]]:
    return [
        (
            float(start + k),
            {
                "a": rng.randint(-45, 75),
                "b": rng.choice([rng.randint(-(2**40), 2**40), 2**53 + 1, 2**53 + 2]),
                "x": round(rng.uniform(-6, 10), 1),
            },
        )
        for k in range(count)
    ]


def test_table_texts_and_mixed_match_the_reference() -> None:
    rng = np.random.default_rng(29)
    table = table_of(rng, N)
    rows = [{k: table[k][i] for k in table} for i in range(N)]
    queries = [reference_query(str(row["id"]), row) for row in rows]
    texts = [q.to_text() for q in queries]
    ref = Reference(SCHEMA)
    for q in queries:
        ref.register(q)
    from_table = mqo.Matcher(SCHEMA.ddl(), idle_timeout=None)
    assert from_table.register_table(TEMPLATE, table, id_column="id") == [str(r["id"]) for r in rows]
    from_texts = mqo.Matcher(SCHEMA.ddl(), idle_timeout=None)
    assert from_texts.register_queries(texts) == [q.name for q in queries]
    mixed = mqo.Matcher(SCHEMA.ddl(), idle_timeout=None)
    for text in texts[:50]:
        mixed.register_query(text)
    mixed.register_table(TEMPLATE, {k: v[50:] for k, v in table.items()}, id_column="id")
    # the table's rows are kept as a block (no object per row), and the mixed matcher's
    # plan reads its records as a run of objects and a run of a block's rows
    assert isinstance(from_table.registry.queries.entries["s7"], BlockRows)
    runs = mixed.registry.records().runs
    assert [type(r) for r in runs] == [list, BlockRun] and len(runs[0]) == 50
    matchers = {"table": from_table, "texts": from_texts, "mixed": mixed}

    def push_all(batch: list[tuple[float, dict[str, object]]], where: str) -> None:
        for ts, values in batch:
            want = ref.push("E", ts, values)
            for name, m in matchers.items():
                compare(f"{where}, ts {ts}, from {name}", engine_results(m.push("E", ts, values)), want)

    pushes = random.Random(7)
    push_all(events(pushes, 8, 0), "registered")
    # removals past half the rows: the registry compacts (the blocks keep their live rows)
    removed = random.Random(3).sample([q.name for q in queries], 6_000)
    for name in removed:
        ref.unregister(name)
        for m in matchers.values():
            m.unregister_query(name)
    for m in matchers.values():
        m.registry._check()  # its rows are its queries' predicates, blocks and all
    push_all(events(pushes, 8, 100), "after removals")
    # names removed are free again: registered anew, as texts of other constants
    again = [reference_query(name, {**rows[int(name[1:])], "lo": -100, "hi": 100}) for name in removed[:20]]
    for q in again:
        ref.register(q)
        for m in matchers.values():
            m.register_query(q.to_text())
    mixed.registry._check()
    push_all(events(pushes, 8, 200), "registered again")
    # a snapshot restored: the blocks' live rows come back as blocks
    restored = mqo.Matcher.restore(decode_snapshot(encode_snapshot(from_table.snapshot())))
    assert restored.query_ids == from_table.query_ids
    matchers = {"restored": restored, **matchers}
    push_all(events(pushes, 8, 300), "restored")
