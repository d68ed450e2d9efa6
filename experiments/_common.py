"""What every experiment shares: options, the output folder, CSV and markdown
writing, a progress bar, the plot style, and feeding events to matchers.

An experiment's ``main(argv)`` builds its parser with :func:`parser` (``--seed``,
``--out``, ``--size``/``--quick``, ``--no-progress``), runs, writes its files with
:class:`Output` and prints the output folder on stdout; everything else (progress,
notes) goes to stderr so the folder is the one line a script needs to read.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import matplotlib

matplotlib.use("Agg")  # files only, never a window: experiments run headless
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from experiments._data import Event
from mqo import Match, Matcher
from runtime.local.profile import query_predicates

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE / "workloads"
RESULTS = HERE / "results"

# A palette that stays readable for colour-blind readers (Okabe-Ito, with indigo in
# place of its yellow, which vanishes on white), used in this order by every plot.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#332288", "#000000"]


def workload(name: str) -> str:
    """The text of a thesis workload file (``experiments/workloads/<name>``)."""
    path = WORKLOADS / name
    if not path.exists():
        raise FileNotFoundError(f"workload {name!r} not found in {WORKLOADS}")
    return path.read_text(encoding="utf-8")


# ----------------------------------------------------------------------- options


def parser(name: str, description: str, sizes: Mapping[str, object]) -> argparse.ArgumentParser:
    """The options every experiment takes; ``sizes`` names its run sizes (``quick``
    and ``default`` at least)."""
    p = argparse.ArgumentParser(prog=f"mqo experiment {name}", description=description)
    p.add_argument("--seed", type=int, default=1, help="random seed of the generated data (default 1)")
    p.add_argument("--out", metavar="DIR", help=f"output folder (default experiments/results/{name})")
    p.add_argument("--size", choices=list(sizes), default="default", help="run size (default: default)")
    p.add_argument("--quick", action="store_true", help="the smallest size (same as --size quick)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar on stderr")
    return p


def size_of(args: argparse.Namespace) -> str:
    return "quick" if args.quick else str(args.size)


# ------------------------------------------------------------------------ output


class Output:
    """The experiment's output folder and the files written to it."""

    def __init__(self, name: str, out: str | None) -> None:
        self.name = name
        self.path = Path(out) if out else RESULTS / name
        if self.path.exists() and not self.path.is_dir():
            raise NotADirectoryError(f"--out {self.path} exists and is not a folder")
        self.path.mkdir(parents=True, exist_ok=True)
        self.files: list[Path] = []

    def file(self, name: str) -> Path:
        path = self.path / name
        self.files.append(path)
        return path

    def csv(self, name: str, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> Path:
        """Write ``rows`` (dicts) as CSV; columns default to the first row's keys."""
        path = self.file(name)
        write_csv(path, rows, columns)
        return path

    def figure(self, name: str, fig: Figure) -> Path:
        path = self.file(name)
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        return path

    def markdown(self, name: str, text: str) -> Path:
        path = self.file(name)
        path.write_text(text.rstrip() + "\n", encoding="utf-8")
        return path

    def announce(self) -> None:
        """The one line on stdout: where the results are."""
        print(self.path)


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> None:
    cols = list(columns) if columns is not None else (list(rows[0]) if rows else [])
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({c: _csv_value(row.get(c)) for c in cols})


def _csv_value(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.6g}" if not value.is_integer() else str(int(value))
    return "" if value is None else value


def fmt(value: Any) -> str:
    """A number as a reader wants it in a table: thousands separators, 3 significant
    decimals for fractions."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if value.is_integer() and abs(value) >= 1:
            return f"{int(value):,}"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    return str(value)


def markdown_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], headers: Sequence[str] | None = None
) -> str:
    """A markdown table of ``rows`` (dicts) over ``columns``."""
    heads = list(headers) if headers is not None else list(columns)
    lines = ["| " + " | ".join(heads) + " |", "| " + " | ".join("---" for _ in heads) + " |"]
    for row in rows:
        lines.append("| " + " | ".join(fmt(row.get(c)) for c in columns) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------- progress


class Progress:
    """A progress bar on stderr: redrawn in place on a terminal (at most 10 times a
    second), one line per tenth of the way otherwise, so logs stay short."""

    def __init__(self, total: int, label: str = "", enabled: bool = True, out: IO[str] | None = None) -> None:
        self.total = max(int(total), 0)
        self.label = label
        self.enabled = enabled
        self.out = out if out is not None else sys.stderr
        self.done = 0
        self.note = ""
        self.start = time.perf_counter()
        self._last = 0.0
        self._tty = bool(getattr(self.out, "isatty", lambda: False)())
        self._tenth = -1

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: int = 1, note: str | None = None) -> None:
        self.done += n
        if note is not None:
            self.note = note
        if not self.enabled:
            return
        frac = self.done / self.total if self.total else 1.0
        if self._tty:
            now = time.perf_counter()
            if now - self._last < 0.1 and self.done < self.total:
                return
            self._last = now
            self.out.write("\r" + self._line(frac))
            self.out.flush()
        else:
            tenth = int(frac * 10)
            if tenth != self._tenth:
                self._tenth = tenth
                self.out.write(self._line(frac) + "\n")
                self.out.flush()

    def _line(self, frac: float) -> str:
        bar = "#" * int(frac * 24)
        elapsed = time.perf_counter() - self.start
        note = f"  {self.note}" if self.note else ""
        return f"{self.label:<12} [{bar:<24}] {frac:6.1%} {self.done:,}/{self.total:,} {elapsed:6.1f}s{note}"

    def close(self) -> None:
        if self.enabled and self._tty:
            self.out.write("\r" + self._line(1.0 if self.done >= self.total else self.done / max(self.total, 1)) + "\n")
            self.out.flush()


def note(text: str) -> None:
    """A line for the reader of the run (stderr: stdout carries only the folder)."""
    print(text, file=sys.stderr)


# ---------------------------------------------------------------------- matching


def push_events(
    matcher: Matcher,
    events: Iterable[Event],
    on_match: Callable[[Event, list[Match]], None] | None = None,
    progress: Progress | None = None,
) -> list[Match]:
    """Push every event (with its id) and collect the matches."""
    found: list[Match] = []
    push = matcher.push
    for e in events:
        got = push(e.stream, e.ts, e.values, id=e.id)
        if got:
            found.extend(got)
        if on_match is not None:
            on_match(e, got)
        if progress is not None:
            progress.update()
    return found


def result_key(m: Match) -> tuple[str, tuple[tuple[str, int], ...]]:
    """A match as (query, sorted alias ids): what "the same result" means."""
    return (m.query, tuple(sorted(m.ids.items())))


def result_set(matches: Iterable[Match]) -> set[tuple[str, tuple[tuple[str, int], ...]]]:
    keys = [result_key(m) for m in matches]
    found = set(keys)
    if len(found) != len(keys):
        raise AssertionError("a result was reported twice")
    return found


def counters_row(matcher: Matcher) -> dict[str, Any]:
    c = matcher.counters
    return {
        "tuples": c.tuples,
        "results": c.results,
        "comparisons": c.comparisons,
        "bitset_ops": c.bitset_ops,
        "index_probes": c.index_probes,
        "intermediate": c.intermediate,
    }


def overlap_stats(matcher: Matcher) -> dict[str, Any]:
    """How much the registered queries overlap. A predicate overlaps (the thesis' word)
    when it sits in a predicate list together with another query's predicate."""
    occurrences: dict[Any, set[str]] = defaultdict(set)
    per_list: dict[Any, int] = defaultdict(int)
    total = 0
    for rq in matcher.registry:
        for _, key, _ in query_predicates(rq):
            per_list[key] += 1
            occurrences[key].add(rq.name)
            total += 1
    overlapping = sum(n for key, n in per_list.items() if len(occurrences[key]) > 1)
    reg = matcher.registry
    return {
        "queries": len(reg),
        "predicate_occurrences": total,
        "distinct_predicates": reg.distinct_predicates(),
        "lists": len(per_list),
        "overlap_measured": overlapping / total if total else 0.0,
        "sharing_ratio": reg.sharing_ratio(),
    }


class Stopwatch:
    """Elapsed process-wide wall time of a block (``with Stopwatch() as sw: ...; sw.seconds``)."""

    def __enter__(self) -> Stopwatch:
        self.start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start


# -------------------------------------------------------------------------- plots


def style() -> None:
    """One look for every figure."""
    plt.rcParams.update(
        {
            "figure.figsize": (7.5, 4.5),
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
            "axes.titlesize": 12,
            "axes.titleweight": "bold",
            "axes.labelsize": 10,
            "legend.fontsize": 9,
            "legend.frameon": False,
            "font.size": 9,
        }
    )


def subplots(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    style()
    fig, axes = plt.subplots(nrows, ncols, **kwargs)
    return fig, axes


def label_bars(
    ax: Any, bars: Any, values: Sequence[float], fmt_value: Callable[[float], str] = fmt, rotation: float = 0
) -> None:
    """Write each bar's value above it (small, so the plot stays readable; rotate
    them when bars are narrow)."""
    for bar, value in zip(bars, values, strict=True):
        ax.annotate(
            fmt_value(value),
            (bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=7 if not rotation else 6.5,
            rotation=rotation,
            xytext=(0, 2),
            textcoords="offset points",
        )


def short_ticks(axis: Any) -> None:
    """Tick labels like 12k and 1.5M instead of a 1e6 offset."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: human(v) if v else "0"))


def log_axes(ax: Any, x: bool = True, y: bool = True) -> None:
    """Log scales with ticks at 1, 2, 5 x 10^k labelled like 20k (no 2x10^4)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for on, axis, scale in ((x, ax.xaxis, ax.set_xscale), (y, ax.yaxis, ax.set_yscale)):
        if not on:
            continue
        scale("log")
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: human(v)))
        axis.set_minor_formatter(NullFormatter())


def peak_mib() -> float:
    """This process's peak resident memory (VmHWM of /proc/self/status), MiB.

    Not ``getrusage(...).ru_maxrss``: Linux keeps that across ``execve``, so a fresh
    interpreter started by a large process would report its parent's peak as its own."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def human(n: float) -> str:
    """12345 -> '12.3k' for axis ticks and labels."""
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.3g}{unit}"
    return f"{n:.3g}"


def git_commit() -> str:
    """The checked-out commit (for the summary), or 'unknown'. A linked worktree's
    ``.git`` is a file naming its git directory; a branch's ref may be packed: git
    itself answers, and the files are read where it is not installed."""
    try:
        done = subprocess.run(
            ["git", "-C", str(HERE.parent), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()[:10]
    except (OSError, subprocess.SubprocessError):
        pass
    head = HERE.parent / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            return (HERE.parent / ".git" / ref[5:]).read_text().strip()[:10]
        return ref[:10]
    except OSError:
        return "unknown"


def row(
    bench: str, metric: str, value: float, target: str = "", met: bool | None = None, note: str = ""
) -> dict[str, Any]:
    """One row of a benchmark table (``experiments.bench``'s)."""
    return {"benchmark": bench, "metric": metric, "value": value, "target": target, "met": met, "note": note}


def speed_up(bench: str, metric: str, theirs: float, ours: float, at_least: float, note: str = "") -> dict[str, Any]:
    """The row of a speed-up (``theirs / ours`` seconds) held to ``at_least`` times."""
    return row(bench, metric, theirs / ours, target=f">= {at_least:g}x", met=theirs / ours >= at_least, note=note)


PACKAGES = ("mqo", "predicates", "indexes", "runtime")


def compile_bytecode() -> None:
    """Write the project's bytecode, as installing a package does (pip compiles it;
    an editable install writes it on the first run): timed processes then load it
    whatever the environment says (a machine may set PYTHONDONTWRITEBYTECODE, under
    which every process would compile the project's modules again, about 0.1 s)."""
    import compileall

    for package in PACKAGES:
        compileall.compile_dir(HERE.parent / package, quiet=1)


def forget_bytecode() -> None:
    """Remove the project's bytecode (the state right after an editable install); the
    numba kernels' cache beside it stays."""
    for package in PACKAGES:
        for compiled in (HERE.parent / package).rglob("__pycache__/*.pyc"):
            compiled.unlink(missing_ok=True)


def dirty_tree() -> bool:
    """Whether tracked files have uncommitted changes (False where git cannot tell)."""
    import subprocess

    try:
        done = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=HERE.parent,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return False
    return bool(done.stdout.strip())


def header(title: str, args: argparse.Namespace, seconds: float | None = None) -> str:
    """The top of every summary: what ran, with which seed and size, on what."""
    lines = [f"# {title}", ""]
    lines.append(
        f"Seed {args.seed}, size `{size_of(args)}`, commit `{git_commit()}`, "
        f"{os.cpu_count()} CPU(s), Python {sys.version.split()[0]}."
        + (f" Ran in {seconds:.1f} s." if seconds is not None else "")
    )
    lines.append("")
    return "\n".join(lines)
