"""Aggregate queries as a Spark batch stage: stream DataFrames in, a DataFrame of
aggregate rows out.

>>> from runtime.spark.aggregate import aggregate_batch
>>> rows = aggregate_batch({"H": heart_df}, aggregate_queries_text, schema=ddl_text)

**Output schema** (:func:`aggregate_schema`)::

    query string, window_start double, window_end double,
    group map<string,string>, values map<string,string>

one row per (query, window, group) whose window holds data, as the local engine emits
them at the end of a finite input (:meth:`mqo.Matcher.flush`). Groups and values are
maps because queries differ in them; each value is the text it prints as (exact, see
:func:`mqo.batch.text_of`). A landmark window's start is NULL.

**Semantics.** As the batch match stage: every tuple arrives in ``(ts, id)`` order (ids
from an ``id`` column, or numbered in row order), so none is late, and the rows equal
the local engine's fed in that order (``tests/spark/test_spark_aggregate.py``).

**Partitioning keeps every window whole.** Each task runs an ordinary
:class:`mqo.Matcher` over its rows and reports only windows it holds entirely, so
nothing is combined across tasks and the rows are exact. Per stream:

* **group key**: when every aggregate query on the stream groups by one common column,
  rows are hash-partitioned by it; a group's rows, and so its windows of every kind
  (count windows too), are in one task;
* **time spans**: else, when every window is a ``RANGE d`` window, time is cut into
  spans of width ``P`` (default four times the largest range), a task owns the windows
  that end in its span and gets the rows from ``d`` before it: a row goes to every span
  from its own to that of ``ts + d`` (replication ``1 + d / P``);
* **one task** for the stream otherwise (a landmark window, count windows without
  a common group key, or an ISTREAM/DSTREAM query without one, which compares each
  window with the previous, need the stream's whole history in order).

**Aggregates over match views.** ``queries`` may hold match views (``CREATE VIEW``)
and aggregate queries reading them: the batch match stage's tasks make the views'
rows (:mod:`runtime.spark.view_rows`, in the local engine's order), and each view is
then one more stream, partitioned as above. Aggregate views' rows are made first
(:mod:`runtime.spark.aggregate_views`), each view then a declared stream.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from mqo import AggregateBatch, AggregateChunk, AggregateValues, Matcher, text_of, value_texts
from predicates import AggregateQuery
from runtime.spark.aggregate_views import materialize
from runtime.spark.common import fitted, pandas_frame, report_nulled, runs, shuffle_partitions, unify
from runtime.spark.spec import (
    SparkStageError,
    StageSpec,
    StreamLayout,
    register_each,
    row_layout,
    stage_matcher,
    without_lateness,
)
from runtime.spark.view_rows import needed_views, view_frames, view_rows, views_as_streams, views_matcher

if TYPE_CHECKING:
    import pandas as pd
    from pyspark import Accumulator
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

DEFAULT_SPANS_PER_RANGE = 4
AGGREGATE_COLUMNS = ("query", "window_start", "window_end", "group", "values")  # the output's, see aggregate_schema
_ARROW_SCHEMA = pa.schema(
    [
        pa.field("query", pa.string()),
        pa.field("window_start", pa.float64()),
        pa.field("window_end", pa.float64()),
        pa.field("group", pa.map_(pa.string(), pa.string())),
        pa.field("values", pa.map_(pa.string(), pa.string())),
    ]
)


def aggregate_schema() -> StructType:
    from pyspark.sql import types as T

    text_map = T.MapType(T.StringType(), T.StringType())
    types = {
        "query": T.StringType(),
        "window_start": T.DoubleType(),
        "window_end": T.DoubleType(),
        "group": text_map,
        "values": text_map,
    }
    return T.StructType([T.StructField(name, types[name]) for name in AGGREGATE_COLUMNS])


@dataclass(frozen=True)
class StreamPlan:
    """How one stream's aggregate queries are partitioned (see the module docstring)."""

    stream: str
    queries: tuple[tuple[str, str], ...]  # (id, text)
    mode: str  # "key", "time" or "one"
    key: str | None = None
    span: float = 0.0
    reach: float = 0.0  # the largest RANGE


