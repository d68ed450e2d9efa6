"""predicates.compile, the one compile entry: the front end's queries, or its error."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import predicates
from predicates import Catalog, QueryError
from predicates.frontend import compile_queries, front_end
from predicates.parser import parse_queries
from predicates.records import CompiledQuery, from_normalized
from predicates.token_cache import TokenCache
from tests.unit.test_compile_alike import DDL, summary
from tests.unit.test_golden import CASES, schema_for

GOLDEN_FILES = CASES  # the golden fixtures and the thesis' workloads


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: p.name)
def test_golden_files_compile_through_the_one_entry_as_the_front_end(path: Path):
    catalog = Catalog.from_ddl(schema_for(path).read_text())
    text = path.read_text()
    try:
        want = [summary(from_normalized(nq)) for nq in compile_queries(text, catalog, source_name=path.name)]
    except QueryError as err:
        with pytest.raises(QueryError) as got:
            predicates.compile(text, catalog, source_name=path.name)
        assert str(got.value) == str(err)
        return
    compiler = TokenCache(catalog)
    for _ in range(2):  # cold, then through the caches
        got = predicates.compile(text, catalog, source_name=path.name, compiler=compiler)
        assert [summary(q) for q in got] == want


FLAT = "SELECT * FROM B WHERE B.pressure < {} AND B.temp >= 2"
ERRORS = [
    FLAT.format(1) + ";\n" + FLAT.format("1e999999") + ";",  # a literal out of range, in the second query
    FLAT.format(1) + ";\n" + FLAT.format(2).replace("B.temp", "B.tmp") + ";",  # a misspelled column
    "Query ID: a\n" + FLAT.format(1) + ";\nQuery ID: a\n" + FLAT.format(2) + ";",  # a name given twice
    FLAT.format(1) + " AND B.pressure < ;",
]


@pytest.mark.parametrize("text", ERRORS)
def test_errors_are_the_front_ends_with_their_positions(text: str):
    catalog = Catalog.from_ddl(DDL)
    compiler = TokenCache(catalog)
    predicates.compile(FLAT.format(3), catalog, compiler=compiler)  # its caches know the shape
    with pytest.raises(QueryError) as want:
        compile_queries(text, catalog, source_name="f.mqo")
    with pytest.raises(QueryError) as got:
        predicates.compile(text, catalog, source_name="f.mqo", compiler=compiler)
    assert str(got.value) == str(want.value)
    assert want.value.span is not None or "twice" in want.value.message


def test_taken_names_and_positions_follow_the_front_end():
    catalog = Catalog.from_ddl(DDL)
    text = FLAT.format(1) + ";\n" + FLAT.format(2) + ";"
    assert [q.name for q in predicates.compile(text, catalog, first_position=5)] == ["5", "6"]
    with pytest.raises(QueryError, match="6"):
        predicates.compile(text, catalog, first_position=5, taken=["6"])


AGGREGATE = "SELECT B.alert, AVG(B.pressure) FROM B [RANGE 10 SLIDE 5] WHERE B.temp > {} GROUP BY B.alert"


def test_many_texts_compile_as_each_in_turn():
    """compile_many numbers on from text to text, reads the plain ones from templates,
    and names a text's error by its place in the list."""
    catalog = Catalog.from_ddl(DDL)
    texts = [FLAT.format(1), f"Query ID: q\n{FLAT.format(2)}", f"{FLAT.format(3)};\n{FLAT.format(4)};",
             AGGREGATE.format(5), FLAT.format(6), "Query ID: 9\n" + FLAT.format(7), FLAT.format(8)]  # fmt: skip
    fast = TokenCache(catalog)
    for compiler in (None, fast, fast):  # the last one warm
        got = predicates.compile_many(texts, catalog, first_position=3, compiler=compiler)
        want, position = [], 3
        for text in texts:
            want += front_end(text, catalog, first_position=position)
            position = 3 + len(want)
        assert [q.name for q in got] == ["3", "q", "5", "6", "7", "8", "9", "10"]
        assert [isinstance(q, CompiledQuery) for q in got] == [isinstance(q, CompiledQuery) for q in want]
        assert [summary(q) for q in got if q.name != "7"] == [summary(q) for q in want if q.name != "7"]
    compiler = TokenCache(catalog)
    with pytest.raises(QueryError, match="already registered") as taken:
        predicates.compile_many(texts, catalog, taken=["q"], compiler=compiler)
    with pytest.raises(QueryError) as bad:
        predicates.compile_many([*texts[:5], FLAT.format(1).replace("B.temp", "B.tmp")], catalog, source_name="s")
    assert (
        str(taken.value).startswith("<string>[1]:")
        and str(bad.value).startswith("s[5]:1:")
        and "unknown column" in str(bad.value)
    )


