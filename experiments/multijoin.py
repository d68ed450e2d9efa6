"""Thesis §5.2.1, Figures 5.2-5.7: one multi-way join operator against cascades of
binary ones.

One four-way query over B, H, T and K runs as seven equivalent plans:

* **binary cascades** (Fig. 5.2): ``BH_TK``, ``BK_TH``, ``TB_HK`` - two binary
  operators over base streams, and a binary operator joining their outputs;
* **multi-join plans** (Fig. 5.3): ``BHT_K``, ``BKT_H``, ``BHK_T`` - a three-way
  operator and a binary one - and ``BHTK``, a single four-way operator.

Every operator is an mqo :class:`~mqo.Matcher` built with the public API. A lower
operator's results become the tuples of a **derived stream** (``BH`` with columns
``b_pressure, ..., b_ts, b_id, h_beatrate, ...``, ts = the result's ts) registered in
the operator above. Each predicate is placed in the lowest operator that has all its
streams (selections pushed down); the upper operator gets the rest, rewritten onto the
derived columns, plus the window bound across its inputs (``TK.ts <= BH.b_ts + W``: a
derived tuple carries only its latest ts, so MAXWINDOW alone would not bound its oldest
member). All seven plans must report exactly the same 4-tuples (asserted).

**The query is assumed.** The thesis gives neither the query nor the predicates of
§5.2.1 (Figures 5.2-5.7 are plan diagrams and charts). This experiment uses the
thesis' Figure 5.8 query over B, H, T - the only multi-stream query of its §5.2 - and
adds K with a window predicate like the others and one join predicate to each of B, H
and T, so that every binary operator of every plan has a predicate to work with. The
MAXWINDOW is 10 s rather than Figure 5.8's 20 s to keep the four-way join small.
"""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from experiments import _common as C
from experiments._data import ICU, Event, describe, generate
from mqo import ORDERS, Matcher

DESCRIPTION = "thesis §5.2.1 (Figs 5.2-5.7): binary cascades vs multi-join plans for a 4-way B,H,T,K query"

STREAMS = ("B", "H", "T", "K")
RATE = 2.0
WINDOW = 10.0
WINDOW_PREDICATES = ("B.ts <= T.ts", "H.ts <= T.ts", "K.ts <= T.ts")
WHERE_PREDICATES = (
    # Thesis Figure 5.8, verbatim but for the spelled-out operators:
    "B.pressure < 90",
    "H.beatrate > 115",
    "B.pressure <= H.vib",
    "B.ts <= H.ts",
    "T.fluct < 200",
    "B.temp <= T.degree",
    "H.vib <= T.fluct",
    # Assumed: K joined to T, B and H.
    "K.fluid <= T.incr",
    "B.pressure <= K.fluid",
    "K.fluid <= H.vib",
)
BINARY_PLANS = ("BH_TK", "BK_TH", "TB_HK")
MULTI_PLANS = ("BHT_K", "BKT_H", "BHK_T", "BHTK")
PLANS = BINARY_PLANS + MULTI_PLANS


@dataclass(frozen=True)
class Size:
    n_per_stream: int
    seeds: int


SIZES = {"quick": Size(40, 1), "default": Size(100, 3), "large": Size(200, 5)}


def query_text(
    name: str, streams: list[str], window: list[str], where: list[str], maxwindow: float, select: str = "*"
) -> str:
    parts = [f"Query ID: {name}", f"SELECT {select}", f"FROM {', '.join(streams)}"]
    if window:
        parts.append("WINDOW " + " AND ".join(window))
    parts.append(f"MAXWINDOW {maxwindow:g} sec")
    if where:
        parts.append("WHERE " + " AND ".join(where))
    return "\n".join(parts) + "\n"


def the_query() -> str:
    """The four-way query as one text (what the single BHTK operator registers)."""
    return query_text("BHTK", list(STREAMS), list(WINDOW_PREDICATES), list(WHERE_PREDICATES), WINDOW)


_REF = re.compile(r"\b([BHTK])\.(\w+)")


def streams_of(predicate: str) -> frozenset[str]:
    return frozenset(s for s, _ in _REF.findall(predicate))


# -------------------------------------------------------------------------- plans


