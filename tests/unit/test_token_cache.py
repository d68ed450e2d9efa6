"""The comparison cache (predicates.token_cache) gives exactly the full front end's
queries, and the front end's errors: differential tests on random texts."""

from __future__ import annotations

import contextlib
import importlib

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import mqo
import predicates
from predicates import Catalog, token_cache
from predicates.frontend import front_end
from predicates.lexer import token_matches
from predicates.records import CompiledQuery
from predicates.token_cache import TokenCache
from tests.unit.test_compile_alike import DDL, summary

NUMBERS = st.one_of(
    st.integers(0, 10**7).map(str),
    st.tuples(st.integers(0, 10**6), st.integers(0, 10**4)).map(lambda p: f"{p[0]}.{p[1]}"),
    st.integers(0, 10**40).map(str),  # many digits
    st.sampled_from(
        ["0", "0.1", ".5", "5.", "00012.50", "-3", "- 3", "-0", "1e3", "2.5E-2", "1e999", "123456789012345678901",
         "0.30000000000000004", "999999999999999", "9999999999999999", "0.000000000000001", "1" + "0" * 400]
    ),
)  # fmt: skip
COLUMNS = st.sampled_from(
    ["B.pressure", "B.temp", "b.temp", "B.PRESSURE", "-B.temp", "(B.pressure)", "B.temp + 1", "2 * B.temp",
     "B.nope", "pressure", "B.temp+1", "B . temp", 'B."temp"', "B.tëmp", "H.vib", "P.name", "B.alert", "P.level",
     "-B.alert"]
)  # fmt: skip
OPS = st.sampled_from(["<", "<=", ">", ">=", "=", "!=", "<>", "lt=", "GT=", "=="])
# a comparison's right side: a number, a column, or a column with a factor and an offset
# (a join or a comparison of two columns; its factor is fixed, its offset a parameter)
RIGHTS = st.one_of(
    NUMBERS,
    st.sampled_from(["'x'", "'it''s'", "'a;b'", "H.vib", "B.temp", "'é'", "H.vib AND", "(H.vib", "H.vib)"]),
    st.tuples(st.sampled_from(["", "2 * ", "3 * ", "0 * ", "1.0001 * ", "0.5 * ", "1e2 * "]), st.sampled_from(
        ["H.vib", "B.temp", "H.beatrate", "b2.temp"]), st.sampled_from(["", " + 3", " + (-12)", " - 4.25", " + (7)) ",
        " + 1e3", " + (0)"])).map("".join),
)  # fmt: skip
TERMS = st.lists(st.tuples(COLUMNS, OPS, RIGHTS), min_size=1, max_size=6)
PREFIXES = st.sampled_from(
    ["SELECT * FROM B", "SELECT B.temp FROM B", "\nSELECT * FROM B", "Query ID: q7\nSELECT * FROM B",
     "SELECT * FROM B b", "select * from B", "SeLeCt * FrOm B", "SELECT * FROM B, H", "SELECT * FROM B, H MAXWINDOW 2",
     "SELECT * FROM B -- c\n", "Query ID: 'x y'\nSELECT * FROM B", "Query ID: a-b\nSELECT * FROM B",
     "Query ID: \nSELECT * FROM B", "Query ID: q.1 SELECT * FROM B", "Query ID: \"q\"\"1\" SELECT * FROM B",
     "Query ID: 12 SELECT * FROM B", "QUERY id q SELECT * FROM B", "Query ID: 'é'\nSELECT * FROM B",
     "SELECT B.temp AS t FROM B", "SELECT B.temp t, B.pressure FROM B", "SELECT * FROM B[RANGE 5 SECONDS]",
     "SELECT max(B.temp) FROM B", "Query ID: a\nQuery ID: b\nSELECT * FROM B", "SELECT * FROM P",
     "SELECT * FROM B /* */", "SELECT * FROM B;", "SELECT * FROM",
     # joins and windows: the prefix keeps them (its WINDOW's predicates, its MAXWINDOW)
     "SELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 20 sec", "SELECT * FROM B, H MAXWINDOW 20 sec",
     "SELECT * FROM B, H MAXWINDOW 1.5 min WINDOW H.ts >= B.ts", "SELECT * FROM B b1, B b2 MAXWINDOW 3",
     "SELECT * FROM B, H WINDOW B.ts <= H.ts AND B.ts >= H.ts MAXWINDOW 0.5", "SELECT * FROM B, H WINDOW B.ts MAXWINDOW 2",
     "SELECT * FROM B, H WINDOW (B.ts <= H.ts) MAXWINDOW 2", "SELECT * FROM B, H MAXWINDOW 1e999",
     "SELECT * FROM B, H MAXWINDOW 2 WINDOW B.ts <= H.ts OR B.ts > H.ts", "SELECT * FROM B, H WINDOW B.ts <= H.ts"]
)  # fmt: skip
JOINS = st.sampled_from([" AND ", " and ", "  AND\n", " AND -- and or\n", " OR ", "AND", " AND AND "])
TAILS = st.sampled_from(["", " ", ";", "\n", ";\n;", "; SELECT * FROM B WHERE B.temp > 1", " GROUP BY B.temp", "'"])


