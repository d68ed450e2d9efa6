"""Reading stream files (CSV, Parquet) and merging them into one arrival order.

A file has a ``ts`` column, an optional ``id`` column and the stream's columns (every
declared column must be there; an unknown column is an error, so a misspelt header
never silently becomes NULLs). What a value may be, and what is NULL, is one set of
rules for every reader (:mod:`runtime.io.stream_rows`); CSV files are read by
:mod:`runtime.io.csv_reader`, Parquet files by :mod:`runtime.io.parquet_reader`. A bad row is
an error naming file, line (or Parquet row) and column; with ``on_bad_row='skip'`` every
bad row is set aside with its reason instead, and the good rows are matched.

Several inputs are merged the way they would arrive: repeatedly the input whose next
tuple has the smallest ``ts`` (ties: the input given first) yields its next tuple.
Within a file the file's order is kept, so a file that is out of timestamp order
produces late tuples, as a live stream would.

This module reads files whole (``mqo serve``'s steps, ``profile``, Spark, HTTP bodies);
``mqo match`` reads them a chunk at a time, with the same rules, bad rows and merge
(:mod:`runtime.io.input_chunks`). Ids are checked by the one id rule both ways run
(:class:`runtime.io.input_chunks.FileIds`): within a file as it is read, across the
files of a stream once all are read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from predicates import Catalog, StreamSchema
from runtime.io.csv_reader import read_csv
from runtime.io.input_chunks import FileIds, Used, arrival_order, check_id_columns, is_parquet
from runtime.io.named_paths import INPUT
from runtime.io.parquet_reader import read_parquet
from runtime.io.stream_rows import (
    FALSE_TEXTS,
    NULL_TEXTS,
    TRUE_TEXTS,
    BadRow,
    InputError,
    StreamData,
)

__all__ = [
    "FALSE_TEXTS",
    "NULL_TEXTS",
    "TRUE_TEXTS",
    "BadRow",
    "InputError",
    "InputSpec",
    "StreamData",
    "check_ids_across_inputs",
    "merge",
    "read_inputs",
    "read_stream",
]


@dataclass(frozen=True)
class InputSpec:
    """A stream's input file (``--input STREAM=FILE``, read by :data:`runtime.io.named_paths.INPUT`)."""

    stream: str
    path: str


def read_stream(spec: InputSpec, schema: StreamSchema, on_bad_row: str = "error") -> StreamData:
    path = spec.path
    if is_parquet(path):
        data = read_parquet(spec.stream, path, schema, on_bad_row)
    else:
        data = read_csv(spec.stream, path, schema, on_bad_row)
    return FileIds(data.stream, path).check(data, on_bad_row)


def read_inputs(specs: list[InputSpec], catalog: Catalog, on_bad_row: str = "error") -> list[StreamData]:
    """Read every ``--input STREAM=FILE`` against its declared stream and check ids
    across the files of one stream. Every stream is checked before a file is read, and
    its files are read under its declared name (``h=`` and ``H=`` are one stream: one
    count of automatic ids, one check of repeated ones)."""
    names = [INPUT.declared(spec.stream, spec.path, catalog.names()) for spec in specs]
    data = [
        read_stream(InputSpec(name, spec.path), catalog.require(name), on_bad_row)
        for spec, name in zip(specs, names, strict=True)
    ]
    check_ids_across_inputs(data, on_bad_row)
    return data


def check_ids_across_inputs(inputs: list[StreamData], on_bad_row: str = "error") -> None:
    """Several files of one stream: all give ids or none do, and no id repeats (a
    repeated id is a bad row of the later file: :class:`runtime.io.input_chunks.FileIds`,
    the rule reading in chunks runs)."""
    by_stream: dict[str, list[StreamData]] = {}
    for data in inputs:
        by_stream.setdefault(data.stream, []).append(data)
    for stream, group in by_stream.items():
        if len(group) < 2:
            continue
        check_id_columns(stream, [(d.path, d.ids is not None) for d in group])
        before: list[Used] = []
        for d in group:
            id_rule = FileIds(stream, d.path, before)
            id_rule.check(d, on_bad_row)  # (its own repeats are gone: read_stream checked it)
            before.append(id_rule.used())


def merge(inputs: list[StreamData]) -> Iterator[tuple[int, int]]:
    """(input number, row number) in arrival order: smallest next ts first, ties by
    input order; each input keeps its own order (:func:`runtime.io.input_chunks.arrival_order`)."""
    which, rows = arrival_order(inputs)
    yield from zip(which.tolist(), rows.tolist(), strict=True)
