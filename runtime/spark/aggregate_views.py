"""Aggregate views in the Spark batch stages: each view's rows made by the aggregate
stage, then read by the queries over it as a declared stream's tuples.

The local engine emits an aggregate view's rows level by level behind the watermark
(:mod:`mqo.views`, rules 1-3), and the results they find are those of timestamp
order: the rows are a stream whose ``ts`` is the window's end. So a batch job can
make them first: :func:`materialize` walks the aggregate views in registration order
(a view's input comes before it), runs each one's query in
:func:`runtime.spark.aggregate.aggregate_batch` over the streams and the views made so
far (match views below it run there as :mod:`runtime.spark.view_rows` runs them), and
turns its rows into a stream DataFrame (:func:`aggregate_view_frame`): ``ts`` the
window's end, the view's columns typed from the stage's exact texts, and ``id`` the
local engine's (a view's rows are numbered by window end, then group key, NULL first:
the offset of the rows with earlier ends plus the rank within the end). The queries
then run over a matcher where each aggregate view is a declared stream.

A match view reading an aggregate view runs in the match stage, its rows made there
from the aggregate view's rows as from any stream's (its ids are the tasks' there, as
every match view's). An aggregate view or query over it is refused
(:func:`runtime.spark.spec.check_views`): the local engine feeds the rows of one
emission as one generation, whose match-view rows it numbers together, where a stage
makes them one aggregate row at a time, and an aggregate needs them in the local
engine's order.

**Tables.** No view reads a table (a match query can), so the stages that make an
aggregate view's rows need none: tables stay with the queries after them. The matcher
:func:`materialize` returns declares the tables first (their rows go to the match
stage with its spec, taken from the caller's matcher before:
:func:`runtime.spark.tables.stage_tables`), and a query joining an aggregate view's
rows with a table reads it as of each row's ts (the window's end), as any query does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mqo import Matcher
from predicates import AggregateQuery
from runtime.spark.common import SQL_TYPES, quoted
from runtime.spark.tables import table_texts
from runtime.spark.view_rows import needed_views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["aggregate_view_frame", "materialize"]


def materialize(
    streams: Mapping[str, DataFrame],
    matcher: Matcher,
    aggregate: Callable[..., DataFrame],
    partitions: int,
    span: float | None = None,
) -> tuple[Matcher, dict[str, DataFrame]]:
    """A matcher holding ``matcher``'s queries with every aggregate view a declared
    stream, and the stream DataFrames with each aggregate view's rows added.
    ``aggregate``: :func:`runtime.spark.aggregate.aggregate_batch` (given by the
    caller, which that stage is too), run once per aggregate view over a matcher of
    its query and the match views it reads. The returned matcher declares
    ``matcher``'s tables (without their rows: the caller ships those)."""
    graph = matcher.registrations.views
    frames = dict(streams)
    made: list[str] = []  # the aggregate views made so far: declared streams from here on
    below: list[str] = []  # the match views registered so far
    for view in graph:
        if not view.aggregate:
            below.append(view.name)
            continue
        source = view_query(matcher, view.name).stream
        reads = [name for name in needed_views(matcher, [source]) if name in below]  # (the match views it needs)
        declared = source.lower() in {schema.name.lower() for schema in matcher.catalog.base_streams()}
        if declared and source.lower() not in {name.lower() for name in frames}:
            # a declared stream without a DataFrame has no tuples (the CLI's streams
            # without any): the view has no rows, as in the local engine
            frames[view.name] = no_rows(next(iter(frames.values())), view.schema.columns)
            made.append(view.name)
            continue
        step = flat(matcher, made, reads)
        step.register_query(view_query(matcher, view.name).text, query_id=view.name, source_name=f"<view {view.name}>")
        rows = aggregate(frames, step, partitions=partitions, span=span)
        frames[view.name] = aggregate_view_frame(rows, matcher, view.name)
        made.append(view.name)
    out = flat(matcher, made, below, table_texts(matcher))
    for rq in matcher.registry:
        if rq.name not in graph:
            out.register_query(rq.text, query_id=rq.name, source_name=f"<query {rq.name}>")
    for query in matcher.registrations.output_aggregates():  # (every level's, level by level)
        out.register_query(query.text, query_id=query.name, source_name=f"<query {query.name}>")
    return out, frames


def view_query(matcher: Matcher, name: str) -> AggregateQuery:
    """The aggregate query of aggregate view ``name`` (in its level's aggregator)."""
    for aggregator in matcher.registrations.aggregators():
        if name in aggregator.queries:
            return aggregator.queries[name].query
    raise KeyError(name)


def no_rows(like: DataFrame, columns: Any) -> DataFrame:
    """An empty stream DataFrame (``ts``, ``id``, ``columns``) in ``like``'s session."""
    types = ", ".join(f"{quoted(c.name)} {SQL_TYPES[c.ctype]}" for c in columns)
    return like.sparkSession.createDataFrame([], f"ts double, id bigint, {types}")


def flat(matcher: Matcher, made: list[str], views: list[str], tables: list[str] | None = None) -> Matcher:
    """A matcher of ``matcher``'s declared streams and settings with the aggregate views
    ``made`` declared as streams, the tables ``tables`` (``CREATE TABLE`` texts)
    declared and the match views ``views`` registered."""
    graph = matcher.registrations.views
    ddl = [matcher.catalog.ddl(), *(graph.get(name).schema.ddl() for name in made)]  # type: ignore[union-attr]
    out = Matcher("\n".join(ddl), config=matcher.config)
    if tables:
        out.register_queries(tables, "<tables>")
    for name in views:
        out.register_query(graph.get(name).text, query_id=name, source_name=f"<view {name}>")  # type: ignore[union-attr]
    return out


def aggregate_view_frame(rows: DataFrame, matcher: Matcher, name: str) -> DataFrame:
    """The aggregate stage's rows of view ``name`` (:func:`runtime.spark.aggregate.aggregate_schema`)
    as the view's stream: ``ts`` (the window's end), ``id`` (the local engine's), its
    columns. Computed once (a local checkpoint), since the ids need the number of
    rows per window end first: one small collect, a row per end."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    view = matcher.registrations.views.get(name)
    assert view is not None
    query = view_query(matcher, view.name)
    # a view's column k is its query's SELECT value k (mqo.views.aggregate_rows)
    columns = [
        F.col("values")[output].cast(SQL_TYPES[column.ctype]).alias(column.name)
        for (output, _), column in zip(query.outputs, view.schema.columns, strict=True)
    ]
    keys = [
        F.col("group")[g].cast(SQL_TYPES[t]).alias(f"_g{k}")
        for k, (g, t) in enumerate(zip(query.group_by, query.group_types, strict=True))
    ]
    typed = rows.where(F.col("query") == F.lit(view.name)).select(F.col("window_end").alias("ts"), *columns, *keys)
    typed = typed.localCheckpoint()
    offsets: list[tuple[float, int]] = []
    total = 0
    for row in typed.groupBy("ts").count().orderBy("ts").collect():
        offsets.append((float(row[0]), total))
        total += int(row[1])
    spark: Any = typed.sparkSession
    starts = spark.createDataFrame(offsets, "ts double, _o bigint")
    order = [F.col(f"_g{k}").asc_nulls_first() for k in range(len(keys))] or [F.lit(0)]
    rank = F.row_number().over(Window.partitionBy("ts").orderBy(*order)) - 1
    names = [column.name for column in view.schema.columns]
    return typed.join(F.broadcast(starts), "ts").select("ts", (F.col("_o") + rank).cast("bigint").alias("id"), *names)
