"""Tables against their exact reference (tests/references/exact_tables.py).

Random interleavings of stream tuples (out of order, some late, NULL and fractional
keys), table upserts and deletes (at equal ts, before and after the tuples that read
them, from the start), and registrations and removals of queries reading tables;
every result compared exactly, through push, push_batch and a snapshot restored
midway. Also: old versions are dropped once superseded behind the horizon.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import mqo
from mqo.snapshot_codec import decode_snapshot, encode_snapshot
from tests.references.exact_language import (
    FLOAT,
    INTEGER,
    STRING,
    And,
    Cmp,
    Col,
    Column,
    Duration,
    Item,
    Num,
    Or,
    Query,
    Schema,
    Str,
    Stream,
)
from tests.references.exact_tables import Table, TableReference
from tests.references.reference import Result, engine_results

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")

SCHEMA = Schema(
    (
        Stream("H", (Column("k", INTEGER), Column("x", FLOAT), Column("s", STRING))),
        Stream("B", (Column("k", FLOAT), Column("y", INTEGER))),
    )
)
T = Table("T", (Column("id", INTEGER), Column("w", STRING), Column("a", INTEGER), Column("f", FLOAT)), ("id",))
U = Table("U", (Column("k1", INTEGER), Column("k2", STRING), Column("v", FLOAT)), ("k1", "k2"))
TABLES = (T, U)
KEYS = (0, 1, 2)
WARDS = ("ICU", "GEN")
TIMES = tuple(Fraction(k, 2) for k in range(0, 16))


def queries(c: list[str]) -> list[Query]:
    """The workload's queries, their constants drawn (``c``)."""
    key_t = Cmp("=", Col("H", "k"), Col("P", "id"))
    return [
        Query(
            "icu",
            (("H", "H"), ("P", "T")),
            where=And((key_t, Cmp("=", Col("P", "w"), Str("ICU")), Cmp(">", Col("H", "x"), Num(c[0])))),
        ),
        Query(
            "mixed",
            (("H", "H"), ("P", "T")),
            where=And(
                (
                    Cmp("=", Col("P", "id"), Col("H", "k")),
                    Or((Cmp(">", Col("P", "a"), Col("H", "x")), Cmp("<", Col("P", "f"), Num(c[1])))),
                )
            ),
            select=(Item(Col("H", "k")), Item(Col("P", "a"), "age"), Item(Col("P", "w"))),
        ),
        Query(
            "join",
            (("H", "H"), ("B", "B"), ("P", "T")),
            maxwindow=Duration(c[2]),
            where=And(
                (
                    Cmp("=", Col("B", "k"), Col("P", "id")),
                    Cmp("=", Col("H", "k"), Col("B", "y")),
                    Cmp(">=", Col("P", "a"), Num(c[3])),
                )
            ),
        ),
        Query(
            "composite",
            (("V", "U"), ("H", "H")),
            where=And(
                (
                    Cmp("=", Col("V", "k1"), Col("H", "k")),
                    Cmp("=", Col("V", "k2"), Col("H", "s")),
                    Cmp("<", Col("V", "v"), Col("H", "x")),
                )
            ),
        ),
        Query("plain", (("H", "H"),), where=Cmp(">", Col("H", "x"), Num(c[0]))),
        Query(
            "selfjoin",
            (("h1", "H"), ("h2", "H"), ("P", "T")),
            maxwindow=Duration("2"),
            where=And(
                (
                    Cmp("=", Col("h2", "k"), Col("P", "id")),
                    Cmp("<", Col("h1", "x"), Col("h2", "x")),
                    Cmp("!=", Col("P", "w"), Col("h1", "s")),
                )
            ),
        ),
    ]


numbers = st.sampled_from(["0", "0.5", "1", "1.5", "2", "3"])
times = st.one_of(st.sampled_from(TIMES).map(float), st.just(None))


def t_row() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "id": st.sampled_from(KEYS),
            "w": st.sampled_from(WARDS),
            "a": st.sampled_from((0, 1, 2)),
            "f": st.one_of(st.none(), st.sampled_from((0.3, 1.5, 2.0))),
        }
    )


def u_row() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"k1": st.sampled_from(KEYS), "k2": st.sampled_from(("a", "b")), "v": st.sampled_from((0.5, 1.0, 2.3))}
    )


ops = st.one_of(
    st.tuples(
        st.just("H"),
        st.sampled_from(TIMES).map(float),
        st.fixed_dictionaries(
            {
                "k": st.one_of(st.none(), st.sampled_from(KEYS)),
                "x": st.sampled_from((0.0, 0.5, 1.0, 1.5, 2.5)),
                "s": st.sampled_from(("a", "b")),
            }
        ),
    ),
    st.tuples(
        st.just("B"),
        st.sampled_from(TIMES).map(float),
        st.fixed_dictionaries({"k": st.sampled_from((0.0, 1.0, 1.5, 2.0, math.nan)), "y": st.sampled_from(KEYS)}),
    ),
    st.tuples(st.just("upsert T"), times, st.lists(t_row(), min_size=1, max_size=3)),
    st.tuples(st.just("upsert U"), times, st.lists(u_row(), min_size=1, max_size=2)),
    st.tuples(st.just("delete T"), times, st.lists(st.sampled_from(KEYS), min_size=1, max_size=2)),
    st.tuples(st.just("toggle"), st.sampled_from(("icu", "mixed", "join", "composite", "selfjoin")), st.none()),
)


def _sorted(results: list[Result]) -> list[str]:
    return sorted(str(r) for r in results)


def _text(query: Query) -> str:
    return query.to_text()


