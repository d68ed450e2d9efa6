"""Aggregate rows as CSV and Parquet from ``mqo match``: the columns the README gives,
the values the JSON lines give."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from runtime.cli import main

DDL = "REGISTER STREAM S (who STRING, x FLOAT, n INTEGER);"
QUERIES = (
    "Query ID: per_who SELECT S.who, COUNT(*), SUM(S.x), MAX(S.n), SUM(S.n) AS total"
    " FROM S [RANGE 2 sec SLIDE 1 sec] GROUP BY S.who;\n"
    "Query ID: since SELECT COUNT(S.x) AS c, AVG(S.n) * 2 AS twice, -MIN(S.n) AS neg, -AVG(S.n) AS negavg"
    " FROM S [RANGE UNBOUNDED SLIDE 2 sec];\n"
    "Query ID: last3 SELECT S.n, MIN(S.x), COUNT(*) FROM S [ROWS 3] GROUP BY S.n;\n"
    "Query ID: big SELECT * FROM S WHERE S.x > 1.25;\n"
)


def _run(tmp_path: Path, fmt: str) -> Path:
    (tmp_path / "s.ddl").write_text(DDL)
    (tmp_path / "q.mqo").write_text(QUERIES)
    who = ["a", "b,c", "", 'd "q"']
    with open(tmp_path / "s.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["ts", "who", "x", "n"])
        for i in range(20):
            x = "" if i % 5 == 0 else repr(0.1 * i)
            writer.writerow([repr(i * 0.5), who[i % 4], x, 9007199254740993 if i == 7 else i % 3])
    out = tmp_path / f"out.{fmt}"
    args = ["match", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q.mqo"), "-q"]
    assert main([*args, "--input", f"S={tmp_path / 's.csv'}", "--output", str(out)]) == 0
    return out


def _expected(tmp_path: Path) -> list[dict[str, Any]]:
    out = _run(tmp_path, "jsonl")
    return [r for r in map(json.loads, out.read_text().splitlines()) if "window_end" in r]


def _as_rows(records: list[dict[str, Any]], groups: list[str], values: list[str]) -> list[tuple]:
    return [
        (
            r["query"],
            r["window_start"],
            r["window_end"],
            *(r["group"].get(g) for g in groups),
            *(r["values"].get(v) for v in values),
        )
        for r in records
    ]


GROUPS = ["who", "n"]
VALUES = ["S.who", "COUNT(*)", "SUM(S.x)", "MAX(S.n)", "total", "c", "twice", "neg", "negavg", "S.n", "MIN(S.x)"]


def test_parquet_aggregate_file(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    expected = _expected(tmp_path / "a")
    out = _run(tmp_path, "parquet")
    table = pq.read_table(tmp_path / "out.aggregates.parquet")
    assert table.column_names == ["query", "window_start", "window_end", *(f"group.{g}" for g in GROUPS), *VALUES]
    types = {f.name: str(f.type) for f in table.schema}
    assert types["COUNT(*)"] == types["MAX(S.n)"] == types["total"] == types["group.n"] == "int64"
    assert types["SUM(S.x)"] == types["twice"] == "double" and types["group.who"] == "string"
    # a negation has its operand's type, in JSON lines too (-MIN of an INTEGER was an
    # integer there and a double in CSV, Parquet and on Spark)
    assert types["neg"] == "int64" and types["negavg"] == "double"
    since = [r["values"] for r in expected if r["query"] == "since"]
    assert since and all(type(v["neg"]) is int and type(v["negavg"]) is float for v in since)
    got = [tuple(row.values()) for row in table.to_pylist()]
    assert got == _as_rows(expected, GROUPS, VALUES)
    assert any(r["query"] == "since" and r["window_start"] is None for r in expected)
    assert any(9007199254740993 in row for row in got)  # 64-bit integers exactly
    matches = [r for r in map(json.loads, (tmp_path / "a" / "out.jsonl").read_text().splitlines()) if "ts" in r]
    assert matches and pq.read_table(out).column("ts").to_pylist() == [r["ts"] for r in matches]  # their own file


def test_csv_aggregate_file(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    expected = _expected(tmp_path / "a")
    _run(tmp_path, "csv")
    with open(tmp_path / "out.aggregates.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["query", "window_start", "window_end", *(f"group.{g}" for g in GROUPS), *VALUES]

    def cell(v: Any) -> str:
        return "" if v is None else repr(v) if isinstance(v, float) else str(v)

    assert rows[1:] == [[cell(v) for v in row] for row in _as_rows(expected, GROUPS, VALUES)]


def test_aggregate_file_path_and_clashes(tmp_path: Path) -> None:
    (tmp_path / "s.ddl").write_text(DDL)
    (tmp_path / "q.mqo").write_text("Query ID: a SELECT COUNT(*) AS window_end FROM S [RANGE 1 sec];")
    (tmp_path / "s.csv").write_text("ts,who,x,n\n1,a,1.0,1\n")
    args = ["match", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q.mqo"), "-q"]
    args += ["--input", f"S={tmp_path / 's.csv'}", "--output", str(tmp_path / "o.csv")]
    assert main(args) != 0  # the value name is a column of the file: an error, not a lost column
    (tmp_path / "q.mqo").write_text("Query ID: a SELECT COUNT(*) FROM S [RANGE 1 sec];")
    assert main([*args, "--aggregates", str(tmp_path / "agg.csv")]) == 0
    assert (tmp_path / "agg.csv").read_text().splitlines() == ["query,window_start,window_end,COUNT(*)", "a,0.0,1.0,1"]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_match_only_runs_make_no_aggregate_file(tmp_path: Path, fmt: str) -> None:
    (tmp_path / "s.ddl").write_text(DDL)
    (tmp_path / "q.mqo").write_text("Query ID: a SELECT * FROM S WHERE S.x > 0;")
    (tmp_path / "s.csv").write_text("ts,who,x,n\n1,a,1.0,1\n")
    args = ["match", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q.mqo"), "-q"]
    assert main([*args, "--input", f"S={tmp_path / 's.csv'}", "--output", str(tmp_path / f"o.{fmt}")]) == 0
    assert not (tmp_path / f"o.aggregates.{fmt}").exists()