def plan_stream(stream: str, queries: Sequence[AggregateQuery], span: float | None) -> StreamPlan:
    texts = tuple((q.name, q.text) for q in queries)
    common = set(queries[0].group_by)
    for q in queries[1:]:
        common &= set(q.group_by)
    if common:
        return StreamPlan(stream, texts, "key", key=sorted(common)[0])
    # ISTREAM/DSTREAM compare each window with the one before, which a time span's
    # first window does not hold whole: such streams go to one task (or by group key)
    if all(q.window.kind == "range" and q.stream_op == "RSTREAM" for q in queries):
        reach = float(max(q.window.size for q in queries))  # type: ignore[type-var]
        width = float(span) if span is not None else DEFAULT_SPANS_PER_RANGE * reach
        if not (width > 0 and math.isfinite(width)):
            raise SparkStageError(f"span must be a positive number of seconds, got {span!r}")
        return StreamPlan(stream, texts, "time", span=width, reach=reach)
    return StreamPlan(stream, texts, "one")


def aggregate_batch(
    streams: Mapping[str, DataFrame],
    queries: str | Sequence[str] | Matcher,
    *,
    schema: str | None = None,
    partitions: int | None = None,
    span: float | None = None,
    nulled: Accumulator[int] | None = None,
) -> DataFrame:
    """The aggregate rows of the queries over the stream DataFrames (see the module
    docstring). ``queries`` holds aggregate queries and the match views they read (match
    queries go to :func:`runtime.spark.match_batch`); ``streams`` the declared streams'
    DataFrames (a view's rows come from its query); ``span``: the time span width for
    streams partitioned by time (default four times the stream's largest RANGE).

    A value past 64 bits (``-MIN(x)`` of the smallest INTEGER) is NULL, as the local
    engine writes it; ``nulled``: an accumulator counting them, as in
    :func:`runtime.spark.match_batch`. (A ``SUM`` past 64 bits is NULL too, with the
    local engine's own warning naming the query, in the worker's log; neither engine
    counts it with these.)"""
    matcher = stage_matcher(queries, schema, streams, None, kind="aggregate", views=True)
    n = shuffle_partitions(streams, partitions, "partitions")
    aggregator = matcher.aggregator
    assert aggregator is not None
    given = [name for name in streams if name in matcher.registrations.views]
    if given:
        raise SparkStageError(
            f"{given[0]} is a view: its rows come from its query over the streams; give the streams' DataFrames"
        )
    if matcher.registrations.views.aggregating:  # their rows first, then streams like any (aggregate_views)
        matcher, streams = materialize(streams, matcher, aggregate_batch, n, span)
        aggregator = matcher.aggregator
        assert aggregator is not None
    views = needed_views(matcher, [registered.query.stream for registered in aggregator.queries.values()])
    if views:
        # the views' rows first (the batch match stage's tasks make them), then the
        # aggregate queries over them as over declared streams (runtime.spark.view_rows)
        made, layout = view_rows(streams, views_matcher(matcher, views), views, partitions=n)
        streams = {**streams, **view_frames(made, layout)}
        ddl = views_as_streams(matcher, views)
        matcher = register_each(
            Matcher(ddl), [(name, registered.query.text) for name, registered in aggregator.queries.items()]
        )
    plans = stream_plans(matcher, streams, span)
    ddl = without_lateness(matcher.catalog.ddl())  # tuples come in (ts, id) order, none late
    layout_spec = row_layout(ddl)
    out = None
    for plan in plans:
        stream = plan.stream
        rows = unify({stream: streams[stream]}, layout_spec)
        part = partitioned(rows, plan, layout_spec, n).mapInArrow(
            partial(aggregate_partition, ddl, plan, layout_spec.stream(stream), nulled=nulled), aggregate_schema()
        )
        out = part if out is None else out.unionByName(part)
    assert out is not None
    return out


