"""``mqo profile``: what a user runs on sample data before deploying a query set.

It answers three questions about the queries on that data:

1. **How selective is each predicate, and each predicate list?** Every predicate of the
   compiled plan is evaluated by itself: attribute predicates on every sample tuple of
   their stream, join and window predicates on every pair of tuples of their two streams
   that lie within the MAXWINDOW of the queries using the list (``|ts_x - ts_y| <=
   window``; more than ``MAX_PAIRS`` pairs are thinned evenly). Evaluation goes through
   the plan's own :class:`~mqo.plan.CompiledList`, so it is exactly what the matcher
   computes. A list's selectivity is reported two ways: ``any`` (the share of tuples or
   pairs satisfying at least one of its predicates: what survives the list for some
   query) and ``mean`` (the average of its predicates').
2. **How much is shared?** The sharing ratio: predicate occurrences over distinct
   predicates.
3. **Which static evaluation order is best?** The queries run over the sample in each
   of the six orders AJW..WJA; comparisons, bit-set operations, intermediate tuples and
   time are compared, and the results are checked to be the same in every order. The
   best order has the fewest comparisons (ties: less time).

The report is printed as tables and written to the output folder as CSV files
(``predicates.csv``, ``lists.csv``, ``types.csv``, ``orders.csv``) and a plot
(``profile.png``).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from mqo import ORDERS, Matcher
from mqo.plan import CompiledList, CompiledPlan
from mqo.rows import RowBuilder
from predicates import Kind, ListKey
from runtime.io.inputs import InputSpec, StreamData, merge, read_stream
from runtime.io.named_paths import INPUT
from runtime.workload import CliError, load_matcher

MAX_PAIRS = 200_000
KINDS = (Kind.ATTRIBUTE, Kind.JOIN, Kind.WINDOW)
LETTER = {Kind.ATTRIBUTE: "A", Kind.JOIN: "J", Kind.WINDOW: "W"}


@dataclass
class Event:
    stream: str
    ts: float
    id: int | None
    values: dict[str, Any]


@dataclass
class PredicateStats:
    kind: str
    position: str  # the thesis' list:pred
    bit: int
    text: str
    queries: str
    evaluated: int
    satisfied: int

    @property
    def selectivity(self) -> float | None:
        return self.satisfied / self.evaluated if self.evaluated else None


@dataclass
class ListStats:
    kind: str
    index: int
    pattern: str
    predicates: int
    window: float | None
    evaluated: int
    any_satisfied: int
    mean: float | None
    thinned: bool = False

    @property
    def any(self) -> float | None:
        return self.any_satisfied / self.evaluated if self.evaluated else None


@dataclass
class OrderRun:
    order: str
    comparisons: int
    bitset_ops: int
    index_probes: int
    intermediate: int
    results: int
    seconds: float
    late: int = 0
    selectivity: dict[str, float | None] = field(default_factory=dict)


# ------------------------------------------------------------------------ inputs


def load_events(matcher: Matcher, specs: Sequence[InputSpec]) -> tuple[list[Event], dict[str, int]]:
    """The sample tuples in arrival order (``mqo match``'s merge), and counts per stream."""
    datas: list[StreamData] = []
    names = [INPUT.declared(spec.stream, spec.path, matcher.catalog.names()) for spec in specs]
    for spec, name in zip(specs, names, strict=True):
        schema = matcher.catalog.require(name)
        data = read_stream(spec, schema)
        data.stream = schema.name
        datas.append(data)
    # each file's values as Python values once (not value by value from its Arrow columns)
    plain = [d.plain_batch() for d in datas]
    rows = [[dict(zip(b, r, strict=True)) for r in zip(*b.values(), strict=True)] for b in plain]
    events = []
    for k, i in merge(datas):
        row = rows[k][i]
        events.append(Event(datas[k].stream, row.pop("ts"), row.pop("id", None), row))
    counts: dict[str, int] = {}
    for e in events:
        counts[e.stream] = counts.get(e.stream, 0) + 1
    if not events:
        raise CliError("the inputs hold no tuples; profile needs sample data")
    return events, counts


# ------------------------------------------------------------ predicate selectivity


def query_predicates(rq: Any) -> list[tuple[int, ListKey, Any]]:
    """(disjunct, list key, constant) of each indexed predicate of a registered query,
    read from the registry rather than the compiled plan's internals."""
    return list(rq.predicates())


def stored_constant(numeric: bool, constant: Any) -> Any:
    """A registry constant as a compiled list stores it (numbers as floats)."""
    return float(constant) if numeric and constant is not None and not isinstance(constant, bool) else constant


def predicate_users(matcher: Matcher) -> tuple[dict[tuple[ListKey, Any], list[str]], dict[ListKey, float]]:
    """Which queries use each (list, constant), and the largest MAXWINDOW of the queries
    using each list (the window its pairs are drawn from)."""
    users: dict[tuple[ListKey, Any], list[str]] = {}
    windows: dict[ListKey, float] = {}
    for rq in matcher.registry:
        preds = query_predicates(rq)
        several = len({d for d, _, _ in preds}) > 1
        for d, key, constant in preds:
            numeric = key.family == "number"
            if not numeric and key.right is not None:
                constant = 0  # a two-column string or boolean list holds one predicate
            label = f"{rq.name}[{d + 1}]" if several else rq.name
            names = users.setdefault((key, stored_constant(numeric, constant)), [])
            if label not in names:
                names.append(label)
            windows[key] = max(windows.get(key, 0.0), float(rq.maxwindow))
    return users, windows


def _rows(plan: CompiledPlan, events: Sequence[Event]) -> list[list[tuple[Any, ...]]]:
    """Each stream's tuples as the matcher's rows, in arrival order."""
    builders = [RowBuilder(schema) for schema in plan.streams[: plan.n_real]]
    rows: list[list[tuple[Any, ...]]] = [[] for _ in builders]
    for e in events:
        s = plan.stream_number(e.stream)
        rows[s].append(builders[s].build(e.ts, e.values, e.id))
    # a self-join's roles (B#2, ...) read their stream's tuples
    return rows + [rows[plan.base_of[r]] for r in range(plan.n_real, len(plan.streams))]


def window_pairs(left: list[tuple[Any, ...]], right: list[tuple[Any, ...]], window: float) -> list[tuple[int, int]]:
    """Index pairs (i, j) with ``|left[i].ts - right[j].ts| <= window``, both sorted by ts."""
    lts = sorted(range(len(left)), key=lambda i: left[i][0])
    rts = sorted(range(len(right)), key=lambda j: right[j][0])
    pairs: list[tuple[int, int]] = []
    lo = 0
    for i in lts:
        t = left[i][0]
        while lo < len(rts) and right[rts[lo]][0] < t - window:
            lo += 1
        k = lo
        while k < len(rts) and right[rts[k]][0] <= t + window:
            pairs.append((i, rts[k]))
            k += 1
    return pairs


def _thin(pairs: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], bool]:
    if len(pairs) <= MAX_PAIRS:
        return pairs, False
    step = len(pairs) / MAX_PAIRS
    return [pairs[int(k * step)] for k in range(MAX_PAIRS)], True