def _batch(stream: str, rows: list[tuple[float, dict[str, Any]]]) -> pa.Table:
    types = {
        c.name: {INTEGER: pa.int64(), FLOAT: pa.float64(), STRING: pa.string()}[c.type]
        for c in SCHEMA.stream(stream).columns
    }
    columns = {"ts": pa.array([ts for ts, _ in rows], pa.float64())}
    for name, dtype in types.items():
        columns[name] = pa.array([values[name] for _, values in rows], dtype)
    return pa.table(columns)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    constants=st.lists(numbers, min_size=4, max_size=4),
    lateness=st.sampled_from((0.0, 1.0)),
    first=st.tuples(st.lists(t_row(), min_size=3, max_size=3), st.lists(u_row(), max_size=3)),
    workload=st.lists(ops, min_size=1, max_size=40),
    mode=st.sampled_from(("push", "batch", "restore")),
    declare_at=st.sampled_from((0, 0, 3, 8)),
)
def test_tables_match_the_reference(
    constants: list[str], lateness: float, first: Any, workload: list[Any], mode: str, declare_at: int
) -> None:
    """``declare_at``: the tables and their queries come after that many steps (of
    tuples only), while a join over the streams keeps tuples for them to read."""
    workload_queries = queries(constants)
    by_name = {q.name: q for q in workload_queries}
    registered = [q for q in workload_queries if q.name not in ("composite", "selfjoin")]
    pairs = Query(
        "pairs", (("H", "H"), ("B", "B")), maxwindow=Duration("3"), where=Cmp("=", Col("H", "k"), Col("B", "y"))
    )
    ref = TableReference(SCHEMA, TABLES, lateness)
    m = mqo.Matcher(SCHEMA.ddl(), allowed_lateness=lateness)
    ref.register(pairs)
    m.register_query(_text(pairs))
    expected: list[Result] = []
    got: list[Result] = []
    for kind, a, b in [op for op in workload[:declare_at] if op[0] in ("H", "B")]:
        expected.extend(ref.push(kind, a, b))
        got.extend(engine_results(m.push(kind, a, b)))
    workload = workload[declare_at:]
    for q in registered:
        ref.register(q)
    m.register_queries("\n".join(t.to_text() for t in TABLES) + "\n" + "\n".join(_text(q) for q in registered))
    t_rows, u_rows = first
    for i, row in enumerate(t_rows):  # every key of T has a row from the start
        row["id"] = KEYS[i]
    for table, rows in (("T", t_rows), ("U", u_rows)):
        if rows:
            ref.upsert(table, rows, None)
            m.upsert_rows(table, rows, None)
    live = {q.name for q in registered}
    pending: list[tuple[str, float, dict[str, Any]]] = []

    def flush() -> None:
        if not pending:
            return
        stream = pending[0][0]
        for _, ts, values in pending:
            expected.extend(ref.push(stream, ts, values))
        got.extend(engine_results(m.push_batch(stream, _batch(stream, [(ts, v) for _, ts, v in pending])).matches()))
        pending.clear()

    for step, (kind, a, b) in enumerate(workload):
        if kind in ("H", "B"):
            if mode == "batch":
                if pending and pending[0][0] != kind:
                    flush()
                pending.append((kind, a, b))
                continue
            expected.extend(ref.push(kind, a, b))
            got.extend(engine_results(m.push(kind, a, b)))
            continue
        flush()
        if kind.startswith("upsert"):
            table = kind.split()[1]
            ref.upsert(table, b, a)
            m.upsert_rows(table, b, a)
        elif kind == "delete T":
            ref.delete("T", [{"id": k} for k in b], a)
            m.delete_rows("T", b, a)
        else:
            if a in live:
                ref.unregister(a)
                m.unregister_query(a)
                live.discard(a)
            else:
                ref.register(by_name[a])
                m.register_query(_text(by_name[a]))
                live.add(a)
        if mode == "restore" and step % 5 == 4:
            m = mqo.Matcher.restore(decode_snapshot(encode_snapshot(m.snapshot())))
    flush()
    note(f"expected {len(expected)} results")
    event("results" if expected else "no results")
    assert Counter(_sorted(got)) == Counter(_sorted(expected))


def test_an_update_is_not_seen_by_an_older_tuple() -> None:
    """The issue's example: an update at ts 50 is not seen by a tuple of ts 40 (pushed after it)."""
    m = mqo.Matcher("REGISTER STREAM H (patient INTEGER, beatrate FLOAT);", allowed_lateness=100)
    m.register_queries(
        "CREATE TABLE patients (id INTEGER, ward STRING) KEY (id);\n"
        "Query ID: icu\nSELECT * FROM H, patients P WHERE H.patient = P.id AND P.ward = 'ICU';"
    )
    m.upsert_rows("patients", [{"id": 7, "ward": "ICU"}], None)
    m.upsert_rows("patients", [{"id": 7, "ward": "GEN"}], 50)
    assert [r.values["P.ward"] for r in m.push("H", 60, {"patient": 7, "beatrate": 1.0})] == []
    assert [r.values["P.ward"] for r in m.push("H", 40, {"patient": 7, "beatrate": 1.0})] == ["ICU"]
    assert m.push("H", 50, {"patient": 7, "beatrate": 1.0}) == []  # (a version holds from its own ts on)


def test_superseded_versions_behind_the_horizon_are_dropped() -> None:
    """A key updated at every tuple keeps a bounded number of versions."""
    m = mqo.Matcher("REGISTER STREAM H (k INTEGER);")
    m.register_queries("CREATE TABLE t (k INTEGER, v INTEGER) KEY (k);\nSELECT * FROM H, t WHERE H.k = t.k;")
    table = m.registrations.tables.table("t")
    for i in range(2000):
        m.upsert_rows("t", [{"k": i % 3, "v": i}], float(i))
        assert [r.values["t.v"] for r in m.push("H", float(i), {"k": i % 3})] == [i]
    assert table.count < 40
