"""Tables in ``mqo serve`` through the real command: ``--table patients=FILE``, a file
that grows while the service runs, against the exact reference of tables
(tests/references/exact_tables.py). Every step is its own ``mqo serve --once``
process, so each step restarts from the checkpoint (table versions and how much of
the file was read included)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from tests.cli.clirun import mqo, strict_lines, write
from tests.cli.test_tables_cli import PATIENTS, QUERIES, SCHEMA
from tests.references.exact_tables import TableReference
from tests.references.reference import exact_result

LATENESS = 3.0
# (ts or None, op, id, ward, age): what each step appends to the table file
TableRow = tuple[float | None, str, Any, str, Any]
STEPS: list[tuple[list[TableRow], list[tuple[float, int, float]]]] = [
    (
        [(None, "", 1, "ICU", 71), (None, "", 2, "GEN", 45), (None, "", 3, "ICU", 38), (3.0, "", 2, "ICU", 70)],
        [(float(t), 1 + t % 3, 121.0 + t) for t in range(0, 6)],
    ),
    (
        # an update between tuples: patient 1 leaves the ICU at 8, a later tuple of
        # this step reads it (the earlier ones do not)
        [(8.0, "", 1, "GEN", 71)],
        [(float(t), 1 + t % 3, 121.0 + t) for t in range(6, 11)],
    ),
    (
        # a late upsert: ts 2, before tuples matched already; the tuples after it read it
        # (ts 9 is not late: the watermark is 10 - 3), and a delete in the middle
        [(2.0, "upsert", 5, "ICU", 90), (12.0, "delete", 3, "", None)],
        [(9.0, 5, 130.0), (11.0, 3, 125.0), (12.0, 3, 126.0), (12.5, 5, 131.0), (13.0, 1, 140.0)],
    ),
    (
        # a bad row: none of this step's rows is taken (the good one neither)
        [(14.0, "", 5, "GEN", 90), (14.0, "", "x", "ICU", 1)],
        [(14.0, 5, 150.0), (15.0, 2, 150.0)],
    ),
]


def table_line(row: TableRow) -> str:
    ts, op, ident, ward, age = row
    return f"{'' if ts is None else ts},{op},{ident},{ward},{'' if age is None else age}\n"


def reference() -> Counter[str]:
    """The steps through the reference: per step, the rows the file gained (a bad row:
    none of them) put in as runtime/local/tables.py puts them among the step's tuples."""
    ref = TableReference(SCHEMA, (PATIENTS,), LATENESS)
    for q in QUERIES:
        ref.register(q)
    out: Counter[str] = Counter()
    for changes, tuples in STEPS:
        if any(not isinstance(row[2], int) for row in changes):
            changes = []
        for ts, _, ident, ward, age in [r for r in changes if r[0] is None]:
            ref.upsert("patients", [{"id": ident, "ward": ward, "age": age}], ts)
        pending = sorted((r for r in changes if r[0] is not None), key=lambda r: r[0])  # type: ignore[arg-type,return-value]
        newest = float("-inf")

        def put(row: TableRow) -> None:
            ts, op, ident, ward, age = row
            if op == "delete":
                ref.delete("patients", [{"id": ident}], ts)
            else:
                ref.upsert("patients", [{"id": ident, "ward": ward, "age": age}], ts)

        for ts, patient, rate in tuples:
            newest = max(newest, ts)
            while pending and pending[0][0] <= newest:  # type: ignore[operator]
                put(pending.pop(0))
            out.update(str(r) for r in ref.push("H", ts, {"patient": patient, "beatrate": rate}))
        for row in pending:
            put(row)
    return out


def serve(root: Path, *extra: str) -> Any:
    return mqo(
        "serve", "--schema", str(root / "s.ddl"), "--queries", str(root / "q"), "--input", f"H={root / 'h'}",
        "--output", str(root / "out"), "--checkpoint", str(root / "ck"), "--once", "--poll", "0.1",
        "--allowed-lateness", str(LATENESS), *extra,
    )  # fmt: skip


