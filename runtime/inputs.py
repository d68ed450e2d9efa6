"""Reading stream files (CSV, Parquet) and merging them into one arrival order.

A CSV file has a header with a ``ts`` column, an optional ``id`` column and the
stream's columns (every declared column must be there; an unknown column is an error,
so a misspelt header never silently becomes NULLs). Empty fields, ``NULL`` and ``NaN``
are NULL.

Files are read with Arrow's CSV reader. If Arrow rejects a file, it is read again
row by row to find and name the first bad row exactly (``file:line: column 'x': ...``);
with ``on_bad_row='skip'`` every bad row is set aside with its reason instead, and
the good rows are matched.

Several inputs are merged the way they would arrive: repeatedly the input whose next
tuple has the smallest ``ts`` (ties: the input given first) yields its next tuple.
Within a file the file's order is kept, so a file that is out of timestamp order
produces late tuples, as a live stream would.
"""

from __future__ import annotations

import csv
import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from predicates import Catalog, ColumnType, MqoError, StreamSchema
from predicates.errors import did_you_mean

NULL_TEXTS = frozenset({"", "NULL", "null", "NaN", "nan"})
TRUE_TEXTS = frozenset({"true", "TRUE", "True", "1", "t", "T"})
FALSE_TEXTS = frozenset({"false", "FALSE", "False", "0", "f", "F"})

_ARROW_TYPES = {
    ColumnType.INTEGER: pa.int64(),
    ColumnType.BYTE: pa.int64(),
    ColumnType.FLOAT: pa.float64(),
    ColumnType.STRING: pa.string(),
    ColumnType.BOOLEAN: pa.bool_(),
}


class InputError(MqoError):
    """A stream file that cannot be read as given; names the file and, for a bad row,
    the line and column."""


@dataclass(frozen=True)
class InputSpec:
    stream: str
    path: str

    @classmethod
    def parse(cls, text: str) -> InputSpec:
        stream, sep, path = text.partition("=")
        if not sep or not stream or not path:
            raise InputError(f"--input takes STREAM=FILE (for example B=blood.csv), got {text!r}")
        return cls(stream.strip(), path.strip())


@dataclass(frozen=True)
class BadRow:
    path: str
    line: int
    column: str | None
    value: str | None
    reason: str
    raw: str

    def message(self) -> str:
        where = f"{self.path}:{self.line}"
        if self.column is None:
            return f"{where}: {self.reason}"
        return f"{where}: column '{self.column}': {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.path,
            "line": self.line,
            "column": self.column,
            "value": self.value,
            "reason": self.reason,
            "raw": self.raw,
        }


@dataclass
class StreamData:
    """One input file as columns: timestamps, ids (None: automatic) and values."""

    stream: str
    path: str
    ts: list[float]
    ids: list[int] | None
    columns: dict[str, list[Any]]
    rejected: list[BadRow] = field(default_factory=list)
    lines: list[int] | None = None  # source line of each row, when it is not row + 2

    def __len__(self) -> int:
        return len(self.ts)

    def as_batch(self) -> dict[str, Any]:
        """The rows as columns, as :meth:`mqo.Matcher.prepare` takes them."""
        batch: dict[str, Any] = {"ts": self.ts}
        if self.ids is not None:
            batch["id"] = self.ids
        batch.update(self.columns)
        return batch

    def line_of(self, i: int) -> int:
        return self.lines[i] if self.lines is not None else i + 2

    def drop(self, rows: set[int]) -> None:
        keep = [i for i in range(len(self.ts)) if i not in rows]
        self.ts = [self.ts[i] for i in keep]
        if self.ids is not None:
            self.ids = [self.ids[i] for i in keep]
        for name, col in self.columns.items():
            self.columns[name] = [col[i] for i in keep]
        if self.lines is not None:
            self.lines = [self.lines[i] for i in keep]

    def values(self, i: int) -> dict[str, Any]:
        return {name: col[i] for name, col in self.columns.items()}


