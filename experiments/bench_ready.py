"""Ready time: from nothing to the first event matched, for many subscriptions.

The pub/sub filter workload of the shape matrix (:mod:`experiments.bench_shapes`:
ten intervals on E's 20 attributes, INTEGER or FLOAT columns) registered from text
(a list of texts, or a query file on disk, each query ending with ``;``, registered
as ``mqo match --queries`` registers it) or from a table, each cell in a fresh interpreter (its kernels
loaded from numba's cache before the clock starts): registration seconds, the first
event's milliseconds (what a user waits for after registering), ready = the two
together, push mean / p99 / p99.9 over the next events (one at a time, so a garbage
collection over the registered queries shows in the tail), how many full garbage
collections ran while matching and the longest, and the whole process's peak
resident memory (VmHWM: what this process held at most, not inherited from the
process that started it as ``ru_maxrss`` is), and its peak from the registering call
on (the inputs held, their making left out).

Run ``python -m experiments.bench_ready 20000 1000000`` to print the cells as JSON
lines; ``--profile`` writes a cProfile of registration plus first event per cell;
``--phases`` adds each phase's seconds (wall and CPU), resident memory at its end and
its own peak (:class:`Phases`: the inputs made, the kernels loaded, the registry's
add, the plan's compile, its kernel tables, the first event).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from experiments._common import peak_mib
from experiments.bench_shapes import ddl, events, parameters, template, texts_of

FORMS = ("text", "file", "table")


def _status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Phases:
    """Seconds (wall and CPU), resident MiB at the end and peak MiB of each phase of a
    cell: the kernel's peak (VmHWM) is reset at each boundary (``/proc/self/clear_refs``),
    so a phase's peak is its own; the process's peak is the largest of them. The
    boundaries are the first return of the matcher's registry's ``add``, of its plan
    compile (``ensure_plan``) and of that plan's ``build_tables`` (what ran before
    them in the registering call is in their phase)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.last = (time.perf_counter(), time.process_time())
        self.peak = peak_mib()
        self._reset()

    def _reset(self) -> None:
        with contextlib.suppress(OSError):  # not Linux, or not allowed: the peaks are the process's so far
            Path("/proc/self/clear_refs").write_text("5")

    def mark(self, phase: str) -> None:
        now, peak = (time.perf_counter(), time.process_time()), peak_mib()
        self.peak = max(self.peak, peak)
        self.rows.append(
            {
                "phase": phase,
                "s": now[0] - self.last[0],
                "cpu_s": now[1] - self.last[1],
                "rss_mib": _status_mib("VmRSS"),
                "peak_mib": peak,
            }
        )
        self._reset()
        self.last = (time.perf_counter(), time.process_time())

    def wrap(self, owner: Any, name: str, phase: str, then: Any = None) -> None:
        """Mark ``phase`` when ``owner.name`` first returns (and ``then(result)``)."""
        inner = getattr(owner, name)

        def marked(*args: Any, **kwargs: Any) -> Any:
            out = inner(*args, **kwargs)
            if not any(row["phase"] == phase for row in self.rows):
                self.mark(phase)
                if then is not None:
                    then(out)
            return out

        setattr(owner, name, marked)


TYPES = ("INTEGER", "FLOAT")


