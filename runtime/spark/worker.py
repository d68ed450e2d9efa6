"""What runs on the Spark workers: the per-worker plan cache, the working matchers
made from it, and the batch stage's partition function.

The plan is built once per Python worker from the DDL, the query texts and the
settings (cached by their hash), not once per task; functions shipped to the workers
live in this module so that the cache is the worker's own.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from mqo import Match, MatchBatch, Matcher, QueryError, no_cyclic_gc
from predicates import to_float
from runtime.spark.common import report_nulled
from runtime.spark.spec import SparkStageError, StageSpec, StreamLayout, register_each, without_lateness

if TYPE_CHECKING:
    from pyspark import Accumulator

_OUT_ROWS = 8192


# ------------------------------------------------ per-worker plans and matchers

_TEMPLATES: dict[str, Matcher] = {}
_TEMPLATES_KEPT = 4


def template(spec: StageSpec) -> Matcher:
    """The worker's compiled matcher for ``spec`` (built on first use, then cached).

    It never matches anything itself; :func:`spawn` makes working matchers that share
    its compiled plan.
    """
    m = _TEMPLATES.get(spec.fingerprint)
    if m is None:
        settings = dict(spec.settings)
        # when the stage's queries never change, tuples no query can use need not be kept
        options: dict[str, Any] = {
            "order": settings["order"],
            "max_disjuncts": settings["max_disjuncts"],
            "store": settings.get("store", "candidates"),
            "keep_window": settings.get("keep_window", 0.0),
        }
        ddl = spec.ddl
        if "stream_lateness" in settings:
            # the streaming stage: Spark's watermark is the matcher's, given by a
            # heartbeat in every micro-batch (runtime.spark.streaming, "Time")
            options.update(time="external", idle_timeout=None, emit=settings.get("emit", "arrival"))
        else:
            # a batch task gets its rows in ts order, late tuples already decided by the
            # driver: one clock purges by the newest ts, where a stream absent from a
            # partition would hold per-stream time back (and no lateness plays a part)
            options["time"] = "global"
            ddl = without_lateness(ddl)
        m = _with_tables(Matcher(ddl, **options), spec)
        names = [name for name, _ in spec.queries]
        try:
            bulk = m.register_queries([text for _, text in spec.queries], "<stage queries>") == names
        except QueryError:
            bulk = False
        if not bulk:
            # ids given at registration, or from positions in another registry: one by one
            m = register_each(_with_tables(Matcher(ddl, **options), spec), spec.queries)
        m.ensure_plan()  # compile now, once
        if len(_TEMPLATES) >= _TEMPLATES_KEPT:
            _TEMPLATES.pop(next(iter(_TEMPLATES)))
        _TEMPLATES[spec.fingerprint] = m
    return m


def _with_tables(matcher: Matcher, spec: StageSpec) -> Matcher:
    """``matcher`` with the spec's tables declared (before the queries that read them)."""
    if spec.tables is not None:
        matcher.register_queries(list(spec.tables["texts"]), "<stage tables>")
    return matcher


def spawn(spec: StageSpec, state: Mapping[str, Any] | None = None) -> Matcher:
    """A working matcher on the worker's cached plan: empty, or continuing from
    ``state`` (a :meth:`Matcher.snapshot` taken with ``queries=False``, see
    :func:`freeze`). Sharing the template's compiled plan is what lets a streaming
    group restore its window in every micro-batch without compiling the queries again.

    The tables' rows are the spec's (every version, whatever its ts, put before any
    tuple: :mod:`runtime.spark.tables`), loaded into each working matcher, never kept
    in a streaming group's state.

    A matcher with views shares no plan (its views' streams and row ids are its own,
    :meth:`Matcher.restore`): each batch task, and each streaming group in each
    micro-batch, compiles its own from the template's snapshot, ``state`` (which then
    holds the ids the views' rows take next, :func:`freeze`) laid over it."""
    base = template(spec)
    shared = not base.views
    if state is None:
        snapshot = base.snapshot(queries=not shared)
    elif shared:
        snapshot = dict(state)
    else:
        snapshot = {**base.snapshot(queries=True), **state}
    snapshot.setdefault("counters", base.counters.__class__().as_dict())
    if spec.tables is not None:
        snapshot["reference_tables"] = spec.tables
    return Matcher.restore(snapshot, like=base if shared else None)


def freeze(matcher: Matcher) -> dict[str, Any]:
    """The part of a snapshot that changes as tuples flow (clocks, ids, stored tuples,
    the ids the views' rows take next); the queries are in the spec, so they are not
    stored per group."""
    snap = matcher.snapshot(queries=False)
    kept = ("format", "settings", "clock", "seq", "next_ids", "state", "arrived", "held", "view_ids")
    return {k: snap[k] for k in kept if k in snap}


