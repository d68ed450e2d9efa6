"""Queries that come and go while a streaming stage runs: a control stream of commands.

>>> commands = spark.readStream.schema("ts double, command string, query string").json("in/commands")
>>> results = match_stream(streams, "", schema=ddl, control=commands, max_window=60)

A **command** is a row ``(ts, command, query)``: ``command`` is ``register`` (``query``
holds query text, one or more queries, with or without ``Query ID:`` headers) or
``unregister`` (``query`` holds a query id). ``ts`` is the command's event time.

**When a command takes effect.** At the start of the micro-batch that brings it, before
that micro-batch's tuples; the commands of one micro-batch in ``(ts, command, query)``
order. So a query registered in micro-batch k reports every result whose last tuple
arrives in micro-batch k or later, and the earlier tuples of such a result may be any
tuples not late and within its MAXWINDOW (the stage keeps ``max_window`` of window,
whatever the queries registered, and tuples no query wants yet). A query unregistered
in micro-batch k reports nothing from micro-batch k on. It is what
:meth:`mqo.Matcher.register_queries` and :meth:`~mqo.Matcher.unregister_query` do
between the pushes of a local matcher with ``keep_window=max_window``, fed each
micro-batch's commands and then its tuples.

**Where the query set lives.** Every command goes to every state group (one copy per
slot), and each group keeps the ids and texts of its active queries in its state next
to its window, so a restart from the checkpoint carries the query set along with the
window, exactly once like the results. Workers cache one compiled plan per query set;
a micro-batch with commands compiles its groups' queries again (registration is cheap
next to a micro-batch, and a group's state then never depends on a plan it cannot
rebuild).

**Bad commands never stop the job.** A query that does not compile (reported with its
line and column), one whose MAXWINDOW exceeds ``max_window``, an aggregate query (they
run in :mod:`runtime.spark.aggregate_control`), an id already registered, an unregister
of an unknown id, an unknown command: each becomes a row of the output with ``error``
set (``query`` the id when known, ``ts`` the command's) and changes nothing. Only state
group 0 reports it, so it is reported once. With ``shared_control`` the aggregate stage
reads the same commands and aggregate queries are its (:func:`apply_shared`).

**Output** (:func:`control_schema`): ``query string, ts double, ids map<string,bigint>,
values map<string,string>, error string``. Value names differ between queries that come
and go, so values travel as a map, each value as the text it prints as (exact, see
:func:`mqo.batch.text_of`; an integer past 64 bits NULL, as the local engine writes
it). Late tuples: ``query`` NULL, ``ids = {stream: id}``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pandas as pd

from mqo import Matcher, MqoError, text_of
from runtime.spark.common import fitted, pandas_frame
from runtime.spark.spec import SparkStageError, StageSpec
from runtime.spark.worker import spawn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

COMMANDS = ("register", "unregister")
COMMAND_COLUMNS = ("ts", "command", "query")
CONTROL_COLUMNS = ("query", "ts", "ids", "values", "error")  # the output's, see control_schema


def control_schema() -> StructType:
    """The stage's output schema when its queries come through a control stream."""
    from pyspark.sql import types as T

    types = {
        "query": T.StringType(),
        "ts": T.DoubleType(),
        "ids": T.MapType(T.StringType(), T.LongType()),
        "values": T.MapType(T.StringType(), T.StringType()),
        "error": T.StringType(),
    }
    return T.StructType([T.StructField(name, types[name]) for name in CONTROL_COLUMNS])


def command_rows(control: DataFrame, slots: int) -> DataFrame:
    """The commands in the stage's row layout (``_cmd``, ``_text``, ``ts``), one copy
    per state group (``_slot``), so that every group applies every command."""
    if not control.isStreaming:
        raise SparkStageError("control: not a streaming DataFrame (Spark cannot union it with the streams)")
    names = {f.name.lower(): f.name for f in control.schema.fields}
    missing = [c for c in COMMAND_COLUMNS if c not in names]
    if missing:
        raise SparkStageError(
            f"control: the command stream needs the columns {', '.join(COMMAND_COLUMNS)}; missing {', '.join(missing)}"
        )
    return control.selectExpr(
        f"CAST(`{names['ts']}` AS DOUBLE) AS ts",
        f"CAST(`{names['command']}` AS STRING) AS _cmd",
        f"CAST(`{names['query']}` AS STRING) AS _text",
        f"explode(sequence(0, {slots - 1})) AS _slot",
    )