def test_a_growing_table_file_gives_the_references_results_across_restarts(tmp_path: Path) -> None:
    write(tmp_path / "s.ddl", SCHEMA.ddl())
    (tmp_path / "q").mkdir()
    (tmp_path / "h").mkdir()
    query_text = PATIENTS.to_text() + "\n" + "\n".join(q.to_text() for q in QUERIES) + "\n"
    write(tmp_path / "q" / "patients.mqo", query_text)
    table = tmp_path / "patients.csv"
    table.write_text("ts,op,id,ward,age\n")
    for number, (changes, tuples) in enumerate(STEPS, start=1):
        with open(table, "a") as f:
            f.write("".join(table_line(row) for row in changes))
        rows = "".join(f"{ts},{p},{rate}\n" for ts, p, rate in tuples)
        write(tmp_path / f"part-{number}.csv", "ts,patient,beatrate\n" + rows)
        (tmp_path / f"part-{number}.csv").rename(tmp_path / "h" / f"part-{number}.csv")
        if number == 3:  # the query file changes: its CREATE TABLE, the same again, keeps the table
            write(tmp_path / "q" / "patients.mqo", "-- the same queries\n" + query_text)
        run = serve(tmp_path, "--table", f"patients={table}")
        assert run.returncode == 0, run.stderr
    served = [r for path in sorted((tmp_path / "out").glob("results-*.jsonl")) for r in strict_lines(path.read_text())]
    got = Counter(str(exact_result(r["query"], r["ts"], r["ids"], r["values"])) for r in served)
    assert got == reference()
    # what the table changes decide: patient 1 leaves the ICU at 8, the late upsert puts
    # patient 5 in from ts 2 (read at 9), patient 3 is deleted at 12, the bad step's GEN
    # version of patient 5 is not taken
    icu = {(r["ts"], r["values"]["H.patient"]) for r in served if r["query"] == "icu_fast"}
    assert {(0.0, 1), (6.0, 1), (9.0, 5), (11.0, 3), (14.0, 5)} <= icu
    assert not {(9.0, 1), (12.0, 3), (13.0, 1)} & icu
    errors = [json.loads(line) for p in (tmp_path / "out").glob("input-errors-*.jsonl") for line in p.open()]
    assert len(errors) == 1 and errors[0]["table"] == "patients"
    assert f"{table}:10: column id: 'x' is not an integer" in errors[0]["error"]
    assert "none of the rows" in errors[0]["error"]


def test_table_errors_name_the_table_and_the_option(tmp_path: Path) -> None:
    write(tmp_path / "s.ddl", SCHEMA.ddl())
    (tmp_path / "q").mkdir()
    (tmp_path / "h").mkdir()
    table = write(tmp_path / "patients.csv", "id,ward,age\n1,ICU,80\n")
    write(tmp_path / "q" / "a.mqo", PATIENTS.to_text() + "\n" + QUERIES[0].to_text() + "\n")
    run = serve(tmp_path, "--table", f"patients={table}")
    assert run.returncode == 0, run.stderr
    # the table declared again with other columns: that file's error, at the statement
    write(tmp_path / "q" / "b.mqo", "CREATE TABLE patients (id INTEGER, ward STRING) KEY (id);\n")
    run = serve(tmp_path, "--table", f"patients={table}")
    assert run.returncode == 0, run.stderr
    errors = "".join(p.read_text() for p in (tmp_path / "out").glob("query-errors-*.jsonl"))
    assert (
        "b.mqo:1:1: table patients is declared already as (id INTEGER, ward STRING, age INTEGER) KEY (id)"
        in (json.loads(errors)["error"])
    )
    # a bad row added: with --on-bad-row error the service stops, naming it (the step is not committed)
    with open(table, "a") as f:
        f.write("2,ICU,x\n")
    run = serve(tmp_path, "--table", f"patients={table}", "--on-bad-row", "error")
    assert run.returncode == 2 and f"{table}:3: column age: 'x' is not an integer" in run.stderr
    # rewritten rather than grown: reported once, read no more
    write(tmp_path / "patients.csv", "id,ward,age\n7,ICU,80\n")
    run = serve(tmp_path, "--table", f"patients={table}")
    assert run.returncode == 0 and "changed other than by adding rows at its end" in run.stderr
    reported = [json.loads(line) for p in (tmp_path / "out").glob("input-errors-*.jsonl") for line in p.open()]
    assert [r["file"] for r in reported] == [table]
    cases = [
        (["--table", f"H={table}"], "--table H: H is a stream (give its files with --input)"),
        (["--table", f"patients={tmp_path / 'h' / 'p.csv'}"], "is in the input directory of --input H="),
        (["--table", f"patients={table}", "--table", f"Patients={table}"], "--table Patients is given twice"),
        (["--table", "patients"], "--table 'patients': no '='; give TABLE=FILE"),
    ]
    for args, message in cases:
        run = serve(tmp_path, *args)
        assert run.returncode == 2 and message in run.stderr, (args, run.stderr)
    run = mqo("serve", "--schema", str(tmp_path / "s.ddl"), "--http", "127.0.0.1:0", "--table", f"patients={table}")
    assert run.returncode == 2 and "--table is for the directory service: with --http" in run.stderr
    run = mqo(
        "serve", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q"), "--input",
        f"H={tmp_path / 'h'}", "--output", str(tmp_path / "o2"), "--checkpoint", str(tmp_path / "ck2"),
        "--engine", "spark", "--table", f"patients={table}",
    )  # fmt: skip
    assert run.returncode == 2 and "--engine spark does not run tables yet" in run.stderr
