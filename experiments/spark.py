"""The Spark stage against the local engine and against per-query Spark SQL.

Workload (the thesis' shape): streams B and H of ``experiments/workloads/streams.ddl``,
``--tuples`` tuples each at 1 Hz (B at whole seconds, H half a second later), values
uniform in [0, 200); queries

    SELECT B.pressure, H.vib FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 20 sec
    WHERE B.pressure < c1 AND H.beatrate > c2 AND B.pressure <= k * H.vib

with ``c1``, ``c2`` drawn so that each attribute predicate keeps about ``--selectivity``
of the tuples (alert-style queries), and ``k`` from {0.5, 1, 1.5, 2}.

Engines, timed side by side in one run on this machine, after a warm-up on a
same-shaped workload (JVM, Python workers, numba kernels):

* **local**: one :class:`mqo.Matcher` over the tuples in (ts, stream, id) order, run
  as ``mqo match`` runs it (attribute predicates decided per stream in batch, then the
  rows replayed in order; registration included); median of ``--repeats`` runs;
* **stage**: :func:`runtime.spark.match_batch` on the cached stream DataFrames, one
  partition per core, results written to Parquet; median of ``--repeats`` runs,
  each on a freshly named query set so that the driver's and every worker's plan
  compilation is in the time;
* **per-query SQL**: what a Spark user does today: one DataFrame join per query with the
  query's predicates and window (``b.ts <= h.ts AND h.ts - b.ts <= 20``), each counted.
  Spark plans that band join as a broadcast nested-loop join (after pushing the
  attribute filters below it). At large query counts a random sample of ``--sample``
  queries is timed and the total extrapolated (the table says so); ``--full`` times
  them all;
* **per-query SQL, bucketed**: the same with a hand-written equi-join on 20-second
  buckets (B copied to its next bucket), which a Spark expert might write; reported so
  the comparison does not rest on a naive baseline alone;
* **set-based SQL**: what a Spark expert writes for many queries of one shape: the
  queries' constants as a broadcast table and one join, the streams pre-cut by the
  loosest constants and band-joined on 20-second buckets; results written to Parquet
  like the stage's.

Every engine's result count per query must agree (for the timed SQL queries), else the
run fails (counted on the written files, untimed). Counting favours the per-query SQL
baselines (Spark need not build the joined rows).
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

DESCRIPTION = "Spark stage vs the local engine, one Spark SQL join per query, and one set-based Spark SQL join"

HERE = Path(__file__).resolve().parent
DDL_PATH = HERE / "workloads" / "streams.ddl"
DEFAULT_OUT = HERE / "results" / "spark"
WINDOW = 20.0
VALUE_RANGE = 200.0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mqo experiment spark", description=DESCRIPTION)
    p.add_argument("--out", default=str(DEFAULT_OUT), help="output folder (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default: %(default)s)")
    p.add_argument("--queries", default="10,100,1000", help="query counts (default: %(default)s)")
    p.add_argument("--tuples", type=int, default=3600, help="tuples per stream (default: %(default)s)")
    p.add_argument("--selectivity", type=float, default=0.05, help="per attribute predicate (default: %(default)s)")
    p.add_argument("--sample", type=int, default=100, help="SQL queries timed when there are more (default: 100)")
    p.add_argument("--full", action="store_true", help="time every per-query SQL join, no extrapolation")
    p.add_argument(
        "--band-sample",
        type=int,
        help="per-query band joins timed (default: --sample; they are nested-loop joins, slow on large inputs)",
    )
    p.add_argument("--partitions", type=int, help="stage partitions (default: one per core)")
    p.add_argument("--repeats", type=int, default=3, help="runs of local and stage, median kept (default: 3)")
    p.add_argument("--master", default="local[*]", help="Spark master (default: %(default)s)")
    p.add_argument("--driver-memory", help="spark.driver.memory, e.g. 4g (default: Spark's)")
    p.add_argument(
        "--no-local",
        action="store_true",
        help="large runs: no local engine and no plan-cached stage rerun; counts checked stage vs SQL",
    )
    p.add_argument("--quick", action="store_true", help="a small run (10,100 queries, 600 tuples, one repeat)")
    p.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    return p


def make_queries(rnd: random.Random, n: int, selectivity: float) -> list[tuple[float, float, float]]:
    """(c1, c2, k) per query."""
    out = []
    for _ in range(n):
        c1 = round(VALUE_RANGE * selectivity * rnd.uniform(0.5, 1.5), 1)
        c2 = round(VALUE_RANGE * (1 - selectivity * rnd.uniform(0.5, 1.5)), 1)
        out.append((c1, c2, rnd.choice([0.5, 1.0, 1.5, 2.0])))
    return out


def query_texts(queries: list[tuple[float, float, float]], prefix: str = "q") -> list[str]:
    """The queries as text, named ``<prefix><number>`` (a fresh prefix per repetition
    gives a new query set to the stage, so no worker finds its plan cached)."""
    return [
        f"Query ID: {prefix}{i}\nSELECT B.pressure, H.vib FROM B, H WINDOW B.ts <= H.ts MAXWINDOW {WINDOW:g} sec\n"
        f"WHERE B.pressure < {c1} AND H.beatrate > {c2} AND B.pressure <= {k} * H.vib\n"
        for i, (c1, c2, k) in enumerate(queries)
    ]


def by_number(counts: Counter[str] | dict[str, int], prefix: str) -> Counter[int]:
    return Counter({int(name[len(prefix) :]): n for name, n in counts.items()})


def make_streams(seed: int, n: int) -> dict[str, Any]:
    """Arrow tables for B and H (ts, id and the declared columns)."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    ts = np.arange(n, dtype=np.float64)
    ids = np.arange(n, dtype=np.int64)
    b = pa.table(
        {
            "ts": ts,
            "id": ids,
            "pressure": rng.uniform(0, VALUE_RANGE, n).round(1),
            "temp": rng.uniform(95, 105, n).round(1),
            "alert": rng.integers(0, 2, n),
        }
    )
    h = pa.table(
        {
            "ts": ts + 0.5,
            "id": ids,
            "beatrate": rng.uniform(0, VALUE_RANGE, n).round(1),
            "vib": rng.uniform(0, VALUE_RANGE, n).round(1),
            "alert": rng.integers(0, 2, n),
        }
    )
    return {"B": b, "H": h}


