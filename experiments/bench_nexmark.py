"""NEXMark, the multi-query workload: 1,000 parameterized variants of Q2, Q3, Q5 and Q7
registered at once in ``mqo match``, against DuckDB one statement per query and the
set-based statements an expert writes (issue #31, "NEXMark in mqo").

    python -m experiments.bench_nexmark [--events 200000] [--queries 1000] [--seed 1]
           [--sample 25] [--spark | --no-spark] [--out experiments/results/bench]
           [--profile-only]

The data is :mod:`experiments.nexmark`'s (CSV, 1,000 events per second of event time,
out of order by up to half a second, ``--allowed-lateness 0.5``). The queries, a quarter
of each family (what mqo can express today; see :data:`NOT_EXPRESSED`):

* **Q2** selection: the bids on a set of 3 to 8 auctions (``B.auction = a OR ...``);
* **Q3** local item suggestion: persons of 1 to 3 states joined with their auctions of
  one category, within a MAXWINDOW of 5 to 60 s;
* **Q5** hot items, whole: per window ``[RANGE r SLIDE s]`` (r 2 to 30 s) the auctions
  with the most bids, when they have at least n: a match query over two aggregate views
  (bids per auction per window, and their maximum per window end), the views shared by
  every variant with that window;
* **Q7** highest bid, whole: the bids whose price is the highest of their window
  ``[RANGE r SLIDE s]``, of one channel or of all: a join of the bids with an aggregate
  view of the maximum per channel (or of a view of the maximum over the channels, an
  aggregate over it), shared by the variants with that window.

Three processes, each reading the same CSV files and writing its results as JSON:
``mqo match`` with every query; DuckDB with one ``INSERT ... SELECT`` per query (a random
``--sample`` of each family timed and scaled by the family's size, 0: every one); DuckDB
with one statement per family, the variants' constants in a parameter table the
statement joins (Q2: ``bid JOIN params ON auction``; Q3: the person-auction pairs within
the largest window, joined with the parameters; Q5 and Q7: the bids counted (maxed) per
one-second slice first, every distinct window folded from the slices, then joined with
the parameters, and Q5's maximum per window or Q7's bids at the maximum found from
those). The three results must be the same rows, else the run stops. Wall time
and peak resident memory (``wait4``) are of whole processes. The same comparison runs
without Q5 (mqo and set-based DuckDB in processes of their own). Where mqo's time goes
comes from a tenth of the events: each family alone, and cProfile over every query
(after an untimed run that fills numba's kernel cache, which the timed run then loads).

With ``--spark`` (the default when pyspark is installed) the same SQL in Spark SQL
(:mod:`experiments.nexmark_sql`): one job per query on the same sample, scaled family by
family, and one set-based job per family, each side a process of its own on a local
session using every core; their rows are checked against mqo's as well.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from experiments import nexmark
from experiments._common import RESULTS, compile_bytecode, markdown_table, row, speed_up
from experiments.bench_pubsub import progress
from experiments.bench_sql import RUNNER_SCRIPT
from experiments.nexmark_sql import (
    SPARK_RUNNER,
    duckdb_per_query,
    duckdb_set_based,
    spark_per_query,
    spark_set_based,
    write_plan,
)
from experiments.result_sets import check_equal

ROOT = Path(__file__).resolve().parent.parent
RATE = 1000.0  # events per second of event time: 200,000 events are 200 s
OUT_OF_ORDER = 0.5
FAMILIES = ("q2", "q3", "q5", "q7")
STATES = nexmark.US_STATES
CATEGORIES = [nexmark.FIRST_CATEGORY + k for k in range(nexmark.CATEGORIES)]
Q3_WINDOWS = (5, 10, 20, 30, 60)  # seconds
# (range, slide) seconds; their greatest common divisor, 1 s, is the slice of the set-based SQL
AGG_WINDOWS = ((2, 1), (4, 2), (5, 5), (10, 2), (10, 5), (10, 10), (20, 5), (30, 10), (30, 15))
CHANNELS = nexmark.CHANNELS
NOT_EXPRESSED = "Q3 joins within a MAXWINDOW (no tables), Q2 lists auctions (no modulo: Beam's auction % 123 = 0)"


@dataclass
class Variant:
    qid: str
    family: str
    auctions: list[int] = field(default_factory=list)  # q2
    states: list[str] = field(default_factory=list)  # q3
    category: int = 0  # q3
    window: int = 0  # q3, seconds
    range_s: int = 0  # q5, q7
    slide_s: int = 0  # q5, q7
    threshold: int = 0  # q5
    channel: str = ""  # q7; "" is every channel

    def mqo(self) -> str:
        head = f"Query ID: {self.qid}\n"
        if self.family == "q2":
            where = " OR ".join(f"B.auction = {a}" for a in self.auctions)
            return head + f"SELECT B.auction, B.price FROM Bid B WHERE {where};"
        if self.family == "q3":
            states = " OR ".join(f"P.state = '{s}'" for s in self.states)
            return head + (
                f"SELECT P.name, P.city, P.state, A.item_name FROM Auction A, Person P MAXWINDOW {self.window} sec "
                f"WHERE A.seller = P.id AND ({states}) AND A.category = {self.category};"
            )
        if self.family == "q5":
            counts, most = self.views()
            return head + (
                f"SELECT c.auction, c.bids FROM {counts[0]} c, {most[0]} m WINDOW c.ts = m.ts MAXWINDOW 0 sec "
                f"WHERE c.bids = m.most AND c.bids >= {self.threshold};"
            )
        highest = self.views()[-1][0]
        where = f" AND B.channel = '{self.channel}' AND h.channel = '{self.channel}'" if self.channel else ""
        return head + (
            f"SELECT B.auction, B.bidder, B.price FROM Bid B, {highest} h "
            f"WINDOW B.ts <= h.ts AND B.ts > h.ts - {self.range_s} MAXWINDOW {self.range_s} sec "
            f"WHERE B.price = h.price{where};"
        )

    def views(self) -> list[tuple[str, str]]:
        """The aggregate views (name, CREATE VIEW) a Q5 or Q7 variant reads: one per
        window (and channel), whichever variants read it."""
        window = f"[RANGE {self.range_s} sec SLIDE {self.slide_s} sec]"
        if self.family == "q5":
            counts, most = f"q5_bids_{self.range_s}_{self.slide_s}", f"q5_most_{self.range_s}_{self.slide_s}"
            return [
                (counts, f"CREATE VIEW {counts} AS SELECT B.auction AS auction, COUNT(*) AS bids "
                         f"FROM Bid B {window} GROUP BY B.auction;"),
                (most, f"CREATE VIEW {most} AS SELECT MAX(c.bids) AS most FROM {counts} c [RANGE {self.slide_s} sec];"),
            ]  # fmt: skip
        if self.family != "q7":
            return []
        # the highest price per channel, and over the channels (a plan holds 63 streams:
        # one view per window and channel would be 45)
        channels, highest = f"q7_channels_{self.range_s}_{self.slide_s}", f"q7_highest_{self.range_s}_{self.slide_s}"
        per_channel = (
            f"CREATE VIEW {channels} AS SELECT B.channel AS channel, MAX(B.price) AS price "
            f"FROM Bid B {window} GROUP BY B.channel;"
        )
        if self.channel:
            return [(channels, per_channel)]
        over = f"CREATE VIEW {highest} AS SELECT MAX(c.price) AS price FROM {channels} c [RANGE {self.slide_s} sec];"
        return [(channels, per_channel), (highest, over)]


def query_file(variants: Sequence[Variant]) -> str:
    """The views the variants read (each once), then the variants."""
    views = dict(view for v in variants for view in v.views())
    return "\n\n".join([*views.values(), *(v.mqo() for v in variants)]) + "\n"


def draw_variants(n_queries: int, events: int, rng: np.random.Generator) -> list[Variant]:
    """``n_queries`` variants, a quarter of each family (the rest to the first ones).
    Q2's auctions are drawn from those the data has; Q5's thresholds scale with the
    window's range (a bid rate of about 4 a second on an auction that is not hot)."""
    auctions = max(nexmark.last_auction(max(events - 1, 0)) + 1, 1)
    out: list[Variant] = []
    for k, family in enumerate(FAMILIES):
        for _ in range(n_queries // len(FAMILIES) + (k < n_queries % len(FAMILIES))):
            v = Variant(f"{family}_{len(out)}", family)
            if family == "q2":
                size = int(rng.integers(3, 9))
                v.auctions = sorted(nexmark.FIRST_ID + int(a) for a in rng.choice(auctions, min(size, auctions), False))
            elif family == "q3":
                v.states = sorted(str(s) for s in rng.choice(STATES, int(rng.integers(1, 4)), replace=False))
                v.category = int(rng.choice(CATEGORIES))
                v.window = int(rng.choice(Q3_WINDOWS))
            else:
                v.range_s, v.slide_s = AGG_WINDOWS[int(rng.integers(len(AGG_WINDOWS)))]
                if family == "q5":
                    v.threshold = int(rng.integers(4, 40)) * v.range_s
                else:
                    v.channel = str(rng.choice(["", *CHANNELS]))
            out.append(v)
    return out


def write_workload(folder: Path, variants: list[Variant], events: int, seed: int) -> None:
    """The data (CSV), the query file and the parameter tables."""
    nexmark.write(nexmark.generate(nexmark.Config(events, seed, RATE, OUT_OF_ORDER)), folder, ("csv",))
    (folder / "queries.mqo").write_text(query_file(variants))
    by = {f: [v for v in variants if v.family == f] for f in FAMILIES}
    tables = {
        "p_q2": ("qid,auction", [f"{v.qid},{a}" for v in by["q2"] for a in v.auctions]),
        "p_q3": ("qid,category,window_ms", [f"{v.qid},{v.category},{v.window * 1000}" for v in by["q3"]]),
        "p_q3_states": ("qid,state", [f"{v.qid},{s}" for v in by["q3"] for s in v.states]),
        "p_q5": ("qid,range_ms,slide_ms,threshold", [f"{v.qid},{v.range_s * 1000},{v.slide_s * 1000},{v.threshold}" for v in by["q5"]]),
        "p_q7": ("qid,range_ms,slide_ms,channel", [f"{v.qid},{v.range_s * 1000},{v.slide_s * 1000},{v.channel}" for v in by["q7"]]),
    }  # fmt: skip
    for name, (header, lines) in tables.items():
        (folder / f"{name}.csv").write_text("\n".join([header, *lines]) + "\n")


# ------------------------------------------------------------------------- SQL

VIEW_ALIASES = ("c", "m", "h")  # the aliases of the views in Q5's and Q7's variants


# ------------------------------------------------------------------- processes


def timed_process(args: list[str], cpu: list[float] | None = None) -> tuple[float, float, str]:
    """Wall seconds, peak resident MiB (the process's own, by ``wait4``) and stdout of
    ``args``; its CPU seconds (user and system) appended to ``cpu`` when given (on a
    shared machine, what the process itself cost)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        child = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)  # reaped here, for its own peak RSS
        seconds = time.perf_counter() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:4])} failed (exit {child.returncode}): {err.read()[-2000:]}")
        if cpu is not None:
            cpu.append(usage.ru_utime + usage.ru_stime)
        return seconds, usage.ru_maxrss / 1024, out.read()


def mqo_args(folder: Path) -> list[str]:
    inputs = [f"--input={s}={folder / f'{n}.csv'}" for s, n in nexmark.FILES.items()]
    return ["match", f"--schema={folder / 'nexmark.ddl'}", f"--queries={folder / 'queries.mqo'}", *inputs,
            f"--allowed-lateness={OUT_OF_ORDER}", f"--output={folder / 'mqo.jsonl'}", "-q"]  # fmt: skip


def run_duckdb(statements: list[tuple[str, str]], folder: Path, name: str) -> tuple[float, float, dict[str, float]]:
    (folder / f"{name}.json").write_text(json.dumps(statements))
    seconds, rss, stdout = timed_process([sys.executable, "-c", RUNNER_SCRIPT, str(folder / f"{name}.json")])
    return seconds, rss, json.loads(stdout.splitlines()[-1])


def run_spark(plan: dict[str, object], folder: Path, name: str) -> tuple[float, float, dict[str, float]]:
    """Wall seconds, peak MiB and seconds per label of a Spark process running ``plan``'s jobs."""
    path = write_plan(plan, folder / f"{name}.json")
    seconds, rss, stdout = timed_process([sys.executable, "-c", SPARK_RUNNER, str(path)])
    return seconds, rss, json.loads(stdout.splitlines()[-1])


def result_key(r: dict[str, Any]) -> tuple[Any, ...]:
    """A result as both sides write it: a match by its ids (not those of view rows,
    numbered by mqo), ts and values; an aggregate row by its window end (to the
    millisecond), group and values."""
    values = tuple(sorted((r.get("values") or {}).items()))
    if "ts" in r:
        ids = tuple(sorted((alias, i) for alias, i in (r.get("ids") or {}).items() if alias not in VIEW_ALIASES))
        return (r["query"], ids, round(r["ts"] * 1000), values)
    return (r["query"], round(r["window_end"] * 1000), tuple(sorted((r.get("group") or {}).items())), values)


def read_json_lines(folder: Path, pattern: str) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(folder.glob(pattern)) for line in path.read_text().splitlines()]


