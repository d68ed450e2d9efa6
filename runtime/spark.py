"""The matcher as a Spark batch stage: stream DataFrames in, a results DataFrame out.

>>> from runtime.spark import match_batch
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

The plan is built once per Python worker from the DDL, the query texts and the
settings (cached by their hash), not once per task; functions shipped to the workers
live in this module so that the cache is the worker's own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from mqo import Matcher, MqoError, QueryError
from mqo.batch import MatchBatch
from mqo.batch import value_types as batch_value_types
from mqo.results import Match
from predicates import Catalog, ColumnType, Kind
from predicates.errors import did_you_mean

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructField, StructType

PARTITION_MODES = ("auto", "time", "key")
DEFAULT_BUCKETS_PER_WINDOW = 4
RESERVED = ("query", "ts", "ids")
_OUT_ROWS = 8192


class SparkStageError(MqoError):
    """A stage that cannot run as asked (unknown stream, missing column, bad option)."""


# ------------------------------------------------------------------ the spec


@dataclass(frozen=True)
class StreamLayout:
    """One stream's place in the unified row layout the stage shuffles."""

    name: str
    number: int
    columns: tuple[str, ...]
    types: tuple[ColumnType, ...]
    fields: tuple[str, ...]  # the unified column name of each column


@dataclass(frozen=True)
class StageSpec:
    """Everything a worker needs to rebuild the plan and read the shuffled rows.

    Shipped with every task (it is small: the DDL and the query texts); ``fingerprint``
    keys the per-worker plan cache and guards streaming checkpoints against a restart
    with other queries.
    """

    ddl: str
    queries: tuple[tuple[str, str], ...]  # (id, text)
    settings: tuple[tuple[str, Any], ...]
    streams: tuple[StreamLayout, ...]
    value_types: tuple[tuple[str, str], ...]  # (name, Arrow type name)
    max_window: float
    mode: str  # "time" or "key"
    bucket_width: float
    key_columns: tuple[tuple[str, str], ...] = ()  # (stream, column) in key mode
    fingerprint: str = field(default="", compare=False)

    def stream(self, name: str) -> StreamLayout:
        for layout in self.streams:
            if layout.name == name:
                return layout
        raise KeyError(name)

    def arrow_value_types(self) -> dict[str, pa.DataType]:
        return {name: _ARROW_OF_NAME[t] for name, t in self.value_types}


_ARROW_OF_NAME = {"double": pa.float64(), "int64": pa.int64(), "string": pa.string(), "bool": pa.bool_()}


