"""Writing matches as JSON lines, CSV or Parquet.

JSON lines carry one object per match with the keys ``query``, ``ts``, ``ids`` and
``values`` (DESIGN.md §6). CSV and Parquet are tables: ``query``, ``ts``, ``ids``
(JSON text in CSV, a map in Parquet) and then one column per SELECT value name over
all queries (NULL where a query has no such value). A value name that two queries give
different types to is written as text.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from mqo.batch import MatchBatch
from mqo.batch import value_types as batch_value_types
from mqo.results import Match
from predicates import MqoError

FORMATS = ("jsonl", "csv", "parquet")
_BATCH = 50_000


def value_types(matcher: Any) -> dict[str, pa.DataType]:
    """The Arrow type of every SELECT value name over the matcher's queries."""
    return batch_value_types(matcher.registry)


def guess_format(path: str, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise MqoError(f"unknown output format {fmt!r}; use one of {', '.join(FORMATS)}")
        return fmt
    suffix = Path(path).suffix.lower()
    return {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}.get(suffix, "jsonl")


class ResultWriter:
    def write(self, matches: Iterable[Match]) -> None:
        raise NotImplementedError

    def write_batch(self, batch: MatchBatch) -> int:
        """Write a batch of results; returns how many."""
        matches = batch.matches()
        self.write(matches)
        return len(matches)

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> ResultWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open_text(path: str) -> IO[str]:
    if path == "-":
        return sys.stdout
    return open(path, "w", encoding="utf-8", newline="")


class JsonlWriter(ResultWriter):
    def __init__(self, path: str) -> None:
        self.path = path
        self._f = _open_text(path)
        self._dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

    def write(self, matches: Iterable[Match]) -> None:
        dumps = self._dumps
        self._f.write("".join(dumps(m.as_dict()) + "\n" for m in matches))

    def write_batch(self, batch: MatchBatch) -> int:
        self._f.write(batch.json_text())
        return len(batch)

    def close(self) -> None:
        if self.path == "-":
            self._f.flush()
        else:
            self._f.close()


class CsvWriter(ResultWriter):
    def __init__(self, path: str, names: list[str]) -> None:
        self.path = path
        self._f = _open_text(path)
        self._names = names
        self._w = csv.writer(self._f)
        self._w.writerow(["query", "ts", "ids", *names])

    def write(self, matches: Iterable[Match]) -> None:
        names = self._names
        self._w.writerows(
            [
                m.query,
                repr(m.ts),
                json.dumps(m.ids, separators=(",", ":")),
                *(_csv_value(m.values.get(n)) for n in names),
            ]
            for m in matches
        )

    def close(self) -> None:
        if self.path != "-":
            self._f.close()


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return value


class ParquetWriter(ResultWriter):
    def __init__(self, path: str, types: dict[str, pa.DataType]) -> None:
        self.path = path
        self._types = types
        fields = [
            pa.field("query", pa.string(), nullable=False),
            pa.field("ts", pa.float64(), nullable=False),
            pa.field("ids", pa.map_(pa.string(), pa.int64()), nullable=False),
        ] + [pa.field(name, t) for name, t in types.items()]
        self.schema = pa.schema(fields)
        self._writer = pq.ParquetWriter(path, self.schema)
        self._pending: list[Match] = []

    def write(self, matches: Iterable[Match]) -> None:
        self._pending.extend(matches)
        if len(self._pending) >= _BATCH:
            self._flush()

    def write_batch(self, batch: MatchBatch) -> int:
        self._flush()
        table = batch.to_arrow(self._types)
        if table.num_rows:
            self._writer.write_table(table.cast(self.schema))
        return table.num_rows

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
            arrays.append(pa.array(column, t))
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        self._pending = []

    def close(self) -> None:
        self._flush()
        self._writer.close()


def open_writer(path: str, fmt: str, types: dict[str, pa.DataType]) -> ResultWriter:
    try:
        if fmt == "jsonl":
            return JsonlWriter(path)
        if fmt == "csv":
            return CsvWriter(path, list(types))
        if path == "-":
            raise MqoError("Parquet output needs a file, not standard output")
        return ParquetWriter(path, types)
    except OSError as err:
        raise MqoError(f"cannot write output file {path}: {err.strerror}") from None


def write_jsonl(path: str, records: Iterable[dict[str, Any]]) -> int:
    """Write dicts as JSON lines; returns how many."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, separators=(",", ":"), ensure_ascii=False, default=str) + "\n")
            n += 1
    return n