def list_selectivity(matcher: Matcher, events: Sequence[Event]) -> tuple[list[PredicateStats], list[ListStats]]:
    """Evaluate every predicate of the plan on the sample (see the module docstring)."""
    plan = matcher.ensure_plan()
    rows = _rows(plan, events)
    users, windows = predicate_users(matcher)
    predicates: list[PredicateStats] = []
    lists: list[ListStats] = []
    for kind in KINDS:
        for lst in plan.lists[kind]:
            window = windows.get(lst.key, 0.0) if kind is not Kind.ATTRIBUTE else None
            counts, evaluated, any_count, thinned = _evaluate_list(lst, rows, window)
            constants = list(lst.covering.constants)
            for i in range(lst.n):
                constant = constants[i] if lst.numeric or lst.right_pos is None else None
                if isinstance(constant, float) and lst.numeric:
                    constant = Fraction(constant)  # exact, so the text is the shortest exact form
                shown = lst.key.rhs_text(constant) if constant is not None else lst.key.rhs_text()
                predicates.append(
                    PredicateStats(
                        kind=LETTER[kind],
                        position=f"{lst.index}:{i}",
                        bit=lst.base + i,
                        text=f"{lst.key.left} {lst.key.op} {shown}",
                        queries=", ".join(users.get((lst.key, constants[i]), [])),
                        evaluated=evaluated,
                        satisfied=counts[i],
                    )
                )
            mean = sum(counts) / (lst.n * evaluated) if evaluated and lst.n else None
            lists.append(
                ListStats(
                    LETTER[kind], lst.index, lst.key.describe(), lst.n, window, evaluated, any_count, mean, thinned
                )
            )
    return predicates, lists


