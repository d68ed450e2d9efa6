"""Performance benchmarks of the matcher, each against the target it is held to.

    python -m experiments.bench [--only a,b,b',c,c',d,e,f,g,h] [--quick] [--out DIR] [--sql-sizes N,...]

a. shared vs unshared: 1,000 two-stream queries of the thesis' shape on one matcher,
   against the same engine with one query per matcher, over 2 x 10,000 tuples. The
   unshared side is timed on a sample of the queries and scaled (each of its matchers
   is independent, so its total is the sum); the sample's results are checked equal.
b. against DuckDB (:mod:`experiments.bench_sql`): the ``mqo match`` command, as a whole
   process (start-up, reading the CSV files, writing JSON lines), against DuckDB
   running each query as SQL over the same files, and against the one set-based
   statement a DuckDB expert writes (the queries' constants in a table, the streams
   pre-cut by the loosest constants, ``COPY ... TO (FORMAT JSON)``), each a whole
   process; results asserted equal (ids with the per-query SQL; query, ts, ids and
   values as multisets with the set-based). The mqo row's note splits an instrumented
   run of the command into its phases (start-up, registering, plan, reading, kernels,
   matching, writing). At each size of ``--sql-sizes`` (tuples per stream, default
   50,000 and 250,000; rows of a size after the first are named after it): mqo is held
   to 1.5x the set-based statement at 2 x 50,000 and 2x from 2 x 250,000 on; past the
   first size the per-query SQL is timed on 100 queries and scaled.
b'. the same, heterogeneous: queries of seven shapes (other columns, join conditions,
   windows; one-stream filters among the joins), so SQL takes one set-based statement
   per shape (all in one process); the per-query SQL is timed on a sample of each
   shape and scaled.
c. publish/subscribe intervals (the Rein/TAMA workload): 20 attributes, subscriptions
   of 10 interval predicates; registration rate, memory per subscription, matching
   time per event at 20,000 and 1,000,000 subscriptions; and the same sizes of
   template-shaped subscriptions registered from a table (``Matcher.register_table``),
   against the same queries written out as text.
c'. live registration: 20,000 subscriptions, batches of 100 events with one
   subscription registered and one removed before each, against the same batches
   without changes (two matchers, batches timed alternately); and events pushed one
   at a time, 1,000 per second of event time, with 1% of the subscriptions replaced
   per second of event time, against the same events without changes. Its table goes to
   ``churn.md`` and ``churn.csv`` (``--only "c'"`` runs it alone).
d. bounded memory: many tuples through 100 windowed queries; resident memory after
   warm-up must grow by less than 10%.
e. latency of ``push`` with 1,000 registered queries: p50 and p99.
f. linear growth of ``mqo match``: the command (``runtime.cli.main``, in this process
   after a warm-up, so that start-up is not counted) over 10,000, 100,000 and 1,000,000
   tuples per stream with filter, join and mixed queries; the time per tuple must stay
   flat (largest over smallest within 1.5x). The time is the process's CPU time (the
   wall time is in the notes): on a machine shared with other work, wall time also
   counts whatever else ran, more of it the longer a run takes. Its table goes to
   ``linear.md`` and ``linear.csv``, so it runs on its own (``--only f``) without
   touching the others.
g. start-up (:mod:`experiments.startup`): the README demo as a whole process with an
   empty numba cache and with a warm one, and ``mqo --help``.
h. the shape matrix (:mod:`experiments.bench_shapes`): column type {INTEGER, FLOAT} x
   texts {list, query file with ';', table} x queries {filters, 2-way join, 3-way join,
   self-join}, 20,000 subscriptions, each cell in a fresh process; per query kind and
   figure (registration, first event, push mean and p99, peak memory) the worst cell
   beside the best. Its table goes to ``shapes.md`` and ``shapes.csv`` (``--only h``).

Each measurement is taken in the same run as what it is compared with. Results of
(a) to (e) and (g) go to ``results.md`` and ``results.csv`` in the output folder.
"""

from __future__ import annotations

import argparse
import csv
import gc
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import mqo
from experiments import _common as C
from experiments._common import row, speed_up
from experiments._data import ICU_DDL, icu_streams
from experiments.bench_pubsub import (
    bench_churn,
    bench_churn_push,
    bench_pubsub,
    bench_table_registration,
    progress,
    rss_mb,
)
from experiments.bench_shapes import bench_shapes
from experiments.startup import bench_startup