def run_local(ddl: str, texts: list[str], streams: dict[str, Any]) -> tuple[float, Counter[str]]:
    """The local engine over the tuples in (ts, stream, id) order, the way ``mqo match``
    runs it (each stream's attribute predicates decided in batch, the rows then replayed
    in arrival order); (seconds, counts)."""
    import numpy as np

    import mqo
    from mqo import MatchBatch

    started = time.perf_counter()
    m = mqo.Matcher(ddl)
    m.register_queries(texts)
    names = [s.name for s in m.catalog if s.name in streams]
    prepared = [m.prepare(name, streams[name]) for name in names]
    ts = np.concatenate([streams[name]["ts"].to_numpy() for name in names])
    which = np.concatenate([np.full(streams[name].num_rows, k) for k, name in enumerate(names)])
    rows = np.concatenate([np.arange(streams[name].num_rows) for name in names])
    order = np.lexsort((rows, which, ts))  # ts, then stream in DDL order, then id
    found = MatchBatch(m.ensure_plan())
    for _, blocks in m.replay(prepared, which[order], rows[order]):
        found.blocks.extend(blocks)
    counts = Counter(found.to_arrow({}).column("query").to_pylist())
    return time.perf_counter() - started, counts


def written(df: Any, key: str, started: float) -> tuple[float, Counter[str]]:
    """Seconds from ``started`` until ``df`` is written to a Parquet file (every row and
    column made, as a job that keeps its results does), and its rows counted per
    ``key`` (read back, untimed)."""
    import shutil
    import tempfile

    spark = df.sparkSession
    folder = tempfile.mkdtemp(prefix="mqo-spark-")
    try:
        df.write.mode("overwrite").parquet(folder)
        seconds = time.perf_counter() - started
        rows = spark.read.parquet(folder).groupBy(key).count().collect()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return seconds, Counter({str(r[key]): int(r["count"]) for r in rows})