def _check_header(path: str, header: list[str], schema: StreamSchema) -> None:
    lowered = {h.lower(): h for h in header}
    if "ts" not in lowered:
        raise InputError(f"{path}:1: the header has no 'ts' column (found: {', '.join(header)})")
    declared = {c.name.lower() for c in schema.columns}
    for h in header:
        if h.lower() not in declared and h.lower() not in ("ts", "id"):
            raise InputError(
                f"{path}:1: column '{h}' is not a column of stream {schema.name}"
                + did_you_mean(h, schema.column_names)
                + f" (columns: {', '.join(schema.column_names)})"
            )
    missing = [c.name for c in schema.columns if c.name.lower() not in lowered]
    if missing:
        raise InputError(f"{path}:1: the header lacks column(s) {', '.join(missing)} of stream {schema.name}")
    if len(lowered) != len(header):
        dup = next(h for h in header if sum(1 for o in header if o.lower() == h.lower()) > 1)
        raise InputError(f"{path}:1: column '{dup}' appears twice in the header")


def read_stream(spec: InputSpec, schema: StreamSchema, on_bad_row: str = "error") -> StreamData:
    path = spec.path
    p = Path(path)
    if not p.exists():
        raise InputError(f"input file not found: {path}")
    if p.is_dir():
        raise InputError(f"input path is a directory, not a file: {path}")
    if p.suffix.lower() in (".parquet", ".pq"):
        data = _read_parquet(spec, schema)
    else:
        data = _read_csv(spec, schema, on_bad_row)
    _reject_duplicate_ids(data, on_bad_row)
    return data


def _reject_duplicate_ids(data: StreamData, on_bad_row: str) -> None:
    """Ids are unique within a stream (DESIGN.md §3): a repeated id is a bad row."""
    if data.ids is None:
        return
    first: dict[int, int] = {}
    repeated: set[int] = set()
    for i, ident in enumerate(data.ids):
        if ident in first:
            row = BadRow(
                data.path,
                data.line_of(i),
                "id",
                str(ident),
                f"id {ident} is already used by the row at line {data.line_of(first[ident])}",
                "",
            )
            if on_bad_row != "skip":
                raise InputError(row.message())
            data.rejected.append(row)
            repeated.add(i)
        else:
            first[ident] = i
    if repeated:
        data.drop(repeated)


def read_inputs(specs: list[InputSpec], catalog: Catalog, on_bad_row: str = "error") -> list[StreamData]:
    """Read every ``--input STREAM=FILE`` against its declared stream and check ids
    across the files of one stream."""
    data: list[StreamData] = []
    for spec in specs:
        schema = catalog.get(spec.stream)
        if schema is None:
            raise InputError(
                f"--input {spec.stream}={spec.path}: unknown stream {spec.stream!r}"
                + did_you_mean(spec.stream, catalog.names())
            )
        data.append(read_stream(spec, schema, on_bad_row))
    check_ids_across_inputs(data)
    return data


def check_ids_across_inputs(inputs: list[StreamData]) -> None:
    """Several files of one stream: all give ids or none do, and no id repeats."""
    by_stream: dict[str, list[StreamData]] = {}
    for data in inputs:
        by_stream.setdefault(data.stream, []).append(data)
    for stream, group in by_stream.items():
        if len(group) < 2:
            continue
        with_ids = [d.path for d in group if d.ids is not None]
        if with_ids and len(with_ids) != len(group):
            without = [d.path for d in group if d.ids is None]
            raise InputError(
                f"stream {stream}: {', '.join(with_ids)} give(s) an id column but {', '.join(without)} do(es) not;"
                " give ids in every file of a stream or in none (automatic ids could repeat given ones)"
            )
        if with_ids:
            seen: dict[int, str] = {}
            for d in group:
                for i, ident in enumerate(d.ids or []):
                    if ident in seen:
                        raise InputError(
                            f"{d.path}:{d.line_of(i)}: column 'id': id {ident} of stream {stream} is already used in"
                            f" {seen[ident]}"
                        )
                    seen[ident] = d.path


