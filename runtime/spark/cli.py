"""``mqo match --engine spark``: the batch stage on a Spark session, same files in and out.

The inputs are read and checked exactly as the local engine reads them
(:func:`runtime.io.inputs.read_stream`: bad rows named by file, line and column, or set
aside with ``--on-bad-row skip``). The driver then walks the inputs once in the local
engine's arrival order (smallest next ``ts`` first, ties by ``--input`` order) to decide
what only arrival order can: which tuples are late (older than the newest ``ts`` seen
minus ``--allowed-lateness``) and the automatic ids of inputs without an ``id``
column. The tuples that are not late go to :func:`runtime.spark.match_batch`, whose
timestamp-order results are exactly what the local engine gives for them (its
lateness contract), so both engines write the same records, the same late file and
the same summary. Results are written ordered by ``ts``, then query registration order.

Tables (``--table T=FILE``) are read and checked as the local engine reads them
(:mod:`runtime.io.table_rows`), and every version goes into the matcher of the match
stage before it runs, in the order a local run puts them: the stage ships them to
every task (:mod:`runtime.spark.tables`), so both engines join alike.

Aggregate queries of the same file run in the Spark aggregate stage
(:func:`runtime.spark.aggregate.aggregate_batch`) over the same tuples (those that
are not late), and their rows are written where and as the local engine writes them:
in the JSON-lines output after the matches, or in the aggregate file with CSV and
Parquet (:mod:`runtime.io.aggregate_writers`, whose file order both engines follow).

``--master`` picks the cluster (default ``local[*]``: a Spark inside this process,
needing nothing but the pip-installed pyspark and Java 17). A session that is already
running (a notebook, a test) is used as it is and left running.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mqo import ARROW_TYPES, AggregateBatch, AggregateChunk, LateTuple, Matcher, clock_for, query_layouts, result_schema
from predicates import AggregateQuery
from runtime.io import aggregate_writers
from runtime.io.inputs import BadRow, InputSpec, StreamData, merge, read_inputs
from runtime.io.named_paths import TABLE
from runtime.io.table_rows import TableSpec
from runtime.io.writers import LinesFile, check_output_paths, open_writer, side_paths, write_jsonl
from runtime.local.match import Summary
from runtime.local.tables import TableFeed
from runtime.spark.aggregate_views import materialize
from runtime.spark.spec import check_views
from runtime.spark.tables import put_file_rows, table_texts
from runtime.spark.view_rows import needed_views, numbered, view_rows, views_matcher

if TYPE_CHECKING:
    from pyspark import Accumulator
    from pyspark.sql import SparkSession


def run_spark_match(
    args: argparse.Namespace,
    inputs: list[InputSpec],
    fmt: str,
    matcher: Matcher | None = None,
    output_views: Mapping[str, str] | None = None,
) -> Summary:
    """Run ``mqo match`` on Spark; returns the same summary as the local engine. The
    output paths are checked (and side files of an earlier run removed) before any
    input is read, as the local engine does. ``output_views``: {view: file} of views
    whose rows are written as the local engine writes them (:func:`write_view_rows`,
    :func:`write_aggregate_view_rows`)."""
    from runtime.spark.batch import match_batch
    from runtime.workload import load_matcher

    started = time.perf_counter()
    if matcher is None:
        matcher = load_matcher(
            args.schema, args.queries, allowed_lateness=args.allowed_lateness, order=args.order, time=args.time
        )
    late_path, rejects_path = side_paths(args.output, args.late, args.rejects)
    named = [("the output", args.output, False), ("the late-tuple file", late_path, True)]
    matching, aggregating = split_kinds(matcher)
    table_specs = [TableSpec(given.name, given.path) for given in TABLE.parse(getattr(args, "table", None) or [])]
    if table_specs or matcher.tables:
        # read and checked now, as the local engine does before matching; the rows go
        # into the matcher the match stage runs (it holds the match queries, which
        # are the ones reading tables)
        feed = TableFeed(matching if matching is not None else matcher, table_specs)
        if matching is not None:
            put_file_rows(feed)
    queries = aggregating.registrations.output_aggregates() if aggregating is not None else []
    separate = bool(queries) and fmt != "jsonl"
    aggregates_path = aggregate_writers.aggregates_path(args.output, fmt, args.aggregates) if separate else None
    if separate:
        named.append(("the aggregate file", aggregates_path, False))
    named += [(f"the rows of view {view}", path, True) for view, path in (output_views or {}).items()]
    # match views' rows come from the match stage's tasks, aggregate views' from the
    # aggregate stage (runtime.spark.aggregate_views); matchers made (refusals) before reading
    graph = matcher.registrations.views
    views = {view: path for view, path in (output_views or {}).items() if not graph.get(view).aggregate}  # type: ignore[union-attr]
    aggregated = {view: path for view, path in (output_views or {}).items() if view not in views}
    written = views_matcher(matcher, needed_views(matcher, views)) if views else None
    windowed = views_matcher(matcher, needed_views(matcher, aggregated)) if aggregated else None
    for shown in (written, windowed):
        if shown is not None:
            check_views(shown, True, "aggregate")  # (rows in the local engine's order)
    for stage, kind in ((matching, "match"), (aggregating, "aggregate")):
        if stage is not None and stage.views:
            check_views(stage, True, kind)  # each stage's own refusal, before Spark starts
    check_output_paths([*named, ("the reject file", rejects_path, True)], [spec.path for spec in inputs])
    plan = matcher.ensure_plan()
    data = read_inputs(inputs, plan.catalog, args.on_bad_row)
    rejected: list[BadRow] = [row for d in data for row in d.rejected]
    write_jsonl(rejects_path, (r.as_dict() for r in rejected), "the reject file")
    ids, keep, late = arrival_order(data, matcher)

    summary = Summary(output=args.output, aggregates_path=aggregates_path)
    tables = stream_tables(matcher, data, ids, keep)
    found = result_schema(matcher.value_types()).empty_table()
    rows = AggregateBatch()
    nulled = 0  # values past 64 bits the stages wrote as NULL (the writers count the rest)
    if tables and (matching is not None or aggregating is not None or written is not None or windowed is not None):
        spark, owned = spark_session(args.master)
        try:
            frames = {name: spark.createDataFrame(table) for name, table in tables.items()}
            # one partition per core: the default 200 shuffle partitions cost more in task
            # start-up than a file's worth of matching
            cores = max(1, spark.sparkContext.defaultParallelism)
            counted = spark.sparkContext.accumulator(0)
            if matching is not None:
                results = match_batch(frames, matching, partitions=cores, nulled=counted)
                found = in_result_order(results.toArrow(), matching)
            if aggregating is not None:
                rows = run_aggregates(aggregating, frames, cores, counted)
            nulled = counted.value
            if written is not None:
                write_view_rows(views, written, frames, cores)
            if windowed is not None:
                write_aggregate_view_rows(aggregated, windowed, frames, cores)
        finally:
            if owned:
                spark.stop()
    with (
        open_writer(args.output, fmt, matcher.value_types()) as writer,
        (
            aggregate_writers.open_aggregate_writer(aggregates_path, fmt, queries)  # type: ignore[arg-type]
            if separate
            else nullcontext(writer)
        ) as aggregate_writer,
    ):
        if matching is not None:
            writer.write_table(found, query_layouts(matching.registry.records()))
        summary.results = found.num_rows
        if queries:
            # after the matches, as the local engine writes them at the end of input
            if separate:
                summary.aggregates = aggregate_writer.write_aggregates(rows)
            else:
                summary.results += writer.write_aggregates(rows)
    summary.nonfinite = nulled + writer.nonfinite + (aggregate_writer.nonfinite if separate else 0)
    summary.tuples = summary.total = sum(len(d) for d in data)
    for d in data:
        summary.per_stream[d.stream] = summary.per_stream.get(d.stream, 0) + len(d)
    if not tables:  # no tuple: the files as the local engine leaves them
        if written is not None:
            write_view_rows(views, written, {}, 1)
        if windowed is not None:
            write_aggregate_view_rows(aggregated, windowed, {}, 1)
    summary.late = len(late)
    summary.rejected = len(rejected)
    write_jsonl(late_path, (t.as_dict() for t in late), "the late-tuple file")
    summary.late_path = late_path if late else None
    summary.rejects_path = rejects_path if rejected else None
    summary.seconds = time.perf_counter() - started
    return summary


def split_kinds(matcher: Matcher) -> tuple[Matcher | None, Matcher | None]:
    """Matchers of the same streams and settings holding the match queries and the
    aggregate queries (each kind runs in its own Spark stage), each with the views it
    reads (an aggregate view's rows are made by each stage that reads them:
    :mod:`runtime.spark.aggregate_views`); None for a kind the file does not have."""
    views = matcher.registrations.views
    outputs = matcher.registrations.output_aggregates()  # (every level's; not the aggregate views)
    # (views alone make no results: their rows are read by other queries and --output-view)
    plain = [name for name in matcher.registry.queries if name not in views]  # (names: no record made per row)
    if not outputs and not views.aggregating:
        return (matcher if plain else None), None
    ddl = matcher.catalog.ddl()
    matching = None
    if plain:
        matching = Matcher(ddl, config=matcher.config)
        texts = table_texts(matcher)
        if texts:  # (declared before the queries that read them; no aggregate query can)
            matching.register_queries(texts, "<tables>")
        for view in views:  # (each as its CREATE VIEW, which declares its stream)
            matching.register_query(view.text, query_id=view.name, source_name=f"<view {view.name}>")
        for name in plain:
            rq = matcher.registry.queries[name]
            matching.register_query(rq.text, query_id=rq.name, source_name=f"<query {rq.name}>")
    if not outputs:
        return matching, None
    # the views the aggregate queries read come along: the aggregate stage makes their rows
    aggregating = views_matcher(matcher, needed_views(matcher, [q.stream for q in outputs]))
    for query in outputs:
        aggregating.register_query(query.text, query_id=query.name, source_name=f"<query {query.name}>")
    return matching, aggregating


def run_aggregates(
    aggregating: Matcher, frames: Mapping[str, Any], partitions: int, nulled: Accumulator[int] | None = None
) -> AggregateBatch:
    """The aggregate rows of the stage over the streams that have tuples (a query on a
    stream without any has no rows, as in the local engine), in file order; ``nulled``
    counts their values past 64 bits, written as NULL (:func:`runtime.spark.aggregate_batch`)."""
    from runtime.spark.aggregate import aggregate_batch

    queries = aggregating.registrations.output_aggregates()
    views = aggregating.registrations.views
    # (a view's rows come from the streams given: none when its streams have no tuples)
    fed = [q for q in queries if q.stream in frames or q.stream in views]
    if not fed:
        return AggregateBatch()
    if len(fed) < len(queries):
        aggregating = views_matcher(aggregating, needed_views(aggregating, [q.stream for q in fed]))
        for q in fed:
            aggregating.register_query(q.text, query_id=q.name, source_name=f"<query {q.name}>")
    table = aggregate_batch(dict(frames), aggregating, partitions=partitions, nulled=nulled).toArrow()
    return aggregate_writers.in_file_order(stage_rows(table, queries))


def write_view_rows(views: Mapping[str, str], source: Matcher, frames: Mapping[str, Any], partitions: int) -> None:
    """Write the rows of each view of ``views`` ({view: file}) that the match views of
    ``source`` (:func:`runtime.spark.view_rows.views_matcher`) make over the stream
    DataFrames, as ``mqo match --engine local --output-view`` writes them: JSON lines
    ``view``, ``ts``, ``id``, ``values`` in the order made, with the local engine's ids
    (:func:`runtime.spark.view_rows.numbered`); a view without rows leaves no file."""
    names = [source.registrations.views.get(view).name for view in views]  # type: ignore[union-attr]
    made: dict[str, list[tuple[float, int, dict[str, Any]]]] = {name: [] for name in names}
    if frames:
        rows, layout = view_rows(frames, source, names, partitions=partitions)
        made = numbered(rows.toArrow(), layout)
    for name, (view, path) in zip(names, views.items(), strict=True):
        with LinesFile(path, f"the rows of view {view}") as out:
            out.write({"view": name, "ts": ts, "id": ident, "values": values} for ts, ident, values in made[name])


def write_aggregate_view_rows(
    views: Mapping[str, str], source: Matcher, frames: Mapping[str, Any], partitions: int
) -> None:
    """Write the rows of each aggregate view of ``views`` ({view: file}) that the views
    of ``source`` (:func:`runtime.spark.view_rows.views_matcher`) make over the stream
    DataFrames, as the local engine writes them: each view's rows as the aggregate
    stage makes them for its readers (:func:`runtime.spark.aggregate_views.materialize`:
    ``ts`` the window's end, the local engine's ids), written in id order, the order
    the local engine makes them in."""
    from runtime.spark.aggregate import aggregate_batch

    graph = source.registrations.views
    names = [graph.get(view).name for view in views]  # type: ignore[union-attr]
    made: dict[str, list[tuple[float, int, dict[str, Any]]]] = {name: [] for name in names}
    if frames:
        _, streams = materialize(frames, source, aggregate_batch, partitions)
        for name in names:
            columns = [column.name for column in graph.get(name).schema.columns]  # type: ignore[union-attr]
            rows = sorted(streams[name].collect(), key=lambda row: row["id"])
            made[name] = [(row["ts"], row["id"], {c: row[c] for c in columns}) for row in rows]
    for name, (view, path) in zip(names, views.items(), strict=True):
        with LinesFile(path, f"the rows of view {view}") as out:
            out.write({"view": name, "ts": ts, "id": ident, "values": values} for ts, ident, values in made[name])


def stage_rows(table: pa.Table, queries: list[AggregateQuery]) -> AggregateBatch:
    """The aggregate stage's rows (groups and values as text maps) as the local
    engine's rows: one chunk per query, each value of the type the query gives it."""
    position = {q.name: k for k, q in enumerate(queries)}
    by_query: dict[str, list[dict[str, Any]]] = {}
    for row in table.to_pylist():
        by_query.setdefault(row["query"], []).append(row)
    chunks = []
    for q in queries:
        found = by_query.get(q.name, [])
        if not found:
            continue
        value_types = aggregate_writers.output_types(q)
        group_types = [ARROW_TYPES[t] for t in q.group_types]
        keys: dict[tuple[Any, ...], int] = {}
        codes = []
        for row in found:
            group = dict(row["group"])
            key = tuple(_typed(group.get(g), t) for g, t in zip(q.group_by, group_types, strict=True))
            codes.append(keys.setdefault(key, len(keys)))
        names = list(value_types)
        texts = [dict(row["values"]) for row in found]
        values = [[_typed(text.get(name), value_types[name]) for text in texts] for name in names]
        starts = [-np.inf if row["window_start"] is None else row["window_start"] for row in found]
        chunks.append(
            AggregateChunk(
                q.name,
                position[q.name],
                np.array(starts, np.float64),
                np.array([row["window_end"] for row in found], np.float64),
                tuple(q.group_by),
                list(keys),
                np.array(codes, np.int64),
                names,
                values,
            )
        )
    return AggregateBatch([chunks])


