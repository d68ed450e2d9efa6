"""register_table: each row's query is exactly its written-out text's (differential)."""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
import predicates.table
from mqo.registry import RegisteredRow
from mqo.snapshot_codec import decode_snapshot, encode_snapshot
from predicates.records import RowQuery
from tests.unit.test_compile_alike import summary

DDL = """
REGISTER STREAM B (pressure FLOAT, temp FLOAT, alert INTEGER);
REGISTER STREAM H (beatrate FLOAT, vib FLOAT, alert INTEGER);
"""

# comparisons over parameters c1, c2 (numbers of any sign) and k (small integers)
ONE_STREAM = [
    "B.pressure < :c1",
    "B.temp >= :c2",
    ":c1 <= B.temp",
    "B.pressure + 3 < :c1",
    "B.pressure - :c2 > 2.5",
    "B.pressure * 2 >= :c1",
    "B.temp / 4 <= :c2",
    "B.pressure / :k > 1",
    "B.temp >= :c1 AND B.temp >= :c2",
    "-B.temp < :c2",
    "B.alert = :k",
    "B.pressure * :k <= :c1",
    "B.pressure < 7",
    # comparisons no template reads: a residual, one that never holds, a literal with
    # an exponent, a residual with a parameter (written in per group)
    "B.pressure * B.temp > -9",
    "1 > 2",
    "B.temp < 1e3",
    "B.pressure * B.temp > :c1",
    # a sign right before a parameter: a negative value makes the rest a comment
    "2-:c2 < B.temp",
]
TWO_STREAMS = [
    "B.pressure <= :k * H.vib",
    "H.beatrate > :c2",
    "B.pressure + :c1 < H.vib",
    "B.ts <= H.ts",
]
FLOATS = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False).map(lambda v: round(v, 1)),
    st.sampled_from([0.0, -0.0, 0.1, 0.5, 1e-300, 1e300, -2.5, 3.0, 123456789.123]),
)


def written(value: object) -> str:
    """A value as it prints: what it means in a query text."""
    return str(int(value)) if isinstance(value, (int, np.integer)) else repr(float(value))


@st.composite
def cases(draw):
    two = draw(st.booleans())
    pool = ONE_STREAM + (TWO_STREAMS if two else [])
    conds = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4))
    if not any(":" in c for c in conds):
        conds.append("B.temp > :c1")  # a template has a parameter
    if two:
        window = draw(st.sampled_from(["20", ":w"]))
        # a parameter in the WINDOW clause or the SELECT list is written in per group
        order = draw(st.sampled_from(["", " WINDOW B.ts <= H.ts", " WINDOW B.ts <= H.ts + :k"]))
        select = draw(st.sampled_from(["*", "B.pressure + :c1 AS p"]))
        template = f"SELECT {select} FROM B, H{order} MAXWINDOW {window} WHERE " + " AND ".join(conds)
    else:
        template = "SELECT * FROM B WHERE " + " AND ".join(conds)
    n = draw(st.integers(1, 12))
    table = {
        "c1": np.array(draw(st.lists(FLOATS, min_size=n, max_size=n)), dtype=np.float64),
        "c2": np.array(draw(st.lists(FLOATS, min_size=n, max_size=n)), dtype=np.float64),
        "k": np.array(draw(st.lists(st.sampled_from([0, 1, 2, -1, 3]), min_size=n, max_size=n)), dtype=np.int64),
        "w": np.array(draw(st.lists(st.sampled_from([1, 5, 20]), min_size=n, max_size=n)), dtype=np.int64),
    }
    return template, table


def text_of(template: str, table: dict, row: int) -> str:
    text = template
    for name in ("c1", "c2", "k", "w"):  # no name is a prefix of another
        text = text.replace(f":{name}", written(table[name][row]))
    return text