def _read_csv(spec: InputSpec, schema: StreamSchema, on_bad_row: str) -> StreamData:
    path = spec.path
    with open(path, encoding="utf-8-sig", newline="") as f:
        header_line = f.readline()
    if not header_line.strip():
        raise InputError(f"{path}:1: the file is empty; a header with a 'ts' column is needed")
    header = next(csv.reader([header_line]))
    header = [h.strip() for h in header]
    _check_header(path, header, schema)
    canonical = {h: _canonical_name(h, schema) for h in header}
    types = {
        h: (pa.float64() if canonical[h] == "ts" else pa.int64() if canonical[h] == "id" else None) for h in header
    }
    for h in header:
        if types[h] is None:
            col = schema.columns[schema.index_of(canonical[h])]  # type: ignore[index]
            types[h] = _ARROW_TYPES[col.ctype]
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
            parse_options=pacsv.ParseOptions(newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(
                column_types=types,
                null_values=sorted(NULL_TEXTS),
                strings_can_be_null=True,
                true_values=sorted(TRUE_TEXTS),
                false_values=sorted(FALSE_TEXTS),
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        return _read_csv_rows(spec, schema, header, canonical, on_bad_row)
    data = _from_table(spec, table, canonical)
    bad = _find_bad_ts(data)
    if bad is not None:
        # a NULL ts (empty field) slips through Arrow; find its line exactly
        return _read_csv_rows(spec, schema, header, canonical, on_bad_row)
    return data


def _canonical_name(header: str, schema: StreamSchema) -> str:
    lowered = header.lower()
    if lowered in ("ts", "id"):
        return lowered
    return schema.columns[schema.index_of(header)].name  # type: ignore[index]


def _from_table(spec: InputSpec, table: pa.Table, canonical: dict[str, str]) -> StreamData:
    columns: dict[str, list[Any]] = {}
    ts: list[float] = []
    ids: list[int] | None = None
    for name in table.column_names:
        values = table.column(name).to_pylist()
        target = canonical[name]
        if target == "ts":
            ts = values
        elif target == "id":
            ids = values
        else:
            columns[target] = [None if isinstance(v, float) and math.isnan(v) else v for v in values]
    return StreamData(spec.stream, spec.path, ts, ids, columns)


def _find_bad_ts(data: StreamData) -> int | None:
    for i, ts in enumerate(data.ts):
        if ts is None or not math.isfinite(ts):
            return i
    if data.ids is not None:
        for i, v in enumerate(data.ids):
            if v is None:
                return i
    return None


def _convert(text: str, ctype: ColumnType | str) -> Any:
    """Convert one CSV field; raises ValueError with a reason."""
    if ctype == "ts":
        value = float(text)
        if not math.isfinite(value):
            raise ValueError("ts must be a finite number")
        return value
    if ctype == "id":
        return int(text)
    if text in NULL_TEXTS:
        return None
    if ctype in (ColumnType.INTEGER, ColumnType.BYTE):
        return int(text)
    if ctype is ColumnType.FLOAT:
        value = float(text)
        return None if math.isnan(value) else value
    if ctype is ColumnType.BOOLEAN:
        if text in TRUE_TEXTS:
            return True
        if text in FALSE_TEXTS:
            return False
        raise ValueError("not a boolean (true/false/1/0)")
    return text


_EXPECTED = {
    "ts": "a number (the event time)",
    "id": "an integer id",
    ColumnType.INTEGER: "an integer",
    ColumnType.BYTE: "an integer",
    ColumnType.FLOAT: "a number",
    ColumnType.BOOLEAN: "a boolean",
}


def _read_csv_rows(
    spec: InputSpec, schema: StreamSchema, header: list[str], canonical: dict[str, str], on_bad_row: str
) -> StreamData:
    """The exact path: row by row, naming the line and column of every bad row."""
    kinds: list[ColumnType | str] = []
    for h in header:
        name = canonical[h]
        kinds.append(name if name in ("ts", "id") else schema.columns[schema.index_of(name)].ctype)  # type: ignore[index]
    has_id = "id" in canonical.values()
    columns: dict[str, list[Any]] = {c.name: [] for c in schema.columns}
    data = StreamData(spec.stream, spec.path, [], [] if has_id else None, columns, lines=[])
    with open(spec.path, encoding="utf-8-sig", errors="strict", newline="") as f:
        reader = csv.reader(f)
        try:
            next(reader)
            line = reader.line_num
            for fields in reader:
                start_line = line + 1
                line = reader.line_num
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    continue
                bad = _parse_row(fields, header, canonical, kinds, data)
                if bad is None:
                    data.lines.append(start_line)  # type: ignore[union-attr]
                    continue
                column, value, reason = bad
                row = BadRow(spec.path, start_line, column, value, reason, ",".join(fields))
                if on_bad_row != "skip":
                    raise InputError(row.message())
                data.rejected.append(row)
        except UnicodeDecodeError as err:
            raise InputError(f"{spec.path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
        except csv.Error as err:
            raise InputError(f"{spec.path}:{reader.line_num}: malformed CSV ({err})") from None
    return data


def _parse_row(
    fields: list[str],
    header: list[str],
    canonical: dict[str, str],
    kinds: list[ColumnType | str],
    data: StreamData,
) -> tuple[str | None, str | None, str] | None:
    if len(fields) != len(header):
        return None, None, f"expected {len(header)} fields (as in the header), found {len(fields)}"
    converted: list[Any] = []
    for h, kind, text in zip(header, kinds, fields, strict=True):
        text = text.strip()
        try:
            converted.append(_convert(text, kind))
        except ValueError:
            shown = text if text else "(empty)"
            return h, text, f"{shown!r} is not {_EXPECTED.get(kind, 'valid')}"
    for h, value in zip(header, converted, strict=True):
        target = canonical[h]
        if target == "ts":
            data.ts.append(value)
        elif target == "id":
            data.ids.append(value)  # type: ignore[union-attr]
        else:
            data.columns[target].append(value)
    return None


def _read_parquet(spec: InputSpec, schema: StreamSchema) -> StreamData:
    try:
        table = pq.read_table(spec.path)
    except (pa.ArrowInvalid, OSError) as err:
        raise InputError(f"{spec.path}: not a readable Parquet file ({err})") from None
    header = list(table.column_names)
    _check_header(spec.path, header, schema)
    canonical = {h: _canonical_name(h, schema) for h in header}
    columns = []
    for h in header:
        target = canonical[h]
        want = pa.float64() if target == "ts" else pa.int64() if target == "id" else None
        if want is None:
            want = _ARROW_TYPES[schema.columns[schema.index_of(target)].ctype]  # type: ignore[index]
        try:
            columns.append(table.column(h).cast(want))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            raise InputError(f"{spec.path}: column '{h}' cannot be read as {want} ({err})") from None
    data = _from_table(spec, pa.table(columns, names=header), canonical)
    bad = _find_bad_ts(data)
    if bad is not None:
        raise InputError(f"{spec.path}: row {bad + 1}: ts and id must not be NULL")
    return data


def merge(inputs: list[StreamData]) -> Iterator[tuple[int, int]]:
    """(input number, row number) in arrival order: smallest next ts first, ties by
    input order; each input keeps its own order."""

    def numbered(k: int, data: StreamData) -> Iterator[tuple[float, int, int]]:
        for i, ts in enumerate(data.ts):
            yield ts, k, i

    streams = [numbered(k, data) for k, data in enumerate(inputs)]
    for _, k, i in heapq.merge(*streams, key=lambda item: (item[0], item[1])):
        yield k, i
