"""Writing matches as JSON lines, CSV or Parquet, and the late and reject files.

JSON lines carry one object per match with the keys ``query``, ``ts``, ``ids`` and
``values`` (README, Command line). CSV and Parquet are tables: ``query``, ``ts``, ``ids``
(JSON text in CSV, a map in Parquet) and then one column per SELECT value name over
all queries (NULL where a query has no such value). A value name that two queries give
different types to is written as text.

Every file is one a strict reader takes: a computed value that is not a finite number
(an overflow to infinity; NaN) is written as NULL in every format (JSON ``null``, an
empty CSV field, a Parquet null) and counted (``nonfinite``), since JSON has no
``Infinity`` or ``NaN``. Results reach the file as they are written (each write is
flushed), in whole lines. Parquet goes to a temporary name beside the target and is
renamed when it is closed, also when a run stops early, so the file at the target
name is always a whole, readable Parquet file.
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mqo import AggregateBatch, Match, MatchBatch
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


# ------------------------------------------------------------ non-finite values


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
    """One record as strict JSON (non-finite numbers as null); and how many there were."""
    try:
        return _dumps_strict(record), 0
    except ValueError:
        clean, count = _finite(record)
        return _dumps_strict(clean), count


def strict_json_lines(text: str) -> tuple[str, int]:
    """JSON lines (as :meth:`MatchBatch.json_text` writes them, which may hold
    ``Infinity`` or ``NaN``) with every non-finite number as null; and how many."""
    if "Infinity" not in text and "NaN" not in text:
        return text, 0
    lines = text.split("\n")  # JSON escapes line breaks inside strings
    count = 0
    for k, line in enumerate(lines):
        if "Infinity" in line or "NaN" in line:
            lines[k], n = strict_json(json.loads(line))  # json.loads reads Infinity and NaN
            count += n
    return "\n".join(lines), count


def _finite_columns(table: pa.Table) -> tuple[pa.Table, int]:
    count = 0
    for k, column in enumerate(table.columns):
        if pa.types.is_floating(column.type):
            finite = pc.is_finite(column)
            bad = column.length() - column.null_count - (pc.sum(finite).as_py() or 0)
            if bad:
                count += bad
                table = table.set_column(k, table.field(k), pc.if_else(finite, column, pa.nulls(1, column.type)[0]))
    return table, count


# ----------------------------------------------------------------- writers


class ResultWriter:
    """Writes results to ``path``; ``nonfinite`` counts values written as NULL."""

    what = "the output"

    def __init__(self, path: str) -> None:
        self.path = path
        self.nonfinite = 0

    def write(self, matches: Iterable[Match]) -> None:
        raise NotImplementedError

    def write_batch(self, batch: MatchBatch) -> int:
        """Write a batch of results; returns how many."""
        matches = batch.matches()
        self.write(matches)
        return len(matches)

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


def open_text(path: str) -> IO[str]:
    if path == "-":
        return sys.stdout
    return open(path, "w", encoding="utf-8", newline="")


class _EncodingWriter:
    """A text stream with no byte buffer (an ``io.StringIO`` put in place of standard
    output) taking bytes."""

    def __init__(self, f: IO[str]) -> None:
        self._f = f

    def write(self, data: bytes) -> None:
        self._f.write(data.decode())

    def flush(self) -> None:
        self._f.flush()


def _stdout_bytes() -> IO[bytes] | _EncodingWriter:
    sys.stdout.flush()  # what was printed before goes first
    buffer = getattr(sys.stdout, "buffer", None)
    return buffer if buffer is not None else _EncodingWriter(sys.stdout)


class JsonlWriter(ResultWriter):
    """Writes UTF-8 bytes: a batch's lines are encoded run by run, never made into one
    string (standard output gets them through its byte buffer)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        with writing(self.what, path):
            if path == "-":
                self._f = _stdout_bytes()
            else:
                self._f = open(path, "wb")  # noqa: SIM115 - open across writes

    def _put(self, text: str) -> None:
        with writing(self.what, self.path):
            self._f.write(text.encode())
            self._f.flush()

    def write(self, matches: Iterable[Match]) -> None:
        parts = []
        for m in matches:
            line, n = strict_json(m.as_dict())
            self.nonfinite += n
            parts.append(line + "\n")
        self._put("".join(parts))

    def write_batch(self, batch: MatchBatch) -> int:
        with writing(self.what, self.path):
            self.nonfinite += batch.write_json(self._f.write)
            self._f.flush()
        return len(batch)

    def write_aggregates(self, batch: AggregateBatch) -> int:
        # built from the batch's columns; a landmark window's start is written as null
        text, n = strict_json_lines(batch.json_text())
        self.nonfinite += n
        self._put(text)
        return text.count("\n")

    def close(self) -> None:
        with writing(self.what, self.path):
            if self.path == "-":
                self._f.flush()
            else:
                self._f.close()


