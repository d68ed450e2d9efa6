"""(h) of :mod:`experiments.bench`: the shape matrix.

A speed-up counts only if it holds on the shapes users bring, so the same subscription
workload is measured in every cell of

    column type {INTEGER, FLOAT} x texts {a list, a query file with ';', a table}
    x queries {filters, 2-way join, 3-way join, self-join}

each cell in a fresh interpreter (its kernels loaded from numba's cache before the
clock starts, nothing else warm): the registration rate (wall time, garbage
collection included), the first event after registering (the plan compiled and the
kernel tables built: what a user waits for), the mean, p99 and p99.9 time of the
events after it, pushed one at a time round-robin over the query kind's streams, and the
process's peak resident memory. For each query kind the table reports the worst cell
beside the best and their ratio: the target is the worst within 1.5x of the best.

Within a column type, the three text forms register the same queries, so their match
counts over the same events must be equal: each cell reports its count and the run
stops if they differ.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from experiments._common import peak_mib, row

KINDS = ("filters", "2-way join", "3-way join", "self-join")
TYPES = ("FLOAT", "INTEGER")
FORMS = ("list", "file", "table")
STREAMS = {"filters": ["E"], "2-way join": ["E", "F"], "3-way join": ["E", "F", "G"], "self-join": ["E"]}
ATTRIBUTES = 20
DOMAIN = 1_000_000


def ddl(ctype: str) -> str:
    columns = ", ".join(f"a{i} {ctype}" for i in range(ATTRIBUTES))
    return " ".join(f"REGISTER STREAM {s} ({columns});" for s in ("E", "F", "G"))


def template(kind: str) -> tuple[str, list[str]]:
    """The kind's query with ``:name`` parameters, and the parameters' names.

    filters: 10 intervals on E (the Rein/TAMA shape). Joins: 3 intervals on each stream
    and a band join between consecutive streams (``x.a0 <= y.a0 + :c``), within a
    MAXWINDOW of 10 s. The attributes an interval tests are fixed per kind (a template
    has fixed columns), the constants vary per subscription."""
    if kind == "filters":
        terms = [f"E.a{a} >= :lo{a} AND E.a{a} <= :hi{a}" for a in range(10)]
        return "SELECT * FROM E WHERE " + " AND ".join(terms), [f"{p}{a}" for a in range(10) for p in ("lo", "hi")]
    aliases = {"2-way join": ["E", "F"], "3-way join": ["E", "F", "G"], "self-join": ["e1", "e2"]}[kind]
    from_ = "E e1, E e2" if kind == "self-join" else ", ".join(aliases)
    terms, names = [], []
    for k, alias in enumerate(aliases):
        for a in range(3):
            col = 3 * k + a
            terms.append(f"{alias}.a{col} >= :lo{k}_{a} AND {alias}.a{col} <= :hi{k}_{a}")
            names += [f"lo{k}_{a}", f"hi{k}_{a}"]
    for k in range(len(aliases) - 1):
        terms.append(f"{aliases[k]}.a19 <= {aliases[k + 1]}.a19 + :c{k}")
        names.append(f"c{k}")
    return f"SELECT * FROM {from_} MAXWINDOW 10 WHERE " + " AND ".join(terms), names


def parameters(names: list[str], n: int, ctype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Each subscription's constants: intervals half the domain wide at a random place;
    band offsets within a tenth of the domain."""
    table: dict[str, np.ndarray] = {}
    for name in names:
        if name.startswith("lo"):
            lo = rng.uniform(0, DOMAIN / 2, n)
            table[name] = lo
            table["hi" + name[2:]] = lo + DOMAIN / 2
        elif name.startswith("c"):
            table[name] = rng.uniform(-DOMAIN / 10, DOMAIN / 10, n)
    for name, values in table.items():
        table[name] = values.round() if ctype == "INTEGER" else values.round(1)
    return table


def texts_of(query: str, names: list[str], table: dict[str, np.ndarray], ctype: str) -> list[str]:
    """The subscriptions written out, as a user's program would print them (made a
    block of subscriptions at a time: a million subscriptions' constants as Python
    numbers at once would be the process's peak memory, not the matcher's)."""
    order = sorted(names, key=len, reverse=True)  # a longer name first: no prefix is cut
    out = []
    n = len(table[names[0]])
    for first in range(0, n, 10_000):
        columns = {
            name: (table[name][first : first + 10_000].astype(np.int64) if ctype == "INTEGER" else table[name][first : first + 10_000]).tolist()
            for name in names
        }  # fmt: skip
        for i in range(len(columns[names[0]])):
            text = query
            for name in order:
                text = text.replace(f":{name}", repr(columns[name][i]))
            out.append(f"Query ID: s{first + i}\n{text}")
    return out


def events(kind: str, ctype: str, count: int, rng: np.random.Generator) -> list[tuple[str, float, dict[str, Any]]]:
    """``count`` events round-robin over the kind's streams, one second apart."""
    streams = STREAMS[kind]
    values = rng.uniform(0, DOMAIN, (count, ATTRIBUTES))
    if ctype == "INTEGER":
        values = values.round()
    out = []
    for i in range(count):
        row_values = [int(v) for v in values[i]] if ctype == "INTEGER" else values[i].tolist()
        out.append((streams[i % len(streams)], float(i), {f"a{j}": v for j, v in enumerate(row_values)}))
    return out


