"""``--emit ordered`` from the command line, and ``ALLOWED LATENESS`` in the DDL.

``mqo match``: one file lags minutes behind the other and each is out of order
within (and some tuples beyond) its stream's lateness, declared in the DDL. Ordered
output is sorted by ts and equals arrival mode's output as a multiset (arrival mode
is checked against the reference in tests/differential/test_exact_differential.py); the late
files are the same. ``mqo serve``: results held at the end of a step are in the
checkpoint and come out, in order, in a later step.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

import mqo
from predicates import QueryError
from runtime.cli import main
from runtime.local.serve import LocalService
from runtime.workload import CliError

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")

DDL = """CREATE STREAM A (x INTEGER) ALLOWED LATENESS 4 sec;
CREATE STREAM B (y INTEGER) ALLOWED LATENESS 500 ms;
"""
QUERIES = """Query ID: pair
SELECT * FROM A, B MAXWINDOW 3 sec WHERE A.x = B.y;
Query ID: odd
SELECT A.x FROM A WHERE A.x > 6;
"""


def jittered(start: float, n: int, seed: int, spread: float) -> str:
    """``n`` readings about a second apart from ``start``, each up to ``spread``
    seconds out of order."""
    rnd = random.Random(seed)
    rows = [(round(start + i + rnd.uniform(-spread, 0), 3), rnd.randint(0, 9)) for i in range(n)]
    return "ts,v\n" + "".join(f"{ts!r},{v}\n" for ts, v in rows)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_match_emit_ordered_with_a_lagging_file(tmp_path: Path) -> None:
    (tmp_path / "s.ddl").write_text(DDL)
    (tmp_path / "q.mqo").write_text(QUERIES)
    (tmp_path / "a.csv").write_text(jittered(1000, 400, 1, 6).replace("ts,v", "ts,x"))
    # B: three minutes behind A (a slow upload), out of order by up to two seconds
    (tmp_path / "b.csv").write_text(jittered(820, 400, 2, 2).replace("ts,v", "ts,y"))
    found = {}
    for emit in ("arrival", "ordered"):
        out, late = tmp_path / f"{emit}.jsonl", tmp_path / f"{emit}.late.jsonl"
        args = ["match", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q.mqo")]
        args += ["--input", f"A={tmp_path / 'a.csv'}", "--input", f"B={tmp_path / 'b.csv'}"]
        args += ["--emit", emit, "--output", str(out), "--late", str(late), "--quiet"]
        assert main(args) == 0
        found[emit] = [json.loads(line) for line in lines(out)]
        found[emit + " late"] = lines(late)
    arrival, ordered = found["arrival"], found["ordered"]
    assert len(arrival) > 100 and {r["query"] for r in arrival} == {"pair", "odd"}
    assert Counter(map(json.dumps, arrival)) == Counter(map(json.dumps, ordered))
    stamps = [r["ts"] for r in ordered]
    assert stamps == sorted(stamps)
    assert [r["ts"] for r in arrival] != sorted(r["ts"] for r in arrival)  # arrival mode is not sorted here
    # tuples older than the watermark (the streams' own lateness: A 4 s, B 0.5 s) are late, alike
    assert found["arrival late"] == found["ordered late"] and found["arrival late"]


def test_serve_emit_ordered_holds_results_across_steps(tmp_path: Path) -> None:
    a = jittered(100, 60, 3, 3).replace("ts,v", "ts,x").splitlines(keepends=True)
    b = jittered(100, 60, 4, 0.4).replace("ts,v", "ts,y").splitlines(keepends=True)
    found: dict[str, list[str]] = {}
    for emit in ("arrival", "ordered"):
        root = tmp_path / emit
        for d in ("q", "in/A", "in/B", "out", "ck"):
            (root / d).mkdir(parents=True)
        (root / "q" / "all.mqo").write_text(QUERIES)
        inputs = {"A": str(root / "in/A"), "B": str(root / "in/B")}
        folders = (str(root / "q"), str(root / "out"), str(root / "ck"))
        for step, (lo, hi) in enumerate([(1, 31), (31, 61)], start=1):
            (root / "in/A" / f"{step}.csv").write_text(a[0] + "".join(a[lo:hi]))
            (root / "in/B" / f"{step}.csv").write_text(b[0] + "".join(b[lo:hi]))
            report = LocalService(DDL, inputs, *folders, emit=emit).step()  # restarted from the checkpoint
            assert report.results > 0
        found[emit] = [line for step in (1, 2) for line in lines(root / "out" / f"results-{step:06d}.jsonl")]
        if emit == "ordered":
            stamps = [json.loads(line)["ts"] for line in found[emit]]
            assert stamps == sorted(stamps)
            service = LocalService(DDL, inputs, *folders, emit=emit)
            held = service.matcher.held_results
            rest = list(service.matcher.flush_results().json_lines())
            assert held == len(rest) > 0 and json.loads(rest[0])["ts"] >= stamps[-1]
            found[emit] += [line.rstrip("\n") for line in rest]
            with pytest.raises(CliError, match="written with --emit ordered"):
                LocalService(DDL, inputs, *folders, emit="arrival")
    assert Counter(found["arrival"]) == Counter(found["ordered"])


# ------------------------------------------------------------------ the DDL clause


def test_allowed_lateness_clause_and_how_it_combines() -> None:
    m = mqo.Matcher(DDL + "CREATE STREAM C (z FLOAT);", allowed_lateness=1, stream_lateness={"B": 2})
    m.register_query("SELECT * FROM C WHERE C.z > 0")
    m.ensure_plan()  # the clock is made with the plan
    lateness = {name: m.clock.lateness[k] for name, k in zip(m.clock.names, m.clock.lateness_of, strict=True)}
    # the API's stream_lateness over the DDL clause over allowed_lateness
    assert lateness == {"A": 4.0, "B": 2.0, "C": 1.0}
    # the catalog prints the clause back (snapshots carry the DDL)
    assert "REGISTER STREAM A (x INTEGER) ALLOWED LATENESS 4.0 sec;" in m.catalog.ddl()
    restored = mqo.Matcher.restore(m.snapshot())
    assert restored.clock.lateness_of == m.clock.lateness_of and restored.clock.lateness == m.clock.lateness


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("CREATE STREAM A (x INT) ALLOWED 5 sec;", "expected LATENESS after ALLOWED"),
        ("CREATE STREAM A (x INT) ALLOWED LATENESS;", "expected a duration"),
        ("CREATE STREAM A (x INT) ALLOWED LATENESS 5 weeks;", "unknown duration unit 'weeks'"),
        ("CREATE STREAM A (x INT) LATENESS 5;", "expected ';' after the declaration of stream A"),
        ("CREATE STREAM A (x INT) ALLOWED LATENESS 0.1234567890123456789 sec;", "a double holds exactly"),
        ("CREATE STREAM A (x INT) ALLOWED LATENESS CREATE STREAM B (y INT);", "expected a duration"),
    ],
)
def test_allowed_lateness_clause_errors(ddl: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        mqo.Matcher(ddl)


def test_declarations_without_semicolons() -> None:
    m = mqo.Matcher("CREATE STREAM A (x INT) ALLOWED LATENESS 5 CREATE STREAM B (y INT) ALLOWED LATENESS 2 min")
    assert [(s.name, s.lateness) for s in m.catalog] == [("A", 5.0), ("B", 120.0)]


def test_declared_lateness_needs_per_stream_time() -> None:
    m = mqo.Matcher(DDL, time="global")
    m.register_query("SELECT * FROM A WHERE A.x > 0")
    with pytest.raises(ValueError, match="A, B declare ALLOWED LATENESS in the DDL, which needs time='per-stream'"):
        m.push("A", 1.0, {"x": 1})


def test_declared_lateness_decides_what_is_late() -> None:
    m = mqo.Matcher(DDL, idle_timeout=None)
    m.register_query("SELECT * FROM A WHERE A.x > 0")
    m.heartbeat("B", 1e6)
    m.push("A", 100.0, {"x": 1})
    assert m.push("A", 96.0, {"x": 1}) and m.late_count == 0  # 4 s behind: allowed
    assert not m.push("A", 95.999, {"x": 1}) and m.late_count == 1
