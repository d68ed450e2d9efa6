"""The query language and DDL parser."""

from __future__ import annotations

from fractions import Fraction

import pytest

from predicates import Catalog, ColumnType, QueryError, parse_ddl, parse_duration, parse_queries, parse_query
from predicates.ast import And, Arith, ColumnRef, Comparison, Negate, Not, Number, Or, StringLit, condition_text
from tests.conftest import WORKLOADS


@pytest.mark.parametrize("path", sorted(WORKLOADS.glob("*.mqo")), ids=lambda p: p.name)
def test_every_thesis_workload_parses(path, thesis_ddl):
    queries = parse_queries(path.read_text(), path.name)
    assert queries
    for q in queries:
        assert q.from_ and q.source.name == path.name


def test_thesis_header_names_queries(running_example):
    queries = parse_queries(running_example)
    assert [q.name for q in queries] == ["1", "2", "3"]
    assert [len(q.from_) for q in queries] == [4, 3, 2]


def test_queries_end_at_semicolon_header_or_next_select():
    text = "SELECT * FROM B; SELECT * FROM H\nSELECT * FROM K Query ID: x SELECT * FROM T"
    queries = parse_queries(text)
    assert [q.from_[0].stream for q in queries] == ["B", "H", "K", "T"]
    assert [q.name for q in queries] == [None, None, None, "x"]


@pytest.mark.parametrize(
    ("spelling", "op"),
    [
        ("<", "<"),
        ("<=", "<="),
        (">", ">"),
        (">=", ">="),
        ("=", "="),
        ("==", "="),
        ("!=", "!="),
        ("<>", "!="),
        ("lt", "<"),
        ("LT=", "<="),
        ("le", "<="),
        ("gt", ">"),
        ("gt=", ">="),
        ("ge", ">="),
    ],
)
def test_comparison_spellings(spelling, op):
    q = parse_query(f"SELECT * FROM B WHERE B.x {spelling} 3")
    assert isinstance(q.where, Comparison)
    assert q.where.op == op


def test_thesis_lt_needs_no_space_before_equals():
    q = parse_query("SELECT * FROM B WHERE B.temp lt= T.degree")
    assert q.where.op == "<="
    with pytest.raises(QueryError):
        parse_query("SELECT * FROM B WHERE B.temp lt = T.degree")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("6sec", 6),
        ("20 sec", 20),
        ("500 ms", Fraction(1, 2)),
        ("1 minute", 60),
        ("2 min", 120),
        ("1.5 h", 5400),
        ("3 hours", 10800),
        ("7", 7),
        ("0.25 s", Fraction(1, 4)),
        ("2 seconds", 2),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("clause", ["MaxWindow 20sec", "Max Window 20 sec", "MAXWINDOW 20 SEC", "max window 20"])
def test_maxwindow_spellings(clause):
    q = parse_query(f"SELECT * FROM B, H {clause} WHERE B.x > 1")
    assert q.maxwindow.seconds == 20


def test_unknown_duration_unit_suggests():
    with pytest.raises(QueryError) as err:
        parse_query("SELECT * FROM B, H MAXWINDOW 5 secs2")
    assert "unknown duration unit 'secs2'" in err.value.message
    assert "did you mean" in err.value.message


def test_comments_anywhere():
    text = "-- header comment\nSELECT * -- all\nFROM B -- blood\nWHERE B.x < 3 -- done\n"
    q = parse_query(text)
    assert condition_text(q.where) == "B.x < 3"


def test_precedence_and_parentheses():
    q = parse_query("SELECT * FROM B WHERE NOT B.x < 1 OR B.y > 2 AND (B.z = 3 OR B.w != 4)")
    where = q.where
    assert isinstance(where, Or)
    assert isinstance(where.items[0], Not)
    assert isinstance(where.items[1], And)
    assert isinstance(where.items[1].items[1], Or)


def test_arithmetic_precedence():
    q = parse_query("SELECT * FROM B WHERE B.x + 2 * B.y - -3 > (B.z + 1) / 2")
    cmp = q.where
    assert isinstance(cmp.left, Arith) and cmp.left.op == "-"
    assert isinstance(cmp.left.left, Arith) and cmp.left.left.op == "+"
    assert isinstance(cmp.left.left.right, Arith) and cmp.left.left.right.op == "*"
    assert isinstance(cmp.left.right, Number) and cmp.left.right.value == -3
    assert isinstance(cmp.right, Arith) and cmp.right.op == "/"


