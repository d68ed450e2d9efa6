"""Semantic checks against the catalog."""

from __future__ import annotations

import pytest

from predicates import Catalog, QueryError, bind, parse_query
from predicates.frontend import compile_queries

DDL = """
REGISTER STREAM B (pressure FLOAT, temp FLOAT, alert INTEGER);
REGISTER STREAM H (beatrate FLOAT, vib FLOAT, alert INTEGER);
REGISTER STREAM P (name VARCHAR, ok BOOLEAN, level INT);
"""


@pytest.fixture
def catalog():
    return Catalog.from_ddl(DDL)


def check(text, catalog, name="q"):
    return bind(parse_query(text, "q.mqo"), catalog, name)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("SELECT * FROM Blod", "unknown stream 'Blod' (did you mean 'B'?)"),
        ("SELECT * FROM B WHERE B.presure < 1", "unknown column 'presure' of stream B (did you mean 'pressure'?)"),
        ("SELECT * FROM B WHERE presure < 1", "unknown column 'presure' (did you mean 'pressure'?)"),
        ("SELECT * FROM B, H MAXWINDOW 1 WHERE alert = 1", "column 'alert' is ambiguous: B.alert or H.alert"),
        ("SELECT * FROM B, H MAXWINDOW 1 WHERE ts > 1", "column 'ts' is ambiguous"),
        ("SELECT * FROM B WHERE X.pressure < 1", "'X' is not a stream or alias of this query"),
        ("SELECT * FROM B WHERE H.vib < 1", "'H' is not a stream or alias of this query"),
        ("SELECT * FROM B, H WHERE B.pressure < H.vib", "a query over 2 streams needs MAXWINDOW"),
        ("SELECT * FROM B, B MAXWINDOW 1", "alias B is used twice in FROM"),
        ("SELECT * FROM B b1, B b2 MAXWINDOW 1 WHERE B.pressure > 1", "'B' could be any of b1, b2"),
        ("SELECT * FROM B b1, B b2 MAXWINDOW 1 WHERE pressure > 1", "column 'pressure' is ambiguous"),
        ("SELECT * FROM B b1, B B1 MAXWINDOW 1", "alias B1 is used twice"),
        ("SELECT * FROM B b1, B b2", "a query over 2 streams needs MAXWINDOW"),
        ("SELECT * FROM B x, H x MAXWINDOW 1", "alias x is used twice"),
        ("SELECT * FROM B, P MAXWINDOW 1 WHERE P.name < B.pressure", "cannot compare P.name (a string) with"),
        ("SELECT * FROM P WHERE P.name = 3", "cannot compare P.name (a string) with a number"),
        ("SELECT * FROM P WHERE P.level = 'x'", "cannot compare P.level (a number) with a string"),
        ("SELECT * FROM P WHERE P.name + 1 > 2", "'+' needs numbers"),
        ("SELECT * FROM P WHERE P.ok < TRUE", "booleans compare only with = and !="),
        ("SELECT * FROM P WHERE P.ok = 1", "cannot compare P.ok (a boolean) with a number"),
        ("SELECT B.pressure, B.pressure FROM B", "two values named 'B.pressure'"),
        ("SELECT * FROM B WHERE -P.name < 1", "'P' is not a stream or alias"),
    ],
)
def test_semantic_errors(text, fragment, catalog):
    with pytest.raises(QueryError) as err:
        check(text, catalog)
    assert fragment in err.value.message
    rendered = str(err.value)
    assert rendered.startswith("q.mqo:1:")
    assert "(in query q)" in rendered
    assert "^" in rendered


def test_error_points_at_the_offending_column(catalog):
    text = "SELECT *\nFROM B\nWHERE B.pressure < 1 AND B.tmp > 2"
    with pytest.raises(QueryError) as err:
        check(text, catalog)
    assert (err.value.line, err.value.column) == (3, 26)
    assert "did you mean 'temp'" in err.value.message


def test_resolution_is_case_insensitive_and_canonical(catalog):
    bound = check("SELECT b.PRESSURE FROM b WHERE Pressure < 1", catalog)
    ref = bound.condition.left
    assert (ref.alias, ref.stream, ref.name) == ("B", "B", "pressure")
    assert bound.outputs[0].name == "B.pressure"


def test_aliases_and_stream_names_both_resolve(catalog):
    bound = check("SELECT x.temp FROM B AS x, H MAXWINDOW 2 WHERE B.pressure > H.vib AND x.temp > 1", catalog)
    assert bound.aliases == (("x", "B"), ("H", "H"))
    assert bound.condition.items[0].left.alias == "x"


def test_star_expands_every_column_of_every_alias(catalog):
    bound = check("SELECT * FROM H, B MAXWINDOW 1", catalog)
    assert [o.name for o in bound.outputs] == [
        "H.beatrate",
        "H.vib",
        "H.alert",
        "B.pressure",
        "B.temp",
        "B.alert",
    ]


def test_window_and_where_are_combined(catalog):
    bound = check("SELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 20 sec WHERE B.pressure < 90", catalog)
    assert bound.maxwindow == 20
    assert len(bound.condition.items) == 2


def test_single_stream_query_needs_no_maxwindow(catalog):
    assert check("SELECT * FROM B WHERE B.pressure < 90", catalog).maxwindow is None


def test_a_file_with_one_bad_query_compiles_nothing(catalog):
    text = "SELECT * FROM B WHERE B.pressure < 1;\nQuery ID: broken\nSELECT * FROM B WHERE B.nope < 1;"
    with pytest.raises(QueryError) as err:
        compile_queries(text, catalog, source_name="f.mqo")
    assert err.value.query == "broken"
    assert str(err.value).startswith("f.mqo:3:")


def test_duplicate_query_ids(catalog):
    with pytest.raises(QueryError, match="query id 2 is given twice"):
        compile_queries("Query ID: 2\nSELECT * FROM B;\nSELECT * FROM H", catalog)
    with pytest.raises(QueryError, match="already registered"):
        compile_queries("Query ID: a\nSELECT * FROM B", catalog, taken=["a"])