DESCRIPTION = "performance benchmarks: shared vs unshared, vs DuckDB, pub/sub intervals, memory, push latency"
DEFAULT_OUT = Path(__file__).parent / "results" / "bench"
TABLE = ("a", "b", "b'", "c", "d", "e", "g")  # the benchmarks of results.md, in its order


def icu_matcher(**settings: Any) -> mqo.Matcher:
    """A matcher over the ICU streams. T and K, which these benchmarks never feed, are
    declared idle: a declared stream that never speaks holds the watermark back (for
    the idle timeout, in processing time), and nothing would be purged meanwhile."""
    m = mqo.Matcher(ICU_DDL, **settings)
    for silent in ("T", "K"):
        m.set_idle(silent)
    return m


def thesis_queries(n: int, rng: np.random.Generator) -> list[str]:
    """Alert queries of the thesis' two-stream shape with selective constants."""
    c1 = rng.uniform(0.1, 1.0, n)
    c2 = rng.uniform(199.0, 199.9, n)
    k = rng.integers(1, 5, n)
    return [
        f"Query ID: q{i}\nSELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 20 sec "
        f"WHERE B.pressure < {c1[i]:.3f} AND H.beatrate > {c2[i]:.3f} AND B.pressure <= {k[i]} * H.vib"
        for i in range(n)
    ]


def arrival(streams: dict[str, dict[str, np.ndarray]]) -> list[tuple[str, int]]:
    merged = [
        (float(data["ts"][i]), k, stream, i)
        for k, (stream, data) in enumerate(streams.items())
        for i in range(len(data["ts"]))
    ]
    merged.sort()
    return [(stream, i) for _, _, stream, i in merged]


