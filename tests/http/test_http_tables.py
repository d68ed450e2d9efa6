"""Tables in ``mqo serve --http``: ``CREATE TABLE`` posted to /queries, rows put with
``POST /tables/upsert`` and ``/tables/delete`` between posts of tuples, against the
exact reference of tables (tests/references/exact_tables.py), across a ``kill -9``
and a restart from the checkpoint; and the errors of bad changes, which apply nothing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tests.cli.test_tables_cli import PATIENTS, QUERIES, SCHEMA
from tests.http.running import Service, post
from tests.references.exact_tables import TableReference
from tests.references.reference import exact_result

TEXT = PATIENTS.to_text() + "\n" + "\n".join(q.to_text() for q in QUERIES) + "\n"


def h(ts: float, patient: int, rate: float) -> tuple[str, Any]:
    return ("push", (ts, patient, rate))


def up(ts: float | None, *rows: tuple[int, str, int]) -> tuple[str, Any]:
    return ("upsert", (ts, [{"id": i, "ward": w, "age": a} for i, w, a in rows]))


# (kind, arguments); "restart" kills the service (kill -9) and starts it again
OPS: list[tuple[str, Any]] = [
    up(None, (1, "ICU", 71), (2, "GEN", 45), (3, "ICU", 38)),
    up(3.0, (2, "ICU", 70)),
    *(h(float(t), 1 + t % 3, 121.0 + t) for t in range(0, 6)),
    # an update between tuples: patient 1 leaves the ICU at 8 (tuples 6 and 7, after
    # it but older, read the version before it)
    up(8.0, (1, "GEN", 71)),
    *(h(float(t), 1 + t % 3, 121.0 + t) for t in range(6, 11)),
    ("restart", None),
    # a late upsert (ts 2, before the tuples seen) and a delete
    up(2.0, (5, "ICU", 90)),
    ("delete", (12.0, [{"id": 3}])),
    h(9.0, 5, 130.0),  # not late: the watermark is 10 - 3
    h(11.0, 3, 125.0),
    h(12.0, 3, 126.0),
    h(12.5, 5, 131.0),
    h(13.0, 1, 140.0),
]


def test_table_changes_between_tuples_equal_the_reference_across_a_restart(tmp_path: Path) -> None:
    schema = tmp_path / "s.ddl"
    schema.write_text(SCHEMA.ddl())
    # a snapshot every 3 operations: some table changes come back from the snapshot, some from the log
    args = ("--http", "127.0.0.1:0", "--allowed-lateness", "3", "--checkpoint", str(tmp_path / "ck"))
    args += ("--snapshot-every", "3")
    service = Service(*args, schema=str(schema))
    ref = TableReference(SCHEMA, (PATIENTS,), 3.0)
    try:
        assert service.client.post("/queries", content=TEXT).json() == {"ids": ["icu_fast", "elderly"]}
        for q in QUERIES:
            ref.register(q)
        want: Counter[str] = Counter()
        for kind, arg in OPS:
            if kind == "restart":
                service.kill()
                service = Service(*args, schema=str(schema))
            elif kind == "push":
                ts, patient, rate = arg
                reply = post(service.client, "H", [{"ts": ts, "patient": patient, "beatrate": rate}], "ndjson")
                assert reply.status_code == 200 and reply.json()["accepted"] == 1, reply.text
                want.update(str(r) for r in ref.push("H", ts, {"patient": patient, "beatrate": rate}))
            else:
                ts, items = arg
                body = {"table": "patients", ("keys" if kind == "delete" else "rows"): items, "ts": ts}
                answer = service.client.post(f"/tables/{kind}", json=body)
                assert answer.status_code == 200, answer.text
                done = "deleted" if kind == "delete" else "upserted"
                assert answer.json() == {"table": "patients", done: len(items), "ts": ts}
                (ref.delete if kind == "delete" else ref.upsert)("patients", items, ts)
        served = [r for _, r in service.results()]
        tables = service.client.get("/tables").json()["tables"]
    finally:
        assert service.stop() == 0
    assert Counter(str(exact_result(r["query"], r["ts"], r["ids"], r["values"])) for r in served) == want
    icu = {(r["ts"], r["values"]["H.patient"]) for r in served if r["query"] == "icu_fast"}
    assert {(0.0, 1), (6.0, 1), (7.0, 2), (9.0, 5), (11.0, 3), (12.5, 5)} <= icu
    assert not {(9.0, 1), (12.0, 3), (13.0, 1)} & icu
    assert [(t["name"], t["key"], t["keys"], t["readers"]) for t in tables] == [
        ("patients", ["id"], 4, ["elderly", "icu_fast"])
    ]


def test_a_bad_change_is_named_and_applies_nothing(tmp_path: Path) -> None:
    schema = tmp_path / "s.ddl"
    schema.write_text(SCHEMA.ddl())
    service = Service("--http", "127.0.0.1:0", schema=str(schema))
    c = service.client
    try:
        none = c.post("/tables/upsert", json={"table": "patients", "rows": [], "ts": None})
        assert none.status_code == 404 and "none is declared (POST a CREATE TABLE to /queries)" in none.json()["error"]
        assert c.post("/queries", content=TEXT).status_code == 201
        good = {"id": 1, "ward": "ICU", "age": 70}
        cases: list[tuple[str, Any, int, str, int | None, str | None]] = [
            ("upsert", {"table": "patient", "rows": [good]}, 404, "no table 'patient' (did you mean 'patients'?)",
             None, None),
            ("upsert", {"table": "patients", "rows": [good, {**good, "id": 2, "age": "old"}], "ts": 1},
             400, 'table patients, row 1, column age: "old" is not a number', 1, "age"),
            ("upsert", {"table": "patients", "rows": [good, {"id": 2, "ward": "ICU"}]}, 400,
             "table patients, row 1: no value for column(s) age", 1, "age"),
            ("upsert", {"table": "patients", "rows": [{**good, "agee": 3}]}, 400,
             "table patients, row 0: 'agee' is not a column of table patients (did you mean 'age'?)", 0, "agee"),
            ("upsert", {"table": "patients", "rows": [good, {**good, "id": None}]}, 400,
             "table patients, row 1, column id: the KEY column is null", 1, "id"),
            ("upsert", {"table": "patients", "rows": [good, {**good, "id": 1.5}]}, 400,
             "table patients, row 1, column id:", 1, "id"),
            ("upsert", {"table": "patients", "rows": [good], "ts": "soon"}, 400, '"ts" is a number', None, None),
            ("upsert", {"table": "patients", "keys": [1]}, 400, "unknown field 'keys'", None, None),
            ("delete", {"table": "patients", "keys": [1, {"id": 2, "ward": "ICU"}]}, 400,
             "table patients, key 1: 'ward' is not a KEY column", 1, "ward"),
            ("replace", {"table": "patients", "rows": [good]}, 404, "POST /tables/upsert (rows) or /tables/delete",
             None, None),
        ]  # fmt: skip
        for change, body, status, message, row, column in cases:
            answer = c.post(f"/tables/{change}", json=body)
            assert answer.status_code == status and message in answer.json()["error"], (body, answer.text)
            if row is not None:
                assert (answer.json()["row"], answer.json()["column"]) == (row, column)
        assert c.post("/tables/upsert", content=b"{not json").status_code == 400
        # all or nothing: none of the good rows of the refused changes is in the table
        assert [(t["keys"], t["versions"]) for t in c.get("/tables").json()["tables"]] == [(0, 0)]
        assert post(c, "H", [{"ts": 1.0, "patient": 1, "beatrate": 150.0}], "ndjson").json()["results"] == 0
        assert c.post("/tables/upsert", json={"table": "PATIENTS", "rows": [good]}).status_code == 200
        assert post(c, "H", [{"ts": 2.0, "patient": 1, "beatrate": 150.0}], "ndjson").json()["results"] == 2
        again = c.post("/queries", content=PATIENTS.to_text())
        assert again.status_code == 400 and "a table named patients exists already" in again.json()["error"]
    finally:
        assert service.stop() == 0
