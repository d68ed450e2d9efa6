"""Aggregate views in ``mqo serve`` through the real command: an aggregate view over a
match view (and one over it, a level deeper), read by match queries and by an
aggregate query. Every step is its own ``mqo serve --once`` process (a restart from
the checkpoint each time). The match queries' results are compared with the exact
reference of views (tests/references/exact_views.py: the tuples pushed in the
service's merged order, no end of input), the aggregate query's rows with the Python
API's over the same tuples."""

from __future__ import annotations

import csv
import io
import json
import random
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import mqo
from runtime.local.serve import LocalService
from tests.cli.clirun import mqo as run_mqo
from tests.cli.clirun import strict_lines, write
from tests.references.exact_language import FLOAT, INTEGER, Cmp, Col, Column, Duration, Item, Num, Query, Schema
from tests.references.exact_language import Stream as RefStream
from tests.references.exact_views import AggView, View, ViewReference
from tests.references.reference import Result, exact_result

SCHEMA = Schema(
    (
        RefStream("B", (Column("x", INTEGER), Column("y", FLOAT))),
        RefStream("H", (Column("x", INTEGER), Column("y", FLOAT))),
    )
)
LATENESS = 1.0
PAIRS = View(
    Query(
        "pairs",
        (("b", "B"), ("h", "H")),
        maxwindow=Duration("2"),
        where=Cmp("<=", Col("b", "x"), Col("h", "x")),
        select=(Item(Col("b", "x"), "bx"), Item(Col("h", "y"), "hy")),
    )
)
BUSY = AggView("busy", "pairs", Fraction(2), Fraction(1), ("bx",), (("n", "COUNT", None), ("top", "MAX", "hy")))
PEAK = AggView("peak", "busy", Fraction(2), Fraction(2), (), (("most", "MAX", "n"),), op="ISTREAM")
READERS = [
    Query("crowded", (("r", "busy"),), where=Cmp(">=", Col("r", "n"), Num("2"))),
    Query("near", (("r", "busy"), ("k", "H")), maxwindow=Duration("1"), where=Cmp("=", Col("r", "bx"), Col("k", "x"))),
    Query("peaks", (("p", "peak"),), where=Cmp(">", Col("p", "most"), Num("1"))),
]
AGGREGATE = "Query ID: per_busy\nSELECT COUNT(*), MAX(s.n) FROM busy s [RANGE 4 sec SLIDE 2 sec];\n"
VIEW_ALIASES = {"crowded": {"r"}, "near": {"r"}, "peaks": {"p"}}
TEXT = "\n".join([PAIRS.to_text(), BUSY.to_text(), PEAK.to_text(), *(q.to_text() for q in READERS), AGGREGATE])

Row = tuple[float, dict[str, Any]]


def steps(seed: int = 5, count: int = 4) -> list[dict[str, list[Row]]]:
    """Per step, each stream's rows in ts order; a step may start up to 2 s behind the
    last (1 s is within the lateness, 2 s is late)."""
    rng = random.Random(seed)
    out: list[dict[str, list[Row]]] = []
    newest = 0.0
    for k in range(count):
        step: dict[str, list[Row]] = {}
        for stream in ("B", "H"):
            ts = 0.0 if k == 0 else newest - rng.choice([0.0, 0.5, 1.0, 2.0])
            rows = []
            for _ in range(rng.randint(8, 14)):
                rows.append((ts, {"x": rng.randint(0, 3), "y": rng.choice([0.5, 1.5, 2.3, 0.3])}))
                ts += rng.choice([0.0, 0.25, 0.5, 1.0])
            step[stream] = rows
        newest = max(ts for rows in step.values() for ts, _ in rows)
        out.append(step)
    return out


def merged(step: dict[str, list[Row]]) -> list[tuple[str, float, dict[str, Any]]]:
    """The service's arrival order: ts, then the order of --input (B, H), then the row."""
    keyed = [(ts, k, i, s, v) for k, s in enumerate(step) for i, (ts, v) in enumerate(step[s])]
    return [(s, ts, v) for ts, _, _, s, v in sorted(keyed, key=lambda r: r[:3])]


def key(result: Result) -> tuple[Any, ...]:
    """A result without the ids of view rows (a match view's ids follow the order made)."""
    aliases = VIEW_ALIASES.get(result.query, set())
    return (result.query, result.ts, tuple(i for i in result.ids if i[0] not in aliases), result.values)


