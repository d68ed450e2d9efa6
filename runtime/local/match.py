"""Running a matcher over files on this machine: the engine behind ``mqo match``.

Reads every input, merges them in arrival order, matches them in batches (each stream's
attribute phase at once, then the rows in the merged order), writes the matches
as they come, sets bad rows and late tuples aside in files of their own (nothing is
dropped silently), shows progress on stderr for long inputs, and returns a summary.

Nothing is lost on the way out. Every output path is checked before any input is read
(and late or reject files of an earlier run are removed). Results are written steadily:
whenever ``_FLUSH_BLOCKS`` result assignments are waiting, and at least every
``_FLUSH_SECONDS``; the reject file is written as soon as the inputs are read, late
tuples with the results. A SIGINT or SIGTERM while matching stops the run after the
tuple it is on (:mod:`runtime.stopping`), with every result so far written whole; the
summary says how far it got.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from typing import IO

import numpy as np

from mqo import LateTuple, MatchBatch, Matcher
from runtime.io import aggregate_writers
from runtime.io.inputs import InputSpec, StreamData, merge, read_inputs
from runtime.io.writers import (
    LinesFile,
    ResultWriter,
    check_output_paths,
    open_writer,
    shown_path,
    side_paths,
)
from runtime.local.tables import TableFeed
from runtime.stopping import StopFlag, Terminated, deferred_stop, signal_name

_FLUSH_BLOCKS = 20_000  # result assignments (each one or more results) held before a write
_FLUSH_SECONDS = 1.0  # and never held longer than this


@dataclass
class Summary:
    tuples: int = 0
    per_stream: dict[str, int] = field(default_factory=dict)
    results: int = 0
    aggregates: int = 0  # aggregate rows written to a file of their own
    late: int = 0
    rejected: int = 0
    seconds: float = 0.0
    output: str = ""
    late_path: str | None = None
    rejects_path: str | None = None
    aggregates_path: str | None = None  # their own file (CSV, Parquet); else in the output
    nonfinite: int = 0  # computed values written as NULL (not finite numbers)
    total: int = 0  # tuples in the input (``tuples`` is how many were matched)
    interrupted: int | None = None  # the signal that stopped the run early
    last_ts: float | None = None  # the newest ts matched when it stopped

    def lines(self) -> list[str]:
        streams = ", ".join(f"{name}: {n:,}" for name, n in self.per_stream.items())
        out = [
            f"tuples:   {self.tuples:,} ({streams})",
            f"results:  {self.results:,} -> {shown_path(self.output)}",
            *([f"aggregates: {self.aggregates:,} -> {self.aggregates_path}"] if self.aggregates_path else []),
            f"late:     {self.late:,}" + (f" -> {self.late_path}" if self.late_path else ""),
            f"rejected: {self.rejected:,}" + (f" -> {self.rejects_path}" if self.rejects_path else ""),
            f"time:     {self.seconds:.2f} s",
        ]
        if self.nonfinite:
            out.append(
                f"warning: {self.nonfinite:,} computed value(s) were not finite numbers (overflow) and are written"
                " as NULL"
            )
        return out

    def interruption(self) -> str | None:
        """What an interrupted run wrote, or None if it ran to the end."""
        if self.interrupted is None:
            return None
        name = signal_name(self.interrupted)
        if not self.per_stream:
            return f"interrupted ({name}) while reading the input; nothing was matched"
        if self.last_ts is None:
            return f"interrupted ({name}) after 0 of {self.total:,} tuples; nothing was matched"
        return (
            f"interrupted ({name}) after {self.tuples:,} of {self.total:,} tuples; {shown_path(self.output)} holds"
            f" every result of those tuples, up to ts {self.last_ts!r}"
        )


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
    """(input, row) of every tuple in arrival order (see :func:`runtime.io.inputs.merge`).
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