def _typed(text: str | None, dtype: pa.DataType) -> Any:
    """A value the stage wrote as text (:func:`mqo.batch.text_of`: ``str`` of it) as
    the value of its type again (``str`` of a float is its shortest decimal: exact)."""
    if text is None:
        return None
    if pa.types.is_integer(dtype):
        return int(text) if text.lstrip("-").isdigit() else float(text)
    if pa.types.is_floating(dtype):
        return float(text)
    if pa.types.is_boolean(dtype):
        return text == "True"
    return text


def arrival_order(
    data: list[StreamData], matcher: Matcher
) -> tuple[list[list[int]], list[list[bool]], list[LateTuple]]:
    """Per input: every row's id and whether it is matched; plus the late tuples, as
    the local engine decides them in its arrival order."""
    ids: list[list[int]] = [d.ids.tolist() if d.ids is not None else [0] * len(d) for d in data]
    keep: list[list[bool]] = [[True] * len(d) for d in data]
    late: list[LateTuple] = []
    next_id: dict[str, int] = {}
    # the matcher's own clock, so both engines call the same tuples late
    plan = matcher.ensure_plan()
    # the declared streams' clocks, as the local engine keeps them (not roles, not views
    # or tables: a view's time is its inputs', and a clock no tuple moves holds all back)
    streams = [s for s in plan.streams[: plan.n_real] if not s.view and not s.table_key]
    names = [schema.name for schema in streams]
    clock = clock_for(matcher.config, streams)
    for k, i in merge(data):
        d = data[k]
        auto = next_id.get(d.stream, 0)
        next_id[d.stream] = auto + 1  # an automatic id is used up by every tuple, late or not
        if d.ids is None:
            ids[k][i] = auto
        ts = float(d.ts[i])
        s = names.index(d.stream)
        if clock.is_late(s, ts):
            keep[k][i] = False
            base, number = clock.mark  # type: ignore[misc]  # a late tuple has a watermark
            late.append(LateTuple(d.stream, ts, ids[k][i], d.values(i), base, clock.lateness[number]))
        clock.observe(s, ts)
    return ids, keep, late