def reference(plan: list[dict[str, list[Row]]]) -> tuple[Counter[tuple[Any, ...]], ViewReference]:
    """The readers' results (by :func:`key`) of the tuples in the service's order, and
    the reference after them."""
    ref = ViewReference(SCHEMA, LATENESS)
    ref.create_view(PAIRS)
    ref.create_agg_view(BUSY)
    ref.create_agg_view(PEAK)
    for q in READERS:
        ref.register(q)
    out: Counter[tuple[Any, ...]] = Counter()
    for step in plan:
        for stream, ts, values in merged(step):
            out.update(key(r) for r in ref.push(stream, ts, values))
    return out, ref


def api_aggregates(plan: list[dict[str, list[Row]]]) -> list[str]:
    m = mqo.Matcher(SCHEMA.ddl(), allowed_lateness=LATENESS, late_sink=lambda t: None)
    m.register_queries(TEXT)
    rows = []
    for step in plan:
        for stream, ts, values in merged(step):
            m.push(stream, ts, values)
        rows += m.poll_aggregates().to_pylist()
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def csv_text(rows: list[Row]) -> str:
    return "ts,x,y\n" + "".join(f"{ts!r},{v['x']},{v['y']!r}\n" for ts, v in rows)


def test_aggregate_views_in_serve_equal_the_reference_across_restarts(tmp_path: Path) -> None:
    schema = write(tmp_path / "s.ddl", SCHEMA.ddl())
    for folder in ("q", "B", "H"):
        (tmp_path / folder).mkdir()
    write(tmp_path / "q" / "views.mqo", TEXT)
    plan = steps()
    for number, step in enumerate(plan, start=1):
        for stream, rows in step.items():
            write(tmp_path / f"{stream}-{number}.csv", csv_text(rows))
            (tmp_path / f"{stream}-{number}.csv").rename(tmp_path / stream / f"{number:03d}.csv")
        run = run_mqo(
            "serve", "--schema", schema, "--queries", str(tmp_path / "q"), "--input", f"B={tmp_path / 'B'}",
            "--input", f"H={tmp_path / 'H'}", "--output", str(tmp_path / "out"), "--checkpoint",
            str(tmp_path / "ck"), "--once", "--poll", "0.1", "--allowed-lateness", str(LATENESS),
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
    lines = [r for p in sorted((tmp_path / "out").glob("results-*.jsonl")) for r in strict_lines(p.read_text())]
    matches = [r for r in lines if "window_end" not in r]
    got = Counter(key(exact_result(r["query"], r["ts"], r["ids"], r["values"])) for r in matches)
    want, _ = reference(plan)
    assert got == want
    assert {q for q, *_ in want} == {"crowded", "near", "peaks"}  # every reader found results
    # no row of a view is output; the aggregate query over the aggregate view is, as the API gives it
    assert {r["query"] for r in lines} == {"crowded", "near", "peaks", "per_busy"}
    rows = sorted(json.dumps(r, sort_keys=True) for r in lines if "window_end" in r)
    assert rows == api_aggregates(plan) and rows
    assert list((tmp_path / "out").glob("late-*.jsonl"))  # the steps that start 2 s behind bring late tuples


def test_with_csv_the_aggregate_file_holds_no_view_rows(tmp_path: Path) -> None:
    """``--format csv``: the aggregate file's columns are the aggregate query's, and
    its rows the API's (an aggregate view's own rows are no output)."""
    for folder in ("q", "B", "H"):
        (tmp_path / folder).mkdir()
    write(tmp_path / "q" / "views.mqo", TEXT)
    inputs = {"B": str(tmp_path / "B"), "H": str(tmp_path / "H")}
    out = tmp_path / "out"
    service = LocalService(
        SCHEMA.ddl(), inputs, str(tmp_path / "q"), str(out), str(tmp_path / "ck"),
        fmt="csv", allowed_lateness=LATENESS, log=io.StringIO(),
    )  # fmt: skip
    plan = steps(count=3)
    for number, step in enumerate(plan, start=1):
        for stream, rows in step.items():
            write(tmp_path / stream / f"{number:03d}.csv", csv_text(rows))
        service.step()
    rows = []
    for path in sorted(out.glob("aggregates-*.csv")):
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            assert reader.fieldnames is not None and not {"n", "top", "most"} & set(reader.fieldnames)
            rows += list(reader)
    want = [json.loads(r) for r in api_aggregates(plan)]
    assert rows and {r["query"] for r in rows} == {"per_busy"}
    assert sorted(float(r["window_end"]) for r in rows) == sorted(r["window_end"] for r in want)
    assert {r["query"] for r in csv.DictReader(io.StringIO((out / "results-000003.csv").read_text()))} <= {
        "crowded",
        "near",
        "peaks",
    }
