"""Results of the benchmarks' two sides read back and compared as multisets.

Both sides write files (mqo its JSON lines or Parquet, DuckDB and Spark SQL theirs);
a result is read as the dict ``mqo match`` writes in JSON lines (``query``, ``ts``,
``ids``, ``values``), whatever the file's format, so one key function compares any
two. Millions of results are compared as 8-byte hashes of their keys, never held as
dicts at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

RESULT_COLUMNS = ("query", "ts", "ids")  # a Parquet result's columns before its values


def results(folder: Path, pattern: str) -> Iterator[dict[str, Any]]:
    """The result lines of the JSON-lines files matching ``pattern``, one at a time
    (millions of results as dicts at once would take gigabytes)."""
    for path in sorted(folder.glob(pattern)):
        with open(path) as f:
            for line in f:
                yield json.loads(line)


def parquet_results(folder: Path, pattern: str) -> Iterator[dict[str, Any]]:
    """The results of the Parquet files matching ``pattern`` (``query``, ``ts``, ``ids``
    a map, then one column per value name), one at a time, as JSON lines give them:
    ``ids`` a dict and ``values`` the row's non-NULL values (a file of many queries has
    a column for every name of any query, NULL where a query has no such value)."""
    import pyarrow.parquet as pq

    for path in sorted(folder.glob(pattern)):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=65_536):
            names = [n for n in batch.schema.names if n not in RESULT_COLUMNS]
            columns = [batch.column(n).to_pylist() for n in names]
            queries, stamps = batch.column("query").to_pylist(), batch.column("ts").to_pylist()
            for k, ids in enumerate(batch.column("ids").to_pylist()):
                values = {n: c[k] for n, c in zip(names, columns, strict=True) if c[k] is not None}
                yield {"query": queries[k], "ts": stamps[k], "ids": dict(ids), "values": values}


def same_ids(r: dict[str, Any]) -> tuple:
    return (r["query"], *sorted(r["ids"].items()))


def same_result(r: dict[str, Any]) -> tuple:
    return (*same_ids(r), r["ts"], *sorted(r["values"].items()))


def hashed(found: Iterable[dict], key: Callable[[dict], tuple]) -> np.ndarray:
    """The results as a sorted array of their keys' hashes (a multiset in 8 bytes a
    result; equal keys hash alike in one process)."""
    return np.sort(np.fromiter((hash(key(r)) for r in found), np.int64))


Found = Callable[[], Iterable[dict]]  # results read from the start each time it is called


def check_equal(
    ours: Found | Iterable[dict], theirs: Found | Iterable[dict], key: Callable[[dict], tuple], what: str
) -> int:
    """Assert the two sides found the same results (as multisets of ``key``, kept as
    8-byte hashes: millions of results as dicts would take gigabytes); returns how
    many. Each side is results or a function that reads them (from the start, each
    call); a difference names a few results only one side has, read again where a
    side can be (a function, a list)."""
    mine, other = hashed(_read(ours), key), hashed(_read(theirs), key)
    if len(mine) != len(other) or (mine != other).any():
        only_mine = set(np.setdiff1d(mine, other).tolist())
        only_other = set(np.setdiff1d(other, mine).tolist())
        raise AssertionError(
            f"mqo and {what} found different results ({len(mine)} against {len(other)}; "
            f"only mqo: {_some(ours, key, only_mine)}, only SQL: {_some(theirs, key, only_other)})"
        )
    return len(mine)


def _read(found: Found | Iterable[dict]) -> Iterable[dict]:
    return found() if callable(found) else found


def _some(found: Found | Iterable[dict], key: Callable[[dict], tuple], hashes: set[int]) -> list[tuple]:
    """A few results of ``found`` whose keys hash to one of ``hashes`` (none if it was
    an iterator, read up already)."""
    if isinstance(found, Iterator):
        return []
    return [k for k in map(key, _read(found)) if hash(k) in hashes][:3]
