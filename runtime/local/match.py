"""Running a matcher over files on this machine: the engine behind ``mqo match``.

Reads the inputs a chunk at a time, merged in arrival order (:mod:`runtime.io.input_chunks`:
memory holds a few chunks, not the input), matches them a round at a time (each input
piece's attribute phase at once, then the rows in the merged order, one replay across
the rounds), writes the matches as they come, sets bad rows and late tuples aside in
files of their own (nothing is dropped silently), shows progress on stderr for long
inputs (the part of the input read), and returns a summary. The results, late tuples,
rejected rows and ids are those of reading every file whole; a file that stops the run
(a bad row without ``--on-bad-row skip``) stops it with the error reading whole would
meet first, the output holding the results of the tuples matched before.

Nothing is lost on the way out. Every output path is checked before any input is read
(and late or reject files of an earlier run are removed). Results are written steadily:
whenever ``_FLUSH_BLOCKS`` result assignments are waiting, and at least every
``_FLUSH_SECONDS``; the reject file as bad rows are found, late tuples with the
results. A SIGINT or SIGTERM while matching stops the run after the
tuple it is on (:mod:`runtime.stopping`), with every result so far written whole; the
summary says how far it got (of how many tuples, when the input was read to its end).
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from mqo import LateTuple, MatchBatch, Matcher, no_cyclic_gc
from runtime.io import aggregate_writers, input_chunks
from runtime.io.input_chunks import (
    ArrivingInputs,
    arrival_order,
    first_error,
    number_in_arrival_order,
)
from runtime.io.inputs import InputError, InputSpec, StreamData
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
_PROGRESS_BYTES = 4 << 20  # inputs this large (about 50,000 rows) show a progress bar on a terminal

__all__ = ["Matching", "Progress", "Summary", "arrival_order", "match_all", "number_in_arrival_order", "run_match"]


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
    total: int | None = 0  # tuples in the input (``tuples`` is how many were matched); None: not read to its end
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
        # the inputs are read as they are matched: a stopped run may not know their size
        of = "" if self.total is None else f" of {self.total:,}"
        unread = " (the input was not read to its end)" if self.total is None else ""
        if self.last_ts is None:
            return f"interrupted ({name}) after 0{of} tuples{unread}; nothing was matched"
        return (
            f"interrupted ({name}) after {self.tuples:,}{of} tuples{unread}; {shown_path(self.output)} holds"
            f" every result of those tuples, up to ts {self.last_ts!r}"
        )


class Progress:
    """A one-line progress bar on stderr, redrawn at most every 0.2 s: the tuples done of
    a ``total``, or (inputs read as they are matched) the part of the input read,
    ``fraction()``."""

    def __init__(
        self, total: int, enabled: bool, out: IO[str] | None = None, fraction: Callable[[], float] | None = None
    ) -> None:
        self.total = total
        self.fraction = fraction
        self.enabled = enabled
        self.out = out if out is not None else sys.stderr
        self.start = time.perf_counter()
        self._last = 0.0

    def update(self, done: int, results: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < 0.2 and (self.fraction is not None or done < self.total):
            return
        self._last = now
        if self.fraction is not None:
            frac, count = min(max(self.fraction(), 0.0), 1.0), f"{done:,}"
        else:
            frac, count = (done / self.total if self.total else 1.0), f"{done:,}/{self.total:,}"
        bar = "#" * int(frac * 30)
        rate = done / (now - self.start) if now > self.start else 0.0
        self.out.write(f"\r[{bar:<30}] {frac:6.1%}  {count} tuples  {results:,} results  {rate:,.0f} tuples/s")
        self.out.flush()

    def finish(self) -> None:
        if self.enabled:
            self.out.write("\n")
            self.out.flush()


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
    chunk_rows: int | None = None,
) -> Summary:
    """``aggregates_path``: where aggregate rows go with CSV or Parquet (a file of
    their own, :mod:`runtime.io.aggregate_writers`; default beside the output); JSON lines hold
    them in the output. ``output_views``: {view: file} of views whose rows are written
    (JSON lines, as made) for inspection. ``chunk_rows``: the rows of one input read
    at a time (:mod:`runtime.io.input_chunks`)."""
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
    specs = [(spec.stream, spec.path) for spec in inputs]
    chunk_rows = chunk_rows or input_chunks.CHUNK_ROWS
    catalog = matcher.ensure_plan().catalog
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
            try:
                arriving = ArrivingInputs(specs, catalog, on_bad_row, chunk_rows)
            except KeyboardInterrupt as err:  # nothing matched yet: the outputs close empty
                summary.interrupted = signal.SIGTERM if isinstance(err, Terminated) else signal.SIGINT
                summary.seconds = time.perf_counter() - started
                return summary
            with deferred_stop() as stop:
                _match_rounds(
                    matcher,
                    arriving,
                    writer,
                    late_file,
                    rejects_file,
                    stop,
                    summary,
                    aggregate_writer,
                    progress,
                    tables,
                )
        except InputError as stopped:
            # a file stopped the run: name the error that reading the files whole would meet first
            error = stopped
            try:
                first_error(specs, catalog, on_bad_row, chunk_rows)
            except InputError as first:
                error = first
            if summary.last_ts is None:  # nothing matched yet: the outputs are empty
                raise error from None
            # (the inputs are read as they are matched: what came before the bad row was
            # matched, and part of its results written; say so, so none is taken for whole)
            raise InputError(
                f"{error}; the run stopped there, and {shown_path(output)} holds results of the tuples matched"
                " before it, not every result of the input (--on-bad-row skip sets bad rows aside and matches"
                " the rest)"
            ) from None
    summary.late = late_file.count
    summary.rejected = rejects_file.count
    summary.late_path = late_path if late_file.count else None
    summary.rejects_path = rejects_path if rejects_file.count else None
    summary.nonfinite = writer.nonfinite + (aggregate_writer.nonfinite if separate else 0)
    summary.seconds = time.perf_counter() - started
    return summary


def _match_rounds(
    matcher: Matcher,
    arriving: ArrivingInputs,
    writer: ResultWriter,
    late_file: LinesFile,
    rejects_file: LinesFile,
    stop: StopFlag,
    summary: Summary,
    aggregate_writer: ResultWriter,
    progress: bool | None,
    tables: TableFeed | None,
) -> None:
    """Match the inputs a round of chunks at a time; the summary says how far it got."""
    size = arriving.size
    shown = progress if progress is not None else (sys.stderr.isatty() and size >= _PROGRESS_BYTES)
    bar = Progress(0, shown, fraction=lambda: arriving.position / size if size else 1.0)
    streams = [i.stream for i in arriving.inputs]
    for stream in streams:
        summary.per_stream.setdefault(stream, 0)
    run = Matching(matcher, streams, writer, late_file, stop, bar, summary, aggregate_writer, tables=tables)
    read_all, released = True, 0
    for arrived in _flushed_on_error(arriving.rounds(), run):
        released += len(arrived.which)
        with stop.writing():
            rejects_file.write(row.as_dict() for row in arriving.take_rejected())
        before = run.done
        going = run.round(arrived.data, arrived.which, arrived.rows, arrived.ts)
        n = run.done - before
        for k, count in enumerate(np.bincount(arrived.which[:n], minlength=len(arrived.data)).tolist()):
            summary.per_stream[streams[arrived.inputs[k]]] += count
        if n:
            summary.last_ts = float(arrived.ts[n - 1])
        if not going:
            read_all = all(i.ended and not i.remaining() for i in arriving.inputs)
            break
    with stop.writing():
        rejects_file.write(row.as_dict() for row in arriving.take_rejected())
    if read_all:  # the last draw counts the tuples of the whole input
        bar.fraction, bar.total = None, released
    summary.tuples = run.finish()
    summary.total = released if read_all else None
    if summary.interrupted is None:
        summary.last_ts = None
    bar.finish()


def _flushed_on_error(rounds: Iterator[Any], run: Matching) -> Iterator[Any]:
    """``rounds``, writing what the rounds so far found before a bad input row stops
    the run (``run_match``'s message then says the output is partial)."""
    try:
        yield from rounds
    except InputError:
        run.flush()
        raise


class Matching:
    """Matching tuples in arrival order, a round at a time, writing results and late
    tuples as they come (aggregate rows with ``aggregate_writer``, else ``writer``:
    then they count as results); :meth:`finish` ends it.

    Under ``emit='ordered'`` the results come as the watermark releases them; at the
    end the matcher releases what time has freed since (a stream gone idle), and with
    ``end_of_input`` everything it holds (what a stopped run matched is written too:
    it follows, in ``ts`` order, everything released before).

    ``idle``: the streams declared idle before the first tuple; by default, at the
    ``end_of_input``, every declared stream not among ``streams`` (those with input),
    else none. ``tables``: the rows of table files, put in at their time
    (:mod:`runtime.local.tables`)."""

    def __init__(
        self,
        matcher: Matcher,
        streams: Sequence[str],
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
    ) -> None:
        self.matcher = matcher
        self.writer = writer
        self.late_file = late_file
        self.stop = stop
        self.bar = bar
        self.summary = summary
        self.aggregate_writer = aggregate_writer
        self.tables = tables
        self.end_of_input = end_of_input
        self.plan = plan = matcher.ensure_plan()
        if idle is None:
            # A declared stream with no input sends nothing in this run: it must not hold
            # the watermark back (no purge, a window state growing with the whole input)
            # until the idle timeout. It is idle from the start.
            fed = {stream.lower() for stream in streams}
            # (a view's time is its inputs': it has no clock to idle)
            declared = [schema.name for schema in plan.catalog.base_streams()]
            idle = [name for name in declared if name.lower() not in fed] if end_of_input else []
        for name in idle:
            released = matcher.set_idle(name)  # results held for ordered emission that time has freed
            if released:
                with stop.writing():
                    writer.write(released)
                summary.results += len(released)
        self.late: list[LateTuple] = []
        matcher.late_sink = self.late.append
        self.aggregating = matcher.aggregator is not None and len(matcher.aggregator) > 0
        # arrival numbers of the aggregate queries' rows: their places in the merged order
        self.arrival = matcher.aggregator.arrived if matcher.aggregator is not None else 0
        self.pending = MatchBatch(plan)
        self.waiting = 0  # result assignments in ``pending``
        self.done = 0  # tuples matched
        self.stopped = stop.requested
        self.due = time.monotonic() + _FLUSH_SECONDS
        if tables is not None:
            tables.start()

    def flush(self) -> None:
        with self.stop.writing():
            self.summary.results += self.writer.write_batch(self.pending)
            self.late_file.write(t.as_dict() for t in self.late)
        self.late.clear()
        self.pending, self.waiting = MatchBatch(self.plan), 0

    def round(self, data: list[StreamData], which: np.ndarray, rows: np.ndarray, ts: np.ndarray) -> bool:
        """Match these tuples (row ``rows[j]`` of ``data[which[j]]`` arrives j-th, at
        ``ts[j]``); False if a signal stopped it (:attr:`done` says how far it got).
        The cyclic collector waits for the round's end, as in :meth:`mqo.Matcher.push_batch`:
        it would otherwise scan the window's stored rows again and again."""
        with no_cyclic_gc():
            return self._round(data, which, rows, ts)

    def _round(self, data: list[StreamData], which: np.ndarray, rows: np.ndarray, ts: np.ndarray) -> bool:
        self.stopped = self.stopped or self.stop.requested
        if self.stopped or not len(which):
            return not self.stopped
        # The attribute phase of every input runs in the batch kernels first; the rows are
        # then replayed in merged arrival order (only rows some query wants cost more).
        matcher = self.matcher
        prepared = [matcher.prepare(d.stream, d.as_batch()) for d in data]
        if self.aggregating:
            _aggregate_inputs(matcher, data, which, rows, ts, self.arrival)
        self.arrival += len(which)
        # one replay across the rounds: only the end of the last emits (mqo.Matcher.end_replay)
        replayed = (
            matcher.replay(prepared, which, rows, last=False)
            if self.tables is None
            else self.tables.replay_round(prepared, which, rows, ts)
        )
        base = self.done
        for position, blocks in replayed:
            if blocks:
                self.pending.blocks.extend(blocks)
                self.waiting += len(blocks)
            self.done = base + position + 1
            if self.waiting >= _FLUSH_BLOCKS or time.monotonic() >= self.due:
                self.flush()
                self.due = time.monotonic() + _FLUSH_SECONDS
            if self.stop.requested:
                self.stopped = True
                return False
            self.bar.update(self.done, self.summary.results + self.waiting)
        self.done = base + len(which)
        return True

    def finish(self) -> int:
        """Write what is held (the windows and ordered results the end releases); returns
        how many tuples were matched (all, unless a signal stopped it)."""
        matcher, summary, writer = self.matcher, self.summary, self.writer
        if self.stopped:
            summary.interrupted = self.stop.signum
        elif self.tables is not None:
            self.pending.blocks.extend(self.tables.finish())
        elif self.done:
            self.pending.blocks.extend(matcher.end_replay())
        if matcher.config.emit == "ordered":
            self.pending.blocks.extend((matcher.flush_results() if self.end_of_input else matcher.release()).blocks)
        self.flush()
        if self.aggregating and not self.stopped:
            emitted = aggregate_writers.in_file_order(
                matcher.flush() if self.end_of_input else matcher.poll_aggregates()
            )
            found = matcher.take_results()  # what aggregate views' rows emitted just now found
            if len(found):
                with self.stop.writing():
                    summary.results += writer.write_batch(found)
            with self.stop.writing():
                if self.aggregate_writer is None or self.aggregate_writer is writer:
                    summary.results += writer.write_aggregates(emitted)
                else:
                    summary.aggregates += self.aggregate_writer.write_aggregates(emitted)
        self.bar.update(self.done, summary.results)
        return self.done


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
    """Match every tuple of ``data`` in the arrival order ``which``, ``rows`` at once
    (a step of ``mqo serve``; see :class:`Matching`); returns how many tuples were
    matched. At the ``end_of_input`` every window holding data is emitted (the
    watermark goes to infinity); otherwise the windows the watermark passed."""
    run = Matching(
        matcher,
        [d.stream for d in data],
        writer,
        late_file,
        stop,
        bar,
        summary,
        aggregate_writer,
        end_of_input=end_of_input,
        idle=idle,
        tables=tables,
    )
    run.round(data, which, rows, arrival_ts(data, which, rows))
    return run.finish()


def arrival_ts(data: list[StreamData], which: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The ts of every tuple in arrival order."""
    ts = np.empty(len(which), np.float64)
    for k, d in enumerate(data):
        chosen = which == k
        ts[chosen] = np.asarray(d.ts, np.float64)[rows[chosen]]
    return ts


def _aggregate_inputs(
    matcher: Matcher, data: list[StreamData], which: np.ndarray, rows: np.ndarray, ts: np.ndarray, first: int
) -> None:
    """These tuples into the aggregate queries' slices, leaving out the ones the replay
    will find late (the same clock rule, decided over the same arrival order before the
    replay moves the clock). ``first``: the arrival number of the first of them (count
    windows order ties so)."""
    assert matcher.aggregator is not None
    plan = matcher.ensure_plan()
    numbers = np.array([plan.stream_number(d.stream) for d in data], np.int64)
    late = matcher.late_probe(numbers[which], ts)
    for k, d in enumerate(data):
        late_rows = np.zeros(len(d), bool)
        arrival = np.zeros(len(d), np.int64)
        chosen = which == k
        late_rows[rows[chosen]] = late[chosen]
        arrival[rows[chosen]] = first + np.flatnonzero(chosen)
        matcher.aggregator.ingest(d.stream, d.as_batch(), late=late_rows, arrival=arrival)