# ------------------------------------------------------------------ benchmark


def profile_mqo(folder: Path, variants: list[Variant]) -> str:
    """Where mqo's time goes, on a smaller copy of the workload in ``folder``: each
    family's queries alone (whole process), and the functions taking the most self
    time (cProfile) with every query. An untimed run with every query comes first: it
    fills numba's kernel cache (a fresh checkout compiles every kernel once), so neither
    the families' runs nor the timed run pay for compiling."""
    timed_process([sys.executable, "-m", "runtime.cli", *mqo_args(folder)])
    spent = []
    for family in FAMILIES:
        (folder / "queries.mqo").write_text(query_file([v for v in variants if v.family == family]))
        cpu: list[float] = []
        seconds, _, _ = timed_process([sys.executable, "-m", "runtime.cli", *mqo_args(folder)], cpu)
        spent.append(f"{family} {seconds:.1f} s ({cpu[0]:.2f} s CPU)")
    (folder / "queries.mqo").write_text(query_file(variants))
    prof = folder / "mqo.prof"
    timed_process([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "runtime.cli", *mqo_args(folder)])
    stats = pstats.Stats(str(prof))
    total = stats.total_tt  # type: ignore[attr-defined]
    top = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:5]  # type: ignore[attr-defined]
    functions = ", ".join(f"{Path(f).name}:{line}({name}) {tt / total:.0%}" for (f, line, name), (_, _, tt, *_) in top)
    return f"each family alone: {', '.join(spent)}; most self time over all queries (cProfile): {functions}"


