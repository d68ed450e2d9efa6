"""Aggregate queries that come and go while the streaming aggregate stage runs: a
control stream of commands, as :mod:`runtime.spark.control` is for match queries.

>>> commands = spark.readStream.schema("ts double, command string, query string").json("in/commands")
>>> rows = aggregate_stream({"H": h, "B": b}, "", schema=ddl, control=commands)

Commands are the rows ``(ts, command, query)`` of :mod:`runtime.spark.control`
(``register`` with query text, ``unregister`` with an id), applied at the start of the
micro-batch that brings them, those of one micro-batch in ``(ts, command, query)``
order.

**Groups: one state group per stream.** A dynamic query set cannot be partitioned by a
group key or time span chosen in advance, so each stream given is one state group
holding one :class:`mqo.Matcher`, the aggregate queries of that stream aggregated in
it. Every group applies every command (the query set is in every group's state, next
to its slices, so a restart from the checkpoint carries it, exactly once like the
rows), and every group sees every tuple's ``(ts, stream, id)``: its own stream's
tuples whole, the others' as markers (a heartbeat of that stream), which the group's
matcher takes as the local engine takes their tuples. So each group's matcher keeps
the local engine's own per-stream clock (the lateness as ``stream_lateness``, else the
DDL's ``ALLOWED LATENESS``, else ``allowed_lateness``; no idle timeout), fed each
micro-batch's commands, then its tuples in ``(ts, stream, id)`` order: the rows are
exactly those of a local matcher fed the same (``tests/spark/test_spark_aggregate_control.py``).
Spark's watermark plays no part. The cost: a stream's aggregation runs in one task,
and every tuple is copied, as a marker of three columns, to every other stream's group.

**Registration.** A query registered in micro-batch k reports the windows that start
at or after the newest ``ts`` of any stream in micro-batches before k (they hold only
tuples that arrive after it; :class:`mqo.aggregation.Aggregator`); one registered
before any tuple reports every window holding data, and a count window (``ROWS``)
numbers the rows that arrive after it. A landmark window (``RANGE UNBOUNDED``) must be
registered before the first tuple. A query unregistered in micro-batch k reports
nothing from micro-batch k on; the windows the watermark passed before k were
reported in earlier micro-batches.

**Time.** A tuple is late when its ``ts`` is older than the group's watermark when it
comes (the local per-stream rule, tuple by tuple); it comes out as a row with a NULL
``query`` and ``window_start``, its ``ts`` as ``window_end``, ``group = {stream: id}``.
A stream declared in the DDL but not given a DataFrame is idle from the start (it
would hold the watermark back for ever); one given but silent holds it back, as
locally without an idle timeout.

**Bad commands never stop the job**: a query that does not compile (its line and
column), a match query (they go to :func:`runtime.spark.streaming.match_stream`), a
query on a stream without a DataFrame, a landmark window after the first tuple, an id
already registered, an unregister of an unknown id, an unknown command: each is a row
with ``error`` set (``query`` the id when known, ``window_end`` the command's ``ts``)
and changes nothing. One group reports it.

**Shared with the match stage** (``shared_control=True``, as ``mqo serve --engine
spark`` runs them): the match stage (:func:`~runtime.spark.streaming.match_stream` with
``shared_control=True``) and this one read the same commands; each takes the queries of
its kind and leaves the others', keeping their ids so that an id is taken once across
both stages (:func:`runtime.spark.control.apply_shared`). The match stage reports what
belongs to neither: a text that does not compile, one mixing both kinds, an
unregister of an id neither has.

**Output** (:func:`aggregate_control_schema`): the aggregate stage's columns
(:func:`runtime.spark.aggregate.aggregate_schema`) and ``error string``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import pandas as pd

from mqo import AggregateBatch, Matcher
from runtime.spark.aggregate import AGGREGATE_COLUMNS, aggregate_frame, aggregate_schema, output_rows
from runtime.spark.common import (
    STATE_SCHEMA,
    gathered,
    late_row,
    numbers_as_text,
    report_nulled,
    runs,
    stream_columns,
    stream_lateness,
    unify,
)
from runtime.spark.control import COMMANDS, apply_shared, command_rows, ordered_commands
from runtime.spark.spec import (
    SparkStageError,
    StreamLayout,
    register_each,
    row_layout,
    save_state,
    saved_state,
    stage_matcher,
)

if TYPE_CHECKING:
    from pyspark import Accumulator
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.state import GroupState
    from pyspark.sql.types import StructType

STATE_FORMAT = 1


def aggregate_control_schema() -> StructType:
    """The aggregate rows' schema, and ``error`` for refused commands."""
    from pyspark.sql import types as T

    schema = aggregate_schema()
    return T.StructType([*schema.fields, T.StructField("error", T.StringType())])


