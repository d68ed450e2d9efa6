"""A table's queries kept as columns (mqo/registered.py) answer as query objects did,
and a list's constants sorted straight into the plan's shared arrays
(``SharedCsr.add_sorted``) are the distinct constants and users a sort by value gives."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mqo
from mqo.plan_compile import SharedCsr
from mqo.registered import BlockRows, BlockRun, RecordList, RegisteredCompiled, RegisteredRow
from tests.unit.test_compile_alike import summary

DDL = "REGISTER STREAM B (p FLOAT, q INTEGER); REGISTER STREAM H (v FLOAT);"
TEMPLATE = "SELECT * FROM B, H MAXWINDOW 5 sec WHERE B.p >= :lo AND B.q <= :k AND H.v < B.p + :c"


def table(n: int, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "id": np.array([f"r{k}" for k in range(n)], dtype=object),
        "lo": np.round(rng.uniform(-10, 10, n), 1),
        "k": rng.integers(-5, 5, n),
        "c": np.round(rng.uniform(-1, 1, n), 2),
    }


def one_by_one(columns: dict[str, np.ndarray]) -> mqo.Matcher:
    """The same queries registered as texts, one call each (an object per query)."""
    m = mqo.Matcher(DDL)
    for name, lo, k, c in zip(*(columns[p].tolist() for p in ("id", "lo", "k", "c")), strict=True):
        text = TEMPLATE.replace(":lo", repr(lo)).replace(":k", str(k)).replace(":c", repr(c))
        m.register_query(text, query_id=name)
    return m


def test_the_ids_a_table_registration_returns_are_the_callers_to_change() -> None:
    """The registry keeps a block's names as the list its compile made: the ids
    register_table and register_queries return are copies, so changing them changes
    no query's name, lookup or result."""
    columns = table(100)
    m = mqo.Matcher(DDL)
    ids = m.register_table(TEMPLATE, columns, id_column="id")
    texts = [
        f"Query ID: t{k}\n" + TEMPLATE.replace(":lo", "1.5").replace(":k", "2").replace(":c", "0.5") for k in range(100)
    ]
    text_ids = m.register_queries(texts)
    ids[:] = ["changed"] * len(ids)
    text_ids.reverse()
    assert m.query_ids == [f"r{k}" for k in range(100)] + [f"t{k}" for k in range(100)]
    assert m.registry.queries["r7"].name == "r7" and "changed" not in m.registry.queries
    plan = m.registrations.ensure_plan()
    assert plan.record_names == m.query_ids
    found = {match.query for match in m.push("B", 0.0, {"p": 10.0, "q": -5}) + m.push("H", 0.5, {"v": 0.0})}
    assert found and found <= set(m.query_ids) and "changed" not in found


def facts(rq: object) -> tuple:
    return (
        summary(rq.compiled),  # type: ignore[attr-defined]
        rq.name,  # type: ignore[attr-defined]
        rq.since_ts,  # type: ignore[attr-defined]
        rq.streams,  # type: ignore[attr-defined]
        rq.aliases,  # type: ignore[attr-defined]
        rq.maxwindow,  # type: ignore[attr-defined]
        rq.exact_maxwindow,  # type: ignore[attr-defined]
        rq.is_multi_stream,  # type: ignore[attr-defined]
        [(d, key.describe(), value) for d, key, value in rq.predicates()],  # type: ignore[attr-defined]
    )