def stream_tables(
    matcher: Matcher, data: list[StreamData], ids: list[list[int]], keep: list[list[bool]]
) -> dict[str, pa.Table]:
    """One Arrow table per stream (``ts``, ``id``, the declared columns) of the tuples
    to match; streams with none are left out."""
    rows: dict[str, list[pa.Table]] = {}
    for d, d_ids, d_keep in zip(data, ids, keep, strict=True):
        schema = matcher.catalog.require(d.stream)
        picked = np.flatnonzero(np.asarray(d_keep, bool))
        if not len(picked):
            continue
        arrays = [pa.array(d.ts[picked], pa.float64()), pa.array(np.asarray(d_ids, np.int64)[picked], pa.int64())]
        names = ["ts", "id"]
        at = pa.array(picked)
        for col in schema.columns:
            arrays.append(d.columns[col.name].take(at).cast(ARROW_TYPES[col.ctype]))
            names.append(col.name)
        rows.setdefault(d.stream, []).append(pa.Table.from_arrays(arrays, names=names))
    return {name: pa.concat_tables(parts) for name, parts in rows.items()}


def in_result_order(table: pa.Table, matcher: Matcher) -> pa.Table:
    """The stage's result columns ordered as the local engine writes them: by ts,
    then query registration order, then the ids in the order of their aliases' names.
    No row becomes a Python object: the order is one lexsort over the columns."""
    table = table.cast(result_schema(matcher.value_types()))
    n = table.num_rows
    if n < 2:
        return table
    rank = {name: k for k, name in enumerate(matcher.registry.queries)}
    query = pc.dictionary_encode(table.column("query")).combine_chunks()
    ranks = np.array([rank[q] for q in query.dictionary.to_pylist()], np.int64)[query.indices.to_numpy()]
    ids = table.column("ids").combine_chunks()
    offsets = ids.offsets.to_numpy()
    offsets = offsets - offsets[0]
    keys = pc.dictionary_encode(ids.keys)
    alias_rank = np.argsort(np.argsort(np.array(keys.dictionary.to_pylist(), object)))
    row_of = np.repeat(np.arange(n), np.diff(offsets))
    order = np.lexsort((alias_rank[keys.indices.to_numpy()], row_of))  # each row's ids by alias name
    width = int(np.diff(offsets).max(initial=0))
    by_alias = np.full((width, n), np.iinfo(np.int64).min)
    by_alias[np.arange(len(order)) - offsets[row_of[order]], row_of[order]] = ids.items.to_numpy()[order]
    return table.take(pa.array(np.lexsort((*by_alias[::-1], ranks, table.column("ts").to_numpy()))))


def spark_session(master: str, conf: Mapping[str, str] | None = None) -> tuple[SparkSession, bool]:
    """The running session if there is one (not ours to stop), else a new one on
    ``master`` with quiet logs and ``conf``; returns (session, whether we own it)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    if "PYSPARK_SUBMIT_ARGS" not in os.environ:
        # Spark's own start-up chatter (INFO/WARN lines) would bury the summary
        os.environ["PYSPARK_SUBMIT_ARGS"] = (
            f"--driver-java-options -Dlog4j2.configurationFile={_quiet_log4j()} pyspark-shell"
        )
    builder: Any = (
        SparkSession.builder.master(master)
        .appName("mqo match")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True


_LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _quiet_log4j() -> str:
    """A log4j2 configuration that lets only errors through (written once per user)."""
    import tempfile
    from pathlib import Path

    path = Path(tempfile.gettempdir()) / f"mqo-log4j2-{os.getuid() if hasattr(os, 'getuid') else 0}.properties"
    if not path.exists() or path.read_text() != _LOG4J:
        path.write_text(_LOG4J)
    return str(path)