def measure_cell(kind: str, ctype: str, form: str, n: int, n_events: int, seed: int) -> dict[str, Any]:
    """One cell, in this process (meant to be a fresh one: :func:`run_cell`)."""
    import gc

    import mqo

    rng = np.random.default_rng(seed)
    query, names = template(kind)
    table = parameters(names, n, ctype, rng)
    stream_events = events(kind, ctype, n_events + 1, np.random.default_rng(seed + 1))
    texts = texts_of(query, names, table, ctype) if form != "table" else []
    file_text = "\n".join(t + ";" for t in texts) if form == "file" else ""
    # the kernels loaded (numba's cache) before the clock starts: what every run pays
    # once (over 64 texts: the template cache's scan and the wide-mask variants among them)
    warm = mqo.Matcher(ddl(ctype))
    warm.register_queries(texts_of(query, names, parameters(names, 200, ctype, rng), ctype))
    for stream, ts, values in events(kind, ctype, 6, rng):
        warm.push(stream, ts, values)
    del warm
    gc.collect()
    m = mqo.Matcher(ddl(ctype))
    t0 = time.perf_counter()
    if form == "list":
        m.register_queries(texts)
    elif form == "file":
        m.register_queries(file_text)
    else:
        table_columns: dict[str, Any] = {"id": np.array([f"s{q}" for q in range(n)], dtype=object)}
        for name in names:
            table_columns[name] = table[name].astype(np.int64) if ctype == "INTEGER" else table[name]
        m.register_table(query, table_columns, id_column="id")
    registered = time.perf_counter() - t0
    stream, ts, values = stream_events[0]
    t0 = time.perf_counter()
    found = len(m.push(stream, ts, values))
    first = time.perf_counter() - t0
    times = np.empty(n_events)
    for i, (stream, ts, values) in enumerate(stream_events[1:]):
        t0 = time.perf_counter()
        found += len(m.push(stream, ts, values))
        times[i] = time.perf_counter() - t0
    peak = peak_mib()
    return {
        "kind": kind,
        "type": ctype,
        "form": form,
        "register_per_s": n / registered,
        "first_ms": first * 1000,
        "push_ms": float(times.mean() * 1000),
        "push_p99_ms": float(np.percentile(times, 99) * 1000),
        "push_p999_ms": float(np.percentile(times, 99.9) * 1000),
        "peak_mib": peak,
        "results": found,
    }


def run_cell(kind: str, ctype: str, form: str, n: int, n_events: int, seed: int) -> dict[str, Any]:
    """:func:`measure_cell` in a fresh interpreter."""
    call = f"measure_cell({kind!r}, {ctype!r}, {form!r}, {n}, {n_events}, {seed})"
    code = f"import json; from experiments.bench_shapes import measure_cell; print(json.dumps({call}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.splitlines()[-1]))


# (key, what, whether a larger value is better); the spread is worse over better either way
FIGURES: list[tuple[str, str, bool]] = [
    ("register_per_s", "registration, queries/s", True),
    ("first_ms", "first event after registering, ms", False),
    ("push_ms", "push, mean ms per event after the first", False),
    ("push_p99_ms", "push, p99 ms", False),
    ("push_p999_ms", "push, p99.9 ms (a garbage collection over the registered queries shows here)", False),
    ("peak_mib", "peak resident memory of the process, MiB", False),
]


def bench_shapes(n: int, n_events: int, seed: int, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """Every cell of the matrix at ``n`` subscriptions, then per query kind and figure
    the worst cell beside the best."""
    cells = []
    for kind in KINDS:
        for ctype in TYPES:
            counts = set()
            for form in FORMS:
                progress(f"h: {kind}, {ctype} columns, {form}: {n:,} subscriptions")
                cell = run_cell(kind, ctype, form, n, n_events, seed)
                counts.add(cell["results"])
                cells.append(cell)
            if len(counts) != 1:
                raise AssertionError(f"h: {kind}, {ctype}: the text forms found different results: {sorted(counts)}")
    rows = []
    for kind in KINDS:
        mine = [c for c in cells if c["kind"] == kind]
        for key, what, larger_is_better in FIGURES:
            ordered = sorted(mine, key=lambda c: c[key], reverse=larger_is_better)
            best, worst = ordered[0], ordered[-1]
            spread = best[key] / worst[key] if larger_is_better else worst[key] / best[key]
            rows.append(
                row("h", f"{kind}, {n:,} subscriptions: {what}, worst cell ({worst['type']}, {worst['form']})",
                    worst[key], target="worst within 1.5x of best", met=spread <= 1.5,
                    note=f"best ({best['type']}, {best['form']}): {best[key]:,.3f}; worst/best {spread:.2f}x; "
                    + ", ".join(f"{c['type'][0]}/{c['form']} {c[key]:,.3f}" for c in mine))
            )  # fmt: skip
    return rows