def test_a_table_row_made_when_asked_answers_as_a_query_object() -> None:
    """Through removals that compact the registry (a block then keeps some of its
    rows) and a removed name registered again, every lookup (``queries[name]``,
    ``get``, iteration, ``items``, ``newest``, ``plan.records``) gives what the queries
    registered one by one give, in the same order; the rows themselves are no objects
    (each name's entry is its block's one record of rows)."""
    columns = table(300)
    m = mqo.Matcher(DDL)
    m.register_table(TEMPLATE, columns, id_column="id")
    want = one_by_one(columns)
    assert len({id(e) for e in m.registry.queries.entries.values()}) == 1
    removed = [f"r{k}" for k in range(0, 300, 3)] + [f"r{k}" for k in range(1, 300, 3)][:60]
    for name in removed:
        m.unregister_query(name)
        want.unregister_query(name)
    assert len(m.registry.queries) == len(want.registry.queries) == 300 - len(removed)
    m.register_query(TEMPLATE.replace(":lo", "1").replace(":k", "2").replace(":c", "3"), query_id="r0")
    want.register_query(TEMPLATE.replace(":lo", "1").replace(":k", "2").replace(":c", "3"), query_id="r0")
    m.registry._check()
    got_queries, want_queries = m.registry.queries, want.registry.queries
    assert list(got_queries) == list(want_queries) and list(reversed(got_queries)) == list(reversed(want_queries))
    for name in want_queries:
        rq = got_queries[name]
        assert type(rq) is (RegisteredCompiled if name == "r0" else RegisteredRow)
        assert facts(rq) == facts(want_queries[name]) and facts(got_queries.get(name)) == facts(rq)
        # a row's text is written out from the template (not the caller's spelling):
        # it reads back as the same query
        again = mqo.Matcher(DDL)
        again.register_query(rq.text)
        assert facts(again.registry.queries[name])[0] == facts(want_queries[name])[0]
    assert [facts(rq) for rq in m.registry] == [facts(rq) for rq in want.registry]
    assert [(n, facts(rq)) for n, rq in got_queries.items()] == [(n, facts(rq)) for n, rq in want_queries.items()]
    assert got_queries.get("r3") is None and "r3" not in got_queries and "r2" in got_queries
    with pytest.raises(KeyError):
        got_queries["r3"]
    orders = [rq.order for rq in m.registry]
    assert [rq.name for rq in m.registry.newest(orders[-5])] == list(got_queries)[-4:]
    # a plan's records: its names, the registry's queries, one object per record
    plan = m.registrations.ensure_plan()
    records = plan.records
    assert isinstance(records, RecordList) and [type(r) for r in records.runs] == [BlockRun, list]
    assert [rq.name for rq in records] == plan.record_names == list(got_queries)
    assert [facts(records[i]) for i in range(len(records))] == [facts(rq) for rq in want.registry]
    assert records[-1] is records[len(records) - 1] and records[5] is records[5]
    assert [rq.name for rq in records[2:9:3]] == plan.record_names[2:9:3]
    with pytest.raises(IndexError):
        records[len(records)]
    longer = records + [want_queries["r2"]]  # noqa: RUF005 - what a plan update does
    assert len(longer) == len(records) + 1 and longer[-1] is want_queries["r2"] and longer[4] is records[4]


def test_unregister_and_explain_of_table_rows() -> None:
    """A table row unregistered reports nothing more and leaves the others' results;
    explain shows the block's queries as the same queries registered one by one."""
    columns = table(120, seed=4)
    m, want = mqo.Matcher(DDL), one_by_one(columns)
    m.register_table(TEMPLATE, columns, id_column="id")
    for name in ("r5", "r77", "r119"):
        m.unregister_query(name)
        want.unregister_query(name)
    assert m.explain() == want.explain()
    for ts, (stream, values) in enumerate([("B", {"p": 3.0, "q": -5}), ("H", {"v": 2.0}), ("B", {"p": 9.9, "q": 0})]):
        got = sorted((r.query, r.ts) for r in m.push(stream, float(ts), values))
        assert got == sorted((r.query, r.ts) for r in want.push(stream, float(ts), values))


def test_a_name_given_twice_in_a_table_leaves_the_registry_as_it_was() -> None:
    m = mqo.Matcher(DDL)
    m.register_query("SELECT * FROM B WHERE B.p > 1", query_id="x")
    columns = table(5)
    columns["id"][3] = "r1"
    with pytest.raises(mqo.QueryError, match="query id r1 is given twice"):
        m.register_table(TEMPLATE, columns, id_column="id")
    columns["id"][3] = "x"
    with pytest.raises(mqo.QueryError, match="query id x is already registered"):
        m.register_table(TEMPLATE, columns, id_column="id")
    assert list(m.registry.queries) == ["x"] and m.registry.records().runs[0][0].name == "x"
    m.registry._check()


# ----------------------------------------------------------- SharedCsr.add_sorted


def naive_csr(values: list[float], slots: list[int]) -> tuple[list[float], list[set[int]]]:
    """Distinct constants ascending, and the slots of each (as sets: their order is free)."""
    users: dict[float, set[int]] = defaultdict(set)
    for v, s in zip(values, slots, strict=True):
        users[v].add(s)
    distinct = sorted(users)
    return distinct, [users[v] for v in distinct]


NUMBERS = st.one_of(
    st.integers(-(2**53), 2**53).map(float),
    st.integers(-50, 50).map(float),
    st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: round(v, 1)),
    st.sampled_from([0.0, -0.0, 0.1, 2.0**53, -(2.0**53), 2.0**53 + 2, 1e300, -1e300, 5e-324]),
)


