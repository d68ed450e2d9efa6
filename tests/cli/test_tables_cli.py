"""Tables through the real ``mqo`` command: ``mqo match --table TABLE=FILE`` against
the exact reference of tables (tests/references/exact_tables.py), with versions from
the start, at a tuple's ts, deletes, and an input out of ts order; the errors of bad
table files and unknown tables (tables in ``mqo serve``: tests/cli/test_serve_tables.py; with
``--engine spark``: tests/cli/test_tables_spark_cli.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.cli.clirun import match, strict_lines, write
from tests.references.exact_language import (
    FLOAT,
    INTEGER,
    STRING,
    And,
    Cmp,
    Col,
    Column,
    Item,
    Num,
    Query,
    Schema,
    Str,
    Stream,
)
from tests.references.exact_tables import Table, TableReference
from tests.references.reference import exact_result

SCHEMA = Schema((Stream("H", (Column("patient", INTEGER), Column("beatrate", FLOAT))),))
PATIENTS = Table("patients", (Column("id", INTEGER), Column("ward", STRING), Column("age", INTEGER)), ("id",))
KEY = Cmp("=", Col("H", "patient"), Col("P", "id"))
QUERIES = [
    Query(
        "icu_fast",
        (("H", "H"), ("P", "patients")),
        where=And((KEY, Cmp("=", Col("P", "ward"), Str("ICU")), Cmp(">", Col("H", "beatrate"), Num("120")))),
    ),
    Query(
        "elderly",
        (("H", "H"), ("P", "patients")),
        where=And((KEY, Cmp(">=", Col("P", "age"), Num("70")))),
        select=(Item(Col("H", "beatrate")), Item(Col("P", "age"), "age")),
    ),
]
# (ts or None, op, id, ward, age)
TABLE_ROWS: list[tuple[float | None, str, int, str, int | None]] = [
    (None, "", 1, "ICU", 71),
    (None, "", 2, "GEN", 45),
    (None, "", 3, "ICU", 38),
    (12.0, "", 1, "GEN", 71),  # at the ts of a tuple: that tuple reads it
    (12.0, "", 1, "ICU", 72),  # same key, same ts: the later line wins
    (15.0, "delete", 3, "", None),
    (18.0, "upsert", 4, "ICU", 80),
    (18.5, "", 2, "ICU", 70),
]


def h_rows(order: str) -> list[tuple[float, int, float]]:
    rows = [(float(t), 1 + t % 4, 100.0 + (t * 7) % 50) for t in range(0, 24, 1)]
    if order == "shuffled":  # some tuples up to 3 s behind the newest (lateness 3: none late)
        rows = [*rows[:5], rows[7], rows[5], rows[6], *rows[8:12], rows[13], rows[12], *rows[14:]]
    return rows


def reference(rows: list[tuple[float, int, float]], lateness: float) -> Counter[Any]:
    """The run's rule (runtime/local/tables.py): rows without ts first, a version at t
    just before the first tuple at which the largest ts so far reaches t."""
    ref = TableReference(SCHEMA, (PATIENTS,), lateness)
    for q in QUERIES:
        ref.register(q)

    def put(ts: float | None, op: str, id: int, ward: str, age: int | None) -> None:
        if op == "delete":
            ref.delete("patients", [{"id": id}], ts)
        else:
            ref.upsert("patients", [{"id": id, "ward": ward, "age": age}], ts)

    for row in TABLE_ROWS:
        if row[0] is None:
            put(*row)
    pending = sorted((r for r in TABLE_ROWS if r[0] is not None), key=lambda r: r[0])  # type: ignore[arg-type,return-value]
    out: Counter[Any] = Counter()
    newest = float("-inf")
    for ts, patient, rate in rows:
        newest = max(newest, ts)
        while pending and pending[0][0] <= newest:  # type: ignore[operator]
            put(*pending.pop(0))
        for r in ref.push("H", ts, {"patient": patient, "beatrate": rate}):
            out[str(r)] += 1
    return out


def files(tmp_path: Path, order: str) -> tuple[str, str, str, str, list[tuple[float, int, float]]]:
    schema = write(tmp_path / "s.ddl", SCHEMA.ddl())
    queries = write(tmp_path / "q.mqo", PATIENTS.to_text() + "\n" + "\n".join(q.to_text() for q in QUERIES))
    rows = h_rows(order)
    h = write(tmp_path / "h.csv", "ts,patient,beatrate\n" + "".join(f"{t},{p},{r}\n" for t, p, r in rows))
    lines = "".join(
        f"{'' if ts is None else ts},{op},{i},{ward},{'' if age is None else age}\n"
        for ts, op, i, ward, age in TABLE_ROWS
    )
    table = write(tmp_path / "patients.csv", "ts,op,id,ward,age\n" + lines)
    return schema, queries, h, table, rows


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_match_joins_tables_as_of_each_tuple(tmp_path: Path, order: str) -> None:
    schema, queries, h, table, rows = files(tmp_path, order)
    out = tmp_path / "out.jsonl"
    run = match(
        "--table", f"patients={table}", "--allowed-lateness", "3", "--output", str(out),
        schema=schema, queries=queries, inputs=[f"H={h}"],
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    got = Counter(str(exact_result(r["query"], r["ts"], r["ids"], r["values"])) for r in strict_lines(out.read_text()))
    want = reference(rows, 3.0)
    assert got == want
    assert sum(want.values()) > 5 and "late:     0" in run.stderr


def test_table_rows_come_out_in_csv_too(tmp_path: Path) -> None:
    schema, queries, h, table, _ = files(tmp_path, "sorted")
    out = tmp_path / "out.csv"
    run = match("--table", f"patients={table}", "--output", str(out), schema=schema, queries=queries, inputs=[f"H={h}"])
    assert run.returncode == 0, run.stderr
    header = out.read_text().splitlines()[0].split(",")
    assert {"P.ward", "P.age", "age"} <= set(header)


@pytest.mark.parametrize(
    ("table_text", "message"),
    [
        ("ts,id,ward,age\n,1,ICU,71\n5,x,ICU,3\n", ":3: column id: 'x' is not an integer"),
        ("ts,id,ward,age\n,1,ICU,71\n,,GEN,3\n", ":3: column id: the KEY column is empty"),
        ("ts,op,id,ward,age\n1,remove,1,ICU,71\n", ":2: column op: 'remove' is not upsert or delete"),
        ("id,ward,agee\n1,ICU,71\n", ":1: column 'agee' is not a column of table patients (did you mean 'age'?)"),
        ("id,ward\n1,ICU\n", ":1: the header lacks column(s) age of table patients"),
        ("id,ward,age\n1,ICU\n", ":2: expected 3 fields, found 2"),
        # (a byte that is not UTF-8 written as the lone surrogate that stands for it)
        ("id,ward,age\n1,IC\udcffU,71\n", ":2: column ward: not UTF-8 text (the byte 0xff at character 5 of the row)"),
        ("id,wa\udcffrd,age\n1,ICU,71\n", ":1: not UTF-8 text (the byte 0xff at character 6 of the header)"),
    ],
)
def test_a_bad_table_file_is_named_by_line_and_column(tmp_path: Path, table_text: str, message: str) -> None:
    schema, queries, h, _, _ = files(tmp_path, "sorted")
    table = tmp_path / "bad.csv"
    table.write_bytes(table_text.encode("utf-8", "surrogateescape"))
    run = match("--table", f"patients={table}", schema=schema, queries=queries, inputs=[f"H={h}"])
    assert run.returncode != 0
    assert f"{table}{message}" in run.stderr, run.stderr


def test_unknown_tables_and_missing_rows(tmp_path: Path) -> None:
    schema, queries, h, table, _ = files(tmp_path, "sorted")
    run = match("--table", f"patient={table}", schema=schema, queries=queries, inputs=[f"H={h}"])
    assert run.returncode != 0
    assert f"--table 'patient={table}': the query file declares no table 'patient'" in run.stderr
    assert "(did you mean 'patients'?) (tables: patients)" in run.stderr
    run = match(schema=schema, queries=queries, inputs=[f"H={h}"])
    assert run.returncode == 0 and "table patients has no rows (give --table patients=FILE)" in run.stderr
    assert run.stdout == ""