@dataclass
class Operator:
    """One matcher of a plan: the streams it reads and what it outputs."""

    name: str
    inputs: list[str]  # stream names it reads (base or derived)
    members: list[str]  # base streams under it
    matcher: Matcher
    derived: bool  # its results feed the operator above
    seconds: float = 0.0


@dataclass
class Plan:
    name: str
    operators: list[Operator]
    root: Operator
    route: dict[str, Operator]  # base stream -> the operator that reads it
    passed: int = 0  # derived tuples handed from lower operators to the root
    found: list[tuple[int, ...]] = field(default_factory=list)
    curve: list[tuple[float, int]] = field(default_factory=list)


def _columns(stream: str) -> list[tuple[str, str]]:
    return [(c.name, c.ctype) for c in ICU[stream].columns] + [("ts", "FLOAT"), ("id", "INTEGER")]


def build_plan(name: str, order: str) -> Plan:
    """Matchers for a plan named like ``BH_TK`` (groups joined at the top) or ``BHTK``."""
    groups = name.split("_")
    where_all = list(WINDOW_PREDICATES) + list(WHERE_PREDICATES)
    placed: set[str] = set()
    operators: list[Operator] = []
    route: dict[str, Operator] = {}
    base_ddl = "\n".join(ICU[s].ddl() for s in STREAMS)
    for group in groups:
        members = list(group)
        if len(members) == 1:
            continue
        mine = [p for p in where_all if streams_of(p) <= set(members)]
        placed.update(mine)
        derived = len(groups) > 1
        select = ", ".join(f"{s}.{col} AS {s.lower()}_{col}" for s in members for col, _ in _columns(s))
        text = query_text(
            group,
            members,
            [p for p in mine if p in WINDOW_PREDICATES],
            [p for p in mine if p not in WINDOW_PREDICATES],
            WINDOW,
            select if derived else "*",
        )
        m = Matcher(base_ddl, order=order)
        m.register_query(text)
        op = Operator(group, members, members, m, derived)
        operators.append(op)
        for s in members:
            route[s] = op
    if len(groups) == 1:
        root = operators[0]
        return Plan(name, operators, root, route)
    # The root joins the groups: derived streams for operators, base streams otherwise.
    ddl_parts = []
    for group in groups:
        if len(group) == 1:
            ddl_parts.append(ICU[group].ddl())
        else:
            cols = ", ".join(f"{s.lower()}_{c} {t}" for s in group for c, t in _columns(s))
            ddl_parts.append(f"REGISTER STREAM {group} ({cols});")
    rest = [p for p in where_all if p not in placed]

    def rewrite(pred: str) -> str:
        def ref(match: re.Match[str]) -> str:
            s, col = match.group(1), match.group(2)
            group = next(g for g in groups if s in g)
            return match.group(0) if len(group) == 1 else f"{group}.{s.lower()}_{col}"

        return _REF.sub(ref, pred)

    cross = []
    for i, g1 in enumerate(groups):
        for g2 in groups[i + 1 :]:
            for a, b in ((g1, g2), (g2, g1)):
                if len(a) > 1:  # b's latest ts within WINDOW of a's oldest member
                    cross.extend(f"{b}.ts <= {a}.{s.lower()}_ts + {WINDOW:g}" for s in a)
    root_matcher = Matcher("\n".join(ddl_parts), order=order)
    root_matcher.register_query(query_text(name, groups, [], [rewrite(p) for p in rest] + cross, WINDOW))
    root = Operator(name, groups, list(STREAMS), root_matcher, False)
    operators.append(root)
    for s in STREAMS:
        route.setdefault(s, root)
    return Plan(name, operators, root, route)


def result_tuple(plan: Plan, values: dict[str, Any], ids: dict[str, int]) -> tuple[int, ...]:
    """The base tuple ids (B, H, T, K) of a root result."""
    out = []
    for s in STREAMS:
        if s in ids:  # the root reads the base stream itself
            out.append(ids[s])
        else:
            group = next(g for g in plan.root.inputs if s in g)
            out.append(int(values[f"{group}.{s.lower()}_id"]))
    return tuple(out)