def measure_ready(
    ctype: str, form: str, n: int, n_events: int, seed: int, profile: str = "", phases: bool = False
) -> dict[str, Any]:
    """One cell, in this process (meant to be a fresh one: :func:`run_ready`)."""
    import gc

    import mqo

    marks = Phases() if phases else None
    rng = np.random.default_rng(seed)
    query, names = template("filters")
    table = parameters(names, n, ctype, rng)
    stream_events = events("filters", ctype, n_events + 1, np.random.default_rng(seed + 1))
    texts = texts_of(query, names, table, ctype) if form in ("text", "file") else []
    file = None
    if form == "file":  # a query file on disk, registered as ``mqo match --queries`` registers it
        file = tempfile.NamedTemporaryFile("w", suffix=".mqo", encoding="utf-8", delete=False)  # noqa: SIM115
        atexit.register(os.unlink, file.name)  # (the cell's interpreter's end, whatever happens)
        with file:
            for text in texts:
                file.write(text + ";\n")
        texts = []
    columns: dict[str, Any] = {}
    if form == "table":
        columns["id"] = np.array([f"s{q}" for q in range(n)], dtype=object)
        for name in names:  # (each double column let go as its integers are made: not all held twice)
            doubles = table.pop(name)
            columns[name] = doubles.astype(np.int64) if ctype == "INTEGER" else doubles
            del doubles
    del table
    if marks is not None:
        marks.mark("inputs")
    # the kernels loaded (numba's cache) before the clock starts, what every process pays
    # once: over more than 64 queries, so the wide-mask variants are among them
    warm = mqo.Matcher(ddl(ctype))
    warm.register_queries(texts_of(query, names, parameters(names, 200, ctype, rng), ctype))
    for stream, ts, values in events("filters", ctype, 6, rng):
        warm.push(stream, ts, values)
    del warm
    gc.collect()
    m = mqo.Matcher(ddl(ctype))
    if marks is not None:
        marks.mark("warm-up")
        # the matcher's own objects wrapped: its registry's add, the plan it makes and
        # that plan's kernel tables (the first event's plan is the one made then)
        marks.wrap(m.registry, "add", "registry")
        marks.wrap(m.registrations, "ensure_plan", "plan", lambda plan: marks.wrap(plan, "build_tables", "tables"))
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    made_peak = peak_mib()  # (the process's peak so far: making the inputs, loading the kernels)
    if marks is None:  # (and the peak from here on, apart: VmHWM reset)
        with contextlib.suppress(OSError):
            Path("/proc/self/clear_refs").write_text("5")
    t0 = time.perf_counter()
    if file is not None:  # (a tree before Matcher.register_query_file: the file's text, read whole)
        if hasattr(m, "register_query_file"):
            m.register_query_file(file.name)
        else:
            m.register_queries(Path(file.name).read_text(encoding="utf-8"))
    elif form == "text":
        m.register_queries(texts)
    else:
        m.register_table(query, columns, id_column="id")
    registered = time.perf_counter() - t0
    stream, ts, values = stream_events[0]
    t0 = time.perf_counter()
    found = len(m.push(stream, ts, values))
    first = time.perf_counter() - t0
    if marks is not None:
        marks.mark("first event")
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    # every full collection while matching, timed: the pause a user sees over the
    # registered queries' objects (a young collection scans only new objects)
    full: list[float] = []
    started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if info["generation"] == 2:
            if phase == "start":
                started[0] = time.perf_counter()
            else:
                full.append(time.perf_counter() - started[0])

    gc.callbacks.append(on_gc)
    times = np.empty(n_events)
    for i, (stream, ts, values) in enumerate(stream_events[1:]):
        t0 = time.perf_counter()
        found += len(m.push(stream, ts, values))
        times[i] = time.perf_counter() - t0
    gc.callbacks.remove(on_gc)
    registering_peak = max([peak_mib()] + [row["peak_mib"] for row in (marks.rows[2:] if marks is not None else ())])
    peak = max(made_peak, registering_peak)
    return {
        **({"phases": marks.rows} if marks is not None else {}),
        "full_gcs": len(full),
        "full_gc_max_ms": max(full, default=0.0) * 1000,
        "type": ctype,
        "form": form,
        "n": n,
        "register_s": registered,
        "first_ms": first * 1000,
        "ready_s": registered + first,
        "push_ms": float(times.mean() * 1000),
        "push_p99_ms": float(np.percentile(times, 99) * 1000),
        "push_p999_ms": float(np.percentile(times, 99.9) * 1000),
        "peak_mib": peak,
        "registering_peak_mib": registering_peak,
        "results": found,
    }


def run_ready(
    ctype: str,
    form: str,
    n: int,
    n_events: int,
    seed: int,
    profile: str = "",
    tree: str | None = None,
    phases: bool = False,
) -> dict[str, Any]:
    """:func:`measure_ready` in a fresh interpreter, on the code of this tree or of the
    checkout ``tree`` (this file run by path there: its ``mqo`` and workloads; never
    with ``phases`` there, which an older tree's script may not know)."""
    args = json.dumps([ctype, form, n, n_events, seed, profile] + ([True] if phases else []))
    env = dict(os.environ)
    root = tree if tree is not None else str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--cell", args],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        env=env,
    )
    return dict(json.loads(done.stdout.splitlines()[-1]))


# (figure, what, target per size or None, larger is better)
TARGETS: list[tuple[str, str, dict[tuple[int, str], float]]] = [
    ("first_ms", "first event, ms", {(n, form): limit for n, limit in ((20_000, 50), (1_000_000, 1000)) for form in FORMS}),
    ("ready_s", "ready (registered + first event), s", {(1_000_000, "text"): 10, (1_000_000, "file"): 10, (1_000_000, "table"): 2}),
    ("peak_mib", "peak RSS of the process, MiB", {(1_000_000, form): 1024 for form in FORMS}),
]  # fmt: skip