def _ids_text(ids: dict[str, int]) -> str:
    return json.dumps(ids, separators=(",", ":"))


class CsvWriter(ResultWriter):
    def __init__(self, path: str, names: list[str]) -> None:
        super().__init__(path)
        self._names = names
        with writing(self.what, path):
            self._f = open_text(path)
            self._w = csv.writer(self._f)
            self._w.writerow(["query", "ts", "ids", *names])
            self._f.flush()

    def write(self, matches: Iterable[Match]) -> None:
        names = self._names
        value = self._csv_value
        with writing(self.what, self.path):
            self._w.writerows(
                [m.query, repr(m.ts), _ids_text(m.ids), *(value(m.values.get(n)) for n in names)] for m in matches
            )
            self._f.flush()

    def _csv_value(self, value: Any) -> Any:
        if value is None:
            return ""
        if isinstance(value, float):
            if not math.isfinite(value):
                self.nonfinite += 1
                return ""
            return repr(value)
        return value

    def close(self) -> None:
        with writing(self.what, self.path):
            if self.path == "-":
                self._f.flush()
            else:
                self._f.close()


class ParquetWriter(ResultWriter):
    def __init__(self, path: str, types: dict[str, pa.DataType], schema: pa.Schema | None = None) -> None:
        """``schema``: another layout than the match results' (the aggregate file's)."""
        super().__init__(path)
        self._types = types
        fields = [
            pa.field("query", pa.string(), nullable=False),
            pa.field("ts", pa.float64(), nullable=False),
            pa.field("ids", pa.map_(pa.string(), pa.int64()), nullable=False),
        ] + [pa.field(name, t) for name, t in types.items()]
        self.schema = schema if schema is not None else pa.schema(fields)
        target = Path(path)
        # A device or pipe is written in place; a file is written beside and renamed.
        special = target.exists() and not target.is_file()
        self._temp = None if special else target.with_name(f".{target.name}.{os.getpid()}.partial")
        with writing(self.what, path):
            self._writer = pq.ParquetWriter(str(self._temp or target), self.schema)
        self._pending: list[Match] = []
        self._closed = False

    def write(self, matches: Iterable[Match]) -> None:
        self._pending.extend(matches)
        if len(self._pending) >= _BATCH:
            self._flush()

    def write_batch(self, batch: MatchBatch) -> int:
        self._flush()
        table = batch.to_arrow(self._types)
        self._write_table(table)
        return table.num_rows

    def _write_table(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        table, n = _finite_columns(table)
        self.nonfinite += n
        with writing(self.what, self.path):
            self._writer.write_table(table.cast(self.schema))

    def _flush(self) -> None:
        if not self._pending:
            return
        ms = self._pending
        arrays = [
            pa.array([m.query for m in ms], pa.string()),
            pa.array([m.ts for m in ms], pa.float64()),
            pa.array([list(m.ids.items()) for m in ms], pa.map_(pa.string(), pa.int64())),
        ]
        for name, t in self._types.items():
            column = [m.values.get(name) for m in ms]
            if t == pa.string():
                column = [None if v is None else str(v) for v in column]
            arrays.append(pa.array(column, t, from_pandas=True))
        self._pending = []
        self._write_table(pa.Table.from_arrays(arrays, schema=self.schema))

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


def open_writer(path: str, fmt: str, types: dict[str, pa.DataType]) -> ResultWriter:
    if fmt == "jsonl":
        return JsonlWriter(path)
    if fmt == "csv":
        return CsvWriter(path, list(types))
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
