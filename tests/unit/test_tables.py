"""Tables: every error names where it is (CREATE TABLE, queries reading tables, rows),
a failed call leaves the matcher as it was; ``explain`` shows the tables' readers."""

from __future__ import annotations

import pytest

import mqo
from mqo import QueryError, TupleError

DDL = "REGISTER STREAM H (patient INTEGER, beatrate FLOAT, ward STRING);"
TABLE = "CREATE TABLE patients (id INTEGER, ward STRING, age INTEGER) KEY (id);\n"


def matcher(**settings: object) -> mqo.Matcher:
    m = mqo.Matcher(DDL, **settings)
    m.register_queries(TABLE)
    return m


def error_of(text: str, m: mqo.Matcher | None = None) -> QueryError:
    m = m or mqo.Matcher(DDL)
    with pytest.raises(QueryError) as info:
        m.register_queries(text)
    return info.value


def where(err: QueryError) -> tuple[int | None, int | None]:
    return err.line, err.column


@pytest.mark.parametrize(
    ("text", "message", "position"),
    [
        ("CREATE TABLE p (id INTEGER);", "expected KEY (columns)", (1, 28)),
        ("CREATE TABLE p (id INTEGR) KEY (id);", "unknown type 'INTEGR'", (1, 20)),
        ("CREATE TABLE p (id INTEGER) KEY (pid);", "KEY column pid is not a column of table p", (1, 34)),
        ("\n  CREATE TABLE p (ts FLOAT, id INTEGER) KEY (id);", "cannot declare a column named ts", (2, 19)),
        ("CREATE TABLE p (id INTEGER, ID FLOAT) KEY (id);", "column ID is declared twice", (1, 29)),
        ("CREATE TABLE p (id INTEGER) KEY (id, id);", "in the KEY twice", (1, 38)),
        ("CREATE TABLE p (id INTEGER) KEY (id) garbage", "expected ';' after CREATE TABLE p", (1, 38)),
        ("CREATE TABLE H (id INTEGER) KEY (id);", "a stream named H exists already", (1, 1)),
    ],
)
def test_create_table_errors_name_their_place(text: str, message: str, position: tuple[int, int]) -> None:
    err = error_of(text)
    assert message in err.message
    assert where(err) == position
    assert "^" in str(err)  # the line is shown with a caret


@pytest.mark.parametrize(
    ("query", "message", "column"),
    [
        # the key bound by no equality with a stream column: the table's place in FROM
        ("SELECT * FROM H, patients P WHERE P.ward = H.ward", "joined by its whole KEY (id)", 18),
        ("SELECT * FROM H, patients P WHERE P.id = 3", "no equality binds id", 18),
        ("SELECT * FROM H, patients P WHERE H.patient = P.id OR H.beatrate > 1", "no equality binds id", 18),
        ("SELECT * FROM H, patients P WHERE NOT (H.patient != P.id)", "no equality binds id", 18),
        ("SELECT * FROM patients", "a query over tables alone", 15),
        ("SELECT * FROM H, patients P, patients Q WHERE H.patient = P.id", "read twice", 30),
        ("SELECT * FROM H, patients P WHERE H.patient = P.idd", "unknown column 'idd' of stream patients", 47),
        ("SELECT * FROM H h1, H h2, patients P WHERE h1.patient = P.id", "needs MAXWINDOW (tables do not count)", 15),
        (
            "SELECT COUNT(*) FROM H [RANGE 5 sec], patients P GROUP BY P.ward",
            "an aggregate query cannot read a table",
            39,
        ),
        ("CREATE VIEW v AS SELECT H.beatrate AS b FROM H, patients P WHERE H.patient = P.id", "a view cannot read", 49),
    ],
)
def test_query_shapes_a_table_join_refuses(query: str, message: str, column: int) -> None:
    m = matcher()
    before = m.query_ids
    err = error_of(query, m)
    assert message in err.message, err
    assert where(err) == (1, column)
    assert m.query_ids == before


def test_a_failed_text_declares_no_table() -> None:
    m = mqo.Matcher(DDL)
    err = error_of(TABLE + "SELECT * FROM H, patients P WHERE P.ward = 'ICU';", m)
    assert where(err) == (2, 18)
    assert m.tables == []
    m.register_queries(TABLE)  # declared now, once
    assert m.tables == ["patients"]
    assert "a table named patients exists already" in error_of(TABLE, m).message


def test_register_query_takes_a_create_table_alone_or_with_one_query() -> None:
    m = mqo.Matcher(DDL)
    assert m.register_query(TABLE) == "patients"
    q = m.register_query("SELECT * FROM H, patients P WHERE H.patient = P.id", query_id="mine")
    assert q == "mine"
    with pytest.raises(QueryError, match="declares table patients and no query to name other"):
        mqo.Matcher(DDL).register_query(TABLE, query_id="other")


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"id": 1, "ward": "ICU", "age": 1}, {"id": 2, "ward": 3, "age": 1}], "table patients, row 1, column ward"),
        ([{"id": 1.5, "ward": "ICU", "age": 1}], "table patients, row 0, column id (INTEGER): expected an integer"),
        ([{"id": None, "ward": "ICU", "age": 1}], "table patients, row 0: KEY column id is NULL"),
        ([{"ward": "ICU", "age": 1}], "table patients, row 0: no value for column(s) id"),
        ([{"id": 1, "ward": "ICU", "age": 1, "agee": 2}], "has no column 'agee' (did you mean 'age'?)"),
        ({"id": 1, "ward": "ICU", "age": 1}, "rows must be a list of rows"),
    ],
)
def test_bad_rows_are_named_and_nothing_is_put(rows: object, message: str) -> None:
    m = matcher()
    m.register_query("SELECT * FROM H, patients P WHERE H.patient = P.id")
    with pytest.raises(TupleError) as info:
        m.upsert_rows("patients", rows, 10)
    assert message in str(info.value)
    assert m.push("H", 20, {"patient": 1, "beatrate": 1.0, "ward": "x"}) == []  # not even row 0