def match_partition(
    spec: StageSpec, batches: Iterator[pa.RecordBatch], nulled: Accumulator[int] | None = None
) -> Iterator[pa.RecordBatch]:
    """One task: match the partition's rows, in the order given, with one matcher.

    Rows come sorted by (bucket, ts, stream, id) in time mode, by (ts, stream, id) in
    key mode. In time mode a row whose bucket is not its home bucket is a copy from an
    earlier bucket: matched only for the context it gives (its results belong to its
    home bucket), and skipped when this task has just matched the previous bucket
    itself, since the matcher then holds the tuple already (the original, or the copy
    that went there).

    The attribute predicates of all rows are decided per stream in the batch kernels
    first (:meth:`Matcher.prepare`); the rows are then replayed in order, and only the
    ones some query wants cost more (:meth:`Matcher.replay`), exactly as if each were
    pushed in turn.

    A value past 64 bits is NULL (:meth:`MatchBatch.result_columns`); how many there
    were is reported once, at the task's end (:func:`runtime.spark.common.report_nulled`).
    """
    matcher = spawn(spec)  # before the first batch: the plan compiles while the rows arrive
    task = _Task.of(spec, matcher, batches)
    if task is None:
        return
    found = MatchBatch(matcher.ensure_plan())
    types = spec.arrow_value_types()
    waiting = wide = 0
    for j, blocks in task.replayed():
        if blocks and task.owned[j]:
            found.blocks.extend(blocks)
            waiting += sum(len(block) for block in blocks)
            if waiting >= _OUT_ROWS:
                wide += yield from _batches(found, types)
                found = MatchBatch(matcher.ensure_plan())
                waiting = 0
    if waiting:
        wide += yield from _batches(found, types)
    report_nulled(nulled, wide, "match stage")


def _batches(found: MatchBatch, types: Mapping[str, pa.DataType]) -> Generator[pa.RecordBatch, None, int]:
    """The results as Arrow batches; returns how many values past 64 bits were made NULL."""
    columns = found.result_columns(types)
    yield from columns.table.to_batches()
    return columns.overflowed