def stream_plans(matcher: Matcher, streams: Mapping[str, Any], span: float | None) -> list[StreamPlan]:
    """The partitioning plan of every stream the matcher's aggregate queries read (in
    the order their queries were registered); each of those streams must be given."""
    aggregator = matcher.aggregator
    assert aggregator is not None
    by_stream: dict[str, list[AggregateQuery]] = {}
    for registered in aggregator.queries.values():
        by_stream.setdefault(registered.query.stream, []).append(registered.query)
    missing = sorted(s for s in by_stream if s not in streams)
    if missing:
        raise SparkStageError(f"aggregate queries read stream(s) {', '.join(missing)}: give their DataFrames")
    return [plan_stream(stream, stream_queries, span) for stream, stream_queries in by_stream.items()]


def partitioned(rows: DataFrame, plan: StreamPlan, spec: StageSpec, n: int) -> DataFrame:
    """``_p``: the partition key of each row copy; rows sorted within partitions by
    (ts, id), in time mode by (``_p``, ts, id)."""
    if plan.mode == "key":
        layout = spec.stream(plan.stream)
        field = layout.fields[layout.columns.index(plan.key)]  # type: ignore[arg-type]
        keyed = rows.selectExpr("*", f"xxhash64({field}) AS _p")
        # groups never share a window: the task's keys go through one matcher, in ts order
        return keyed.repartition(n, "_p").sortWithinPartitions("ts", "id")
    if plan.mode == "one":
        return rows.selectExpr("*", "0L AS _p").repartition(1).sortWithinPartitions("ts", "id")
    first, last = span_bounds(plan)
    copies = rows.selectExpr("*", f"explode(sequence({first}, GREATEST({first}, {last}))) AS _p")
    return copies.repartitionByRange(n, "_p").sortWithinPartitions("_p", "ts", "id")


def span_bounds(plan: StreamPlan) -> tuple[str, str]:
    """SQL expressions of the first and last span a row is copied to (time mode):
    every span holding a window this row is in, i.e. ending in [ts, ts + RANGE)."""
    width, reach = repr(plan.span) + "D", repr(plan.reach) + "D"
    # a little margin either side, since FLOOR of a quotient of doubles may be one span off
    margin = f"(ABS(ts) + {reach}) * 1e-12 + 1e-300"
    first = f"CAST(FLOOR((ts - {margin}) / {width}) AS BIGINT)"
    last = f"CAST(FLOOR((ts + {reach} + {margin}) / {width}) AS BIGINT)"
    return first, last


def owned(plan: StreamPlan, span: int, window_ends: Sequence[float] | np.ndarray) -> np.ndarray:
    """Whether the task (or state group) of ``span`` reports windows ending here: in
    time mode the span holding the end; otherwise every task owns what it finds."""
    if plan.mode != "time":
        return np.ones(len(window_ends), bool)
    return np.floor(np.asarray(window_ends, np.float64) / plan.span) == span


def output_rows(
    rows: AggregateBatch, keep: Callable[[np.ndarray], np.ndarray] | None = None
) -> tuple[list[tuple[Any, ...]], int]:
    """Aggregate rows as output tuples in :func:`aggregate_schema`'s column order (maps
    as lists of pairs), in emission order, and how many values past 64 bits were made
    NULL (:func:`output_batch`); ``keep(window_ends)``: which to keep."""
    batch, wide = output_batch(rows, keep)
    return list(zip(*(column.to_pylist() for column in batch.columns), strict=True)), wide


