"""The matcher as a Spark batch stage: stream DataFrames in, a results DataFrame out.

>>> from runtime.spark.batch import match_batch
>>> results = match_batch({"B": blood_df, "H": heart_df}, queries_text, schema=ddl_text)

**Result schema** (:func:`runtime.spark.common.result_schema`)::

    query string, ts double, ids map<string,bigint>, <one column per SELECT value name>

``ts`` is the result's largest timestamp, ``ids`` maps each alias of the query's FROM
clause to its tuple's id, and the value columns are the union of every query's SELECT
names (NULL where a query has no such value), typed as :func:`mqo.batch.value_types`
says; this is the layout of :meth:`mqo.batch.MatchBatch.to_arrow`.

**Semantics: timestamp order.** DataFrames have no arrival order, so the stage matches
as if every tuple arrived in ``(ts, stream, id)`` order (``stream`` in the order of the
DDL). In that order no tuple is ever late, so ``allowed_lateness`` plays no part in a
batch job. Each stream DataFrame needs ``ts`` (a number) and the stream's declared
columns (extra columns are ignored); ``id`` is taken from an ``id`` column if there is
one, else numbered 0, 1, 2... in the DataFrame's row order, as the local engine numbers
tuples in arrival order (that needs a deterministic input such as a file read).

**Partitioning keeps results exact.** Each Spark task runs one ordinary
:class:`mqo.Matcher` over the rows it is given, in timestamp order; what is partitioned
is chosen so that every result has all of its tuples in one task:

* **equality key** (``partition_by="key"``, chosen by ``"auto"`` when it applies): if
  every query joins all of its streams with ``=`` on one column per stream (a patient
  or device id), tuples are hash-partitioned by that value. A result's tuples share the
  key, so nothing is replicated (factor 1).
* **time buckets** (``partition_by="time"``): bucket ``k`` holds the tuples with
  ``floor(ts / B) = k``, for a width ``B`` >= the largest MAXWINDOW ``W``. A tuple with
  ``ts >= (k + 1) * B - W`` is also sent to bucket ``k + 1``, since a result of that
  bucket may reach back that far. Results are reported only by the bucket that owns
  their ``ts`` (the latest member's), so none is lost or reported twice. Buckets are
  range-partitioned, so a task gets consecutive buckets and runs one matcher through
  them, skipping copies it has already matched.

**Replication and skew.** With time buckets a fraction ``W / B`` of the tuples (for
evenly spread timestamps) is shuffled twice: replication factor ``1 + W / B``. A larger
``B`` replicates less but gives fewer buckets to spread over tasks; the default
``B = 4 W`` ships 1.25x the input. A bucket is never split, so a burst of tuples in one
bucket (time skew), or one hot key in key mode, is one task's sequential work and
bounds the stage's wall time. See ``docs/spark.md``.

**Tables.** A query reading a table (``CREATE TABLE``) joins each result with the
table as of the result's ts, as the local engine does. A table's rows come as a
DataFrame, ``tables={"patients": df}`` (the table's columns, an optional ``ts``: the
event time from which a row's version holds, NULL for from the start, an optional
``op``: ``upsert`` or ``delete``), or from a :class:`mqo.Matcher` given as ``queries``
that holds rows (``upsert_rows``, ``delete_rows``). Tables are reference data: they
are collected on the driver and go to every task with the spec, so they must fit in
memory there (``max_table_rows``, default 100,000, refuses a larger DataFrame with an
error before collecting it). Every task holds the whole table, so results do not
depend on the partitioning. See :mod:`runtime.spark.tables`.

**Views.** Match views (``CREATE VIEW v AS SELECT ... FROM ...``, :mod:`mqo.views`)
run in every task's matcher as in the local engine: a view's rows are made from the
task's tuples and matched against the queries reading it there.

With the **equality key**, a view's row is made in the task holding its members (a
multi-stream view joins them on the key). A query joining the view on the key finds
it there only if the view's key column is its members' key column (``SELECT b.pid AS
pid``): :func:`runtime.spark.spec.view_key_fault` checks that of every view a query
joins on the key; when one fails, ``partition_by="key"`` is refused naming it and
``"auto"`` picks time buckets. Nothing is replicated, so nothing is doubled.

With **time buckets**, the margin ``W`` a bucket receives before it is the longest
chain of windows through the view graph (:func:`runtime.spark.spec.view_margin`): a
result at ``t`` rests on view rows within its MAXWINDOW before ``t``, each on its
members within the view's MAXWINDOW before it, and so on down to the declared
streams' tuples. So:

* *nothing lost*: every tuple a result owned by bucket ``k`` rests on, through any
  chain of views, has ``ts >= t - W >= kB - W`` and is in the task (original or
  margin copy); matching in ``(ts, stream, id)`` order, the task makes every view row
  the result needs (a view row's ts is its newest member's, so it is made when that
  member arrives, before any later tuple) and then the result itself.
* *nothing doubled*: everything a tuple finds, view rows and the results they make
  in turn, has that tuple's ts (nothing later is in the matcher yet), so a result is
  reported exactly when the tuple that finds it is in its home bucket; view rows made
  from margin copies are fed to their readers (they are context) but what they find
  is reported by the bucket that owns its ts. Ties at a bucket edge go by ``ts``
  alone (``floor(ts / B)``), as for any result.
* *nothing invented* (either partitioning): a task holds a subset of the tuples, so
  each view row and result it makes is one the whole input makes.

A view member's id in ``ids`` numbers the view's rows in the task that made it (the
local engine numbers them over the whole input; a task cannot know how many rows
came before its bucket), so compare view members by value. Aggregate views run here
too: their rows are made first (:mod:`runtime.spark.aggregate_views`) and read as a
declared stream's, their ids the local engine's. The streaming match stage runs match
views the same way (:mod:`runtime.spark.streaming`, "Views").

The stage's spec is built on the driver (:mod:`runtime.spark.spec`), the rows laid out
and grouped by the plumbing the stages share (:mod:`runtime.spark.common`); the plan is
built once per Python worker and cached there (:mod:`runtime.spark.worker`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from mqo import Matcher
from runtime.spark.aggregate import aggregate_batch
from runtime.spark.aggregate_views import materialize
from runtime.spark.common import arranged, result_schema, shuffle_partitions
from runtime.spark.spec import SparkStageError, build_spec, stage_matcher
from runtime.spark.tables import DEFAULT_MAX_TABLE_ROWS, stage_tables
from runtime.spark.worker import match_partition

if TYPE_CHECKING:
    from pyspark import Accumulator
    from pyspark.sql import DataFrame

__all__ = ["match_batch"]


def match_batch(
    streams: Mapping[str, DataFrame],
    queries: str | Sequence[str] | Matcher,
    *,
    schema: str | None = None,
    partitions: int | None = None,
    partition_by: str = "auto",
    bucket_width: float | None = None,
    order: str | None = None,
    emit: str = "arrival",
    tables: Mapping[str, DataFrame] | None = None,
    max_table_rows: int = DEFAULT_MAX_TABLE_ROWS,
    nulled: Accumulator[int] | None = None,
) -> DataFrame:
    """Match stream DataFrames against the queries; a DataFrame of results.

    ``streams`` maps stream names to DataFrames; ``queries`` is query text (one string
    with many queries, or a list of texts) with ``schema`` the DDL (derived from the
    DataFrames when omitted), or a :class:`mqo.Matcher` whose streams, queries and
    settings are used. ``partitions`` defaults to ``spark.sql.shuffle.partitions``;
    ``partition_by`` is ``"auto"`` (equality key when every query has one, else
    time buckets), ``"key"`` or ``"time"``; ``bucket_width`` defaults to four times the
    largest MAXWINDOW. ``emit="ordered"`` sorts the results by ``ts`` (ties: by query
    id, then by the ids as sorted (alias, id) pairs) into one total order: partition
    by partition, each in order, as ``collect`` or a file write keeps it. ``tables``
    maps table names to DataFrames of their rows, each collected on the driver (at most
    ``max_table_rows`` rows). See the module docstring for the schema and the semantics.

    A SELECT value past 64 bits (INTEGER arithmetic that overflows) is NULL, as the
    local engine writes it; ``nulled``: an accumulator (``spark.sparkContext.accumulator(0)``)
    the tasks add how many such values they made to, read with ``.value`` after an action
    (a retried task may count twice, as with any accumulator). Each such task also logs
    one warning (logger ``mqo.spark``).
    """
    from pyspark.sql import functions as F

    if emit not in ("arrival", "ordered"):
        raise SparkStageError(f"emit must be arrival or ordered, got {emit!r}")
    matcher = stage_matcher(queries, schema, streams, order, views=True)
    reference = stage_tables(matcher, tables, max_table_rows, streams)  # (the caller's matcher holds the rows)
    if matcher.registrations.views.aggregating:  # their rows first, then streams like any (aggregate_views)
        n = shuffle_partitions(streams, partitions, "partitions")
        matcher, streams = materialize(streams, matcher, aggregate_batch, n)
    # timestamp order: no tuple is late, so lateness does not widen the buckets
    spec = build_spec(
        matcher, partition_by=partition_by, bucket_width=bucket_width, allowed_lateness=0.0, tables=reference
    )
    n = shuffle_partitions(streams, partitions, "partitions")
    results = arranged(streams, spec, n).mapInArrow(partial(match_partition, spec, nulled=nulled), result_schema(spec))
    if emit == "ordered":
        # every result is final in a batch job (no tuple comes later): order is a sort
        results = results.orderBy("ts", "query", F.array_sort(F.map_entries("ids")))
    return results
