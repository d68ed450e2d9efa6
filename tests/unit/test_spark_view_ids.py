"""The Spark stages refuse a query that reads a match view's ``id``: there a view's
rows are numbered within the task (or per ts) that made them, not over the whole input
as the local engine numbers them, so a predicate or value on the id would silently
change the results. Reading the view's value columns, or an aggregate view's id (the
local engine's there), is fine."""

from __future__ import annotations

import pytest

import mqo
from runtime.spark.spec import SparkStageError, check_views, view_id_reader

DDL = "CREATE STREAM H (beatrate FLOAT, vib FLOAT, alert INTEGER);"
HIGH = "CREATE VIEW hi AS SELECT H.beatrate AS rate, H.vib AS vib FROM H WHERE H.beatrate > 5;\n"
PER_MINUTE = "CREATE VIEW per AS SELECT COUNT(*) AS n FROM H [RANGE 60 SLIDE 60];\n"


def matcher(text: str) -> mqo.Matcher:
    m = mqo.Matcher(DDL)
    m.register_queries(text)
    return m


@pytest.mark.parametrize(
    "query",
    [
        "SELECT hi.id FROM hi",
        "SELECT hi.rate FROM hi WHERE hi.id > 1",
        "SELECT hi.rate FROM hi WHERE hi.rate * 2 > hi.ID + 1",
        "SELECT X.rate FROM hi X, H MAXWINDOW 1 WHERE X.rate > H.vib + X.id",
        "SELECT X.rate FROM hi X, hi Y MAXWINDOW 1 WHERE X.rate > Y.id",
        "SELECT COUNT(*) FROM hi [RANGE 10 SLIDE 5] WHERE hi.id > 2",
        "SELECT SUM(hi.id) FROM hi [RANGE 10 SLIDE 5]",
        "SELECT hi.id, COUNT(*) FROM hi [RANGE 10 SLIDE 5] GROUP BY hi.id",
    ],
)
def test_a_query_reading_a_match_views_id_is_refused_naming_both(query: str) -> None:
    m = matcher(HIGH + f"Query ID: reader\n{query};")
    assert view_id_reader(m) == ("reader", "hi")
    kind = "aggregate" if "COUNT" in query or "SUM" in query else "match"
    with pytest.raises(SparkStageError, match="query reader reads the id of match view hi"):
        check_views(m, True, kind)


def test_a_view_reading_another_views_id_is_refused() -> None:
    m = matcher(HIGH + "CREATE VIEW ids AS SELECT hi.id AS made FROM hi;\nSELECT ids.made FROM ids;")
    assert view_id_reader(m) == ("ids", "hi")


@pytest.mark.parametrize(
    "text",
    [
        HIGH + "SELECT hi.rate FROM hi WHERE hi.rate > 1;",
        HIGH + "SELECT * FROM hi;",
        HIGH + "SELECT AVG(hi.rate) FROM hi [RANGE 10 SLIDE 5];",
        HIGH + "SELECT H.id FROM hi, H MAXWINDOW 1 WHERE hi.rate = H.beatrate;",
        PER_MINUTE + "SELECT per.id, per.n FROM per WHERE per.id > 3;",
    ],
)
def test_value_columns_other_streams_ids_and_aggregate_views_ids_are_fine(text: str) -> None:
    m = matcher(text)
    assert view_id_reader(m) is None
    check_views(m, True, "match")
