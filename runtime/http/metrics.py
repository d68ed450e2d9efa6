"""``GET /metrics``: the service's counters in Prometheus' text format (version 0.0.4).

Counters end in ``_total``; the push latency (the engine's time to match one post) is
a histogram in seconds; per-list selectivity is the share of recent tuples that satisfy
some predicate of the list, as last measured for ``GET /explain`` (the page asks for it
every few seconds; measuring it on every scrape would take the engine's time).
"""

from __future__ import annotations

import os
import resource
from typing import Any

from runtime.http.service import LATENCY_BUCKETS, Service

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def resident_bytes() -> int:
    """The process's resident memory now (Linux), else its peak."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_resident_bytes()


def peak_resident_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(service: Service, sse_clients: int) -> str:
    stats = service.stats
    with service.lock:
        held = len(service.ring)
        queries = len(service.queries)
        summary = dict(service.summary)
        selectivity = dict(service.selectivity)
    out: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, Any]]) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(f"{name}{labels} {value}" for labels, value in samples)

    metric("mqo_tuples_in_total", "counter", "Tuples matched (good rows of accepted posts).", [("", stats.tuples)])
    metric("mqo_results_out_total", "counter", "Match results found.", [("", stats.results)])
    metric("mqo_aggregate_rows_out_total", "counter", "Aggregate rows emitted.", [("", stats.aggregate_rows)])
    metric(
        "mqo_late_total",
        "counter",
        "Late tuples (older than the watermark; not matched).",
        [("", summary.get("late", 0))],
    )
    metric("mqo_rejected_total", "counter", "Bad rows refused in posts.", [("", stats.rejected)])
    metric("mqo_posts_total", "counter", "Accepted posts of tuples.", [("", stats.posts)])
    metric(
        "mqo_duplicate_posts_total",
        "counter",
        "Posts answered again by their Idempotency-Key.",
        [("", stats.duplicates)],
    )
    metric("mqo_busy_total", "counter", "Requests refused because the ingest queue was full.", [("", stats.busy)])
    metric(
        "mqo_results_dropped_total",
        "counter",
        "Results dropped from the result buffer (its size or age limit).",
        [("", stats.dropped)],
    )
    metric("mqo_queries", "gauge", "Registered queries.", [("", queries)])
    metric("mqo_results_held", "gauge", "Results held for readers (GET /results).", [("", held)])
    metric("mqo_ordered_results_held", "gauge", "Results held for ordered emission.", [("", summary.get("held", 0))])
    metric("mqo_ingest_queue", "gauge", "Jobs waiting for the engine.", [("", service.queued)])
    metric("mqo_sse_clients", "gauge", "Open result streams.", [("", sse_clients)])
    watermark = summary.get("watermark")
    metric(
        "mqo_watermark",
        "gauge",
        "The matcher's watermark (NaN before every active stream spoke).",
        [("", "NaN" if watermark is None else repr(watermark))],
    )
    metric("mqo_resident_memory_bytes", "gauge", "Resident memory of the service.", [("", resident_bytes())])
    metric(
        "mqo_list_selectivity",
        "gauge",
        "Share of recent tuples (pairs) satisfying some predicate of the list, as last measured.",
        [
            (f'{{kind="{kind}",list="{_label(key)}"}}', repr(value))
            for (kind, key), value in sorted(selectivity.items())
            if value is not None
        ],
    )
    buckets: list[tuple[str, Any]] = []
    running = 0
    for bound, count in zip(LATENCY_BUCKETS, stats.latency_counts, strict=False):
        running += count
        buckets.append((f'{{le="{bound}"}}', running))
    running += stats.latency_counts[-1]
    buckets.append(('{le="+Inf"}', running))
    metric("mqo_push_seconds", "histogram", "Engine time to match one post.", [])
    out.extend(f"mqo_push_seconds_bucket{labels} {value}" for labels, value in buckets)
    out.append(f"mqo_push_seconds_sum {stats.latency_sum!r}")
    out.append(f"mqo_push_seconds_count {running}")
    return "\n".join(out) + "\n"