def run_spark_side(
    d: Path, ours: list[dict[str, Any]], variants: list[Variant], timed: list[Variant], mqo_s: float
) -> list[dict[str, Any]]:
    """Spark SQL on the same files: one job per family (set-based) and one job per query
    (the DuckDB side's sample, scaled family by family); the rows of the table."""
    progress("nexmark: Spark SQL, one set-based job per family")
    set_s, _, set_spent = run_spark(spark_set_based(d, FAMILIES), d, "spark_set")
    check_equal(ours, read_json_lines(d, "spark_set_*/part-*.json"), result_key, "the set-based Spark SQL jobs")
    progress(f"nexmark: Spark SQL, one job per query ({len(timed)} of {len(variants)})")
    each_s, _, each_spent = run_spark(spark_per_query(timed, d), d, "spark_each")
    names = {v.qid for v in timed}
    check_equal((r for r in ours if r["query"] in names), read_json_lines(d, "spark_each_*/part-*.json"),
                result_key, "Spark SQL's per-query jobs")  # fmt: skip
    scaled = each_s
    for f in FAMILIES:
        scaled += each_spent.get(f, 0.0) * (
            sum(v.family == f for v in variants) / sum(v.family == f for v in timed) - 1
        )
    spent = lambda times: ", ".join(f"{k} {s:.1f}" for k, s in times.items())  # noqa: E731
    return [
        row("nexmark", "Spark SQL (local, every core), one job per query (whole process), seconds", scaled,
            note=f"in the process: {spent(each_spent)} s; {len(timed)} queries timed ({each_s:.1f} s), "
            "scaled family by family"),
        speed_up("nexmark", "speed-up mqo / per-query Spark SQL", scaled, mqo_s, 20),
        row("nexmark", "Spark SQL, one set-based job per family (whole process), seconds", set_s,
            note=f"the DuckDB statements in Spark SQL; in the process: {spent(set_spent)} s"),
        speed_up("nexmark", "speed-up mqo / set-based Spark SQL", set_s, mqo_s, 2),
    ]  # fmt: skip