def run_stage(frames: dict[str, Any], ddl: str, texts: list[str], partitions: int) -> tuple[float, Counter[str]]:
    from runtime.spark.batch import match_batch

    started = time.perf_counter()
    return written(match_batch(frames, texts, schema=ddl, partitions=partitions), "query", started)


def exact_at_most(x: Any, k: Any, y: Any) -> Any:
    """``x <= k * y`` in DECIMAL arithmetic, as the queries mean it (the values have one
    decimal, ``k`` one as well): in doubles, ``1.5 * y`` can round either way and a
    pair exactly on the boundary would be decided by rounding (mqo decides exactly)."""
    return x.cast("decimal(12,1)") <= k.cast("decimal(4,1)") * y.cast("decimal(12,1)")


def sql_count(frames: dict[str, Any], c1: float, c2: float, k: float, bucketed: bool) -> int:
    """One query as its own Spark SQL join, counted."""
    from pyspark.sql import functions as F

    b, h = frames["B"], frames["H"]
    if not bucketed:
        cond = (
            (F.col("b.ts") <= F.col("h.ts"))
            & (F.col("h.ts") - F.col("b.ts") <= WINDOW)
            & (F.col("b.pressure") < c1)
            & (F.col("h.beatrate") > c2)
            & exact_at_most(F.col("b.pressure"), F.lit(k), F.col("h.vib"))
        )
        return b.alias("b").join(h.alias("h"), cond).count()
    bucket = F.floor(F.col("ts") / WINDOW)
    bb = b.where(F.col("pressure") < c1).withColumn("bk", F.explode(F.array(bucket, bucket + 1)))
    hh = h.where(F.col("beatrate") > c2).withColumn("bk", bucket)
    cond = (
        (F.col("b.bk") == F.col("h.bk"))
        & (F.col("b.ts") <= F.col("h.ts"))
        & (F.col("h.ts") - F.col("b.ts") <= WINDOW)
        & exact_at_most(F.col("b.pressure"), F.lit(k), F.col("h.vib"))
    )
    return bb.alias("b").join(hh.alias("h"), cond).count()


def run_sql(
    frames: dict[str, Any], queries: list[tuple[float, float, float]], timed: list[int], bucketed: bool
) -> tuple[float, Counter[int]]:
    """Seconds for the ``timed`` queries, and their counts."""
    counts: Counter[int] = Counter()
    started = time.perf_counter()
    for i in timed:
        c1, c2, k = queries[i]
        counts[i] = sql_count(frames, c1, c2, k, bucketed)
    return time.perf_counter() - started, counts


def run_set_based(
    spark: Any, frames: dict[str, Any], queries: list[tuple[float, float, float]]
) -> tuple[float, Counter[int]]:
    """What a Spark expert writes for many queries of one shape: the queries' constants
    as a broadcast table and ONE join; the streams pre-cut by the loosest constants and
    band-joined on 20-second buckets (B copied to its next bucket); the result rows
    written as the stage's are."""
    from pyspark.sql import functions as F

    started = time.perf_counter()
    table = spark.createDataFrame(
        [(i, float(c1), float(c2), float(k)) for i, (c1, c2, k) in enumerate(queries)],
        "qid int, c1 double, c2 double, k double",
    )
    loosest_c1 = max(c1 for c1, _, _ in queries)
    loosest_c2 = min(c2 for _, c2, _ in queries)
    bucket = F.floor(F.col("ts") / WINDOW)
    bb = frames["B"].where(F.col("pressure") < loosest_c1).withColumn("bk", F.explode(F.array(bucket, bucket + 1)))
    hh = frames["H"].where(F.col("beatrate") > loosest_c2).withColumn("bk", bucket)
    pairs = bb.alias("b").join(
        hh.alias("h"),
        (F.col("b.bk") == F.col("h.bk")) & (F.col("b.ts") <= F.col("h.ts")) & (F.col("h.ts") - F.col("b.ts") <= WINDOW),
    )
    matched = pairs.join(
        F.broadcast(table.alias("q")),
        (F.col("b.pressure") < F.col("q.c1"))
        & (F.col("h.beatrate") > F.col("q.c2"))
        & exact_at_most(F.col("b.pressure"), F.col("q.k"), F.col("h.vib")),
    )
    # the rows the stage writes: query, ts, ids, the SELECT values
    results = matched.select(
        F.col("q.qid").alias("qid"),
        F.col("h.ts").alias("ts"),
        F.create_map(F.lit("B"), F.col("b.id"), F.lit("H"), F.col("h.id")).alias("ids"),
        F.col("b.pressure").alias("B_pressure"),
        F.col("h.vib").alias("H_vib"),
    )
    seconds, counts = written(results, "qid", started)
    return seconds, Counter({int(q): n for q, n in counts.items()})