def _evaluate_list(
    lst: CompiledList, rows: list[list[tuple[Any, ...]]], window: float | None
) -> tuple[list[int], int, int, bool]:
    """Per-position satisfied counts over the list's sample (tuples, or pairs within
    ``window``), the sample size, how many satisfied at least one predicate and whether
    the pairs were thinned."""
    n = lst.n
    delta = [0] * (n + 1)  # difference array of satisfied runs
    negated_runs = 0
    any_count = 0
    evaluated = 0
    thinned = False

    def count(sat: tuple[int, int, bool]) -> None:
        nonlocal negated_runs, any_count
        lo, hi, negated = sat
        if negated:
            # everything but [lo, hi): add a full run and subtract the gap
            negated_runs += 1
            delta[lo] -= 1
            delta[hi] += 1
            if hi - lo < n:
                any_count += 1
        else:
            delta[lo] += 1
            delta[hi] -= 1
            if hi > lo:
                any_count += 1

    if lst.right_stream is None or lst.kind is Kind.ATTRIBUTE or window is None:
        for row in rows[lst.left_stream]:
            count(lst.evaluate_row(row))
            evaluated += 1
    else:
        left, right = rows[lst.left_stream], rows[lst.right_stream]
        pairs, thinned = _thin(window_pairs(left, right, window))
        for i, j in pairs:
            count(lst.evaluate_pair(left[i], right[j]))
        evaluated = len(pairs)
    counts, running = [], negated_runs
    for i in range(n):
        running += delta[i]
        counts.append(running)
    return counts, evaluated, any_count, thinned


# ------------------------------------------------------------------------ orders


def compare_orders(args: argparse.Namespace, events: Sequence[Event]) -> list[OrderRun]:
    """Run the sample in each static order; the results must not depend on it."""
    runs: list[OrderRun] = []
    reference: set[tuple[str, tuple[tuple[str, int], ...]]] | None = None
    for order in ORDERS:
        m = load_matcher(
            args.schema,
            args.queries,
            allowed_lateness=args.allowed_lateness,
            order=order,
            late_sink=lambda late: None,
            time=args.time,
        )
        found: list[tuple[str, tuple[tuple[str, int], ...]]] = []
        push = m.push
        start = time.perf_counter()
        for e in events:
            for match in push(e.stream, e.ts, e.values, e.id):
                found.append((match.query, tuple(sorted(match.ids.items()))))
        seconds = time.perf_counter() - start
        keys = set(found)
        if reference is None:
            reference = keys
        elif keys != reference:
            raise CliError(
                f"order {order} found different results than {ORDERS[0]} "
                f"({len(keys - reference)} extra, {len(reference - keys)} missing): this is a bug in mqo, "
                "please report it with these inputs"
            )
        c = m.counters
        runs.append(
            OrderRun(
                order,
                c.comparisons,
                c.bitset_ops,
                c.index_probes,
                c.intermediate,
                c.results,
                seconds,
                c.late,
                {k.value: c.selectivity(k) for k in KINDS},
            )
        )
    return runs


def best_order(runs: Sequence[OrderRun]) -> OrderRun:
    return min(runs, key=lambda r: (r.comparisons, r.seconds))


