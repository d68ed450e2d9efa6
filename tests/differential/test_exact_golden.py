"""The examples of the exact-arithmetic issue, pinned (docs/ARCHITECTURE.md, "Exact numbers").

Each case is a schema, queries as structures (tests/references/reference.py prints them; the
printed text is pinned too) and tuples, with the results exact arithmetic gives. Every
case runs through ``Matcher.push``, ``Matcher.push_batch`` (consecutive tuples of one
stream as one batch) and ``mqo match`` in a subprocess, and the exact reference must
agree with the pinned answer as well.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import mqo
from tests.references.exact_workloads import Push, arrow_batch, csv_cell
from tests.references.reference import (
    FLOAT,
    INTEGER,
    Bin,
    Cmp,
    Col,
    Column,
    Duration,
    Num,
    Query,
    Reference,
    Schema,
    Stream,
)

REPO = Path(__file__).resolve().parents[2]

AB = Schema(
    (
        Stream("A", (Column("x", INTEGER), Column("f", FLOAT))),
        Stream("B", (Column("x", INTEGER), Column("f", FLOAT))),
    )
)
ABC = Schema(
    (
        Stream("A", (Column("x", INTEGER), Column("y", INTEGER), Column("z", FLOAT))),
        Stream("B", (Column("y", INTEGER), Column("z", FLOAT))),
        Stream("C", (Column("y", INTEGER), Column("z", FLOAT))),
    )
)


# the same streams declared C first: the engine normalizes by declaration order
CA = Schema((ABC.streams[2], ABC.streams[1], ABC.streams[0]))


def col(ref: str) -> Col:
    alias, name = ref.split(".")
    return Col(alias, name)


def two(name: str, aliases: str, where: Any = None, window: Any = None, maxwindow: Duration | None = None) -> Query:
    sources = tuple((a, a) for a in aliases)
    return Query(name, sources, maxwindow or Duration("5"), where=where, window=window)


@dataclass(frozen=True)
class Case:
    schema: Schema
    queries: tuple[Query, ...]
    texts: tuple[str, ...]  # how each query's condition must print
    tuples: tuple[tuple[str, float, dict[str, Any]], ...]  # (stream, ts, values); ids are automatic
    expected: frozenset[tuple[str, tuple[tuple[str, int], ...]]]  # (query, sorted (alias, id))
    lateness: float = 0.0
    late: int = 0


def hits(*items: tuple[str, dict[str, int]]) -> frozenset[tuple[str, tuple[tuple[str, int], ...]]]:
    return frozenset((q, tuple(sorted(ids.items()))) for q, ids in items)


THREE_X = Cmp(">", Bin("+", Bin("*", Num("3"), col("A.x")), Num("1")), col("B.x"))
C_EQ = Cmp("=", col("C.y"), Bin("+", Bin("*", col("A.x"), Num("3")), Num("1")))
B_LT = Cmp("<", col("B.y"), Bin("+", Bin("*", col("A.y"), Num("3")), Num("4")))
Z_EQ = Cmp("=", col("C.z"), Bin("-", col("A.z"), Num("2")))
TENTH = Cmp(">=", Bin("+", col("A.ts"), Num("0.1")), col("B.ts"))

CASES = {
    # 3 * 3 + 1 = 10 is not > 10; in doubles (x > (10 - 1) / 3 = 3.0000000000000004) it was
    "3x+1>B.x, A first": Case(
        AB,
        (two("q", "AB", where=THREE_X),),
        ("3 * A.x + 1 > B.x",),
        (("A", 0.0, {"x": 3}), ("B", 1.0, {"x": 10}), ("B", 2.0, {"x": 9})),
        hits(("q", {"A": 0, "B": 1})),
    ),
    "3x+1>B.x, B first": Case(
        AB,
        (two("q", "AB", where=THREE_X),),
        ("3 * A.x + 1 > B.x",),
        (("B", 0.0, {"x": 10}), ("B", 1.0, {"x": 9}), ("A", 2.0, {"x": 3})),
        hits(("q", {"A": 0, "B": 1})),
    ),
    "C.y = A.x * 3 + 1": Case(
        ABC,
        (two("q", "AC", where=C_EQ),),
        ("C.y = A.x * 3 + 1",),
        (("A", 0.0, {"x": 3}), ("C", 1.0, {"y": 10}), ("C", 2.0, {"y": 11}), ("A", 3.0, {"x": 3})),
        hits(("q", {"A": 0, "C": 0}), ("q", {"A": 1, "C": 0})),
    ),
    "B.y < A.y * 3 + 4": Case(
        ABC,
        (two("q", "AB", where=B_LT),),
        ("B.y < A.y * 3 + 4",),
        (("A", 0.0, {"y": 1}), ("B", 1.0, {"y": 7}), ("B", 2.0, {"y": 6}), ("A", 3.0, {"y": 2}), ("B", 4.0, {"y": 10})),
        # 7 < 7 no, 6 < 7 yes; with A.y = 2: 7 < 10, 6 < 10 yes, 10 < 10 no
        hits(("q", {"A": 0, "B": 1}), ("q", {"A": 1, "B": 0}), ("q", {"A": 1, "B": 1})),
    ),
    "C.z = A.z - 2 (FLOAT)": Case(
        ABC,
        (two("q", "AC", where=Z_EQ),),
        ("C.z = A.z - 2",),
        (("C", 0.0, {"z": 0.3}), ("A", 1.0, {"z": 2.3}), ("C", 2.0, {"z": 0.3})),
        hits(("q", {"A": 0, "C": 0}), ("q", {"A": 0, "C": 1})),
    ),
    # 2.3 - 2 is 0.2999999999999998 in doubles
    "C.z = A.z - 2 (FLOAT), C declared first": Case(
        CA,
        (two("q", "AC", where=Z_EQ),),
        ("C.z = A.z - 2",),
        (("C", 0.0, {"z": 0.3}), ("A", 1.0, {"z": 2.3}), ("C", 2.0, {"z": 0.3})),
        hits(("q", {"A": 0, "C": 0}), ("q", {"A": 0, "C": 1})),
    ),
    "x * 0.1 = 0.3": Case(
        ABC,
        (
            Query("int", (("A", "A"),), where=Cmp("=", Bin("*", col("A.x"), Num("0.1")), Num("0.3"))),
            Query("float", (("A", "A"),), where=Cmp("=", Bin("*", col("A.z"), Num("0.1")), Num("0.3"))),
        ),
        ("A.x * 0.1 = 0.3", "A.z * 0.1 = 0.3"),
        (("A", 0.0, {"x": 3, "z": 3.0}), ("A", 1.0, {"x": 4, "z": 4.0})),
        hits(("int", {"A": 0}), ("float", {"A": 0})),
    ),
    "A.ts + 0.1 >= B.ts": Case(
        AB,
        (two("q", "AB", window=TENTH),),
        ("A.ts + 0.1 >= B.ts",),
        (("A", 0.2, {}), ("B", 0.3, {}), ("A", 0.7, {}), ("B", 0.8, {}), ("B", 0.81, {})),
        # 0.7 + 0.1 is 0.7999999999999999 in doubles
        hits(("q", {"A": 0, "B": 0}), ("q", {"A": 1, "B": 0}), ("q", {"A": 1, "B": 1})),
    ),
    "MAXWINDOW 0.3 sec, 300 ms, 0.005 min": Case(
        AB,
        tuple(
            two(n, "AB", maxwindow=d)
            for n, d in (
                ("s", Duration("0.3", "sec")),
                ("ms", Duration("300", "ms")),
                ("min", Duration("0.005", "min")),
            )
        ),
        ("", "", ""),
        (("A", 0.1, {}), ("B", 0.4, {}), ("B", 0.41, {})),
        # 0.4 - 0.1 = 0.3 exactly (0.30000000000000004 in doubles); 0.41 - 0.1 > 0.3
        hits(("s", {"A": 0, "B": 0}), ("ms", {"A": 0, "B": 0}), ("min", {"A": 0, "B": 0})),
    ),
    "MAXWINDOW 0.2 sec at 7.3 and 7.5": Case(
        AB,
        (two("q", "AB", maxwindow=Duration("0.2", "sec")),),
        ("",),
        (("A", 7.3, {}), ("B", 7.5, {})),
        hits(("q", {"A": 0, "B": 0})),
    ),
    "lateness 0.1: 0.3 after 0.4": Case(
        AB,
        (Query("q", (("A", "A"),)),),
        ("",),
        (("A", 0.4, {"x": 1}), ("A", 0.3, {"x": 2}), ("A", 0.29, {"x": 3})),
        # 0.3 >= 0.4 - 0.1 exactly (0.30000000000000004 in doubles); 0.29 is late
        hits(("q", {"A": 0}), ("q", {"A": 1})),
        lateness=0.1,
        late=1,
    ),
}


def found(results: Any) -> set[tuple[str, tuple[tuple[str, int], ...]]]:
    return {(str(r.query), tuple(sorted(r.ids.items()))) for r in results}


@pytest.fixture(params=sorted(CASES), ids=str)
def case(request: pytest.FixtureRequest) -> Case:
    return CASES[request.param]


def fresh(case: Case) -> mqo.Matcher:
    m = mqo.Matcher(
        case.schema.ddl(),
        allowed_lateness=case.lateness,
        missing="null",
        order="AJW",
        late_sink=lambda t: None,
        time="global",
    )
    for q in case.queries:
        m.register_query(q.to_text())
    return m


def test_queries_print_as_the_issue_writes_them(case: Case) -> None:
    for query, text in zip(case.queries, case.texts, strict=True):
        assert text in query.to_text()


def test_reference(case: Case) -> None:
    ref = Reference(case.schema, case.lateness, time="global")  # the cases' lateness is one clock's
    for q in case.queries:
        ref.register(q)
    results = [r for stream, ts, values in case.tuples for r in ref.push(stream, ts, values)]
    assert {(r.query, r.ids) for r in results} == case.expected
    assert len(results) == len(case.expected)
    assert ref.late_count == case.late


@pytest.mark.parametrize("order", ["AJW", "WJA", "adaptive"])
def test_push(case: Case, order: str) -> None:
    m = mqo.Matcher(
        case.schema.ddl(),
        allowed_lateness=case.lateness,
        missing="null",
        order=order,
        late_sink=lambda t: None,
        time="global",
    )
    for q in case.queries:
        m.register_query(q.to_text())
    results = [r for stream, ts, values in case.tuples for r in m.push(stream, ts, values)]
    assert found(results) == case.expected
    assert len(results) == len(case.expected)
    assert m.late_count == case.late


def test_push_batch(case: Case) -> None:
    m = fresh(case)
    results: list[Any] = []
    start = 0
    while start < len(case.tuples):
        end = start
        while end < len(case.tuples) and case.tuples[end][0] == case.tuples[start][0]:
            end += 1
        stream = case.schema.stream(case.tuples[start][0])
        pushes = [Push(s, ts, values) for s, ts, values in case.tuples[start:end]]
        results += m.push_batch(stream.name, arrow_batch(stream, pushes, None)).matches()
        start = end
    assert found(results) == case.expected
    assert len(results) == len(case.expected)
    assert m.late_count == case.late


def test_cli(case: Case, tmp_path: Path) -> None:
    (tmp_path / "s.ddl").write_text(case.schema.ddl())
    (tmp_path / "q.mqo").write_text("\n".join(q.to_text() for q in case.queries))
    command = [sys.executable, "-m", "runtime.cli", "match", "--schema", str(tmp_path / "s.ddl")]
    command += ["--queries", str(tmp_path / "q.mqo"), "--output", str(tmp_path / "out.jsonl"), "--quiet"]
    command += ["--late", str(tmp_path / "late.jsonl"), "--allowed-lateness", repr(case.lateness), "--time", "global"]
    for stream in case.schema.streams:
        path = tmp_path / f"{stream.name}.csv"
        with path.open("w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["ts", *(c.name for c in stream.columns)])
            for s, ts, values in case.tuples:
                if s == stream.name:
                    out.writerow([repr(ts), *(csv_cell(values.get(c.name), c.type) for c in stream.columns)])
        command += ["--input", f"{stream.name}={path}"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines() if line.strip()]
    assert {(r["query"], tuple(sorted(r["ids"].items()))) for r in lines} == case.expected
    assert len(lines) == len(case.expected)
    late = tmp_path / "late.jsonl"
    assert (len(late.read_text().splitlines()) if late.exists() else 0) == case.late