def replication(frames: dict[str, Any], ddl: str, texts: list[str], partitions: int) -> tuple[float, float]:
    """Rows the time-bucket partitioning ships per input tuple, and the skew of the
    stage's partitions (largest / mean rows per partition), both measured."""
    from pyspark.sql import functions as F

    import mqo
    from runtime.spark.common import time_buckets, unify
    from runtime.spark.spec import build_spec

    m = mqo.Matcher(ddl)
    m.register_queries(texts)
    spec = build_spec(m, partition_by="time", allowed_lateness=0.0)
    unified = unify(frames, spec)
    shipped = time_buckets(unified, spec)
    per_partition = [
        r["count"]
        for r in shipped.repartitionByRange(partitions, "_b")
        .groupBy(F.spark_partition_id().alias("p"))
        .count()
        .collect()
    ]
    mean = sum(per_partition) / partitions
    return shipped.count() / unified.count(), max(per_partition) / mean if mean else 1.0


def session(master: str, driver_memory: str | None = None) -> Any:
    """A quiet Spark session (errors only on the console) for the benchmark."""
    from runtime.spark.cli import spark_session

    conf = {
        "spark.app.name": "mqo experiment spark",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": str(2 * (os.cpu_count() or 1)),  # not 200 tasks on a laptop
    }
    if driver_memory:
        conf["spark.driver.memory"] = driver_memory
    spark, _ = spark_session(master, conf)
    return spark


def check(name: str, got: Counter[int], expected: Counter[int], only: list[int] | None = None) -> None:
    keys = only if only is not None else sorted(set(got) | set(expected))
    bad = [q for q in keys if got.get(q, 0) != expected.get(q, 0)]
    if bad:
        q = bad[0]
        raise SystemExit(
            f"{name}: result counts differ from the local engine for {len(bad)} queries, "
            f"e.g. {q}: {got.get(q, 0)} vs {expected.get(q, 0)}"
        )


