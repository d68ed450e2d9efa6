"""The rows of match views as Spark DataFrames: what an aggregate over a view reads
(:func:`runtime.spark.aggregate.aggregate_batch`) and what ``mqo match --engine spark
--output-view`` writes.

The rows are made by the batch match stage's tasks, partitioned and matched exactly as
:func:`runtime.spark.match_batch` matches (see its module docstring, "Views"): every
task runs the views over its tuples in ``(ts, stream, id)`` order, and keeps the rows
made by a tuple of its home bucket (a view row's ts is the ts of the tuple that makes
it, so it is owned as a result is). Each view's rows are then the rows the local
engine makes over the whole input, no more, no fewer.

**Order.** The local engine numbers a view's rows in the order it makes them: by the
tuple that makes them, in ``(ts, stream, id)`` order, then within one tuple in the
order its matcher makes them (generation by generation). A task records that tuple
(``_s``, ``_t``) and the row's number in the task (``_n``, in the order it made them),
so sorting a view's rows by ``(ts, _s, _t, _n)`` is the local engine's order:

* :func:`view_frames` gives each row as ``id`` its rank among the view's rows of the
  same ``ts`` (a window per ts value, so nothing goes through one task): an aggregate
  task sorts its rows by ``(ts, id)``, which is then the local engine's arrival order,
  the one count windows (``ROWS n``) number rows in;
* :func:`numbered` gives the rows collected on a driver the local engine's ids
  themselves (0, 1, 2, ... in that order), as ``--output-view`` writes them.

The match work is done once per DataFrame action: an aggregate over two views reads
the stage's output twice, and Spark runs it once per read (nothing is cached behind
the caller's back).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from mqo import ARROW_TYPES, Matcher
from runtime.spark.common import arranged
from runtime.spark.spec import SparkStageError, build_spec
from runtime.spark.worker import ViewLayout, view_partition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = ["needed_views", "numbered", "view_frames", "view_rows", "views_as_streams", "views_matcher"]


def needed_views(matcher: Matcher, read: Iterable[str]) -> list[str]:
    """The views among ``read`` (stream names) with every view they read in turn, in
    registration order (a view's inputs come before it)."""
    graph = matcher.registrations.views
    wanted: set[str] = set()
    stack = [name for name in read if name in graph]
    while stack:
        view = graph.get(stack.pop())
        assert view is not None
        if view.name.lower() not in wanted:
            wanted.add(view.name.lower())
            stack += [r for r in view.reads if r in graph]
    return [view.name for view in graph if view.name.lower() in wanted]


def views_matcher(matcher: Matcher, names: list[str]) -> Matcher:
    """A matcher of ``matcher``'s declared streams and settings holding only the views
    ``names`` (in the order given: registration order), each registered by its
    ``CREATE VIEW``. A view reading a table is refused: the view-rows stage takes no
    table rows."""
    graph = matcher.registrations.views
    source = Matcher(matcher.catalog.ddl(), config=matcher.config)
    for name in names:
        view = graph.get(name)
        assert view is not None
        tables = [r for r in view.reads if (s := matcher.catalog.get(r)) is not None and s.table_key]
        if tables:
            raise SparkStageError(
                f"view {view.name} reads table {tables[0]}: on Spark its rows are made only inside the match "
                "stage, so an aggregate over it and --output-view do not run there; use --engine local "
                "(Matcher.push_batch)"
            )
        source.register_query(view.text, query_id=view.name, source_name=f"<view {view.name}>")
    return source


def views_as_streams(matcher: Matcher, names: list[str]) -> str:
    """DDL of the declared streams and of the views ``names`` as plain streams (what an
    aggregate stage over the views' rows registers its queries against)."""
    graph = matcher.registrations.views
    schemas = [graph.get(name).schema for name in names]  # type: ignore[union-attr]
    return "\n".join([matcher.catalog.ddl(), *(schema.ddl() for schema in schemas)])


def layout_of(matcher: Matcher, names: list[str]) -> ViewLayout:
    """The view-rows stage's output layout for the views ``names`` of ``matcher``."""
    graph = matcher.registrations.views
    views = []
    for name in names:
        schema = graph.get(name).schema  # type: ignore[union-attr]
        views.append((schema.name, schema.column_names, tuple(ARROW_TYPES[c.ctype] for c in schema.columns)))
    return ViewLayout(views)


def view_rows(
    streams: Mapping[str, DataFrame],
    matcher: Matcher,
    names: list[str],
    *,
    partitions: int,
    partition_by: str = "auto",
    bucket_width: float | None = None,
) -> tuple[DataFrame, ViewLayout]:
    """The rows of the views ``names`` that ``matcher``'s views (match views only, from
    :func:`views_matcher`) make over the stream DataFrames, in the stage's layout
    (:class:`runtime.spark.worker.ViewLayout`), and that layout."""
    spec = build_spec(matcher, partition_by=partition_by, bucket_width=bucket_width, allowed_lateness=0.0)
    layout = layout_of(matcher, names)
    given = {name: df for name, df in streams.items() if matcher.catalog.get(name) is not None}
    if not given:
        raise SparkStageError(f"the views {', '.join(names)} read streams none of which is given")
    rows = arranged(given, spec, partitions).mapInArrow(partial(view_partition, spec, layout), spark_schema(layout))
    return rows, layout


def spark_schema(layout: ViewLayout) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(layout.schema)


def view_frames(rows: DataFrame, layout: ViewLayout) -> dict[str, DataFrame]:
    """Each view's rows as a stream DataFrame (``ts``, ``id``, its columns): ``id`` the
    row's rank among the view's rows of its ``ts`` (module docstring, "Order")."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    out = {}
    rank = F.row_number().over(Window.partitionBy("ts").orderBy("_s", "_t", "_n")) - 1
    for k, (name, columns, _) in enumerate(layout.views):
        mine = rows.where(F.col("view") == F.lit(name))
        picked = [F.col(f"_v{k}_{i}").alias(column) for i, column in enumerate(columns)]
        out[name] = mine.select("ts", rank.cast("bigint").alias("id"), *picked)
    return out


def numbered(table: pa.Table, layout: ViewLayout) -> dict[str, list[tuple[float, int, dict[str, Any]]]]:
    """The view-rows stage's output collected on the driver as each view's rows (ts, id,
    values) in the order the local engine makes them, with its ids (0, 1, 2, ...)."""
    out: dict[str, list[tuple[float, int, dict[str, Any]]]] = {}
    view = table.column("view").to_pylist()
    keys = [table.column(c).to_numpy(zero_copy_only=False) for c in ("_n", "_t", "_s", "ts")]
    order = np.lexsort(keys)  # by ts, then the making tuple's stream and id, then the task's order
    for k, (name, columns, _) in enumerate(layout.views):
        values = [table.column(f"_v{k}_{i}").to_pylist() for i in range(len(columns))]
        ts = table.column("ts").to_pylist()
        rows = []
        for r in order.tolist():
            if view[r] == name:
                rows.append((ts[r], len(rows), {c: v[r] for c, v in zip(columns, values, strict=True)}))
        out[name] = rows
    return out
