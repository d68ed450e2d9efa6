"""The columnar join prototype against the engine's match phase, on the same rows.

    python -m experiments.columnar_join /tmp/b50 [--skip-engine] [--check]

Reads ``streams.ddl``, ``queries.mqo`` and one CSV per fed stream (``B.csv``,
``H.csv``) from the directory, prepares both streams' batches once per matcher (the
attribute phase, timed apart: both sides share it), and times side by side, in one
process: the engine's replay of every row in arrival order (``Matcher.replay``, what
``mqo match`` runs, results counted, not written) and the prototype's join step
(:func:`mqo.columnar_join.join_batch` with its tables and row arrays). With the
check, both result sets (query, ids) are compared (collecting the engine's costs its
side time: time without it). Prints one JSON line, wall and CPU seconds per step.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.csv as pacsv

import mqo
from mqo.columnar_join import PairRows, PairTables, join_batch, result_ids, to_blocks


def _matcher(folder: Path, fed: list[str], store: str) -> mqo.Matcher:
    # store='candidates' as ``mqo match`` makes it (the queries are fixed, so only tuples
    # some query can use are stored); 'all' is the library's default (queries may come later)
    matcher = mqo.Matcher((folder / "streams.ddl").read_text(), store=store)
    matcher.register_queries((folder / "queries.mqo").read_text())
    plan = matcher.ensure_plan()
    for schema in plan.catalog.base_streams():
        if schema.name.lower() not in {f.lower() for f in fed}:
            matcher.set_idle(schema.name)
    return matcher


def _order(tables: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(input, row) in arrival order: by ts, then input, then row (inputs in ts order)."""
    ts = np.concatenate([t.column("ts").to_numpy() for t in tables])
    which = np.concatenate([np.full(t.num_rows, k, np.int64) for k, t in enumerate(tables)])
    rows = np.concatenate([np.arange(t.num_rows, dtype=np.int64) for t in tables])
    order = np.lexsort((rows, which, ts))
    return which[order], rows[order]


class Timer:
    """Wall and CPU seconds of a step (the machine is shared: CPU time is the steadier figure)."""

    def __init__(self, out: dict[str, Any], name: str) -> None:
        self.out, self.name = out, name

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.out[f"{self.name}_s"] = round(time.perf_counter() - self.wall, 3)
        self.out[f"{self.name}_cpu_s"] = round(time.process_time() - self.cpu, 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--streams", default="B,H")
    parser.add_argument("--skip-engine", action="store_true")
    parser.add_argument("--store", choices=["candidates", "all"], default="candidates")
    parser.add_argument("--check", action="store_true", help="compare the result sets (costs the engine side time)")
    args = parser.parse_args()
    fed = args.streams.split(",")
    tables = [pacsv.read_csv(args.folder / f"{name}.csv") for name in fed]
    which, rows = _order(tables)
    out: dict[str, Any] = {"folder": str(args.folder), "store": args.store, "rows": len(which), "load": os.getloadavg()}
    engine_found: set[tuple[str, int, int]] = set()
    if not args.skip_engine:
        matcher = _matcher(args.folder, fed, args.store)
        with Timer(out, "engine_prepare"):
            prepared = [matcher.prepare(name, table) for name, table in zip(fed, tables, strict=True)]
        plan = matcher.ensure_plan()
        streams = [plan.stream_number(name) for name in fed]
        count = 0
        with Timer(out, "engine_match"):
            for _, blocks in matcher.replay(prepared, which, rows):
                for block in blocks:
                    members = block.tuples
                    if members[streams[0]] is None or members[streams[1]] is None:
                        continue
                    count += len(block)
                    if args.check:
                        ids = (members[streams[0]].id, members[streams[1]].id)  # type: ignore[union-attr]
                        for q in block.numbers().tolist():
                            engine_found.add((plan.query_names(q), *ids))
        out["engine_results"] = count
        del matcher, prepared
    matcher = _matcher(args.folder, fed, args.store)
    with Timer(out, "columnar_prepare"):
        prepared = [matcher.prepare(name, table) for name, table in zip(fed, tables, strict=True)]
    plan = matcher.ensure_plan()
    streams = [plan.stream_number(name) for name in fed]
    pair = (prepared[0], prepared[1])
    with Timer(out, "columnar_late"):
        late = matcher.late_probe(np.array(streams, np.int64)[which], _ts_in_order(tables, which, rows))
    with Timer(out, "columnar_tables"):
        tables_ = PairTables.of(plan, streams[0], streams[1])
    with Timer(out, "columnar_rows"):  # (join_batch lays them out again: the kernel is the difference)
        PairRows.of(tables_, pair, which, rows, late)
    with Timer(out, "columnar_join"):  # the row arrays again, the kernel, the fallback pairs, the special slots
        results = join_batch(tables_, pair, which, rows, late)
    with Timer(out, "columnar_blocks"):  # handed over as the engine's result blocks (today's writers' input)
        blocks = to_blocks(tables_, results, pair, which, rows)
    out["columnar_pairs"] = len(blocks)
    out["columnar_results"] = len(results)
    out["fallback_pairs"] = results.fallback_pairs
    if not args.skip_engine and args.check:
        found = set(result_ids(tables_, results, pair, which, rows))
        out["equal"] = found == engine_found
        out["only_engine"] = len(engine_found - found)
        out["only_columnar"] = len(found - engine_found)
    print(json.dumps(out))


def _ts_in_order(tables: list[Any], which: np.ndarray, rows: np.ndarray) -> np.ndarray:
    columns = [t.column("ts").to_numpy() for t in tables]
    ts = np.empty(len(which), np.float64)
    for k, col in enumerate(columns):
        chosen = which == k
        ts[chosen] = col[rows[chosen]]
    return ts


if __name__ == "__main__":
    main()