def values_of(data: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    return {c: v[i].item() for c, v in data.items() if c != "ts"}


# ---------------------------------------------------------------- benchmarks


def bench_shared(n_queries: int, n_tuples: int, sample: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    queries = thesis_queries(n_queries, rng)
    streams = icu_streams(n_tuples, rng)
    order = arrival(streams)
    progress(f"a: shared, {n_queries} queries, {len(order)} tuples")
    shared = icu_matcher()
    shared.register_queries(queries)
    shared.ensure_plan()  # compile before timing
    t0 = time.perf_counter()
    shared_results: dict[str, set] = {}
    for stream, i in order:
        for m in shared.push(stream, float(streams[stream]["ts"][i]), values_of(streams[stream], i)):
            shared_results.setdefault(m.query, set()).add(tuple(sorted(m.ids.items())))
    shared_s = time.perf_counter() - t0
    picked = sorted(rng.choice(n_queries, size=min(sample, n_queries), replace=False))
    progress(f"a: unshared, {len(picked)} of {n_queries} queries, one matcher each")
    unshared_s = 0.0
    for q in picked:
        one = icu_matcher()
        one.register_query(queries[q])
        one.ensure_plan()
        got: set = set()
        t0 = time.perf_counter()
        for stream, i in order:
            for m in one.push(stream, float(streams[stream]["ts"][i]), values_of(streams[stream], i)):
                got.add(tuple(sorted(m.ids.items())))
        unshared_s += time.perf_counter() - t0
        name = f"q{q}"
        assert got == shared_results.get(name, set()), f"query {name}: shared and unshared results differ"
    scaled = unshared_s * n_queries / len(picked)
    results = sum(len(v) for v in shared_results.values())
    return [
        row(
            "a",
            "shared matcher, seconds",
            shared_s,
            note=f"{n_queries} queries, {len(order)} tuples, {results} results",
        ),
        row(
            "a",
            "unshared (one matcher per query), seconds",
            scaled,
            note=f"timed on {len(picked)} queries, scaled x{n_queries / len(picked):.0f}",
        ),
        speed_up("a", "speed-up shared / unshared", scaled, shared_s, 30),
    ]


def bench_memory(n_tuples: int, batch: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed + 7)
    # each round pushes a batch of B, then a batch of H over the same time span, so H's
    # tuples arrive up to one span late: the lateness allowed covers that, and the
    # window state held is MAXWINDOW plus that lateness
    span = batch / 10
    m = icu_matcher(allowed_lateness=span)
    # the selective alert constants of (a) and (b): with looser ones, 10 million tuples
    # make billions of results and the run measures result building, not window state
    m.register_queries(thesis_queries(100, rng))
    progress(f"d: {n_tuples:,} tuples through 100 windowed queries")
    samples = []
    done = 0
    now = 0.0
    results = 0
    while done < n_tuples:
        for stream, cols in (("B", ("pressure", "temp")), ("H", ("beatrate", "vib"))):
            ts = now + np.sort(rng.uniform(0, span, batch))
            data = {"ts": ts, **{c: rng.uniform(0, 200, batch) for c in cols}, "alert": rng.integers(0, 2, batch)}
            results += len(m.push_batch(stream, data))
            done += batch
        now += span
        samples.append((done, rss_mb(), len(m.state)))
    warm = next(s for s in samples if s[0] >= n_tuples // 10)
    end = samples[-1]
    growth = (end[1] - warm[1]) / warm[1] * 100
    return [
        row(
            "d",
            "resident memory after warm-up, MiB",
            warm[1],
            note=f"after {warm[0]:,} tuples; {warm[2]} tuples stored",
        ),
        row(
            "d",
            "resident memory at the end, MiB",
            end[1],
            note=f"after {end[0]:,} tuples; {end[2]} tuples stored; {results:,} results; {m.late_count} late",
        ),
        row("d", "growth after warm-up, %", growth, target="< 10%", met=growth < 10),
    ]


def push_latencies(n_queries: int, n_tuples: int, seed: int, order: str) -> tuple[np.ndarray, int]:
    """Nanoseconds of every ``push`` (and how many made results) under ``order``."""
    rng = np.random.default_rng(seed + 3)
    m = icu_matcher(order=order)
    m.register_queries(thesis_queries(n_queries, rng))
    m.ensure_plan()
    streams = icu_streams(n_tuples, rng)
    order_of_arrival = arrival(streams)
    progress(f"e: {len(order_of_arrival)} pushes with {n_queries} queries, order {order}")
    times = np.empty(len(order_of_arrival))
    with_results = 0
    clock = time.perf_counter_ns
    for j, (stream, i) in enumerate(order_of_arrival):
        values = values_of(streams[stream], i)
        ts = float(streams[stream]["ts"][i])
        t0 = clock()
        found = m.push(stream, ts, values)
        times[j] = clock() - t0
        with_results += bool(found)
    return times, with_results


def bench_latency(n_queries: int, n_tuples: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    # the default (adaptive) and the best static order for this workload, side by side:
    # the adaptive reorderer's exploring and switching show in the tail
    for order in ("adaptive", "AJW"):
        times, with_results = push_latencies(n_queries, n_tuples, seed, order)
        p50, p99, worst = np.percentile(times, [50, 99, 100]) / 1e6
        rows += [
            row("e", f"push latency p50, ms, order {order}", p50, note=f"{n_queries} queries, {len(times)} pushes"),
            row(
                "e",
                f"push latency p99, ms, order {order}",
                p99,
                target="< 1 ms",
                met=p99 < 1.0,
                note=f"{with_results} pushes made results",
            ),
            row("e", f"push latency max, ms, order {order}", worst),
        ]
    return rows


LINEAR_SIZES = (10_000, 100_000, 1_000_000)
LINEAR_QUERIES = {
    # the two filters of the issue that found the CLI quadratic
    "filter": "Query ID: all_b\nSELECT * FROM B;\nQuery ID: hot_h\nSELECT * FROM H WHERE H.vib > 90;\n",
    # a windowed theta join: its window holds a constant number of tuples at a constant rate
    "join": "Query ID: join\nSELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 2 sec\n"
    "WHERE B.pressure < 40 AND H.beatrate > 160 AND B.temp <= H.vib;\n",
}


def mixed_queries(rng: np.random.Generator) -> str:
    """The filter and join queries plus 40 filters and 40 thesis-shaped joins."""
    filters = [
        f"Query ID: f{i}\nSELECT * FROM {s} WHERE {s}.{c} < {rng.uniform(0, 10):.2f};"
        for i, (s, c) in enumerate([("B", "pressure"), ("B", "temp"), ("H", "beatrate"), ("H", "vib")] * 10)
    ]
    joins = [q + ";" for q in thesis_queries(40, rng)]
    return "\n".join([LINEAR_QUERIES["filter"], LINEAR_QUERIES["join"], *filters, *joins]) + "\n"


def bench_linear(sizes: list[int], seed: int) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from runtime.cli import main as mqo_main

    rng = np.random.default_rng(seed + 11)
    workloads = {**LINEAR_QUERIES, "mixed": mixed_queries(rng)}
    per_tuple: dict[str, list[float]] = {name: [] for name in workloads}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "streams.ddl").write_text(ICU_DDL)
        for name, text in workloads.items():
            (d / f"{name}.mqo").write_text(text)

        def run(name: str, n: int) -> tuple[float, float, int]:
            out = d / "out.jsonl"
            args = ["match", "--schema", str(d / "streams.ddl"), "--queries", str(d / f"{name}.mqo"),
                    "--input", f"B={d / 'B.csv'}", "--input", f"H={d / 'H.csv'}", "--output", str(out),
                    "-q", "--no-progress"]  # fmt: skip
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            assert mqo_main(args) == 0, f"mqo match failed on {name}, {n} tuples per stream"
            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
            with open(out, "rb") as f:
                results = sum(1 for _ in f)
            out.unlink()
            return cpu, wall, results

        for k, n in enumerate([min(sizes) // 10, *sizes]):
            for stream, data in icu_streams(n, rng).items():
                table = pa.table({c: pa.array(v) for c, v in data.items()})
                pacsv.write_csv(table, d / f"{stream}.csv")
            for name in workloads:
                progress(f"f: {name}, {n:,} tuples per stream")
                cpu, wall, results = run(name, n)
                if k == 0:
                    continue  # the warm-up: kernels loaded, caches filled
                us = cpu / (2 * n) * 1e6
                per_tuple[name].append(us)
                note = f"{cpu:.2f} s CPU ({wall:.2f} s wall) for {2 * n:,} tuples, {results:,} results"
                rows.append(row("f", f"{name}, {n:,} tuples per stream: CPU µs per tuple", us, note=note))
    for name, times in per_tuple.items():
        growth = max(times) / min(times)
        rows.append(
            row("f", f"{name}: CPU time per tuple, largest / smallest", growth, target="<= 1.5x", met=growth <= 1.5,
                note=" / ".join(f"{t:.1f}" for t in times) + " µs")
        )  # fmt: skip
    return rows


def earlier_rows(path: Path, chosen: set[str]) -> list[dict[str, Any]]:
    """The rows of ``path`` (an earlier run's results.csv) of benchmarks not chosen now:
    running some of (a) to (e) and (g) leaves the others' figures in the table."""
    if not path.exists():
        return []
    with open(path, newline="") as f:
        found = [r for r in csv.DictReader(f) if r["benchmark"] in TABLE and r["benchmark"] not in chosen]
    for r in found:
        r["value"] = float(r["value"])
        r["met"] = None if r["met"] == "" else r["met"] == "True"
    return found


def write_results(
    rows: list[dict[str, Any]],
    out: Path,
    settings: dict[str, Any],
    stem: str = "results",
    title: str = "Benchmarks",
    kept: list[str] | None = None,
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / f"{stem}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [
        f"# {title}",
        "",
        f"Run: `python -m experiments.bench {settings['argv']}` at commit `{settings['commit']}` on "
        f"{settings['machine']} ({settings['date']}). Every ratio compares measurements taken in the same run."
        + (f" The rows of {', '.join(kept)} are kept from an earlier run." if kept else ""),
        "",
        "| | measurement | value | target | met | notes |",
        "| --- | --- | ---: | --- | --- | --- |",
    ]
    for r in rows:
        met = "" if r["met"] is None else ("yes" if r["met"] else "**no**")
        value = r["value"]
        shown = f"{value:,.3f}" if isinstance(value, float) and abs(value) < 100 else f"{value:,.0f}"
        lines.append(f"| {r['benchmark']} | {r['metric']} | {shown} | {r['target']} | {met} | {r['note']} |")
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print(f"results written to {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mqo experiment bench", description=DESCRIPTION)
    parser.add_argument(
        "--out", type=Path, default=None, help=f"output folder (default {DEFAULT_OUT}; with --quick a temporary one)"
    )
    parser.add_argument("--only", default="a,b,b',c,c',d,e,f,g,h", help="which benchmarks (a,b,b',c,c',d,e,f,g,h)")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test, not the targets' sizes)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--subscriptions", default="20000,1000000", help="pub/sub sizes for (c)")
    parser.add_argument("--memory-tuples", type=int, default=10_000_000, help="tuples for (d)")
    parser.add_argument("--shape-subscriptions", type=int, default=20_000, help="subscriptions per cell of (h)")
    parser.add_argument(
        "--sql-sizes", default="50000,250000", help="tuples per stream for (b) and (b'), comma-separated"
    )
    parser.add_argument("--linear-sizes", default=",".join(map(str, LINEAR_SIZES)), help="tuples per stream for (f)")
    args = parser.parse_args(argv)
    if args.out is None:
        # a smoke test never writes over the committed results
        args.out = Path(tempfile.mkdtemp(prefix="mqo-bench-")) if args.quick else DEFAULT_OUT
    if args.out.resolve() == DEFAULT_OUT.resolve() and C.dirty_tree():
        parser.error(
            f"{DEFAULT_OUT} holds committed results, which come from a clean tree: commit first (or pass --out)"
        )
    chosen = set(args.only.split(","))
    q = args.quick
    sql_sizes = [int(x) for x in args.sql_sizes.split(",")]
    runs: dict[str, Callable[[], list[dict[str, Any]]]] = {
        "a": lambda: bench_shared(100 if q else 1000, 2000 if q else 10_000, 10 if q else 100, args.seed),
        "b": lambda: bench_sql.bench_duckdb(200 if q else 10_000, [5000] if q else sql_sizes, args.seed),
        "b'": lambda: bench_sql.bench_hetero(
            210 if q else 10_000, [5000] if q else sql_sizes, 5 if q else 100, args.seed
        ),
        "c": lambda: (
            bench_pubsub(
                [2000] if q else [int(x) for x in args.subscriptions.split(",")], 200 if q else 1000, args.seed
            )
            + bench_table_registration([2000] if q else [int(x) for x in args.subscriptions.split(",")], args.seed)
        ),
        "c'": lambda: (
            bench_churn(2000 if q else 20_000, 30 if q else 200, args.seed)
            + bench_churn_push(2000 if q else 20_000, 1000 if q else 5000, args.seed)
        ),
        "d": lambda: bench_memory(100_000 if q else args.memory_tuples, 2000 if q else 20_000, args.seed),
        "e": lambda: bench_latency(100 if q else 1000, 2000 if q else 10_000, args.seed),
        "g": lambda: bench_startup(1 if q else 3),
        "h": lambda: bench_shapes(500 if q else args.shape_subscriptions, 60 if q else 300, args.seed, progress),
        "f": lambda: bench_linear(
            [1000, 4000, 16_000] if q else [int(x) for x in args.linear_sizes.split(",")], args.seed
        ),
    }
    import datetime
    import platform

    # imported here: bench_sql takes the ICU streams from this module
    from experiments import bench_sql

    settings = {
        "argv": " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "date": datetime.date.today().isoformat(),
        "commit": C.git_commit(),
    }
    unknown = chosen - set(runs)
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(sorted(unknown))}; choose from {', '.join(runs)}")
    C.compile_bytecode()  # as installed: whole processes load the project's bytecode
    rows: list[dict[str, Any]] = []
    kept = earlier_rows(args.out / "results.csv", chosen)
    for name in TABLE:
        if name in chosen:
            rows += runs[name]()
            # written after every benchmark, so a long run that stops keeps what it measured
            merged = sorted(rows + kept, key=lambda r: TABLE.index(r["benchmark"]))  # stable: rows keep their order
            write_results(merged, args.out, settings, kept=sorted({r["benchmark"] for r in kept}))
    if "c'" in chosen:
        # its own table too: it runs on its own without touching the others'
        write_results(runs["c'"](), args.out, settings, stem="churn", title="Live registration (c')")
    if "h" in chosen:
        write_results(runs["h"](), args.out, settings, stem="shapes", title="The shape matrix (h)")
    if "f" in chosen:
        # a table of its own: running (f) alone leaves the results of (a) to (e) as they are
        write_results(runs["f"](), args.out, settings, stem="linear", title="Linear growth of mqo match")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
