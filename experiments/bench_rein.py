"""mqo against Rein, one event at a time, on the same subscriptions and events.

Rein (Qian et al., an exact C++ matcher of interval subscriptions) is the peer the
publish/subscribe literature measures against. Its code is not part of mqo and is never
committed here: give the folder of its public sources (the ``Rein`` folder of the
``xizeroplus/matching-algorithm`` repository, which holds ``rein.h`` and ``rein.cpp``)
and this mode builds :file:`experiments/peer_drivers/rein_driver.cpp` (our small driver)
against it with ``g++ -O3``::

    python -m experiments.bench_rein --rein-src /path/to/matching-algorithm/Rein \\
        --sizes 20000,100000,1000000

The workload: 20 INTEGER attributes on a domain of 1,000,000; a subscription tests 10
attributes chosen at random, each within an interval half the domain wide (Rein's
interval workload); events give all 20 attributes. Both sides read the same dump. For
each size, each side runs in a fresh process:

- Rein: insert all subscriptions, then match each event (its time per event), peak RSS.
- mqo: register the subscriptions as query texts (``register_queries``, INTEGER
  columns), the first event after registering, then ``push`` of each event one at a
  time (mean and p99), peak RSS of the whole interpreter.

The number of matches of every event is checked equal on both sides and against a
brute-force numpy evaluation. The table goes to ``experiments/results/bench/rein.md``
(``--out`` to change); ratios compare measurements of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from experiments._common import RESULTS, dirty_tree, git_commit, peak_mib
from experiments.bench_pubsub import pubsub_texts

ATTRIBUTES = 20
SIZE = 10  # attributes a subscription tests
DOMAIN = 1_000_000
WIDTH = DOMAIN // 2
DRIVER = Path(__file__).resolve().parent / "peer_drivers" / "rein_driver.cpp"


def workload(n: int, events: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``attrs[q]``, ``lo[q]`` of each subscription (``hi = lo + WIDTH``) and the events'
    values (``events`` x ``ATTRIBUTES``), all integers."""
    rng = np.random.default_rng(seed + n)
    attrs = np.argsort(rng.random((n, ATTRIBUTES)), axis=1)[:, :SIZE]  # SIZE distinct attributes each
    lo = rng.integers(0, DOMAIN - WIDTH, (n, SIZE))
    values = rng.integers(0, DOMAIN, (events, ATTRIBUTES))
    return attrs, lo, values


def brute_force(attrs: np.ndarray, lo: np.ndarray, values: np.ndarray) -> list[int]:
    """Matches per event, by plain numpy over every subscription."""
    out = []
    for event in values:
        v = event[attrs]
        out.append(int(((v >= lo) & (v <= lo + WIDTH)).all(axis=1).sum()))
    return out


def dump(folder: Path, attrs: np.ndarray, lo: np.ndarray, values: np.ndarray) -> tuple[Path, Path]:
    subs, events = folder / "subscriptions.txt", folder / "events.txt"
    triples = np.stack([attrs, lo, lo + WIDTH], axis=2).reshape(len(attrs), -1)
    with subs.open("w") as f:
        f.write(f"{len(attrs)} {SIZE} {ATTRIBUTES} {DOMAIN}\n")
        np.savetxt(f, triples, fmt="%d")
    with events.open("w") as f:
        f.write(f"{len(values)} {ATTRIBUTES}\n")
        np.savetxt(f, values, fmt="%d")
    return subs, events


def build_driver(rein_src: Path, folder: Path) -> Path:
    for name in ("rein.h", "rein.cpp"):
        if not (rein_src / name).is_file():
            raise SystemExit(f"--rein-src {rein_src}: no {name} there (give the folder that holds Rein's rein.h)")
    binary = folder / "rein_driver"
    command = ["g++", "-O3", "-std=c++11", f"-I{rein_src}", "-o", str(binary), str(DRIVER), str(rein_src / "rein.cpp")]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"building the Rein driver failed:\n{' '.join(command)}\n{done.stderr}")
    return binary


def run_rein(binary: Path, subs: Path, events: Path, folder: Path) -> dict[str, Any]:
    out = folder / "rein_out.txt"
    subprocess.run([str(binary), str(subs), str(events), str(out)], check=True)
    lines = out.read_text().split("\n")
    insert_s = float(lines[0].split()[1])
    peak_kib = int(lines[1].split()[1])
    pairs = np.array([[int(x) for x in line.split()] for line in lines[2:] if line])
    return {
        "insert_s": insert_s,
        "peak_mib": peak_kib / 1024,
        "counts": pairs[:, 0].tolist(),
        "ms": (pairs[:, 1] / 1e6).tolist(),
    }