def test_unary_minus_on_column():
    q = parse_query("SELECT * FROM B WHERE -B.x < 2")
    assert isinstance(q.where.left, Negate)


def test_and_or_flatten():
    q = parse_query("SELECT * FROM B WHERE B.a < 1 AND B.b < 2 AND B.c < 3")
    assert isinstance(q.where, And) and len(q.where.items) == 3


def test_select_items_and_aliases():
    q = parse_query("SELECT B.x AS px, B.y * 2 doubled, b2.*, B.z FROM B AS b2, H h MAXWINDOW 1")
    assert [i.name for i in q.select] == ["px", "doubled", None, None]
    assert q.select[2].star_of == "b2"
    assert [(f.stream, f.alias) for f in q.from_] == [("B", "b2"), ("H", "h")]


def test_string_literals_with_quotes():
    q = parse_query("SELECT * FROM P WHERE P.name = 'it''s'")
    assert isinstance(q.where.right, StringLit)
    assert q.where.right.value == "it's"


def test_positions_point_into_the_source():
    text = "SELECT *\nFROM B\nWHERE B.pressure < 90"
    q = parse_query(text, "q.mqo")
    ref = q.where.left
    assert isinstance(ref, ColumnRef)
    assert text[ref.span.start : ref.span.end] == "B.pressure"
    assert q.source.line_col(ref.span.start) == (3, 7)
    assert text[q.where.op_span.start : q.where.op_span.end] == "<"


def test_exact_number_literals():
    q = parse_query("SELECT * FROM B WHERE B.x < 0.1")
    assert q.where.right.value == Fraction(1, 10)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("SELECT * FROM B WHERE B.x < 1 B.y > 2", "missing between two comparisons"),
        ("SELECT * FROM B WHERE B.x < 1 < 2", "cannot be chained"),
        ("SELECT * FROM B WHERE B.x +", "query ends where a value was expected"),
        ("SELECT * FROM B WHERE (B.x < 1", "expected ')'"),
        ("SELECT * FROM B WHERE B.x", "expected a condition"),
        ("SELECT * FROM WHERE B.x < 1", "expected a stream name"),
        ("SELECT FROM B", "keyword FROM"),
        ("FROM B", "expected SELECT"),
        ("SELECT * FROM B WHERE B.x < 'abc", "unterminated string"),
        ("SELECT * FROM B WHERE B.x ? 2", "unexpected character '?'"),
        ("SELECT * FROM B WHERE B.x < 1 WHERE B.y < 2", "WHERE is given twice"),
        ("Query ID: 7", "not followed by a query"),
        ("SELECT * FROM B WHERE B.x < 1 AND", "query ends where a value was expected"),
        ("SELECT * FROM B WHERE NOT 3", "NOT applies to a condition"),
        ("SELECT * FROM B WHERE B.x AND B.y < 1", "AND joins conditions"),
    ],
)
def test_syntax_errors_say_what_and_where(text, fragment):
    with pytest.raises(QueryError) as err:
        parse_queries(text, "q.mqo")
    rendered = str(err.value)
    assert fragment in rendered
    first = rendered.splitlines()[0]
    assert first.startswith("q.mqo:1:")
    assert "^" in rendered.splitlines()[2]


def test_errors_name_the_query_they_are_in():
    text = "Query ID: good\nSELECT * FROM B;\nQuery ID: bad\nSELECT * FROM B WHERE B.x <"
    with pytest.raises(QueryError) as err:
        parse_queries(text, "f.mqo")
    assert err.value.query == "bad"
    assert "(in query bad)" in str(err.value)
    with pytest.raises(QueryError) as err:
        parse_queries("SELECT * FROM B; SELECT * FROM H WHERE #", "f.mqo")
    assert err.value.query == "2"