def _fingerprint(ddl: str, queries: Sequence[tuple[str, str]], settings: Sequence[tuple[str, Any]]) -> str:
    blob = json.dumps([ddl, list(queries), list(settings)], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _no_aggregates(matcher: Matcher) -> None:
    if matcher.aggregator is not None and len(matcher.aggregator):
        names = ", ".join(list(matcher.aggregator.queries)[:5])
        raise SparkStageError(
            f"aggregate queries ({names}) do not run in the Spark stages yet; run them with mqo match --engine local"
            " or Matcher.push_batch"
        )


def _source(
    queries: str | Sequence[str] | Matcher, schema: str | None, frames: Mapping[str, DataFrame], order: str | None
) -> Matcher:
    """A driver-side matcher holding the streams and queries (validates them here,
    with the usual located errors, before any Spark job runs)."""
    if isinstance(queries, Matcher):
        if schema is not None:
            raise SparkStageError("give schema= only with query texts; a Matcher brings its own streams")
        _no_aggregates(queries)
        if not len(queries.registry):
            raise SparkStageError("the matcher has no registered queries")
        return queries
    ddl = schema if schema is not None else ddl_from_frames(frames)
    matcher = Matcher(ddl) if order is None else Matcher(ddl, order=order)
    matcher.register_queries(queries)
    _no_aggregates(matcher)
    if not len(matcher.registry):
        raise SparkStageError("no queries given")
    return matcher


def build_spec(
    matcher: Matcher,
    *,
    partition_by: str = "auto",
    bucket_width: float | None = None,
    allowed_lateness: float | None = None,
    slots: int | None = None,
    stream_lateness: Mapping[str, float] | None = None,
    emit: str | None = None,
) -> StageSpec:
    """The stage spec for a matcher's streams and queries (``slots``: the streaming
    stage's number of state groups, part of what a checkpoint must agree with;
    ``stream_lateness``: every stream's lateness, for the streaming stage's per-stream
    watermarks; ``emit``: its emission)."""
    if partition_by not in PARTITION_MODES:
        raise SparkStageError(f"partition_by must be one of {', '.join(PARTITION_MODES)}, got {partition_by!r}")
    registry = matcher.registry
    for rq in registry:
        for name in output_names(rq):
            if name in RESERVED:
                raise SparkStageError(
                    f"query {rq.name}: the SELECT value name {name!r} clashes with the result column of that "
                    "name; rename it with AS"
                )
    lateness = matcher.allowed_lateness if allowed_lateness is None else float(allowed_lateness)
    if lateness < 0:
        raise SparkStageError("allowed_lateness must be >= 0")
    settings: tuple[tuple[str, Any], ...] = (
        ("allowed_lateness", lateness),
        ("order", matcher.order_name),
        ("max_disjuncts", matcher.max_disjuncts),
    )
    if slots is not None:
        settings += (("slots", int(slots)),)
    if stream_lateness is not None:
        settings += (("stream_lateness", tuple(sorted(stream_lateness.items()))),)
        lateness = max([lateness, *stream_lateness.values()])  # the widest reach back, for the buckets
    if emit is not None:
        settings += (("emit", emit),)
    queries = tuple((rq.name, rq.text) for rq in registry)
    ddl = matcher.catalog.ddl()
    window = registry.max_window()
    key = shared_equality_key(matcher)
    if partition_by == "key" and key is None:
        raise SparkStageError(
            "partition_by='key' needs every multi-stream query to join all of its streams with '=' on one "
            "column per stream (the same column across queries); these queries do not"
        )
    mode = "key" if key is not None and partition_by in ("auto", "key") else "time"
    span = window + lateness
    if bucket_width is None:
        width = DEFAULT_BUCKETS_PER_WINDOW * span if span > 0 else 1.0
    else:
        width = float(bucket_width)
        if not width > 0 or not math.isfinite(width):
            raise SparkStageError(f"bucket_width must be a positive number, got {bucket_width!r}")
        if width < span:
            raise SparkStageError(
                f"bucket_width {width:g} is smaller than the largest MAXWINDOW plus allowed lateness ({span:g} s); "
                "a result could then span more than two buckets"
            )
    layouts = []
    for number, schema in enumerate(matcher.catalog):
        names = tuple(c.name for c in schema.columns)
        layouts.append(
            StreamLayout(
                schema.name,
                number,
                names,
                tuple(c.ctype for c in schema.columns),
                tuple(f"_c{number}_{i}" for i in range(len(names))),
            )
        )
    types = tuple((name, _arrow_name(t)) for name, t in batch_value_types(registry).items())
    spec = StageSpec(
        ddl=ddl,
        queries=queries,
        settings=settings,
        streams=tuple(layouts),
        value_types=types,
        max_window=window,
        mode=mode,
        bucket_width=width,
        key_columns=tuple(sorted(key.items())) if mode == "key" and key else (),
    )
    return _with_fingerprint(spec)


def _with_fingerprint(spec: StageSpec) -> StageSpec:
    from dataclasses import replace

    return replace(spec, fingerprint=_fingerprint(spec.ddl, spec.queries, spec.settings))


def _arrow_name(dtype: pa.DataType) -> str:
    for name, t in _ARROW_OF_NAME.items():
        if t == dtype:
            return name
    raise SparkStageError(f"no Spark type for the value type {dtype}")


# ------------------------------------------------------- the shared equality key


def output_names(rq: Any) -> list[str]:
    """A registered query's SELECT value names (from its shape's shared context: the
    query's ``normalized`` form would compile it again)."""
    return [out.name for out in rq.context.bound.outputs]


def _key_pairs(rq: Any) -> list[list[tuple[Any, Any]]]:
    """Per disjunct, (list key, constant) of each indexed predicate."""
    return [list(preds) for preds, _ in rq.disjuncts]


def _is_key_equality(key: Any, constant: Any) -> bool:
    if key.kind is not Kind.JOIN or key.op != "=" or key.right is None:
        return False
    if key.factor is not None and key.factor != 1:
        return False
    return constant is None or constant == 0


def shared_equality_key(matcher: Matcher) -> dict[str, str] | None:
    """``{stream: column}`` such that every disjunct of every multi-stream query equates
    those columns across all of its streams (``B.pid = H.pid``, ``H.pid = T.pid``), or
    None. Partitioning by that value keeps every result in one partition."""
    disjuncts = []
    for rq in matcher.registry:
        if not rq.is_multi_stream:
            continue
        for pairs in _key_pairs(rq):
            disjuncts.append((set(rq.streams), [key for key, c in pairs if _is_key_equality(key, c)]))
    if not disjuncts:
        return None
    candidates: list[dict[str, str]] = [{}]
    for streams, keys in disjuncts:
        components = _components(keys)
        grown: list[dict[str, str]] = []
        for cand in candidates:
            for comp in components:
                if not streams <= set(comp):
                    continue
                if any(s in cand and cand[s] not in comp[s] for s in streams):
                    continue
                options = [[cand[s]] if s in cand else sorted(comp[s]) for s in sorted(streams)]
                for choice in _product(options):
                    extended = dict(cand)
                    extended.update(zip(sorted(streams), choice, strict=True))
                    if extended not in grown:
                        grown.append(extended)
        candidates = grown[:64]
        if not candidates:
            return None
    return candidates[0]


def _components(keys: Sequence[Any]) -> list[dict[str, set[str]]]:
    """Connected (stream, column) groups of the equality joins, as {stream: columns}."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for key in keys:
        a = (key.left.stream, key.left.column)
        b = (key.right.stream, key.right.column)
        parent[find(a)] = find(b)
    groups: dict[tuple[str, str], dict[str, set[str]]] = {}
    for node in list(parent):
        groups.setdefault(find(node), {}).setdefault(node[0], set()).add(node[1])
    return list(groups.values())


def _product(options: list[list[str]]) -> Iterator[tuple[str, ...]]:
    if not options:
        yield ()
        return
    for first in options[0]:
        for rest in _product(options[1:]):
            yield (first, *rest)


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
        # the stage's queries never change, so tuples no query can use need not be kept
        options: dict[str, Any] = {
            "order": settings["order"],
            "max_disjuncts": settings["max_disjuncts"],
            "store": "candidates",
        }
        ddl = spec.ddl
        if "stream_lateness" in settings:
            # the streaming stage: Spark's watermark is the matcher's, given by a
            # heartbeat in every micro-batch (runtime.spark_streaming, "Time")
            options.update(time="external", idle_timeout=None, emit=settings.get("emit", "arrival"))
        else:
            # a batch task gets its rows in ts order, late tuples already decided by the
            # driver: one clock purges by the newest ts, where a stream absent from a
            # partition would hold per-stream time back (and no lateness plays a part)
            options["time"] = "global"
            ddl = "\n".join(dataclasses.replace(s, lateness=None).ddl() for s in Catalog.from_ddl(ddl))
        m = Matcher(ddl, **options)
        names = [name for name, _ in spec.queries]
        try:
            bulk = m.register_queries([text for _, text in spec.queries], "<stage queries>") == names
        except QueryError:
            bulk = False
        if not bulk:
            # ids given at registration, or from positions in another registry: one by one
            m = Matcher(ddl, **options)
            for name, text in spec.queries:
                m.register_query(text, query_id=name, source_name=f"<query {name}>")
        m.plan  # noqa: B018 - compile now, once
        if len(_TEMPLATES) >= _TEMPLATES_KEPT:
            _TEMPLATES.pop(next(iter(_TEMPLATES)))
        _TEMPLATES[spec.fingerprint] = m
    return m


def spawn(spec: StageSpec, state: Mapping[str, Any] | None = None) -> Matcher:
    """A working matcher on the worker's cached plan: empty, or continuing from
    ``state`` (a :meth:`Matcher.snapshot` taken with ``queries=False``, see
    :func:`freeze`). Sharing the template's compiled plan is what lets a streaming
    group restore its window in every micro-batch without compiling the queries again."""
    base = template(spec)
    snapshot = base.snapshot(queries=False) if state is None else dict(state)
    snapshot.setdefault("counters", base.counters.__class__().as_dict())
    return Matcher.restore(snapshot, like=base)


def freeze(matcher: Matcher) -> dict[str, Any]:
    """The part of a snapshot that changes as tuples flow (clocks, ids, stored tuples);
    the queries are in the spec, so they are not stored per group."""
    snap = matcher.snapshot(queries=False)
    return {k: snap[k] for k in ("format", "settings", "clock", "seq", "next_ids", "state", "arrived", "held")}


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


_DDL_TYPES = {
    "ByteType": "INTEGER",
    "ShortType": "INTEGER",
    "IntegerType": "INTEGER",
    "LongType": "INTEGER",
    "FloatType": "FLOAT",
    "DoubleType": "FLOAT",
    "DecimalType": "FLOAT",
    "StringType": "STRING",
    "VarcharType": "STRING",
    "CharType": "STRING",
    "BooleanType": "BOOLEAN",
}


def ddl_from_frames(frames: Mapping[str, DataFrame]) -> str:
    """``REGISTER STREAM`` statements from the DataFrames' schemas (``ts`` and ``id``
    are implicit), for callers who give query texts without DDL."""
    statements = []
    for name, df in frames.items():
        cols = []
        for f in df.schema.fields:
            if f.name.lower() in ("ts", "id"):
                continue
            ddl_type = _DDL_TYPES.get(type(f.dataType).__name__)
            if ddl_type is None:
                raise SparkStageError(
                    f"stream {name}: column {f.name} has Spark type {f.dataType.simpleString()}, which mqo cannot "
                    "match; drop it or pass schema= with the DDL"
                )
            cols.append(f"{f.name} {ddl_type}")
        statements.append(f"REGISTER STREAM {name} ({', '.join(cols)});")
    return "\n".join(statements)


def _family(dtype: DataType) -> str:
    name = type(dtype).__name__
    if name in ("ByteType", "ShortType", "IntegerType", "LongType"):
        return "integral"
    if name in ("FloatType", "DoubleType", "DecimalType"):
        return "fractional"
    if name in ("StringType", "VarcharType", "CharType"):
        return "string"
    if name == "BooleanType":
        return "boolean"
    return "other"


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
    family = _family(f.dataType)
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
    streaming stage, see :mod:`runtime.spark_streaming`)."""
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
    matcher = _source(queries, schema, streams, order)
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