def matches(m: mqo.Matcher, seed: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    found = []
    for t in range(3):
        for stream in ("B", "H"):
            batch = {
                "ts": np.array([2.0 * t + (stream == "H")]),
                "alert": rng.integers(-1, 4, 1),
                **{c: rng.uniform(-10, 10, 1).round(1) for c in ("pressure", "temp", "beatrate", "vib")},
            }
            if stream == "B":
                batch = {c: batch[c] for c in ("ts", "alert", "pressure", "temp")}
            else:
                batch = {c: batch[c] for c in ("ts", "alert", "beatrate", "vib")}
            found += [(mt.query, tuple(sorted(mt.ids.items()))) for mt in m.push_batch(stream, batch).matches()]
    return sorted(found)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases(), st.integers(0, 2**16))
def test_table_rows_are_their_written_texts(case, seed):
    template, table = case
    n = len(table["c1"])
    texts = [text_of(template, table, row) for row in range(n)]
    want = mqo.Matcher(DDL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want.register_queries(texts)
        except mqo.QueryError as err:
            with pytest.raises(mqo.QueryError) as got_err:
                mqo.Matcher(DDL).register_table(template, table)
            assert got_err.value.message == err.message
            return
        got = mqo.Matcher(DDL)
        ids = got.register_table(template, table)
    assert ids == [str(i + 1) for i in range(n)]
    assert [summary(q.compiled) for q in got.registry] == [summary(q.compiled) for q in want.registry], texts
    assert matches(got, seed) == matches(want, seed)


def test_tables_from_pandas_and_arrow_name_rows_by_their_id_column():
    frame = pd.DataFrame({"sub": ["a", "b", "c"], "lo": [1.5, 0.1, -3.0], "hi": [10, 20, 30]})
    template = "SELECT * FROM B WHERE B.pressure >= :lo AND B.pressure <= :hi"
    for table in (frame, pa.Table.from_pandas(frame)):
        m = mqo.Matcher(DDL)
        assert m.register_table(template, table, id_column="sub") == ["a", "b", "c"]
        assert m.registry.queries["b"].text.endswith("WHERE B.pressure >= 0.1 AND B.pressure <= 20")
        got = m.push_batch("B", {"ts": [1.0], "pressure": [5.0], "temp": [0.0], "alert": [0]})
        assert sorted(mt.query for mt in got.matches()) == ["a", "b", "c"]


def test_template_errors_keep_their_positions():
    m = mqo.Matcher(DDL)
    with pytest.raises(mqo.QueryError, match="parameter name") as err:
        m.register_table("SELECT * FROM B WHERE B.pressure < : lo", {"lo": [1.0]})
    assert err.value.span is not None and err.value.span.start == 35
    with pytest.raises(mqo.QueryError, match="no column 'hi'"):
        m.register_table("SELECT * FROM B WHERE B.pressure < :hi", {"lo": [1.0]})
    with pytest.raises(mqo.QueryError, match="no query text can write"):
        m.register_table("SELECT * FROM B WHERE B.pressure < :lo", {"lo": [float("nan")]})
    with pytest.raises(mqo.QueryError, match=r"unknown|no column|nosuch") as err:
        m.register_table("SELECT * FROM B WHERE B.nosuch < :lo", {"lo": [1.0, 2.0]})
    assert err.value.span is not None  # the row's text, compiled the usual way, says where
    with pytest.raises(mqo.QueryError, match="given twice"):
        m.register_table("SELECT * FROM B WHERE B.pressure < :lo", {"lo": [1.0, 2.0], "id": [7, 7]}, id_column="id")
    assert len(m.registry) == 0


def test_a_template_is_compiled_once_not_per_row():
    n = 500
    table = {"lo": np.arange(n) * 0.1, "k": np.arange(n) % 2 + 1}
    m = mqo.Matcher(DDL)
    m.register_table("SELECT * FROM B, H MAXWINDOW 5 WHERE B.pressure >= :lo AND B.temp <= :k * H.vib", table)
    # per k (the factor is structural): two comparisons, learned once each; no row read alone
    assert m.registry.compiler.learned <= 4
    assert all(isinstance(q.compiled, RowQuery) for q in m.registry)
    assert m.registry.queries["8"].text.endswith("WHERE B.pressure >= 0.7000000000000001 AND B.temp <= 2*H.vib")


def test_table_queries_unregister_snapshot_and_restore_like_text_queries():
    rng = np.random.default_rng(3)
    table = {"c1": rng.uniform(-5, 5, 40).round(2), "k": rng.integers(1, 3, 40)}
    template = "SELECT * FROM B, H MAXWINDOW 4 WHERE B.pressure >= :c1 AND B.temp <= :k * H.vib AND H.beatrate > 1"
    got = mqo.Matcher(DDL, check=True)
    got.register_table(template, table)
    want = mqo.Matcher(DDL, check=True)
    want.register_queries([text_of(template, {**table, "c2": table["c1"], "w": table["k"]}, r)
                           for r in range(40)])  # fmt: skip
    for m in (got, want):
        for name in ("3", "17", "40"):
            m.unregister_query(name)
    assert [summary(q.compiled) for q in got.registry] == [summary(q.compiled) for q in want.registry]
    restored = mqo.Matcher.restore(got.snapshot())
    assert matches(got, 5) == matches(want, 5) == matches(restored, 5)


def test_a_placeholder_glued_to_a_number_is_left_to_the_written_text():
    # ``:c1.5`` is the parameter c1 followed by ``.5``: each row's text decides what it is
    table = {"c1": np.array([3.0, 4.0])}
    full = {"c1": table["c1"], "c2": table["c1"], "k": [1, 1], "w": [1, 1]}
    with pytest.raises(mqo.QueryError) as want:
        mqo.Matcher(DDL).register_queries([text_of("SELECT * FROM B WHERE B.pressure < :c1.5", full, 0)])
    with pytest.raises(mqo.QueryError) as got:
        mqo.Matcher(DDL).register_table("SELECT * FROM B WHERE B.pressure < :c1.5", table)
    assert got.value.message == want.value.message


@pytest.mark.parametrize("seed", range(4))
def test_registry_rows_stay_the_queries_predicates_through_changes(seed: int) -> None:
    """Tables (kept as their blocks), texts (some with exact and string-free constants
    past the doubles) and removals, interleaved until the registry compacts more than
    once: after every change the registry's rows are its queries' predicates in
    registration order (``QueryRegistry._check``), and the matches are those of the
    same queries registered and removed as written-out texts."""
    rnd = random.Random(seed)
    template = "SELECT * FROM B WHERE B.pressure < :c1 AND B.temp >= :c2"
    got, want = mqo.Matcher(DDL), mqo.Matcher(DDL)
    live: list[str] = []
    for step in range(30):
        roll = rnd.random()
        if roll < 0.35:
            n = rnd.randint(2, 30)
            table = {
                "c1": np.array([round(rnd.uniform(-10, 10), 1) for _ in range(n)]),
                "c2": np.array([round(rnd.uniform(-10, 10), 1) for _ in range(n)]),
                "id": np.array([f"t{step}_{i}" for i in range(n)], dtype=object),
            }
            got.register_table(template, table, id_column="id")
            full = {**table, "k": [1] * n, "w": [1] * n}
            want.register_queries([f"Query ID: t{step}_{i}\n" + text_of(template, full, i) for i in range(n)])
            live += [f"t{step}_{i}" for i in range(n)]
        elif roll < 0.6:
            texts = [
                f"Query ID: x{step}_{i}\nSELECT * FROM B WHERE B.pressure * 3 < {rnd.randint(-9, 9)} AND B.alert = 1"
                if i % 2
                else f"Query ID: x{step}_{i}\nSELECT * FROM B, H MAXWINDOW 3 WHERE B.temp <= 2 * H.vib + {i}"
                for i in range(rnd.randint(1, 6))
            ]
            for m in (got, want):
                m.register_queries(texts)
            live += [t.split("\n")[0].removeprefix("Query ID: ") for t in texts]
        else:
            for name in rnd.sample(live, k=min(len(live), rnd.randint(1, 25))):
                live.remove(name)
                for m in (got, want):
                    m.unregister_query(name)
        got.registry._check()
        if step % 10 == 9:
            # a snapshot keeps each table's rows as one entry (template, names, constants)
            snap = got.snapshot()
            assert len(snap["queries"]) + sum(len(t["names"]) for t in snap["tables"]) == len(live)
            assert not any(name.startswith("t") for name, _, _ in snap["queries"])
            restored = mqo.Matcher.restore(decode_snapshot(encode_snapshot(snap)))
            restored.registry._check()
            assert restored.query_ids == got.query_ids
            assert [q.text for q in restored.registry] == [q.text for q in got.registry]
            assert matches(got, step) == matches(want, step) == matches(restored, step)
    assert got.query_ids == want.query_ids == live


def test_large_builds_give_their_freed_memory_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bulk registration, a whole compile and the kernel tables of a large plan each
    hand the C heap's freed pages back (the threshold lowered here so that a small
    workload counts as large); small ones do not call it at all."""
    import mqo.memory

    calls: list[int] = []
    monkeypatch.setattr(mqo.memory, "_looked", True)
    monkeypatch.setattr(mqo.memory, "_trim", lambda pad: calls.append(pad) or 1)
    table = {"c1": np.arange(50.0), "c2": np.arange(50.0)}
    template = "SELECT * FROM B WHERE B.pressure < :c1 AND B.temp >= :c2"
    m = mqo.Matcher(DDL)
    m.register_table(template, table)
    m.push("B", 1.0, {"pressure": 1.0, "temp": 1.0, "alert": 0})
    assert calls == []
    monkeypatch.setattr(mqo.memory, "LARGE_BUILD", 50)
    m = mqo.Matcher(DDL)
    m.register_table(template, table)
    assert calls == [0]
    got = m.push("B", 1.0, {"pressure": 1.0, "temp": 100.0, "alert": 0})  # compile, then kernel tables
    assert calls == [0, 0, 0]
    assert sorted(int(r.query) for r in got) == list(range(3, 51))


def test_releasing_freed_memory_is_real_on_glibc_and_a_no_op_elsewhere() -> None:
    import ctypes
    import sys

    import mqo.memory

    assert mqo.memory.release_freed_memory(10) is False
    glibc = sys.platform.startswith("linux") and hasattr(ctypes.CDLL(None), "malloc_trim")
    assert mqo.memory.release_freed_memory(mqo.memory.LARGE_BUILD) is glibc


def test_a_name_given_twice_registers_nothing_and_leaves_the_names_free() -> None:
    """A table's rows go in whole or not at all: a repeated id (found as the rows are
    added) or an id already taken leaves the registry as it was, and its names can be
    registered afterwards."""
    template = "SELECT * FROM B WHERE B.pressure < :c1 AND B.temp >= :c2"
    m = mqo.Matcher(DDL)
    m.register_query("Query ID: x\nSELECT * FROM B WHERE B.alert = 1")
    before = m.ensure_plan()
    table = {"c1": np.arange(6.0), "c2": np.zeros(6), "id": np.array(["a", "b", "c", "d", "b", "e"], dtype=object)}
    with pytest.raises(mqo.QueryError, match="query id b is given twice"):
        m.register_table(template, table, id_column="id")
    m.registry._check()
    assert m.query_ids == ["x"] and m.registrations.plan is before  # the registry did not change
    table["id"] = np.array(["a", "b", "c", "d", "x", "e"], dtype=object)
    with pytest.raises(mqo.QueryError, match="query id x is already registered"):
        m.register_table(template, table, id_column="id")
    # the registry itself takes a block's rows back (what register_table leaves to it)
    rows = predicates.table.compile_table(
        m.registry.compiler,
        predicates.table.parse_template(template),
        {"c1": table["c1"], "c2": table["c2"]},
        ["p", "q", "p", "r", "s", "t"],
        lambda texts, rows: pytest.fail("rows compiled from their texts"),
    )
    assert type(rows) is predicates.table.RowQueries
    with pytest.raises(mqo.QueryError, match="query id p is given twice"):
        m.registry.add(rows, 0.0)
    with pytest.raises(mqo.QueryError, match="query id p is given twice"):
        m.registry.add(rows, [0.0] * 6)  # one horizon per row: added one by one, checked first
    m.registry._check()
    assert m.query_ids == ["x"]
    table["id"] = np.array(["a", "b", "c", "d", "f", "e"], dtype=object)
    m.register_table(template, table, id_column="id")
    m.registry._check()
    assert m.query_ids == ["x", "a", "b", "c", "d", "f", "e"]
    got = m.push("B", 1.0, {"pressure": 2.5, "temp": 2.5, "alert": 1})
    assert sorted(mt.query for mt in got) == ["d", "e", "f", "x"]


def test_a_tables_rows_read_as_their_queries() -> None:
    """A table held as one block reads like any list of compiled queries: by position
    (negative too), in order, each with its row's constants; out of range is an
    IndexError."""
    from predicates.records import RowQueries

    m = mqo.Matcher(DDL)
    table = {"c1": np.array([1.5, -0.0, 3.0]), "c2": np.array([-2.0, 4.0, 0.25])}
    names = m.register_table("SELECT * FROM B WHERE B.pressure < :c1 AND -B.temp < :c2", table)
    compiled = m.registry.compiler
    parsed_rows = predicates.table.compile_table(
        compiled,
        predicates.table.parse_template("SELECT * FROM B WHERE B.pressure < :c1 AND -B.temp < :c2"),
        {"c1": table["c1"], "c2": table["c2"]},
        ["p", "q", "r"],
        lambda texts, rows: pytest.fail("rows compiled from their texts"),
    )
    assert type(parsed_rows) is RowQueries and len(parsed_rows) == 3
    assert [q.name for q in parsed_rows] == ["p", "q", "r"] and parsed_rows[-1].name == "r"
    constants = [[(str(key), value) for key, value in q.disjuncts[0][0]] for q in parsed_rows]
    assert [[v for _, v in row] for row in constants] == [[1.5, 2.0], [0.0, -4.0], [3.0, -0.25]]
    assert all(str(v) != "-0.0" for row in constants for _, v in row)  # -0.0 prints as a zero and is one
    with pytest.raises(IndexError):
        parsed_rows[3]
    # the registered rows are the same queries, under the matcher's names
    assert [rq.name for rq in m.registry] == names
    assert [rq.text for rq in m.registry] == [q.renamed(n).text for q, n in zip(parsed_rows, names, strict=True)]


def test_a_table_row_cannot_take_an_aggregate_querys_id() -> None:
    m = mqo.Matcher(DDL)
    m.register_query("Query ID: agg\nSELECT COUNT(*) FROM B [RANGE 5 SECONDS]")
    with pytest.raises(mqo.QueryError, match="query id agg is already registered"):
        m.register_table("SELECT * FROM B WHERE B.pressure < :c", {"c": [1.0, 2.0], "id": ["x", "agg"]}, id_column="id")
    assert m.query_ids == ["agg"]


def test_a_snapshot_of_texts_only_restores_a_tables_rows_alike() -> None:
    """A snapshot that keeps every query as a text (no table entries) restores the same
    queries as one that keeps a table as its template and rows."""
    m = mqo.Matcher(DDL)
    m.register_query("Query ID: x\nSELECT * FROM B WHERE B.alert = 1")
    m.register_table(
        "SELECT * FROM B, H MAXWINDOW 4 WHERE B.pressure < :c1 AND B.temp <= 2 * H.vib + :c2 AND B.pressure * B.temp > -9",
        {"c1": np.array([1.5, -2.0, 0.1]), "c2": np.array([-3.0, 0.0, 1e20]), "id": ["a", "b", "c"]},
        id_column="id",
    )
    m.register_query("Query ID: y\nSELECT * FROM H WHERE H.vib > 0.3")
    snap = m.snapshot()
    assert [t["names"] for t in snap["tables"]] == [["a", "b", "c"]] and snap["tables"][0]["at"] == 1
    old = {**snap, "queries": [(rq.name, rq.text, -math.inf) for rq in m.registry]}
    del old["tables"]
    restored = mqo.Matcher.restore(snap)
    for r in (restored, mqo.Matcher.restore(old)):
        assert r.query_ids == ["x", "a", "b", "c", "y"]
        assert [q.text for q in r.registry] == [q.text for q in m.registry]
    assert isinstance(restored.registry.queries["b"], RegisteredRow)  # registered as a block again
