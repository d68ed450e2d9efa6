"""``mqo serve --engine local``: a long-running matcher over directories
(:mod:`runtime.serve_spark` runs the same contract on Spark).

The directory contract:

* ``--queries DIR``: every ``*.mqo`` file there is a set of standing queries. A new file
  registers its queries, a changed file replaces them, a deleted file removes them, and
  a file holding only ``UNREGISTER <id>;`` statements removes those ids (it is kept
  as done; delete it whenever). A file that does not compile is reported in the step's
  ``query-errors`` file with the error and its position, and registers nothing.
* ``--input S=DIR``: every file there (CSV with a header, or Parquet) is a batch of
  stream S's tuples. A file is read once; write files elsewhere and move them in, since
  names starting with ``.`` or ``_`` are ignored (as Spark's file source does).
* ``--output DIR``: each step that finds anything writes ``results-NNNNNN.<fmt>``, and
  when there are any, ``late-NNNNNN.jsonl``, ``rejected-NNNNNN.jsonl`` (bad rows, with
  ``--on-bad-row skip``) and ``query-errors-NNNNNN.jsonl``. A file appears whole (it is
  written under a temporary name first).
* Windowed aggregate queries run too: a step writes the rows of the windows the
  watermark has passed by its end (the watermark goes on across steps; there is no end
  of input, so windows still open wait for later steps). With JSON lines they are in
  the results file; with CSV and Parquet, whose columns differ from the matches', in
  ``aggregates-NNNNNN.<fmt>`` (:mod:`runtime.agg_outputs`). The checkpoint holds their
  slices, partials and count-window rows (:mod:`mqo.aggregation.persist`).
* ``--checkpoint DIR``: the state after the last completed step (the matcher with its
  queries and window, which files were taken). A restart carries on from it, exactly
  once: a step stopped half-way (Ctrl-C, a crash) is done again from the start and
  writes the same files.

A step takes the query files first, then the new data files of every stream, merged in
timestamp order (ties: streams as given by ``--input``, then file name); so a query
registered in a step sees that step's tuples, and earlier tuples still in its window
(docs/ARCHITECTURE.md, Semantics). A tuple older than the matcher's watermark is late:
written to the late file, not matched. With ``--emit ordered`` a step writes the
results the watermark has released by its end, in ``ts`` order; the held ones are
part of the checkpoint and come out in a later step (a step without data releases
nothing: it is not committed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from mqo import Matcher, SnapshotError, decode_snapshot, encode_snapshot
from predicates import MqoError
from runtime.agg_outputs import open_aggregate_writer
from runtime.inputs import InputError, InputSpec, StreamData, check_ids_across_inputs, read_stream
from runtime.local import Progress, Summary, arrival_order, match_all, number_in_arrival_order
from runtime.outputs import LinesFile, open_writer, write_jsonl
from runtime.stopping import StopFlag, deferred_stop
from runtime.workload import CliError

CHECKPOINT_FORMAT = 2  # 2: the snapshot format of mqo.snapshot_codec (1 was a pickle)
CHECKPOINT_FILE = "checkpoint.mqosnap"
OLD_CHECKPOINT_FILE = "state.pickle"
# an UNREGISTER statement (the id is group 1); runtime.serve_spark reads files with it too
UNREGISTER_STATEMENT = r"UNREGISTER\s+(?:QUERY\s+)?([^\s;]+)\s*;?"
_UNREGISTER = re.compile(rf"^\s*{UNREGISTER_STATEMENT}\s*$", re.IGNORECASE)
_COMMENT = re.compile(r"--[^\n]*")


@dataclass
class QueryFile:
    digest: str
    ids: list[str]  # the queries it registered (empty for an UNREGISTER file or an error)
    text: str = ""  # the text that registered them


@dataclass
class ServeState:
    """What a checkpoint holds besides the matcher."""

    step: int = 0
    taken: dict[str, list[str]] = field(default_factory=dict)  # stream -> data files read
    query_files: dict[str, QueryFile] = field(default_factory=dict)
    next_id: dict[str, int] = field(default_factory=dict)  # automatic ids per stream


@dataclass
class StepReport:
    step: int
    registered: int = 0
    unregistered: int = 0
    query_errors: int = 0
    files: int = 0
    tuples: int = 0
    results: int = 0
    late: int = 0
    rejected: int = 0
    bad_files: int = 0
    interrupted: bool = False

    @property
    def idle(self) -> bool:
        return not (self.registered or self.unregistered or self.query_errors or self.files)

    def line(self) -> str:
        parts = [f"step {self.step}:"]
        if self.registered or self.unregistered or self.query_errors:
            parts.append(f"+{self.registered}/-{self.unregistered} queries")
            if self.query_errors:
                parts.append(f"({self.query_errors} query file(s) with errors)")
        parts.append(f"{self.files} data file(s), {self.tuples:,} tuples, {self.results:,} results")
        if self.late:
            parts.append(f"{self.late:,} late")
        if self.rejected:
            parts.append(f"{self.rejected:,} rejected")
        if self.bad_files:
            parts.append(f"{self.bad_files} unreadable file(s)")
        return " ".join(parts)


class LocalService:
    """The local engine of ``mqo serve``: one matcher, stepped over the directories."""

    def __init__(
        self,
        schema_text: str,
        inputs: Mapping[str, str],
        queries_dir: str,
        output_dir: str,
        checkpoint_dir: str,
        *,
        fmt: str = "jsonl",
        allowed_lateness: float = 0.0,
        time: str = "per-stream",
        order: str | None = None,
        on_bad_row: str = "skip",
        log: IO[str] | None = None,
        emit: str = "arrival",
    ) -> None:
        self.inputs = dict(inputs)
        self.queries_dir = Path(queries_dir)
        self.output_dir = Path(output_dir)
        self.checkpoint = Path(checkpoint_dir) / CHECKPOINT_FILE
        self.fmt = fmt
        self.on_bad_row = on_bad_row
        self.log = log if log is not None else sys.stderr
        for path, what in [(queries_dir, "--queries"), *((d, f"--input {s}=") for s, d in self.inputs.items())]:
            if not Path(path).is_dir():
                raise CliError(f"{what}{'' if what.endswith('=') else ' '}{path}: not a directory")
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        self.schema_digest = _digest(schema_text)
        self._stopped = False
        if not self.checkpoint.exists() and (self.checkpoint.parent / OLD_CHECKPOINT_FILE).exists():
            raise CliError(
                f"{self.checkpoint.parent / OLD_CHECKPOINT_FILE}: a checkpoint made by an older version of mqo "
                "(a pickle, which this version does not load); use a new --checkpoint"
            )
        if self.checkpoint.exists():
            self.matcher, self.state = self._load(schema_text)
            if self.matcher.config.emit != emit:
                raise CliError(
                    f"{self.checkpoint}: written with --emit {self.matcher.config.emit}; restart with that, "
                    "or use a new --checkpoint"
                )
        else:
            self.matcher = Matcher(
                schema_text, allowed_lateness=allowed_lateness, order=order or "adaptive", time=time, emit=emit
            )
            self.state = ServeState()
        unknown = [s for s in self.inputs if self.matcher.catalog.get(s) is None]
        if unknown:
            raise CliError(f"--input {unknown[0]}=...: the schema declares no stream {unknown[0]!r}")

    # ------------------------------------------------------------ the loop

    def run(self, *, once: bool = False, poll: float = 1.0, stop: StopFlag | None = None) -> list[StepReport]:
        """Step until stopped (a signal), or once with ``once``. Each step's report
        is printed; idle steps are not."""
        reports = []
        with _stop_flag(stop) as flag:
            while True:
                report = self.step(flag)
                if not report.idle or report.interrupted:
                    reports.append(report)
                    print(report.line() + (" (stopped; not committed)" if report.interrupted else ""), file=self.log)
                if once or flag.requested:
                    return reports
                deadline = time.monotonic() + poll
                while time.monotonic() < deadline and not flag.requested:
                    time.sleep(min(0.1, poll))
                if flag.requested:
                    return reports

    def step(self, stop: StopFlag | None = None) -> StepReport:
        """Take new and changed query files, then new data files; write the step's
        files and the checkpoint. Nothing is committed when ``stop`` is raised during
        the step (it is done again on restart)."""
        if self._stopped:
            raise RuntimeError("this service stopped in the middle of a step; start a new one from the checkpoint")
        flag = stop if stop is not None else StopFlag()
        report = StepReport(step=self.state.step + 1)
        self._stopped = True  # until the step is committed (or found idle): memory may be ahead of the checkpoint
        errors = self._take_queries(report)
        data, bad_files = self._take_data(report)
        report.query_errors, report.bad_files = len(errors), len(bad_files)
        if report.idle:
            self._stopped = False
            return report
        self._match(data, report, flag)
        if report.interrupted:
            return report
        for kind, records in (("query-errors", errors), ("input-errors", bad_files)):
            if records:
                self._publish(self._path(kind, "jsonl", report.step), lambda p, r=records: write_jsonl(str(p), r))
        # the step's files reach the disk before the checkpoint that says they exist
        _sync([*self.output_dir.glob(f"*-{report.step:06d}.*"), self.output_dir])
        self.state.step = report.step
        _write_atomically(self.checkpoint, encode_snapshot(self._checkpoint_data()))
        self._stopped = False
        return report

    # ------------------------------------------------------------ queries

    def _take_queries(self, report: StepReport) -> list[dict[str, Any]]:
        """Registrations and removals from the query directory; the error records."""
        errors: list[dict[str, Any]] = []
        present = {p.name: p for p in _visible(self.queries_dir) if p.suffix == ".mqo"}
        known = self.state.query_files
        for name in sorted(set(known) - set(present)):  # deleted files
            report.unregistered += self._drop(known.pop(name).ids)
        for name, path in sorted(present.items()):
            text = path.read_text()
            digest = _digest(text)
            if name in known and known[name].digest == digest:
                continue
            old = known.pop(name, None)
            commands = _unregister_commands(text)
            if commands is not None:
                missing = [q for q in commands if q not in self.matcher.query_ids]
                if missing:
                    message = f"{path}: no query with id {missing[0]!r} is registered"
                    errors.append({"file": str(path), "error": message})
                report.unregistered += self._drop(commands)
                known[name] = QueryFile(digest, [])
                continue
            dropped = self._drop(old.ids) if old is not None else 0
            try:
                ids = self.matcher.register_queries(text, source_name=str(path))
            except MqoError as err:
                errors.append({"file": str(path), "error": str(err)})
                if old is not None and old.ids:
                    # a changed file that does not compile leaves its old queries running
                    self.matcher.register_queries(old.text, source_name=str(path))
                    dropped = 0
                    known[name] = QueryFile(digest, old.ids, old.text)
                else:
                    known[name] = QueryFile(digest, [])
                report.unregistered += dropped
                continue
            report.unregistered += dropped
            report.registered += len(ids)
            known[name] = QueryFile(digest, ids, text)
        return errors

    def _drop(self, ids: Sequence[str]) -> int:
        dropped = 0
        for q in ids:
            if q in self.matcher.query_ids:
                self.matcher.unregister_query(q)
                dropped += 1
        return dropped

    # --------------------------------------------------------------- data

    def _take_data(self, report: StepReport) -> tuple[list[StreamData], list[dict[str, Any]]]:
        """The new data files, read; and the records of files that could not be read
        at all (a missing column, not CSV): reported, and not read again."""
        data, bad_files = [], []
        for stream, folder in self.inputs.items():
            taken = self.state.taken.setdefault(stream, [])
            done = set(taken)
            schema = self.matcher.catalog.get(stream)
            assert schema is not None
            for path in sorted(_visible(Path(folder)), key=lambda p: p.name):
                if path.name in done or not path.is_file():
                    continue
                taken.append(path.name)
                report.files += 1
                try:
                    data.append(read_stream(InputSpec(stream, str(path)), schema, self.on_bad_row))
                except InputError as err:
                    if self.on_bad_row != "skip":
                        raise
                    bad_files.append({"stream": stream, "file": str(path), "error": str(err)})
        check_ids_across_inputs(data, self.on_bad_row)
        return data, bad_files

    def _match(self, data: list[StreamData], report: StepReport, stop: StopFlag) -> None:
        """Match the step's tuples and write its results, late tuples and rejects."""
        which, rows = arrival_order(data)
        first = {s: self.state.next_id.get(s, 0) for s in self.inputs}
        number_in_arrival_order(data, which, rows, first)
        for d in data:
            if d.ids:
                self.state.next_id[d.stream] = max(self.state.next_id.get(d.stream, 0), max(d.ids) + 1)
        step = report.step
        results_path = self._path("results", self.fmt, step)
        late_path = self._path("late", "jsonl", step)
        aggregator = self.matcher.aggregator
        aggregates = [r.query for r in aggregator.queries.values()] if aggregator is not None else []
        # aggregate rows: in the JSON-lines results, else a file of their own (other columns)
        aggregates_path = self._path("aggregates", self.fmt, step)
        separate = bool(aggregates) and self.fmt != "jsonl"
        summary = Summary(output=str(results_path))
        with (
            open_writer(str(_temporary(results_path)), self.fmt, self.matcher.value_types()) as writer,
            (
                open_aggregate_writer(str(_temporary(aggregates_path)), self.fmt, aggregates)
                if separate
                else nullcontext(writer)
            ) as aggregate_writer,
            LinesFile(str(_temporary(late_path)), "the late-tuple file") as late_file,
        ):
            # windows close on the watermark, which goes on across steps: no end of input
            bar = Progress(0, False)
            match_all(
                self.matcher,
                data,
                which,
                rows,
                writer,
                late_file,
                stop,
                bar,
                summary,
                aggregate_writer,
                end_of_input=False,
            )
        report.tuples = len(which)
        report.results, report.late = summary.results + summary.aggregates, late_file.count
        report.rejected = sum(len(d.rejected) for d in data)
        for path, keep in (
            (results_path, summary.results > 0),
            (aggregates_path, summary.aggregates > 0),
            (late_path, late_file.count > 0),
        ):
            if keep and summary.interrupted is None:
                os.replace(_temporary(path), path)
            else:
                _temporary(path).unlink(missing_ok=True)
        if summary.interrupted is not None:
            report.interrupted = True
        elif report.rejected:
            rejects = self._path("rejected", "jsonl", step)
            self._publish(rejects, lambda p: write_jsonl(str(p), (r.as_dict() for d in data for r in d.rejected)))

    # ------------------------------------------------------------ helpers

    def _path(self, kind: str, ext: str, step: int) -> Path:
        return self.output_dir / f"{kind}-{step:06d}.{ext}"

    def _publish(self, path: Path, write: Callable[[Path], Any]) -> None:
        write(_temporary(path))
        os.replace(_temporary(path), path)

    def _checkpoint_data(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "schema": self.schema_digest,
            "matcher": self.matcher.snapshot(),
            "state": dataclasses.asdict(self.state),
        }

    def _load(self, schema_text: str) -> tuple[Matcher, ServeState]:
        try:
            data = decode_snapshot(self.checkpoint.read_bytes(), str(self.checkpoint))
        except SnapshotError as err:
            raise CliError(str(err)) from None
        except Exception as err:  # a checkpoint that cannot be read: say so, do not start over silently
            raise CliError(f"{self.checkpoint}: cannot read the checkpoint ({err})") from None
        if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
            raise CliError(f"{self.checkpoint}: written by another version of mqo serve; use a new --checkpoint")
        if data.get("schema") != self.schema_digest:
            raise CliError(f"{self.checkpoint}: written for another --schema; use a new --checkpoint")
        return _restore(data)


def _restore(data: Mapping[str, Any]) -> tuple[Matcher, ServeState]:
    state = dict(data["state"])
    state["query_files"] = {name: QueryFile(**entry) for name, entry in state["query_files"].items()}
    return Matcher.restore(data["matcher"]), ServeState(**state)


def _unregister_commands(text: str) -> list[str] | None:
    """The ids of a file of ``UNREGISTER id;`` statements, or None for a query file."""
    lines = [line for line in _COMMENT.sub("", text).splitlines() if line.strip()]
    if not lines:
        return None
    found = [_UNREGISTER.match(line) for line in lines]
    if not all(found):
        return None
    return [m.group(1) for m in found if m is not None]


def _visible(folder: Path) -> Iterator[Path]:
    for path in folder.iterdir():
        if not path.name.startswith((".", "_")):
            yield path


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp")


def _sync(paths: Sequence[Path]) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_atomically(path: Path, blob: bytes) -> None:
    tmp = _temporary(path)
    with tmp.open("wb") as f:
        f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@contextmanager
def _stop_flag(given: StopFlag | None) -> Iterator[StopFlag]:
    if given is not None:
        yield given
        return
    with deferred_stop() as flag:
        yield flag