def is_dynamic(spec: StageSpec) -> bool:
    """Whether the stage's queries come through a control stream."""
    return "keep_window" in dict(spec.settings)


def with_queries(spec: StageSpec, queries: Sequence[tuple[str, str]]) -> StageSpec:
    """``spec`` for another query set (the worker's plan cache is keyed on it)."""
    queries = tuple((str(name), str(text)) for name, text in queries)
    if queries == spec.queries:
        return spec
    blob = json.dumps([spec.fingerprint, list(queries)])
    return replace(spec, queries=queries, fingerprint=hashlib.sha256(blob.encode()).hexdigest()[:32])


def active_queries(matcher: Matcher) -> tuple[tuple[str, str], ...]:
    return tuple((rq.name, rq.text) for rq in matcher.registry)


def apply_commands(
    spec: StageSpec,
    frozen: dict[str, Any] | None,
    queries: Sequence[tuple[str, str]],
    commands: pd.DataFrame,
    foreign: set[str] | None = None,
) -> tuple[Matcher, list[tuple[str | None, float, str]]]:
    """A group's matcher after this micro-batch's commands, and the errors as
    ``(query id or None, ts, message)``. ``commands`` has ``ts``, ``_cmd``, ``_text``;
    ``foreign``: the ids the aggregate stage holds, when it shares the commands
    (updated in place).

    The group's matcher is restored whole (its queries compiled again), since a matcher
    sharing a cached plan cannot change its queries.
    """
    base = spawn(with_queries(spec, queries), frozen)
    snap = base.snapshot()
    # a registration horizon of -inf everywhere: with keep_window, the tuples before a
    # group's horizon cannot be in a new result anyway, and then a group's state never
    # depends on when it happened to register a query
    snap["queries"] = [(name, text, -math.inf) for name, text, _ in snap["queries"]]
    snap["tables"] = [{**table, "since": -math.inf} for table in snap.get("tables", ())]
    matcher = Matcher.restore(snap)
    errors: list[tuple[str | None, float, str]] = []
    shared = dict(spec.settings).get("shared_control", False)
    for ts, command, text in ordered_commands(commands):
        error = apply_shared(
            matcher,
            "match",
            foreign if foreign is not None else set(),
            ts,
            command,
            text,
            shared=shared,
            max_window=spec.max_window,
        )
        if error is not None:
            errors.append((error[0], ts, error[1]))
    return matcher, errors


def ordered_commands(commands: pd.DataFrame) -> list[tuple[float, Any, Any]]:
    """A micro-batch's commands (``ts``, ``_cmd``, ``_text``) in the order they are
    applied: by ``(ts, command, query)``, NULLs as empty text."""
    order = commands.assign(_c=commands["_cmd"].fillna(""), _t=commands["_text"].fillna(""))
    order = order.sort_values(["ts", "_c", "_t"], kind="stable")
    columns = (order["ts"].tolist(), order["_cmd"].tolist(), order["_text"].tolist())
    return [(float(ts), command, text) for ts, command, text in zip(*columns, strict=True)]


OTHER_STAGE = {
    "match": "aggregate queries run in runtime.spark.aggregate_streaming.aggregate_stream(control=...)",
    "aggregate": "match queries run in runtime.spark.streaming.match_stream(control=...)",
}


