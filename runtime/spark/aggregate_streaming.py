"""Aggregate queries as a Structured Streaming stage, each window's slices and partials
in Spark's state store.

>>> from runtime.spark.aggregate_streaming import aggregate_stream
>>> rows = aggregate_stream({"H": heart_stream}, aggregate_queries_text, schema=ddl_text,
...                         allowed_lateness=5)
>>> rows.writeStream.format("parquet").option("checkpointLocation", ck).start(out_dir)

**Output** (append mode): the batch stage's schema (:func:`runtime.spark.aggregate.aggregate_schema`),
``query, window_start, window_end, group map<string,string>, values map<string,string>``,
one row per (query, window, group) whose window holds data, written in the micro-batch
whose watermark passes the window's end. A **late tuple** (older than the watermark of
its micro-batch) is aggregated into nothing and comes out as a row with a NULL
``query`` and ``window_start``, its ``ts`` as ``window_end``, ``group = {stream: id}``
(the id as text) and NULL ``values``: reported, never dropped silently.

**Queries that come and go**: with ``control=`` (a streaming DataFrame of register and
unregister commands) the stage runs :mod:`runtime.spark.aggregate_control` instead:
one state group per stream, the local engine's own clock; what follows is the stage
with a fixed query set.

**Grouping** (state groups, keyed by stream and ``_p``), per stream as the batch stage
partitions it (:func:`runtime.spark.aggregate.plan_stream`), so every window is whole
in one group and nothing is combined across groups:

* **key**: the common GROUP BY column's hash modulo ``slots`` (default
  ``spark.sql.shuffle.partitions``): each slot runs one matcher over its keys;
* **time**: a span of width ``span`` (default four times the largest RANGE) is a group;
  a row goes to every span whose windows it is in, a span reports the windows ending in
  it, and its state is removed once the watermark is a span past its end (a later row
  for it is late);
* **one**: one group for the stream (a landmark window, or count windows without a
  common group key).

**Time.** Every stream DataFrame needs ``ts`` (seconds, >= 0: Spark's watermark starts
at 0) and an ``id`` column. Each stream gets a watermark of its own lateness
(``withWatermark`` before the union; the lateness as the local clock takes it: the
Matcher's ``stream_lateness``, else the DDL's ``ALLOWED LATENESS``, else
``allowed_lateness``), and the stage runs with
``spark.sql.streaming.multipleWatermarkPolicy=min``: the watermark ``W`` of a
micro-batch is the smallest over the sources of their largest ``ts`` in the earlier
micro-batches minus their lateness (whole milliseconds), the local per-stream rule. Per
micro-batch and group the function restores the group's matcher, reports the tuples
with ``ts < W`` as late, pushes the rest in ``(ts, id)`` order into a matcher that runs
on Spark's watermark (``time='external'``: a heartbeat at ``W``; its tuples do not move
it), so every window ending before ``W`` comes out, then saves the matcher
(:meth:`mqo.Matcher.snapshot`, aggregate state included) written by
:mod:`mqo.snapshot_codec` into one binary state column. The rows are exactly those of
a local ``mqo.Matcher`` (per-stream time, the same lateness) fed the same accepted
tuples in timestamp order, at the same watermark, however the input is cut into
micro-batches (``tests/spark/test_spark_aggregate_stream.py``).
As for matches (:mod:`runtime.spark.streaming`), Spark has no idle timeout: a source
that falls silent holds the watermark back.

**Windows of groups without new rows** come out through an event-time timeout: every
group with state sets its timeout at the current watermark, so Spark calls it, without
rows, in the first micro-batch whose watermark is past that (and Spark runs a
micro-batch without data when the watermark moves and such timeouts exist). The price:
every live group is restored once per watermark move, not only when it gets rows; the
groups are bounded (``slots`` per keyed stream, one per one-task stream, the spans not
yet passed in time mode). Finer timeouts (at the next window end) would need the
matcher to tell when its next window closes. An event-time timeout makes Spark drop
input rows older than the watermark before the function sees them, judged on the
column that carries the watermark; late tuples must be reported, so that column is
replaced, after the watermark is computed on the real event time, by a constant that
is never late (the trick of the ordered emission in :mod:`runtime.spark.streaming`). A
processing-time timeout would run micro-batches without data at every trigger.

**Exactly once across restarts**, as :func:`runtime.spark.streaming.match_stream`: the
function is deterministic in its input and state, Spark re-runs an uncommitted
micro-batch from the state of the previous one, and the file sink (its
``_spark_metadata`` log) ignores a re-run batch it already committed, so a query killed
at any point and restarted from its checkpoint neither loses nor duplicates a row. The
state records a fingerprint of the streams, queries and settings (``slots``, ``span``
and the lateness included): restarting with others is an error.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mqo import LateTuple, Matcher
from runtime.spark.aggregate import (
    AGGREGATE_COLUMNS,
    StreamPlan,
    aggregate_frame,
    aggregate_schema,
    output_rows,
    owned,
    span_bounds,
    stream_plans,
)
from runtime.spark.common import (
    STATE_SCHEMA,
    gathered,
    late_row,
    never_late,
    numbers_as_text,
    report_nulled,
    shuffle_partitions,
    stream_columns,
    stream_lateness,
    streaming_inputs,
    unify,
)
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

STATE_FORMAT = 1


@dataclass(frozen=True)
class _Job:
    """What every state group needs: the DDL, each stream's plan and row layout (by
    stream number) and the fingerprint a checkpoint must match."""

    ddl: str
    plans: tuple[tuple[int, StreamPlan, StreamLayout], ...]
    fingerprint: str

    def stream(self, number: int) -> tuple[StreamPlan, StreamLayout]:
        for n, plan, layout in self.plans:
            if n == number:
                return plan, layout
        raise SparkStageError(f"internal error: rows of an unknown stream number {number}")


def aggregate_stream(
    streams: Mapping[str, DataFrame],
    queries: str | Sequence[str] | Matcher,
    *,
    schema: str | None = None,
    allowed_lateness: float | None = None,
    slots: int | None = None,
    span: float | None = None,
    control: DataFrame | None = None,
    shared_control: bool = False,
    max_window: float | None = None,
    nulled: Accumulator[int] | None = None,
) -> DataFrame:
    """The aggregate rows of the queries over streaming DataFrames: a streaming
    DataFrame (append mode; see the module docstring). ``queries`` holds aggregate
    queries only; ``allowed_lateness`` (seconds, whole milliseconds) defaults to the
    Matcher's (0 for query texts), a stream's own lateness coming from the Matcher's
    ``stream_lateness`` or the DDL's ``ALLOWED LATENESS`` (as the local clock takes
    it); ``slots``: state groups per stream partitioned by key; ``span``: the span
    width of streams partitioned by time.

    ``control``: a streaming DataFrame of commands (``ts``, ``command``, ``query``)
    that register and unregister aggregate queries while the stage runs, ``queries``
    being those active from the start (may be empty): one state group per stream, see
    :mod:`runtime.spark.aggregate_control` (``shared_control`` and ``max_window`` are
    for a match stage reading the same commands). ``nulled``: an accumulator counting
    the values past 64 bits written as NULL, as in :func:`runtime.spark.aggregate_batch`."""
    streaming_inputs(streams, "runtime.spark.aggregate_batch")
    if control is not None:
        if slots is not None or span is not None:
            raise SparkStageError("slots and span are for a fixed query set; with control= each stream is one group")
        from runtime.spark.aggregate_control import aggregate_control_stream

        return aggregate_control_stream(
            streams,
            queries,
            control,
            schema=schema,
            allowed_lateness=allowed_lateness,
            shared_control=shared_control,
            max_window=max_window,
            nulled=nulled,
        )
    if shared_control or max_window is not None:
        raise SparkStageError("shared_control and max_window are for queries that come through control=")
    matcher = stage_matcher(queries, schema, streams, None, kind="aggregate")
    plans = stream_plans(matcher, streams, span)
    lateness = stream_lateness(matcher, allowed_lateness)  # per stream, as the local clock takes it
    slots = shuffle_partitions(streams, slots, "slots")
    ddl = matcher.catalog.ddl()
    layouts = row_layout(ddl)
    delays = sorted((p.stream, round(lateness[p.stream] * 1000)) for p in plans)
    fingerprint = hashlib.sha256(repr((STATE_FORMAT, ddl, plans, delays, slots)).encode()).hexdigest()
    job = _Job(ddl, tuple((layouts.stream(p.stream).number, p, layouts.stream(p.stream)) for p in plans), fingerprint)
    # a watermark per source, on the real event time; the operator's is the smallest
    # (the local per-stream rule)
    next(iter(streams.values())).sparkSession.conf.set("spark.sql.streaming.multipleWatermarkPolicy", "min")
    grouped = None
    for plan in plans:
        frame = {plan.stream: streams[plan.stream]}
        rows = unify(frame, layouts, require_id=True, event_time=True, watermarks={plan.stream: lateness[plan.stream]})
        part = _groups(rows, plan, layouts.stream(plan.stream), slots)
        grouped = part if grouped is None else grouped.unionByName(part)
    assert grouped is not None
    grouped = numbers_as_text(grouped, layouts.streams)
    # then a watermark column that is never late, so that the event-time timeout does
    # not make Spark drop the late rows the function must report
    grouped = never_late(grouped)
    return grouped.groupBy("_s", "_p").applyInPandasWithState(
        partial(aggregate_group, job, nulled=nulled), aggregate_schema(), STATE_SCHEMA, "append", "EventTimeTimeout"
    )


def _groups(rows: DataFrame, plan: StreamPlan, layout: StreamLayout, slots: int) -> DataFrame:
    """``_p``: the state group of each row copy; ``_home``: the group that reports the
    row if it is late (in time mode the first of its copies)."""
    if plan.mode == "key":
        field = layout.fields[layout.columns.index(plan.key)]  # type: ignore[arg-type]
        keyed = rows.selectExpr("*", f"pmod(xxhash64({field}), {slots}) AS _p")
        return keyed.selectExpr("*", "_p AS _home")
    if plan.mode == "one":
        return rows.selectExpr("*", "0L AS _p", "0L AS _home")
    first, last = span_bounds(plan)
    # a NULL ts has no spans: it goes to span 0, whose function reports it (explode
    # would drop it silently)
    spans = f"COALESCE(sequence({first}, GREATEST({first}, {last})), array(0L))"
    return rows.selectExpr("*", f"explode({spans}) AS _p", f"COALESCE({first}, 0L) AS _home")


# ------------------------------------------------------------- on the workers


def aggregate_group(
    job: _Job,
    key: tuple[Any, ...],
    frames: Iterator[pd.DataFrame],
    state: GroupState,
    nulled: Accumulator[int] | None = None,
) -> Iterator[pd.DataFrame]:
    """One state group in one micro-batch (rows, or a timeout without rows): restore
    its matcher, report late tuples, push the rest in (ts, id) order, move it to
    Spark's watermark, output the windows it owns, save or drop the state."""
    number, group = int(key[0]), int(key[1])
    plan, layout = job.stream(number)
    wm_ms = state.getCurrentWatermarkMs()
    watermark = wm_ms / 1000.0 if wm_ms > 0 else -math.inf
    late_seen: list[LateTuple] = []
    matcher = None
    saved = saved_state(state, STATE_FORMAT, job.fingerprint, " (slots, span and lateness included)")
    if saved is not None:
        matcher = Matcher.restore(saved["matcher"], late_sink=late_seen.append)
    # a span a whole span behind the watermark has reported all of its windows
    finished = plan.mode == "time" and watermark >= (group + 2) * plan.span
    out: list[tuple[Any, ...]] = []
    rows = gathered(frames)
    if rows is not None:
        for column in ("ts", "id"):
            if rows[column].isna().any():
                raise SparkStageError(f"stream {plan.stream}: a tuple has a NULL {column}")
        rows = rows.sort_values(["ts", "id"], kind="stable", ignore_index=True)
        late = (rows["ts"] < watermark).to_numpy()
        home = (rows["_home"] == group).to_numpy()
        for i in np.flatnonzero(late & home).tolist():
            ts, ident = float(rows["ts"].iat[i]), int(rows["id"].iat[i])
            out.append(late_row(plan.stream, ts, ident, len(AGGREGATE_COLUMNS), aggregate=True))
        fresh = rows[~late]
        if len(fresh) and not finished:
            if matcher is None:
                matcher = _new_matcher(job, plan, late_seen)
            if watermark > -math.inf:
                matcher.heartbeat(watermark)
            matcher.push_batch(plan.stream, stream_columns(fresh, layout))
    if matcher is not None:
        if watermark > -math.inf:
            # Spark's watermark is the matcher's (time='external'): the windows ending
            # before it come out
            matcher.heartbeat(watermark)
        made, wide = output_rows(matcher.poll_aggregates(), partial(owned, plan, group))
        out += made
        report_nulled(nulled, wide, "streaming aggregate stage")
    # a safety net: the matchers decide lateness on the same watermark
    mine = owned(plan, group, [t.ts for t in late_seen])
    width = len(AGGREGATE_COLUMNS)
    out += [
        late_row(t.stream, t.ts, t.id, width, aggregate=True)
        for t, kept in zip(late_seen, mine.tolist(), strict=True)
        if kept
    ]
    if matcher is None or finished:
        if state.exists:
            state.remove()
    else:
        save_state(state, STATE_FORMAT, job.fingerprint, matcher=matcher.snapshot())
        # called again, without rows, once the watermark moves past the current one
        state.setTimeoutTimestamp(max(wm_ms, 1))
    if out:
        yield aggregate_frame(out)


def _new_matcher(job: _Job, plan: StreamPlan, late_sink: Any) -> Matcher:
    return register_each(Matcher(job.ddl, time="external", late_sink=late_sink), plan.queries)
