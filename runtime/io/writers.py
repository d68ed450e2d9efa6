"""Writing matches as JSON lines, CSV or Parquet, and the late and reject files.

JSON lines carry one object per match with the keys ``query``, ``ts``, ``ids`` and
``values`` (README, Command line). CSV and Parquet are tables: ``query``, ``ts``, ``ids``
(JSON text in CSV, a map in Parquet) and then one column per SELECT value name over
all queries (NULL where a query has no such value). A value name that two queries give
different types to is written as text.

The bytes come from the one result encoder (:mod:`mqo.result_encoding`): result
columns as JSON lines or CSV text, or as they are to pyarrow's Parquet writer. A
writer takes a batch's result columns (``write_batch``), Match objects made into
columns (``write``, what ordered emission releases) or a table of result columns
(``write_table``, the Spark stage's output).

Every file is one a strict reader takes: a computed value that is not a finite number
(an overflow to infinity; NaN) is written as NULL in every format (JSON ``null``, an
empty CSV field, a Parquet null) and counted (``nonfinite``), since JSON has no
``Infinity`` or ``NaN``. Results reach the file as they are written (each write is
flushed), in whole lines. Parquet goes to a temporary name beside the target and is
renamed when it is closed, also when a run stops early, so the file at the target
name is always a whole, readable Parquet file.
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa

from mqo import (
    AggregateBatch,
    Layout,
    Match,
    MatchBatch,
    buffer_of,
    csv_header,
    csv_lines,
    finite_columns,
    json_lines,
    matches_columns,
    result_schema,
)
from predicates import MqoError

FORMATS = ("jsonl", "csv", "parquet")
_BATCH = 50_000
_dumps_strict = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


class OutputError(MqoError):
    """An output that cannot be written; names the file and the reason."""


def guess_format(path: str, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise MqoError(f"unknown output format {fmt!r}; use one of {', '.join(FORMATS)}")
        return fmt
    suffix = Path(path).suffix.lower()
    return {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}.get(suffix, "jsonl")


def shown_path(path: str) -> str:
    return "standard output" if path == "-" else path


@contextmanager
def writing(what: str, path: str) -> Iterator[None]:
    """OS errors of a write as an :class:`OutputError` naming the file."""
    try:
        yield
    except OSError as err:
        raise OutputError(f"cannot write {what} {shown_path(path)}: {err.strerror or err}") from None


# ------------------------------------------------------ side-file records


def _finite(value: Any) -> tuple[Any, int]:
    """``value`` with every non-finite float inside it replaced by None; and how many."""
    if isinstance(value, float):
        return (value, 0) if math.isfinite(value) else (None, 1)
    if isinstance(value, dict):
        count = 0
        out = {}
        for key, item in value.items():
            out[key], n = _finite(item)
            count += n
        return out, count
    if isinstance(value, list):
        pairs = [_finite(item) for item in value]
        return [p[0] for p in pairs], sum(p[1] for p in pairs)
    return value, 0


def strict_json(record: Any) -> tuple[str, int]:
    """One late or reject record (a tuple as read, not a result) as strict JSON
    (non-finite numbers as null); and how many there were."""
    try:
        return _dumps_strict(record), 0
    except ValueError:
        clean, count = _finite(record)
        return _dumps_strict(clean), count


# ----------------------------------------------------------------- writers


class ResultWriter:
    """Writes results to ``path`` as result columns (:mod:`mqo.result_encoding`);
    ``nonfinite`` counts values written as NULL. ``types``: the value columns of a
    CSV or Parquet file (JSON lines write each query's own values)."""

    what = "the output"

    def __init__(self, path: str, types: Mapping[str, pa.DataType] | None = None) -> None:
        self.path = path
        self.types = dict(types) if types is not None else None
        self.nonfinite = 0

    def write(self, matches: Sequence[Match]) -> None:
        """Match objects (ordered emission releases them) as result columns."""
        if not matches:
            return
        table, layouts, overflowed = matches_columns(matches, self.types)
        self.nonfinite += overflowed
        self.write_table(table, layouts)

    def write_batch(self, batch: MatchBatch) -> int:
        """Write a batch of results; returns how many. Values are made NULL on the
        rows the results share (counted once per result), then the table of one row
        per result is built once."""
        columns = batch.result_columns(self.types)
        layouts = batch.layouts()
        distinct, nonfinite = finite_columns(columns.distinct, layouts, uses=columns.uses())
        self.nonfinite += columns.overflowed + nonfinite
        if len(columns.slots):
            self._write(columns.expand(distinct), layouts, columns.shared)
        return len(columns.slots)

    def write_table(self, table: pa.Table, layouts: Mapping[str, Layout], shared: np.ndarray | None = None) -> None:
        """Result columns (:func:`mqo.result_encoding.result_schema`), each query's
        values as its :class:`Layout` says; non-finite numbers are written as NULL.
        ``shared``: rows that differ in their query only (:func:`mqo.json_lines`)."""
        if not table.num_rows:
            return
        table, n = finite_columns(table, layouts)
        self.nonfinite += n
        self._write(table, layouts, shared)

    def _write(self, table: pa.Table, layouts: Mapping[str, Layout], shared: np.ndarray | None) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def write_aggregates(self, batch: AggregateBatch) -> int:
        """Aggregate rows; returns how many."""
        raise OutputError("aggregate results are written as JSON lines for now; use --format jsonl")

    def abandon(self) -> None:
        """Close after a failure: keep what was written whole, raise nothing more."""
        with suppress(OSError, MqoError):
            self.close()

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abandon()


class _EncodingWriter:
    """A text stream with no byte buffer (an ``io.StringIO`` put in place of standard
    output) taking bytes."""

    def __init__(self, f: IO[str]) -> None:
        self._f = f

    def write(self, data: bytes | memoryview) -> None:
        self._f.write(bytes(data).decode())

    def flush(self) -> None:
        self._f.flush()


def open_bytes(path: str) -> IO[bytes] | _EncodingWriter:
    """A file for UTF-8 bytes (standard output through its byte buffer)."""
    if path != "-":
        return open(path, "wb")
    sys.stdout.flush()  # what was printed before goes first
    buffer = getattr(sys.stdout, "buffer", None)
    return buffer if buffer is not None else _EncodingWriter(sys.stdout)


class LinesWriter(ResultWriter):
    """Lines of UTF-8 bytes: a batch's lines are one Arrow buffer, written as it is
    and flushed."""

    def __init__(self, path: str, types: Mapping[str, pa.DataType] | None = None) -> None:
        super().__init__(path, types)
        with writing(self.what, path):
            self._f = open_bytes(path)

    def _put(self, data: bytes | memoryview) -> None:
        with writing(self.what, self.path):
            self._f.write(data)
            self._f.flush()

    def close(self) -> None:
        with writing(self.what, self.path):
            if self.path == "-":
                self._f.flush()
            else:
                self._f.close()


class JsonlWriter(LinesWriter):
    """One JSON object per result (keys ``query``, ``ts``, ``ids``, ``values``: the
    query's own values)."""

    def _write(self, table: pa.Table, layouts: Mapping[str, Layout], shared: np.ndarray | None) -> None:
        self._put(buffer_of(json_lines(table, layouts, ("ts", "ids"))))

    def write_batch(self, batch: MatchBatch) -> int:
        # the batch's own value columns: JSON lines write each query's values, whatever
        # the file's columns
        with writing(self.what, self.path):
            self.nonfinite += batch.write_json(self._f.write)
            self._f.flush()
        return len(batch)

    def write_aggregates(self, batch: AggregateBatch) -> int:
        # the rows' result columns; a landmark window's start is null
        table, layouts, overflowed = batch.result_columns()
        table, nonfinite = finite_columns(table, layouts)
        self.nonfinite += overflowed + nonfinite
        self._put(buffer_of(json_lines(table, layouts, ("window_start", "window_end"))))
        return table.num_rows


class JsonLinesInMemory(JsonlWriter):
    """The JSON lines a :class:`JsonlWriter` writes, kept in memory and taken as a list
    of lines (the HTTP service's results: the same text as ``mqo match`` writes)."""

    def __init__(self) -> None:
        ResultWriter.__init__(self, "<memory>")
        self._f = io.BytesIO()

    def take(self) -> list[str]:
        """The lines written since the last call, without their newlines."""
        text = self._f.getvalue().decode()
        self._f.seek(0)
        self._f.truncate()
        return text.split("\n")[:-1] if text else []

    def close(self) -> None:
        pass


class CsvWriter(LinesWriter):
    """A header, then one line per result: query, ts, ids (JSON text), the value columns."""

    def __init__(self, path: str, types: Mapping[str, pa.DataType]) -> None:
        super().__init__(path, types)
        self._put(csv_header(["query", "ts", "ids", *types]).encode())

    def _write(self, table: pa.Table, layouts: Mapping[str, Layout], shared: np.ndarray | None) -> None:
        self._put(buffer_of(csv_lines(table, table.schema.names)))

    def write_batch(self, batch: MatchBatch) -> int:
        # what the results of one assignment share is formatted once (as JSON lines are)
        assert self.types is not None
        with writing(self.what, self.path):
            count, nonfinite = batch.write_csv(self._f.write, self.types)
            self._f.flush()
        self.nonfinite += nonfinite
        return count


class ParquetWriter(ResultWriter):
    def __init__(self, path: str, types: Mapping[str, pa.DataType] | None, schema: pa.Schema | None = None) -> None:
        """``schema``: another layout than the match results' (the aggregate file's)."""
        super().__init__(path, types)
        self.schema = schema if schema is not None else result_schema(types or {})
        target = Path(path)
        # A device or pipe is written in place; a file is written beside and renamed.
        special = target.exists() and not target.is_file()
        self._temp = None if special else target.with_name(f".{target.name}.{os.getpid()}.partial")
        import pyarrow.parquet as pq  # here: JSON lines and CSV runs do without it

        with writing(self.what, path):
            self._writer = pq.ParquetWriter(str(self._temp or target), self.schema)
        self._pending: list[pa.Table] = []  # results given a few at a time, one row group
        self._closed = False

    def write(self, matches: Sequence[Match]) -> None:
        super().write(matches)
        if sum(t.num_rows for t in self._pending) >= _BATCH:
            self._flush()

    def write_batch(self, batch: MatchBatch) -> int:
        self._flush()
        return super().write_batch(batch)

    def _write(self, table: pa.Table, layouts: Mapping[str, Layout], shared: np.ndarray | None) -> None:
        self._pending.append(table)
        if len(self._pending) == 1 and table.num_rows >= _BATCH:
            self._flush()

    def write_batch_table(self, table: pa.Table) -> None:
        """Rows already in the file's schema, written as one row group."""
        with writing(self.what, self.path):
            self._writer.write_table(table.cast(self.schema))

    def _flush(self) -> None:
        if not self._pending:
            return
        table = pa.concat_tables(self._pending)
        self._pending = []
        self.write_batch_table(table)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._flush()
        finally:
            # the footer is written even after a failed write, so what was written stays readable
            with writing(self.what, self.path):
                self._writer.close()
                if self._temp is not None:
                    os.replace(self._temp, self.path)

    def abandon(self) -> None:
        """Close and rename (a whole file with the row groups written so far); if even
        that fails, leave no temporary file behind."""
        try:
            self.close()
        except (OSError, MqoError):
            if self._temp is not None:
                self._temp.unlink(missing_ok=True)


def open_writer(path: str, fmt: str, types: Mapping[str, pa.DataType]) -> ResultWriter:
    if fmt == "jsonl":
        return JsonlWriter(path)
    if fmt == "csv":
        return CsvWriter(path, types)
    if path == "-":
        raise MqoError("Parquet output needs a file, not standard output")
    return ParquetWriter(path, types)


# -------------------------------------------------------------- side files


class LinesFile:
    """A late or reject file: JSON lines written (and flushed) as they come. It is
    created at the first record, so a run with none leaves none; a file of an earlier
    run was removed when the run started (:func:`check_output_paths`)."""

    def __init__(self, path: str, what: str) -> None:
        self.path = path
        self.what = what
        self.count = 0
        self._f: IO[str] | None = None

    def write(self, records: Iterable[dict[str, Any]]) -> None:
        lines = [strict_json(record)[0] + "\n" for record in records]
        if not lines:
            return
        with writing(self.what, self.path):
            if self._f is None:
                self._f = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - open across writes
            self._f.write("".join(lines))
            self._f.flush()
        self.count += len(lines)

    def close(self) -> None:
        if self._f is not None:
            with writing(self.what, self.path):
                self._f.close()
            self._f = None

    def __enter__(self) -> LinesFile:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:
            with suppress(OutputError):
                self.close()


def write_jsonl(path: str, records: Iterable[dict[str, Any]], what: str = "the file") -> int:
    """Write dicts as strict JSON lines; returns how many."""
    with LinesFile(path, what) as f:
        f.write(records)
    return f.count


def side_paths(output: str, late: str | None, rejects: str | None) -> tuple[str, str]:
    """The late and reject files: as given, else beside the output (``mqo.*`` in the
    working directory when results go to standard output)."""
    base = "mqo" if output == "-" else output
    return late or f"{base}.late.jsonl", rejects or f"{base}.rejects.jsonl"


def check_output_paths(named: list[tuple[str, str, bool]], inputs: Iterable[str]) -> None:
    """Before any input is read: every output can be written, none is an input or
    another output, and each side file left by an earlier run is removed (this run
    writes its own, or none). ``named`` holds (what, path, is a side file)."""
    seen: dict[str, str] = {}
    inputs = list(inputs)
    for what, path, _ in named:
        if path == "-":
            continue
        key = _key(path)
        if input_holding(path, inputs) is not None:
            raise OutputError(f"{what} {path} is also an input file; writing it would destroy the input")
        if key in seen:
            raise OutputError(f"{what} and {seen[key]} are the same file, {path}; give them different names")
        seen[key] = what
        target = Path(path)
        if target.is_dir():
            raise OutputError(f"cannot write {what} {path}: it is a directory")
        parent = target.parent
        if not parent.is_dir():
            why = "does not exist" if not parent.exists() else "is not a directory"
            raise OutputError(f"cannot write {what} {path}: the directory {parent} {why}")
    for what, path, side in named:
        if path == "-":
            continue
        _probe(what, path, remove=side)


def _key(path: str) -> str:
    return os.path.realpath(path)


def input_holding(path: str, inputs: Iterable[str]) -> str | None:
    """The input that ``path`` is, or lies inside (an input directory, as ``mqo serve``
    reads), after links are followed; None when it is none of them."""
    key = _key(path)
    for given in inputs:
        folder = _key(given)
        if key == folder or key.startswith(folder.rstrip(os.sep) + os.sep):
            return given
    return None


def _probe(what: str, path: str, *, remove: bool) -> None:
    """Show that ``path`` can be written, without leaving anything a run would not
    leave: a regular side file of an earlier run is removed, a new one is created and
    removed again; a device (``/dev/null``) is opened for appending."""
    target = Path(path)
    with writing(what, path):
        if target.exists() and not target.is_file():
            open(path, "a").close()
        elif target.exists():
            if remove:
                target.unlink()
            else:
                open(path, "a").close()
        else:
            open(path, "x").close()
            target.unlink()