def markdown(pairs: list[tuple[dict[str, Any], dict[str, Any]]], before_name: str) -> str:
    """The cells side by side (before, after) with the targets marked."""
    lines = [
        "| cell | registration s | first event ms | ready s | push mean / p99 / p99.9 ms | peak MiB | from registering on | results |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for before, after in pairs:
        cell = f"{after['n']:,} {after['type']} {after['form']}"
        for name, d in ((before_name, before), ("now", after)):
            lines.append(
                f"| {cell}, {name} | {d['register_s']:.2f} | {d['first_ms']:,.1f} | {d['ready_s']:.2f} | "
                f"{d['push_ms']:.2f} / {d['push_p99_ms']:.2f} / {d['push_p999_ms']:,.2f} | {d['peak_mib']:,.0f} | {d.get('registering_peak_mib', float('nan')):,.0f} | {d['results']:,} |"
            )
    lines += ["", "| target | cell | before | now | met |", "| --- | --- | ---: | ---: | --- |"]
    for key, what, limits in TARGETS:
        for before, after in pairs:
            limit = limits.get((after["n"], after["form"]))
            if limit is None:
                continue
            met = "met" if after[key] <= limit else "not met"
            cell = f"{after['n']:,} {after['type']} {after['form']}"
            lines.append(f"| {what} <= {limit:,} | {cell} | {before[key]:,.2f} | {after[key]:,.2f} | {met} |")
    # a full collection while matching pauses over every registered query's objects
    for before, after in pairs:
        cell = f"{after['n']:,} {after['type']} {after['form']}"
        met = "met" if after["full_gc_max_ms"] <= after["push_p99_ms"] else "not met"
        lines.append(
            f"| no collection pause while matching (longest full collection <= push p99) | {cell} | "
            f"{before['full_gcs']} full, longest {before['full_gc_max_ms']:,.1f} ms | "
            f"{after['full_gcs']} full, longest {after['full_gc_max_ms']:,.1f} ms | {met} |"
        )
    return "\n".join(lines) + "\n"


def phases_markdown(cells: list[dict[str, Any]]) -> str:
    """Each cell's phases (``--phases``): seconds, CPU seconds, resident MiB at the end
    and the phase's own peak."""
    lines = [
        "| cell | phase | s | CPU s | resident MiB at its end | its peak MiB |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for cell in cells:
        name = f"{cell['n']:,} {cell['type']} {cell['form']}"
        for row in cell.get("phases", ()):
            lines.append(
                f"| {name} | {row['phase']} | {row['s']:.2f} | {row['cpu_s']:.2f} | "
                f"{row['rss_mib']:,.0f} | {row['peak_mib']:,.0f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("sizes", type=int, nargs="*")
    p.add_argument("--events", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--types", default=",".join(TYPES))
    p.add_argument("--forms", default=",".join(FORMS))
    p.add_argument("--phases", action="store_true", help="time and memory of each phase (Phases)")
    p.add_argument("--profile", metavar="PREFIX", default="", help="write PREFIX-<type>-<form>-<n>.prof per cell")
    p.add_argument("--before", metavar="TREE", help="a checkout of the code to compare with, each cell run there first")
    p.add_argument("--out", metavar="FILE", help="write the markdown table here (with --before, or --phases)")
    p.add_argument("--tables", nargs=2, metavar=("BEFORE", "AFTER"), help="markdown from saved JSON lines")
    p.add_argument("--cell", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.cell:
        print(json.dumps(measure_ready(*json.loads(args.cell))), flush=True)
        return 0
    pairs, cells = [], []
    if args.tables:
        before, after = ([json.loads(line) for line in Path(f).read_text().splitlines() if line] for f in args.tables)
        pairs = list(zip(before, after, strict=True))
    for n in args.sizes:
        for ctype in args.types.split(","):
            for form in args.forms.split(","):
                prof = f"{args.profile}-{ctype}-{form}-{n}.prof" if args.profile else ""
                if args.before:
                    before = run_ready(ctype, form, n, args.events, args.seed, tree=args.before)
                    print(json.dumps({"before": True, **before}), flush=True)
                after = run_ready(ctype, form, n, args.events, args.seed, prof, phases=args.phases)
                print(json.dumps(after), flush=True)
                cells.append(after)
                if args.before:
                    pairs.append((before, after))
    if pairs and args.out:
        Path(args.out).write_text(markdown(pairs, "before"))
    elif args.phases and args.out:
        Path(args.out).write_text(phases_markdown(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
