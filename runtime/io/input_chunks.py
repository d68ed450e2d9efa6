"""Stream files read a chunk at a time and merged into one arrival order, so that
``mqo match`` holds a few chunks of its input, never all of it.

Each input is read ``chunk_rows`` rows at a time (:class:`runtime.io.csv_reader.CsvChunks`,
:class:`runtime.io.parquet_reader.ParquetChunks`: the same rules and bad rows as reading
it whole). The arrival order is the merge of :func:`runtime.io.inputs.merge` (smallest
next ``ts`` first, ties by input order, each input in its own order), made as one sort
(:func:`merged_rows`); a round releases the rows of the buffered chunks in that order up
to where an input that has more to read runs out of buffered rows, and that input is
read further.

Ids are checked by :class:`FileIds`, the one id rule every reader runs (reading files
whole, :func:`runtime.io.inputs.read_inputs`, runs it too): a repeated id is a bad row
naming the row (line) of its first use in the file, and when several files of a stream
give ids, an id of an earlier file (in the order they were given) is a bad row of the
later one naming the earlier file's row, even if the later file's row arrives first:
the files of such a stream but the last are read once ahead for their ids. The ids
seen are kept as a few sorted arrays (8 bytes an id, 16 with its line). Rows without
an id column are numbered 0, 1, 2, ... per stream in arrival order.

A file that breaks a rule that stops the run (a bad row without ``--on-bad-row skip``,
a file that is not UTF-8, ...) is found when its chunk is read; :func:`first_error`
then names the error that reading the files whole, one after the other, would have met
first, so the message does not depend on the chunk size.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from predicates import Catalog, StreamSchema
from runtime.io.csv_reader import CsvChunks
from runtime.io.named_paths import INPUT
from runtime.io.parquet_reader import ParquetChunks
from runtime.io.stream_rows import BadRow, InputError, StreamData

CHUNK_ROWS = 32_768  # rows of one input read at a time (NEXMark: about 50 MiB of buffers and pieces)


def arrival_order(data: list[StreamData]) -> tuple[np.ndarray, np.ndarray]:
    """(input, row) of every tuple in arrival order (see :func:`runtime.io.inputs.merge`)."""
    which, rows, _ = merged_rows([np.asarray(d.ts, np.float64) for d in data], [0] * len(data), [True] * len(data))
    return which, rows


def number_in_arrival_order(
    data: list[StreamData], which: np.ndarray, rows: np.ndarray, first: dict[str, int] | None = None
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
            d.ids = ids


def merged_rows(
    times: list[np.ndarray], starts: list[int], ended: list[bool]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input, row, ts) of the rows of the inputs whose timestamps are ``times`` (as
    doubles), from ``starts`` on, in the order of a heap
    merge (smallest next ``ts`` first, ties by input order, each input in its own
    order), up to and with the last buffered row of an input that is not ``ended`` (its
    next row is not read yet). O(n log n) for the n rows it gives, as one sort.

    The merge takes the rows in the order of the key (the largest ``ts`` of the input
    from its start up to the row, input, row): a row behind a larger ``ts`` of its own
    input comes out right after that row, since every other input's next row was at
    least as large when that row was taken; a row as large as everything before it in
    its input comes out when its ``ts`` is the smallest next one. An input's keys only
    grow, so the rows up to the stop are a run from each input's start, cut by a binary
    search before the sort."""
    parts = [(k, ts[starts[k] :]) for k, ts in enumerate(times) if starts[k] < len(ts)]
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
    inputs = [k for k, _ in parts]
    keys = [np.maximum.accumulate(ts) for _, ts in parts]
    waiting = [(float(key[-1]), k) for k, key in zip(inputs, keys, strict=True) if not ended[k]]
    cuts = [len(key) for key in keys]
    if waiting:  # the stop: the first, in key order, of the last rows of inputs still being read
        bound, bound_k = min(waiting)
        sides = ["right" if k <= bound_k else "left" for k in inputs]  # (ties in ts: by input)
        cuts = [int(np.searchsorted(key, bound, side)) for key, side in zip(keys, sides, strict=True)]  # type: ignore[call-overload]
    key = np.concatenate([key[:cut] for key, cut in zip(keys, cuts, strict=True)])
    which = np.concatenate([np.full(cut, k, np.int64) for k, cut in zip(inputs, cuts, strict=True)])
    rows = np.concatenate(
        [np.arange(starts[k], starts[k] + cut, dtype=np.int64) for k, cut in zip(inputs, cuts, strict=True)]
    )
    ts = np.concatenate([ts[:cut] for (_, ts), cut in zip(parts, cuts, strict=True)])
    order = np.lexsort((rows, which, key))
    return which[order], rows[order], ts[order]