def test_caret_sits_under_the_error():
    with pytest.raises(QueryError) as err:
        parse_queries("SELECT * FROM B\n   WHERE B.x ! 3", "f.mqo")
    lines = str(err.value).splitlines()
    assert lines[0].startswith("f.mqo:2:14:")
    source_line, caret_line = lines[1], lines[2]
    assert source_line[caret_line.index("^")] == "!"


def test_ddl(thesis_ddl):
    decls = parse_ddl(thesis_ddl)
    assert [d.name for d in decls] == ["B", "T", "H", "K"]
    assert [c.name for c in decls[0].columns] == ["pressure", "temp", "alert"]
    assert decls[0].columns[2].ctype is ColumnType.INTEGER


def test_ddl_types_and_synonyms():
    decls = parse_ddl(
        "create stream S (a int, b double, c real, d byte, e char(4), f varchar, g string, h text, i boolean);"
        "REGISTER STREAM R (x BIGINT)"
    )
    types = [c.ctype for c in decls[0].columns]
    assert types == [
        ColumnType.INTEGER,
        ColumnType.FLOAT,
        ColumnType.FLOAT,
        ColumnType.BYTE,
        ColumnType.STRING,
        ColumnType.STRING,
        ColumnType.STRING,
        ColumnType.STRING,
        ColumnType.BOOLEAN,
    ]
    assert decls[0].columns[4].length == 4


@pytest.mark.parametrize(
    ("ddl", "fragment"),
    [
        ("REGISTER STREAM S (a FLAOT);", "unknown type 'FLAOT' for column a (did you mean 'FLOAT'?)"),
        ("REGISTER STREAM S (ts FLOAT);", "implicit"),
        ("REGISTER STREAM S (id INTEGER);", "implicit"),
        ("REGISTER STREAM S (a INT, A FLOAT);", "declared twice"),
        ("REGISTER STREAM S (a INT); REGISTER STREAM s (b INT);", "stream s is declared twice"),
        ("REGISTER RELATION R (a INT);", "relations are not supported"),
        ("REGISTER STREAM S (a INT(3));", "takes no length"),
        ("REGISTER STREAM S a INT;", "expected '('"),
    ],
)
def test_ddl_errors(ddl, fragment):
    with pytest.raises(QueryError) as err:
        Catalog.from_ddl(ddl, "s.ddl")
    assert fragment in str(err.value)
    assert str(err.value).startswith("s.ddl:1:")


def test_ddl_is_all_or_nothing():
    catalog = Catalog.from_ddl("REGISTER STREAM A (x INT);")
    with pytest.raises(QueryError):
        catalog.register_ddl("REGISTER STREAM B (x INT); REGISTER STREAM A (y INT);")
    assert catalog.names() == ["A"]


@pytest.mark.parametrize(
    "window", ["[RANGE 10 SLIDE 5]", "[RANGE 10 sec SLIDE 5]", "[RANGE 10 SLIDE 5 sec]", "[RANGE 10, FREQUENCY 5]"]
)
def test_a_window_slide_may_follow_a_bare_number(window):
    [query] = parse_queries(f"SELECT COUNT(*) FROM H {window};")
    assert (query.from_[0].window.size, query.from_[0].window.slide) == (10, 5)


@pytest.mark.parametrize(
    ("text", "name", "suggestion"),
    [
        ("SELECT MEDIAN(S.temp) FROM S [RANGE 10]", "MEDIAN", "MIN"),
        ("SELECT S.sensor, stdev(S.temp) FROM S [RANGE 10] GROUP BY S.sensor", "stdev", "STDDEV"),
        ("SELECT * FROM S WHERE LOG(S.temp) > 3", "LOG", None),
    ],
)
def test_an_unknown_function_is_named_with_the_supported_ones(text, name, suggestion):
    with pytest.raises(QueryError) as err:
        parse_query(text)
    message = str(err.value)
    first, shown, caret = message.splitlines()
    column = text.index(name) + 1
    assert first.startswith(f"<string>:1:{column}: unknown function {name}")
    assert "COUNT, SUM, AVG, MIN, MAX, STDDEV, VARIANCE" in first
    assert (f"(did you mean '{suggestion}'?)" in first) == (suggestion is not None)
    assert shown.strip() == text
    assert caret.index("^") - shown.index("S") == column - 1 and caret.strip() == "^" + "~" * (len(name) - 1)