def run_plan(plan: Plan, events: list[Event], progress: C.Progress) -> None:
    """Push the base events through the plan, timing each operator."""
    clock = time.perf_counter
    start = clock()
    root = plan.root
    next_id = {op.name: 0 for op in plan.operators}
    for e in events:
        op = plan.route[e.stream]
        t0 = clock()
        got = op.matcher.push(e.stream, e.ts, e.values, id=e.id)
        op.seconds += clock() - t0
        if op is not root:
            for m in got:
                t1 = clock()
                final = root.matcher.push(op.name, m.ts, dict(m.values), id=next_id[op.name])
                root.seconds += clock() - t1
                next_id[op.name] += 1
                plan.passed += 1
                plan.found.extend(result_tuple(plan, f.values, f.ids) for f in final)
        else:
            plan.found.extend(result_tuple(plan, f.values, f.ids) for f in got)
        plan.curve.append((clock() - start, len(plan.found)))
        progress.update()


def measure(plan: Plan) -> dict[str, Any]:
    row: dict[str, Any] = {"plan": plan.name, "kind": "binary" if plan.name in BINARY_PLANS else "multi-join"}
    for key in ("comparisons", "bitset_ops", "index_probes", "intermediate"):
        row[key] = sum(getattr(op.matcher.counters, key) for op in plan.operators)
        row[f"{key}_root"] = getattr(plan.root.matcher.counters, key)
    row["passed"] = plan.passed
    row["intermediate_total"] = row["intermediate"] + plan.passed
    row["results"] = len(plan.found)
    row["seconds"] = sum(op.seconds for op in plan.operators)
    row["seconds_root"] = plan.root.seconds
    row["operators"] = " + ".join(op.name for op in plan.operators)
    return row


def main(argv: list[str] | None = None) -> int:
    p = C.parser("multijoin", __doc__.split("\n\n")[0], SIZES)
    p.add_argument("--order", default="AJW", choices=ORDERS, help="evaluation order of every operator (default AJW)")
    args = p.parse_args(argv)
    size = SIZES[C.size_of(args)]
    out = C.Output("multijoin", args.out)
    seeds = [args.seed + i for i in range(size.seeds)]
    rows: list[dict[str, Any]] = []
    curves: dict[str, list[tuple[float, int]]] = {}
    total = len(seeds) * len(PLANS) * len(STREAMS) * size.n_per_stream
    with C.Stopwatch() as whole, C.Progress(total, "multijoin", args.progress) as bar:
        for seed in seeds:
            events = generate(STREAMS, size.n_per_stream, RATE, seed)
            reference: set[tuple[int, ...]] | None = None
            for name in PLANS:
                bar.note = f"seed {seed}, plan {name}"
                plan = build_plan(name, args.order)
                run_plan(plan, events, bar)
                found = set(plan.found)
                if len(found) != len(plan.found):
                    raise AssertionError(f"plan {name} reported a result twice")
                if reference is None:
                    reference = found
                elif found != reference:
                    raise AssertionError(
                        f"seed {seed}: plan {name} differs from {PLANS[0]}: {len(found - reference)} extra, "
                        f"{len(reference - found)} missing results"
                    )
                rows.append({"seed": seed, **measure(plan)})
                if seed == seeds[0]:
                    curves[name] = plan.curve
    summary = summarize(rows)
    out.csv("runs.csv", rows)
    out.csv("summary.csv", summary)
    out.csv(
        "output_over_time.csv",
        [{"plan": n, "seconds": t, "results": k} for n, curve in curves.items() for t, k in curve],
    )
    plot_plans(out)
    plot_output(out, curves, seeds[0])
    plot_bars(
        out,
        summary,
        "intermediate",
        "Intermediate tuples per plan (thesis Fig. 5.5)",
        "intermediate tuples",
        ("intermediate", "passed"),
        ("partial results inside operators", "tuples passed between operators"),
        "intermediate.png",
    )
    plot_bars(
        out,
        summary,
        "comparisons",
        "Comparisons per plan (thesis Fig. 5.7)",
        "predicate comparisons",
        ("comparisons_lower", "comparisons_root"),
        ("lower operators", "top (or only) operator"),
        "comparisons.png",
    )
    plot_bars(
        out,
        summary,
        "seconds",
        "Processing time per plan (thesis Fig. 5.6)",
        "seconds",
        ("seconds_lower", "seconds_root"),
        ("lower operators", "top (or only) operator"),
        "time.png",
    )
    write_summary(out, args, summary, whole.seconds, size)
    out.announce()
    return 0


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for name in PLANS:
        mine = [r for r in rows if r["plan"] == name]
        row: dict[str, Any] = {"plan": name, "kind": mine[0]["kind"], "operators": mine[0]["operators"]}
        for key in (
            "results",
            "intermediate",
            "passed",
            "intermediate_total",
            "comparisons",
            "comparisons_root",
            "bitset_ops",
            "index_probes",
            "seconds",
            "seconds_root",
        ):
            values = [float(r[key]) for r in mine]
            row[key] = float(np.mean(values))
            row[f"{key}_sd"] = float(np.std(values))
        row["comparisons_lower"] = row["comparisons"] - row["comparisons_root"]
        row["seconds_lower"] = row["seconds"] - row["seconds_root"]
        out.append(row)
    return out