def line_numbers(data: StreamData) -> np.ndarray:
    """Each row's source line (CSV) or row (Parquet)."""
    if data.lines is not None:
        return np.asarray(data.lines, np.int64)
    return np.arange(len(data), dtype=np.int64) + data.first_row + (2 if data.unit == "line" else 1)


class IdRuns:
    """A set of ids with the line of each, as sorted arrays: a new one per piece,
    merged while the newest is at least as long as the one before (a few arrays)."""

    def __init__(self) -> None:
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []

    def find(self, ids: np.ndarray) -> np.ndarray:
        """The line of each id that is in the set, -1 for the others (fastest with
        ``ids`` sorted: the searches then walk each array once)."""
        found = np.full(len(ids), -1, np.int64)
        for keys, lines in self.runs:
            at = np.minimum(np.searchsorted(keys, ids), len(keys) - 1)
            hit = keys[at] == ids
            found[hit] = lines[at[hit]]
        return found

    def add(self, keys: np.ndarray, lines: np.ndarray) -> None:
        """Ids not in the set, sorted, with their lines."""
        if len(keys):
            self.runs.append((keys, lines))
        while len(self.runs) > 1 and len(self.runs[-1][0]) >= len(self.runs[-2][0]):
            (a, la), (b, lb) = self.runs.pop(), self.runs.pop()
            merged, at = np.concatenate([b, a]), np.concatenate([lb, la])
            order = np.argsort(merged, kind="stable")  # (two sorted runs: timsort merges them)
            self.runs.append((merged[order], at[order]))


class Used(NamedTuple):
    """The ids a file of a stream used (the first use of each, with its line or row), for
    the stream's files given after it."""

    path: str
    unit: str
    ids: IdRuns