# characters Python's string methods take for blanks and the lexer does not, NUL, and
# bytes the cut's skeletons use as kinds
ODD = st.sampled_from(["", "\xa0", "\u2028", "\x0b", "\x1c", "\x85", "\x00", "\x01", "\x03", "\t", "\r\n"])
WHERE_ODD = st.sampled_from(["end", "start", "after header", "in prefix", "before a number", "in a string"])


def with_odd(text: str, odd: str, where: str) -> str:
    if where == "end":
        return text + odd
    if where == "start":
        return odd + text
    if where == "after header":
        return text.replace("\n", "\n" + odd, 1)
    if where == "in prefix":
        return text.replace("SELECT *", f"SELECT {odd}*", 1)
    if where == "in a string":
        return text.replace("'", "'" + odd, 1)
    k = text.rfind(" ")
    return text[:k] + (odd or " ") + text[k + 1 :]


def text_of(prefix: str, terms: list[tuple[str, str, str]], joins: list[str], tail: str) -> str:
    conds = [f"{c} {op} {n}" for c, op, n in terms]
    body = conds[0] + "".join(j + c for j, c in zip(joins, conds[1:], strict=False))
    return f"{prefix} WHERE {body}{tail}"


def outcome(compile_text, text: str):
    """The records' summaries (and the select lists' names), or the error's message
    with its position."""
    try:
        records = compile_text(text)
    except mqo.QueryError as error:
        return ("error", str(error))
    return [
        (summary(q), [o.name for o in q.context.bound.outputs]) if isinstance(q, CompiledQuery) else type(q).__name__
        for q in records
    ]


def warm_caches(catalog: Catalog, reader: str = "kernel") -> TokenCache:
    """The caches a matcher uses (with their kernels); a text alone read by the one-text
    kernel (``reader`` "kernel": numba is loaded) or cut on the lexer's matches ("matches":
    as before numba is loaded)."""
    caches = mqo.Matcher(catalog).registry.compiler
    if reader == "matches":
        caches.one = None
    else:
        importlib.import_module("numba")
    return caches


READERS = pytest.mark.parametrize("reader", ["kernel", "matches"])


@READERS
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PREFIXES, TERMS, st.lists(JOINS, min_size=5, max_size=5), TAILS, ODD, WHERE_ODD)
@example(
    "Query ID: q7\nSELECT * FROM B", [("B.temp", ">=", "-3"), ("B.temp", ">=", "-3")], [" AND "] * 5, "", "", "end"
)
@example("SELECT * FROM B", [("B.temp", "<", "0"), ("b.temp", "<", "0")], [" AND "] * 5, ";", "", "end")
@example("SELECT * FROM B", [("B.temp", ">=", "0.1"), ("-B.temp", "<", "5")], [" AND "] * 5, ";", "", "end")
def test_the_comparison_cache_gives_the_front_ends_queries_and_errors(reader, prefix, terms, joins, tail, odd, where):
    catalog = Catalog.from_ddl(DDL)
    caches = warm_caches(catalog, reader)
    with contextlib.suppress(mqo.QueryError):  # the same comparisons in a plain text: the cache learns them
        predicates.compile(text_of("SELECT * FROM B", terms, [" AND "] * 5, ""), catalog, compiler=caches)
    text = with_odd(text_of(prefix, terms, joins, tail), odd, where)
    want = outcome(lambda t: front_end(t, catalog), text)
    for _ in range(2):  # learned, then read from the cache
        assert outcome(lambda t: predicates.compile(t, catalog, compiler=caches), text) == want, text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(PREFIXES, TERMS, TAILS), min_size=1, max_size=8))