# -------------------------------------------------------------------------- plots


def plot_plans(out: C.Output) -> None:
    """The plan trees (thesis Figs 5.2 and 5.3)."""
    fig, axes = C.subplots(1, len(PLANS), figsize=(14, 3.2))
    for ax, name in zip(axes, PLANS, strict=True):
        ax.set_axis_off()
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        groups = name.split("_")
        color = C.PALETTE[1] if name in BINARY_PLANS else C.PALETTE[0]
        box = {"boxstyle": "round,pad=0.3", "fc": "white", "ec": color, "lw": 1.5}
        leaf = {"boxstyle": "round,pad=0.2", "fc": "#eeeeee", "ec": "grey"}
        if len(groups) == 1:
            ax.annotate("⋈ BHTK", (0.5, 0.72), ha="center", bbox=box, fontsize=9)
            for i, s in enumerate(name):
                x = 0.14 + 0.24 * i
                ax.annotate("", (x, 0.25), (0.5, 0.68), arrowprops={"arrowstyle": "-", "color": "grey"})
                ax.annotate(s, (x, 0.2), ha="center", bbox=leaf)
        else:
            ax.annotate(f"⋈ {name}", (0.5, 0.85), ha="center", bbox=box, fontsize=9)
            xs = np.linspace(0.25, 0.75, len(groups))
            for gx, g in zip(xs, groups, strict=True):
                ax.annotate(
                    "", (gx, 0.58 if len(g) > 1 else 0.3), (0.5, 0.82), arrowprops={"arrowstyle": "-", "color": "grey"}
                )
                if len(g) == 1:
                    ax.annotate(g, (gx, 0.22), ha="center", bbox=leaf)
                    continue
                ax.annotate(f"⋈ {g}", (gx, 0.52), ha="center", bbox=box, fontsize=8)
                sx = np.linspace(gx - 0.14, gx + 0.14, len(g))
                for x, s in zip(sx, g, strict=True):
                    ax.annotate("", (x, 0.25), (gx, 0.5), arrowprops={"arrowstyle": "-", "color": "grey"})
                    ax.annotate(s, (x, 0.12), ha="center", bbox=leaf, fontsize=8)
        kind = "binary cascade" if name in BINARY_PLANS else "multi-join"
        ax.set_title(f"{name}\n({kind})", fontsize=10, color=color)
    fig.suptitle("Query plans: binary cascades (Fig. 5.2) and multi-join plans (Fig. 5.3)", fontweight="bold", y=1.08)
    out.figure("plans.png", fig)


def plot_output(out: C.Output, curves: dict[str, list[tuple[float, int]]], seed: int) -> None:
    fig, ax = C.subplots()
    styles = {name: ("--" if name in BINARY_PLANS else "-") for name in PLANS}
    for k, (name, curve) in enumerate(curves.items()):
        ax.plot([t for t, _ in curve], [n for _, n in curve], styles[name], label=name, color=C.PALETTE[k], lw=1.6)
    ax.set_xlabel("processing time (s, wall clock)")
    ax.set_ylabel("results output so far")
    ax.set_title(f"Output over time (thesis Fig. 5.4), seed {seed}")
    ax.legend(title="plan (dashed: binary)", loc="lower right")
    out.figure("output_over_time.png", fig)


