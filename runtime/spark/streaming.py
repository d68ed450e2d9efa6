"""The matcher as a Structured Streaming stage, its window state in Spark's state store.

>>> from runtime.spark.streaming import match_stream
>>> results = match_stream({"B": blood_stream, "H": heart_stream}, queries_text, schema=ddl_text,
...                        allowed_lateness=5)
>>> results.writeStream.format("parquet").option("checkpointLocation", ck).start(out_dir)

The output has the batch stage's schema (:func:`runtime.spark.common.result_schema`). A **late
tuple** (see below) is not matched and comes out as a row with a NULL ``query``, its
``ts`` and ``ids = {stream: id}``, so it is reported, never dropped silently.

**Grouping.** As in the batch stage, tuples go to groups so that every result has all
of its tuples in one group: by the shared equality key when every query has one, else by
time bucket (width ``B``, a tuple within the window of its bucket's end copied to the
next bucket, a result reported only by the group owning its bucket). Groups are a ring of
``slots`` (default ``spark.sql.shuffle.partitions``, at least 2): a key's hash, or a
bucket's number, modulo ``slots``. Each slot runs one continuous matcher over its keys,
or over its buckets in time order (consecutive buckets land in different slots, so no
tuple is pushed twice into one matcher), so state is bounded by ``slots`` windows
without any timeouts. Between micro-batches a slot's matcher lives in the state store as
the changing part of :meth:`mqo.Matcher.snapshot` (clocks, ids, stored tuples), written
by :mod:`mqo.snapshot_codec` (never pickled) into one binary column; the compiled plan
is rebuilt once per Python worker, never per group. ``slots`` is part of the
checkpointed state: restarting with another value is an error.

**Time, watermark and lateness.** Stream DataFrames need ``ts`` (seconds, >= 0, as
Spark's watermark starts at 0), an ``id`` column (a distributed stream has no global
arrival order to number tuples by) and the declared columns. Each stream DataFrame
gets a watermark of its own lateness (``withWatermark`` before the union; the lateness
as the local clock takes it: the Matcher's ``stream_lateness``, else the DDL's
``ALLOWED LATENESS``, else ``allowed_lateness``), and the stage runs with
``spark.sql.streaming.multipleWatermarkPolicy=min``: the stage's watermark is the
smallest of the sources', the local per-stream rule. A tuple is **late** when its
``ts`` is older than the watermark of its micro-batch (computed by Spark from the
earlier micro-batches). The slots' matchers run on that watermark
(``time='external'``: a heartbeat in every micro-batch; their tuples do not move it), so
every slot decides lateness alike; within a micro-batch tuples are pushed in
``(ts, stream, id)`` order, so results are exactly the timestamp-order results of the
tuples that are not late, however the input is cut into micro-batches. Each matcher
purges what is older than the watermark minus MAXWINDOW. Where this differs from the
local clock: Spark moves its watermark once per micro-batch, not per tuple; a source
that has sent nothing does not hold it back (locally, every declared stream does until
``idle_timeout``); and a source that falls silent holds it back for good, since Spark
has no idle timeout (nor ``set_idle`` or per-stream heartbeats).

**Views.** Match views (``CREATE VIEW``, given with the queries from the start) run in
every slot's matcher as in the batch stage (:mod:`runtime.spark.batch`, "Views"): a
slot makes a view's rows from its tuples, in ``(ts, stream, id)`` order within the
micro-batch, and matches them against the queries reading the view; the buckets'
margin is the longest chain of MAXWINDOWs through the view graph plus the lateness
(:func:`runtime.spark.spec.view_margin`), and by the equality key only when each view
joined on it selects its members' key column. A view row is made by a tuple that is
not late, so it is never late itself (its ts is at least the watermark); a late tuple
makes no view rows, as in the local engine. A slot's state carries the ids its views'
rows take next (:func:`runtime.spark.worker.freeze`), and a slot with views compiles
its queries in every micro-batch (a matcher with views shares no plan). A view
member's id in ``ids`` numbers the view's rows within the slot (the local engine
numbers them over the whole input), so compare view members by value. Aggregate
views, views with ``emit="ordered"`` (results leave behind the watermark, too late to
be a stream) and views through a control stream are refused with an error naming the
view.

**Ordered emission** (``emit="ordered"``). Each slot's matcher holds its results (in
the state store, with the window) and releases those older than the micro-batch's
watermark, in ``ts`` order. So micro-batch k writes exactly the results with ``ts`` in
[watermark of k-1, watermark of k): every micro-batch's results are newer than or as
new as every earlier micro-batch's, and within one micro-batch each slot's results are
in ``ts`` order while slots interleave (sort the micro-batch, e.g. in ``foreachBatch``,
for one total order). A slot that holds results and gets no rows is woken when the
watermark passes its first held result: an event-time timeout, for which Spark runs a
micro-batch without data once the watermark moves. With an event-time timeout Spark
would drop rows older than the watermark before the function sees them, judging by the
column that carries the watermark metadata; late tuples must be reported, so in this
mode that column is replaced, after the watermarks are computed on the real event time,
by a constant that is never late. Results newer than the last watermark stay held
until data moves it (as Spark's own append-mode aggregations hold their last windows).

**Exactly once across restarts.** The function is deterministic in its input and
state, Spark re-runs an uncommitted micro-batch from the state of the previous one,
and the output must go to a sink that is idempotent per micro-batch: the file sink
(its ``_spark_metadata`` log ignores a re-run batch it already committed) or
``foreachBatch`` writing by ``batch_id`` (overwrite that batch's partition). Then a
query stopped or killed at any point and restarted from its checkpoint neither loses
nor duplicates a result; ``tests/spark/test_spark_streaming.py`` deletes a commit-log entry
to replay a batch whose output was already written.

**Why applyInPandasWithState, not transformWithStateInPandas.** Both were tried (pyspark
4.3). (1) transformWithStateInPandas runs its state API over protobuf (the Spark Connect
client dependencies), which a plain ``pip install pyspark`` lacks: it fails with "cannot
import name 'descriptor' from 'google.protobuf'". (2) Our state is one opaque blob per
group, read whole and written whole each micro-batch (the matcher rebuilds its indexes
from it), so value/list/map state variables and TTLs buy nothing, and the slot ring
needs no timers in arrival mode. (3) Late tuples must reach the function to be
reported: in the trial, transformWithStateInPandas in event-time mode dropped rows
older than the watermark before the processor saw them, and so does
applyInPandasWithState with an event-time timeout on the watermarked column;
applyInPandasWithState without a timeout hands them over (tested), and so does an
event-time timeout when that column is never late (ordered mode, above; tested). A
processing-time timeout was tried for ordered mode and rejected: Spark then runs
micro-batches without data at every trigger, and an ``availableNow`` test query had not
ended after ten minutes. It works
with the default HDFS-backed state store and with RocksDB
(``spark.sql.streaming.stateStore.providerClass``), which suits large windows. Its cost:
a slot's whole window is rewritten in every micro-batch that brings it data.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mqo import LateTuple, Match, Matcher, text_of, within_64_bits
from runtime.spark.common import (
    STATE_SCHEMA,
    column_values,
    gathered,
    key_column,
    late_row,
    never_late,
    numbers_as_text,
    pandas_frame,
    report_nulled,
    result_schema,
    runs,
    shuffle_partitions,
    stream_lateness,
    streaming_inputs,
    time_buckets,
    unify,
)
from runtime.spark.control import (
    CONTROL_COLUMNS,
    active_queries,
    apply_commands,
    command_rows,
    control_frame,
    control_schema,
    error_row,
    is_dynamic,
    result_row,
    with_queries,
)
from runtime.spark.spec import (
    SparkStageError,
    StageSpec,
    build_spec,
    save_state,
    saved_state,
    stage_matcher,
    with_fingerprint,
)
from runtime.spark.tables import DEFAULT_MAX_TABLE_ROWS, stage_tables
from runtime.spark.worker import Rows, freeze, spawn

if TYPE_CHECKING:
    from pyspark import Accumulator
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.streaming.state import GroupState

STATE_FORMAT = 2  # 2: per-stream clocks, held results


def match_stream(
    streams: Mapping[str, DataFrame],
    queries: str | Sequence[str] | Matcher,
    *,
    schema: str | None = None,
    allowed_lateness: float | None = None,
    partition_by: str = "auto",
    bucket_width: float | None = None,
    slots: int | None = None,
    order: str | None = None,
    emit: str = "arrival",
    control: DataFrame | None = None,
    max_window: float | None = None,
    shared_control: bool = False,
    tables: Mapping[str, DataFrame] | None = None,
    max_table_rows: int = DEFAULT_MAX_TABLE_ROWS,
    nulled: Accumulator[int] | None = None,
) -> DataFrame:
    """Match streaming DataFrames against the queries; a streaming DataFrame of results
    (append mode). Arguments as in :func:`runtime.spark.match_batch`;
    ``allowed_lateness`` defaults to the Matcher's (0 for query texts), a stream's own
    lateness comes from the Matcher's ``stream_lateness`` or the DDL (as the local
    clock takes it); ``slots`` is the number of state groups; ``emit="ordered"``
    releases results by the watermark (see the module docstring).

    ``control``: a streaming DataFrame of commands (``ts``, ``command``, ``query``)
    that register and unregister queries while the stage runs, ``queries`` being the
    ones active from the start (may be empty); ``max_window`` (required with it)
    bounds their MAXWINDOW. See :mod:`runtime.spark.control` for the rule and the
    output schema. ``shared_control``: the aggregate stage reads the same commands
    (:mod:`runtime.spark.aggregate_control`); aggregate queries are its, not errors.

    ``tables``: the rows of the queries' tables, as in :func:`runtime.spark.match_batch`
    (batch DataFrames, collected once when the stage is made; a restart with other
    rows needs a new checkpoint). Every state group loads them in every micro-batch, so
    keep them to reference data (``max_table_rows``). Not with ``emit="ordered"`` (a
    result is joined when it is found) nor with a control stream.

    ``nulled``: an accumulator counting the values past 64 bits written as NULL, as
    in :func:`runtime.spark.match_batch` (it grows with every micro-batch)."""
    from pyspark.sql import functions as F

    streaming_inputs(streams, "runtime.spark.match_batch")
    if control is not None and (max_window is None or not max_window >= 0 or not math.isfinite(max_window)):
        raise SparkStageError("a control stream needs max_window: the largest MAXWINDOW its queries may have (seconds)")
    if control is None and max_window is not None:
        raise SparkStageError("max_window is for queries that come through a control stream (control=)")
    matcher = stage_matcher(queries, schema, streams, order, may_be_empty=control is not None, views="match")
    if matcher.views and (emit != "arrival" or control is not None):
        raise SparkStageError(
            f"view {matcher.views[0]} needs emit='arrival' and no control stream in the streaming stage"
            + (
                ": under emit='ordered' results leave once the watermark has passed them, too late to be a stream "
                "other queries match"
                if emit != "arrival"
                else ": its queries are the stage's from the start"
            )
        )
    reference = stage_tables(matcher, tables, max_table_rows, streams)
    if reference is not None and emit == "ordered":
        raise SparkStageError(
            f"tables need emit='arrival' (table {matcher.tables[0]}): a result is joined with the table when "
            "it is found"
        )
    if reference is not None and control is not None:
        raise SparkStageError(
            f"the streaming stage does not run tables with a control stream yet (table {matcher.tables[0]})"
        )
    slots = shuffle_partitions(streams, slots, "slots")
    if emit not in ("arrival", "ordered"):
        raise SparkStageError(f"emit must be arrival or ordered, got {emit!r}")
    lateness = stream_lateness(matcher, allowed_lateness)
    options = {
        "partition_by": partition_by,
        "bucket_width": bucket_width,
        "allowed_lateness": allowed_lateness,
        "max_window": max_window,
        "stream_lateness": lateness,
        "emit": emit,
        "tables": reference,
    }
    spec = build_spec(matcher, slots=slots, **options)  # type: ignore[arg-type]
    if spec.mode == "time" and slots < 2:
        # consecutive buckets must not share a matcher, or a copied tuple would meet its original
        spec = build_spec(matcher, slots=2, **options)  # type: ignore[arg-type]
    if shared_control:
        if control is None:
            raise SparkStageError("shared_control is for queries that come through a control stream (control=)")
        spec = with_fingerprint(replace(spec, settings=(*spec.settings, ("shared_control", True))))
    ring = _slots(spec)
    # one watermark per source, the operator's the smallest: the local per-stream rule
    next(iter(streams.values())).sparkSession.conf.set("spark.sql.streaming.multipleWatermarkPolicy", "min")
    watermarked = unify(streams, spec, require_id=True, event_time=True, watermarks=lateness)
    if spec.mode == "key":
        grouped = watermarked.withColumn("_b", key_column(spec)).withColumn("_home", F.col("_b"))
    else:
        grouped = time_buckets(watermarked, spec)
    grouped = grouped.withColumn("_slot", F.pmod(F.col("_b"), F.lit(ring)))
    # integers as text: pandas would hold a NULL integer as a NaN double
    grouped = numbers_as_text(grouped, spec.streams, floats=False)
    output = result_schema(spec)
    if control is not None:
        grouped = grouped.unionByName(command_rows(control, ring), allowMissingColumns=True)
        output = control_schema()
    timeout = "NoTimeout"
    if emit == "ordered":
        # A slot holding results is woken when the watermark passes them, with or
        # without rows: an event-time timeout, which would drop the late rows the
        # function must report unless the event-time column is never late (the
        # watermark itself is computed above, on the real event time, per source).
        grouped = never_late(grouped)
        timeout = "EventTimeTimeout"
    return grouped.groupBy("_slot").applyInPandasWithState(
        partial(match_group, spec, nulled=nulled), output, STATE_SCHEMA, "append", timeout
    )


def write_files(
    results: DataFrame, path: str, checkpoint: str, *, fmt: str = "parquet", available_now: bool = False
) -> StreamingQuery:
    """Start writing ``results`` to a file sink (exactly once with its checkpoint)."""
    writer = results.writeStream.format(fmt).option("path", path).option("checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.outputMode("append").start()


def _slots(spec: StageSpec) -> int:
    return int(dict(spec.settings)["slots"])


# ------------------------------------------------------------- on the workers


def match_group(
    spec: StageSpec,
    key: tuple[Any, ...],
    frames: Iterator[pd.DataFrame],
    state: GroupState,
    nulled: Accumulator[int] | None = None,
) -> Iterator[pd.DataFrame]:
    """One slot in one micro-batch: restore its matcher, report late tuples, push the
    rest in (ts, stream, id) order, emit the results it owns (values past 64 bits
    NULL, reported: :func:`runtime.spark.common.report_nulled`), save the state."""
    slot = int(key[0])
    names = [name for name, _ in spec.value_types]
    dynamic = is_dynamic(spec)
    wm_ms = state.getCurrentWatermarkMs()
    watermark = wm_ms / 1000.0 if wm_ms > 0 else float("-inf")
    frozen = None
    queries = spec.queries
    foreign: set[str] = set()  # the aggregate stage's ids, when it shares the commands
    covers = " (slots and table rows included)" if spec.tables is not None else " (slots included)"
    saved = saved_state(state, STATE_FORMAT, spec.fingerprint, covers)
    if saved is not None:
        frozen = saved["matcher"]
        queries = tuple(saved.get("queries", spec.queries))
        foreign = set(saved.get("foreign", ()))
    rows = gathered(frames)
    out: list[tuple[Any, ...]] = []
    if dynamic and rows is not None and rows["_cmd"].notna().any():
        # commands first, at the micro-batch's start (runtime.spark.control)
        is_command = rows["_cmd"].notna().to_numpy()
        matcher, errors = apply_commands(spec, frozen, queries, rows[is_command], foreign)
        queries = active_queries(matcher)
        rows = rows[~is_command]
        if slot == 0:  # every group applies every command; one reports what was refused
            out.extend(error_row(*error) for error in errors)
    else:
        if dynamic and rows is not None:
            rows = rows[rows["_cmd"].isna().to_numpy()]
        matcher = spawn(with_queries(spec, queries) if dynamic else spec, frozen)
    late_seen: list[LateTuple] = []
    matcher.late_sink = late_seen.append
    released: list[Match] = []
    if watermark > -math.inf:
        # Spark's watermark is the matcher's (time='external'): it purges the window
        # and, under emit='ordered', releases the results older than it
        released += matcher.heartbeat(watermark)
    if rows is not None and len(rows):
        # in (ts, stream, id) order; the matcher reports what is older than the watermark
        rows = rows.sort_values(["ts", "_s", "id"], kind="stable", ignore_index=True)
        released += _push_runs(matcher, spec, rows)
    wide = 0
    for m in released:
        if _owns(spec, slot, m.ts):
            if dynamic:
                row, count = result_row(m.query, m.ts, dict(m.ids), m.values)
                out.append(row)
                wide += count
            else:
                out.append((m.query, m.ts, dict(m.ids), *(m.values.get(n) for n in names)))
    for t in late_seen:  # a copy's lateness is reported by the slot owning its ts, as results are
        if _owns(spec, slot, t.ts):
            out.append(late_row(t.stream, t.ts, t.id, len(CONTROL_COLUMNS) if dynamic else 3 + len(names)))
    dynamic_fields = {"queries": queries, "foreign": sorted(foreign)} if dynamic else {}
    save_state(state, STATE_FORMAT, spec.fingerprint, matcher=freeze(matcher), **dynamic_fields)
    first = matcher.next_release_ts
    if first is not None:
        # wake this slot once Spark's watermark has passed the first held result
        # (Spark wakes it when its watermark, whole milliseconds, is past the timestamp)
        state.setTimeoutTimestamp(max(wm_ms, math.floor(first * 1000)))
    if not out:
        return
    if dynamic:
        frame = control_frame(out)
    else:
        frame, count = results_frame(out, spec.value_types)
        wide += count
    report_nulled(nulled, wide, "streaming match stage")
    yield frame


def _owns(spec: StageSpec, slot: int, ts: float) -> bool:
    """Whether this slot reports a result (or late tuple) of this ts: in time mode the
    slot of the bucket holding ts; in key mode every slot owns what it finds."""
    return spec.mode == "key" or math.floor(ts / spec.bucket_width) % _slots(spec) == slot


def results_frame(rows: list[tuple[Any, ...]], value_types: Sequence[tuple[str, str]]) -> tuple[pd.DataFrame, int]:
    """Results and late tuples in :func:`~runtime.spark.common.result_schema`'s layout,
    a value of a string column as the text it prints as, one of an integer column past
    64 bits NULL (as the batch stage writes them); and how many were made NULL."""
    columns = [list(column) for column in zip(*rows, strict=True)]
    wide = 0
    for i, (_, kind) in enumerate(value_types, 3):
        if kind == "string":
            columns[i] = [text_of(v) for v in columns[i]]
        elif kind == "int64":
            columns[i], count = within_64_bits(columns[i])
            wide += count
    rows = list(zip(*columns, strict=True))
    return pandas_frame(rows, ["query", "ts", "ids", *(name for name, _ in value_types)], ["ts"]), wide


def _push_runs(matcher: Matcher, spec: StageSpec, rows: pd.DataFrame) -> list[Match]:
    """Push sorted rows run by run (one run: consecutive rows of one stream)."""
    found: list[Match] = []
    if not len(rows):
        return found
    s = rows["_s"].to_numpy()
    if rows["id"].isna().any():
        layout = spec.streams[int(s[int(np.flatnonzero(rows["id"].isna().to_numpy())[0])])]
        raise SparkStageError(f"stream {layout.name}: a tuple has a NULL id")
    columns: dict[str, list[Any]] = {}
    for layout in spec.streams:
        for ctype, fname in zip(layout.types, layout.fields, strict=True):
            columns[fname] = column_values(rows[fname], ctype)
    pushed = Rows(rows["ts"].to_numpy(dtype=np.float64), rows["id"].to_numpy(dtype=np.int64), columns)
    for start, end in runs(s):
        found.extend(pushed.push(matcher, spec.streams[int(s[start])], start, end))
    return found
