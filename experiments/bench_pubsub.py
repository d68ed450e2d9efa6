"""The publish/subscribe benchmarks of :mod:`experiments.bench`: (c) matching and
registering interval subscriptions (the Rein/TAMA workload) and (c') live registration.

Every match set is checked: against a brute-force numpy evaluation of the same
subscriptions on the same events, and between ``push`` and ``push_batch``.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np

import mqo
import predicates
from experiments._common import row

# the stream of the pub/sub workload: 20 attributes of an event
DDL = "REGISTER STREAM E (" + ", ".join(f"a{i} FLOAT" for i in range(20)) + ");"


def rss_mb() -> float:
    """Resident memory of this process (Linux /proc), in MiB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ workloads


def pubsub_intervals(
    n: int, rng: np.random.Generator, attributes: int = 20, size: int = 10, width: float = 0.5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Subscription q tests attributes ``attrs[q]``, each within ``[lo[q], hi[q]]``."""
    domain = 1_000_000
    attrs = np.empty((n, size), np.int64)
    lo = np.empty((n, size))
    for q in range(n):
        attrs[q] = rng.choice(attributes, size, replace=False)
        lo[q] = rng.uniform(0, domain * (1 - width), size).round(1)
    return attrs, lo, lo + domain * width


def pubsub_queries(
    n: int, rng: np.random.Generator, attributes: int = 20, size: int = 10, width: float = 0.5
) -> list[str]:
    return pubsub_texts(*pubsub_intervals(n, rng, attributes, size, width))


def pubsub_texts(attrs: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[str]:
    """Subscription q as a query text (``Query ID: s<q>``); the arrays as Python lists
    first: a million subscriptions' numpy scalars would cost more than their texts."""
    return [
        f"Query ID: s{q}\nSELECT * FROM E WHERE "
        + " AND ".join(f"E.a{a} >= {low} AND E.a{a} <= {high}" for a, low, high in zip(row, lows, highs, strict=True))
        for q, (row, lows, highs) in enumerate(zip(attrs.tolist(), lo.tolist(), hi.tolist(), strict=True))
    ]


def pubsub_brute_force(attrs: np.ndarray, lo: np.ndarray, hi: np.ndarray, event: dict[str, float]) -> set[str]:
    """The subscriptions an event matches, by plain numpy over every subscription."""
    values = np.array([event[f"a{a}"] for a in range(int(attrs.max()) + 1)])[attrs]
    return {f"s{q}" for q in np.flatnonzero(((values >= lo) & (values <= hi)).all(axis=1)).tolist()}


def pubsub_table(n: int, rng: np.random.Generator, size: int = 10, width: float = 0.5) -> tuple[str, dict[str, Any]]:
    """Template-shaped subscriptions (how they live in a database): one template with an
    interval on each of ``size`` attributes, and a table of their bounds, one row each."""
    domain = 1_000_000
    template = "SELECT * FROM E WHERE " + " AND ".join(f"E.a{a} >= :lo{a} AND E.a{a} <= :hi{a}" for a in range(size))
    table: dict[str, Any] = {"id": np.array([f"s{q}" for q in range(n)], dtype=object)}
    for a in range(size):
        lo = rng.uniform(0, domain * (1 - width), n).round(1)
        table[f"lo{a}"] = lo
        table[f"hi{a}"] = lo + domain * width
    return template, table


def table_memory(n: int, seed: int) -> float:
    """Resident memory (MiB) that ``n`` table subscriptions add to this process, ready
    to match: their compiled plan and kernel tables (built by a first event); meant for
    a fresh process (:func:`_in_fresh_process`), where no earlier run has left freed
    memory for them to reuse unseen."""
    template, table = pubsub_table(n, np.random.default_rng(seed + n))
    event = {f"a{i}": 0.0 for i in range(20)}
    warm = mqo.Matcher(DDL)  # the kernels loaded before counting
    warm.register_query("SELECT * FROM E WHERE E.a0 >= 1 AND E.a1 <= 2")
    warm.push("E", 0.0, event)
    del warm
    m = mqo.Matcher(DDL)
    gc.collect()
    before = rss_mb()
    m.register_table(template, table, id_column="id")
    m.push("E", 1.0, event)
    gc.collect()
    return rss_mb() - before


def _in_fresh_process(call: str) -> float:
    """The number a call of this module's prints in a new interpreter."""
    code = f"from experiments.bench_pubsub import *; print({call})"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def bench_table_registration(sizes: list[int], seed: int) -> list[dict[str, Any]]:
    """``Matcher.register_table`` against ``register_queries`` of the same queries
    written out (at the smallest size), CPU time; resident memory of the queries, their
    compiled plan and kernel tables at each size, measured in a fresh process."""
    rows = []
    for k, n in enumerate(sizes):
        template, table = pubsub_table(n, np.random.default_rng(seed + n))
        m = mqo.Matcher(DDL)
        progress(f"c: registering {n} subscriptions from a table")
        c0 = time.process_time()
        m.register_table(template, table, id_column="id")
        table_cpu = time.process_time() - c0
        m.ensure_plan()
        memory = _in_fresh_process(f"table_memory({n}, {seed})")
        rate = n / table_cpu
        rows += [
            row("c", f"{n:,} subscriptions from a table (one template): registration, queries/s (CPU)", rate,
                target=">= 1,000,000/s", met=rate >= 1_000_000,
                note=f"{table_cpu:.2f} s CPU, the plan and kernel tables included (a bulk registration makes them)"),
            row("c", f"{n:,} subscriptions from a table: resident memory with the compiled plan and kernel tables, MiB", memory,
                target="<= 1,024 MiB" if n >= 1_000_000 else "", met=memory <= 1024 if n >= 1_000_000 else None,
                note=f"{memory * 2**20 / n:,.0f} bytes per subscription"),
        ]  # fmt: skip
        if k == 0:
            # the same queries written out as text, through the text path
            names = table["id"].tolist()
            columns = {c: v.tolist() for c, v in table.items() if c != "id"}
            texts = []
            for q, name in enumerate(names):
                text = template
                for c in sorted(columns, key=len, reverse=True):  # a longer name first: no prefix is cut
                    text = text.replace(f":{c}", repr(columns[c][q]))
                texts.append(f"Query ID: {name}\n{text}")
            m2 = mqo.Matcher(DDL)
            c0 = time.process_time()
            m2.register_queries(texts)
            text_cpu = time.process_time() - c0
            rows.append(
                row("c", f"{n:,} subscriptions from a table: the same queries from text, queries/s (CPU)", n / text_cpu,
                    note=f"table path {text_cpu / table_cpu:.1f}x faster")
            )  # fmt: skip
            del m2, texts
        del m
        gc.collect()
    return rows


def warm_kernels(texts: list[str], columns: list[str]) -> None:
    """Compile (or load from cache) the numba kernels, so that their code is not
    counted as the memory of the subscriptions measured after."""
    m = mqo.Matcher(DDL)
    m.register_queries(texts)
    data = {c: np.linspace(0, 1_000_000, 64) for c in columns}
    data["ts"] = np.arange(64, dtype=np.float64)
    m.push_batch("E", data)
    m.push("E", 100.0, {c: 1.0 for c in columns})


def bench_pubsub(sizes: list[int], events: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    targets = {20_000: 0.10, 1_000_000: 5.0}
    warm_kernels(pubsub_queries(5000, np.random.default_rng(seed)), [f"a{i}" for i in range(20)])
    for n in sizes:
        rng = np.random.default_rng(seed + n)
        progress(f"c: generating {n} subscriptions")
        intervals = pubsub_intervals(n, rng)
        texts = pubsub_texts(*intervals)
        gc.collect()
        before = rss_mb()
        m = mqo.Matcher(DDL)
        progress(f"c: registering {n} subscriptions")
        t0, c0 = time.perf_counter(), time.process_time()
        m.register_queries(texts)
        register_s, register_cpu = time.perf_counter() - t0, time.process_time() - c0
        gc.disable()  # (as registration runs: it allocates no cycles)
        caches = mqo.Matcher(DDL).registry.compiler  # (a matcher's caches, with their kernels, empty)
        c0 = time.process_time()
        predicates.compile_many(texts, caches.catalog, compiler=caches)  # where the time goes: the texts alone
        text_us = (time.process_time() - c0) / n * 1e6
        gc.enable()
        t0 = time.perf_counter()
        m.ensure_plan()
        compile_s = time.perf_counter() - t0
        gc.collect()
        memory = rss_mb() - before  # the texts were counted in before
        data = {f"a{i}": rng.uniform(0, 1_000_000, events + 1) for i in range(20)}
        data["ts"] = np.arange(events + 1, dtype=np.float64)
        t0 = time.perf_counter()
        m.push_batch("E", {c: v[:1] for c, v in data.items()})  # builds the kernel tables
        first_ms = (time.perf_counter() - t0) * 1000
        gc.collect()
        tables = rss_mb() - before - memory
        del texts
        progress(f"c: matching {events} events against {n} subscriptions")
        batch = 100
        t0 = time.perf_counter()
        matched = 0
        for start in range(1, events + 1, batch):
            matched += len(m.push_batch("E", {c: v[start : start + batch] for c, v in data.items()}))
        match_ms = (time.perf_counter() - t0) / events * 1000
        single = min(events, 200)
        pushed = [{f"a{a}": float(data[f"a{a}"][i + 1]) for a in range(20)} for i in range(single)]
        found = []
        t0 = time.perf_counter()
        for i, event in enumerate(pushed):
            found.append(m.push("E", float(events + 1 + i), event))
        single_ms = (time.perf_counter() - t0) / single * 1000
        progress(f"c: checking {single} events' match sets against brute force")
        for event, got in zip(pushed, found, strict=True):
            if {r.query for r in got} != pubsub_brute_force(*intervals, event):
                raise AssertionError(f"c: {n} subscriptions: push's match set differs from brute force")
        batched = m.push_batch(
            "E", {"ts": np.arange(single) + 2.0 * events, **{c: [e[c] for e in pushed] for c in pushed[0]}}
        )
        by_event: dict[float, set[str]] = {}
        for r in batched:
            by_event.setdefault(r.ts, set()).add(r.query)
        if [by_event.get(2.0 * events + i, set()) for i in range(single)] != [{r.query for r in got} for got in found]:
            raise AssertionError(f"c: {n} subscriptions: push_batch's match sets differ from push's")
        target = targets.get(n)
        rows += [
            row("c", f"{n:,} subscriptions: registration from text, queries/s (CPU)", n / register_cpu,
                target=">= 100,000/s", met=n / register_cpu >= 100_000,
                note=f"{register_cpu:.1f} s CPU ({register_s:.1f} s wall) to register, the plan and kernel tables "
                     f"included (a bulk registration makes them), {compile_s:.1f} s more before the first event; "
                     f"per query {register_cpu / n * 1e6:.1f} us: {text_us:.1f} us compiling its text (20 comparisons "
                     f"cut with string methods), the rest keeping it in the registry"),
            row("c", f"{n:,} subscriptions: memory per subscription, bytes", memory * 2**20 / n,
                note=f"{memory:.0f} MiB resident for the queries and the compiled plan"),
            row("c", f"{n:,} subscriptions: kernel tables, MiB", tables,
                note="the batch kernels' checkpoint bitsets, capped at 256 MiB per stream (faster matching for memory)"),
            row("c", f"{n:,} subscriptions: insert, ms per subscription", (register_s + compile_s) / n * 1000),
            row("c", f"{n:,} subscriptions: first event after registration (kernel tables built), ms", first_ms),
            row("c", f"{n:,} subscriptions: match, ms per event (push, one at a time)", single_ms,
                target=f"<= {target} ms" if target else "", met=single_ms <= target if target else None,
                note=f"{single} events; match sets checked against brute force and against push_batch"),
            row("c", f"{n:,} subscriptions: match, ms per event (batches of {batch}, beside)", match_ms,
                note=f"{matched / events:.1f} matches per event"),
        ]  # fmt: skip
        del m
        gc.collect()
    return rows


def bench_churn(n: int, batches: int, seed: int) -> list[dict[str, Any]]:
    """(c') live registration: ``n`` subscriptions, batches of 100 events; between
    batches one subscription is registered and one removed. ms per batch against the
    same batches without changes, measured alternately in one run."""
    rng = np.random.default_rng(seed + 5)
    texts = pubsub_queries(n + batches, rng)
    spare = texts[n:]
    batch = 100
    data = {f"a{i}": rng.uniform(0, 1_000_000, batch * batches) for i in range(20)}
    data["ts"] = np.arange(batch * batches, dtype=np.float64)
    cut = [{c: v[k * batch : (k + 1) * batch] for c, v in data.items()} for k in range(batches)]
    times: dict[str, list[float]] = {"still": [], "churn": []}
    register_ms: list[float] = []
    matched = {"still": 0, "churn": 0}
    progress(f"c': {n} subscriptions, {batches} batches of {batch} events, with and without churn")
    matchers = {}
    for name in times:
        m = mqo.Matcher(DDL)
        m.register_queries(texts[:n])
        m.push_batch("E", {c: v[:1] for c, v in data.items()})  # plan and kernel tables built
        matchers[name] = m
    for k in range(1, batches):
        for name, m in matchers.items():
            t0 = time.perf_counter()
            if name == "churn":
                m.register_query(spare[k])
                m.unregister_query(f"s{k}")
                register_ms.append((time.perf_counter() - t0) * 1000)
            matched[name] += len(m.push_batch("E", cut[k]))
            times[name].append((time.perf_counter() - t0) * 1000)
    still, churn = float(np.median(times["still"])), float(np.median(times["churn"]))
    worst = float(np.max(times["churn"]))
    ratio = churn / still
    return [
        row("c'", f"{n:,} subscriptions: ms per batch of {batch} events, no changes (median)", still,
            note=f"{batches - 1} batches, {matched['still'] / (batches - 1) / batch:.1f} matches per event"),
        row("c'", f"{n:,} subscriptions: ms per batch of {batch}, 1 registered + 1 removed before each (median)", churn,
            note=f"mean {float(np.mean(times['churn'])):.1f} ms (no changes: {float(np.mean(times['still'])):.1f} ms); "
                 f"worst batch {worst:.1f} ms (a whole compile once 1/16 of the subscriptions are registered since "
                 f"the last, or 1/16 removed)"),
        row("c'", "churn / no churn, ms per batch", ratio, target="<= 2x", met=ratio <= 2),
        row("c'", "register + unregister call, ms (median)", float(np.median(register_ms)), target="<= 1 ms",
            met=float(np.median(register_ms)) <= 1, note="the plan is updated lazily, in the next batch's time"),
    ]  # fmt: skip


def bench_churn_push(
    n: int, events: int, seed: int, rate: float = 1000.0, churn: float = 0.01, width: float = 0.5, check_every: int = 50
) -> list[dict[str, Any]]:
    """(c') as the target states it: ``n`` subscriptions, events pushed one at a time,
    ``rate`` events per second of event time, and ``churn`` of the subscriptions
    replaced (one registered and one removed) per second of event time. ms per event
    (every cost counted: the registration calls, plan updates and recompiles that land
    in the next push) against the same events without changes, pushed alternately in
    one run. Every ``check_every``-th event's match set is checked against brute force
    over the subscriptions registered at that moment (``width``: of each interval, as
    a share of the domain)."""
    rng = np.random.default_rng(seed + 11)
    every = max(1, round(rate / (churn * n)))  # events between two changes
    changes = events // every
    attrs, lo, hi = pubsub_intervals(n + changes, rng, width=width)
    texts = pubsub_texts(attrs, lo, hi)
    data = {f"a{i}": rng.uniform(0, 1_000_000, events) for i in range(20)}
    pushed = [{c: float(v[i]) for c, v in data.items()} for i in range(events)]
    progress(f"c': {n} subscriptions, {events} events pushed one at a time, a change every {every} events")
    matchers = {}
    for name in ("still", "churn"):
        m = mqo.Matcher(DDL)
        m.register_queries(texts[:n])
        m.push_batch("E", {"ts": [0.0], **{c: [0.0] for c in data}})  # plan and kernel tables built
        matchers[name] = m
    active = np.zeros(n + changes, bool)
    active[:n] = True
    times: dict[str, list[float]] = {"still": [], "churn": []}
    change_ms: list[float] = []
    # where a change's time goes: the calls, the plan update (which the next push would
    # make anyway, made first here to time it apart) and that next push
    update_ms: list[float] = []
    after_ms: list[float] = []
    for i, event in enumerate(pushed):
        ts = 1.0 + i / rate
        for name, m in matchers.items():
            t0 = time.perf_counter()
            changed = name == "churn" and i % every == 0 and i // every < changes
            if changed:
                k = i // every
                m.register_query(texts[n + k])
                m.unregister_query(f"s{k}")
                t1 = time.perf_counter()
                change_ms.append((t1 - t0) * 1000)
                m.ensure_plan()
                t2 = time.perf_counter()
                update_ms.append((t2 - t1) * 1000)
                active[n + k], active[k] = True, False
            got = m.push("E", ts, event)
            times[name].append((time.perf_counter() - t0) * 1000)
            if changed:
                after_ms.append((time.perf_counter() - t2) * 1000)
            if name == "churn" and i % check_every == 0:
                want = pubsub_brute_force(attrs[active], lo[active], hi[active], event)
                names = np.flatnonzero(active)
                want = {f"s{names[int(q[1:])]}" for q in want}
                if {r.query for r in got} != want:
                    raise AssertionError(f"c': event {i}: the match set under churn differs from brute force")
    still, moving = float(np.mean(times["still"])), float(np.mean(times["churn"]))
    ratio = moving / still
    p50, p99, worst = (float(np.percentile(change_ms, p)) for p in (50, 99, 100))
    # a push's tail without the events that follow a change (those carry the plan
    # update): what a garbage collection over the registered queries would show
    quiet = [t for i, t in enumerate(times["churn"]) if not (i % every == 0 and i // every < changes)]
    tail_still, tail_churn = float(np.percentile(times["still"], 99.9)), float(np.percentile(quiet, 99.9))
    return [
        row("c'", f"{n:,} subscriptions, events one at a time: ms per event, no changes (mean)", still,
            note=f"{events} events, {rate:g} per second of event time"),
        row("c'", f"{n:,} subscriptions, events one at a time: ms per event, {churn:.0%} replaced per second (mean)",
            moving, note=f"{changes} changes, one every {every} events; median event "
                         f"{float(np.median(times['churn'])):.3f} ms, worst {float(np.max(times['churn'])):.0f} ms"),
        row("c'", "churn / no churn, ms per event (one at a time)", ratio, target="<= 2x", met=ratio <= 2,
            note=f"a change costs {np.mean(change_ms) + np.mean(update_ms) + np.mean(after_ms) - still:.2f} ms more "
                 f"than a push (mean): the calls {np.mean(change_ms):.2f} ms, the plan update {np.mean(update_ms):.2f} ms "
                 f"(median {np.median(update_ms):.3f} ms: the changes since the last whole compile kept in place, "
                 f"the plan made of views of them; a whole compile once 1/16 of the subscriptions registered since, "
                 f"or 1/16 of them removed), the push after it {np.mean(after_ms):.2f} ms (median "
                 f"{np.median(after_ms):.3f} ms), against {still:.2f} ms for a push without changes"),
        row("c'", "register + unregister call, ms (p99)", p99, target="<= 0.1 ms", met=p99 <= 0.1,
            note=f"median {p50:.3f} ms, worst {worst:.1f} ms (the calls: the text compiled and registered; the "
                 f"plan is updated in the next push)"),
        row("c'", "push p99.9, ms, no changes / under churn (events after a change left out)", tail_churn,
            note=f"no changes {tail_still:.3f} ms; under churn {tail_churn:.3f} ms over {len(quiet)} events "
                 f"(a garbage collection over the registered queries would show here)"),
    ]  # fmt: skip
