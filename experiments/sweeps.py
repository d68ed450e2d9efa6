"""Past the thesis (its §6.1.4: "evaluate the maximum number of input streams and
queries it can handle"): how throughput, comparisons and memory scale.

Five sweeps, each varying one thing of a generated workload (:mod:`experiments._queries`
over :mod:`experiments._data` streams) and holding the rest:

* ``queries``: number of registered queries, 10 to 100,000;
* ``streams``: streams each query joins (and the operator holds), 2 to 6;
* ``predicates``: predicates per query;
* ``overlap``: share of predicates that fall in a list shared with other queries,
  0 to 1 (with the unshared baseline: one matcher per query);
* ``window``: MAXWINDOW, which sets how many tuples are stored and joined.

Every point runs in a forked child process, so its memory (peak resident set growth
over the run, from ``/proc/self/status`` after resetting the peak: the matcher with its
queries and stored tuples, plus the point's generated query texts and data; results are
counted, not kept) is its own and a point that runs over the time budget can be
stopped. A sweep stops early when its next point is predicted (from how time grew
between the last two points) or found to exceed the budget, and says so. Throughput
counts only matching (tuples pushed per second), not registration, which is reported
separately.
"""

from __future__ import annotations

import argparse
import gc
import math
import multiprocessing as mp
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from experiments import _common as C
from experiments._data import ICU, StreamSpec, generate, generic_streams
from experiments._queries import QueryShape, make_queries
from mqo import Matcher

DESCRIPTION = (
    "past the thesis (§6.1.4): throughput, comparisons, memory against queries, streams, predicates, overlap, window"
)


@dataclass(frozen=True)
class Config:
    """One workload: streams, query shape, how many queries, how much data."""

    queries: int = 100
    streams: int = 4  # 4 = the ICU streams B, T, H, K; otherwise generic S1..Sn
    arity: int = 2
    attributes: int = 2
    joins: int = 1
    window: float = 10.0
    overlap: float = 1.0
    join_selectivity: float = 0.1
    attr_selectivity: tuple[float, float] = (0.2, 0.8)
    rate: float = 2.0
    n_per_stream: int = 200
    unshared: bool = False
    window_predicate: bool = True
    generic: bool = False  # generic streams S1..Sn even where ICU streams would do

    def stream_specs(self) -> list[StreamSpec]:
        """The ICU streams (B, H for 2; B, T, H, K for 4), else (or if ``generic``) S1..Sn."""
        if self.generic:
            return generic_streams(self.streams, ("a", "b"))
        if self.streams == 2:
            return [ICU["B"], ICU["H"]]
        if self.streams == 4:
            return [ICU[s] for s in ("B", "T", "H", "K")]
        return generic_streams(self.streams, ("a", "b"))

    def shape(self) -> QueryShape:
        return QueryShape(
            arity=self.arity,
            attributes=self.attributes,
            joins=self.joins,
            window=self.window,
            overlap=self.overlap,
            attr_selectivity=self.attr_selectivity,
            join_selectivity=self.join_selectivity,
            window_predicate=self.window_predicate,
        )