class FileIds:
    """The id rule for one file of a stream, the one check every reader runs: an id may
    appear once per stream across the inputs (docs/ARCHITECTURE.md, Data model). A row
    whose id the file used before is a bad row naming the row of the first use; a row
    whose id a file of the stream given before used (``earlier``) is a bad row naming
    that file and row. The file is checked a piece at a time, in its order (whole, or a
    chunk at a time); the ids it uses are sorted arrays (:class:`IdRuns`, 16 bytes an
    id), which :meth:`used` hands to the stream's later files. (They hold the first use
    of each id in the file, also of one an earlier file used: a later file's row with
    that id is a bad row of the earlier file's use, which it meets first.)"""

    def __init__(self, stream: str, path: str, earlier: list[Used] | None = None) -> None:
        self.stream = stream
        self.path = path
        self.unit = "line"  # (a Parquet file's rows say "row": set by its first piece)
        self.earlier = list(earlier or [])
        self.seen = IdRuns()

    def bad_rows(self, ids: np.ndarray, lines: np.ndarray, unit: str) -> tuple[np.ndarray, list[BadRow]]:
        """The positions, in order, of the rows of the file's next piece (``ids`` and
        source ``lines``) whose id is used before, and their bad rows."""
        self.unit = unit
        if not len(ids):
            return np.zeros(0, np.int64), []
        # one sort: equal ids are neighbours, and the sets are searched in key order
        order = np.argsort(ids)
        keys = ids[order]
        starts = np.r_[True, keys[1:] != keys[:-1]]
        first = np.minimum.reduceat(order, np.flatnonzero(starts))[np.cumsum(starts) - 1]  # each id's first row here
        # in key order: the line of an earlier use in the file (in the set, else the id's first row here), or -1
        earlier = self.seen.find(keys)
        again = (order != first) & (earlier < 0)
        earlier[again] = lines[first[again]]
        keep = earlier < 0
        self.seen.add(keys[keep], lines[order[keep]])
        where = {row: f"the row at {unit} {line}" for row, line in _at(order, earlier, ~keep)}
        for used in self.earlier:
            line = used.ids.find(keys)
            across = keep & (line >= 0)
            where.update((row, f"the row at {used.unit} {at} of {used.path}") for row, at in _at(order, line, across))
            keep &= ~across
        rows = np.sort(order[~keep])
        return rows, [
            BadRow(
                self.path,
                line,
                "id",
                str(ident),
                f"id {ident} of stream {self.stream} is already used by {where[i]}",
                "",
                unit,
            )
            for i, ident, line in zip(rows.tolist(), ids[rows].tolist(), lines[rows].tolist(), strict=True)
        ]

    def check(self, data: StreamData, on_bad_row: str) -> StreamData:
        """``data``, the file's next piece, without its rows of ids used before: the first
        such row is the error, or with ``on_bad_row='skip'`` each is set aside."""
        if data.ids is None or not len(data):
            return data
        rows, bad = self.bad_rows(np.asarray(data.ids, np.int64), line_numbers(data), data.unit)
        if bad and on_bad_row != "skip":
            raise InputError(bad[0].message())
        data.rejected.extend(bad)
        if len(rows):
            data.drop(set(rows.tolist()))
        return data

    def used(self) -> Used:
        return Used(self.path, self.unit, self.seen)


def _at(rows: np.ndarray, values: np.ndarray, chosen: np.ndarray) -> list[tuple[int, int]]:
    """(row, value) where ``chosen``."""
    return list(zip(rows[chosen].tolist(), values[chosen].tolist(), strict=True))