def number_in_arrival_order(
    data: list[StreamData], which: np.ndarray, rows: np.ndarray, first: Mapping[str, int] | None = None
) -> None:
    """Give rows without an id column the automatic ids (0, 1, 2, ... per stream in
    arrival order, across all files of the stream; from ``first[stream]`` on when
    given)."""
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
            ids[rows[chosen]] = rank[chosen] + (first or {}).get(d.stream, 0)
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
    aggregates_path: str | None = None,
    output_views: Mapping[str, str] | None = None,
    tables: TableFeed | None = None,
) -> Summary:
    """``aggregates_path``: where aggregate rows go with CSV or Parquet (a file of
    their own, :mod:`runtime.io.aggregate_writers`; default beside the output); JSON lines hold
    them in the output. ``output_views``: {view: file} of views whose rows are written
    (JSON lines, as made) for inspection."""
    started = time.perf_counter()
    late_path, rejects_path = side_paths(output, late_path, rejects_path)
    named = [("the output", output, False), ("the late-tuple file", late_path, True)]
    aggregates = matcher.registrations.output_aggregates()  # (an aggregate view's rows are no output)
    separate = bool(aggregates) and fmt != "jsonl"
    if separate:
        aggregates_path = aggregate_writers.aggregates_path(output, fmt, aggregates_path)
        named.append(("the aggregate file", aggregates_path, False))
    views = dict(output_views or {})
    named += [(f"the rows of view {view}", path, True) for view, path in views.items()]
    check_output_paths([*named, ("the reject file", rejects_path, True)], [spec.path for spec in inputs])
    summary = Summary(output=output, aggregates_path=aggregates_path if separate else None)
    with (
        open_writer(output, fmt, matcher.value_types()) as writer,
        (
            aggregate_writers.open_aggregate_writer(aggregates_path, fmt, aggregates)  # type: ignore[arg-type]
            if separate
            else nullcontext(writer)
        ) as aggregate_writer,
        LinesFile(late_path, "the late-tuple file") as late_file,
        LinesFile(rejects_path, "the reject file") as rejects_file,
        ExitStack() as view_files,
    ):
        if views:
            files = {
                view.lower(): view_files.enter_context(LinesFile(path, f"the rows of view {view}"))
                for view, path in views.items()
            }
            matcher.view_sink = lambda view, ts, id, values: (
                files[view.lower()].write([{"view": view, "ts": ts, "id": id, "values": values}])
                if view.lower() in files
                else None
            )
        try:
            data = read_inputs(inputs, matcher.ensure_plan().catalog, on_bad_row)
        except KeyboardInterrupt as err:  # nothing matched yet: the outputs close empty
            summary.interrupted = signal.SIGTERM if isinstance(err, Terminated) else signal.SIGINT
            summary.seconds = time.perf_counter() - started
            return summary
        summary.total = sum(len(d) for d in data)
        with deferred_stop() as stop:
            with stop.writing():
                rejects_file.write(row.as_dict() for d in data for row in d.rejected)
            bar = Progress(
                summary.total, progress if progress is not None else (sys.stderr.isatty() and summary.total >= 50_000)
            )
            which, rows = arrival_order(data)
            number_in_arrival_order(data, which, rows)
            done = match_all(
                matcher, data, which, rows, writer, late_file, stop, bar, summary, aggregate_writer, tables=tables
            )
            bar.finish()
    summary.tuples = done
    # per stream, the tuples matched (all of them unless the run was stopped)
    counts = np.bincount(which[:done], minlength=len(data))
    for d, n in zip(data, counts.tolist(), strict=True):
        summary.per_stream[d.stream] = summary.per_stream.get(d.stream, 0) + n
    if summary.interrupted is not None and done:
        summary.last_ts = float(data[int(which[done - 1])].ts[int(rows[done - 1])])
    summary.late = late_file.count
    summary.rejected = rejects_file.count
    summary.late_path = late_path if late_file.count else None
    summary.rejects_path = rejects_path if rejects_file.count else None
    summary.nonfinite = writer.nonfinite + (aggregate_writer.nonfinite if separate else 0)
    summary.seconds = time.perf_counter() - started
    return summary


