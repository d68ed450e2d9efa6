"""Shared windowed aggregation: many aggregate queries over one stream, mqo vs DuckDB.

The issue's workload (one stream at 10 tuples/s; ranges 5 min - 6 h; slides 1 - 15 min;
10 distinct filters; grouped by nothing or a 10-value key; COUNT SUM AVG MIN MAX), each
side a whole process that writes its results to a file:

* mqo: ``mqo match`` over a CSV, aggregate rows as JSON lines;
* DuckDB, one statement per query (the windows' ends joined to the tuples they cover,
  grouped, ``COPY ... (FORMAT JSON)``).

Also: throughput of 1, 10, 100, 1000 concurrent windows (one filter, mqo), and the peak
memory of the mqo process. The default size is small (100,000 tuples, 100 queries);
``--full`` runs the issue's (1,000,000 tuples, 1,000 queries).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DESCRIPTION = "shared windowed aggregation vs DuckDB per-query statements; window scaling"
DDL = "REGISTER STREAM H (patient INTEGER, beatrate FLOAT, vib FLOAT, alert INTEGER);\n"
FILTERS = [f"H.alert = {k}" for k in range(5)] + [f"H.vib > {c}" for c in (10, 30, 50, 70, 90)]


def workload(n: int, queries: int, seed: int, one_filter: bool = False) -> tuple[dict, list[dict]]:
    rng = np.random.default_rng(seed)
    data = {
        "ts": np.round(np.arange(n) / 10.0, 1),
        "patient": rng.integers(0, 10, n),
        "beatrate": np.round(rng.normal(90, 15, n), 1),
        "vib": np.round(rng.uniform(0, 100, n), 2),
        "alert": rng.integers(0, 5, n),
    }
    qs = []
    for i in range(queries):
        qs.append(
            {
                "name": f"q{i}",
                "range": int(rng.integers(5, 361)) * 60,
                "slide": int(rng.integers(1, 16)) * 60,
                "filter": FILTERS[0] if one_filter else FILTERS[i % len(FILTERS)],
                "group": bool(rng.integers(0, 2)),
            }
        )
    return data, qs


def query_text(q: dict) -> str:
    group = " GROUP BY H.patient" if q["group"] else ""
    sel = "H.patient, " if q["group"] else ""
    return (
        f"Query ID: {q['name']}\nSELECT {sel}COUNT(*), SUM(H.vib), AVG(H.vib), MIN(H.vib), MAX(H.vib)"
        f" FROM H [RANGE {q['range']} sec SLIDE {q['slide']} sec] WHERE {q['filter']}{group};\n"
    )


def write_csv(path: Path, data: dict) -> None:
    cols = list(data)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        w.writerows(zip(*(data[c].tolist() for c in cols), strict=True))


def timed(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    return seconds, max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def run_mqo(tmp: Path, queries: list[dict], tag: str) -> tuple[float, int, int]:
    (tmp / "q.mqo").write_text("".join(query_text(q) for q in queries))
    out = tmp / f"mqo_{tag}.jsonl"
    cmd = [sys.executable, "-m", "runtime.cli", "match", "--schema", str(tmp / "s.ddl"), "--queries"]
    seconds, rss = timed([*cmd, str(tmp / "q.mqo"), "--input", f"H={tmp / 'h.csv'}", "--output", str(out)])
    with open(out) as f:
        rows = sum(1 for _ in f)
    return seconds, rss, rows


DUCK_SCRIPT = """
import duckdb, json, sys
tmp, queries = sys.argv[1], json.load(open(sys.argv[2]))
con = duckdb.connect()
con.execute(f"CREATE TABLE h AS SELECT * FROM read_csv_auto('{tmp}/h.csv')")
top = con.execute("SELECT max(ts) FROM h").fetchone()[0]
for q in queries:
    cond = q["filter"].replace("H.", "")
    g = "patient" if q["group"] else "NULL"
    s, d = q["slide"], q["range"]
    con.execute(f'''COPY (
        WITH ends AS (SELECT range * {s} AS e FROM range(0, CAST(({top} + {d}) / {s} AS BIGINT) + 2))
        SELECT '{q["name"]}' AS query, e - {d} AS window_start, e AS window_end, {g} AS patient,
               count(*) AS n, sum(vib) AS s, avg(vib) AS a, min(vib) AS lo, max(vib) AS hi
        FROM ends JOIN h ON h.ts > e - {d} AND h.ts <= e WHERE {cond}
        GROUP BY e, {g}) TO '{tmp}/duck_{q["name"]}.json' (FORMAT JSON)''')
"""


def run_duckdb(tmp: Path, queries: list[dict]) -> tuple[float, int]:
    (tmp / "queries.json").write_text(json.dumps(queries))
    (tmp / "duck.py").write_text(DUCK_SCRIPT)
    seconds, _ = timed([sys.executable, str(tmp / "duck.py"), str(tmp), str(tmp / "queries.json")])
    rows = 0
    for q in queries:
        with open(tmp / f"duck_{q['name']}.json") as f:
            rows += sum(1 for _ in f)
    return seconds, rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mqo experiment aggregation", description=DESCRIPTION)
    p.add_argument("--out", default="experiments/results/aggregation")
    p.add_argument("--full", action="store_true", help="the issue's size: 1,000,000 tuples, 1,000 queries")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    n, nq = (1_000_000, 1000) if args.full else (100_000, 100)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"# Shared windowed aggregation ({n:,} tuples, {nq:,} queries, seed {args.seed})", ""]
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        (tmp / "s.ddl").write_text(DDL)
        data, queries = workload(n, nq, args.seed)
        write_csv(tmp / "h.csv", data)
        env_note = f"{os.cpu_count()} cores"
        mqo_s, mqo_rss, mqo_rows = run_mqo(tmp, queries, "all")
        duck_s, duck_rows = run_duckdb(tmp, queries)
        lines += [
            "| side | seconds (whole process) | result rows |",
            "| --- | --- | --- |",
            f"| mqo match | {mqo_s:.2f} | {mqo_rows:,} |",
            f"| DuckDB, one statement per query | {duck_s:.2f} | {duck_rows:,} |",
            "",
            f"ratio DuckDB / mqo: {duck_s / mqo_s:.2f}x (target >= 10x); mqo peak RSS {mqo_rss / 1024:.0f} MiB;"
            f" {env_note}. The set-based DuckDB formulation was not measured.",
            "",
            "| concurrent windows (one filter) | mqo seconds | tuples/s |",
            "| --- | --- | --- |",
        ]
        scaling = []
        for k in (1, 10, 100, 1000 if args.full else 300):
            _, qs = workload(n, k, args.seed, one_filter=True)
            seconds, _, _ = run_mqo(tmp, qs, f"scale{k}")
            scaling.append((k, seconds))
            lines.append(f"| {k} | {seconds:.2f} | {n / seconds:,.0f} |")
        lines += ["", f"slowdown {scaling[0][0]} -> {scaling[-1][0]} windows: {scaling[-1][1] / scaling[0][1]:.2f}x"]
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
