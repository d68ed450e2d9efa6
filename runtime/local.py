"""Running a matcher over files on this machine: the engine behind ``mqo match``.

Reads every input, merges them in arrival order, pushes each tuple, writes the matches
as they come, sets bad rows and late tuples aside in files of their own (nothing is
dropped silently), shows progress on stderr for long inputs, and returns a summary.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import IO

import numpy as np

from mqo import Matcher
from mqo.batch import MatchBatch
from mqo.results import LateTuple
from runtime.inputs import BadRow, InputSpec, StreamData, merge, read_inputs
from runtime.outputs import open_writer, value_types, write_jsonl

_FLUSH_EVERY = 50_000  # results held before they are written


@dataclass
class Summary:
    tuples: int = 0
    per_stream: dict[str, int] = field(default_factory=dict)
    results: int = 0
    late: int = 0
    rejected: int = 0
    seconds: float = 0.0
    output: str = ""
    late_path: str | None = None
    rejects_path: str | None = None

    def lines(self) -> list[str]:
        streams = ", ".join(f"{name}: {n:,}" for name, n in self.per_stream.items())
        out = [
            f"tuples:   {self.tuples:,} ({streams})",
            f"results:  {self.results:,} -> {self.output}",
            f"late:     {self.late:,}" + (f" -> {self.late_path}" if self.late_path else ""),
            f"rejected: {self.rejected:,}" + (f" -> {self.rejects_path}" if self.rejects_path else ""),
            f"time:     {self.seconds:.2f} s",
        ]
        return out


class Progress:
    """A one-line progress bar on stderr, redrawn at most every 0.2 s."""

    def __init__(self, total: int, enabled: bool, out: IO[str] | None = None) -> None:
        self.total = total
        self.enabled = enabled
        self.out = out if out is not None else sys.stderr
        self.start = time.perf_counter()
        self._last = 0.0

    def update(self, done: int, results: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < 0.2 and done < self.total:
            return
        self._last = now
        frac = done / self.total if self.total else 1.0
        bar = "#" * int(frac * 30)
        rate = done / (now - self.start) if now > self.start else 0.0
        self.out.write(
            f"\r[{bar:<30}] {frac:6.1%}  {done:,}/{self.total:,} tuples  {results:,} results  {rate:,.0f} tuples/s"
        )
        self.out.flush()

    def finish(self) -> None:
        if self.enabled:
            self.out.write("\n")
            self.out.flush()


def arrival_order(data: list[StreamData]) -> tuple[np.ndarray, np.ndarray]:
    """(input, row) of every tuple in arrival order (see :func:`runtime.inputs.merge`).
    When every input is in timestamp order, that is a sort by (ts, input, row)."""
    if all(np.all(np.diff(np.asarray(d.ts, np.float64)) >= 0) for d in data):
        ts = np.concatenate([np.asarray(d.ts, np.float64) for d in data]) if data else np.zeros(0)
        which = (
            np.concatenate([np.full(len(d), k, np.int64) for k, d in enumerate(data)])
            if data
            else np.zeros(0, np.int64)
        )
        rows = np.concatenate([np.arange(len(d), dtype=np.int64) for d in data]) if data else np.zeros(0, np.int64)
        order = np.lexsort((rows, which, ts))
        return which[order], rows[order]
    pairs = list(merge(data))
    return np.array([k for k, _ in pairs], np.int64), np.array([i for _, i in pairs], np.int64)


def _number_in_arrival_order(data: list[StreamData], which: np.ndarray, rows: np.ndarray) -> None:
    """Give rows without an id column the automatic ids (0, 1, 2, ... per stream in
    arrival order, across all files of the stream)."""
    if all(d.ids is not None for d in data):
        return
    streams = sorted({d.stream for d in data})
    stream_of = np.array([streams.index(d.stream) for d in data], np.int64)
    per_stream = stream_of[which]
    rank = np.empty(len(which), np.int64)
    for s in range(len(streams)):
        chosen = per_stream == s
        rank[chosen] = np.arange(int(chosen.sum()))
    for k, d in enumerate(data):
        if d.ids is None:
            ids = np.empty(len(d), np.int64)
            chosen = which == k
            ids[rows[chosen]] = rank[chosen]
            d.ids = ids.tolist()


def run_match(
    matcher: Matcher,
    inputs: list[InputSpec],
    output: str,
    fmt: str,
    *,
    on_bad_row: str = "error",
    rejects_path: str | None = None,
    late_path: str | None = None,
    progress: bool | None = None,
) -> Summary:
    started = time.perf_counter()
    plan = matcher.plan
    data = read_inputs(inputs, plan.catalog, on_bad_row)
    rejected: list[BadRow] = [row for d in data for row in d.rejected]
    late: list[LateTuple] = []
    matcher.late_sink = late.append
    summary = Summary(output=output)
    total = sum(len(d) for d in data)
    bar = Progress(total, progress if progress is not None else (sys.stderr.isatty() and total >= 50_000))
    # The attribute phase of every file runs in the batch kernels first; the rows are
    # then replayed in merged arrival order (only rows some query wants cost more).
    which, rows = arrival_order(data)
    _number_in_arrival_order(data, which, rows)
    prepared = [matcher.prepare(d.stream, d.as_batch()) for d in data]
    pending = MatchBatch(plan)
    waiting = 0
    with open_writer(output, fmt, value_types(matcher)) as writer:
        for position, blocks in matcher.replay(prepared, which, rows):
            if blocks:
                pending.blocks.extend(blocks)
                waiting += sum(len(b) for b in blocks)
                if waiting >= _FLUSH_EVERY:
                    waiting = 0
                    summary.results += writer.write_batch(pending)
                    pending = MatchBatch(plan)
            bar.update(position + 1, summary.results + waiting)
        summary.results += writer.write_batch(pending)
    bar.update(total, summary.results)
    bar.finish()
    summary.tuples = total
    for d in data:
        summary.per_stream[d.stream] = summary.per_stream.get(d.stream, 0) + len(d)
    summary.late = len(late)
    summary.rejected = len(rejected)
    base = "mqo" if output == "-" else output
    if late:
        summary.late_path = late_path or f"{base}.late.jsonl"
        write_jsonl(summary.late_path, (t.as_dict() for t in late))
    if rejected:
        summary.rejects_path = rejects_path or f"{base}.rejects.jsonl"
        write_jsonl(summary.rejects_path, (r.as_dict() for r in rejected))
    summary.seconds = time.perf_counter() - started
    return summary