def match_all(
    matcher: Matcher,
    data: list[StreamData],
    which: np.ndarray,
    rows: np.ndarray,
    writer: ResultWriter,
    late_file: LinesFile,
    stop: StopFlag,
    bar: Progress,
    summary: Summary,
    aggregate_writer: ResultWriter | None = None,
    *,
    end_of_input: bool = True,
    idle: Sequence[str] | None = None,
    tables: TableFeed | None = None,
) -> int:
    """Match every tuple in arrival order, writing results and late tuples as they
    come (aggregate rows with ``aggregate_writer``, else ``writer``: then they count
    as results); returns how many tuples were matched (all, unless a signal stopped it).
    At the ``end_of_input`` every window holding data is emitted (the watermark goes
    to infinity); otherwise (a step of ``mqo serve``) the windows the watermark passed.

    Under ``emit='ordered'`` the results come as the watermark releases them; at the
    end the matcher releases what time has freed since (a stream gone idle), and with
    ``end_of_input`` everything it holds (what a stopped run matched is written too:
    it follows, in ``ts`` order, everything released before).

    ``idle``: the streams declared idle before the first tuple; by default, at the
    ``end_of_input``, every declared stream with no tuple in ``data``, else none.
    ``tables``: the rows of table files, put in at their time (:mod:`runtime.local.tables`)."""
    plan = matcher.ensure_plan()
    if idle is None:
        # A declared stream with no input sends nothing in this run: it must not hold
        # the watermark back (no purge, a window state growing with the whole input)
        # until the idle timeout. It is idle from the start.
        fed = {d.stream.lower() for d in data}
        # (a view's time is its inputs': it has no clock to idle)
        declared = [schema.name for schema in plan.catalog.base_streams()]
        idle = [name for name in declared if name.lower() not in fed] if end_of_input else []
    for name in idle:
        released = matcher.set_idle(name)  # results held for ordered emission that time has freed
        if released:
            with stop.writing():
                writer.write(released)
            summary.results += len(released)
    late: list[LateTuple] = []
    matcher.late_sink = late.append
    # The attribute phase of every file runs in the batch kernels first; the rows are
    # then replayed in merged arrival order (only rows some query wants cost more).
    prepared = [matcher.prepare(d.stream, d.as_batch()) for d in data]
    aggregating = matcher.aggregator is not None and len(matcher.aggregator) > 0
    if aggregating:
        _aggregate_inputs(matcher, data, which, rows)
    pending = MatchBatch(plan)
    waiting = 0  # result assignments in ``pending``

    def flush() -> None:
        nonlocal pending, waiting
        with stop.writing():
            summary.results += writer.write_batch(pending)
            late_file.write(t.as_dict() for t in late)
        late.clear()
        pending, waiting = MatchBatch(plan), 0

    done = 0
    stopped = stop.requested
    due = time.monotonic() + _FLUSH_SECONDS
    if not stopped:
        replayed = (
            matcher.replay(prepared, which, rows) if tables is None else tables.replay(prepared, which, rows, data)
        )
        for position, blocks in replayed:
            if blocks:
                pending.blocks.extend(blocks)
                waiting += len(blocks)
            done = position + 1
            if waiting >= _FLUSH_BLOCKS or time.monotonic() >= due:
                flush()
                due = time.monotonic() + _FLUSH_SECONDS
            if stop.requested:
                stopped = True
                break
            bar.update(done, summary.results + waiting)
    if stopped:
        summary.interrupted = stop.signum
    else:
        done = len(which)
    if matcher.config.emit == "ordered":
        pending.blocks.extend((matcher.flush_results() if end_of_input else matcher.release()).blocks)
    flush()
    if aggregating and not stopped:
        emitted = aggregate_writers.in_file_order(matcher.flush() if end_of_input else matcher.poll_aggregates())
        found = matcher.take_results()  # what aggregate views' rows emitted just now found
        if len(found):
            with stop.writing():
                summary.results += writer.write_batch(found)
        with stop.writing():
            if aggregate_writer is None or aggregate_writer is writer:
                summary.results += writer.write_aggregates(emitted)
            else:
                summary.aggregates += aggregate_writer.write_aggregates(emitted)
    bar.update(done, summary.results)
    return done


def _aggregate_inputs(matcher: Matcher, data: list[StreamData], which: np.ndarray, rows: np.ndarray) -> None:
    """Every input's tuples into the aggregate queries' slices, leaving out the ones
    the replay will find late (the same clock rule, decided over the same arrival
    order before the replay moves the clock)."""
    assert matcher.aggregator is not None
    ts = np.empty(len(which), np.float64)
    for k, d in enumerate(data):
        chosen = which == k
        ts[chosen] = np.asarray(d.ts, np.float64)[rows[chosen]]
    plan = matcher.ensure_plan()
    numbers = np.array([plan.stream_number(d.stream) for d in data], np.int64)
    late = matcher.late_probe(numbers[which], ts)
    first = matcher.aggregator.arrived  # rows arrive in the merged order (count windows order ties so)
    for k, d in enumerate(data):
        late_rows = np.zeros(len(d), bool)
        arrival = np.zeros(len(d), np.int64)
        chosen = which == k
        late_rows[rows[chosen]] = late[chosen]
        arrival[rows[chosen]] = first + np.flatnonzero(chosen)
        matcher.aggregator.ingest(d.stream, d.as_batch(), late=late_rows, arrival=arrival)