def test_bad_keys_and_times_and_tables() -> None:
    m = matcher()
    with pytest.raises(TupleError, match="no table named 'patient' \\(did you mean 'patients'\\?\\)"):
        m.upsert_rows("patient", [], 1)
    with pytest.raises(TupleError, match="key 0: expected 1 value"):
        m.delete_rows("patients", [(1, 2)], 1)
    with pytest.raises(TupleError, match="key 0: 'ward' is not a KEY column"):
        m.delete_rows("patients", [{"ward": "x"}], 1)
    with pytest.raises(TupleError, match="keys must be a list of keys"):
        m.delete_rows("patients", {"id": 1}, 1)
    with pytest.raises(TupleError, match="ts must be a number"):
        m.upsert_rows("patients", [{"id": 1, "ward": "ICU", "age": 1}], float("nan"))
    with pytest.raises(TupleError, match="patients is a table: its rows come from upsert_rows"):
        m.push("patients", 1, {"id": 1, "ward": "ICU", "age": 1})


def test_tables_need_arrival_emission_and_text_registration() -> None:
    with pytest.raises(QueryError, match="tables need emit='arrival'"):
        mqo.Matcher(DDL, emit="ordered").register_queries(TABLE)
    m = matcher()
    with pytest.raises(QueryError, match="register_table takes queries over streams"):
        m.register_table("SELECT * FROM H, patients P WHERE H.patient = P.id AND H.beatrate > :b", {"b": [1.0]})


def test_a_table_may_declare_its_own_id_of_any_type() -> None:
    m = mqo.Matcher("REGISTER STREAM H (who STRING);")
    m.register_queries(
        "CREATE TABLE people (id STRING, name STRING) KEY (id);\nSELECT P.id, P.name FROM H, people P WHERE H.who = P.id;"
    )
    m.upsert_rows("people", [{"id": "a7", "name": "Ada"}], None)
    (match,) = m.push("H", 1, {"who": "a7"})
    assert dict(match.values) == {"P.id": "a7", "P.name": "Ada"}
    assert dict(match.ids) == {"H": 0}  # stream members only


def test_explain_shows_each_table_its_readers_and_where_their_conditions_are_decided() -> None:
    m = matcher()
    m.register_queries(
        "Query ID: old\nSELECT * FROM H, patients P WHERE P.id = H.patient AND P.age >= 70 AND H.beatrate > P.age;"
    )
    m.upsert_rows("patients", [{"id": 1, "ward": "ICU", "age": 71}, {"id": 2, "ward": "GEN", "age": 45}], None)
    text = m.explain()
    assert "patients KEY (id): 2 key(s), 2 version(s) held" in text
    assert "old as P: P.id = H.patient\n      per version: P.age >= 70\n      per result: H.beatrate > P.age" in text
    (table,) = m.explain_data()["tables"]
    assert table["readers"][0]["filter"] == "P.age >= 70"


def test_a_query_joins_a_view_with_a_table_through_every_path() -> None:
    """A view's rows meet a table as of their ts (push, push_batch, and after a restore)."""
    m = mqo.Matcher("REGISTER STREAM B (p FLOAT, who INTEGER); REGISTER STREAM H (r FLOAT, who INTEGER);")
    m.register_queries(
        "CREATE VIEW pairs AS SELECT B.who AS who, B.p AS p FROM B, H MAXWINDOW 5 WHERE B.who = H.who;\n"
        "CREATE TABLE people (id INTEGER, name STRING) KEY (id);\n"
        "Query ID: named\nSELECT v.p, P.name FROM pairs v, people P WHERE v.who = P.id;"
    )
    m.upsert_rows("people", [{"id": 1, "name": "Ada"}], None)
    m.upsert_rows("people", [{"id": 1, "name": "Bea"}], 3)
    assert m.push("B", 1, {"p": 2.0, "who": 1}) == []
    assert [r.values["P.name"] for r in m.push("H", 2, {"r": 2.0, "who": 1})] == ["Ada"]
    batch = m.push_batch("H", {"ts": [3.0], "r": [1.0], "who": [1]})
    assert [r.values["P.name"] for r in batch.matches()] == ["Bea"]
    restored = mqo.Matcher.restore(mqo.decode_snapshot(mqo.encode_snapshot(m.snapshot())))
    assert [r.values["P.name"] for r in restored.push("H", 4, {"r": 2.0, "who": 1})] == ["Bea"]