def plot_bars(
    out: C.Output,
    summary: list[dict[str, Any]],
    total_key: str,
    title: str,
    ylabel: str,
    parts: tuple[str, str],
    labels: tuple[str, str],
    file: str,
) -> None:
    fig, ax = C.subplots()
    x = np.arange(len(summary))
    bottom = np.zeros(len(summary))
    for k, (key, label) in enumerate(zip(parts, labels, strict=True)):
        heights = np.array([r[key] for r in summary])
        ax.bar(x, heights, 0.6, bottom=bottom, label=label, color=C.PALETTE[k], alpha=0.9)
        bottom += heights
    sd = np.array([r[f"{total_key}_sd"] for r in summary])
    ax.errorbar(x, bottom, yerr=sd, fmt="none", ecolor="black", capsize=3, lw=0.8, label="±1 sd over seeds")
    for xi, total, dev in zip(x, bottom, sd, strict=True):
        ax.annotate(
            C.human(total) if total >= 100 else f"{total:.2f}",
            (xi, total + dev),
            ha="center",
            va="bottom",
            fontsize=7,
            xytext=(0, 2),
            textcoords="offset points",
        )
    ax.set_xticks(x, [r["plan"] for r in summary])
    for tick, r in zip(ax.get_xticklabels(), summary, strict=True):
        tick.set_color(C.PALETTE[1] if r["kind"] == "binary" else C.PALETTE[0])
    ax.axvline(len(BINARY_PLANS) - 0.5, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("plan (left: binary cascades, right: multi-join plans)")
    ax.set_ylabel(f"{ylabel} (mean over seeds)")
    ax.set_title(title)
    ax.legend(loc="upper left")
    ax.set_ylim(0, max(bottom + sd) * 1.3)
    if total_key != "seconds":
        C.short_ticks(ax.yaxis)
    out.figure(file, fig)


def write_summary(
    out: C.Output, args: argparse.Namespace, summary: list[dict[str, Any]], seconds: float, size: Size
) -> None:
    text = C.header("Binary versus multi-join plans (thesis §5.2.1)", args, seconds)
    text += (
        f"Four streams B, H, T, K with {size.n_per_stream} tuples each at {RATE:g} tuples/s; "
        f"{size.seeds} seed(s); every operator evaluates in order {args.order}. All seven plans reported "
        "exactly the same 4-tuples in every run (asserted).\n\n"
    )
    text += "The query (assumed; see the module docstring and docs/RESULTS.md):\n\n```\n" + the_query() + "```\n\n"
    text += describe(STREAMS, RATE) + "\n\n"
    text += "![plans](plans.png)\n\n"
    cols = ["plan", "kind", "results", "intermediate", "passed", "intermediate_total", "comparisons", "seconds"]
    heads = [
        "plan",
        "kind",
        "results",
        "partials in operators",
        "tuples passed up",
        "intermediate (total)",
        "comparisons",
        "time (s)",
    ]
    text += C.markdown_table(summary, cols, heads) + "\n\n"
    best_binary = min((r for r in summary if r["kind"] == "binary"), key=lambda r: r["intermediate_total"])
    best_multi = min((r for r in summary if r["kind"] != "binary"), key=lambda r: r["intermediate_total"])
    single = next(r for r in summary if r["plan"] == "BHTK")
    text += (
        f"Fewest intermediate tuples: binary {best_binary['plan']} ({C.fmt(best_binary['intermediate_total'])}), "
        f"multi-join {best_multi['plan']} ({C.fmt(best_multi['intermediate_total'])}); the single four-way "
        f"operator BHTK makes {C.fmt(single['intermediate_total'])}.\n\n"
    )
    for file, what in (
        ("output_over_time.png", "output over time"),
        ("intermediate.png", "intermediate tuples"),
        ("comparisons.png", "comparisons"),
        ("time.png", "processing time"),
    ):
        text += f"![{what}]({file})\n\n"
    out.markdown("summary.md", text)


if __name__ == "__main__":
    raise SystemExit(main())
