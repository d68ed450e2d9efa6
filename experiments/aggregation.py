"""Shared windowed aggregation: many aggregate queries over one stream, mqo vs DuckDB.

The issue's workload (one stream at 10 tuples/s; ranges 5 min - 6 h; slides 1 - 15 min;
10 distinct filters; grouped by nothing or a 10-value key; COUNT SUM AVG MIN MAX), each
side a whole process (start-up, reading the CSV, the work, writing every result row to
a file), run one after the other in one run so that their ratios, not their seconds,
are the result (the machine is shared):

* mqo: ``mqo match`` over the CSV, aggregate rows as JSON lines;
* DuckDB, one statement per query, as a SQL user writes one sliding window: the
  tuples grouped into panes (the GCD of RANGE and SLIDE), a RANGE window over the
  panes, ``COPY ... (FORMAT JSON)``;
* DuckDB, set-based: one statement per distinct filter and grouping over shared
  1-minute panes (every RANGE and SLIDE is whole minutes), the queries' windows
  combined by UNION ALL, ``COPY ... (FORMAT JSON)``.

The three must write the same number of rows (checked). Also: throughput against the
number of queries (plotted), throughput of 1, 10, 100, 1000 concurrent windows over one
filter (mqo), and mqo's memory over 10,000,000 tuples fed in batches through the Python
API (RSS against tuples processed). The default size is small (100,000 tuples, 100
queries); ``--full`` runs the issue's (1,000,000 tuples, 1,000 queries).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DESCRIPTION = "shared windowed aggregation vs DuckDB (per-query and set-based SQL); window scaling; memory"
DDL = "REGISTER STREAM H (patient INTEGER, beatrate FLOAT, vib FLOAT, alert INTEGER);\n"
FILTERS = [f"H.alert = {k}" for k in range(5)] + [f"H.vib > {c}" for c in (10, 30, 50, 70, 90)]
MEMORY_BATCH = 100_000


def tuples(n: int, rng: np.random.Generator, first: int = 0) -> dict[str, np.ndarray]:
    """``n`` tuples of H from tuple number ``first`` on (10 a second)."""
    return {
        "ts": np.round(np.arange(first, first + n) / 10.0, 1),
        "patient": rng.integers(0, 10, n),
        "beatrate": np.round(rng.normal(90, 15, n), 1),
        "vib": np.round(rng.uniform(0, 100, n), 2),
        "alert": rng.integers(0, 5, n),
    }


MIXES = {
    "a": "ranges 5 min - 6 h, slides 1 - 15 min (whole minutes), 10 shared filters, half grouped",
    "b": "ranges 5 min - 6 h, slides 10 s - 15 min (tens of seconds), a filter of its own per query, half grouped",
}


def workload(n: int, queries: int, seed: int, one_filter: bool = False, mix: str = "a") -> tuple[dict, list[dict]]:
    """``n`` tuples and ``queries`` queries of one of the :data:`MIXES`."""
    rng = np.random.default_rng(seed)
    data = tuples(n, rng)
    qs = []
    for i in range(queries):
        if mix == "a":
            window = {"range": int(rng.integers(5, 361)) * 60, "slide": int(rng.integers(1, 16)) * 60}
            where = FILTERS[0] if one_filter else FILTERS[i % len(FILTERS)]
        else:
            window = {"range": int(rng.integers(5, 361)) * 60, "slide": int(rng.integers(1, 91)) * 10}
            where = FILTERS[0] if one_filter else f"H.vib > {round(float(rng.uniform(0, 90)), 2)}"
        qs.append({"name": f"q{i}", **window, "filter": where, "group": bool(rng.integers(0, 2))})
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
    table = np.column_stack([np.asarray(data[c], np.float64) for c in cols])
    fmts = ["%.1f" if c == "ts" else "%.2f" if c == "vib" else "%.1f" if c == "beatrate" else "%d" for c in cols]
    np.savetxt(path, table, fmt=fmts, delimiter=",", header=",".join(cols), comments="")


# ----------------------------------------------------------------- the SQL


def _panes(source: str, cond: str, width: int, group: bool) -> str:
    """The tuples of ``source`` satisfying ``cond`` grouped into panes ``(j-1)*width, j*width]``."""
    grp = "patient" if group else "NULL::BIGINT"
    return (
        f"SELECT CAST(ceil(ts / {width}) AS BIGINT) AS j, {grp} AS grp, count(*) AS n, sum(vib) AS s,"
        f" min(vib) AS lo, max(vib) AS hi FROM {source} WHERE {cond} GROUP BY ALL"
    )


def _windows(q: dict, panes: str, width: int) -> str:
    """The query's windows over a pane relation of ``width``-second panes: rows for the
    windows' ends (every multiple of SLIDE reaching the data) added to the panes, a
    RANGE window over them read at those rows, empty windows left out."""
    per, step = q["range"] // width, q["slide"] // width
    return f"""SELECT '{q["name"]}' AS query, j * {width} - {q["range"]} AS window_start, j * {width} AS window_end,
      grp AS patient, n AS "COUNT(*)", s AS "SUM(H.vib)", s / n AS "AVG(H.vib)", lo AS "MIN(H.vib)", hi AS "MAX(H.vib)"
    FROM (
      SELECT j, grp, is_end, sum(n) OVER v AS n, sum(s) OVER v AS s, min(lo) OVER v AS lo, max(hi) OVER v AS hi
      FROM (
        SELECT j, grp, n, s, lo, hi, false AS is_end FROM {panes}
        UNION ALL
        SELECT e.j, k.grp, 0, NULL, NULL, NULL, true
        FROM (SELECT DISTINCT grp FROM {panes}) k,
             (SELECT unnest(generate_series(CAST(floor(min(j) / {step}) AS BIGINT),
                                            CAST(floor((max(j) + {per} - 1) / {step}) AS BIGINT))) * {step} AS j
              FROM {panes}) e
      )
      WINDOW v AS (PARTITION BY grp ORDER BY j RANGE BETWEEN {per - 1} PRECEDING AND CURRENT ROW)
    ) WHERE is_end AND n > 0"""


def per_query_statements(queries: list[dict], out: Path) -> list[str]:
    """One statement per query: its own panes (GCD of RANGE and SLIDE) and windows."""
    statements = []
    for q in queries:
        width = math.gcd(q["range"], q["slide"])
        cond = q["filter"].replace("H.", "")
        panes = f"(SELECT * FROM p_{q['name']})"
        body = f"WITH p_{q['name']} AS ({_panes('h', cond, width, q['group'])}) {_windows(q, panes, width)}"
        statements.append(f"COPY ({body}) TO '{out / q['name']}.json' (FORMAT JSON)")
    return statements


def set_based_statements(queries: list[dict], out: Path) -> list[str]:
    """One statement per distinct filter and grouping: shared panes (materialized once;
    the GCD of the family's RANGEs and SLIDEs, a minute when all are whole minutes), the
    windows of all its queries by UNION ALL."""
    families: dict[tuple[str, bool], list[dict]] = {}
    for q in queries:
        families.setdefault((q["filter"], q["group"]), []).append(q)
    statements = []
    for k, ((filt, group), qs) in enumerate(families.items()):
        width = math.gcd(*(q[key] for q in qs for key in ("range", "slide")))
        panes = _panes("h", filt.replace("H.", ""), width, group)
        union = "\nUNION ALL\n".join(_windows(q, "p", width) for q in qs)
        statements.append(
            f"COPY (WITH p AS MATERIALIZED ({panes}) {union}) TO '{out / f'family{k}'}.json' (FORMAT JSON)"
        )
    return statements


DUCK_SCRIPT = """
import duckdb, json, sys
csv, statements = sys.argv[1], json.load(open(sys.argv[2]))
con = duckdb.connect()
con.execute(f"CREATE TABLE h AS SELECT * FROM read_csv('{csv}', header = true)")
for statement in statements:
    con.execute(statement)
"""


# -------------------------------------------------------------- the sides


def timed(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of a child process (the peak of all children
    so far: compare it only against earlier children's)."""
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    return seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def lines_in(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        with open(path, "rb") as f:
            total += sum(chunk.count(b"\n") for chunk in iter(lambda f=f: f.read(1 << 20), b""))
    return total


def run_mqo(tmp: Path, queries: list[dict], tag: str) -> tuple[float, int]:
    (tmp / f"{tag}.mqo").write_text("".join(query_text(q) for q in queries))
    out = tmp / f"mqo_{tag}.jsonl"
    cmd = [sys.executable, "-m", "runtime.cli", "match", "--schema", str(tmp / "s.ddl"), "--queries"]
    seconds, _ = timed([*cmd, str(tmp / f"{tag}.mqo"), "--input", f"H={tmp / 'h.csv'}", "--output", str(out)])
    rows = lines_in([out])
    out.unlink()
    return seconds, rows


def run_duckdb(tmp: Path, queries: list[dict], kind: str) -> tuple[float, int]:
    out = tmp / f"duck_{kind}"
    out.mkdir()
    build = per_query_statements if kind == "per-query" else set_based_statements
    (tmp / "statements.json").write_text(json.dumps(build(queries, out)))
    (tmp / "duck.py").write_text(DUCK_SCRIPT)
    seconds, _ = timed([sys.executable, str(tmp / "duck.py"), str(tmp / "h.csv"), str(tmp / "statements.json")])
    files = sorted(out.iterdir())
    rows = lines_in(files)
    for f in files:
        f.unlink()
    out.rmdir()
    return seconds, rows


def side_by_side(tmp: Path, queries: list[dict], tag: str, repeat: int) -> dict[str, tuple[float, int]]:
    """The three sides over the same CSV, one after the other, ``repeat`` rounds (each
    side's fastest round counts: the machine is shared); equal row counts."""
    rounds = []
    for _ in range(repeat):
        rounds.append(
            {
                "mqo": run_mqo(tmp, queries, tag),
                "per-query": run_duckdb(tmp, queries, "per-query"),
                "set-based": run_duckdb(tmp, queries, "set-based"),
            }
        )
    got = {side: min(r[side] for r in rounds) for side in rounds[0]}
    counts = {side: rows for side, (_, rows) in got.items()}
    if len(set(counts.values())) != 1:
        raise SystemExit(f"aggregation benchmark ({len(queries)} queries): the sides disagree on rows: {counts}")
    return got


# ------------------------------------------------------------------ memory


def memory_run(total: int, queries: int, seed: int, out: Path) -> None:
    """In this process: ``total`` tuples through ``Matcher.push_batch`` in batches,
    aggregate rows taken and written as JSON lines after each; the RSS after each
    batch to ``out`` (CSV: tuples, rss_mib, rows)."""
    import mqo

    _, qs = workload(0, queries, seed)
    m = mqo.Matcher(DDL)
    m.register_queries("".join(query_text(q) for q in qs))
    rng = np.random.default_rng(seed)
    page = os.sysconf("SC_PAGE_SIZE")
    rows = 0
    with open(out, "w") as log, open(out.with_suffix(".jsonl"), "w") as sink:
        log.write("tuples,rss_mib,rows\n")
        for first in range(0, total, MEMORY_BATCH):
            batch = tuples(min(MEMORY_BATCH, total - first), rng, first)
            m.push_batch("H", {k: v.tolist() if k != "ts" else v for k, v in batch.items()})
            got = m.poll_aggregates()
            rows += len(got)
            sink.write(got.json_text())
            with open("/proc/self/statm") as f:
                rss = int(f.read().split()[1]) * page / 2**20
            log.write(f"{first + len(batch['ts'])},{rss:.1f},{rows}\n")
        sink.write(m.flush().json_text())


def scaling_run(n: int, windows: int, seed: int, out: Path) -> None:
    """In this process: ``windows`` queries over one filter, all of ``n`` tuples in one
    ``push_batch`` and ``flush``: CPU seconds of the aggregation (filters, slices, window
    folds, aggregates finished) and of building the JSON lines, to ``out`` as JSON."""
    import mqo

    data, qs = workload(n, windows, seed, one_filter=True)
    m = mqo.Matcher(DDL)
    m.register_queries("".join(query_text(q) for q in qs))
    start = time.process_time()
    m.push_batch("H", data)
    rows = m.flush()
    aggregate = time.process_time() - start
    start = time.process_time()
    text = rows.json_text()
    json_s = time.process_time() - start
    out.write_text(json.dumps({"aggregate": aggregate, "json": json_s, "rows": text.count("\n")}))


# -------------------------------------------------------------------- main


def plot(path: Path, n: int, sweep: list[tuple[int, dict]], scaling: list[tuple], memory: list) -> None:
    from experiments._common import log_axes, short_ticks, subplots

    fig, axes = subplots(1, 3, figsize=(15, 4.5))
    ax = axes[0]
    for side, label in (("mqo", "mqo match"), ("per-query", "DuckDB per query"), ("set-based", "DuckDB set-based")):
        ax.plot([q for q, _ in sweep], [n / got[side][0] for _, got in sweep], marker="o", label=label)
    log_axes(ax)
    ax.set(title="throughput vs queries (whole process)", xlabel="aggregate queries", ylabel="tuples / s")
    ax.legend()
    ax = axes[1]
    ax.plot([k for k, *_ in scaling], [n / row[1] for row in scaling], marker="o", label="mqo match, whole process")
    ax.plot([k for k, *_ in scaling], [n / row[3] for row in scaling], marker="o", label="aggregation CPU (no JSON)")
    log_axes(ax)
    ax.legend()
    ax.set(title="one filter: concurrent windows", xlabel="windows (queries)", ylabel="tuples / s")
    ax = axes[2]
    ax.plot([t for t, _ in memory], [r for _, r in memory], label="mqo RSS")
    short_ticks(ax.xaxis)
    ax.set_ylim(0, max(r for _, r in memory) * 1.2)
    ax.set(title="memory (Python API, batches)", xlabel="tuples processed", ylabel="RSS MiB")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def commit() -> str:
    try:
        got = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        return got.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mqo experiment aggregation", description=DESCRIPTION)
    p.add_argument("--out", default="experiments/results/aggregation")
    p.add_argument("--full", action="store_true", help="the issue's size: 1,000,000 tuples, 1,000 queries")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--memory-tuples", type=int, default=10_000_000, help="tuples of the memory run")
    p.add_argument("--repeat", type=int, default=1, help="rounds of every timed process (the fastest counts)")
    p.add_argument(
        "--mix",
        choices=["a", "b", "both"],
        default="both",
        help="the query mix of the comparison with DuckDB: "
        + "; ".join(f"{k}: {v}" for k, v in MIXES.items())
        + " (both: the sweep over a, and b at the full number of queries)",
    )
    p.add_argument("--memory-run", type=Path, help=argparse.SUPPRESS)  # the memory run's child process
    p.add_argument("--scaling-run", type=int, help=argparse.SUPPRESS)  # an in-process scaling run's child
    p.add_argument("--scaling-out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    n, nq = (1_000_000, 1000) if args.full else (100_000, 100)
    memory_queries = 100
    if args.memory_run is not None:
        memory_run(args.memory_tuples, memory_queries, args.seed, args.memory_run)
        return 0
    if args.scaling_run is not None:
        scaling_run(n, args.scaling_run, args.seed, args.scaling_out)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        (tmp / "s.ddl").write_text(DDL)
        first = "b" if args.mix == "b" else "a"
        data, queries = workload(n, nq, args.seed, mix=first)
        write_csv(tmp / "h.csv", data)
        run_mqo(tmp, queries[:1], "warm")  # numba's cached kernels loaded once, as a deployed mqo has them
        sweep = []
        for k in sorted({10, nq // 10, nq}):
            sweep.append((k, side_by_side(tmp, queries[:k], f"q{k}", args.repeat)))
        mixes = {first: dict(sweep)[nq]}
        if args.mix == "both":  # the same tuples (the data is drawn first), the other queries
            mixes["b"] = side_by_side(tmp, workload(0, nq, args.seed, mix="b")[1], f"b{nq}", args.repeat)
        scaling = []
        for k in (1, 10, 100, 1000):
            _, qs = workload(n, k, args.seed, one_filter=True)
            whole = min(run_mqo(tmp, qs, f"scale{k}") for _ in range(args.repeat))
            child = [sys.executable, "-m", "experiments.aggregation", "--seed", str(args.seed), "--scaling-run", str(k)]
            parts = []
            for _ in range(args.repeat):
                timed([*child, *(["--full"] if args.full else []), "--scaling-out", str(tmp / "scaling.json")])
                parts.append(json.loads((tmp / "scaling.json").read_text()))
            best = min(parts, key=lambda got: got["aggregate"])
            scaling.append((k, whole[0], whole[1], best["aggregate"], min(got["json"] for got in parts)))
        log = tmp / "memory.csv"
        cmd = [sys.executable, "-m", "experiments.aggregation", "--memory-run", str(log), "--seed", str(args.seed)]
        timed([*cmd, "--memory-tuples", str(args.memory_tuples)])
        samples = [line.split(",") for line in log.read_text().splitlines()[1:]]
        memory = [(int(a), float(b)) for a, b, _ in samples]
    (out / "memory.csv").write_text("tuples,rss_mib\n" + "".join(f"{a},{b}\n" for a, b in memory))
    plot(out / "aggregation.png", n, sweep, scaling, memory)
    text = report(args, n, nq, sweep, mixes, scaling, memory, time.perf_counter() - started)
    (out / "results.md").write_text(text)
    print((out / "results.md").read_text())
    return 0


def report(args, n, nq, sweep, mixes, scaling, memory, seconds) -> str:  # type: ignore[no-untyped-def]
    # the targets are held on the worst mix
    worst_per = min(got["per-query"][0] / got["mqo"][0] for got in mixes.values())
    worst_set = min(got["set-based"][0] / got["mqo"][0] for got in mixes.values())
    lines = [
        f"# Shared windowed aggregation ({n:,} tuples, {nq:,} queries, seed {args.seed})",
        "",
        f"Commit `{commit()}`, {os.cpu_count()} CPU(s) shared with other work; ran in {seconds:.0f} s.",
        "Each side a whole process writing every result row to a file; sides run one after the other",
        f"in this run, {args.repeat} round(s), each side's fastest counting: compare the ratios, not the",
        "seconds. DuckDB runs its default threads; mqo one.",
        "",
        f"Mix {'b' if args.mix == 'b' else 'a'}, by the number of queries:",
        "",
        "| queries | mqo match s | DuckDB per query s | DuckDB set-based s | rows (equal on all sides) |"
        " per query / mqo | set-based / mqo |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for k, got in sweep:
        m, pq, sb = got["mqo"][0], got["per-query"][0], got["set-based"][0]
        lines.append(f"| {k:,} | {m:.2f} | {pq:.2f} | {sb:.2f} | {got['mqo'][1]:,} | {pq / m:.2f}x | {sb / m:.2f}x |")
    lines += [
        "",
        f"The query mixes at {nq:,} queries (the same tuples):",
        "",
        "| mix | mqo match s | DuckDB per query s | DuckDB set-based s | rows (equal on all sides) |"
        " per query / mqo | set-based / mqo |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for mix, got in mixes.items():
        m, pq, sb = got["mqo"][0], got["per-query"][0], got["set-based"][0]
        lines.append(
            f"| {mix}: {MIXES[mix]} | {m:.2f} | {pq:.2f} | {sb:.2f} | {got['mqo'][1]:,} | {pq / m:.2f}x | {sb / m:.2f}x |"
        )
    lines += [
        "",
        f"At {nq:,} queries, the worst mix: DuckDB per query / mqo = {worst_per:.2f}x (target >= 10x:"
        f" {'met' if worst_per >= 10 else 'NOT met'}); DuckDB set-based / mqo = {worst_set:.2f}x"
        f" (target >= 3x: {'met' if worst_set >= 3 else 'NOT met'}).",
        "",
        "| concurrent windows (one filter) | result rows | mqo match s (whole process) | tuples/s |"
        " aggregation CPU s (in process) | tuples/s | JSON lines CPU s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for k, whole, rows, agg, js in scaling:
        lines.append(f"| {k:,} | {rows:,} | {whole:.2f} | {n / whole:,.0f} | {agg:.2f} | {n / agg:,.0f} | {js:.2f} |")
    slow = scaling[-1][1] / scaling[0][1]
    slow_agg = scaling[-1][3] / scaling[0][3]
    lines += [
        "",
        f"slowdown 1 -> 1,000 windows, whole process: {slow:.2f}x (target within 2x:"
        f" {'met' if slow <= 2 else 'NOT met'}); of the aggregation itself (filters, slices, window folds,"
        f" aggregates finished; CPU in one process, without building and writing the JSON lines):"
        f" {slow_agg:.2f}x ({'within' if slow_agg <= 2 else 'NOT within'} 2x).",
        "",
    ]
    rss = [r for _, r in memory]
    tenth = max(1, len(rss) // 10)
    early, late = max(rss[:tenth]), max(rss[-tenth:])
    lines += [
        f"Memory: {memory[-1][0]:,} tuples of the same stream through `Matcher.push_batch` in batches of"
        f" {MEMORY_BATCH:,}, 100 of the queries, rows taken and written after each batch: RSS {rss[0]:.0f} MiB"
        f" after the first batch, at most {early:.0f} MiB over the first tenth, at most {late:.0f} MiB over the"
        f" last tenth, peak {max(rss):.0f} MiB (target flat: {'met' if late <= early * 1.1 else 'NOT met'};"
        " memory.csv has every sample).",
        "",
        "Plot: aggregation.png (throughput vs queries for the three sides; mqo vs concurrent windows; RSS vs tuples).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