def output_batch(
    rows: AggregateBatch, keep: Callable[[np.ndarray], np.ndarray] | None = None
) -> tuple[pa.RecordBatch, int]:
    """The rows of :func:`output_rows` as one Arrow batch, in emission order, and how
    many values were made NULL: an integer past 64 bits (an exact value such as
    ``-MIN(x)`` of the smallest INTEGER) is NULL, as the local engine writes it. Built
    column by column from the batch's chunks, with no object per row: the stage's
    output is millions of rows, and making them one by one in Python was most of its
    time. The texts of all values of one type are made in one call of Arrow's kernels
    (a chunk is one query's rows: a thousand queries make thousands of small chunks)."""
    tables = []
    wide = 0
    for part in rows.parts:
        if not part:
            continue
        order = AggregateBatch._order(part)
        if keep is not None:
            order = order[keep(np.concatenate([c.ends for c in part])[order])]
        table, nulled = _part_table(part)
        tables.append(table.take(pa.array(order)))
        wide += int(nulled[order].sum())  # (the rows kept: a span's windows ending elsewhere are another's)
    # (one batch: the rows were taken in order into one chunk; none when none is kept)
    batches = pa.concat_tables(tables).combine_chunks().to_batches() if tables else []
    if not batches:
        return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in _ARROW_SCHEMA], schema=_ARROW_SCHEMA), wide
    return batches[0], wide


def _part_table(part: list[AggregateChunk]) -> tuple[pa.Table, np.ndarray]:
    """The rows of a part's chunks, chunk after chunk, as a table of the output schema,
    and how many values of each row were made NULL (:func:`_column_texts`)."""
    sizes = np.array([len(c) for c in part], np.int64)
    chunk_of = np.repeat(np.arange(len(part)), sizes)
    queries = pa.array([c.query for c in part], pa.string()).take(pa.array(chunk_of))
    ends = pa.array(np.concatenate([c.ends for c in part]), pa.float64())
    starts = np.concatenate([c.starts for c in part])
    starts_column = pa.array(starts, pa.float64(), mask=np.isneginf(starts))  # a landmark's: NULL
    # a group's texts once per group: row r of a chunk reads those of its code
    group_texts: list[str | None] = []
    group_cells = []
    for c in part:
        kg, base = len(c.group_by), len(group_texts)
        group_texts += [text_of(v) for key in c.keys for v in key]
        codes = np.asarray(c.codes, np.int64)
        group_cells.append((base + codes[:, None] * kg + np.arange(kg)[None, :]).reshape(-1))
    groups = _maps(part, [c.group_by for c in part], pa.array(group_texts, pa.string()), group_cells)
    # every value column's texts in one array; row r of a chunk reads r of each column
    texts, bases, wide = _column_texts([column for c in part for column in c.values])
    value_cells = []
    at = 0
    for c in part:
        k = len(c.values)
        value_cells.append((np.arange(len(c))[:, None] + bases[at : at + k][None, :]).reshape(-1))
        at += k
    values = _maps(part, [c.names for c in part], texts, value_cells)
    nulled = np.zeros(len(chunk_of), np.int64)
    if len(wide):  # each row's cells, row after row: which rows read the values made NULL
        cells = np.concatenate(value_cells)
        rows = np.repeat(np.arange(len(chunk_of)), np.repeat([len(c.values) for c in part], sizes))
        nulled = np.bincount(rows[np.isin(cells, wide)], minlength=len(chunk_of))
    return pa.Table.from_arrays([queries, starts_column, ends, groups, values], schema=_ARROW_SCHEMA), nulled


def _maps(part: list[AggregateChunk], names: list[Any], texts: pa.Array, cells: list[np.ndarray]) -> pa.MapArray:
    """One map per row of the part's chunks: chunk ``c``'s rows have the keys
    ``names[c]``, and their values, row after row, are ``texts`` at ``cells[c]``."""
    every = sorted({name for chunk_names in names for name in chunk_names})
    position = {name: i for i, name in enumerate(every)}
    keys = [
        np.tile(np.array([position[x] for x in chunk_names], np.int64), len(c))
        for c, chunk_names in zip(part, names, strict=True)
    ]
    widths = np.repeat([len(x) for x in names], [len(c) for c in part])
    offsets = np.zeros(len(widths) + 1, np.int32)
    np.cumsum(widths, out=offsets[1:])
    key_array = pa.array(every, pa.string()).take(pa.array(np.concatenate([np.zeros(0, np.int64), *keys])))
    items = texts.take(pa.array(np.concatenate([np.zeros(0, np.int64), *cells])))
    return pa.MapArray.from_arrays(pa.array(offsets), key_array, items, type=_ARROW_SCHEMA.field("group").type)


