"""ISTREAM / DSTREAM through the real commands: ``mqo match`` (JSON lines and the CSV
aggregates file) and ``mqo serve --once`` across a restart from its checkpoint,
against the exact reference (tests/references/exact_relations.py)."""

from __future__ import annotations

import csv
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

from tests.cli.clirun import match, mqo, strict_lines, write
from tests.references.exact_relations import RelQuery, relation_streams

DDL = "REGISTER STREAM H (patient INTEGER, beatrate INTEGER);"
F = Fraction
QUERIES = [
    RelQuery("rising", "H", F(10), F(5), [], ["H.patient"], [("AVG", "H.beatrate")], ("AVG", "H.beatrate", ">", 100)),
    RelQuery(
        "gone", "H", F(6), F(3), [("H.beatrate", ">", 90)], ["H.patient"], [("COUNT", None), ("MAX", "H.beatrate")]
    ),
    RelQuery("every", "H", F(10), F(5), [], ["H.patient"], [("AVG", "H.beatrate")], ("AVG", "H.beatrate", ">", 100)),
    RelQuery(
        "last4", "H", F(4), F(2), [], ["H.patient"], [("MIN", "H.beatrate")], ("MIN", "H.beatrate", ">", 95), rows=True
    ),
]
QUERIES[0].op, QUERIES[1].op, QUERIES[3].op = "ISTREAM", "DSTREAM", "ISTREAM"


def tuples(seed: int, n: int, start: float = 0.0) -> list[tuple[float, dict[str, Any]]]:
    rnd = random.Random(seed)
    out, ts = [], start
    for _ in range(n):
        ts += rnd.choice([0.0, 0.5, 1.0, 2.0, 7.0])
        out.append(
            (ts, {"patient": rnd.choice([1, 2, 3, None]), "beatrate": rnd.choice([None, 80, 95, 101, 110, 130])})
        )
    return out


def csv_text(rows: list[tuple[float, dict[str, Any]]]) -> str:
    lines = ["ts,patient,beatrate"]
    lines += [
        f"{ts!r},{'' if v['patient'] is None else v['patient']},{'' if v['beatrate'] is None else v['beatrate']}"
        for ts, v in rows
    ]
    return "\n".join(lines) + "\n"


def expected_rows(data: list[tuple[float, dict[str, Any]]], until: float | None = None) -> list[tuple]:
    """The reference's rows as (query, start, end, group, values); ``until``: only the
    windows ending before it (a run without an end of input)."""
    out = []
    for r in relation_streams(QUERIES, data, 0.0):
        if until is not None and not r.end < until:
            continue
        start = None if r.start is None else float(r.start)
        values = {k: float(v) if isinstance(v, Fraction) else v for k, v in r.values.items()}
        out.append((r.query, start, float(r.end), [None if g is None else g for g in r.group], values))
    return sorted(out, key=repr)


def got_rows(rows: list[dict[str, Any]], queries: list[RelQuery]) -> list[tuple]:
    names = {q.name: [f"{f}({'*' if c is None else c})" for f, c in q.calls] for q in queries}
    out = []
    for r in rows:
        values = {n: r["values"][n] for n in names[r["query"]]}
        values = {k: float(v) if k.startswith("AVG") else v for k, v in values.items()}
        out.append((r["query"], r["window_start"], r["window_end"], list(r["group"].values()), values))
    return sorted(out, key=repr)


def test_mqo_match_reports_what_the_reference_does(tmp_path: Path) -> None:
    data = tuples(1, 120)
    schema = write(tmp_path / "s.ddl", DDL)
    queries = write(tmp_path / "q.mqo", "\n".join(q.text() for q in QUERIES) + "\n")
    write(tmp_path / "h.csv", csv_text(data))
    done = match(
        "--output", str(tmp_path / "out.jsonl"), schema=schema, queries=queries, inputs=[f"H={tmp_path / 'h.csv'}"]
    )
    assert done.returncode == 0, done.stderr
    rows = [r for r in strict_lines((tmp_path / "out.jsonl").read_text()) if "window_end" in r]
    expected = expected_rows(data)
    assert {r[0] for r in expected} == {"rising", "gone", "every", "last4"}
    assert got_rows(rows, QUERIES) == expected
    # ISTREAM reports fewer rows than the same query under RSTREAM
    assert 0 < sum(r["query"] == "rising" for r in rows) < sum(r["query"] == "every" for r in rows)
    done = match(
        "--output",
        str(tmp_path / "out.csv"),
        "--format",
        "csv",
        schema=schema,
        queries=queries,
        inputs=[f"H={tmp_path / 'h.csv'}"],
    )
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "out.aggregates.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(rows)
    assert sorted((r["query"], r["window_end"]) for r in table) == sorted(
        (r["query"], repr(r["window_end"])) for r in rows
    )


def test_mqo_match_refuses_istream_on_a_match_query_at_its_place(tmp_path: Path) -> None:
    schema = write(tmp_path / "s.ddl", DDL)
    queries = write(tmp_path / "q.mqo", "Query ID: hot\nSELECT ISTREAM * FROM H WHERE H.beatrate > 100;\n")
    write(tmp_path / "h.csv", "ts,patient,beatrate\n1,1,120\n")
    done = match(
        "--output", str(tmp_path / "out.jsonl"), schema=schema, queries=queries, inputs=[f"H={tmp_path / 'h.csv'}"]
    )
    assert done.returncode == 2
    assert "q.mqo:2:8: ISTREAM applies to aggregate queries" in done.stderr and "^~~~~~~" in done.stderr
    assert "Traceback" not in done.stderr


def test_mqo_serve_carries_the_relation_across_restarts(tmp_path: Path) -> None:
    """Two ``serve --once`` runs, each a new process restored from the checkpoint: the
    rows of both steps are the reference's over all the data, up to the watermark."""
    time_queries = [q for q in QUERIES if not q.rows]
    first, second = tuples(2, 60), tuples(3, 60, start=200.0)
    for sub in ("q", "in"):
        (tmp_path / sub).mkdir()
    write(tmp_path / "q" / "a.mqo", "\n".join(q.text() for q in time_queries) + "\n")
    command = ["serve", "--schema", write(tmp_path / "s.ddl", DDL), "--queries", str(tmp_path / "q")]
    command += ["--input", f"H={tmp_path / 'in'}", "--output", str(tmp_path / "out")]
    command += ["--checkpoint", str(tmp_path / "ck"), "--once"]
    rows: list[dict[str, Any]] = []
    for k, part in enumerate((first, second)):
        write(tmp_path / "in" / f"{k}.csv", csv_text(part))
        done = mqo(*command)
        assert done.returncode == 0, done.stderr
    steps = sorted((tmp_path / "out").glob("results-*.jsonl"))
    for path in steps:
        rows += [r for r in strict_lines(path.read_text()) if "window_end" in r]
    assert len(steps) == 2 and all("window_end" in path.read_text() for path in steps)  # rows from both runs
    everything = first + second
    assert rows and {r["query"] for r in rows} == {"rising", "gone", "every"}
    assert got_rows(rows, time_queries) == [
        r for r in expected_rows(everything, until=everything[-1][0]) if r[0] != "last4"
    ]
