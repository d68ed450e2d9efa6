"""A bounded load test of ``mqo serve --http`` on loopback (not part of bench.py's
default run): ``--clients`` concurrent clients post ``--tuples`` tuples in batches of
``--batch`` rows (CSV, the file reader's format) while one more client registers and
removes queries, against ``--queries`` standing queries registered first.

It measures, in one run: the service's throughput (tuples per second of wall time
from the second post to the last answer; the first, like the
in-process run's first batch, loads the kernels and is not timed), the same batches pushed in-process through
``Matcher.push_batch`` (results encoded to JSON lines as the service encodes them, and
without encoding), request latency p50/p99, the churn client's operations, answers 429
(ingest queue full; the client waits and retries), and the service's peak resident
memory (VmHWM). The results read back through ``GET /results`` are checked equal (as
multisets of lines) to what ``mqo match`` writes for the same tuples and queries; the
churned queries' results are left out of the comparison (they saw only part of the
input).

Tuples carry ids, and the service runs with a lateness as large as the whole input, so
the order in which the concurrent posts arrive changes no result.

    python -m experiments.bench_http [--tuples 1000000] [--queries 10000] [--clients 8]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

SCHEMA = "REGISTER STREAM B (pressure FLOAT, temp FLOAT, alert INTEGER);\n"
OUT = Path(__file__).parent / "results" / "bench" / "http.md"
RANGE = 1_000_000.0
WIDTH = 10.0  # each query reads a pressure range of this width: 1e-5 of the tuples


def make_queries(n: int, seed: int) -> str:
    rng = random.Random(seed)
    parts = []
    for k in range(n):
        low = rng.randrange(0, int(RANGE - WIDTH))
        parts.append(f"Query ID: q{k}\nSELECT * FROM B WHERE B.pressure >= {low} AND B.pressure < {low + WIDTH:g};\n")
    return "".join(parts)


def make_tuples(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "ts": np.arange(n, dtype=np.float64) / 1000.0,
        "id": np.arange(n, dtype=np.int64),
        "pressure": rng.integers(0, int(RANGE), n).astype(np.float64),
        "temp": np.round(rng.uniform(20, 120, n), 2),
        "alert": rng.integers(0, 2, n),
    }


def csv_of(tuples: dict[str, np.ndarray], lo: int, hi: int) -> bytes:
    lines = ["ts,id,pressure,temp,alert"]
    ts, ids, p, t, a = (tuples[c][lo:hi].tolist() for c in ("ts", "id", "pressure", "temp", "alert"))
    lines.extend(f"{ts[i]!r},{ids[i]},{p[i]!r},{t[i]!r},{a[i]}" for i in range(hi - lo))
    return ("\n".join(lines) + "\n").encode()


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def in_process(queries: str, tuples: dict[str, np.ndarray], batch: int, encode: bool) -> tuple[float, int]:
    """Seconds to push every batch through one matcher (the service's settings), and the results."""
    from mqo import Matcher

    m = Matcher(SCHEMA, idle_timeout=None, allowed_lateness=1e12)
    m.register_queries(queries)
    m.ensure_plan()
    n = len(tuples["ts"])
    results = 0
    started = time.perf_counter()
    for lo in range(0, n, batch):
        if lo == batch:  # the first batch loads the kernels: not timed, as for the service
            started = time.perf_counter()
        out = m.push_batch("B", {c: v[lo : lo + batch] for c, v in tuples.items()})
        if encode:
            chunks: list[bytes] = []
            out.write_json(chunks.append)
            results += b"".join(chunks).count(b"\n")
        else:
            results += len(out)
    return time.perf_counter() - started, results


def peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    work = Path(tempfile.mkdtemp(prefix="bench-http-"))
    (work / "s.ddl").write_text(SCHEMA)
    queries = make_queries(args.queries, 1)
    (work / "q.mqo").write_text(queries)
    tuples = make_tuples(args.tuples, 2)
    n = args.tuples
    bodies = [csv_of(tuples, lo, min(n, lo + args.batch)) for lo in range(0, n, args.batch)]
    (work / "B.csv").write_bytes(csv_of(tuples, 0, n))

    print(f"in-process push_batch of {n:,} tuples against {args.queries:,} queries...", file=sys.stderr)
    # the machine is shared: each in-process figure is the better of a run before and one after the service's
    inproc = [in_process(queries, tuples, args.batch, encode=True)]
    bare = [in_process(queries, tuples, args.batch, encode=False)]

    cmd = [sys.executable, "-m", "runtime.cli"]
    service = subprocess.Popen(
        [*cmd, "serve", "--http", "127.0.0.1:0", "--schema", str(work / "s.ddl"), "--allowed-lateness", "1e12",
         "--keep-results", "100000000", "--max-queries", str(max(10_000, args.queries)), "--queue", str(args.queue),
         "--max-rows", str(max(100_000, args.batch))],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert service.stderr is not None
    line = service.stderr.readline()
    found = re.search(r"HTTP on (http://\S+?)/ ", line)
    if found is None:
        raise SystemExit(f"the service did not start: {line}{service.stderr.read()}")
    url = found.group(1)
    threading.Thread(target=service.stderr.read, daemon=True).start()
    try:
        with httpx.Client(base_url=url, timeout=600) as c:
            started = time.perf_counter()
            answer = c.post("/queries", content=queries)
            assert answer.status_code == 201, answer.text
            register_seconds = time.perf_counter() - started
        latencies: list[float] = []
        churn_latencies: list[float] = []
        busy = [0]
        next_batch = [0]
        lock = threading.Lock()
        posting = threading.Event()

        def client() -> None:
            with httpx.Client(base_url=url, timeout=600) as c:
                while True:
                    with lock:
                        k = next_batch[0]
                        next_batch[0] += 1
                    if k >= len(bodies):
                        return
                    while True:
                        t0 = time.perf_counter()
                        r = c.post("/streams/B", content=bodies[k], headers={"Content-Type": "text/csv"})
                        if r.status_code == 429:
                            with lock:
                                busy[0] += 1
                            time.sleep(0.05)
                            continue
                        assert r.status_code == 200 and not r.json()["rejected"], r.text
                        with lock:
                            latencies.append(time.perf_counter() - t0)
                        break

        def churn() -> None:
            rng = random.Random(3)
            k = 0
            with httpx.Client(base_url=url, timeout=600) as c:
                while posting.is_set():
                    low = rng.randrange(0, int(RANGE - WIDTH))
                    text = (
                        f"Query ID: tmp{k}\nSELECT * FROM B WHERE B.pressure >= {low} AND B.pressure < {low + WIDTH:g};"
                    )
                    t0 = time.perf_counter()
                    r = c.post("/queries", content=text)
                    if r.status_code == 429:
                        time.sleep(0.05)
                        continue
                    assert r.status_code == 201, r.text
                    churn_latencies.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    while (r := c.delete(f"/queries/tmp{k}")).status_code == 429:
                        time.sleep(0.05)
                    assert r.status_code == 204, r.text
                    churn_latencies.append(time.perf_counter() - t0)
                    k += 1

        with httpx.Client(base_url=url, timeout=600) as c:  # the first batch loads the kernels: not timed
            assert c.post("/streams/B", content=bodies[0], headers={"Content-Type": "text/csv"}).status_code == 200
        next_batch[0] = 1
        posting.set()
        churner = threading.Thread(target=churn)
        workers = [threading.Thread(target=client) for _ in range(args.clients)]
        started = time.perf_counter()
        churner.start()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        http_seconds = time.perf_counter() - started
        posting.clear()
        churner.join()
        rss = peak_rss(service.pid)
        lines: list[str] = []
        after = 0
        with httpx.Client(base_url=url, timeout=600) as c:
            while True:
                page = c.get("/results", params={"after": after, "limit": 10000})
                text = page.text
                body = page.json()
                if not body["results"]:
                    break
                assert body["missed"] == 0
                # the raw records, as the service sent them
                inner = text[len('{"results":[') : text.rindex('],"cursor":')]
                lines.extend(re.findall(r'\{"query":.*?\}\}(?=,\{"query":|$)', inner))
                after = body["cursor"]
    finally:
        service.send_signal(signal.SIGINT)
        service.wait(120)
    inproc.append(in_process(queries, tuples, args.batch, encode=True))
    bare.append(in_process(queries, tuples, args.batch, encode=False))
    inproc_seconds, inproc_results = min(inproc)
    bare_seconds = min(bare)[0]
    kept = sorted(x for x in lines if not x.startswith('{"query":"tmp'))
    match = subprocess.run(
        [*cmd, "match", "--schema", str(work / "s.ddl"), "--queries", str(work / "q.mqo"), "--input",
         f"B={work / 'B.csv'}", "--quiet"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    expected = sorted(match.stdout.splitlines())
    timed = n - len(tuples["ts"][: args.batch])  # every batch but the first
    return {
        "tuples": n,
        "queries": args.queries,
        "clients": args.clients,
        "batch": args.batch,
        "register_seconds": register_seconds,
        "http_seconds": http_seconds,
        "http_rate": timed / http_seconds,
        "inproc_rate": timed / inproc_seconds,
        "bare_rate": timed / bare_seconds,
        "p50": percentile(latencies, 50),
        "p99": percentile(latencies, 99),
        "churn_ops": len(churn_latencies),
        "churn_p50": percentile(churn_latencies, 50),
        "busy": busy[0],
        "rss": rss,
        "results": len(kept),
        "inproc_results": inproc_results,
        "equal": kept == expected,
        "expected": len(expected),
        "cpus": os.cpu_count(),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
    }


def table(r: dict[str, Any], command: str) -> str:
    ratio = r["http_rate"] / r["inproc_rate"]
    return f"""# `mqo serve --http` under load

`{command}` (loopback, {r["cpus"]} cores shared by the service, the clients and, at the time, other work:
load average {r["load"]} at the end).
{r["clients"]} clients post {r["tuples"]:,} tuples of stream B as CSV in batches of {r["batch"]:,} while one more
client registers and removes a query after another; {r["queries"]:,} range queries (`B.pressure >= a AND
B.pressure < a + 10`) were registered first in one post ({r["register_seconds"]:.1f} s).

| figure | value |
| --- | --- |
| service throughput (second post to last answer; the first loads the kernels) | {r["http_rate"]:,.0f} tuples/s ({r["http_seconds"]:.1f} s) |
| in-process `push_batch`, results encoded as JSON lines (better of a run before and after) | {r["inproc_rate"]:,.0f} tuples/s |
| in-process `push_batch` alone (better of two) | {r["bare_rate"]:,.0f} tuples/s |
| service / in-process (with JSON) | {ratio:.0%} (target 50%) |
| post latency p50 / p99 | {r["p50"] * 1000:.1f} ms / {r["p99"] * 1000:.1f} ms |
| churn: registrations and removals during the posts | {r["churn_ops"]:,} (p50 {r["churn_p50"] * 1000:.1f} ms) |
| answers 429 (queue full; retried) | {r["busy"]:,} |
| service peak resident memory (VmHWM) | {r["rss"] / 2**20:,.0f} MiB |
| results read back by cursor (churned queries' left out) | {r["results"]:,} |
| equal to `mqo match` on the same tuples and queries | {"yes" if r["equal"] else "NO"} ({r["expected"]:,} lines) |
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tuples", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--queue", type=int, default=64)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    result = run(args)
    command = "python -m experiments.bench_http " + " ".join(argv if argv is not None else sys.argv[1:])
    text = table(result, command.strip())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0 if result["equal"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