@given(st.lists(st.lists(NUMBERS, max_size=60), min_size=1, max_size=4), st.integers(0, 2**31 - 200))
@settings(max_examples=300, deadline=None)
def test_add_sorted_gives_the_distinct_constants_and_their_users(lists: list[list[float]], first_slot: int) -> None:
    """Several lists written one after another into one set of shared arrays (integers
    packed with their slots where they fit, the others sorted by value; slots up to
    the largest int32)."""
    csr = SharedCsr(sum(map(len, lists)))
    for values in lists:
        slots = [first_slot + k * 3 for k in range(len(values))]
        constants, offsets, users, first = csr.add_sorted(np.array(values, np.float64), np.array(slots, np.int32))
        distinct, want_users = naive_csr(values, slots)
        assert constants.tolist() == distinct and constants.dtype == np.float64
        assert [set(users[offsets[p] : offsets[p + 1]].tolist()) for p in range(len(distinct))] == want_users
        assert offsets[-1] - offsets[0] == len(values) and users.dtype == np.int32
        assert csr.constants[first : first + len(distinct)].tolist() == distinct


def test_held_results_of_table_rows_survive_a_whole_compile() -> None:
    """emit='ordered': results of a table's rows held behind the watermark are still
    released after a bulk registration compiles the plan whole (a plan makes its own
    records of a block's rows, so a held result follows its query by its order, not
    by the record object)."""
    single = "SELECT * FROM B WHERE B.p >= :lo"
    m = mqo.Matcher(DDL, emit="ordered", idle_timeout=None, allowed_lateness=10)
    m.register_table(single, {"id": np.array(["a", "b", "c"], dtype=object), "lo": np.array([1.0, 2.0, 9.0])}, "id")
    assert m.push("B", 5.0, {"p": 3.0, "q": 0}) == [] and m.held_results == 2
    before = m.registrations.plan
    more = {"id": np.array([f"m{k}" for k in range(1500)], dtype=object), "lo": np.full(1500, 100.0)}
    m.register_table(single, more, "id")
    m.push("B", 6.0, {"p": 0.0, "q": 0})
    assert m.registrations.plan is not before and m.registrations.plan.base_plan is None  # compiled whole
    assert m.held_results == 2
    released = m.heartbeat(100.0)
    assert sorted((r.query, r.ts) for r in released) == [("a", 5.0), ("b", 5.0)]


def test_a_name_given_twice_among_template_texts_registers_none() -> None:
    """Texts read from one template come as one block, whose names the registry checks
    as it adds them: a name given twice is the same error, and nothing is registered."""
    m = mqo.Matcher(DDL)
    texts = [f"Query ID: t{k}\nSELECT * FROM B WHERE B.p >= {k}.5 AND B.q <= {k}" for k in range(200)]
    texts[150] = texts[150].replace("t150", "t20")
    with pytest.raises(mqo.QueryError, match="query id t20 is given twice"):
        m.register_queries(texts)
    assert len(m.registry) == 0 and m.query_ids == []
    texts[150] = texts[150].replace("t20", "t150")
    assert m.register_queries(texts) == [f"t{k}" for k in range(200)]
    assert isinstance(m.registry.queries.entries["t7"], BlockRows)  # (read from the template: a block's row)
    m.registry._check()


def test_queries_registered_one_at_a_time_are_the_registry_columns() -> None:
    """A registration of a few queries (one call each, as a subscription service makes
    them) extends the registry's predicate columns without numpy, and a larger one
    with it: both keep the columns and use counts those of the queries (``_check``:
    every row's query, disjunct, list and constant), with OR, strings, exact
    constants (1/3) and lists dropped and made again; matching follows each change."""
    m = mqo.Matcher("REGISTER STREAM E (a FLOAT, b FLOAT, s STRING);")
    registry = m.registry

    def text(name: str, a: float, b: float) -> str:
        return f"Query ID: {name}\nSELECT * FROM E WHERE E.a >= {a} AND E.b <= {b}"

    m.register_query(text("q0", 1.0, 5.0))
    m.register_query("Query ID: q1\nSELECT * FROM E WHERE (E.a < 1/3 AND E.s = 'x') OR E.b > 7")
    registry._check()
    m.unregister_query("q0")  # the last users of E.a >= and E.b <=: both lists dropped
    registry._check()
    m.register_query(text("q2", 3.0, 6.0))
    registry._check()
    assert sorted(r.query for r in m.push("E", 1.0, {"a": 3.0, "b": 6.0, "s": "y"})) == ["q2"]
    assert sorted(r.query for r in m.push("E", 2.0, {"a": 0.3, "b": 8.0, "s": "x"})) == ["q1"]
    m.register_queries([text(f"f{k}", float(k), 10.0 - k) for k in range(3)])
    registry._check()
    m.register_queries([text(f"g{k}", float(k % 7), 10.0 + k) for k in range(300)])  # past the few rows
    registry._check()
    got = sorted(r.query for r in m.push("E", 3.0, {"a": 2.0, "b": 8.5, "s": "z"}))
    assert got == sorted(["f0", "f1", "q1"] + [f"g{k}" for k in range(300) if k % 7 <= 2])