def note(args: argparse.Namespace, text: str) -> None:
    if not args.no_progress:
        print(text, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.quick:
        args.queries, args.tuples, args.repeats, args.sample = "10,100", 300, 1, 20
    counts = [int(x) for x in args.queries.split(",") if x.strip()]
    if not counts or min(counts) < 1 or args.tuples < 1 or args.repeats < 1 or args.sample < 1:
        raise SystemExit("--queries, --tuples, --repeats and --sample must be positive")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ddl = DDL_PATH.read_text()
    run_started = time.perf_counter()
    streams = make_streams(args.seed, args.tuples)
    spark = session(args.master, args.driver_memory)
    cores = spark.sparkContext.defaultParallelism
    partitions = args.partitions or cores
    frames = {name: spark.createDataFrame(table).cache() for name, table in streams.items()}
    for df in frames.values():
        df.count()
    args.startup_s = time.perf_counter() - run_started  # session, data made and cached
    # Warm up on a workload of the same shape (on the first hour of data): JVM code
    # paths, Python workers, numba kernels, so that no engine's time includes the
    # session's start-up.
    warm = make_queries(random.Random(-1), 100, args.selectivity)
    head = {name: table.slice(0, min(3600, table.num_rows)) for name, table in streams.items()}
    head_frames = {name: spark.createDataFrame(table) for name, table in head.items()}
    if not args.no_local:
        run_local(ddl, query_texts(warm, "w"), head)
    run_stage(head_frames, ddl, query_texts(warm, "w"), partitions)
    run_set_based(spark, head_frames, warm)
    for c1, c2, k in warm[:5]:
        sql_count(head_frames, c1, c2, k, False)
        sql_count(head_frames, c1, c2, k, True)
    args.warmup_s = time.perf_counter() - run_started - args.startup_s

    rows = []
    for n in counts:
        rnd = random.Random(args.seed * 1_000_003 + n)
        queries = make_queries(rnd, n, args.selectivity)
        local_times, stage_times, warm_times = [], [], []
        expected: Counter[int] = Counter()
        for rep in range(args.repeats):
            prefix = f"r{rep}q"
            texts = query_texts(queries, prefix)
            note(args, f"[spark] {n} queries, run {rep + 1}: local engine, Spark stage")
            if args.no_local:  # the stage's counts are the reference, checked against every SQL engine
                seconds, stage_counts = run_stage(frames, ddl, texts, partitions)
                stage_times.append(seconds)
                if rep == 0:
                    expected = by_number(stage_counts, prefix)
                check("Spark stage", by_number(stage_counts, prefix), expected)
                continue
            seconds, local_counts = run_local(ddl, texts, streams)
            local_times.append(seconds)
            expected = by_number(local_counts, prefix)
            seconds, stage_counts = run_stage(frames, ddl, texts, partitions)
            stage_times.append(seconds)
            check("Spark stage", by_number(stage_counts, prefix), expected)
            seconds, stage_counts = run_stage(frames, ddl, texts, partitions)  # same queries: plans cached
            warm_times.append(seconds)
            check("Spark stage", by_number(stage_counts, prefix), expected)
        note(args, f"[spark] {n} queries: set-based Spark SQL (broadcast query table, one join)")
        set_times = []
        for _ in range(args.repeats):
            seconds, set_counts = run_set_based(spark, frames, queries)
            set_times.append(seconds)
            check("set-based SQL", set_counts, expected)
        timed = list(range(n)) if args.full or n <= args.sample else sorted(rnd.sample(range(n), args.sample))
        band_n = len(timed) if args.full or args.band_sample is None else min(len(timed), args.band_sample)
        band = timed[:band_n]
        note(args, f"[spark] {n} queries: per-query SQL on {len(band)} (band joins) and {len(timed)} (bucketed)")
        sql_s, sql_counts = run_sql(frames, queries, band, bucketed=False)
        check("per-query SQL", sql_counts, expected, band)
        tuned_s, tuned_counts = run_sql(frames, queries, timed, bucketed=True)
        check("per-query SQL, bucketed", tuned_counts, expected, timed)
        scale = n / len(timed)
        band_scale = n / len(band)
        stage_s = statistics.median(stage_times)
        local_s = statistics.median(local_times) if local_times else float("nan")
        cached_s = statistics.median(warm_times) if warm_times else float("nan")
        rows.append(
            {
                "queries": n,
                "tuples": 2 * args.tuples,
                "results": sum(expected.values()),
                "local_s": round(local_s, 2),
                "stage_s": round(stage_s, 2),
                "stage_runs_s": " ".join(f"{t:.2f}" for t in stage_times),
                "stage_cached_s": round(cached_s, 2),
                "sql_s": round(sql_s * band_scale, 1),
                "sql_band_timed_queries": len(band),
                "sql_bucketed_s": round(tuned_s * scale, 1),
                "sql_timed_queries": len(timed),
                "sql_extrapolated": scale != 1,
                "set_sql_s": round(statistics.median(set_times), 2),
                "stage_vs_set_sql": round(statistics.median(set_times) / stage_s, 2),
                "stage_vs_local": round(local_s / stage_s, 2),
                "stage_vs_sql": round(sql_s * band_scale / stage_s, 1),
                "stage_vs_sql_bucketed": round(tuned_s * scale / stage_s, 1),
            }
        )
        note(args, f"[spark] {rows[-1]}")
    rep_factor, skew = replication(
        frames, ddl, query_texts(make_queries(random.Random(0), 3, args.selectivity)), partitions
    )
    args.run_s = time.perf_counter() - run_started
    write(out, rows, args, cores, partitions, rep_factor, skew)
    spark.stop()
    print(out)
    return 0


def write(
    out: Path, rows: list[dict[str, Any]], args: argparse.Namespace, cores: int, parts: int, rep: float, skew: float
) -> None:
    with open(out / "spark.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [
        "# Spark stage vs local engine vs per-query Spark SQL",
        "",
        f"Machine: {cores} cores, Spark `{args.master}`, stage partitions {parts}. "
        f"Workload: {2 * args.tuples:,} tuples (B and H, 1 Hz each), thesis-shaped queries "
        f"(MAXWINDOW 20 s), attribute selectivity ~{args.selectivity:g}, seed {args.seed}. "
        f"Time-bucket replication measured: {rep:.3f} rows per tuple (1 + W/B = 1.25); partition skew "
        f"(largest / mean rows per stage partition): {skew:.2f}.",
        "",
        "| queries | results | local engine (s) | Spark stage (s) | stage, plan cached (s) | per-query SQL (s) "
        "| per-query SQL, bucketed (s) | set-based SQL (s) | SQL / stage | SQL bucketed / stage "
        "| set-based SQL / stage | local / stage |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        note = f" (timed {r['sql_timed_queries']}, extrapolated)" if r["sql_extrapolated"] else ""
        band_extrapolated = r["sql_band_timed_queries"] < r["queries"]
        band_note = f" (timed {r['sql_band_timed_queries']}, extrapolated)" if band_extrapolated else ""
        lines.append(
            f"| {r['queries']:,} | {r['results']:,} | {r['local_s']:.2f} | {r['stage_s']:.2f} | "
            f"{r['stage_cached_s']:.2f} | "
            f"{r['sql_s']:,.1f}{band_note} | {r['sql_bucketed_s']:,.1f}{note} | {r['set_sql_s']:.2f} | "
            f"{r['stage_vs_sql']:,.1f}x | {r['stage_vs_sql_bucketed']:,.1f}x | {r['stage_vs_set_sql']:.2f}x | "
            f"{r['stage_vs_local']:.2f}x |"
        )
    lines += [
        "",
        "All engines agree on every query's result count (for SQL: on every timed query). "
        f"Times are wall-clock seconds in one run, after a warm-up on a same-shaped workload; local "
        f"engine and stage: median of {args.repeats} runs, each on a freshly named query set, so the "
        "stage's time includes compiling the plan on the driver and on every Python worker. "
        "'Plan cached': the same queries again, so the workers reuse their compiled plan, as in a "
        "long-running application; the ratios use the first-run (cold) stage time. "
        "The stage and the set-based SQL write their result rows (query, ts, ids, values) to Parquet; "
        "the per-query SQL joins are only counted (which favours them). "
        "Set-based SQL: the queries' constants as a broadcast table and one join over the streams "
        "pre-cut by the loosest constants and band-joined on 20-second buckets (median of the same "
        "number of runs). "
        "Extrapolated SQL totals are the timed sample's time times queries / sample.",
        "",
        f"Not in the engines' times: the session's start-up with the data made and cached, "
        f"{args.startup_s:.1f} s (the same for every engine), and the warm-up, {args.warmup_s:.1f} s; "
        f"the whole run took {args.run_s:.0f} s.",
        "",
    ]
    if args.no_local:
        lines += [
            "Run with `--no-local` (a large run): the local engine and the plan-cached rerun were not run "
            "(nan); the stage's counts per query are the reference, and the set-based SQL (every query) and "
            "the timed per-query SQL queries agree with them.",
            "",
        ]
    (out / "spark.md").write_text("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