def view_partition(spec: StageSpec, views: ViewLayout, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One task of the view-rows stage (:mod:`runtime.spark.view_rows`): the rows of
    ``views`` that the partition's tuples make, matched as :func:`match_partition`
    matches them, each with the tuple that made it (``_s``, ``_t``: its stream number
    and id; ``_n``: the row's number in this task), for the global order the local
    engine numbers them in. Only rows made by a tuple of its home bucket are kept
    (a view row's ts is that tuple's, so it is owned as a result is)."""
    matcher = spawn(spec)
    task = _Task.of(spec, matcher, batches)
    if task is None:
        return
    made: list[tuple[str, float, int, dict[str, Any]]] = []
    matcher.view_sink = lambda view, ts, ident, values: made.append((view, ts, ident, values))
    rows: list[tuple[int, tuple[str, float, int, dict[str, Any]]]] = []
    wanted = {name.lower() for name in views.names}
    for j, _ in task.replayed():
        if made:
            if task.owned[j]:
                rows += [(j, row) for row in made if row[0].lower() in wanted]
            made.clear()
        if len(rows) >= _OUT_ROWS:
            yield views.batch(rows, task)
            rows = []
    if rows:
        yield views.batch(rows, task)


class ViewLayout:
    """The view-rows stage's output: ``view``, ``ts``, the making tuple's ``_s`` and
    ``_t``, the row's number ``_n`` in its task, then every view's columns as
    ``_v{k}_{i}`` (NULL in other views' rows)."""

    def __init__(self, views: list[tuple[str, tuple[str, ...], tuple[pa.DataType, ...]]]) -> None:
        self.names = [name for name, _, _ in views]
        self.views = views
        fields = [
            pa.field("view", pa.string()),
            pa.field("ts", pa.float64()),
            pa.field("_s", pa.int32()),
            pa.field("_t", pa.int64()),
            pa.field("_n", pa.int64()),
        ]
        for k, (_, _columns, types) in enumerate(views):
            fields += [pa.field(f"_v{k}_{i}", t) for i, t in enumerate(types)]
        self.schema = pa.schema(fields)

    def batch(self, rows: list[tuple[int, tuple[str, float, int, dict[str, Any]]]], task: _Task) -> pa.RecordBatch:
        trigger = np.array([j for j, _ in rows], np.int64)
        at = {name.lower(): k for k, name in enumerate(self.names)}
        arrays: list[Any] = [
            [row[0] for _, row in rows],
            [row[1] for _, row in rows],
            task.stream_numbers[trigger],
            task.ids[trigger],
            [row[2] for _, row in rows],
        ]
        for k, (_, columns, types) in enumerate(self.views):
            for column, dtype in zip(columns, types, strict=True):
                values = [row[3].get(column) if at[row[0].lower()] == k else None for _, row in rows]
                if pa.types.is_floating(dtype):
                    # a FLOAT column of INTEGER arithmetic holds exact integers (past 2**53,
                    # past 64 bits): their nearest doubles, what the queries reading it see
                    values = [to_float(v) if type(v) is int else v for v in values]
                arrays.append(values)
        return pa.RecordBatch.from_arrays(
            [pa.array(a, f.type) for a, f in zip(arrays, self.schema, strict=True)], schema=self.schema
        )


class _Task:
    """A task's rows laid out for :meth:`Matcher.replay` (see :func:`match_partition`):
    per replayed row ``j``, whether it is owned, its stream number and its id."""

    def __init__(
        self,
        matcher: Matcher,
        prepared: list[Any],
        which: np.ndarray,
        rows: np.ndarray,
        owned: np.ndarray,
        stream_numbers: np.ndarray,
        ids: np.ndarray,
    ) -> None:
        self.matcher = matcher
        self.prepared = prepared
        self.which = which
        self.rows = rows
        self.owned = owned
        self.stream_numbers = stream_numbers
        self.ids = ids

    def replayed(self) -> Iterator[tuple[int, list[Any]]]:
        """The task's replay, with the cyclic collector waiting for its end (or for the
        task to leave it), as it waits for the end of a round of ``mqo match``."""
        with no_cyclic_gc():
            yield from self.matcher.replay(self.prepared, self.which, self.rows)

    @classmethod
    def of(cls, spec: StageSpec, matcher: Matcher, batches: Iterator[pa.RecordBatch]) -> _Task | None:
        received = list(batches)
        if not received:  # an empty partition (more partitions than keys or buckets)
            return None
        table = pa.Table.from_batches(received)
        if table.num_rows == 0:
            return None
        original = table.column("_s").to_numpy()
        s = original.copy()  # renumbered below
        if spec.mode == "key":  # one matcher for all keys, nothing copied
            keep = np.ones(table.num_rows, bool)
            owned = keep
        else:
            b = table.column("_b").to_numpy()
            owned = b == table.column("_home").to_numpy()
            # the bucket this task matched just before each row's bucket
            changes = np.concatenate(([False], b[1:] != b[:-1]))
            starts = np.flatnonzero(np.concatenate(([True], changes[1:])))
            before = np.concatenate(([np.iinfo(np.int64).min], b[starts[:-1]]))
            previous = before[np.cumsum(changes)]
            keep = owned | (previous != b - 1)
        ts = table.column("ts").to_numpy(zero_copy_only=False)
        ids = table.column("id").to_numpy(zero_copy_only=False)
        if ids.dtype.kind != "i":
            raise SparkStageError("a tuple has a NULL id")
        prepared = []
        row_in_batch = np.zeros(table.num_rows, np.int64)
        for k, layout in enumerate(spec.streams):
            mine = np.flatnonzero((s == layout.number) & keep)
            row_in_batch[mine] = np.arange(len(mine))
            data: dict[str, Any] = {"ts": ts[mine], "id": ids[mine]}
            for col, f in zip(layout.columns, layout.fields, strict=True):
                data[col] = table.column(f).take(pa.array(mine)).combine_chunks()
            prepared.append(matcher.prepare(layout.name, data))
            s[mine] = k  # from here on, the number of its prepared batch
        order = np.flatnonzero(keep)
        which, rows = s[order].astype(np.int64), row_in_batch[order]
        return cls(matcher, prepared, which, rows, owned[order], original[order].astype(np.int32), ids[order])


class Rows:
    """One Arrow batch of unified rows as Python columns, pushed run by run (the
    streaming stage's groups are small, so it pushes rather than replays).

    A run of one row (the usual case in timestamp order, where streams interleave) goes
    through :meth:`Matcher.push` (a batch of one row that skips converting columns:
    about two thirds of a one-row ``push_batch``); longer runs go through
    ``push_batch``. Both match as if pushed one by one.
    """

    __slots__ = ("columns", "ids", "ts")

    def __init__(self, ts: np.ndarray, ids: np.ndarray, columns: dict[str, list[Any]]) -> None:
        self.ts = ts
        self.ids = ids
        self.columns = columns

    @classmethod
    def of(cls, batch: pa.RecordBatch) -> Rows:
        names = batch.schema.names
        columns = {name: batch.column(i).to_pylist() for i, name in enumerate(names) if name.startswith("_c")}
        ts = batch.column(names.index("ts")).to_numpy(zero_copy_only=False)
        ids = batch.column(names.index("id")).to_numpy(zero_copy_only=False)
        return cls(ts, ids, columns)

    def push(self, matcher: Matcher, layout: StreamLayout, start: int, end: int) -> list[Match]:
        if self.ids[start:end].dtype.kind != "i":
            raise SparkStageError(f"stream {layout.name}: a tuple has a NULL id")
        if end - start == 1:
            values = {col: self.columns[f][start] for col, f in zip(layout.columns, layout.fields, strict=True)}
            return matcher.push(layout.name, float(self.ts[start]), values, int(self.ids[start]))
        data: dict[str, Any] = {"ts": self.ts[start:end], "id": self.ids[start:end]}
        for col, f in zip(layout.columns, layout.fields, strict=True):
            data[col] = self.columns[f][start:end]
        return matcher.push_batch(layout.name, data).matches()