def apply_shared(
    matcher: Matcher,
    kind: str,
    foreign: set[str],
    ts: float,
    command: Any,
    text: Any,
    *,
    shared: bool = False,
    max_window: float | None = None,
    check: Callable[[list[str]], tuple[str, str] | None] | None = None,
) -> tuple[str | None, str] | None:
    """One command on a group's matcher in a stage running queries of ``kind``
    (``match`` or ``aggregate``); ``(id, message)`` when it is refused and this stage
    is the one to report it. All or nothing, as :meth:`mqo.Matcher.register_queries`.

    ``shared``: the match stage and the aggregate stage read the same commands. Each
    registers the queries of its kind and keeps the other kind's ids in ``foreign``
    (so an id is taken once across both); the match stage reports what belongs to
    neither (a text that does not compile, one of both kinds, a duplicate id, an
    unregister of an unknown id), each stage what only it can see. ``max_window``:
    the match stage's bound on MAXWINDOW (the aggregate stage needs it to know which
    match queries that stage refuses). ``check``: the stage's own test of its new
    queries, an ``(id, message)`` to refuse them.
    """
    reports_all = kind == "match" or not shared

    def reported(error: tuple[str | None, str]) -> tuple[str | None, str] | None:
        return error if reports_all else None

    verb = str(command).strip().lower() if command is not None else ""
    if verb not in COMMANDS:
        return reported((None, f"unknown command {command!r} at ts {ts!r}; use register or unregister"))
    if text is None or not str(text).strip():
        return reported((None, f"{verb} at ts {ts!r}: no query given"))
    if verb == "unregister":
        name = str(text).strip().rstrip(";").strip()
        if name in matcher.query_ids:
            matcher.unregister_query(name)
            return None
        if name in foreign:
            foreign.discard(name)
            return None
        return reported((name, f"unregister at ts {ts!r}: no query {name!r} is registered"))
    where = f"<register at ts {ts!r}>"
    # the text's own errors (syntax, names, ids given twice), found on a matcher without
    # state, so that each stage, whatever it holds, judges the text alike (on a copy of
    # the catalog: a view the text declares must not land in the group's)
    probe = Matcher(matcher.catalog.ddl(), config=matcher.config)
    try:
        ids = probe.register_queries(str(text), source_name=where)
    except MqoError as exc:
        return reported((getattr(exc, "query", None), str(exc)))
    if probe.views:
        # a view's rows feed the queries reading it from registration on, which the
        # slots' copies of the commands cannot yet keep in step: refused, by either stage
        return reported(
            (
                probe.views[0],
                f"view {probe.views[0]}: views do not run where queries come through a control stream "
                "(mqo serve --engine spark); give them to runtime.spark.match_stream from the start, or use "
                "mqo serve --engine local",
            )
        )
    matches = [q for q in ids if q in probe.registry.queries]
    mine = matches if kind == "match" else [q for q in ids if q not in probe.registry.queries]
    wide = [q for q in matches if max_window is not None and _too_wide(probe, q, max_window)]
    if len(mine) != len(ids):
        other = next(q for q in ids if q not in mine)
        if not shared:
            return other, f"query {other}: {OTHER_STAGE[kind]}"
        if mine:
            return reported(
                (
                    ids[0],
                    f"register at ts {ts!r}: a text of both match and aggregate queries; register "
                    "them in texts of their own",
                )
            )
    taken = [q for q in ids if q in foreign or q in matcher.query_ids]
    if taken:
        message = f"query id {taken[0]} is already registered"
        if mine and taken[0] in matcher.query_ids:
            try:  # the matcher's own message, which points at the id in the text
                matcher.register_queries(str(text), source_name=where)
            except MqoError as exc:
                if getattr(exc, "span", None) is not None:
                    message = str(exc)
            else:  # cannot happen (the id is taken); leave nothing behind if it does
                for q in ids:
                    matcher.unregister_query(q)
        return reported((taken[0], message))
    if not mine:
        # the other stage's queries: their ids are taken, unless that stage refuses them
        if not (kind == "aggregate" and wide):
            foreign.update(ids)
        return None
    if wide:
        q = wide[0]
        return q, (
            f"query {q}: MAXWINDOW {probe.registry.queries[q].maxwindow:g} s is larger than the stage's "
            f"max_window {max_window:g} s; restart the stage with a larger max_window to run it"
        )
    try:
        ids = matcher.register_queries(str(text), source_name=where)
    except MqoError as exc:  # what only this matcher's state refuses (a landmark window after the first tuple)
        named = getattr(exc, "query", None) or next((q for q in ids if f"query {q}:" in str(exc)), None)
        return named, str(exc)
    refused = check(ids) if check is not None else None
    if refused is not None:
        for q in ids:
            matcher.unregister_query(q)
    return refused


def _too_wide(probe: Matcher, query: str, max_window: float) -> bool:
    rq = probe.registry.queries[query]
    return rq.is_multi_stream and rq.maxwindow > max_window


def result_row(query: str, ts: float, ids: dict[str, int], values: dict[str, Any]) -> tuple[tuple[Any, ...], int]:
    """A result as an output row, each value as its text (an integer past 64 bits
    NULL, as the local engine writes it); and how many values were made NULL."""
    kept, wide = fitted(list(values.values()))
    texts = {name: None if v is None else text_of(v) for name, v in zip(values, kept, strict=True)}
    return (query, ts, ids, texts, None), len(wide)


def error_row(query: str | None, ts: float, message: str) -> tuple[Any, ...]:
    return (query, ts, None, None, message)


def control_frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """Results, late tuples and refused commands as a state group yields them."""
    return pandas_frame(rows, CONTROL_COLUMNS, ["ts"])
