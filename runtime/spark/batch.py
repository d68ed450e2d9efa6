"""The matcher as a Spark batch stage: stream DataFrames in, a results DataFrame out.

>>> from runtime.spark.batch import match_batch
>>> results = match_batch({"B": blood_df, "H": heart_df}, queries_text, schema=ddl_text)

**Result schema** (:func:`result_schema`)::

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

The stage's spec is built on the driver (:mod:`runtime.spark.spec`); the plan is built
once per Python worker and cached there (:mod:`runtime.spark.worker`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from mqo import Matcher
from predicates import ColumnType, did_you_mean
from runtime.spark.spec import (
    SparkStageError,
    StageSpec,
    build_spec,
    ddl_from_frames,
    stage_matcher,
    type_family,
)
from runtime.spark.worker import match_partition

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructField, StructType

__all__ = ["SparkStageError", "ddl_from_frames", "match_batch", "result_schema", "time_buckets", "unify"]


# ------------------------------------------------------------ Spark plumbing


def result_schema(spec: StageSpec) -> StructType:
    """``query string, ts double, ids map<string,bigint>``, then the value columns."""
    from pyspark.sql import types as T

    spark_types = {"double": T.DoubleType(), "int64": T.LongType(), "string": T.StringType(), "bool": T.BooleanType()}
    fields = [
        T.StructField("query", T.StringType()),
        T.StructField("ts", T.DoubleType()),
        T.StructField("ids", T.MapType(T.StringType(), T.LongType())),
    ]
    fields += [T.StructField(name, spark_types[t]) for name, t in spec.value_types]
    return T.StructType(fields)


def _typed(fields: Sequence[StructField], stream: str, column: str, ctype: ColumnType | str) -> str:
    """A SQL expression: the DataFrame column (of ``fields``, its schema) cast to the
    unified type, or a clear error naming it."""
    names = {f.name.lower(): f for f in fields}
    f = names.get(column.lower())
    if f is None:
        raise SparkStageError(
            f"stream {stream}: the DataFrame has no column {column!r}"
            + did_you_mean(column, [x.name for x in fields])
            + f" (columns: {', '.join(x.name for x in fields)})"
        )
    family = type_family(f.dataType)
    want = {
        "ts": ("double", ("integral", "fractional")),
        "id": ("bigint", ("integral",)),
        ColumnType.INTEGER: ("bigint", ("integral",)),
        ColumnType.BYTE: ("bigint", ("integral",)),
        ColumnType.FLOAT: ("double", ("integral", "fractional")),
        ColumnType.STRING: ("string", ("string",)),
        ColumnType.BOOLEAN: ("boolean", ("boolean",)),
    }[ctype]
    if family not in want[1]:
        declared = ctype if isinstance(ctype, str) else ctype.value
        raise SparkStageError(
            f"stream {stream}: column {f.name} is {declared} but the DataFrame has {f.dataType.simpleString()}"
        )
    return f"CAST({_quoted(f.name)} AS {want[0]})"


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _double(value: float) -> str:
    """A SQL double literal (a plain ``80.0`` would be a DECIMAL)."""
    return f"{float(value)!r}D"


def unify(
    frames: Mapping[str, DataFrame],
    spec: StageSpec,
    *,
    require_id: bool = False,
    event_time: bool = False,
    watermarks: Mapping[str, float] | None = None,
) -> DataFrame:
    """All streams as one DataFrame of a common layout: ``_s`` (stream number), ``ts``,
    ``id``, then every stream's columns (NULL in other streams' rows); plus ``_et``,
    the event time as a timestamp, when ``event_time``, with a watermark per stream of
    its lateness in ``watermarks`` (seconds), set before the union.

    Built from SQL expression strings, one ``selectExpr`` per stream: each Column
    object would be a round trip to the JVM, and at a thousand of them that is a
    noticeable part of a small job.
    """
    if not frames:
        raise SparkStageError("no stream DataFrames given")
    known = [layout.name for layout in spec.streams]
    parts = []
    for name, df in frames.items():
        try:
            layout = spec.stream(name)
        except KeyError:
            raise SparkStageError(f"unknown stream {name!r}" + did_you_mean(name, known)) from None
        fields = df.schema.fields  # fetched once: every schema access is a round trip to the JVM
        if not any(f.name.lower() == "id" for f in fields):
            if require_id:
                raise SparkStageError(
                    f"stream {name}: a streaming DataFrame needs an 'id' column (a distributed stream has no "
                    "global arrival order to number tuples by)"
                )
            df = number_rows(df)
            fields = df.schema.fields
        ts = _typed(fields, name, "ts", "ts")
        exprs = [f"CAST({layout.number} AS INT) AS _s", f"{ts} AS ts", f"{_typed(fields, name, 'id', 'id')} AS id"]
        for other in spec.streams:
            for column, ctype, fname in zip(other.columns, other.types, other.fields, strict=True):
                if other.name == name:
                    exprs.append(f"{_typed(fields, name, column, ctype)} AS {fname}")
                else:
                    exprs.append(f"CAST(NULL AS {_SQL_TYPES[ctype]}) AS {fname}")
        if event_time:
            exprs.append(f"timestamp_seconds({ts}) AS _et")
        part = df.selectExpr(*exprs)
        if watermarks is not None:
            part = part.withWatermark("_et", f"{round(watermarks[name] * 1000)} milliseconds")
        parts.append(part)
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


_SQL_TYPES = {
    ColumnType.INTEGER: "bigint",
    ColumnType.BYTE: "bigint",
    ColumnType.FLOAT: "double",
    ColumnType.STRING: "string",
    ColumnType.BOOLEAN: "boolean",
}


def number_rows(df: DataFrame) -> DataFrame:
    """``df`` with ``id`` = 0, 1, 2... in row order (partition by partition), without
    pulling the rows anywhere: one job counts the rows of each partition."""
    from pyspark.sql import functions as F

    marked = df.withColumn("_pid", F.spark_partition_id()).withColumn("_mono", F.monotonically_increasing_id())
    counts = sorted((r[0], r[1]) for r in marked.groupBy("_pid").count().collect())
    offsets: list[Any] = []
    total = 0
    for pid, n in counts:
        offsets += [F.lit(pid), F.lit(total)]
        total += n
    if not offsets:
        return df.withColumn("id", F.lit(0).cast("bigint"))
    offset = F.element_at(F.create_map(*offsets), F.col("_pid"))
    local = F.col("_mono") - F.shiftleft(F.col("_pid").cast("bigint"), 33)
    return marked.withColumn("id", (offset + local).cast("bigint")).drop("_pid", "_mono")


def key_column(spec: StageSpec) -> Column:
    """A long hash of the equality key (numbers as doubles, -0.0 as 0.0, so equal
    values hash alike); rows without a key are spread by (stream, id)."""
    from pyspark.sql import functions as F

    key_of = dict(spec.key_columns)
    families = {_key_family(spec, s, c) for s, c in key_of.items()}
    numeric = families <= {"number"}
    expr = None
    for layout in spec.streams:
        column = key_of.get(layout.name)
        if column is None:
            continue
        fname = layout.fields[layout.columns.index(column)]
        value = F.col(fname)
        if numeric:
            value = value.cast("double")
            value = F.when(value == 0.0, F.lit(0.0)).otherwise(value)
        else:
            value = value.cast("string")
        branch = F.col("_s") == layout.number
        expr = F.when(branch, value) if expr is None else expr.when(branch, value)
    assert expr is not None
    return F.coalesce(F.xxhash64(expr), F.xxhash64(F.col("_s"), F.col("id")))


def _key_family(spec: StageSpec, stream: str, column: str) -> str:
    layout = spec.stream(stream)
    ctype = layout.types[layout.columns.index(column)]
    return "number" if ctype.is_numeric else ctype.value


def time_buckets(unified: DataFrame, spec: StageSpec) -> DataFrame:
    """Adds ``_home`` (the tuple's bucket) and ``_b`` (the bucket this copy goes to):
    one copy per tuple, more for a tuple within MAXWINDOW of its bucket's end (a result
    spans at most MAXWINDOW, lateness or not; the width's lateness margin is for the
    streaming stage, see :mod:`runtime.spark.streaming`)."""
    width, window = _double(spec.bucket_width), spec.max_window
    out = unified.selectExpr("*", f"CAST(FLOOR(ts / {width}) AS BIGINT) AS _home")
    if window <= 0:
        return out.selectExpr("*", "_home AS _b")
    w = _double(window)
    # Every bucket that may hold the last tuple of a result with this one: up to the
    # bucket of ts + MAXWINDOW, a little more (results are decided exactly on what
    # timestamps mean, and FLOOR(ts / width) in doubles can put a tuple one bucket
    # early, so a pair exactly MAXWINDOW apart can be three computed buckets wide).
    # The computed bucket is monotone in ts, so the last tuple's bucket is in range.
    reach = f"CAST(FLOOR((ts + {w} + (ABS(ts) + {w}) * 1e-12) / {width}) AS BIGINT)"
    return out.selectExpr("*", f"explode(sequence(_home, GREATEST(_home, {reach}))) AS _b")


# ------------------------------------------------------------- the batch stage


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
    by partition, each in order, as ``collect`` or a file write keeps it. See the
    module docstring for the schema and the semantics.
    """
    from pyspark.sql import functions as F

    if emit not in ("arrival", "ordered"):
        raise SparkStageError(f"emit must be arrival or ordered, got {emit!r}")
    matcher = stage_matcher(queries, schema, streams, order)
    # timestamp order: no tuple is late, so lateness does not widen the buckets
    spec = build_spec(matcher, partition_by=partition_by, bucket_width=bucket_width, allowed_lateness=0.0)
    spark = _session_of(streams)
    n = int(partitions or spark.conf.get("spark.sql.shuffle.partitions") or 1)
    if n < 1:
        raise SparkStageError(f"partitions must be >= 1, got {partitions}")
    unified = unify(streams, spec)
    if spec.mode == "key":
        keyed = unified.withColumn("_b", key_column(spec)).withColumn("_home", F.col("_b"))
        arranged = keyed.repartition(n, "_b").sortWithinPartitions("ts", "_s", "id")
    else:
        bucketed = time_buckets(unified, spec)
        arranged = bucketed.repartitionByRange(n, "_b").sortWithinPartitions("_b", "ts", "_s", "id")
    results = arranged.mapInArrow(partial(match_partition, spec), result_schema(spec))
    if emit == "ordered":
        # every result is final in a batch job (no tuple comes later): order is a sort
        results = results.orderBy("ts", "query", F.array_sort(F.map_entries("ids")))
    return results


def _session_of(frames: Mapping[str, DataFrame]) -> SparkSession:
    for df in frames.values():
        return df.sparkSession
    raise SparkStageError("no stream DataFrames given")
