"""The plumbing the Spark stages share: the SQL types of the streams' columns, the one
unified row layout every stage shuffles (:func:`unify`), the match stages' grouping
columns (:func:`key_column`, :func:`time_buckets`) and result schema, each stream's
lateness and the never-late event-time column of the streaming stages, the rows a late
tuple and a refused command come out as, the pandas frames a state group yields, and
how a task reports the computed values it wrote as NULL (:func:`report_nulled`).

What belongs to the spec (the DDL, the queries, the settings, the layout) is in
:mod:`runtime.spark.spec`; what runs on the workers in :mod:`runtime.spark.worker`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mqo import Matcher, MatcherConfig, clock_for, within_64_bits
from predicates import ColumnType, did_you_mean
from runtime.spark.spec import SparkStageError, StageSpec, StreamLayout, type_family

if TYPE_CHECKING:
    import pandas as pd
    from pyspark import Accumulator
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructField, StructType

# a column's type in Spark SQL (a stream file's schema, a NULL of another stream's column)
SQL_TYPES = {
    ColumnType.INTEGER: "bigint",
    ColumnType.BYTE: "bigint",
    ColumnType.FLOAT: "double",
    ColumnType.STRING: "string",
    ColumnType.BOOLEAN: "boolean",
}
# the Spark type families a stream column of each type may be read from
_FAMILIES = {
    ColumnType.INTEGER: ("integral",),
    ColumnType.BYTE: ("integral",),
    ColumnType.FLOAT: ("integral", "fractional"),
    ColumnType.STRING: ("string",),
    ColumnType.BOOLEAN: ("boolean",),
}
# the streaming stages' state: one blob per group, written by mqo.snapshot_codec
STATE_SCHEMA = "blob binary"
NEVER_LATE = 7_000_000_000  # seconds: year 2191, after any watermark (pandas' timestamps end in 2262)


# ------------------------------------------------------------ stage arguments


def shuffle_partitions(frames: Mapping[str, DataFrame], given: int | None, name: str) -> int:
    """``given`` (a whole number >= 1, named ``name`` in the message), else the session's
    ``spark.sql.shuffle.partitions``."""
    if given is None:
        first = next(iter(frames.values()), None)
        if first is None:
            raise SparkStageError("no stream DataFrames given")
        return int(first.sparkSession.conf.get("spark.sql.shuffle.partitions") or 1)
    if isinstance(given, bool) or not isinstance(given, int) or given < 1:
        raise SparkStageError(f"{name} must be a whole number >= 1, got {given!r}")
    return given


def streaming_inputs(frames: Mapping[str, DataFrame], batch_stage: str) -> None:
    """Refuse a DataFrame that is not streaming (``batch_stage``: the stage for it)."""
    for name, df in frames.items():
        if not df.isStreaming:
            raise SparkStageError(f"stream {name}: not a streaming DataFrame; use {batch_stage}")


def stream_lateness(matcher: Matcher, allowed_lateness: float | None) -> dict[str, float]:
    """Every stream's lateness, as the matcher's clock takes it (its ``stream_lateness``
    over the DDL's ``ALLOWED LATENESS`` over ``allowed_lateness``, the argument when
    given, else the matcher's)."""
    if allowed_lateness is not None and (
        isinstance(allowed_lateness, bool)
        or not isinstance(allowed_lateness, (int, float))
        or not 0 <= allowed_lateness < math.inf
    ):
        raise SparkStageError(f"allowed_lateness must be a finite number of seconds >= 0, got {allowed_lateness!r}")
    config = MatcherConfig(
        allowed_lateness=matcher.allowed_lateness if allowed_lateness is None else allowed_lateness,
        stream_lateness=matcher.config.stream_lateness,
    )
    plan = matcher.ensure_plan()
    clock = clock_for(config, plan.streams[: plan.n_real])  # declared streams, not roles
    return {name: clock.lateness[k] for name, k in zip(clock.names, clock.lateness_of, strict=True)}


# ------------------------------------------------------- the unified row layout


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
        ts = typed_column(fields, name, "ts", "ts")
        exprs = [
            f"CAST({layout.number} AS INT) AS _s",
            f"{ts} AS ts",
            f"{typed_column(fields, name, 'id', 'id')} AS id",
        ]
        for other in spec.streams:
            for column, ctype, fname in zip(other.columns, other.types, other.fields, strict=True):
                if other.name == name:
                    exprs.append(f"{typed_column(fields, name, column, ctype)} AS {fname}")
                else:
                    exprs.append(f"CAST(NULL AS {SQL_TYPES[ctype]}) AS {fname}")
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


def typed_column(
    fields: Sequence[StructField], stream: str, column: str, ctype: ColumnType | str, kind: str = "stream"
) -> str:
    """A SQL expression: the DataFrame column (of ``fields``, its schema) cast to the
    unified type, or a clear error naming it (``kind``: what the DataFrame holds, a
    ``stream`` or a ``table``)."""
    names = {f.name.lower(): f for f in fields}
    f = names.get(column.lower())
    if f is None:
        raise SparkStageError(
            f"{kind} {stream}: the DataFrame has no column {column!r}"
            + did_you_mean(column, [x.name for x in fields])
            + f" (columns: {', '.join(x.name for x in fields)})"
        )
    if ctype == "ts":
        sql, families = "double", _FAMILIES[ColumnType.FLOAT]
    elif ctype == "id":
        sql, families = "bigint", _FAMILIES[ColumnType.INTEGER]
    else:
        assert isinstance(ctype, ColumnType)
        sql, families = SQL_TYPES[ctype], _FAMILIES[ctype]
    if type_family(f.dataType) not in families:
        declared = ctype if isinstance(ctype, str) else ctype.value
        raise SparkStageError(
            f"{kind} {stream}: column {f.name} is {declared} but the DataFrame has {f.dataType.simpleString()}"
        )
    return f"CAST({quoted(f.name)} AS {sql})"


def quoted(name: str) -> str:
    """A column name quoted for Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


def _double(value: float) -> str:
    """A SQL double literal (a plain ``80.0`` would be a DECIMAL)."""
    return f"{float(value)!r}D"


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


def numbers_as_text(frame: DataFrame, layouts: Sequence[StreamLayout], *, floats: bool = True) -> DataFrame:
    """Integer columns, and float ones when ``floats``, handed to pandas as text. Every
    stream's columns are NULL in the other streams' rows, and pandas holds a NULL number
    as a NaN double, which would round integers past 2**53 and confuse a NULL float with
    a NaN one, a difference aggregates see (COUNT(col) counts the NaN). Text
    round-trips exactly."""
    integers = (ColumnType.INTEGER, ColumnType.BYTE)
    as_text = {
        fname
        for layout in layouts
        for ctype, fname in zip(layout.types, layout.fields, strict=True)
        if ctype in integers or (floats and ctype.is_numeric)
    }
    if not as_text:
        return frame
    return frame.selectExpr(*(f"CAST({c} AS STRING) AS {c}" if c in as_text else c for c in frame.columns))


def never_late(frame: DataFrame) -> DataFrame:
    """``frame`` with its event-time column ``_et`` replaced by a constant that is never
    late. With an event-time timeout Spark drops the input rows older than the
    watermark before the group function sees them, judging by the column that carries
    the watermark; late tuples must be reported, so that column is swapped, after the
    watermarks are computed on the real event time, for this one."""
    from pyspark.sql import functions as F

    never = F.lit(NEVER_LATE).cast("timestamp").alias("_et", metadata={"spark.watermarkDelayMs": 0})
    return frame.select(*(c for c in frame.columns if c != "_et"), never)


# ---------------------------------------------- the match stages' grouping


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


def arranged(streams: Mapping[str, DataFrame], spec: StageSpec, n: int) -> DataFrame:
    """The streams' rows in ``n`` partitions as the spec partitions them, each sorted in
    the order its task matches them (runtime/spark/batch.py's module docstring): what
    :func:`runtime.spark.worker.match_partition` and ``view_partition`` read."""
    from pyspark.sql import functions as F

    unified = unify(streams, spec)
    if spec.mode == "key":
        keyed = unified.withColumn("_b", key_column(spec)).withColumn("_home", F.col("_b"))
        return keyed.repartition(n, "_b").sortWithinPartitions("ts", "_s", "id")
    bucketed = time_buckets(unified, spec)
    return bucketed.repartitionByRange(n, "_b").sortWithinPartitions("_b", "ts", "_s", "id")


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


def result_schema(spec: StageSpec) -> StructType:
    """The match stages' results: ``query string, ts double, ids map<string,bigint>``,
    then the value columns."""
    from pyspark.sql import types as T

    spark_types = {"double": T.DoubleType(), "int64": T.LongType(), "string": T.StringType(), "bool": T.BooleanType()}
    fields = [
        T.StructField("query", T.StringType()),
        T.StructField("ts", T.DoubleType()),
        T.StructField("ids", T.MapType(T.StringType(), T.LongType())),
    ]
    fields += [T.StructField(name, spark_types[t]) for name, t in spec.value_types]
    return T.StructType(fields)


# --------------------------------------------------- rows the groups put out


def late_row(stream: str, ts: float, ident: int, width: int, *, aggregate: bool = False) -> tuple[Any, ...]:
    """A late tuple as an output row of ``width`` columns, NULL past the ones that say
    which tuple it is: ``query`` NULL, then in a match stage's output ``ts`` and
    ``ids = {stream: id}``; in an aggregate stage's, ``window_start`` NULL, ``ts`` as
    ``window_end`` and ``group = {stream: id as text}`` (a map column of text, as a
    list of pairs)."""
    head: tuple[Any, ...] = (None, None, ts, [(stream, str(ident))]) if aggregate else (None, ts, {stream: ident})
    return head + (None,) * (width - len(head))


def gathered(frames: Iterable[pd.DataFrame]) -> pd.DataFrame | None:
    """A state group's input frames of one micro-batch as one (None: no rows)."""
    import pandas as pd

    parts = [f for f in frames if len(f)]
    if not parts:
        return None
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def column_values(series: pd.Series, ctype: ColumnType) -> list[Any]:
    """A column of a state group's rows as Python values, NULL as None: integers (and
    floats, where :func:`numbers_as_text` sent them as text) come back as numbers; a
    float column sent as doubles is taken as it is."""
    if ctype is ColumnType.FLOAT and series.dtype.kind == "f":
        return series.to_numpy(dtype=np.float64).tolist()
    values = series.tolist()
    if ctype in (ColumnType.INTEGER, ColumnType.BYTE):
        return [None if v is None or v != v else int(v) for v in values]
    if ctype is ColumnType.FLOAT:
        return [None if v is None else float(v) for v in values]
    return [None if v is None or (isinstance(v, float) and v != v) else v for v in values]


def stream_columns(rows: pd.DataFrame, layout: StreamLayout) -> dict[str, Any]:
    """One stream's columns of a state group's sorted rows, as ``push_batch`` takes
    them (see :func:`column_values`)."""
    data: dict[str, Any] = {
        "ts": rows["ts"].to_numpy(dtype=np.float64),
        "id": rows["id"].to_numpy(dtype=np.int64),
    }
    for column, ctype, fname in zip(layout.columns, layout.types, layout.fields, strict=True):
        data[column] = column_values(rows[fname], ctype)
    return data


def runs(keys: np.ndarray) -> list[tuple[int, int]]:
    """``(start, end)`` of every run of equal consecutive ``keys``."""
    if not len(keys):
        return []
    cut = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    starts = np.concatenate(([0], cut)).tolist()
    ends = np.concatenate((cut, [len(keys)])).tolist()
    return list(zip(starts, ends, strict=True))


def pandas_frame(rows: Sequence[tuple[Any, ...]], names: Sequence[str], doubles: Iterable[str]) -> pd.DataFrame:
    """Output rows (tuples in ``names`` order) as the pandas frame a state group
    yields: the ``doubles`` columns as float64 (NULL as NaN, which Spark reads back as
    NULL), the others as Python objects, as they are."""
    import pandas as pd

    floats = set(doubles)
    columns = list(zip(*rows, strict=True))
    return pd.DataFrame(
        {
            name: pd.Series(column, dtype="float64" if name in floats else object)
            for name, column in zip(names, columns, strict=True)
        }
    )


# ------------------------------------------------- values written as NULL

LOG = logging.getLogger("mqo.spark")


def fitted(values: Sequence[Any]) -> tuple[list[Any], list[int]]:
    """``values`` (of any types) with each integer past 64 bits None, and where those
    were: the local engine's rule (:func:`mqo.result_encoding.within_64_bits`) over the
    integers among them (a control stream's result values, an aggregate's column of
    Python values)."""
    at = [k for k, v in enumerate(values) if type(v) is int]
    kept, count = within_64_bits([values[k] for k in at])
    out = list(values)
    wide = [k for k, v in zip(at, kept, strict=True) if v is None] if count else []
    for k in wide:
        out[k] = None
    return out, wide


def report_nulled(nulled: Accumulator[int] | None, count: int, stage: str) -> None:
    """A task's (or state group's) computed values written as NULL (integers past 64
    bits, as the local engine writes them): ``count`` added to the stage's accumulator,
    if it was given one, and one warning in the worker's log (``mqo.spark``), which is
    what a caller without an accumulator sees."""
    if count:
        LOG.warning("mqo %s: %d computed value(s) past 64 bits written as NULL", stage, count)
        if nulled is not None:
            nulled.add(count)
