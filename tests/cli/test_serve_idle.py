"""``mqo serve``: a declared stream that sends nothing (no ``--input``, or nothing in
its folder yet) does not hold time back, as in ``mqo match``: aggregate windows come
out, late tuples are found; and every step writes its results file, empty or not."""

from __future__ import annotations

import csv
import io
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from runtime.local.serve import LocalService
from tests.cli.clirun import mqo, strict_lines
from tests.references.agg_reference import RefQuery, evaluate, exact

DDL = "REGISTER STREAM B (v FLOAT);\nREGISTER STREAM H (v FLOAT);\nREGISTER STREAM K (v FLOAT);\n"
PER5 = RefQuery("per5", "B", Fraction(5), Fraction(5), [], [], [("COUNT", None), ("SUM", "B.v")])


def csv_rows(rows: list[tuple[float, float]]) -> str:
    return "ts,v\n" + "".join(f"{ts!r},{v!r}\n" for ts, v in rows)


def served(out: Path) -> list[tuple[Fraction, Fraction, dict[str, Any]]]:
    rows = [r for p in sorted(out.glob("results-*.jsonl")) for r in strict_lines(p.read_text())]
    return [(exact(r["window_start"]), exact(r["window_end"]), r["values"]) for r in rows]


def expected(tuples: list[tuple[float, float]], watermark: float) -> list[tuple[Fraction, Fraction, dict[str, Any]]]:
    """The reference's windows the watermark has passed (a window (s, e] is out once
    the watermark is past e)."""
    found = evaluate([PER5], [(ts, {"v": v}) for ts, v in tuples], 0)
    return [
        (r.start, r.end, {"COUNT(*)": r.values["COUNT(*)"], "SUM(B.v)": float(r.values["SUM(B.v)"])})
        for r in found
        if r.end < exact(watermark)
    ]


def test_streams_without_data_do_not_hold_time_back(tmp_path: Path) -> None:
    """B has data, H an empty folder, K no --input: with --once the windows B's
    watermark has passed come out, and a tuple older than it is late."""
    for d in ("q", "B", "H"):
        (tmp_path / d).mkdir()
    (tmp_path / "s.ddl").write_text(DDL)
    (tmp_path / "q" / "per5.mqo").write_text(PER5.text() + "\n")
    args = ["serve", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q")]
    args += ["--input", f"B={tmp_path / 'B'}", "--input", f"H={tmp_path / 'H'}", "--output", str(tmp_path / "out")]
    args += ["--checkpoint", str(tmp_path / "ck"), "--once", "--poll", "0.1"]
    first = [(float(i), i * 0.5) for i in range(20)]
    (tmp_path / "B" / "1.csv").write_text(csv_rows(first))
    done = mqo(*args)
    assert done.returncode == 0, done.stderr
    start = done.stderr.splitlines()[0]
    assert start.endswith(
        f"not holding time back until they send tuples: H (nothing in {tmp_path / 'H'} yet), K (no --input)"
    )
    got = served(tmp_path / "out")
    assert got == expected(first, 19.0) and len(got) == 4
    # the next run: a tuple older than the watermark is late, the windows go on
    second = [(1.0, 7.5), *((float(i), i * 0.5) for i in range(20, 31))]
    (tmp_path / "B" / "2.csv").write_text(csv_rows(second))
    done = mqo(*args)
    assert done.returncode == 0 and "1 late" in done.stderr, done.stderr
    [late] = strict_lines((tmp_path / "out" / "late-000002.jsonl").read_text())
    assert (late["stream"], late["ts"], late["values"]) == ("B", 1.0, {"v": 7.5})
    assert served(tmp_path / "out") == expected(first + second, 30.0)


def test_a_stream_left_without_input_releases_held_results(tmp_path: Path) -> None:
    """--emit ordered: results held because H was behind come out once a restart gives
    H no --input (it is idle then); none is lost on the way."""
    for d in ("q", "B", "H"):
        (tmp_path / d).mkdir()
    (tmp_path / "q" / "all.mqo").write_text("Query ID: all\nSELECT * FROM B;\n")
    folders = (str(tmp_path / "q"), str(tmp_path / "out"), str(tmp_path / "ck"))
    both = {"B": str(tmp_path / "B"), "H": str(tmp_path / "H")}
    (tmp_path / "B" / "1.csv").write_text(csv_rows([(float(i), 1.0) for i in range(1, 6)]))
    (tmp_path / "H" / "1.csv").write_text(csv_rows([(0.0, 1.0)]))
    service = LocalService(DDL, both, *folders, emit="ordered", log=io.StringIO())
    assert service.step().results == 0 and service.matcher.held_results == 5  # H holds them back
    (tmp_path / "B" / "2.csv").write_text(csv_rows([(6.0, 1.0)]))
    restarted = LocalService(DDL, {"B": both["B"]}, *folders, emit="ordered", log=io.StringIO())
    report = restarted.step()
    stamps = [r["ts"] for r in strict_lines((tmp_path / "out" / "results-000002.jsonl").read_text())]
    assert stamps == sorted(stamps) and report.results == len(stamps) > 0
    assert len(stamps) + restarted.matcher.held_results == 6


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_every_step_writes_its_results_file(tmp_path: Path, fmt: str) -> None:
    """A step that finds no result still writes results-NNNNNN (empty; CSV with its
    header, Parquet with its schema), as do the aggregate files; an idle step writes
    nothing."""
    for d in ("q", "B"):
        (tmp_path / d).mkdir()
    (tmp_path / "q" / "a.mqo").write_text("Query ID: big\nSELECT * FROM B WHERE B.v > 100;\n" + PER5.text() + "\n")
    service = LocalService(
        DDL, {"B": str(tmp_path / "B")}, str(tmp_path / "q"), str(tmp_path / "out"), str(tmp_path / "ck"), fmt=fmt
    )
    (tmp_path / "B" / "1.csv").write_text(csv_rows([(1.0, 1.0), (2.0, 2.0)]))
    assert service.step().results == 0
    out = tmp_path / "out"
    results = out / f"results-000001.{fmt}"
    if fmt == "jsonl":
        assert results.read_text() == ""
    elif fmt == "csv":
        with results.open(newline="") as f:
            assert list(csv.reader(f)) == [["query", "ts", "ids", "B.v"]]
        with (out / "aggregates-000001.csv").open(newline="") as f:
            assert len(list(csv.reader(f))) == 1  # the header
    else:
        table = pq.read_table(results)
        assert table.num_rows == 0 and table.column_names == ["query", "ts", "ids", "B.v"]
        assert pq.read_table(out / "aggregates-000001.parquet").num_rows == 0
    files = sorted(p.name for p in out.iterdir())
    assert service.step().idle and sorted(p.name for p in out.iterdir()) == files
    (tmp_path / "B" / "2.csv").write_text(csv_rows([(3.0, 3.0)]))
    service.step()
    assert (out / f"results-000002.{fmt}").exists()