def is_parquet(path: str) -> bool:
    """Whether an input file is read as Parquet (else CSV); an error if it is not a file."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"input file not found: {path}")
    if p.is_dir():
        raise InputError(f"input path is a directory, not a file: {path}")
    return p.suffix.lower() in (".parquet", ".pq")


def open_chunks(
    stream: str, path: str, schema: StreamSchema, on_bad_row: str, chunk_rows: int
) -> CsvChunks | ParquetChunks:
    if is_parquet(path):
        return ParquetChunks(stream, path, schema, on_bad_row, chunk_rows)
    return CsvChunks(stream, path, schema, on_bad_row, chunk_rows)


def _has_ids(chunks: CsvChunks | ParquetChunks) -> bool:
    return "id" in (h.lower() for h in chunks.header)


def check_id_columns(stream: str, files: list[tuple[str, bool]]) -> None:
    """Several files of one stream: all give ids or none do."""
    with_ids = [path for path, ids in files if ids]
    if with_ids and len(with_ids) != len(files):
        without = [path for path, ids in files if not ids]
        raise InputError(
            f"stream {stream}: {', '.join(with_ids)} give(s) an id column but {', '.join(without)} do(es) not;"
            " give ids in every file of a stream or in none (automatic ids could repeat given ones)"
        )


class _Input:
    """One input file being read: its buffered chunk and the ids it has used."""

    def __init__(self, chunks: CsvChunks | ParquetChunks, earlier: list[Used]) -> None:
        self.chunks = chunks
        self.stream = chunks.stream
        self.ids = _has_ids(chunks)
        self.id_rule = FileIds(chunks.stream, chunks.path, earlier)  # earlier: the stream's files given before
        self.reading: Iterator[StreamData] | None = None
        self.buffer: StreamData | None = None
        self.ts = np.zeros(0)
        self.head = 0
        self.ended = False

    def remaining(self) -> int:
        return 0 if self.buffer is None else len(self.buffer) - self.head

    def refill(self, on_bad_row: str, rejected: list[BadRow]) -> None:
        """Read chunks until one has rows or the file ends."""
        if self.reading is None:
            self.reading = iter(self.chunks)
        while not self.ended and self.remaining() == 0:
            data = next(self.reading, None)
            if data is None:
                self.ended, self.buffer = True, None
                return
            data = self.id_rule.check(data, on_bad_row)
            rejected.extend(data.rejected)
            data.rejected = []
            self.buffer, self.head = data, 0
            self.ts = np.asarray(data.ts, np.float64)


@dataclass
class Round:
    """Tuples released in arrival order: row ``rows[j]`` of ``data[which[j]]`` arrives
    j-th; ``ts`` in that order. ``data[k]`` is a piece of input ``inputs[k]``."""

    data: list[StreamData]
    inputs: list[int]
    which: np.ndarray
    rows: np.ndarray
    ts: np.ndarray


class ArrivingInputs:
    """The ``--input`` files of a run, read a chunk at a time and merged in arrival
    order (:meth:`rounds`). Every file's header is checked when this is made."""

    def __init__(
        self, specs: list[tuple[str, str]], catalog: Catalog, on_bad_row: str = "error", chunk_rows: int = CHUNK_ROWS
    ) -> None:
        """``specs``: (stream, path) of each ``--input`` as given."""
        self.on_bad_row = on_bad_row
        self.chunk_rows = chunk_rows
        names = [INPUT.declared(stream, path, catalog.names()) for stream, path in specs]
        self.schemas = {name: catalog.require(name) for name in names}
        opened = [
            open_chunks(name, path, self.schemas[name], on_bad_row, chunk_rows)
            for (_, path), name in zip(specs, names, strict=True)
        ]
        by_stream: dict[str, list[CsvChunks | ParquetChunks]] = {}
        for chunks in opened:
            by_stream.setdefault(chunks.stream, []).append(chunks)
        for stream, group in by_stream.items():
            check_id_columns(stream, [(c.path, _has_ids(c)) for c in group])
        # the ids of a stream's earlier files, for its later ones (read once ahead)
        earlier: dict[int, list[Used]] = {}
        for group in by_stream.values():
            if len(group) > 1 and _has_ids(group[0]):
                before: list[Used] = []
                for chunks in group:
                    earlier[id(chunks)] = list(before)
                    if chunks is not group[-1]:
                        before.append(self._kept_ids(chunks, list(before)))
        self.inputs = [_Input(chunks, earlier.get(id(chunks), [])) for chunks in opened]
        self.next_id = {stream: 0 for stream in by_stream}
        self.rejected: list[BadRow] = []  # bad rows found and not yet taken
        self.size = sum(chunks.size for chunks in opened)

    def _kept_ids(self, chunks: CsvChunks | ParquetChunks, before: list[Used]) -> Used:
        """The ids a file keeps (after its bad rows and repeated ids are set aside)."""
        again = open_chunks(chunks.stream, chunks.path, self.schemas[chunks.stream], self.on_bad_row, self.chunk_rows)
        id_rule = FileIds(chunks.stream, chunks.path, before)
        for data in again:
            id_rule.check(data, self.on_bad_row)
        return id_rule.used()

    @property
    def position(self) -> int:
        """About how many bytes of the inputs have been read."""
        return sum(i.chunks.position for i in self.inputs)

    def take_rejected(self) -> list[BadRow]:
        rejected, self.rejected = self.rejected, []
        return rejected

    def rounds(self) -> Iterator[Round]:
        """The tuples in arrival order, a round at a time (automatic ids given)."""
        while True:
            for i in self.inputs:
                i.refill(self.on_bad_row, self.rejected)
            if not any(i.remaining() for i in self.inputs):
                return
            ends, which, rows, ts = self._release()
            # the pieces of the inputs with rows in this round
            given = [k for k, (i, end) in enumerate(zip(self.inputs, ends, strict=True)) if end > i.head]
            data = []
            for k in given:
                i = self.inputs[k]
                assert i.buffer is not None
                data.append(i.buffer if i.head == 0 and ends[k] == len(i.buffer) else i.buffer.rows(i.head, ends[k]))
                i.head = ends[k]
            renumber = np.zeros(len(self.inputs), np.int64)
            renumber[given] = np.arange(len(given))
            which = renumber[which]
            number_in_arrival_order(data, which, rows, self.next_id)
            for k, d in zip(given, data, strict=True):
                if not self.inputs[k].ids:
                    self.next_id[d.stream] += len(d)
            yield Round(data, given, which, rows, ts)

    def _release(self) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray]:
        """Where each input's released rows end (its buffer's rows from its head on), and
        the released rows in arrival order: (input, row within the released piece, ts)."""
        heads = [i.head for i in self.inputs]
        times = [i.ts if i.buffer is not None else _NO_TIMES for i in self.inputs]
        which, rows, ts = merged_rows(times, heads, [i.ended for i in self.inputs])
        ends = np.array(heads, np.int64)
        np.maximum.at(ends, which, rows + 1)
        return ends.tolist(), which, rows - np.array(heads, np.int64)[which], ts