# ------------------------------------------------------------------------ report


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[bool] | None = None) -> str:
    """A plain text table, numbers right-aligned."""
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[k]) for r in cells]) for k, h in enumerate(headers)]
    align = (
        right
        if right is not None
        else [isinstance(rows[0][k], (int, float)) if rows else False for k in range(len(headers))]
    )

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if a else v.ljust(w) for v, w, a in zip(values, widths, align, strict=True)
        ).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def write_csv(path: Path, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(headers)
        for row in rows:
            w.writerow(["" if v is None else (f"{v:.6g}" if isinstance(v, float) else v) for v in row])


def plot(
    path: Path, predicates: Sequence[PredicateStats], runs: Sequence[OrderRun], best: OrderRun, title: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    colors = {"A": "#0072B2", "J": "#E69F00", "W": "#009E73"}
    shown = sorted((p for p in predicates if p.selectivity is not None), key=lambda p: p.selectivity or 0.0)
    cap = 50
    note = ""
    if len(shown) > cap:
        note = f" (the {cap // 2} least and {cap // 2} most selective of {len(shown)})"
        shown = shown[: cap // 2] + shown[-cap // 2 :]
    height = max(4.0, 0.28 * len(shown) + 1.5)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, height), gridspec_kw={"width_ratios": [3, 2]})
    labels = [f"{p.kind} {p.position}  {p.text}" for p in shown]
    ax1.barh(range(len(shown)), [p.selectivity for p in shown], color=[colors[p.kind] for p in shown])
    ax1.set_yticks(range(len(shown)), labels, fontsize=7)
    ax1.set_xlim(0, 1.08)
    ax1.set_xlabel("selectivity: share of sample tuples (A) or pairs within MAXWINDOW (J, W) satisfying it")
    ax1.set_title("Predicate selectivity" + note, fontsize=10, fontweight="bold")
    for k, p in enumerate(shown):
        ax1.annotate(
            f"{p.selectivity:.2f}",
            (p.selectivity or 0.0, k),
            va="center",
            fontsize=7,
            xytext=(3, 0),
            textcoords="offset points",
        )
    names = {"A": "attribute", "J": "join", "W": "window"}
    ax1.legend(
        handles=[Patch(color=c, label=names[k]) for k, c in colors.items()],
        loc="lower right",
        fontsize=8,
        frameon=False,
    )
    ax1.grid(axis="x", alpha=0.3)
    x = range(len(runs))
    bars = ax2.bar(x, [r.comparisons for r in runs], color=["#D55E00" if r is best else "#999999" for r in runs])
    for bar, r in zip(bars, runs, strict=True):
        ax2.annotate(
            f"{r.comparisons:,}\n{1000 * r.seconds:.1f} ms",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=7,
            xytext=(0, 2),
            textcoords="offset points",
        )
    ax2.set_xticks(list(x), [r.order for r in runs])
    ax2.set_xlabel("static evaluation order (best in red)")
    ax2.set_ylabel("comparisons over the sample")
    ax2.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax2.set_ylim(0, max(r.comparisons for r in runs) * 1.25 or 1)
    ax2.set_title(f"Static orders: best {best.order}", fontsize=10, fontweight="bold")
    ax2.grid(axis="y", alpha=0.3)
    for ax in (ax1, ax2):
        ax.spines["top"].set_visible(False)
        ax.spines["right"].set_visible(False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def run_profile(args: argparse.Namespace) -> int:
    """The ``mqo profile`` command."""
    if not args.input:
        raise CliError("give at least one --input STREAM=FILE")
    specs = [InputSpec(given.name, given.path) for given in INPUT.parse(args.input)]
    matcher = load_matcher(args.schema, args.queries, allowed_lateness=args.allowed_lateness, time=args.time)
    if not len(matcher.registry):
        raise CliError(f"{args.queries} holds no query to profile")
    out = Path(args.out) if args.out else Path(f"profile-{time.strftime('%Y%m%d-%H%M%S')}")
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {out} exists and is not a folder")
    events, counts = load_events(matcher, specs)
    predicates, lists = list_selectivity(matcher, events)
    runs = compare_orders(args, events)
    best = best_order(runs)
    default = next(r for r in runs if r.order == "AJW")
    registry = matcher.registry
    out.mkdir(parents=True, exist_ok=True)

    per_stream = ", ".join(f"{name}: {n:,}" for name, n in counts.items())
    lines = [
        f"Profile of {len(registry)} quer{'y' if len(registry) == 1 else 'ies'} over {len(events):,} tuples "
        f"({per_stream})",
        f"Sharing ratio {registry.sharing_ratio():.2f}: {registry.predicate_occurrences()} predicate occurrences, "
        f"{registry.distinct_predicates()} distinct predicates in {len(lists)} lists",
        "",
        "Predicates (selectivity: share of the stream's tuples, or of pairs within MAXWINDOW, that satisfy it)",
    ]
    p_headers = ["type", "list:pred", "bit", "predicate", "queries", "evaluated", "satisfied", "selectivity"]
    p_rows = [
        [p.kind, p.position, p.bit, p.text, p.queries, p.evaluated, p.satisfied, p.selectivity] for p in predicates
    ]
    lines.append(table(p_headers, p_rows, [False, False, True, False, False, True, True, True]))
    lines += ["", "Predicate lists (any: satisfies at least one predicate of the list; mean: average predicate)"]
    l_headers = ["type", "list", "pattern", "predicates", "window (s)", "evaluated", "any", "mean"]
    l_rows = [
        [
            s.kind,
            s.index,
            s.pattern,
            s.predicates,
            s.window,
            s.evaluated,
            s.any,
            s.mean,
        ]
        for s in lists
    ]
    l_display = [
        [*r[:2], r[2] + (" (pairs thinned)" if s.thinned else ""), r[3], "-" if r[4] is None else f"{r[4]:g}", *r[5:]]
        for r, s in zip(l_rows, lists, strict=True)
    ]
    lines.append(table(l_headers, l_display, [False, True, False, True, True, True, True, True]))
    lines += ["", "Predicate types in the matcher (partial results out / in, order AJW; above 1 a phase joins)"]
    t_rows = [[k.value, default.selectivity.get(k.value)] for k in KINDS]
    lines.append(table(["type", "selectivity"], t_rows, [False, True]))
    lines += ["", "Static orders over the sample (results identical in every order)"]
    o_headers = ["order", "comparisons", "bitset ops", "index probes", "intermediate", "results", "time (ms)", ""]
    o_rows = [
        [
            r.order,
            r.comparisons,
            r.bitset_ops,
            r.index_probes,
            r.intermediate,
            r.results,
            1000 * r.seconds,
            "<- best" if r is best else "",
        ]
        for r in runs
    ]
    o_display = [[*r[:6], f"{r[6]:.1f}", r[7]] for r in o_rows]
    lines.append(table(o_headers, o_display, [False, True, True, True, True, True, True, False]))
    saving = 1 - best.comparisons / default.comparisons if default.comparisons else 0.0
    fastest = min(runs, key=lambda r: r.seconds)
    lines += [
        "",
        f"Best static order: {best.order} ({best.comparisons:,} comparisons"
        + (f", {100 * saving:.0f}% fewer than the default AJW)" if best is not default else ", the default)"),
    ]
    if fastest is not best:
        lines.append(f"Fastest on this sample: {fastest.order} ({1000 * fastest.seconds:.1f} ms; times are noisy)")
    write_csv(out / "predicates.csv", p_headers, p_rows)
    write_csv(out / "lists.csv", [*l_headers, "thinned"], [[*r, s.thinned] for r, s in zip(l_rows, lists, strict=True)])
    write_csv(
        out / "types.csv",
        ["order", *(k.value for k in KINDS)],
        [[r.order, *(r.selectivity.get(k.value) for k in KINDS)] for r in runs],
    )
    write_csv(out / "orders.csv", [*o_headers[:-1], "best"], [[*row[:-1], row[-1] != ""] for row in o_rows])
    plot(
        out / "profile.png",
        predicates,
        runs,
        best,
        f"{Path(args.queries).name}: {len(registry)} queries, {len(events):,} sample tuples",
    )
    lines += ["", f"Wrote {out}/predicates.csv, lists.csv, types.csv, orders.csv and profile.png"]
    print("\n".join(lines))
    if default.late:
        print(
            f"note: {default.late:,} late tuple(s) were not matched (raise --allowed-lateness to include them)",
            file=sys.stderr,
        )
    return 0
