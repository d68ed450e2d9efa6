"""The aggregate Spark stage against per-query and set-based Spark SQL.

Workload: the aggregation benchmark's (``experiments/aggregation.py``, its generator):
one stream H at 10 tuples/s, ``--tuples`` tuples; ``--queries`` queries ``SELECT
[H.patient,] COUNT(*), SUM(H.vib), AVG(H.vib), MIN(H.vib), MAX(H.vib) FROM H [RANGE r
SLIDE s] WHERE <one of 10 filters> [GROUP BY H.patient]`` with r from 5 min to 6 h and
s from 1 to 15 min (whole minutes).

Engines, timed side by side in one run after a warm-up on the first tenth of the data:

* **stage**: :func:`runtime.spark.aggregate.aggregate_batch` on the cached stream
  DataFrame, its result rows written to Parquet;
* **per-query SQL**: what a Spark user writes for one sliding window: the query's
  filter, ``groupBy(window(...)[, patient])`` with its aggregates, collected. Spark
  copies each row into every window it is in (RANGE / SLIDE copies). A random sample of
  ``--sample`` queries is timed and the total extrapolated (the table says so);
* **set-based SQL, panes**: one statement for all queries, the query constants as a
  broadcast table: per-minute partials (count, sum, min, max) per filter, patient and
  minute in one pass over the stream (a row exploded to the filters it satisfies), the
  ungrouped ones summed from them; joined to the queries of each filter and grouping,
  each minute copied to the windows it is in (RANGE / SLIDE copies, of minutes, not
  rows) and ``groupBy(query, window, group)``; rows written to Parquet;
* **set-based SQL, prefix sums** (the best formulation found): the same per-minute
  partials on a dense minute grid; COUNT and SUM of a window are the difference of two
  running sums, MIN and MAX the combination of two blocks of a sparse table (minima and
  maxima of 2^L minutes, L <= log2 of the longest RANGE): O(minutes + windows) work,
  independent of RANGE / SLIDE; the window ends generated per query and group; rows
  written to Parquet.

Windows: Spark's are half-open ``[start, end)``, mqo's ``(end - RANGE, end]`` with ends
at multiples of SLIDE; the per-query SQL moves every timestamp one microsecond earlier
and offsets the windows by ``-RANGE mod SLIDE``, which gives mqo's windows exactly.
The SQL sums in DECIMAL (exact; mqo sums the FLOAT column in doubles, so SUM and AVG
are compared to 1e-9, relative; COUNT, MIN and MAX exactly). Every engine must write the same number of rows per
query, and the rows of the timed per-query queries must hold the same values in all
engines, else the run fails (checked untimed, on the written files).
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from experiments.aggregation import DDL, query_text, workload

DESCRIPTION = "aggregate Spark stage vs per-query groupBy(window) and set-based Spark SQL"
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "spark"
PANE = 60  # seconds: every RANGE and SLIDE is whole minutes
VALUES = ("COUNT(*)", "SUM(H.vib)", "AVG(H.vib)", "MIN(H.vib)", "MAX(H.vib)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mqo experiment spark_aggregation", description=DESCRIPTION)
    p.add_argument("--out", default=str(DEFAULT_OUT), help="output folder (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default: %(default)s)")
    p.add_argument("--queries", type=int, default=1000, help="aggregate queries (default: %(default)s)")
    p.add_argument("--tuples", type=int, default=1_000_000, help="tuples of H (default: %(default)s)")
    p.add_argument("--sample", type=int, default=10, help="per-query SQL queries timed (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=1, help="runs of the stage and set-based SQL, median kept")
    p.add_argument("--span", type=float, help="the stage's time span width (default: the stage's)")
    p.add_argument("--partitions", type=int, help="stage partitions (default: one per core)")
    p.add_argument("--no-panes", action="store_true", help="leave out the set-based SQL over copied minutes")
    p.add_argument("--master", default="local[*]", help="Spark master (default: %(default)s)")
    p.add_argument("--driver-memory", help="spark.driver.memory, e.g. 4g (default: Spark's)")
    p.add_argument("--quick", action="store_true", help="a small run (20 queries, 20,000 tuples, 3 timed)")
    p.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    return p


def make_frame(spark: Any, n: int, nq: int, seed: int) -> tuple[Any, list[dict[str, Any]]]:
    """The stream H as a DataFrame (ts, id and the declared columns) and the queries."""
    import numpy as np
    import pyarrow as pa

    data, queries = workload(n, nq, seed)
    table = pa.table({"ts": data["ts"], "id": np.arange(n, dtype=np.int64), **{k: data[k] for k in data if k != "ts"}})
    return spark.createDataFrame(table), queries


def texts(queries: list[dict[str, Any]], prefix: str) -> list[str]:
    """The queries as text named ``<prefix><number>`` (a fresh query set per run)."""
    return [query_text({**q, "name": f"{prefix}{i}"}) for i, q in enumerate(queries)]


def condition(q: dict[str, Any]) -> str:
    return str(q["filter"]).replace("H.", "")


# ------------------------------------------------------------------ engines


def write(df: Any, started: float) -> tuple[float, str]:
    """Seconds from ``started`` until ``df`` is written to Parquet, and the folder."""
    folder = tempfile.mkdtemp(prefix="mqo-spark-agg-")
    df.write.mode("overwrite").parquet(folder)
    return time.perf_counter() - started, folder


def run_stage(frame: Any, queries: list[dict[str, Any]], prefix: str, args: argparse.Namespace) -> tuple[float, str]:
    from pyspark.sql import functions as F

    from runtime.spark.aggregate import aggregate_batch

    started = time.perf_counter()
    rows = aggregate_batch({"H": frame}, texts(queries, prefix), schema=DDL, partitions=args.parts, span=args.span)
    # the query's number, the window, the group and the values as columns (from the text maps)
    out = rows.select(
        F.expr(f"CAST(substr(query, {len(prefix) + 1}) AS INT)").alias("qid"),
        "window_end",
        F.col("group")["patient"].cast("long").alias("patient"),
        *(F.col("values")[v].alias(v) for v in VALUES),
    )
    return write(out, started)


def per_query(frame: Any, q: dict[str, Any]) -> list[tuple[Any, ...]]:
    """One query as one Spark job: filter, ``groupBy(window(...))``, aggregates, collected."""
    from pyspark.sql import functions as F

    r, s = int(q["range"]), int(q["slide"])
    shifted = frame.where(condition(q)).withColumn(
        "t", F.expr("timestamp_micros(CAST(round(ts * 1000000) AS BIGINT) - 1)")
    )
    if r >= s:
        keys = [F.window("t", f"{r} seconds", f"{s} seconds", f"{(-r) % s} seconds").alias("w")]
    else:  # Spark's windows slide at most by their length: tumbling SLIDE windows, cut to their last RANGE
        shifted = shifted.withColumn("w", F.window("t", f"{s} seconds"))
        shifted = shifted.where(F.col("t") >= F.col("w.end") - F.expr(f"INTERVAL {r} SECONDS"))
        keys = [F.col("w")]
    if q["group"]:
        keys.append(F.col("patient"))
    got = shifted.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.col("vib").cast("decimal(18,2)")).alias("s"),
        F.min("vib").alias("lo"),
        F.max("vib").alias("hi"),
    )
    end = F.expr("unix_micros(w.end) / 1000000D").alias("window_end")
    patient = F.col("patient").cast("long") if q["group"] else F.lit(None).cast("long")
    return [tuple(r) for r in got.select(end, patient.alias("patient"), "n", "s", "lo", "hi").collect()]


def query_table(spark: Any, queries: list[dict[str, Any]], filters: list[str]) -> Any:
    rows = [
        (i, filters.index(q["filter"]), bool(q["group"]), int(q["range"]) // PANE, int(q["slide"]) // PANE)
        for i, q in enumerate(queries)
    ]
    return spark.createDataFrame(rows, "qid int, fid int, grouped boolean, per long, step long")


def minute_partials(frame: Any, filters: list[str]) -> Any:
    """(fid, grouped, patient, j, n, s, lo, hi): per filter, patient (or all, patient
    -1, so that it joins) and minute ``((j-1)*60, j*60]`` of the stream, in one pass over it."""
    from pyspark.sql import functions as F

    hits = F.filter(
        F.array(*(F.when(F.expr(f.replace("H.", "")), F.lit(k)) for k, f in enumerate(filters))),
        lambda x: x.isNotNull(),
    )
    rows = frame.select(
        F.explode(hits).alias("fid"),
        "patient",
        F.expr(f"CAST(ceil(ts / {PANE}) AS BIGINT)").alias("j"),
        F.col("vib").cast("decimal(18,2)").alias("v"),
        "vib",
    )
    grouped = rows.groupBy("fid", "patient", "j").agg(
        F.count(F.lit(1)).alias("n"), F.sum("v").alias("s"), F.min("vib").alias("lo"), F.max("vib").alias("hi")
    )
    grouped = grouped.select(
        "fid", F.lit(True).alias("grouped"), F.col("patient").cast("long"), "j", "n", "s", "lo", "hi"
    )
    total = grouped.groupBy("fid", "j").agg(
        F.sum("n").alias("n"), F.sum("s").alias("s"), F.min("lo").alias("lo"), F.max("hi").alias("hi")
    )
    total = total.select(
        "fid", F.lit(False).alias("grouped"), F.lit(-1).cast("long").alias("patient"), "j", "n", "s", "lo", "hi"
    )
    return grouped.unionByName(total)


def result_rows(df: Any) -> Any:
    """The set-based engines' rows in the stage's columns (values as numbers)."""
    from pyspark.sql import functions as F

    return df.select(
        "qid",
        F.col("window_end").cast("double").alias("window_end"),
        F.when(F.col("patient") >= 0, F.col("patient")).alias("patient"),
        F.col("n").alias(VALUES[0]),
        F.col("s").alias(VALUES[1]),
        (F.col("s").cast("double") / F.col("n")).alias(VALUES[2]),
        F.col("lo").alias(VALUES[3]),
        F.col("hi").alias(VALUES[4]),
    )


def multiples(low: str, high: str) -> Any:
    """The multiples of ``step`` from ``low`` to ``high`` (SQL expressions), divided by
    ``step``; none when there are none (a RANGE shorter than its SLIDE leaves gaps)."""
    from pyspark.sql import functions as F

    first = F.expr(f"CAST(ceil(({low}) / step) AS BIGINT)")
    last = F.expr(f"CAST(floor(({high}) / step) AS BIGINT)")
    return F.when(first <= last, F.sequence(first, last))


def run_panes(spark: Any, frame: Any, queries: list[dict[str, Any]], filters: list[str]) -> tuple[float, str]:
    """Set-based: minute partials joined to the broadcast query table, each minute
    copied to the windows ending at j .. j + RANGE - 1 minutes (multiples of SLIDE)."""
    from pyspark.sql import functions as F

    started = time.perf_counter()
    parts = minute_partials(frame, filters)
    joined = parts.join(F.broadcast(query_table(spark, queries, filters)), ["fid", "grouped"])
    ends = joined.select(
        "qid", "patient", "step", F.explode(multiples("j", "j + per - 1")).alias("k"), "n", "s", "lo", "hi"
    )
    copies = ends.select(
        "qid", "patient", (F.col("k") * F.col("step") * PANE).alias("window_end"), "n", "s", "lo", "hi"
    )
    windows = copies.groupBy("qid", "window_end", "patient").agg(
        F.sum("n").alias("n"), F.sum("s").alias("s"), F.min("lo").alias("lo"), F.max("hi").alias("hi")
    )
    return write(result_rows(windows), started)


def run_prefix(spark: Any, frame: Any, queries: list[dict[str, Any]], filters: list[str]) -> tuple[float, str]:
    """Set-based, O(minutes + windows): running sums for COUNT and SUM, a sparse table
    of 2^L-minute minima and maxima for MIN and MAX, on a dense grid of minutes
    ``j0 - 1 .. j1`` per (filter, grouping, patient); one row per window end."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    started = time.perf_counter()
    parts = minute_partials(frame, filters).cache()
    keys = ["fid", "grouped", "patient"]
    bounds = parts.groupBy(*keys).agg(F.min("j").alias("j0"), F.max("j").alias("j1"))
    grid = bounds.select(*keys, "j0", "j1", F.explode(F.sequence(F.col("j0") - 1, F.col("j1"))).alias("j"))
    dense = grid.join(parts, [*keys, "j"], "left").fillna(0, ["n"])
    dense = dense.withColumn("s", F.coalesce("s", F.lit(0).cast("decimal(28,2)")))
    running = Window.partitionBy(*keys).orderBy("j").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    prefix = dense.select(*keys, "j", F.sum("n").over(running).alias("cn"), F.sum("s").over(running).alias("cs"))
    # level L: minima and maxima of the 2^L minutes from j on (L up to log2 of the longest RANGE)
    levels = int(math.log2(max(int(q["range"]) // PANE for q in queries))) + 1
    ahead = Window.partitionBy(*keys).orderBy("j")
    blocks = dense.select(
        *keys,
        "j",
        *(F.min("lo").over(ahead.rowsBetween(0, 2**level - 1)).alias(f"mn{level}") for level in range(levels)),
        *(F.max("hi").over(ahead.rowsBetween(0, 2**level - 1)).alias(f"mx{level}") for level in range(levels)),
    )
    sparse = blocks.select(
        *keys,
        "j",
        F.explode(
            F.array(
                *(
                    F.struct(F.lit(k).alias("level"), F.col(f"mn{k}").alias("mn"), F.col(f"mx{k}").alias("mx"))
                    for k in range(levels)
                )
            )
        ).alias("t"),
    ).select(*keys, "j", "t.level", "t.mn", "t.mx")
    table = query_table(spark, queries, filters)
    # every window end of every query and group reaching the data: E = k * step
    windows = (
        bounds.join(F.broadcast(table), ["fid", "grouped"])
        .select("qid", *keys, "j0", "j1", "per", "step", F.explode(multiples("j0", "j1 + per - 1")).alias("k"))
        .withColumn("e", F.col("k") * F.col("step"))
        .withColumn("hi_j", F.least("e", "j1"))
        .withColumn("lo_j", F.greatest(F.col("e") - F.col("per") + 1, F.col("j0")))
        .withColumn("old_j", F.greatest(F.col("e") - F.col("per"), F.col("j0") - 1))
        .where("lo_j <= hi_j")
        .withColumn("level", F.floor(F.log2(F.col("hi_j") - F.col("lo_j") + 1)).cast("int"))
    )
    p = prefix.alias("p")
    counted = (
        windows.join(F.broadcast(p.select(*keys, F.col("j").alias("hi_j"), "cn", "cs")), [*keys, "hi_j"])
        .join(
            F.broadcast(p.select(*keys, F.col("j").alias("old_j"), F.col("cn").alias("cn0"), F.col("cs").alias("cs0"))),
            [*keys, "old_j"],
        )
        .withColumn("n", F.col("cn") - F.col("cn0"))
        .withColumn("s", F.col("cs") - F.col("cs0"))
        .where("n > 0")
        .withColumn("lo_b", F.expr("hi_j - shiftleft(1L, level) + 1"))
    )
    a = sparse.select(*keys, F.col("j").alias("lo_j"), "level", F.col("mn").alias("mn_a"), F.col("mx").alias("mx_a"))
    b = sparse.select(*keys, F.col("j").alias("lo_b"), "level", F.col("mn").alias("mn_b"), F.col("mx").alias("mx_b"))
    full = (
        counted.join(a, [*keys, "lo_j", "level"])
        .join(b, [*keys, "lo_b", "level"])
        .select(
            "qid",
            (F.col("e") * PANE).alias("window_end"),
            "patient",
            "n",
            "s",
            F.least("mn_a", "mn_b").alias("lo"),
            F.greatest("mx_a", "mx_b").alias("hi"),
        )
    )
    seconds, folder = write(result_rows(full), started)
    parts.unpersist()
    return seconds, folder


# ------------------------------------------------------------------ checks


def stage_partitioning(frame: Any, queries: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """The stage's partitioning of the stream, measured: its mode, rows shipped per
    tuple (replication) and the largest / mean rows per partition (skew)."""
    from pyspark.sql import functions as F

    import mqo
    from runtime.spark.aggregate import partitioned, stream_plans
    from runtime.spark.common import unify
    from runtime.spark.spec import build_spec

    m = mqo.Matcher(DDL)
    m.register_queries(texts(queries, "p"))
    (plan,) = stream_plans(m, {"H": frame}, args.span)
    spec = build_spec(mqo.Matcher(DDL), partition_by="time")
    shipped = partitioned(unify({"H": frame}, spec), plan, spec, args.parts)
    per = [r["count"] for r in shipped.groupBy(F.spark_partition_id().alias("p")).count().collect()]
    mean = sum(per) / args.parts
    return {
        "mode": plan.mode,
        "span_s": plan.span,
        "replication": round(sum(per) / frame.count(), 3),
        "skew": round(max(per) / mean, 2) if mean else 1.0,
    }


def counts(spark: Any, folder: str) -> Counter[int]:
    return Counter(
        {int(r["qid"]): int(r["count"]) for r in spark.read.parquet(folder).groupBy("qid").count().collect()}
    )


def keyed(rows: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """(qid, window_end, patient) -> (count, sum, avg, min, max) as exact numbers."""
    from decimal import Decimal

    out = {}
    for qid, end, patient, n, s, avg, lo, hi in rows:
        key = (int(qid), round(float(end), 6), None if patient is None else int(patient))
        out[key] = (int(n), Decimal(str(s)), float(avg), float(lo), float(hi))
    return out


def sample_rows(spark: Any, folder: str, qids: list[int]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    df = spark.read.parquet(folder).where(f"qid IN ({','.join(map(str, qids))})")
    return keyed([tuple(r) for r in df.collect()])


def same(name: str, got: dict[tuple[Any, ...], tuple[Any, ...]], want: dict[tuple[Any, ...], tuple[Any, ...]]) -> None:
    if set(got) != set(want):
        diff = sorted(set(got) ^ set(want), key=str)[:3]
        raise SystemExit(f"{name}: other windows than the stage's, e.g. {diff}")
    for key, (n, s, avg, lo, hi) in want.items():
        gn, gs, gavg, glo, ghi = got[key]
        close = math.isclose(float(gs), float(s), rel_tol=1e-9) and math.isclose(gavg, avg, rel_tol=1e-9)
        if (gn, glo, ghi) != (n, lo, hi) or not close:
            raise SystemExit(f"{name}: window {key} holds {got[key]}, the stage {want[key]}")


def check_counts(name: str, got: Counter[int], want: Counter[int]) -> None:
    bad = [q for q in sorted(set(got) | set(want)) if got.get(q, 0) != want.get(q, 0)]
    if bad:
        q = bad[0]
        raise SystemExit(
            f"{name}: rows per query differ from the stage's for {len(bad)} queries, e.g. {q}: {got[q]} vs {want[q]}"
        )


# -------------------------------------------------------------------- main


def session(master: str, driver_memory: str | None) -> tuple[Any, bool]:
    """A quiet Spark session (or the running one, not ours to stop) and whether we own it."""
    import os

    from runtime.spark.cli import spark_session

    conf = {
        "spark.app.name": "mqo experiment spark_aggregation",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": str(2 * (os.cpu_count() or 1)),
    }
    if driver_memory:
        conf["spark.driver.memory"] = driver_memory
    return spark_session(master, conf)


def note(args: argparse.Namespace, text: str) -> None:
    if not args.no_progress:
        print(f"[spark_aggregation] {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    from experiments.aggregation import FILTERS

    args = build_parser().parse_args(argv)
    if args.quick:
        args.queries, args.tuples, args.sample = 20, 20_000, 3
    if min(args.queries, args.tuples, args.sample, args.repeats) < 1:
        raise SystemExit("--queries, --tuples, --sample and --repeats must be positive")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run_started = time.perf_counter()
    spark, owned = session(args.master, args.driver_memory)
    cores = spark.sparkContext.defaultParallelism
    args.parts = args.partitions or cores
    frame, queries = make_frame(spark, args.tuples, args.queries, args.seed)
    frame = frame.cache()
    frame.count()
    startup_s = time.perf_counter() - run_started
    filters = [f for f in FILTERS if any(q["filter"] == f for q in queries)]
    folders: list[str] = []
    try:
        note(args, "warm-up on a tenth of the tuples")
        head = frame.where(f"id < {max(1, args.tuples // 10)}")
        warm = queries[: min(50, len(queries))]
        folders += [run_stage(head, warm, "w", args)[1], run_prefix(spark, head, warm, filters)[1]]
        if not args.no_panes:
            folders.append(run_panes(spark, head, warm, filters)[1])
        per_query(head, warm[0])
        warmup_s = time.perf_counter() - run_started - startup_s

        times: dict[str, list[float]] = {"stage": [], "prefix": [], "panes": []}
        found: dict[str, str] = {}
        for rep in range(args.repeats):
            note(args, f"run {rep + 1}: stage, set-based SQL")
            engines = [("stage", lambda rep=rep: run_stage(frame, queries, f"r{rep}q", args))]
            engines.append(("prefix", lambda: run_prefix(spark, frame, queries, filters)))
            if not args.no_panes:
                engines.append(("panes", lambda: run_panes(spark, frame, queries, filters)))
            for name, run in engines:
                seconds, folder = run()
                times[name].append(seconds)
                folders.append(folder)
                found[name] = folder
                note(args, f"{name}: {seconds:.1f} s")
        rnd = random.Random(args.seed)
        timed = sorted(rnd.sample(range(len(queries)), min(args.sample, len(queries))))
        note(args, f"per-query SQL: {len(timed)} queries timed")
        started = time.perf_counter()
        single = {i: per_query(frame, queries[i]) for i in timed}
        per_query_s = time.perf_counter() - started

        note(args, "checks (untimed): rows per query, values of the timed queries")
        want = counts(spark, found["stage"])
        for name in found:
            if name != "stage":
                check_counts(f"set-based SQL ({name})", counts(spark, found[name]), want)
        check_counts(
            "per-query SQL", Counter({i: len(rows) for i, rows in single.items()}), Counter({i: want[i] for i in timed})
        )
        stage_values = sample_rows(spark, found["stage"], timed)
        for name in found:
            if name != "stage":
                same(f"set-based SQL ({name})", sample_rows(spark, found[name], timed), stage_values)
        flat = [(i, e, p, n, s, s / n, lo, hi) for i, rows in single.items() for e, p, n, s, lo, hi in rows]
        same("per-query SQL", keyed(flat), stage_values)
        layout = stage_partitioning(frame, queries, args)
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    if owned:
        spark.stop()

    median = {name: sorted(t)[len(t) // 2] for name, t in times.items() if t}
    stage_s = median["stage"]
    extrapolated = per_query_s * len(queries) / len(timed)
    row = {
        "queries": len(queries),
        "tuples": args.tuples,
        "result_rows": sum(want.values()),
        "stage_s": round(stage_s, 2),
        "stage_runs_s": " ".join(f"{t:.2f}" for t in times["stage"]),
        "set_prefix_s": round(median["prefix"], 2),
        "set_panes_s": round(median["panes"], 2) if "panes" in median else "",
        "per_query_s": round(extrapolated, 1),
        "per_query_timed": len(timed),
        "per_query_timed_s": round(per_query_s, 2),
        "stage_vs_per_query": round(extrapolated / stage_s, 1),
        "stage_vs_set_prefix": round(median["prefix"] / stage_s, 2),
        "stage_vs_set_panes": round(median["panes"] / stage_s, 2) if "panes" in median else "",
        **{f"stage_{k}": v for k, v in layout.items()},
    }
    note(args, str(row))
    report(out, row, args, cores, startup_s, warmup_s, time.perf_counter() - run_started)
    print(out)
    return 0


def report(
    out: Path, row: dict[str, Any], args: argparse.Namespace, cores: int, startup: float, warmup: float, total: float
) -> None:
    with open(out / "spark_aggregation.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        w.writeheader()
        w.writerow(row)
    panes = row["set_panes_s"] != ""
    best = min(row["set_prefix_s"], row["set_panes_s"]) if panes else row["set_prefix_s"]

    def verdict(ratio: float, target: float) -> str:
        return f"{ratio:,.2f}x (target >= {target:g}x: {'met' if ratio >= target else 'NOT met'})"

    lines = [
        "# Aggregate Spark stage vs per-query and set-based Spark SQL",
        "",
        f"Machine: {cores} cores shared with other work, Spark `{args.master}`, stage partitions {args.parts}. "
        f"Workload: the aggregation benchmark's, {row['tuples']:,} tuples of H (10 a second), "
        f"{row['queries']:,} queries (RANGE 5 min - 6 h, SLIDE 1 - 15 min, 10 filters, half grouped by "
        f"patient; COUNT SUM AVG MIN MAX), seed {args.seed}.",
        "",
        "| queries | tuples | result rows | Spark stage (s) | set-based SQL, prefix sums (s) | set-based SQL, "
        "copied minutes (s) | per-query SQL (s) | per-query / stage | set-based (best) / stage |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {row['queries']:,} | {row['tuples']:,} | {row['result_rows']:,} | {row['stage_s']:.2f} | "
        f"{row['set_prefix_s']:.2f} | {row['set_panes_s'] if panes else '-'} | {row['per_query_s']:,.1f} "
        f"(timed {row['per_query_timed']}, extrapolated) | {row['stage_vs_per_query']:,.1f}x | "
        f"{best / row['stage_s']:.2f}x |",
        "",
        f"Stage vs per-query SQL: {verdict(row['stage_vs_per_query'], 100)}; vs the best set-based SQL: "
        f"{verdict(best / row['stage_s'], 2)}.",
        "",
        f"Stage partitioning (measured): mode `{row['stage_mode']}`, span {row['stage_span_s']:,.0f} s, "
        f"replication {row['stage_replication']:.3f} rows per tuple, partition skew (largest / mean rows) "
        f"{row['stage_skew']:.2f}.",
        "",
        "Every engine writes the same rows per query (all queries), and the timed per-query queries' rows "
        "hold the same windows, groups and values in all engines (COUNT, MIN, MAX exactly; SUM and AVG to "
        "1e-9, relative: the stage sums the FLOAT column in doubles, the SQL in DECIMAL). "
        f"Times are wall-clock seconds in one run, after a warm-up on a tenth of the data; stage and set-based "
        f"SQL: median of {args.repeats} run(s) (stage runs: {row['stage_runs_s']} s), each from the cached "
        "DataFrame to its rows written to Parquet, the stage's on a freshly named query set (plan compiled "
        "on the driver and every worker in the time). The per-query SQL jobs only collect their rows (no "
        f"write, which favours them): {row['per_query_timed']} random queries timed "
        f"({row['per_query_timed_s']:.1f} s), the total extrapolated to all queries.",
        "",
        f"Not in the engines' times: session start-up with the data made and cached, {startup:.1f} s (the "
        f"same for every engine), and the warm-up, {warmup:.1f} s; the whole run took {total:.0f} s.",
        "",
    ]
    (out / "spark_aggregation.md").write_text("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