def _column_texts(columns: list[AggregateValues]) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """The texts of every value of ``columns`` as :func:`mqo.text_of` prints them (NULL
    stays NULL, an integer past 64 bits is NULL: :func:`runtime.spark.common.fitted`),
    in one array, where each column's first value is in it, and where the values made
    NULL are in it. Columns of one type are formatted together."""
    kinds: dict[str, list[int]] = {}
    for i, column in enumerate(columns):
        kinds.setdefault(column.data.dtype.kind, []).append(i)
    bases = np.zeros(len(columns), np.int64)
    pieces = []
    wide: list[int] = []
    size = 0
    for kind, members in kinds.items():
        lengths = np.array([len(columns[i]) for i in members], np.int64)
        first = size
        bases[members] = first + np.concatenate([[0], np.cumsum(lengths)[:-1]])
        size += int(lengths.sum())
        if kind == "O":  # Python values: texts, exact numbers (an integer past 64 bits among them)
            kept, at = fitted([v for i in members for v in columns[i].tolist()])
            wide += [first + k for k in at]
            pieces.append(pa.array([text_of(v) for v in kept], pa.string()))
            continue
        data = np.concatenate([columns[i].data for i in members])
        values = pa.array(data, mask=np.concatenate([columns[i].null for i in members]))
        pieces.append(value_texts(values, values.type, json_text=False))
    texts = pa.concat_arrays(pieces) if pieces else pa.array([], pa.string())
    return texts, bases, np.array(wide, np.int64)


# ------------------------------------------------------------- on the workers


def aggregate_partition(
    ddl: str,
    plan: StreamPlan,
    layout: StreamLayout,
    batches: Iterator[pa.RecordBatch],
    nulled: Accumulator[int] | None = None,
) -> Iterator[pa.RecordBatch]:
    """One task: one matcher per span in time mode (a row may be in several), one for
    the whole task otherwise, fed the rows in (ts, id) order."""
    received = [b for b in batches if b.num_rows]
    if not received:
        return
    table = pa.Table.from_batches(received)
    p = table.column("_p").to_numpy()
    bounds = runs(p) if plan.mode == "time" else [(0, len(p))]
    wide = 0
    for start, end in bounds:
        rows = _run(ddl, plan, layout, table.slice(start, end - start))
        out, count = output_batch(rows, partial(owned, plan, int(p[start])))
        wide += count
        if out.num_rows:
            yield out
    report_nulled(nulled, wide, "aggregate stage")


def _run(ddl: str, plan: StreamPlan, layout: StreamLayout, table: pa.Table) -> AggregateBatch:
    matcher = register_each(Matcher(ddl, time="global", late_sink=_never_late), plan.queries)
    # the task's Arrow columns under the stream's column names (no Python value per row)
    names = ["ts", "id", *layout.columns]
    matcher.push_batch(plan.stream, pa.table([table.column(f) for f in ["ts", "id", *layout.fields]], names=names))
    return matcher.flush()


def _never_late(late: Any) -> None:
    # rows come sorted by (ts, id): a late one would mean rows were lost or misordered
    raise SparkStageError(f"internal error: a tuple of stream {late.stream} at ts {late.ts} arrived late in a task")


# ------------------------------------------------ shared by the streaming stages


def aggregate_frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """Output tuples (:func:`output_rows`, late rows; with a sixth field, the error
    column of the control-stream stage) as the pandas frame a state group yields."""
    rows = [(*row[:3], _as_map(row[3]), _as_map(row[4]), *row[5:]) for row in rows]
    names = (*AGGREGATE_COLUMNS, "error")[: len(rows[0])]
    return pandas_frame(rows, names, ["window_start", "window_end"])


def _as_map(pairs: Any) -> dict[str, Any] | None:
    return None if pairs is None else dict(pairs)