@dataclass(frozen=True)
class _ControlJob:
    """What every group needs: the DDL, the streams given (number, layout), the
    per-stream lateness, the queries active from the start, and the settings of a
    stage sharing its commands with the match stage."""

    ddl: str
    layouts: tuple[StreamLayout, ...]  # the streams given, by number
    lateness: tuple[tuple[str, float], ...]
    idle: tuple[str, ...]  # declared streams without a DataFrame
    initial: tuple[tuple[str, str], ...]  # (id, text)
    shared: bool
    max_window: float | None  # the match stage's, when shared
    fingerprint: str

    def layout(self, number: int) -> StreamLayout:
        for layout in self.layouts:
            if layout.number == number:
                return layout
        raise SparkStageError(f"internal error: rows of an unknown stream number {number}")

    @property
    def reporter(self) -> int:
        """The group that reports refused commands (every group applies them)."""
        return min(layout.number for layout in self.layouts)


def aggregate_control_stream(
    streams: Mapping[str, DataFrame],
    queries: str | Sequence[str] | Matcher,
    control: DataFrame,
    *,
    schema: str | None = None,
    allowed_lateness: float | None = None,
    shared_control: bool = False,
    max_window: float | None = None,
    nulled: Accumulator[int] | None = None,
) -> DataFrame:
    """The aggregate rows of queries that come and go through ``control`` (see the
    module docstring); ``queries`` are the ones active from the start (may be empty).
    ``max_window``: with ``shared_control``, the match stage's, so that this stage
    knows which match queries that stage refuses. ``nulled``: an accumulator counting
    the values past 64 bits written as NULL (:func:`runtime.spark.aggregate_batch`)."""
    from pyspark.sql import functions as F

    matcher = stage_matcher(queries, schema, streams, None, kind="aggregate", may_be_empty=True)
    lateness = stream_lateness(matcher, allowed_lateness)
    ddl = matcher.catalog.ddl()
    spec = row_layout(ddl)
    declared = [layout.name for layout in spec.streams]
    unknown = [name for name in streams if name not in declared]
    if unknown:
        raise SparkStageError(f"stream {unknown[0]}: not declared in the schema ({', '.join(declared)})")
    layouts = tuple(spec.stream(name) for name in sorted(streams, key=lambda s: spec.stream(s).number))
    registered = matcher.aggregator.queries if matcher.aggregator is not None else {}
    initial = tuple((name, reg.query.text) for name, reg in registered.items())
    given = {layout.name for layout in layouts}
    idle = tuple(layout.name for layout in spec.streams if layout.name not in given)
    settings = (STATE_FORMAT, ddl, [x.name for x in layouts], sorted(lateness.items()), initial, shared_control)
    fingerprint = hashlib.sha256(repr((*settings, max_window)).encode()).hexdigest()
    job = _ControlJob(
        ddl, layouts, tuple(sorted(lateness.items())), idle, initial, shared_control, max_window, fingerprint
    )
    for name, reg in registered.items():
        if reg.query.stream.lower() not in {g.lower() for g in given}:
            raise SparkStageError(f"query {name} reads stream {reg.query.stream}: give its DataFrame")
    rows = unify(streams, spec, require_id=True)
    numbers = [layout.number for layout in layouts]
    # every tuple whole to its own stream's group, and as a marker to every other group
    own = rows.withColumn("_g", F.col("_s"))
    parts = [own]
    if len(numbers) > 1:
        others = ", ".join(map(str, numbers))
        markers = rows.selectExpr("_s", "ts", "id", f"explode(filter(array({others}), g -> g != _s)) AS _g")
        parts.append(markers)
    commands = command_rows(control, len(numbers)).selectExpr(
        "ts", "_cmd", "_text", f"element_at(array({', '.join(map(str, numbers))}), _slot + 1) AS _g"
    )
    grouped = parts[0]
    for part in [*parts[1:], commands]:
        grouped = grouped.unionByName(part, allowMissingColumns=True)
    grouped = numbers_as_text(grouped, layouts)
    return grouped.groupBy("_g").applyInPandasWithState(
        partial(control_group, job, nulled=nulled), aggregate_control_schema(), STATE_SCHEMA, "append", "NoTimeout"
    )


# ------------------------------------------------------------- on the workers