def test_a_list_of_texts_and_a_query_file_compile_as_the_front_end_reads_them(texts):
    """Many texts at once (one batch of the kernels): each record as the front end
    gives it, numbered on from text to text; a query file of them likewise."""
    catalog = Catalog.from_ddl(DDL)
    caches = warm_caches(catalog)
    written = [text_of(prefix, terms, [" AND "] * 5, tail) for prefix, terms, tail in texts]

    def one_by_one(all_texts: list[str]) -> list:
        out: list = []
        for k, text in enumerate(all_texts):
            got = front_end(text, catalog, source_name=f"<string>[{k}]" if len(all_texts) > 1 else "<string>",
                            first_position=1 + len(out))  # fmt: skip
            out += got
        return out

    want = outcome(lambda _: one_by_one(written), "")
    assert outcome(lambda _: predicates.compile_many(written, catalog, compiler=caches), "") == want
    file = "\n".join(text if text.rstrip().endswith(";") else text + ";" for text in written)
    assert outcome(lambda t: predicates.compile(t, catalog, compiler=caches), file) == outcome(
        lambda t: front_end(t, catalog), file
    )


# texts the caches read (a few prefixes, numbers, factors and offsets, a predicate written twice)
READ = st.tuples(
    st.sampled_from(["SELECT * FROM B", "Query ID: q7\nSELECT * FROM B", "SELECT * FROM B, H MAXWINDOW 2",
                     "SELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 20 sec"]),
    st.lists(st.tuples(st.sampled_from(["B.temp", "B.pressure", "H.vib", "-B.temp"]), st.sampled_from(["<", ">="]),
                       st.sampled_from(["0", "1.5", "-3", "12", "2 * H.vib", "0.5 * H.vib + 3", "H.beatrate - 4.25",
                                        "3 * H.vib + (-12)", "1e3"])), min_size=1, max_size=6),
    st.sampled_from(["", ";"]),
)  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.tuples(PREFIXES, TERMS, TAILS), READ), min_size=16, max_size=24), st.booleans())
def test_a_batch_of_texts_compiles_as_the_front_end_reads_each(texts, warm):
    """Enough texts for the batch kernels (factors, formulas, predicates written twice,
    odd numbers and doubts among them): each record as the front end gives it, numbered
    on from text to text, or the front end's error; cold, or after the cache learned
    their comparisons."""
    catalog = Catalog.from_ddl(DDL)
    caches = warm_caches(catalog)
    written = [text_of(prefix, terms, [" AND "] * 5, tail) for prefix, terms, tail in texts]
    if warm:
        for text in written:
            with contextlib.suppress(mqo.QueryError):
                predicates.compile(text, catalog, compiler=caches)

    def one_by_one(all_texts: list[str]) -> list:
        out: list = []
        for k, text in enumerate(all_texts):
            out += front_end(text, catalog, source_name=f"<string>[{k}]", first_position=1 + len(out))
        return out

    want = outcome(lambda _: one_by_one(written), "")
    assert outcome(lambda _: predicates.compile_many(written, catalog, compiler=caches), "") == want