_NO_TIMES = np.zeros(0, np.float64)  # (an input read to its end: no buffer)


def first_error(specs: list[tuple[str, str]], catalog: Catalog, on_bad_row: str, chunk_rows: int = CHUNK_ROWS) -> None:
    """Raise the error that reading every file whole, in the order given, then checking
    ids across the files of each stream would meet first (:func:`runtime.io.inputs.read_inputs`);
    nothing if there is none. Memory holds a chunk and the ids given with their lines (16 bytes
    an id; twice that while the files of a stream are compared)."""
    names = [INPUT.declared(stream, path, catalog.names()) for stream, path in specs]
    by_stream: dict[str, list[tuple[str, str, np.ndarray | None, np.ndarray]]] = {}
    for (_, path), name in zip(specs, names, strict=True):
        chunks = open_chunks(name, path, catalog.require(name), on_bad_row, chunk_rows)
        unit = "row" if isinstance(chunks, ParquetChunks) else "line"
        ids: list[np.ndarray] = []
        lines: list[np.ndarray] = []
        for data in chunks:  # the whole file first: a bad value anywhere in it comes before a repeated id
            if data.ids is not None and on_bad_row != "skip":
                ids.append(np.asarray(data.ids, np.int64))
                lines.append(line_numbers(data))
        every = np.concatenate(ids) if ids else np.zeros(0, np.int64)
        at = np.concatenate(lines) if lines else np.zeros(0, np.int64)
        _raise_first(FileIds(name, path), every, at, unit)
        by_stream.setdefault(name, []).append((path, unit, every if _has_ids(chunks) else None, at))
    for stream, group in by_stream.items():
        check_id_columns(stream, [(path, given is not None) for path, _, given, _ in group])
    if on_bad_row == "skip":
        return
    for stream, group in by_stream.items():
        before: list[Used] = []
        for path, unit, given, at in group:
            if given is not None and len(group) > 1:
                id_rule = FileIds(stream, path, before)
                _raise_first(id_rule, given, at, unit)
                before.append(id_rule.used())


def _raise_first(id_rule: FileIds, ids: np.ndarray, lines: np.ndarray, unit: str) -> None:
    _, bad = id_rule.bad_rows(ids, lines, unit)
    if bad:
        raise InputError(bad[0].message())