def control_group(
    job: _ControlJob,
    key: tuple[Any, ...],
    frames: Iterator[pd.DataFrame],
    state: GroupState,
    nulled: Accumulator[int] | None = None,
) -> Iterator[pd.DataFrame]:
    """One stream's group in one micro-batch: restore its matcher, apply the commands,
    feed the tuples (its own) and markers (the others') in (ts, stream, id) order, put
    out the windows the watermark passed, save the state."""
    number = int(key[0])
    layout = job.layout(number)
    late: list[Any] = []
    saved = saved_state(state, STATE_FORMAT, job.fingerprint)
    if saved is not None:
        matcher = Matcher.restore(saved["matcher"], late_sink=late.append)
        foreign = set(saved["foreign"])
    else:
        matcher = _new_matcher(job, late.append)
        foreign = set()
    rows = gathered(frames)
    out: list[tuple[Any, ...]] = []
    if rows is not None:
        is_command = rows["_cmd"].notna().to_numpy()
        if is_command.any():
            # commands first, at the micro-batch's start
            for ts, command, text in ordered_commands(rows[is_command]):
                refused = _apply(matcher, job, foreign, ts, command, text)
                if refused is not None and number == job.reporter:
                    out.append((refused[0], None, ts, None, None, refused[1]))
        tuples = rows[~is_command]
        if len(tuples):
            _feed(matcher, job, layout, tuples)
    mine = {q for q, reg in (matcher.aggregator.queries.items() if matcher.aggregator else ()) if _is(reg, layout)}
    polled = matcher.poll_aggregates()
    made, wide = output_rows(AggregateBatch([[c for c in part if c.query in mine] for part in polled.parts]))
    out += [(*r, None) for r in made]
    report_nulled(nulled, wide, "streaming aggregate stage")
    out += [late_row(t.stream, t.ts, t.id, len(AGGREGATE_COLUMNS) + 1, aggregate=True) for t in late]
    save_state(state, STATE_FORMAT, job.fingerprint, matcher=matcher.snapshot(), foreign=sorted(foreign))
    if out:
        yield aggregate_frame(out)


def _is(reg: Any, layout: StreamLayout) -> bool:
    return reg.query.stream.lower() == layout.name.lower()


def _new_matcher(job: _ControlJob, late_sink: Any) -> Matcher:
    lateness = dict(job.lateness)
    matcher = Matcher(
        job.ddl,
        allowed_lateness=0.0,
        stream_lateness=lateness,
        idle_timeout=None,
        late_sink=late_sink,
    )
    for name in job.idle:
        matcher.set_idle(name)
    return register_each(matcher, job.initial)


def _apply(
    matcher: Matcher, job: _ControlJob, foreign: set[str], ts: float, command: Any, text: Any
) -> tuple[str | None, str] | None:
    """One command; ``(id, message)`` when it is refused and this stage reports it."""
    given = {layout.name.lower() for layout in job.layouts}

    def check(ids: list[str]) -> tuple[str, str] | None:
        assert matcher.aggregator is not None
        for q in ids:
            stream = matcher.aggregator.queries[q].query.stream
            if stream.lower() not in given:
                return q, f"query {q} reads stream {stream}, which the stage has no input for"
        return None

    return apply_shared(
        matcher,
        "aggregate",
        foreign,
        ts,
        command,
        text,
        shared=job.shared,
        max_window=job.max_window,
        check=check,
    )


def _feed(matcher: Matcher, job: _ControlJob, layout: StreamLayout, rows: pd.DataFrame) -> None:
    """The micro-batch's tuples in (ts, stream, id) order: runs of its own stream's
    pushed, runs of the others' markers taken as heartbeats of their streams (each
    stream's newest, what its tuples tell the clock)."""
    for column in ("ts", "id"):
        if rows[column].isna().any():
            raise SparkStageError(f"a tuple has a NULL {column}")
    rows = rows.sort_values(["ts", "_s", "id"], kind="stable", ignore_index=True)
    s = rows["_s"].to_numpy()
    mine = s == layout.number
    for start, end in runs(mine):
        run = rows.iloc[start:end]
        if mine[start]:
            matcher.push_batch(layout.name, stream_columns(run, layout))
            continue
        for number, ts in run.groupby("_s")["ts"].max().items():
            name = next((x.name for x in job.layouts if x.number == int(number)), None)
            if name is None:
                raise SparkStageError(f"internal error: a marker of an unknown stream number {number}")
            if not math.isfinite(float(ts)):
                raise SparkStageError(f"stream {name}: a tuple has the ts {ts!r}")
            matcher.heartbeat(name, float(ts))


__all__ = ["COMMANDS", "aggregate_control_schema", "aggregate_control_stream", "control_group"]