def match_partition(spec: StageSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
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
    """
    matcher = spawn(spec)  # before the first batch: the plan compiles while the rows arrive
    received = list(batches)
    if not received:  # an empty partition (more partitions than keys or buckets)
        return
    table = pa.Table.from_batches(received)
    if table.num_rows == 0:
        return
    s = table.column("_s").to_numpy().copy()  # renumbered below
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
    kept_owned = owned[order]
    found = MatchBatch(matcher.plan)
    types = spec.arrow_value_types()
    waiting = 0
    for j, blocks in matcher.replay(prepared, which, rows):
        if blocks and kept_owned[j]:
            found.blocks.extend(blocks)
            waiting += sum(len(block) for block in blocks)
            if waiting >= _OUT_ROWS:
                yield from found.to_arrow(types).to_batches()
                found = MatchBatch(matcher.plan)
                waiting = 0
    if waiting:
        yield from found.to_arrow(types).to_batches()


class Rows:
    """One Arrow batch of unified rows as Python columns, pushed run by run (the
    streaming stage's groups are small, so it pushes rather than replays).

    A run of one row (the usual case in timestamp order, where streams interleave) goes
    through :meth:`Matcher.push`, which costs a sixth of a one-row ``push_batch``;
    longer runs go through ``push_batch``. Both match as if pushed one by one.
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
