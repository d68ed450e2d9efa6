"""Aggregate queries of two levels in one output: one over a stream and one over an
aggregate view (a level deeper, counted by an aggregator of its own). Each query's
rows are written under its own name with its own group and values, by ``mqo match``
(end of input) and by a step of ``mqo serve`` (windows the watermark has passed).
The expected rows are worked out by hand from the six tuples below."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime.cli import main

DDL = "REGISTER STREAM H (beatrate INTEGER, vib FLOAT);"
# ``hot`` comes first among the stream's aggregate queries and ``tops`` first among those
# over the view: each is the first query of its level's aggregator
QUERIES = """Query ID: hot
SELECT COUNT(*), MAX(H.vib) FROM H [RANGE 10 sec SLIDE 10 sec];

CREATE VIEW counts AS
SELECT H.beatrate AS rate, COUNT(*) AS n FROM H [RANGE 10 sec SLIDE 10 sec] GROUP BY H.beatrate;

Query ID: tops
SELECT counts.rate, SUM(counts.n) FROM counts [RANGE 10 sec SLIDE 10 sec] GROUP BY counts.rate;
"""
H_ROWS = "ts,beatrate,vib\n1,100,1.0\n2,100,2.0\n3,110,3.0\n12,100,4.0\n14,110,5.0\n16,110,6.0\n"

# hot: windows (0,10] (ts 1, 2, 3) and (10,20] (ts 12, 14, 16). counts: per window and
# rate, a row at the window's end (ts 10: 100 -> 2, 110 -> 1; ts 20: 100 -> 1,
# 110 -> 2), which tops sums per rate over the windows of its own grid.
HOT = [(10.0, {}, {"COUNT(*)": 3, "MAX(H.vib)": 3.0}), (20.0, {}, {"COUNT(*)": 3, "MAX(H.vib)": 6.0})]
TOPS = [
    (10.0, {"rate": 100}, {"counts.rate": 100, "SUM(counts.n)": 2}),
    (10.0, {"rate": 110}, {"counts.rate": 110, "SUM(counts.n)": 1}),
    (20.0, {"rate": 100}, {"counts.rate": 100, "SUM(counts.n)": 1}),
    (20.0, {"rate": 110}, {"counts.rate": 110, "SUM(counts.n)": 2}),
]


def _rows(lines: list[str]) -> list[tuple[str, float, dict[str, Any], dict[str, Any]]]:
    records = [json.loads(line) for line in lines]
    return [(r["query"], r["window_end"], r["group"], r["values"]) for r in records if "window_end" in r]


def test_match_writes_each_level_s_rows_under_their_own_query(tmp_path: Path) -> None:
    (tmp_path / "s.ddl").write_text(DDL)
    (tmp_path / "q.mqo").write_text(QUERIES)
    (tmp_path / "h.csv").write_text(H_ROWS)
    out = tmp_path / "out.jsonl"
    args = ["match", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q.mqo"), "-q"]
    assert main([*args, "--input", f"H={tmp_path / 'h.csv'}", "--output", str(out)]) == 0
    # file order: by window end, then the stream's queries before those over the view
    want = [("hot", *HOT[0]), *(("tops", *r) for r in TOPS[:2]), ("hot", *HOT[1]), *(("tops", *r) for r in TOPS[2:])]
    assert _rows(out.read_text().splitlines()) == want


def test_serve_writes_each_level_s_rows_under_their_own_query(tmp_path: Path) -> None:
    for folder in ("q", "H"):
        (tmp_path / folder).mkdir()
    (tmp_path / "s.ddl").write_text(DDL)
    (tmp_path / "q" / "q.mqo").write_text(QUERIES)
    (tmp_path / "H" / "001.csv").write_text(H_ROWS)
    out = tmp_path / "out"
    args = ["serve", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q"), "--once", "--poll", "0.1"]
    paths = ["--input", f"H={tmp_path / 'H'}", "--output", str(out), "--checkpoint", str(tmp_path / "ck")]
    assert main([*args, *paths]) == 0
    # the watermark (16) has passed the windows ending at 10 only
    lines = [line for path in sorted(out.glob("results-*.jsonl")) for line in path.read_text().splitlines()]
    assert _rows(lines) == [("hot", *HOT[0]), *(("tops", *r) for r in TOPS[:2])]