def run(
    events: int, n_queries: int, seed: int, sample: int, spark: bool = False
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The rows of the table, and the results per family (checked equal on all three
    sides; per query, on the ``sample`` of each family timed, 0: all)."""
    rng = np.random.default_rng(seed)
    variants = draw_variants(n_queries, events, rng)
    small_events = max(events // 10, 100)
    with tempfile.TemporaryDirectory() as tmp:
        d, small = Path(tmp), Path(tmp) / "small"
        progress(f"nexmark: generating {events:,} events and {len(variants)} queries")
        write_workload(d, variants, events, seed)
        write_workload(small, variants, small_events, seed)
        progress(f"nexmark: where mqo's time goes, on {small_events:,} events")
        profile = profile_mqo(small, variants)
        progress("nexmark: mqo match")
        mqo_s, mqo_rss, _ = timed_process([sys.executable, "-m", "runtime.cli", *mqo_args(d)])
        ours = read_json_lines(d, "mqo.jsonl")
        progress("nexmark: DuckDB, one set-based statement per family")
        set_s, set_rss, set_spent = run_duckdb(duckdb_set_based(d, FAMILIES), d, "set")
        check_equal(ours, read_json_lines(d, "set_*.json"), result_key, "the set-based DuckDB statements")
        timed = variants
        if sample:
            chosen: set[str] = set()
            for f in FAMILIES:  # a random sample of each family
                of = [v.qid for v in variants if v.family == f]
                chosen.update(rng.choice(of, min(sample, len(of)), replace=False).tolist())
            timed = [v for v in variants if v.qid in chosen]
        progress(f"nexmark: DuckDB, one statement per query ({len(timed)} of {len(variants)})")
        each_s, each_rss, each_spent = run_duckdb(duckdb_per_query(timed, d), d, "each")
        names = {v.qid for v in timed}
        theirs = read_json_lines(d, "each_*.json")
        check_equal((r for r in ours if r["query"] in names), theirs, result_key, "DuckDB's per-query statements")
        progress("nexmark: without Q5, mqo match and set-based DuckDB")
        rest = [f for f in FAMILIES if f != "q5"]
        (d / "queries.mqo").write_text(query_file([v for v in variants if v.family in rest]))
        rest_mqo_s, _, _ = timed_process([sys.executable, "-m", "runtime.cli", *mqo_args(d)])
        check_equal(read_json_lines(d, "mqo.jsonl"), [r for r in ours if not r["query"].startswith("q5_")],
                    result_key, "mqo with every query")  # fmt: skip
        rest_set_s, _, _ = run_duckdb(duckdb_set_based(d, rest), d, "set_rest")
        spark_rows = run_spark_side(d, ours, variants, timed, mqo_s) if spark else []
    family_of = {v.qid: v.family for v in variants}
    per_family = {f: sum(family_of[r["query"]] == f for r in ours) for f in FAMILIES}
    n_of = {f: sum(v.family == f for v in variants) for f in FAMILIES}
    # scaled: each family's statements by its queries, the COPY by the results
    scaled = each_s + each_spent["copy"] * (len(ours) / max(len(theirs), 1) - 1)
    for f in FAMILIES:
        scaled += each_spent[f] * (n_of[f] / sum(v.family == f for v in timed) - 1)
    q5_scaled = each_spent["q5"] * n_of["q5"] / sum(v.family == "q5" for v in timed)
    # Q5's share: its statements, scaled, and the COPY of its rows, scaled
    rest_each_s = scaled - q5_scaled - each_spent["copy"] * per_family["q5"] / max(len(theirs), 1)
    counts = ", ".join(f"{f} {n_of[f]} queries / {per_family[f]:,} rows" for f in FAMILIES)
    what = f"{len(variants)} queries, {events:,} events"
    sampled = "" if timed is variants else f"; {len(timed)} queries timed ({each_s:.1f} s), scaled family by family"
    rows = [
        row("nexmark", "mqo match (whole process), seconds", mqo_s, note=f"{what}; {counts}"),
        row("nexmark", "DuckDB, one statement per query (whole process), seconds", scaled,
            note="in the process: " + ", ".join(f"{k} {s:.2f}" for k, s in each_spent.items()) + f" s{sampled}"),
        speed_up("nexmark", "speed-up mqo / per-query DuckDB", scaled, mqo_s, 20),
        row("nexmark", "DuckDB, one set-based statement per family (whole process), seconds", set_s,
            note="parameters in tables, aggregates folded from 1 s slices; "
            "in the process: " + ", ".join(f"{k} {s:.2f}" for k, s in set_spent.items()) + " s"),
        speed_up("nexmark", "speed-up mqo / set-based DuckDB", set_s, mqo_s, 2),
        row("nexmark", "without Q5 (Q2, Q3, Q7): mqo match (whole process), seconds", rest_mqo_s,
            note=f"{len(variants) - n_of['q5']} queries, the same rows as with Q5"),
        speed_up("nexmark", "without Q5: speed-up mqo / per-query DuckDB", rest_each_s, rest_mqo_s, 20,
                 note=f"per-query DuckDB {rest_each_s:.1f} s (the run above less Q5's share)"),
        speed_up("nexmark", "without Q5: speed-up mqo / set-based DuckDB", rest_set_s, rest_mqo_s, 2,
                 note=f"set-based DuckDB {rest_set_s:.2f} s (its own process)"),
        row("nexmark", "peak resident memory of mqo match, MiB", mqo_rss,
            note=f"per-query DuckDB {each_rss:.0f} MiB, set-based DuckDB {set_rss:.0f} MiB"),
        *spark_rows,
        row("nexmark", f"where mqo's time goes, on {small_events:,} events (profile)", float("nan"), note=profile),
    ]  # fmt: skip
    return rows, per_family


def write_markdown(path: Path, rows: list[dict[str, Any]], argv: Sequence[str]) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    for r in rows:
        r["met_text"] = "" if r["met"] is None else ("yes" if r["met"] else "**no**")
    table = markdown_table(
        rows, ["metric", "value", "target", "met_text", "note"], ["measurement", "value", "target", "met", "notes"]
    )
    path.write_text(
        "# NEXMark: query variants of Q2, Q3, Q5 and Q7 (mqo match against DuckDB and Spark SQL)\n\n"
        f"Run: `python -m experiments.bench_nexmark {' '.join(argv)}` at commit `{commit.stdout.strip()}` on "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()} ({date.today()}). "
        "Every ratio compares measurements taken in the same run; every side wrote the same rows.\n\n"
        f"{table}\n\nNot expressed: {NOT_EXPRESSED}.\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench_nexmark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000, help="NEXMark events (default 200,000)")
    parser.add_argument(
        "--queries", type=int, default=1000, help="query variants, a quarter per family (default 1,000)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--sample", type=int, default=25, help="per-query DuckDB: queries timed per family, scaled (0: all; default 25)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "bench", help="folder of nexmark.md")
    parser.add_argument(
        "--spark", action=argparse.BooleanOptionalAction, default=None,
        help="also Spark SQL, per query and set-based (default: when pyspark is installed)",
    )  # fmt: skip
    parser.add_argument(
        "--profile-only", action="store_true",
        help="only where mqo's time goes, on --events events: each family alone (wall and CPU seconds), "
        "and cProfile's top functions over every query; printed, no table written",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.events < 100 or args.queries < len(FAMILIES) or args.sample < 0:
        parser.error(f"--events must be >= 100, --queries >= {len(FAMILIES)} and --sample >= 0")
    compile_bytecode()  # as installed: no process compiles the project's modules on the clock
    if args.profile_only:
        with tempfile.TemporaryDirectory() as tmp:
            variants = draw_variants(args.queries, args.events, np.random.default_rng(args.seed))
            write_workload(Path(tmp), variants, args.events, args.seed)
            print(profile_mqo(Path(tmp), variants))
        return 0
    spark = args.spark if args.spark is not None else importlib.util.find_spec("pyspark") is not None
    rows, _ = run(args.events, args.queries, args.seed, args.sample, spark)
    args.out.mkdir(parents=True, exist_ok=True)
    write_markdown(args.out / "nexmark.md", rows, list(argv if argv is not None else sys.argv[1:]))
    print(args.out / "nexmark.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
