"""``mqo serve --engine local``: a long-running matcher over directories
(:mod:`runtime.spark.serve` runs the same contract on Spark).

The directory contract:

* ``--queries DIR``: every ``*.mqo`` file there is a set of standing queries. A new file
  registers its queries, a changed file replaces them, a deleted file removes them, and
  a file holding only ``UNREGISTER <id>;`` statements removes those ids (it is kept
  as done; delete it whenever). A file that does not compile is reported in the step's
  ``query-errors`` file with the error and its position, and registers nothing.
* ``--input S=DIR``: every file there (CSV with a header, or Parquet) is a batch of
  stream S's tuples. A file is read once; write files elsewhere and move them in, since
  names starting with ``.`` or ``_`` are ignored (as Spark's file source does). A file
  written in place is taken once its size and modification time have stood still for
  ``settle`` seconds (the CLI's ``--poll``; query files too), one written to while it
  was read is read again later, and one written to after it was taken is reported in
  the step's ``input-errors`` file and on the log, naming it (what was added is not
  read): :mod:`runtime.local.serve_files`.
* ``--output DIR``: each step (one that takes a query or data file, or finds a taken
  file changed) writes ``results-NNNNNN.<fmt>``, empty when it found no result (CSV
  with its header, Parquet with its schema), and when there are any,
  ``late-NNNNNN.jsonl``, ``rejected-NNNNNN.jsonl`` (bad rows, with ``--on-bad-row
  skip``), ``input-errors-NNNNNN.jsonl`` (unreadable or changed files) and
  ``query-errors-NNNNNN.jsonl``. A file appears whole (it is written under a temporary
  name first). The CLI refuses an ``--output`` or ``--checkpoint`` in an input directory.
* Windowed aggregate queries run too: a step writes the rows of the windows the
  watermark has passed by its end (the watermark goes on across steps; there is no end
  of input, so windows still open wait for later steps). With JSON lines they are in
  the results file; with CSV and Parquet, whose columns differ from the matches', in
  ``aggregates-NNNNNN.<fmt>`` (:mod:`runtime.io.aggregate_writers`; every step writes it, as
  the results file). The checkpoint holds their slices, partials and count-window rows
  (:mod:`mqo.aggregation.persist`). Aggregate views run too: their rows go on to the
  queries reading them as the windows are emitted (:mod:`mqo.views`), and what those
  find is written as any result.
* ``--table T=FILE`` (tables declared by ``CREATE TABLE`` in a query file): the file's
  rows are read as it grows, each step the rows added since, put in among the step's
  tuples by their ts (:mod:`runtime.local.serve_tables`); the checkpoint holds the
  table versions and how much of each file was read.
* ``--checkpoint DIR``: the state after the last completed step (the matcher with its
  queries and window, which files were taken). A restart carries on from it, exactly
  once: a step stopped half-way (Ctrl-C, a crash) is done again from the start and
  writes the same files. A step whose files or checkpoint cannot be written (a full or
  read-only file system) stops the service with a one-line error; its temporary files
  are removed and the last checkpoint stays as it was. One service per checkpoint directory: the CLI
  holds a lock on it (:func:`runtime.local.serve_files.checkpoint_lock`, for either engine).

A step takes the query files first, then the new data files of every stream, merged in
timestamp order (ties: streams as given by ``--input``, then file name); so a query
registered in a step sees that step's tuples, and earlier tuples still in its window
(docs/ARCHITECTURE.md, Semantics). A tuple older than the matcher's watermark is late:
written to the late file, not matched. A declared stream that has sent nothing and has
nothing on the way (no ``--input``, or no file taken from its folder yet and none
settling) is idle, as in ``mqo match``: it does not hold the watermark back, so windows
close, state is purged and late tuples are found; once it sends tuples it holds time
again (those older than the watermark then are late). With ``--emit ordered`` a step
writes the results the watermark has released by its end, in ``ts`` order; the held
ones are part of the checkpoint and come out in a later step (a step without data
releases nothing: it is not committed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from time import monotonic
from typing import IO, Any

from mqo import Matcher, SnapshotError, decode_snapshot, encode_snapshot
from predicates import MqoError
from runtime.io.aggregate_writers import open_aggregate_writer
from runtime.io.inputs import InputError, InputSpec, StreamData, check_ids_across_inputs, read_stream
from runtime.io.table_rows import TableSpec
from runtime.io.writers import LinesFile, open_writer, write_jsonl
from runtime.local.match import Progress, Summary, arrival_order, match_all, number_in_arrival_order
from runtime.local.serve_files import Settling, Signature, signature, sync_paths, temporary_path, write_atomically
from runtime.local.serve_tables import TableFiles, check_table_options, without_declared_tables
from runtime.local.tables import TableFeed
from runtime.stopping import StopFlag, deferred_stop
from runtime.workload import CliError

CHECKPOINT_FORMAT = 2  # 2: the snapshot format of mqo.snapshot_codec (1 was a pickle)
CHECKPOINT_FILE = "checkpoint.mqosnap"
OLD_CHECKPOINT_FILE = "state.pickle"
# an UNREGISTER statement (the id is group 1); runtime.spark.serve reads files with it too
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
    # stream -> data file -> [size, modification time in ns, step]: each taken file as it
    # was read, to find one written to after it was taken
    read_as: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    # "table=path" -> what was read of the table file (runtime.local.serve_tables)
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)


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
    changed: int = 0  # data files written to after they were taken
    table_rows: int = 0  # rows taken from table files
    interrupted: bool = False

    @property
    def idle(self) -> bool:
        # (bad files count: a table file's are reported once, in a step that is committed)
        work = (self.registered, self.unregistered, self.query_errors, self.files, self.changed, self.table_rows)
        return not any(work) and not self.bad_files

    def line(self) -> str:
        parts = [f"step {self.step}:"]
        if self.registered or self.unregistered or self.query_errors:
            parts.append(f"+{self.registered}/-{self.unregistered} queries")
            if self.query_errors:
                parts.append(f"({self.query_errors} query file(s) with errors)")
        parts.append(f"{self.files} data file(s), {self.tuples:,} tuples, {self.results:,} results")
        if self.table_rows:
            parts.append(f"{self.table_rows:,} table row(s)")
        if self.late:
            parts.append(f"{self.late:,} late")
        if self.rejected:
            parts.append(f"{self.rejected:,} rejected")
        if self.bad_files:
            parts.append(f"{self.bad_files} unreadable file(s)")
        if self.changed:
            parts.append(f"{self.changed} file(s) changed after they were read")
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
        settle: float = 0.0,
        clock: Callable[[], float] | None = None,
        tables: Sequence[TableSpec] = (),
    ) -> None:
        """``tables``: the ``--table`` files; ``settle``: seconds a data or query file must stay unchanged before it is
        taken (:mod:`runtime.local.serve_files`; the CLI gives ``--poll``), 0 to take files at
        first sight; ``clock``: monotonic seconds for it (injectable for tests)."""
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
        for folder, what in ((self.output_dir, "--output"), (self.checkpoint.parent, "--checkpoint")):
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise CliError(f"{what} {folder}: cannot make the directory ({err.strerror or err})") from None
        self._settling = Settling(settle, clock if clock is not None else monotonic)
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
        check_table_options(list(tables), self.inputs, self.matcher)
        self.tables = TableFiles(list(tables), self.state.tables, self._settling, self.log)
        for name in self.tables.waiting_for_declaration(self.matcher):
            print(f"mqo serve: --table {name}: its rows are read once a query file declares it", file=self.log)
        unknown = [s for s in self.inputs if self.matcher.catalog.get(s) is None]
        if unknown:
            raise CliError(f"--input {unknown[0]}=...: the schema declares no stream {unknown[0]!r}")

    # ------------------------------------------------------------ the loop

    def run(self, *, once: bool = False, poll: float = 1.0, stop: StopFlag | None = None) -> list[StepReport]:
        """Step until stopped (a signal), or once with ``once`` (which looks again after
        ``poll`` while a file is still being written). Each step's report is printed;
        idle steps are not."""
        reports = []
        with _stop_flag(stop) as flag:
            while True:
                report = self.step(flag)
                if not report.idle or report.interrupted:
                    reports.append(report)
                    print(report.line() + (" (stopped; not committed)" if report.interrupted else ""), file=self.log)
                if flag.requested or (once and not self._settling.waiting):
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
        self._settling.begin()
        errors = self._take_queries(report)
        data, bad_files, changed = self._take_data(report)
        table_rows, table_errors = self.tables.take(self.matcher, report.step, self.on_bad_row)
        bad_files += table_errors
        self._settling.end()
        report.query_errors, report.bad_files, report.changed = len(errors), len(bad_files), len(changed)
        report.table_rows = sum(len(changes) for _, changes in table_rows)
        if report.idle:
            self._stopped = False
            return report
        try:
            self._match(data, report, flag, TableFeed(self.matcher, [], table_rows) if table_rows else None)
            if report.interrupted:
                return report
            for kind, records in (("query-errors", errors), ("input-errors", [*bad_files, *changed])):
                if records:
                    self._publish(self._path(kind, "jsonl", report.step), lambda p, r=records: write_jsonl(str(p), r))
            # the step's files reach the disk before the checkpoint that says they exist
            sync_paths([*self.output_dir.glob(f"*-{report.step:06d}.*"), self.output_dir])
            self.state.step = report.step
            try:
                write_atomically(self.checkpoint, encode_snapshot(self._checkpoint_data()))
            except OSError as err:
                kept = f"still step {report.step - 1}'s" if report.step > 1 else "not written yet"
                raise CliError(
                    f"cannot write the checkpoint {self.checkpoint} ({err.strerror or err}); step {report.step} is not"
                    f" committed (the checkpoint is {kept}) and a restart does it again"
                ) from None
        except BaseException as err:
            # nothing of a step that failed stays half written (its files, once whole, are written again)
            for partial in self.output_dir.glob(f".*-{report.step:06d}.*"):
                with suppress(OSError):
                    partial.unlink()
            if isinstance(err, OSError):  # a full or read-only disk, as the step's files were written
                raise CliError(
                    f"cannot write the files of step {report.step} in {self.output_dir} ({err.strerror or err});"
                    " it is not committed and a restart does it again"
                ) from None
            raise
        self._stopped = False
        return report

    # ------------------------------------------------------------ queries

    def _take_queries(self, report: StepReport) -> list[dict[str, Any]]:
        """Registrations and removals from the query directory; the error records."""
        errors: list[dict[str, Any]] = []
        present = {p.name: p for p in _visible(self.queries_dir) if p.suffix == ".mqo"}
        known = self.state.query_files
        deleted = sorted(set(known) - set(present))
        while free := [name for name in deleted if self._blocked(known[name].ids) is None]:
            for name in free:  # (a file's views go once the files reading them have gone)
                report.unregistered += self._drop(known.pop(name).ids)
            deleted = [name for name in deleted if name not in free]
        for name in deleted:  # a view other files' queries read: it stays, said in the step's errors
            errors.append({"file": name, "error": f"{name} was removed, but {self._blocked(known[name].ids)}"})
        for name, path in sorted(present.items()):
            sig = signature(path)
            if sig is None or not self._settling.ready(path, sig):
                continue  # still being written: taken once it stops changing (a known file keeps its queries)
            text = path.read_text()
            digest = _digest(text)
            if name in known and known[name].digest == digest:
                continue
            old = known.pop(name, None)
            commands = _unregister_commands(text)
            blocked = self._blocked(commands if commands is not None else old.ids if old is not None else [])
            if blocked is not None:  # the file is taken again once those readers are gone
                errors.append({"file": str(path), "error": f"{path}: {blocked}"})
                if old is not None:
                    known[name] = old
                continue
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
                # (a table declared already, the same again, is kept: a table has no removal)
                ids = self.matcher.register_queries(
                    without_declared_tables(self.matcher, text, str(path)), source_name=str(path)
                )
            except MqoError as err:
                errors.append({"file": str(path), "error": str(err)})
                if old is not None and old.ids:
                    # a changed file that does not compile leaves its old queries running
                    self.matcher.register_queries(
                        without_declared_tables(self.matcher, old.text, str(path)), source_name=str(path)
                    )
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

    def _blocked(self, ids: Sequence[str]) -> str | None:
        """Why ``ids`` cannot all go: a view among them that queries not among them read."""
        going = set(ids)
        for view in self.matcher.views:
            if view in going:
                others = [q for q in self.matcher.view_readers(view) if q not in going]
                if others:
                    return f"view {view} is read by {', '.join(others)}; it stays until they are unregistered"
        return None

    def _drop(self, ids: Sequence[str]) -> int:
        dropped = 0
        for q in reversed(ids):  # readers of a view before the view (a file defines it before them)
            if q in self.matcher.query_ids:
                self.matcher.unregister_query(q)
                dropped += 1
        return dropped

    # --------------------------------------------------------------- data

    def _take_data(self, report: StepReport) -> tuple[list[StreamData], list[dict[str, Any]], list[dict[str, Any]]]:
        """The new data files that have stopped changing, read; the records of files
        that could not be read at all (a missing column, not CSV): reported, and not
        read again; and the records of files taken earlier that were written to since."""
        data, bad_files, changed = [], [], []
        for stream, folder in self.inputs.items():
            taken = self.state.taken.setdefault(stream, [])
            read_as = self.state.read_as.setdefault(stream, {})
            done = set(taken)
            schema = self.matcher.catalog.get(stream)
            assert schema is not None
            for path in sorted(_visible(Path(folder)), key=lambda p: p.name):
                sig = signature(path)
                if sig is None:
                    continue
                if path.name in done:
                    record = self._compare(stream, path, sig, read_as)
                    if record is not None:
                        changed.append(record)
                    continue
                if not self._settling.ready(path, sig):
                    continue
                try:
                    got, failure = read_stream(InputSpec(stream, str(path)), schema, self.on_bad_row), None
                except InputError as err:
                    got, failure = None, err
                now = signature(path)
                if now != sig:  # written to while it was read: the read may end inside a row
                    self._settling.changed(path, now)
                    continue
                self._settling.forget(path)
                taken.append(path.name)
                read_as[path.name] = [*sig, report.step]
                report.files += 1
                if failure is not None:
                    if self.on_bad_row != "skip":
                        raise failure
                    bad_files.append({"stream": stream, "file": str(path), "error": str(failure)})
                elif got is not None:
                    data.append(got)
        check_ids_across_inputs(data, self.on_bad_row)
        return data, bad_files, changed

    def _compare(self, stream: str, path: Path, sig: Signature, read_as: dict[str, list[int]]) -> dict[str, Any] | None:
        """The record of a taken file that is no longer what was read (the service
        reads a file once, so what was written since is not read), said on the log too;
        None when it is unchanged. A change is reported once."""
        was = read_as.get(path.name)
        if was is None:  # taken by an earlier version, which kept no size: compared from now on
            read_as[path.name] = [*sig, 0]
            return None
        if (was[0], was[1]) == sig:
            return None
        read_as[path.name] = [*sig, was[2]]
        message = (
            f"{path}: changed after step {was[2]} read it ({was[0]:,} bytes then, {sig[0]:,} now); a data file is"
            " read once, so what was written to it since is not read (write a file elsewhere, then move it in)"
        )
        print(f"mqo serve: warning: {message}", file=self.log)
        return {"stream": stream, "file": str(path), "error": message}

    def idle_streams(self) -> list[str]:
        """The declared streams that have sent nothing and have nothing on the way: no
        ``--input``, or no file taken from its folder yet and none waiting to settle.
        Like ``mqo match``'s streams without input they do not hold time back (windows
        close, state is purged, late tuples are found); one that speaks later is active
        again (the tuples it brings older than the watermark then are late)."""
        waiting = {p.parent for p in self._settling.waiting}
        fed = {s.lower() for s, folder in self.inputs.items() if self.state.taken.get(s) or Path(folder) in waiting}
        # (views are not declared streams: their time is their inputs', no clock to idle)
        return [s.name for s in self.matcher.catalog.base_streams() if s.name.lower() not in fed]

    def idle_note(self) -> str:
        """For the start line: the streams idle from the start, and why."""
        given = {s.lower(): folder for s, folder in self.inputs.items()}
        notes = []
        for name in self.idle_streams():
            folder = given.get(name.lower())
            if folder is None:
                notes.append(f"{name} (no --input)")
            elif not self.state.taken.get(name) and not any(_visible(Path(folder))):
                notes.append(f"{name} (nothing in {folder} yet)")
        return ", ".join(notes)

    def _match(self, data: list[StreamData], report: StepReport, stop: StopFlag, tables: TableFeed | None) -> None:
        """Match the step's tuples (the table rows read put in among them) and write
        its results, late tuples and rejects."""
        which, rows = arrival_order(data)
        first = {s: self.state.next_id.get(s, 0) for s in self.inputs}
        number_in_arrival_order(data, which, rows, first)
        for d in data:
            if d.ids is not None and len(d.ids):
                self.state.next_id[d.stream] = max(self.state.next_id.get(d.stream, 0), int(d.ids.max()) + 1)
        step = report.step
        results_path = self._path("results", self.fmt, step)
        late_path = self._path("late", "jsonl", step)
        aggregates = self.matcher.registrations.output_aggregates()  # (an aggregate view's rows are no output)
        # aggregate rows: in the JSON-lines results, else a file of their own (other columns)
        aggregates_path = self._path("aggregates", self.fmt, step)
        separate = bool(aggregates) and self.fmt != "jsonl"
        summary = Summary(output=str(results_path))
        with (
            open_writer(str(temporary_path(results_path)), self.fmt, self.matcher.value_types()) as writer,
            (
                open_aggregate_writer(str(temporary_path(aggregates_path)), self.fmt, aggregates)
                if separate
                else nullcontext(writer)
            ) as aggregate_writer,
            LinesFile(str(temporary_path(late_path)), "the late-tuple file") as late_file,
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
                idle=self.idle_streams(),
                tables=tables,
            )
        report.tuples = len(which)
        report.results, report.late = summary.results + summary.aggregates, late_file.count
        report.rejected = sum(len(d.rejected) for d in data)
        # every step writes its results file, empty when it found none (steps can be counted)
        for path, keep in (
            (results_path, True),
            (aggregates_path, separate),
            (late_path, late_file.count > 0),
        ):
            if keep and summary.interrupted is None:
                os.replace(temporary_path(path), path)
            else:
                temporary_path(path).unlink(missing_ok=True)
        if summary.interrupted is not None:
            report.interrupted = True
        elif report.rejected:
            rejects = self._path("rejected", "jsonl", step)
            self._publish(rejects, lambda p: write_jsonl(str(p), (r.as_dict() for d in data for r in d.rejected)))

    # ------------------------------------------------------------ helpers

    def _path(self, kind: str, ext: str, step: int) -> Path:
        return self.output_dir / f"{kind}-{step:06d}.{ext}"

    def _publish(self, path: Path, write: Callable[[Path], Any]) -> None:
        write(temporary_path(path))
        os.replace(temporary_path(path), path)

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


@contextmanager
def _stop_flag(given: StopFlag | None) -> Iterator[StopFlag]:
    if given is not None:
        yield given
        return
    with deferred_stop() as flag:
        yield flag