def measure_mqo(subs: str, events: str) -> dict[str, Any]:
    """mqo on the dumped workload, in this process (meant to be a fresh one)."""
    import gc

    import mqo

    lines = Path(subs).read_text().split("\n")
    n, size, attributes, _ = (int(x) for x in lines[0].split())
    triples = np.array([line.split() for line in lines[1 : n + 1]], dtype=np.int64).reshape(n, size, 3)
    query_texts = pubsub_texts(triples[:, :, 0], triples[:, :, 1], triples[:, :, 2])
    event_lines = Path(events).read_text().split("\n")
    values = np.array([line.split() for line in event_lines[1:] if line], dtype=np.int64)
    ddl = "REGISTER STREAM E (" + ", ".join(f"a{i} INTEGER" for i in range(attributes)) + ");"
    names = [f"a{i}" for i in range(attributes)]
    rows = [dict(zip(names, event, strict=True)) for event in values.tolist()]
    warm = mqo.Matcher(ddl)  # the kernels loaded from numba's cache before the clock starts
    warm.register_queries(query_texts[:5])
    warm.push("E", 0.0, rows[0])
    del warm
    gc.collect()
    m = mqo.Matcher(ddl)
    t0 = time.perf_counter()
    m.register_queries(query_texts)
    register_s = time.perf_counter() - t0
    counts, ms = [], []
    for i, row in enumerate(rows):
        t0 = time.perf_counter()
        found = m.push("E", float(i), row)
        ms.append((time.perf_counter() - t0) * 1000)
        counts.append(len(found))
    return {
        "register_s": register_s,
        "first_ms": ms[0],
        "counts": counts,
        "ms": ms[1:],
        "peak_mib": peak_mib(),
    }


def run_mqo(subs: Path, events: Path) -> dict[str, Any]:
    code = f"import json; from experiments.bench_rein import measure_mqo; print(json.dumps(measure_mqo({str(subs)!r}, {str(events)!r})))"
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root)
    if done.returncode != 0:
        raise SystemExit(f"the mqo side failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().split("\n")[-1])


def compare(n: int, events: int, seed: int, binary: Path, folder: Path) -> dict[str, Any]:
    attrs, lo, values = workload(n, events + 1, seed)
    expected = brute_force(attrs, lo, values)
    subs, event_file = dump(folder, attrs, lo, values)
    print(f"[rein] {n:,} subscriptions: Rein", file=sys.stderr, flush=True)
    rein = run_rein(binary, subs, event_file, folder)
    print(f"[rein] {n:,} subscriptions: mqo", file=sys.stderr, flush=True)
    ours = run_mqo(subs, event_file)
    for side, got in (("Rein", rein["counts"]), ("mqo", ours["counts"])):
        if got != expected:
            wrong = next(i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b)
            raise AssertionError(
                f"{side}, {n} subscriptions: event {wrong} has {got[wrong]} matches, not {expected[wrong]}"
            )
    rein_ms = float(np.mean(rein["ms"][1:]))  # (the first event aside on both sides)
    mqo_ms = float(np.mean(ours["ms"]))
    return {
        "subscriptions": n,
        "events": events,
        "matches_per_event": float(np.mean(expected)),
        "rein_ms": rein_ms,
        "rein_insert_s": rein["insert_s"],
        "rein_peak_mib": rein["peak_mib"],
        "mqo_ms": mqo_ms,
        "mqo_p99_ms": float(np.percentile(ours["ms"], 99)),
        "mqo_register_s": ours["register_s"],
        "mqo_first_ms": ours["first_ms"],
        "mqo_peak_mib": ours["peak_mib"],
        "rein_over_mqo": rein_ms / mqo_ms,
    }


def markdown(cells: list[dict[str, Any]], seconds: float) -> str:
    commit = git_commit() + (" (uncommitted changes)" if dirty_tree() else "")
    lines = [
        "# mqo against Rein, one event at a time",
        "",
        f"Run: `python -m experiments.bench_rein` at commit `{commit}`, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f} at the end, {seconds:.0f} s. Same subscriptions and events on both "
        "sides (20 INTEGER attributes, 10 random intervals of half the domain per subscription); every event's "
        "number of matches checked equal on both sides and against brute force. Rein: its public C++ sources "
        "built with g++ -O3 and our driver (`experiments/peer_drivers/rein_driver.cpp`).",
        "",
        "| subscriptions | matches per event | Rein ms per event | mqo push ms per event (p99) | Rein / mqo "
        "| Rein insert all, s | mqo register from text, s | mqo first event, ms | Rein peak RSS, MiB "
        "| mqo peak RSS, MiB |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in cells:
        lines.append(
            f"| {c['subscriptions']:,} | {c['matches_per_event']:.1f} | {c['rein_ms']:.3f} "
            f"| {c['mqo_ms']:.3f} ({c['mqo_p99_ms']:.3f}) | {c['rein_over_mqo']:.2f}x | {c['rein_insert_s']:.3f} "
            f"| {c['mqo_register_s']:.2f} | {c['mqo_first_ms']:.1f} | {c['rein_peak_mib']:.0f} "
            f"| {c['mqo_peak_mib']:.0f} |"
        )
    lines += [
        "",
        "Rein / mqo above 1 means mqo matches an event faster. Peak RSS is the whole process on each side "
        "(mqo's includes the Python interpreter, numpy, numba and the query texts).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.bench_rein", description=__doc__.split("\n\n")[0])
    p.add_argument("--rein-src", type=Path, required=True, help="the folder of Rein's sources (rein.h, rein.cpp)")
    p.add_argument("--sizes", default="20000,100000", help="subscription counts, comma separated")
    p.add_argument("--events", type=int, default=300, help="events matched after the first (default 300)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS / "bench" / "rein.md")
    args = p.parse_args(argv)
    started = time.perf_counter()
    cells = []
    with tempfile.TemporaryDirectory(prefix="mqo-rein-") as tmp:
        folder = Path(tmp)
        binary = build_driver(args.rein_src.resolve(), folder)
        for n in (int(s) for s in args.sizes.split(",")):
            cells.append(compare(n, args.events, args.seed, binary, folder))
            print(json.dumps(cells[-1]), file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(markdown(cells, time.perf_counter() - started))
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