def test_one_entry_compiles_aggregate_and_match_queries_alike():
    catalog = Catalog.from_ddl(DDL)
    text = f"{AGGREGATE.format(1)};\nQuery ID: m\n{FLAT.format(2)};\n{AGGREGATE.format(3)};"
    got = predicates.compile(text, catalog, source_name="f.mqo")
    assert [type(q).__name__ for q in got] == ["AggregateQuery", "CompiledQuery", "AggregateQuery"]
    assert [q.name for q in got] == ["1", "m", "3"]
    want = front_end(text, catalog, source_name="f.mqo")
    for k in (0, 2):  # (spans differ: the entry parses each query's own text)
        assert got[k].filter_key == want[k].filter_key and got[k].text.strip() == want[k].text.strip()
        assert (got[k].window.size, got[k].window.slide, got[k].group_by, got[k].calls) == (
            want[k].window.size,
            want[k].window.slide,
            want[k].group_by,
            want[k].calls,
        )
    assert summary(got[1]) == summary(want[1])


@pytest.mark.parametrize("bad_second", [True, False])
def test_an_error_after_an_aggregate_query_is_reported_where_it_is(bad_second: bool):
    # the match front end alone stops at the aggregate query, with the wrong message
    catalog = Catalog.from_ddl(DDL)
    match = FLAT.format(1).replace("B.temp", "B.tmp" if bad_second else "B.temp")
    aggregate = AGGREGATE.format(2).replace("B.alert", "B.alert" if bad_second else "B.alrt")
    with pytest.raises(QueryError) as got:
        predicates.compile(f"{aggregate};\n{match};", catalog, source_name="f.mqo")
    line = 2 if bad_second else 1
    assert str(got.value).startswith(f"f.mqo:{line}:")
    assert "unknown column" in str(got.value) and f"(in query {line})" in str(got.value)


FRAGMENTS = ["count", "SUM", "Max", "min", "avg", "StdDev", "variance", "\u017fum", "\u212aount", "M\u0131n",
             "maxwindow", " ", "\t", "\n", "(", ")", "B.pressure", "B.alert", ".", "*", "x", "1", ",", "-- (\n"]  # fmt: skip
TAILS = ["", " GROUP BY B.alert", " HAVING count(*) > 1", " [RANGE 10 SLIDE 5]", " WHERE B.temp > 1", " -- GROUP BY\n"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=8).map("".join), st.sampled_from(TAILS))
@example("MAX (B.pressure)", "")
@example("count\n(*)", "")
@example("*", " GROUP BY B.alert")
def test_the_aggregate_prefilter_never_turns_away_an_aggregate_query(select: str, tail: str) -> None:
    """looks_aggregate reads the lexer's tokens: it answers False only for texts the
    parser reads as no aggregate query (or does not read)."""
    from predicates.entry import looks_aggregate

    text = f"SELECT {select} FROM B{tail}"
    try:
        aggregate = any(q.is_aggregate for q in parse_queries(text))
    except QueryError:
        return
    assert looks_aggregate(text) or not aggregate, text
