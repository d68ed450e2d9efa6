"""The Spark stages' spec: what every task needs to rebuild the plan and read the
shuffled rows (the DDL, the query texts, the settings, the unified row layout, the
partitioning), built and validated on the driver.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from mqo import Catalog, Matcher, MqoError, SnapshotError, decode_snapshot, encode_snapshot, shared_equality_key
from predicates import ColumnRef, ColumnType
from predicates.catalog import split_role
from predicates.normalize import ColumnKey

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType

PARTITION_MODES = ("auto", "time", "key")
DEFAULT_BUCKETS_PER_WINDOW = 4
RESERVED = ("query", "ts", "ids")


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

    Shipped with every task (it is small: the DDL, the query texts and the tables'
    rows, which are reference data: :mod:`runtime.spark.tables`); ``fingerprint`` keys
    the per-worker plan cache and guards streaming checkpoints against a restart with
    other queries or table rows.
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
    # the tables' CREATE TABLE texts and every version, as a snapshot holds them
    # (``reference_tables``: runtime.spark.tables); None without tables
    tables: Mapping[str, Any] | None = None
    fingerprint: str = field(default="", compare=False)

    def stream(self, name: str) -> StreamLayout:
        for layout in self.streams:
            if layout.name == name:
                return layout
        raise KeyError(name)

    def arrow_value_types(self) -> dict[str, pa.DataType]:
        return {name: _ARROW_OF_NAME[t] for name, t in self.value_types}


_ARROW_OF_NAME = {"double": pa.float64(), "int64": pa.int64(), "string": pa.string(), "bool": pa.bool_()}


def _fingerprint(
    ddl: str,
    queries: Sequence[tuple[str, str]],
    settings: Sequence[tuple[str, Any]],
    tables: Mapping[str, Any] | None = None,
) -> str:
    blob = json.dumps([ddl, list(queries), list(settings), tables], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


KINDS = ("match", "aggregate")


def only_kind(matcher: Matcher, kind: str) -> None:
    """Refuse a matcher holding queries of the other kind than the stage runs."""
    views = matcher.registrations.views
    # (an aggregate view makes rows other queries read: runtime.spark.aggregate_views)
    aggregates = [name for name in (matcher.aggregator.queries if matcher.aggregator else ()) if name not in views]
    if kind == "match" and aggregates:
        names = ", ".join(aggregates[:5])
        raise SparkStageError(
            f"aggregate queries ({names}) do not run in the match stages; run them with "
            "runtime.spark.aggregate.aggregate_batch (batch), runtime.spark.aggregate_streaming.aggregate_stream "
            "(streaming), mqo match --engine local or Matcher.push_batch"
        )
    plain = [rq.name for rq in matcher.registry if rq.name not in views]  # (a match view makes rows to aggregate)
    if kind == "aggregate" and plain:
        raise SparkStageError(
            f"match queries ({', '.join(plain[:5])}) go to runtime.spark.match_batch or match_stream; give "
            "aggregate queries (and the match views they read) only"
        )


def stage_matcher(
    queries: str | Sequence[str] | Matcher,
    schema: str | None,
    frames: Mapping[str, DataFrame],
    order: str | None,
    *,
    may_be_empty: bool = False,
    kind: str = "match",
    views: bool | str = False,
) -> Matcher:
    """A driver-side matcher holding the streams and queries of a stage of ``kind``
    (``match`` or ``aggregate``; it validates them here, with the usual located
    errors, before any Spark job runs). ``may_be_empty``: no queries is fine (they
    come later, through a control stream). Every stage takes its matcher from here,
    so every stage refuses an empty ``frames`` alike. ``views``: True, the stage runs
    views (the batch stages: :func:`view_margin`, :mod:`runtime.spark.aggregate_views`);
    ``"match"``, match views only (the streaming match stage); else a view is refused."""
    if kind not in KINDS:
        raise SparkStageError(f"internal error: a stage of unknown kind {kind!r}")
    if isinstance(queries, Matcher):
        if schema is not None:
            raise SparkStageError("give schema= only with query texts; a Matcher brings its own streams")
        matcher = queries
    else:
        ddl = schema if schema is not None else ddl_from_frames(frames)
        matcher = Matcher(ddl) if order is None else Matcher(ddl, order=order)
        matcher.register_queries(queries)
    if matcher.views:  # (before only_kind: an aggregate view is an aggregate query too)
        check_views(matcher, views, kind)
    only_kind(matcher, kind)
    if matcher.tables and kind == "aggregate":
        # (an aggregate query cannot read a table: tables belong to the match stages)
        raise SparkStageError(
            f"the Spark aggregate stages take no tables (table {matcher.tables[0]}): an aggregate query cannot "
            "read one; give the match queries reading it to runtime.spark.match_batch or match_stream"
        )
    count = len(matcher.registry) if kind == "match" else len(matcher.aggregator or ())
    if not count and not may_be_empty:
        what = "queries" if kind == "match" else "aggregate queries"
        raise SparkStageError(
            f"the matcher has no registered {what}" if isinstance(queries, Matcher) else f"no {what} given"
        )
    if not frames:  # after the queries' own errors, which say more
        raise SparkStageError("no stream DataFrames given")
    return matcher


def build_spec(
    matcher: Matcher,
    *,
    partition_by: str = "auto",
    bucket_width: float | None = None,
    allowed_lateness: float | None = None,
    slots: int | None = None,
    max_window: float | None = None,
    stream_lateness: Mapping[str, float] | None = None,
    emit: str | None = None,
    tables: Mapping[str, Any] | None = None,
) -> StageSpec:
    """The stage spec for a matcher's streams and queries (``tables``: the tables' rows
    from :func:`runtime.spark.tables.stage_tables`; ``slots``: the streaming
    stage's number of state groups, part of what a checkpoint must agree with;
    ``stream_lateness``: every stream's lateness, for the streaming stage's per-stream
    watermarks; ``emit``: its emission).

    ``max_window``: the largest MAXWINDOW any query may have, for a stage whose
    queries come and go (:mod:`runtime.spark.control`): buckets are cut for it, every
    group keeps that much window, and tuples no query wants yet are kept too."""
    if partition_by not in PARTITION_MODES:
        raise SparkStageError(f"partition_by must be one of {', '.join(PARTITION_MODES)}, got {partition_by!r}")
    registry = matcher.registry
    graph = matcher.registrations.views
    for rq in registry:
        if rq.name in graph:  # (a view's columns are a stream's, not result columns)
            continue
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
        ("order", matcher.config.order),
        ("max_disjuncts", matcher.config.max_disjuncts),
    )
    if slots is not None:
        settings += (("slots", int(slots)),)
    if stream_lateness is not None:
        settings += (("stream_lateness", tuple(sorted(stream_lateness.items()))),)
        lateness = max([lateness, *stream_lateness.values()])  # the widest reach back, for the buckets
    if emit is not None:
        settings += (("emit", emit),)
    # a view goes as its CREATE VIEW (its query's own text would register a plain query)
    queries = tuple((rq.name, graph.get(rq.name).text if rq.name in graph else rq.text) for rq in registry)  # type: ignore[union-attr]
    ddl = matcher.catalog.ddl()
    window = view_margin(matcher)
    if max_window is not None:
        if window > max_window:
            raise SparkStageError(f"a query's MAXWINDOW ({window:g} s) is larger than max_window ({max_window:g} s)")
        window = float(max_window)
        settings += (("store", "all"), ("keep_window", window))
        if partition_by == "key":
            raise SparkStageError("queries that come and go need partition_by='time' (or 'auto')")
        partition_by = "time"
    key = shared_equality_key(matcher.registry)
    fault = view_key_fault(matcher, key) if graph and key is not None else None
    if fault is not None:
        if partition_by == "key":
            raise SparkStageError(
                f"partition_by='key' cannot run view {fault}: its key column {key[fault]} (read by queries "  # type: ignore[index]
                "joining it on the key) is not its members' key column, so its rows would be made apart from the "
                "tuples they join; use partition_by='time' (or 'auto')"
            )
        key = None  # time buckets (view_margin)
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
                f"bucket_width {width:g} is smaller than the largest MAXWINDOW (through views: their sum along the "
                f"view graph) plus allowed lateness ({span:g} s); "
                "a result could then span more than two buckets"
            )
    layouts = []
    # the streams the stage shuffles: not the tables, whose rows go with the spec
    for number, schema in enumerate(matcher.catalog.base_streams()):
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
    types = tuple((name, _arrow_name(t)) for name, t in matcher.value_types().items())
    spec = StageSpec(
        ddl=ddl,
        queries=queries,
        settings=settings,
        streams=tuple(layouts),
        value_types=types,
        max_window=window,
        mode=mode,
        bucket_width=width,
        # (the declared streams' keys: a view's rows are made in the tasks, never shuffled)
        key_columns=tuple(sorted((s, c) for s, c in key.items() if s in {layout.name for layout in layouts}))
        if mode == "key" and key
        else (),
        tables=tables,
    )
    return with_fingerprint(spec)


def check_views(matcher: Matcher, runs_views: bool | str, kind: str = "match") -> None:
    """Refuse the matcher's views unless the stage runs them (``runs_views``: True for
    the batch stages; ``"match"`` for the streaming match stage, which runs match views
    in its state groups but cannot make an aggregate view's rows). A stage of ``kind``
    ``aggregate`` (and ``--output-view``) also refuses a match view over an aggregate
    view (:func:`over_aggregates`): it needs that view's rows in the local engine's
    order, which numbers the match-view rows of one emission's aggregate rows together
    where a stage makes them one aggregate row at a time; the match stage runs it (a
    match view's row ids are its tasks' there anyway)."""
    graph = matcher.registrations.views
    if not runs_views:
        raise SparkStageError(
            f"the Spark streaming aggregate stages do not run views (view {matcher.views[0]}); run them with "
            "runtime.spark.aggregate_batch (batch) or locally"
        )
    if runs_views == "match":
        aggregate = next((view for view in graph if view.aggregate), None)
        if aggregate is not None:
            raise SparkStageError(
                f"aggregate view {aggregate.name} does not run in the Spark streaming stages (its rows leave "
                "behind the watermark, from a stage of their own); run it with runtime.spark.match_batch or "
                "aggregate_batch (batch) or locally"
            )
    reader = view_id_reader(matcher)
    if reader is not None:
        query, view = reader
        raise SparkStageError(
            f"query {query} reads the id of match view {view}: on Spark a match view's row ids number its rows "
            "within the task (or per ts) that made them, not over the whole input as the local engine does, so "
            "results would differ; read the view's value columns instead, or run it locally"
        )
    if kind == "aggregate":
        for view, read in over_aggregates(matcher).items():
            raise SparkStageError(
                f"view {view} is a match view reading aggregate view {read}: the Spark aggregate stages and "
                "--output-view do not run that (the match stage runs its readers); run it locally (mqo match "
                "--engine local, Matcher.push_batch)"
            )


def view_id_reader(matcher: Matcher) -> tuple[str, str] | None:
    """The first query (or view) whose predicates or SELECT read the ``id`` of a match
    view, and that view; None when none does. (The ids in a result's ``ids`` differ
    alike, and are documented so: a value read from one would change which results
    there are.)"""
    match_views = {view.name.lower(): view.name for view in matcher.registrations.views if not view.aggregate}
    if not match_views:
        return None
    for rq in matcher.registry:
        nodes: list[Any] = [out.expr for out in rq.context.bound.outputs]
        for preds, residuals in rq.disjuncts:
            nodes += [r.comparison for r in residuals]
            for key, _ in preds:
                nodes += [column for column in (key.left, key.right) if column is not None]
        found = _id_of(nodes, match_views)
        if found is not None:
            return rq.name, found
    for aq in matcher.aggregator.queries.values() if matcher.aggregator is not None else ():
        q = aq.query
        view = match_views.get(q.stream.lower())
        if view is None:
            continue
        columns = [c.column for c in q.calls] + list(q.group_by)
        nodes = [expr for _, expr in q.outputs] + [q.having, q.where.bound.condition]
        if "id" in columns or _id_of(nodes, match_views) is not None:
            return q.name, view
    return None


def _id_of(nodes: list[Any], views: Mapping[str, str]) -> str | None:
    """The view among ``views`` whose ``id`` column an expression, condition or
    column key of ``nodes`` reads (a self-join's role read as its stream)."""
    while nodes:
        node = nodes.pop()
        if node is None:
            continue
        if isinstance(node, (ColumnRef, ColumnKey)):
            name, stream = (node.name, node.stream) if isinstance(node, ColumnRef) else (node.column, node.stream)
            view = views.get(split_role(stream or "")[0].lower())
            if name == "id" and view is not None:
                return view
        elif dataclasses.is_dataclass(node):
            for f in dataclasses.fields(node):
                value = getattr(node, f.name)
                nodes.extend(value if isinstance(value, tuple) else [value])
    return None


def over_aggregates(matcher: Matcher) -> dict[str, str]:
    """The match views that read an aggregate view, directly or through other match
    views: {view: the aggregate view}."""
    graph = matcher.registrations.views
    found: dict[str, str] = {}
    for view in graph:  # registration order: a view's inputs come before it
        if view.aggregate:
            continue
        for r in view.reads:
            read = graph.get(r)
            if read is not None and (read.aggregate or read.name in found):
                found[view.name] = read.name if read.aggregate else found[read.name]
                break
    return found


def view_key_fault(matcher: Matcher, key: Mapping[str, str]) -> str | None:
    """The first view that partitioning by ``key`` (:func:`shared_equality_key` of
    every query and view) would split from the tuples it joins, else None.

    A view's row is made in the task holding its members: all in one partition, since
    a multi-stream view joins its members on the key (a single-stream view has one).
    A query joining the view on the key needs that row in the partition of the view's
    key column's value, which is its members' key only when that column is a member's
    key column (``SELECT b.pid AS pid`` with ``B`` keyed by ``pid``, ``B`` partitioned
    by it). A view no multi-stream query joins (not in ``key``) may be made anywhere."""
    by_name = {rq.name: rq for rq in matcher.registry}
    for view in matcher.registrations.views:
        column = key.get(view.name)
        if column is None:
            continue
        bound = by_name[view.name].context.bound
        expr = next((out.expr for out in bound.outputs if out.name == column), None)
        stream = dict(bound.aliases).get(getattr(expr, "alias", None))  # (a self-join's role: its stream)
        if stream is None or key.get(stream) != getattr(expr, "name", None):
            return view.name
    return None


def view_margin(matcher: Matcher) -> float:
    """How far back (seconds) a result's tuples of the declared streams may reach
    from its ts: the largest MAXWINDOW without views; with views, the longest chain of
    windows through the view graph.

    A view row's ts is its result's (its newest member's), and its members are within
    the view's MAXWINDOW ``W_v`` before it (0 for a single-stream view). So the rows of
    a stream or view ``s`` that a row of ``v`` rests on lie within ``reach(v) = W_v +
    max(reach(s) for s read by v)`` (``reach`` of a declared stream or table: 0) before
    it, and a result of a query ``q`` on the declared streams' tuples within ``W_q +
    max(reach(s) for s read by q)`` before its ts. That maximum over every query and
    view is the margin a time bucket needs before it (:mod:`runtime.spark.batch`)."""
    if not matcher.views:
        return matcher.registry.max_window()
    upstream: dict[str, float] = {}  # per query id: the farthest reach of the views it reads

    def back(rq: Any) -> float:
        own = rq.maxwindow if rq.is_multi_stream else 0.0
        return float(own) + upstream.get(rq.name, 0.0)

    by_name = {rq.name: rq for rq in matcher.registry}
    for name in matcher.views:  # registration order: a view's inputs come before it
        if name not in by_name:  # (an aggregate view: a declared stream once made, runtime.spark.aggregate_views)
            continue
        reach = back(by_name[name])
        for reader in matcher.view_readers(name):
            upstream[reader] = max(upstream.get(reader, 0.0), reach)
    return max((back(rq) for rq in matcher.registry), default=0.0)


def row_layout(ddl: str) -> StageSpec:
    """A spec of ``ddl``'s streams alone: the unified row layout of every stream, which
    the aggregate stages shuffle."""
    return build_spec(Matcher(ddl), partition_by="time")


def register_each(matcher: Matcher, queries: Sequence[tuple[str, str]]) -> Matcher:
    """``matcher`` with every ``(id, text)`` registered under its id, one by one (an
    error locates its text as ``<query id>``)."""
    for name, text in queries:
        matcher.register_query(text, query_id=name, source_name=f"<query {name}>")
    return matcher


def without_lateness(ddl: str) -> str:
    """``ddl`` without any stream's ``ALLOWED LATENESS``, for a batch task: its rows come
    in timestamp order, so no tuple is late and no lateness plays a part."""
    return "\n".join(dataclasses.replace(s, lateness=None).ddl() for s in Catalog.from_ddl(ddl))


def saved_state(state: Any, fmt: int, fingerprint: str, covers: str = "") -> dict[str, Any] | None:
    """What a streaming state group saved (None: nothing yet). State written by another
    stage setup is refused: restored here it would match against other queries.
    ``covers``: what else the fingerprint covers, for the message."""
    if not state.exists:
        return None
    try:
        saved = decode_snapshot(state.get[0], "the checkpoint's streaming state")
    except SnapshotError as err:
        raise SparkStageError(f"{err}; start from a new checkpoint location") from None
    if not isinstance(saved, dict) or saved.get("format") != fmt or saved.get("fingerprint") != fingerprint:
        raise SparkStageError(
            f"the checkpoint's state was written for other streams, queries or settings{covers}; "
            "start from a new checkpoint location"
        )
    return saved


def save_state(state: Any, fmt: int, fingerprint: str, **fields: Any) -> None:
    """Save a streaming state group's fields for :func:`saved_state`."""
    blob = {"format": fmt, "fingerprint": fingerprint, **fields}
    state.update((encode_snapshot(blob),))


def with_fingerprint(spec: StageSpec) -> StageSpec:
    return replace(spec, fingerprint=_fingerprint(spec.ddl, spec.queries, spec.settings, spec.tables))


def _arrow_name(dtype: pa.DataType) -> str:
    for name, t in _ARROW_OF_NAME.items():
        if t == dtype:
            return name
    raise SparkStageError(f"no Spark type for the value type {dtype}")


def output_names(rq: Any) -> list[str]:
    """A registered query's SELECT value names (from its shape's shared context: the
    query's ``normalized`` form would compile it again)."""
    return [out.name for out in rq.context.bound.outputs]


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


_FAMILY_OF_DDL = {"INTEGER": "integral", "FLOAT": "fractional", "STRING": "string", "BOOLEAN": "boolean"}


def type_family(dtype: DataType) -> str:
    """What a Spark type holds: ``integral``, ``fractional``, ``string``, ``boolean``
    (the types :func:`ddl_from_frames` reads), else ``other``."""
    ddl_type = _DDL_TYPES.get(type(dtype).__name__)
    return "other" if ddl_type is None else _FAMILY_OF_DDL[ddl_type]