def test_a_long_list_is_read_in_batches_as_in_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A list longer than one batch of the kernels is read batch by batch: per text the
    same names and queries as in one batch, a text the cache leaves to the parser among
    them left alike."""
    catalog = Catalog.from_ddl(DDL)
    comparisons = ["B.temp >= {k}", "B.pressure < {k}.5", "B.temp <= 3 * B.pressure + {k}", "-B.temp > {k}"]
    texts = [
        f"Query ID: q{k}\nSELECT * FROM B WHERE "
        + " AND ".join(c.format(k=k) for c in comparisons[k % 4 :] + comparisons[: k % 3])
        for k in range(40)
    ]
    texts[37] = "SELECT * FROM B WHERE B.nope >= 1"

    def read() -> list:
        got = warm_caches(catalog).read(texts)
        return [None if r is None else (r[0], [summary(q) for q in r[1]]) for r in got]

    whole = read()
    assert whole[37] is None and sum(r is not None for r in whole) >= 20  # (a predicate written twice: the parser)
    monkeypatch.setattr(token_cache, "_BATCH", 16)
    assert read() == whole


def test_own_shape_subscriptions_are_read_from_comparisons_and_match_alike():
    """Texts that each test their own columns: each comparison's template is made by
    the parser once, and the matcher matches as with every text parsed."""
    ddl = "REGISTER STREAM E (a0 FLOAT, a1 FLOAT, a2 FLOAT, a3 INTEGER);"
    texts = [
        f"Query ID: s{i}\nSELECT * FROM E WHERE E.a{i % 4} >= {i}.5 AND E.a{(i * 7 + 1) % 4} <= {i * 13 % 97}"
        + (f" AND E.a{(i + 2) % 4} > -{i}" if i % 3 else "")
        for i in range(300)
    ]
    quick = mqo.Matcher(ddl)
    quick.register_queries(texts)
    tokens = quick.registry.compiler
    assert tokens.learned <= 3 * 4 * 3  # (per column: >=, <=, > -): not one per text
    parsed = [q for k, text in enumerate(texts) for q in front_end(text, quick.catalog, first_position=k + 1)]
    assert [summary(q.compiled) for q in quick.registry] == [summary(q) for q in parsed]
    events = {"a0": [1.0, 50.0, 300.0], "a1": [0.0, 20.0, 1e9], "a2": [5.0, 5.0, 5.0], "a3": [0, 40, -3]}
    slow = without_caches(mqo.Matcher(ddl))
    slow.register_queries(texts)
    assert slow.registry.compiler.learned == 0
    events["ts"] = [1.0, 2.0, 3.0]
    got = sorted((m.query, m.ids["E"]) for m in quick.push_batch("E", events).matches())
    want = sorted((m.query, m.ids["E"]) for m in slow.push_batch("E", events).matches())
    assert got == want and got


def without_caches(m: mqo.Matcher) -> mqo.Matcher:
    """``m`` with its compile caches turned away: every text goes to the front end."""
    m.registry.compiler.read = lambda texts: [None] * len(texts)  # type: ignore[method-assign]
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
    """Each text is returned whole by the compile entry: the repeat is found across
    the list, and no query of it is registered."""
    m = mqo.Matcher("REGISTER STREAM E (a0 FLOAT, a1 FLOAT);")
    texts = [f"Query ID: s{i % 3}\nSELECT * FROM E WHERE E.a{i % 2} >= {i} AND E.a1 <= 5" for i in range(5)]
    with pytest.raises(mqo.QueryError, match="query id s0 is given twice"):
        m.register_queries(texts)
    assert list(m.registry) == []
    assert m.register_queries(texts[:3]) == ["s0", "s1", "s2"]


def test_only_plain_decimal_literals_are_read_from_the_cache() -> None:
    """Once the comparisons are known, a number the language reads otherwise (or not
    at all) is left to the front end, which names the error."""
    catalog = Catalog.from_ddl(DDL)
    caches = warm_caches(catalog)
    predicates.compile("SELECT * FROM B WHERE B.pressure < 1 AND B.temp >= 2", catalog, compiler=caches)
    odd = [".", "1.2.3", "..5", "1_000", "inf", "nan", "+7", "0x10", "1e3", "\u00b2", "1234567890123456", "", "\u0663"]
    for number in odd:
        text = f"SELECT * FROM B WHERE B.pressure < 1 AND B.temp >= {number}"
        assert outcome(lambda t: predicates.compile(t, catalog, compiler=caches), text) == outcome(
            lambda t: front_end(t, catalog), text
        ), number
    learned = caches.learned
    (got,) = predicates.compile("SELECT * FROM B WHERE B.temp >= 2.5", catalog, compiler=caches)
    assert caches.learned == learned and summary(got)[2] == (
        ((("B.temp >= c", "float", 2.5),), ()),
    )  # (B.temp >= # was known)


def test_the_cache_forgets_what_it_learned_when_the_catalog_grows():
    """What was learned binds against the catalog it was learned with: a grown catalog
    (new streams) is bound anew."""
    tokens = warm_caches(Catalog.from_ddl("REGISTER STREAM E (a FLOAT);"))
    text = "SELECT * FROM E WHERE E.a > 1"
    assert tokens.read([text])[0] is not None
    tokens.catalog = Catalog.from_ddl("REGISTER STREAM E (b FLOAT); REGISTER STREAM F (b FLOAT);")
    assert tokens.read([text]) == [None]  # (E.a is gone: the parser says so)
    (_, (got,)) = tokens.read(["SELECT * FROM F WHERE F.b > 1"])[0] or ((), ())
    assert got.context.streams == ("F",)


def test_join_and_window_texts_are_read_by_the_cache_and_share_one_context():
    """Standing joins (a WINDOW, a MAXWINDOW, join comparisons with a factor and an
    offset) are read from the prefix and comparison templates, not handed to the front
    end one by one: each query as the front end gives it, and all of one SELECT, FROM
    and window unit with one context (what the plan and the result writer group by)."""
    catalog = Catalog.from_ddl(DDL)
    m = mqo.Matcher(catalog)
    texts = [
        f"Query ID: q{i}\nSELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW {20 + i % 2} sec\n"
        f"WHERE B.pressure < 0.{i} AND H.vib > 1{i}.5 AND B.pressure <= {i % 5 + 1} * H.vib + ({i - 20})"
        for i in range(40)
    ]
    assert all(read is not None for read in m.registry.compiler.read(texts))
    m.register_queries(texts)
    assert len({id(q.compiled.context) for q in m.registry}) == 1
    assert [summary(q.compiled) for q in m.registry] == [summary(q) for t in texts for q in front_end(t, catalog)]


RENUMBERED = st.lists(
    st.sampled_from(["1", "2", "3", "0.5", "10", "20", "7.25", "0", "00012.50", "1e3", "123456789012345678901"]),
    min_size=24,
    max_size=24,
)
NAMES = st.sampled_from(["q7", "q8", "'x y'", "r2d2", "SELECT", '"q"'])


def renumbered(text: str, numbers: list[str], name: str) -> str:
    """``text`` with its number tokens written as ``numbers`` (in turn) and its header's
    name ``q7`` as ``name``: a text of the same runs but for its numbers and name."""
    groups, starts, ends = token_matches(text)
    out, at = [], 0
    for k, (start, end) in enumerate([(s, e) for g, s, e in zip(groups, starts, ends, strict=True) if g == "number"]):
        out += [text[at:start], numbers[k % len(numbers)]]
        at = end
    return "".join([*out, text[at:]]).replace("Query ID: q7", f"Query ID: {name}", 1)


@READERS
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PREFIXES, TERMS, st.lists(JOINS, min_size=5, max_size=5), TAILS, RENUMBERED, NAMES)
@example("SELECT * FROM B, H MAXWINDOW 2", [("B.temp", "<", "2 * H.vib + 3")], [" AND "] * 5, "", ["3", "1"], "q7")
@example("Query ID: q7\nSELECT * FROM B", [("B.temp", ">=", "2")], [" AND "] * 5, "", ["1e3"], "'x y'")
def test_texts_of_one_shape_are_read_as_the_front_end_reads_each(reader, prefix, terms, joins, tail, numbers, name):
    """A one-query text of the runs of one read before but for its numbers and its
    header's name is read as that one was only where its prefix's numbers and its
    templates' fixed numbers (a factor) are the same: its own queries, name and errors."""
    catalog = Catalog.from_ddl(DDL)
    caches = warm_caches(catalog, reader)
    text = text_of(prefix, terms, joins, tail)
    for t in (text, renumbered(text, numbers, name), text, renumbered(text, numbers[::-1], "q8")):
        want = outcome(lambda t: front_end(t, catalog), t)
        assert outcome(lambda t: predicates.compile(t, catalog, compiler=caches), t) == want, t


@READERS
def test_a_call_of_no_texts_reads_none(reader: str) -> None:
    catalog = Catalog.from_ddl(DDL)
    caches = warm_caches(catalog, reader)
    assert caches.read([]) == []
    assert list(predicates.compile_many([], catalog, compiler=caches)) == []


@READERS
def test_empty_and_blank_texts_register_no_query_first_or_later(reader: str) -> None:
    # (an empty text first, before any other, once made the one-text kernel read arrays
    # it had not made yet: a Spark stage with its queries to come registers "")
    catalog = Catalog.from_ddl(DDL)
    for texts in ([""], ["", "  \n"], ["-- nothing yet\n"], ["", "SELECT * FROM B WHERE B.temp > 1"]):
        caches = warm_caches(catalog, reader)
        got = [summary(q) for q in predicates.compile_many(texts, catalog, compiler=caches)]
        assert got == [summary(q) for text in texts for q in front_end(text, catalog)], texts
    assert len(got) == 1