@dataclass(frozen=True)
class Sweep:
    name: str
    param: str  # the Config field it varies
    label: str
    values: tuple[float, ...]
    base: Config
    log_x: bool = False
    repeats: int = 1  # seeds per point, averaged: random query sets differ from seed to seed

    def config(self, value: float) -> Config:
        if self.param == "streams":
            return replace(self.base, streams=int(value), arity=int(value), joins=int(value) - 1)
        if self.param == "predicates":
            # Half attribute, half join (at least one join to connect). Each predicate is
            # made less selective as their number grows, so a query keeps about the same
            # combined selectivity (ATTR_TOTAL, JOIN_TOTAL if independent): the sweep
            # measures the cost of more predicates, not of fewer results.
            n = int(value)
            joins = max(1, n // 2)
            attrs = n - joins
            s_a = ATTR_TOTAL ** (1 / attrs) if attrs else 1.0
            return replace(
                self.base,
                attributes=attrs,
                joins=joins,
                attr_selectivity=(0.9 * s_a, min(1.0, 1.1 * s_a)),
                join_selectivity=JOIN_TOTAL ** (1 / joins),
            )
        field = {"queries": int, "overlap": float, "window": float}[self.param]
        return replace(self.base, **{self.param: field(value)})


ATTR_TOTAL = 0.3
JOIN_TOTAL = 0.1

# A workload where results do not swamp the measurement at 100,000 queries: narrow
# attribute ranges and selective joins.
SELECTIVE = Config(attributes=2, joins=1, attr_selectivity=(0.05, 0.2), join_selectivity=0.05)


def sweeps(size: str) -> dict[str, Sweep]:
    quick = size == "quick"
    n = {"quick": 40, "default": 200, "large": 1000}[size]
    qs = (10, 100) if quick else (10, 30, 100, 300, 1000, 3000, 10_000, 30_000, 100_000)
    return {
        "queries": Sweep("queries", "queries", "registered queries", qs, replace(SELECTIVE, n_per_stream=n // 2), True),
        "streams": Sweep(
            "streams",
            "streams",
            "streams joined by each query",
            (2, 3) if quick else (2, 3, 4, 5, 6),
            Config(queries=20, attributes=2, window=5.0, join_selectivity=0.1, n_per_stream=n, generic=True),
            repeats=1 if quick else 3,
        ),
        "predicates": Sweep(
            "predicates",
            "predicates",
            "predicates per query (half attribute, half join)",
            (1, 4) if quick else (1, 2, 4, 8, 16),
            Config(queries=100, streams=4, n_per_stream=n),
            True,
            repeats=1 if quick else 3,
        ),
        "overlap": Sweep(
            "overlap",
            "overlap",
            "share of predicates in shared lists (generator's target)",
            (0.0, 1.0) if quick else (0.0, 0.25, 0.5, 0.75, 1.0),
            Config(queries=20, streams=2, attributes=2, joins=2, n_per_stream=n, unshared=True, window_predicate=False),
            repeats=1 if quick else 3,
        ),
        "window": Sweep(
            "window",
            "window",
            "MAXWINDOW (s)",
            (2, 10) if quick else (1, 2, 5, 10, 20, 40),
            Config(queries=100, n_per_stream=n),
            True,
        ),
    }


SIZES = {"quick": "quick", "default": "default", "large": "large"}


# ----------------------------------------------------------------------- a point


def _memory_kib() -> tuple[int, int]:
    rss = hwm = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    return rss, hwm


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def count_results(matcher: Matcher, events: list[Any]) -> int:
    """Push every event and count the matches without keeping them, so the memory
    measured is the matcher's, not a result list's."""
    push = matcher.push
    n = 0
    for e in events:
        n += len(push(e.stream, e.ts, e.values, id=e.id))
    return n


def run_point(config: Config, seed: int) -> dict[str, Any]:
    """Register the queries, push the data, measure. Runs in a child process."""
    gc.collect()
    peak_ok = _reset_peak()
    base_rss, _ = _memory_kib()
    specs = config.stream_specs()
    used = specs[: max(config.streams, config.arity)]
    ddl = "\n".join(s.ddl() for s in used)
    texts = make_queries(config.queries, used, config.shape(), seed)
    events = generate(used, config.n_per_stream, config.rate, seed)
    t0 = time.perf_counter()
    m = Matcher(ddl)
    m.register_queries(texts)
    m.ensure_plan()  # compile now, so registration time includes it
    t1 = time.perf_counter()
    found = count_results(m, events)
    t2 = time.perf_counter()
    _, peak = _memory_kib()
    row: dict[str, Any] = {
        "queries": config.queries,
        "tuples": len(events),
        "register_s": t1 - t0,
        "match_s": t2 - t1,
        "throughput": len(events) / (t2 - t1) if t2 > t1 else float("nan"),
        **C.counters_row(m),
        "memory_mib": (peak - base_rss) / 1024 if peak_ok else float("nan"),
        **{k: v for k, v in C.overlap_stats(m).items() if k != "queries"},
    }
    row["comparisons_per_tuple"] = row["comparisons"] / max(len(events), 1)
    row["probes_per_tuple"] = row["index_probes"] / max(len(events), 1)
    if config.unshared:
        comparisons = probes = 0
        seconds = 0.0
        found_single = 0
        for text in texts:
            single = Matcher(ddl)
            single.register_query(text)
            s0 = time.perf_counter()
            found_single += count_results(single, events)
            seconds += time.perf_counter() - s0
            comparisons += single.counters.comparisons
            probes += single.counters.index_probes
        if found_single != found:
            raise AssertionError(f"unshared matchers found {found_single} results, the shared one {found}")
        row["unshared_comparisons"] = comparisons
        row["unshared_index_probes"] = probes
        row["unshared_probes_per_tuple"] = probes / max(len(events), 1)
        row["unshared_comparisons_per_tuple"] = comparisons / max(len(events), 1)
        row["unshared_throughput"] = len(events) / seconds if seconds else float("nan")
    return row


def _child(conn: Any, config: Config, seed: int) -> None:
    try:
        conn.send(("ok", run_point(config, seed)))
    except BaseException as err:  # reported in the parent, which owns the output
        conn.send(("error", f"{type(err).__name__}: {err}"))
    finally:
        conn.close()


def run_isolated(config: Config, seed: int, budget: float) -> tuple[str, Any, float]:
    """``run_point`` in a child process; ('timeout', None, s) past the budget.

    The child is forked from a fork server (a fresh interpreter), not from this
    process: a plain fork copies whatever this process runs beside the sweep (a test
    runner's I/O threads and pipes), which a child that is terminated midway can leave
    broken."""
    ctx = mp.get_context("forkserver")
    parent, child = ctx.Pipe(duplex=False)
    gc.collect()
    start = time.perf_counter()
    proc = ctx.Process(target=_child, args=(child, config, seed), daemon=True)
    proc.start()
    child.close()
    if parent.poll(budget):
        status, payload = parent.recv()
        proc.join()
        return status, payload, time.perf_counter() - start
    proc.terminate()
    proc.join()
    return "timeout", None, time.perf_counter() - start


def average(payloads: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean of each number over repeated runs of one point (seeds)."""
    if len(payloads) == 1:
        return payloads[0]
    out: dict[str, Any] = {}
    for key, value in payloads[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = float(np.mean([p[key] for p in payloads]))
        else:
            out[key] = value
    out["repeats"] = len(payloads)
    return out


def predict(done: list[tuple[float, float]], value: float) -> float | None:
    """Seconds the next point will take, from the growth between the last two points
    (as a power of the value, exponent clamped to 0.5..2.5); None before two points."""
    if len(done) < 2 or value <= 0:
        return None
    (v0, t0), (v1, t1) = done[-2], done[-1]
    if v0 <= 0 or v1 <= v0 or t0 <= 0:
        return None
    exponent = min(max(math.log(t1 / t0) / math.log(v1 / v0), 0.5), 2.5)
    return t1 * (value / v1) ** exponent


# ------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = C.parser("sweeps", __doc__.split("\n\n")[0], SIZES)
    p.add_argument(
        "--sweep",
        action="append",
        choices=["queries", "streams", "predicates", "overlap", "window"],
        help="run only this sweep (repeat for several; default: all)",
    )
    p.add_argument("--budget", type=float, help="seconds a point may take (default 40; 60 with --size large)")
    p.add_argument("--max-queries", type=int, help="largest number of queries to try in the queries sweep")
    args = p.parse_args(argv)
    size = C.size_of(args)
    budget = args.budget or {"quick": 60.0, "default": 40.0, "large": 600.0}[size]
    chosen = sweeps(size)
    if args.max_queries:
        s = chosen["queries"]
        chosen["queries"] = replace(s, values=tuple(v for v in s.values if v <= args.max_queries))
    names = args.sweep or list(chosen)
    out = C.Output("sweeps", args.out)
    rows: list[dict[str, Any]] = []
    notes: dict[str, str] = {}
    total = sum(len(chosen[n].values) for n in names)
    with C.Stopwatch() as whole, C.Progress(total, "sweeps", args.progress) as bar:
        for name in names:
            sweep = chosen[name]
            done: list[tuple[float, float]] = []  # (value, seconds) of the points run
            for i, value in enumerate(sweep.values):
                bar.note = f"{name} = {value:g}"
                predicted = predict(done, value)
                if predicted is not None and predicted > budget:
                    last_value, last_seconds = done[-1]
                    notes[name] = (
                        f"stopped before {sweep.label} = {value:g}: predicted {predicted:.0f} s "
                        f"(from {last_seconds:.1f} s at {last_value:g}) exceeds the {budget:g} s budget"
                    )
                    bar.update(len(sweep.values) - i)
                    break
                runs = []
                for r in range(sweep.repeats):
                    status, payload, seconds = run_isolated(sweep.config(value), args.seed + r, budget)
                    if status != "ok":
                        break
                    runs.append((payload, seconds))
                if status == "timeout":
                    notes[name] = f"stopped at {sweep.label} = {value:g}: it ran over the {budget:g} s budget"
                    bar.update(len(sweep.values) - i)
                    break
                if status == "error":
                    raise RuntimeError(f"sweep {name} at {value:g}: {payload}")
                payload = average([p for p, _ in runs])
                seconds = sum(t for _, t in runs) / len(runs)
                rows.append({"sweep": name, "value": value, "seconds": seconds, **payload})
                done.append((value, seconds))
                bar.update()
    columns = [
        "sweep", "value", "queries", "tuples", "results", "register_s", "match_s", "throughput", "comparisons",
        "comparisons_per_tuple", "bitset_ops", "index_probes", "probes_per_tuple", "intermediate", "memory_mib",
        "lists", "distinct_predicates", "predicate_occurrences", "overlap_measured", "sharing_ratio",
        "unshared_comparisons", "unshared_comparisons_per_tuple", "unshared_index_probes",
        "unshared_probes_per_tuple", "unshared_throughput", "seconds",
    ]  # fmt: skip
    out.csv("sweeps.csv", rows, columns)
    for name in names:
        mine = [r for r in rows if r["sweep"] == name]
        if mine:
            plot(out, chosen[name], mine, notes.get(name))
    write_summary(out, args, chosen, names, rows, notes, budget, whole.seconds)
    out.announce()
    return 0


def plot(out: C.Output, sweep: Sweep, rows: list[dict[str, Any]], note: str | None) -> Path:
    panels = [
        ("throughput", "tuples matched per second", "Throughput", "unshared_throughput"),
        ("comparisons_per_tuple", "comparisons per tuple", "Comparisons", "unshared_comparisons_per_tuple"),
        ("memory_mib", "peak memory growth (MiB)", "Memory", None),
    ]
    if sweep.param == "queries":
        panels.append(("register_s", "seconds", "Registration (parse, normalise, compile)", None))
    fig, axes = C.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.2))
    x = [r["value"] for r in rows]
    for k, (ax, (key, ylabel, title, other)) in enumerate(zip(axes, panels, strict=True)):
        ax.plot(x, [r[key] for r in rows], marker="o", color=C.PALETTE[k], label="shared (one matcher)")
        if other is not None and other in rows[0]:
            ax.plot(x, [r[other] for r in rows], marker="s", ls="--", color="grey", label="one matcher per query")
            ax.legend(loc="best")
        ax.set_xlabel(sweep.label)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        values = [r[key] for r in rows] + ([r[other] for r in rows] if other is not None and other in rows[0] else [])
        positive = [v for v in values if v and v > 0]
        log_y = bool(positive) and max(positive) / min(positive) > 10
        C.log_axes(ax, x=sweep.log_x, y=log_y)
        ax.set_xticks(x, [C.human(v) for v in x])  # exactly the swept values
        if not log_y:
            ax.set_ylim(bottom=0, top=max(values) * 1.15 if values else None)
    title = f"Sweep: {sweep.label}"
    if note:
        title += f"\n({note})"
    fig.suptitle(title, fontweight="bold", y=1.06 if note else 1.0)
    fig.tight_layout()
    return out.figure(f"sweep_{sweep.name}.png", fig)


def write_summary(
    out: C.Output,
    args: argparse.Namespace,
    chosen: dict[str, Sweep],
    names: list[str],
    rows: list[dict[str, Any]],
    notes: dict[str, str],
    budget: float,
    seconds: float,
) -> None:
    text = C.header("Sweeps past the thesis (§6.1.4)", args, seconds)
    text += (__doc__ or "").split("\n\n", 2)[2] + "\n"
    text += f"Time budget per point: {budget:g} s.\n\n"
    for name in names:
        sweep = chosen[name]
        base = sweep.base
        text += f"## {name}\n\n"
        text += (
            f"Varies {sweep.label}; otherwise {base.queries} queries of {base.arity} streams with "
            f"{base.attributes} attribute and {base.joins} join predicate(s) (attribute selectivity "
            f"{base.attr_selectivity[0]:g}-{base.attr_selectivity[1]:g}, join about {base.join_selectivity:g}), "
            f"MAXWINDOW {base.window:g} s, overlap target {base.overlap:g}, {base.n_per_stream} tuples per stream "
            f"at {base.rate:g}/s"
            + (
                f"; each point is the mean over {sweep.repeats} seeds (query sets and data)"
                if sweep.repeats > 1
                else ""
            )
            + ".\n\n"
        )
        if name in notes:
            text += f"**{notes[name]}.**\n\n"
        text += f"![{name}](sweep_{name}.png)\n\n"
        mine = [r for r in rows if r["sweep"] == name]
        cols = [
            "value",
            "queries",
            "results",
            "register_s",
            "throughput",
            "comparisons_per_tuple",
            "probes_per_tuple",
            "intermediate",
            "memory_mib",
            "lists",
            "overlap_measured",
        ]
        heads = [
            sweep.label,
            "queries",
            "results",
            "registration (s)",
            "tuples/s",
            "comparisons/tuple",
            "index probes/tuple",
            "intermediate",
            "memory (MiB)",
            "lists",
            "measured overlap",
        ]
        if base.unshared:
            cols += ["unshared_comparisons_per_tuple", "unshared_probes_per_tuple", "unshared_throughput"]
            heads += ["unshared comparisons/tuple", "unshared index probes/tuple", "unshared tuples/s"]
        text += C.markdown_table(mine, cols, heads) + "\n\n"
        if mine:
            text += observations(sweep, mine) + "\n\n"
    out.markdown("summary.md", text)


def observations(sweep: Sweep, rows: list[dict[str, Any]]) -> str:
    """What the numbers say, computed from them (so the text never goes stale)."""
    first, last = rows[0], rows[-1]
    label = sweep.label
    lines = [
        f"From {label} = {first['value']:g} to {last['value']:g}: throughput {C.fmt(first['throughput'])} -> "
        f"{C.fmt(last['throughput'])} tuples/s, comparisons per tuple {C.fmt(first['comparisons_per_tuple'])} -> "
        f"{C.fmt(last['comparisons_per_tuple'])}, memory {first['memory_mib']:.1f} -> {last['memory_mib']:.1f} MiB."
    ]
    if sweep.param == "queries":
        lines.append(
            f"Registering {last['queries']:,} queries took {last['register_s']:.1f} s "
            f"({1000 * last['register_s'] / last['queries']:.2f} ms per query); the workload's {last['lists']} "
            "predicate lists stay few while queries grow, so per-tuple work grows with the users of each list "
            "(bit sets over all queries) and with the results, not with the number of lists."
        )
    if sweep.param == "overlap" and "unshared_comparisons" in first:
        fewer = [r["value"] for r in rows if r["comparisons"] < r["unshared_comparisons"]]
        faster = [r["value"] for r in rows if r["throughput"] > r["unshared_throughput"]]
        lines.append(
            "Shared did fewer comparisons than one matcher per query at overlap "
            + (", ".join(f"{v:g}" for v in fewer) if fewer else "none of the levels")
            + "; it was faster (wall clock) at "
            + (", ".join(f"{v:g}" for v in faster) if faster else "none")
            + ". Comparisons do not count what index probes cost: the single-query matchers probe their value "
            "indexes with their own, selective bounds (see the index probes column), while the shared matcher "
            "probes once per list with the most covering bound of all its queries and then decides each "
            "retrieved pair against every list of the surviving candidates."
        )
    return " ".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
