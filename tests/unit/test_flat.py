"""The string-cut compile path (predicates.flat) gives exactly the full front end's queries."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
import predicates
from predicates import Catalog
from predicates.flat import FlatCompiler
from predicates.frontend import compile_queries, front_end
from predicates.records import CompiledQuery, from_normalized
from predicates.templates import FastCompiler
from tests.unit.test_templates import DDL, summary

NUMBERS = st.one_of(
    st.integers(0, 10**7).map(str),
    st.tuples(st.integers(0, 10**6), st.integers(0, 10**4)).map(lambda p: f"{p[0]}.{p[1]}"),
    st.sampled_from(
        ["0", "0.1", ".5", "5.", "00012.50", "-3", "1e3", "2.5E-2", "123456789012345678901", "0.30000000000000004"]
    ),
)
COLUMNS = st.sampled_from(["B.pressure", "B.temp", "b.temp", "B.PRESSURE", "-B.temp", "(B.pressure)", "B.temp + 1"])
OPS = st.sampled_from(["<", "<=", ">", ">=", "=", "!=", "lt="])
TERMS = st.lists(st.tuples(COLUMNS, OPS, NUMBERS), min_size=1, max_size=6)
PREFIXES = st.sampled_from(
    ["SELECT * FROM B", "SELECT B.temp FROM B", "\nSELECT * FROM B", "Query ID: q7\nSELECT * FROM B",
     "SELECT * FROM B b", "select * from B", "SELECT * FROM B, H MAXWINDOW 2", "SELECT * FROM B -- c\n",
     "Query ID: 'x y'\nSELECT * FROM B", "Query ID: a-b\nSELECT * FROM B", "Query ID: \nSELECT * FROM B",
     "Query ID: q.1 SELECT * FROM B"]
)  # fmt: skip
JOINS = st.sampled_from([" AND ", " AND ", " and ", "  AND "])


def text_of(prefix: str, terms: list[tuple[str, str, str]], joins: list[str], tail: str) -> str:
    conds = [f"{c} {op} {n}" for c, op, n in terms]
    body = conds[0] + "".join(j + c for j, c in zip(joins, conds[1:], strict=False))
    return f"{prefix} WHERE {body}{tail}"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PREFIXES, TERMS, st.lists(JOINS, min_size=5, max_size=5), st.sampled_from(["", " ", ";", "\n"]))
def test_flat_path_equals_the_full_front_end(prefix, terms, joins, tail):
    catalog = Catalog.from_ddl(DDL)
    fast = FastCompiler(catalog)
    flat = FlatCompiler(fast)
    text = text_of(prefix, terms, joins, tail)
    try:
        (nq,) = compile_queries(text, catalog)
    except mqo.QueryError:
        fast_failed = flat.compile(text, 1)
        assert fast_failed is None  # an error is the front end's to report
        return
    want = from_normalized(nq)
    fast.compile(text, 1)  # learns the patterns, as the matcher's usual path does
    for _ in range(2):
        got = flat.compile(text, 1)
        if got is not None:
            assert summary(got) == summary(want), text


def without_caches(m: mqo.Matcher) -> mqo.Matcher:
    """``m`` with its compile caches turned away: every text goes to the front end."""
    m.registry.compiler.flat.compile = lambda text, position: None  # type: ignore[method-assign]
    m.registry.compiler.templates.scanner = None  # (no scan: the template cache reads nothing)
    return m


def test_plain_subscriptions_are_read_from_templates_and_register_alike():
    ddl = "REGISTER STREAM E (a0 FLOAT, a1 FLOAT, a2 FLOAT);"
    texts = [f"SELECT * FROM E WHERE E.a{i % 3} >= {i}.5 AND E.a{(i + 1) % 3} <= {i * 7}" for i in range(200)]
    quick = mqo.Matcher(ddl)
    quick.register_queries(texts)
    slow = without_caches(mqo.Matcher(ddl))
    slow.register_queries(texts)
    assert quick.registry.compiler.templates.hits == 200 and quick.registry.compiler.templates.learned == 3
    assert [summary(q.compiled) for q in quick.registry] == [summary(q.compiled) for q in slow.registry]
    events = {"a0": [1.0, 50.0, 300.0], "a1": [0.0, 20.0, 1e9], "a2": [5.0, 5.0, 5.0], "ts": [1.0, 2.0, 3.0]}
    got = sorted((m.query, m.ids["E"]) for m in quick.push_batch("E", events).matches())
    want = sorted((m.query, m.ids["E"]) for m in slow.push_batch("E", events).matches())
    assert got == want and got


@pytest.mark.parametrize("column_type", ["FLOAT", "INTEGER"])
def test_a_query_file_is_read_from_templates_as_a_list_is(column_type: str) -> None:
    """The pieces of a query file (each after a line break, each ending with ';') are
    plain subscriptions too: they are read from templates as a list of texts is, and
    register the same queries."""
    ddl = f"REGISTER STREAM E (a0 {column_type}, a1 {column_type}, a2 {column_type});"
    texts = [
        f"Query ID: s{i}\nSELECT * FROM E WHERE E.a{i % 3} >= {i} AND E.a{(i + 1) % 3} <= {i * 7}" for i in range(200)
    ]
    from_file = mqo.Matcher(ddl)
    from_file.register_queries("\n".join(t + ";" for t in texts))
    from_list = mqo.Matcher(ddl)
    from_list.register_queries(texts)
    parsed = without_caches(mqo.Matcher(ddl))
    parsed.register_queries(texts)
    assert from_file.registry.compiler.templates.hits == len(texts)
    assert [summary(q.compiled) for q in from_file.registry] == [summary(q.compiled) for q in from_list.registry]
    assert [summary(q.compiled) for q in from_file.registry] == [summary(q.compiled) for q in parsed.registry]


def test_an_id_given_twice_across_texts_registers_nothing():
    """Each flat text is returned whole by the compile entry: the repeat is found
    across the list, and no query of it is registered."""
    ddl = "REGISTER STREAM E (a0 FLOAT, a1 FLOAT);"
    m = mqo.Matcher(ddl)
    texts = [f"Query ID: s{i % 3}\nSELECT * FROM E WHERE E.a0 >= {i} AND E.a1 <= 5" for i in range(5)]
    with pytest.raises(mqo.QueryError, match="query id s0 is given twice"):
        m.register_queries(texts)
    assert list(m.registry) == []
    assert m.register_queries(texts[:3]) == ["s0", "s1", "s2"]


def test_only_plain_decimal_literals_take_the_flat_path() -> None:
    """Once the patterns are known, a number float() reads but the language does not
    (or reads otherwise) is left to the full front end, which names the error."""
    catalog = Catalog.from_ddl(DDL)
    fast = FastCompiler(catalog)
    flat = FlatCompiler(fast)
    fast.compile("SELECT * FROM B WHERE B.pressure < 1 AND B.temp >= 2", 1)
    odd = [".", "1.2.3", "..5", "1_000", "inf", "nan", "+7", "0x10", "1e3", "\u00b2", "1234567890123456", "", "\u0663"]
    for number in odd:
        text = f"SELECT * FROM B WHERE B.pressure < 1 AND B.temp >= {number}"
        got = flat.compile(text, 1)
        try:
            (nq,) = compile_queries(text, catalog)
        except mqo.QueryError:
            assert got is None, number
            continue
        want = from_normalized(nq)
        want.name = "1"
        if got is not None:  # the front end reads digits of other scripts as float() does
            assert summary(got) == summary(want), number
    assert flat.compile("SELECT * FROM B WHERE B.pressure < 1 AND B.temp >= 2.5", 1) is not None


ENTRY_PREFIXES = st.sampled_from(
    ["SELECT * FROM B", "Query ID: q7\nSELECT * FROM B", "Query ID: a\nQuery ID: b\nSELECT * FROM B",
     "SELECT * FROM B -- SELECT\n", "SELECT * FROM B -- query id x\n", "SELECT * FROM B\nSELECT * FROM B",
     "SELECT * FROM B[RANGE 5 SECONDS]", "SELECT max(B.temp) FROM B", "SELECT * FROM B\nQuery ID: b\nSELECT * FROM B",
     "Query ID: a.b\nSELECT * FROM B", "Query ID: 1a\nSELECT * FROM B", "Query ID: .\nSELECT * FROM B",
     "Query ID: 1.2.3\nSELECT * FROM B", "Query ID: a..b\nSELECT * FROM B", "Query ID: 12\nSELECT * FROM B",
     "Query ID: 1.5\nSELECT * FROM B", "Query ID: select\nSELECT * FROM B", "Query ID: 'x y'\nSELECT * FROM B"]
)  # fmt: skip
# characters Python's string methods take for blanks and the lexer does not (and NUL,
# which the fast compiler uses to mark where a number was)
ODD = st.sampled_from(["", "\xa0", "\u2028", "\x0b", "\x1c", "\x85", "\x00", "\t"])
WHERE_ODD = st.sampled_from(["end", "start", "after header", "in prefix", "before a number"])


def with_odd(text: str, odd: str, where: str) -> str:
    if where == "end":
        return text + odd
    if where == "start":
        return odd + text
    if where == "after header":
        return text.replace("\n", "\n" + odd, 1)
    if where == "in prefix":
        return text.replace("SELECT *", f"SELECT {odd}*", 1)
    k = text.rfind(" ")
    return text[:k] + (odd or " ") + text[k + 1 :]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ENTRY_PREFIXES,
    TERMS,
    st.sampled_from(["", ";", "; SELECT * FROM B WHERE B.temp > 1", " GROUP BY B.temp"]),
    ODD,
    WHERE_ODD,
)
def test_the_entry_takes_a_flat_text_only_when_it_is_one_match_query(prefix, terms, tail, odd, where):
    """The compile entry tries the flat path on a whole text before cutting it into
    queries or looking for aggregates, and the fast paths take their patterns from
    texts compiled before: whatever they know, a text gives what the front end gives."""
    catalog = Catalog.from_ddl(DDL)
    fast = FastCompiler(catalog)
    with contextlib.suppress(mqo.QueryError):  # the same comparisons in a plain text: the fast paths learn them
        predicates.compile(text_of("SELECT * FROM B", terms, [" AND "] * 5, ""), catalog, compiler=fast)
    text = with_odd(text_of(prefix, terms, [" AND "] * 5, tail), odd, where)
    try:
        want = front_end(text, catalog)
    except mqo.QueryError:
        want = None
    for _ in range(2):
        try:
            got = predicates.compile(text, catalog, compiler=fast)
        except mqo.QueryError:
            assert want is None, text
            continue
        assert want is not None, text
        assert [isinstance(q, CompiledQuery) for q in got] == [isinstance(q, CompiledQuery) for q in want], text
        assert [summary(q) for q in got if isinstance(q, CompiledQuery)] == [
            summary(q) for q in want if isinstance(q, CompiledQuery)
        ], text
