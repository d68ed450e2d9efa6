"""One query file with match and aggregate queries runs on either engine of
``mqo match`` and gives the same output files: the aggregate rows in the same place,
format and order (``runtime.io.aggregate_writers.in_file_order``), the same matches, late and
reject files. The local engine's runs are the real command in a subprocess; the Spark
engine's too in the JSON-lines test, and in this process on the test run's Spark session
in the CSV test (``tests.cli.clirun.in_session``)."""

from __future__ import annotations

import csv
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.cli.clirun import match, strict_lines, write

DDL = """REGISTER STREAM S (sensor INTEGER, temp FLOAT, name STRING);
REGISTER STREAM T (sensor INTEGER, level FLOAT);
"""
QUERIES = """Query ID: hot
SELECT * FROM S WHERE S.temp > 30;
Query ID: pair
SELECT S.temp, T.level FROM S, T MAXWINDOW 2 WHERE S.sensor = T.sensor AND T.level > 5;
Query ID: square
SELECT S.sensor * S.sensor AS sq FROM S WHERE S.temp > 35;
Query ID: per_sensor
SELECT S.sensor, COUNT(*), AVG(S.temp) AS mean, MAX(S.temp) FROM S [RANGE 10 SLIDE 5] GROUP BY S.sensor;
Query ID: by_name
SELECT S.name, SUM(S.sensor), MIN(S.temp) FROM S [RANGE 6] GROUP BY S.name HAVING COUNT(*) > 1;
Query ID: last3
SELECT S.sensor, AVG(S.temp), COUNT(S.temp) FROM S [ROWS 3 SLIDE 2] GROUP BY S.sensor;
Query ID: since
SELECT COUNT(*), MAX(T.level) FROM T [RANGE UNBOUNDED SLIDE 8];
Query ID: all
SELECT COUNT(*) AS n, STDDEV(S.temp) FROM S [RANGE 4 SLIDE 2] WHERE S.temp > 10;
"""


def workload(tmp_path: Path, seed: int = 5) -> tuple[str, str, list[str]]:
    """Two streams interleaved in time; groups first seen out of key order, NULL
    keys and values, a late tuple, a bad row (skipped to the reject file) and a
    sensor whose square is past 64 bits (written as NULL, counted in a warning)."""
    rnd = random.Random(seed)
    s, t = ["ts,sensor,temp,name"], ["ts,sensor,level"]
    for i in range(60):
        ts = i * 0.5 + 0.25
        if i % 2 == 0:
            sensor, temp = rnd.choice([3, 1, 2, ""]), rnd.choice([12.5, 31.25, 40.0, 8.75, ""])
            s.append(f"{ts},{sensor},{temp},{rnd.choice(['b', 'a', 'c'])}")
        else:
            t.append(f"{ts},{rnd.choice([2, 3, 1])},{rnd.choice([1.5, 6.25, 9.0])}")
    s.insert(20, "1.0,2,50.0,late")  # older than the watermark when it arrives
    s.insert(25, "9.5,two,1.0,bad")
    s.append(f"30.25,{2**62},40.0,a")
    ddl = write(tmp_path / "s.ddl", DDL)
    queries = write(tmp_path / "q.mqo", QUERIES)
    inputs = [f"S={write(tmp_path / 'S.csv', chr(10).join(s) + chr(10))}"]
    inputs.append(f"T={write(tmp_path / 'T.csv', chr(10).join(t) + chr(10))}")
    return ddl, queries, inputs


def run(tmp_path: Path, engine: str, fmt: str, spark: Any = None) -> Path:
    """The output file of a run (a subprocess, or in this process on ``spark``); its
    ``warning:`` lines beside it (``warnings.txt``)."""
    ddl, queries, inputs = workload(tmp_path)
    out = tmp_path / engine / f"out.{fmt}"
    out.parent.mkdir(exist_ok=True)
    args = ["--output", str(out), "--engine", engine, "--allowed-lateness", "1", "--on-bad-row", "skip"]
    done = match(*args, schema=ddl, queries=queries, inputs=inputs, cwd=tmp_path, spark=spark)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    (out.parent / "warnings.txt").write_text("\n".join(warned))
    return out


def side_files(out: Path) -> tuple[str, str]:
    return Path(f"{out}.late.jsonl").read_text(), Path(f"{out}.rejects.jsonl").read_text()


@pytest.mark.spark
def test_jsonl_output_is_the_same_on_both_engines(tmp_path: Path) -> None:
    """Both engines' runs are processes of their own: this one holds ``mqo match
    --engine spark`` end to end, the command starting, quieting and stopping its own
    Spark (the other Spark CLI tests run it in the test run's session)."""
    local, spark = run(tmp_path, "local", "jsonl"), run(tmp_path, "spark", "jsonl")
    local_lines, spark_lines = local.read_text().splitlines(), spark.read_text().splitlines()
    # matches first, then the aggregate rows (the local engine writes them at the end of input)
    split = [sum("window_end" not in line for line in lines) for lines in (local_lines, spark_lines)]
    assert split[0] == split[1] and all("window_end" in line for line in local_lines[split[0] :])
    aggregates = local_lines[split[0] :]
    assert spark_lines[split[0] :] == aggregates, "aggregate rows in the same order, written alike"
    assert {r["query"] for r in strict_lines("\n".join(aggregates) + "\n")} == {
        "per_sensor",
        "by_name",
        "last3",
        "since",
        "all",
    }
    # match records are the same; each engine orders them as it documents (spark: by ts)
    assert Counter(spark_lines[: split[0]]) == Counter(local_lines[: split[0]]) and split[0] > 0
    assert side_files(spark) == side_files(local)
    assert side_files(local)[0] and side_files(local)[1]
    # the square past 64 bits: NULL in both, and both engines count it alike
    warned = "warning: 1 computed value(s) were not finite numbers (overflow) and are written as NULL"
    assert (spark.parent / "warnings.txt").read_text() == (local.parent / "warnings.txt").read_text() == warned


@pytest.mark.spark
def test_csv_output_files_are_the_same_on_both_engines(tmp_path: Path, spark_session: Any) -> None:
    local, spark = run(tmp_path, "local", "csv"), run(tmp_path, "spark", "csv", spark_session)
    local_aggregates = (local.parent / "out.aggregates.csv").read_bytes()
    assert (spark.parent / "out.aggregates.csv").read_bytes() == local_aggregates
    assert len(local_aggregates.splitlines()) > 50
    header, *matches = local.read_text().splitlines()
    spark_header, *spark_matches = spark.read_text().splitlines()
    assert spark_header == header and Counter(spark_matches) == Counter(matches) and matches
    assert side_files(spark) == side_files(local)


def test_aggregate_rows_in_a_file_come_by_window_end_query_and_group_key(tmp_path: Path) -> None:
    """Not in the order groups first arrive (which an engine that partitions the
    input cannot know), and count windows a flush completes come in their place."""
    out = run(tmp_path, "local", "csv")
    with open(out.parent / "out.aggregates.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    position = {name: k for k, name in enumerate(["per_sensor", "by_name", "last3", "since", "all"])}

    def key(row: dict[str, str]) -> tuple:
        group = tuple(
            (row[g] != "", int(row[g]) if g == "group.sensor" and row[g] else row[g])
            for g in row
            if g.startswith("group.")
        )
        return (float(row["window_end"]), position[row["query"]], group)

    assert [key(r) for r in rows] == sorted(key(r) for r in rows)
    # the workload makes the plain emission order differ: sensor 3 arrives first
    ends = [(r["window_end"], r["query"]) for r in rows if r["query"] == "per_sensor"]
    assert len(set(ends)) < len(ends)
