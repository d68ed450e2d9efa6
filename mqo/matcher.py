"""The public matcher: register streams and queries, push tuples, get matches.

A :class:`Matcher` is a facade over its :class:`~mqo.registrations.Registrations` (the
queries, and the plan compiled from them when next needed), the :class:`~mqo.pipeline.Pipeline`
(the one way every tuple is matched) and the pipeline's :class:`~mqo.clock.Clock`."""

from __future__ import annotations

import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from mqo.aggregation import AggregateBatch, Aggregator
from mqo.batch import MatchBatch
from mqo.clock import Clock, heartbeat_args
from mqo.config import ORDERS, MatcherConfig, parse_order
from mqo.emit import HeldResults
from mqo.explain import plan_account, render_explain
from mqo.memory import no_cyclic_gc
from mqo.pipeline import Pipeline
from mqo.plan import CompiledPlan
from mqo.prepare import PreparedBatch
from mqo.registrations import NeverMatchesWarning, Registrations
from mqo.registry import QueryRegistry
from mqo.reorder import AdaptivePolicy
from mqo.result_encoding import value_types
from mqo.results import LateTuple, Match, ResultBlock, TupleError
from mqo.snapshot import load_snapshot, restored_config, take_snapshot
from mqo.state import WindowState
from mqo.stats import Counters
from mqo.views import derive, feed
from predicates import Catalog
from predicates.numbers import to_float
from predicates.query_file import QueryFileParts
from predicates.template_scan import CHUNK_CHARS

# with aggregate views, ``replay`` emits their windows after this many visited rows
# (stored in quiet runs or visited: Pipeline.visits)
REPLAY_EMIT_EVERY = 64
# and after every row whose number among the rows replayed (counted over the replays,
# and kept in snapshots, so whatever the parts of the replay) is a multiple of this: rows
# that are aggregated and never visited (no match query reads their stream) still close
# windows as they come, and the slices no window needs any more go
REPLAY_EMIT_ROWS = 1 << 14

__all__ = ["ORDERS", "Matcher", "MatcherConfig", "NeverMatchesWarning", "parse_order"]


class Matcher:
    """Shared matching of many continuous queries over a few streams.

    ``schema`` is DDL text or a :class:`~predicates.Catalog` (more streams can come with
    :meth:`register_streams`). The settings are :class:`~mqo.config.MatcherConfig`'s, as
    keywords or as ``config``; ``late_sink`` receives every late tuple; ``now`` is the
    processing-time source of ``idle_timeout`` (monotonic seconds; injectable for tests).
    """

    def __init__(
        self,
        schema: str | Catalog | None = None,
        *,
        config: MatcherConfig | None = None,
        late_sink: Callable[[LateTuple], None] | None = None,
        now: Callable[[], float] = time.monotonic,
        **settings: Any,
    ) -> None:
        self.config = config.with_changes(**settings) if config is not None else MatcherConfig(**settings)
        self.catalog = schema if isinstance(schema, Catalog) else Catalog.from_ddl(schema or "")
        self.pipeline = Pipeline(self.config, late_sink, now)
        self.registrations = Registrations(self.catalog, self.config, self.pipeline)
        # sees every view row as (view, ts, id, values): what ``mqo match --output-view`` writes
        self.view_sink: Callable[[str, float, int, dict[str, Any]], None] | None = None
        # results found by aggregate views' rows that poll_aggregates and flush emitted
        self._pending: list[ResultBlock] = []

    @property
    def clock(self) -> Clock:
        return self.pipeline.clock

    @property
    def counters(self) -> Counters:
        return self.pipeline.counters

    @property
    def late_tuples(self) -> deque[LateTuple]:
        return self.pipeline.late_tuples

    @property
    def policy(self) -> AdaptivePolicy | None:
        """The adaptive order's statistics (None under a static order)."""
        return self.pipeline.policy

    @property
    def registry(self) -> QueryRegistry:
        """The match queries (:attr:`registrations` holds them, with the aggregate ones)."""
        return self.registrations.registry

    @property
    def aggregator(self) -> Aggregator | None:
        """The windowed aggregate queries (None before the first)."""
        return self.registrations.aggregator

    @property
    def allowed_lateness(self) -> float:
        return self.config.allowed_lateness

    @property
    def late_sink(self) -> Callable[[LateTuple], None] | None:
        return self.pipeline.late_sink

    @late_sink.setter
    def late_sink(self, sink: Callable[[LateTuple], None] | None) -> None:
        self.pipeline.late_sink = sink

    def register_streams(self, ddl: str, source_name: str = "<schema>") -> list[str]:
        """Declare streams from DDL (before any query or tuple); returns their names."""
        return self.registrations.register_streams(ddl, source_name)

    def register_query(self, text: str, query_id: str | None = None, source_name: str = "<query>") -> str:
        """Register one query; returns its id (``query_id``, else its ``Query ID:``, else its position)."""
        return self.registrations.register([text], source_name, True, None if query_id is None else str(query_id))[0]

    def register_queries(self, texts: str | Iterable[str], source_name: str = "<queries>") -> list[str]:
        """Register many queries (a file's text, or a list of texts), all or nothing; returns the ids in order.
        An open file is its text (not a text per line), named by its name."""
        if hasattr(texts, "read"):  # (iterating a file gives its lines, each no query on its own)
            source_name = str(getattr(texts, "name", source_name)) if source_name == "<queries>" else source_name
            texts = texts.read()
        if isinstance(texts, bytes):
            raise TypeError("register_queries takes text, not bytes: open the file in text mode, or decode it")
        return self.registrations.register([texts] if isinstance(texts, str) else list(texts), source_name)

    def register_query_file(self, path: str | os.PathLike[str], source_name: str | None = None) -> list[str]:
        """Register the queries of a query file (UTF-8, as ``register_queries`` takes its
        text), all or nothing; returns the ids in order. A large file of queries read
        from templates (subscriptions of a few shapes) is read in parts, never held
        whole (:mod:`predicates.query_file`); any other is read whole, and an error
        names its line in the file (``source_name``, else the path)."""
        parts = QueryFileParts.of(path, CHUNK_CHARS // 2)
        if parts is not None:
            with parts:
                try:
                    ids = self.registrations.register_read(parts)
                except (OSError, UnicodeDecodeError):  # (written over while read, or not UTF-8: the whole read says)
                    ids = None
            if ids is not None:
                return ids
        text = Path(path).read_text(encoding="utf-8")
        return self.registrations.register([text], str(path) if source_name is None else source_name)

    def register_table(
        self, template: str, table: Any, id_column: str | None = None, source_name: str = "<table>"
    ) -> list[str]:
        """Register one query per row of ``table`` (a pandas DataFrame, an Arrow table or
        a mapping of columns): ``template``'s ``:name`` parameters take the row's value of
        column ``name`` (the number as it prints). Ids: ``id_column``, else positions. All
        or nothing; returns the ids."""
        return self.registrations.register_table(template, table, id_column, source_name)

    def unregister_query(self, query_id: str) -> None:
        """Remove a query; it reports nothing more."""
        self.registrations.remove(query_id)

    def upsert_rows(self, table: str, rows: Any, ts: float | None) -> int:
        """Put rows into ``table`` (``CREATE TABLE``; a list of mappings of column ->
        value, an Arrow table or a pandas DataFrame), each a new version of its key that
        takes effect at event time ``ts`` (None: from the start); all rows or none (a
        bad row is a :class:`TupleError` naming it). A tuple reads a key's version as
        of its own ts (:mod:`mqo.tables`). Returns how many rows were put."""
        return self.registrations.tables.upsert(table, rows, ts, self._table_horizon())

    def delete_rows(self, table: str, keys: Iterable[Any], ts: float | None) -> int:
        """Delete keys of ``table`` from event time ``ts`` on (each key a value, a tuple
        in KEY order or a mapping of key column -> value); all or none. Returns how many."""
        return self.registrations.tables.delete(table, keys, ts, self._table_horizon())

    @property
    def tables(self) -> list[str]:
        """The declared tables' names, in declaration order."""
        return self.registrations.tables.names()

    def _table_horizon(self) -> float:
        """Older table versions superseded at or before this can go (no result reads them)."""
        return to_float(self.clock.horizon) if self.registrations.plan is not None else -math.inf

    @property
    def views(self) -> list[str]:
        """The registered views' names, in registration order (each also a query id)."""
        return [view.name for view in self.registrations.views]

    def view_readers(self, view: str) -> list[str]:
        """The ids of the queries (match, aggregate and views) reading ``view``."""
        return self.registrations.readers(view)

    @property
    def query_ids(self) -> list[str]:
        return self.registrations.ids()

    def ensure_plan(self) -> CompiledPlan:
        """The compiled plan of the current registrations: compiled now if they changed
        since the last one (every push and heartbeat does this first), else as it is."""
        return self.registrations.ensure_plan()

    @property
    def state(self) -> WindowState | None:
        """The stored tuples (None until the first plan is compiled; a query registered
        since reads them in its roles once :meth:`ensure_plan` attaches its plan)."""
        return self.pipeline.whole_state()

    def explain(self) -> str:
        """Predicate lists in covering order, who uses what, each query's bits, the
        evaluation order with its statistics, the aggregate queries' filters and slices,
        the view graph: :meth:`explain_data` as text."""
        return render_explain(self.explain_data())

    def explain_data(self) -> dict[str, Any]:
        """What :meth:`explain` prints, as plain data (JSON-serializable): ``streams``,
        ``sharing``, ``order`` (with the adaptive order's statistics per stream),
        ``lists`` (per type, in covering order, each predicate with its bit and readers),
        ``residuals``, ``queries`` (one per slot: streams, MAXWINDOW, bits),
        ``never_match``, ``aggregates``, ``views`` and, with tables, ``tables``."""
        whole = self.registrations.compiled_whole()  # list numbers as a fresh compile's
        registrations = self.registrations
        data = plan_account(
            self.registry,
            whole,
            self.pipeline.order,
            self.policy,
            self.aggregator,
            registrations.views,
            registrations.readers,
        )
        if registrations.tables:
            data["tables"] = registrations.tables.account()
        return data

    def value_types(self) -> dict[str, Any]:
        """Arrow types of the SELECT values over the registered queries (not views': a
        view's results are not output)."""
        return value_types(self.registry.records(), leave_out=self.registrations.views)

    @property
    def watermark(self) -> float:
        """The smallest over the active streams (``time='global'``: all) of their newest ts
        minus their lateness; older tuples are late. -inf until every active one spoke.
        Compiles the plan first if the registrations changed (:meth:`ensure_plan`): the
        clock is made over the streams the plan declares."""
        self.ensure_plan()
        return self.clock.watermark_now()

    def stream_watermarks(self) -> dict[str, float]:
        """Each stream's newest ts (tuples and heartbeats; -inf before any), by name
        (compiling the plan first if the registrations changed, as :attr:`watermark` does)."""
        self.ensure_plan()
        return dict(zip(self.clock.names, self.clock.newest, strict=True))

    @property
    def retention_horizon(self) -> float:
        """Tuples older than this may have been purged."""
        return to_float(self.clock.horizon)

    @property
    def late_count(self) -> int:
        return self.counters.late

    def late_probe(self, streams: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Which of these tuples (stream numbers and ts, in arrival order) would be late, without moving the clock."""
        return self.clock.probe(streams, ts)

    def heartbeat(self, stream_or_ts: str | float, ts: float | None = None) -> list[Match]:
        """Advance event time without a tuple: ``heartbeat('B', 100)`` says stream B has
        nothing more before 100 (so holds the watermark back no further); ``heartbeat(100)``
        says it of every stream. Quiet streams purge; returns the results this releases."""
        stream, ts = heartbeat_args(stream_or_ts, ts)
        self.ensure_plan()  # the heartbeat purges the stored tuples of the current plan
        return self._matches(self.pipeline.heartbeat(None if stream is None else self._stream(stream), ts))

    def set_idle(self, stream: str) -> list[Match]:
        """Declare ``stream`` idle (as after ``idle_timeout`` of silence) until it sends a
        tuple or a heartbeat; the results this releases (``emit='ordered'``; else none)."""
        return self._matches(self.pipeline.set_idle(self._stream(stream)))

    def _stream(self, stream: str) -> int:
        plan = self.ensure_plan()  # streams are numbered by the current plan
        number = self.pipeline.stream_number(stream)
        if plan.streams[number].table_key:
            raise TupleError(
                f"{plan.streams[number].name} is a table: its rows come from upsert_rows and delete_rows "
                "(mqo match --table), each a version from its ts on"
            )
        if plan.streams[number].view:
            raise TupleError(
                f"{plan.streams[number].name} is a view: its rows come from its query, and its time from its inputs"
            )
        return number

    def _derived(self, blocks: list[ResultBlock]) -> list[ResultBlock]:
        """``blocks`` with the rows of the views they make fed in (:func:`mqo.views.derive`)."""
        return derive(
            self.registrations.views, self.ensure_plan(), self.pipeline, blocks, self._ingest_view, self.view_sink
        )

    def _ingest_view(self, view: str, batch: Mapping[str, Any]) -> None:
        """A view's rows of one generation (columns with ts and id) for the aggregate
        queries reading it; a view row is never late (:mod:`mqo.views`)."""
        if len(batch["ts"]) and self.registrations.aggregating(view):
            self.registrations.ingest(view, batch)

    def _emit(self, flush: bool = False, mark: Any = None) -> list[ResultBlock]:
        """Emit the aggregate windows the watermark (``mark``, else the clock's now)
        has passed (``flush``: end of input, every window holding data); with
        aggregate views level by level, their rows fed in (:mod:`mqo.views`, rule 2):
        the results those rows find."""
        registrations = self.registrations
        if not registrations.views.aggregating:
            if not flush:
                registrations.emit_aggregates(self.clock)
            return []
        if not flush and mark is None:
            mark = self.clock.current()
        if mark is None and not flush:
            return []
        plan = self.ensure_plan()
        blocks: list[ResultBlock] = []
        for aggregator in registrations.aggregators():
            rows = registrations.emit_level(aggregator, self.clock, mark, flush)
            if rows:
                blocks += feed(registrations.views, plan, self.pipeline, rows, self._ingest_view, self.view_sink)
        if not flush:
            self.pipeline.release_retention(mark)  # every row still to come is at or after it (rule 3)
        return self._join_tables(blocks)

    def _join_tables(self, blocks: list[ResultBlock]) -> list[ResultBlock]:
        """``blocks`` with the results of queries reading tables joined by key as of
        their ts (:mod:`mqo.tables`); the rest as they are."""
        tables = self.registrations.tables
        return tables.join_blocks(self.ensure_plan(), blocks) if tables and blocks else blocks

    def take_results(self) -> MatchBatch:
        """The match results that rows of aggregate views emitted by :meth:`poll_aggregates`
        or :meth:`flush` found (``push``, ``push_batch``, ``heartbeat`` and ``replay``
        return theirs themselves), in the order found; taken once. (Not part of a
        snapshot: take them before one.)"""
        blocks, self._pending = self._pending, []
        return MatchBatch(self.ensure_plan(), blocks)

    def _matches(self, blocks: list[ResultBlock], emit_aggregates: bool = True) -> list[Match]:
        if emit_aggregates:
            blocks = blocks + self._emit()
        return MatchBatch(self.ensure_plan(), blocks).matches() if blocks else []

    def push(
        self, stream: str, ts: float, values: Mapping[str, Any] | None = None, id: int | None = None
    ) -> list[Match]:
        """Match one tuple against every registered query; returns the results whose
        last tuple it is (under ``emit='ordered'``: the results the watermark releases
        now, in ``ts`` order). A late tuple finds no results and goes to the late sink."""
        number = self._stream(stream)
        ingest = self.registrations.aggregating(stream) and not self.clock.is_late_value(number, ts)
        blocks = self.pipeline.push(number, ts, values, id)
        if ingest:
            self.registrations.ingest_row(stream, ts, values, id)
        if self.registrations.views:
            blocks = self._derived(blocks)
            ingest = self.aggregator is not None
        return self._matches(self._join_tables(blocks), ingest)

    def push_batch(self, stream: str, batch: Any) -> MatchBatch:
        """Match a batch of one stream's tuples (Arrow, pandas or a dict of columns: ``ts``,
        optional ``id``, the stream's columns) in row order, as if pushed one by one; the
        results as a :class:`~mqo.batch.MatchBatch` (``len``, ``to_arrow``, ``matches``).

        The cyclic garbage collector waits for the batch's end (:class:`~mqo.memory.no_cyclic_gc`):
        the rows stored in the window are many objects and make no cycles, and full
        collections over them while matching took a fifth of a run's time."""
        with no_cyclic_gc():
            return self._push_batch(stream, batch)

    def _push_batch(self, stream: str, batch: Any) -> MatchBatch:
        number = self._stream(stream)
        views = bool(self.registrations.views)
        if not self.registrations.aggregating(stream) and not views:
            out = self.pipeline.push_batch(number, batch)
            tables = self.registrations.tables
            return tables.join_batch(self.ensure_plan(), out) if tables else out
        if self.registrations.aggregating(stream):
            # the aggregator decides lateness on the clock as it is before this batch, as the pipeline does
            self.registrations.ingest(stream, batch, late_of=lambda ts: self.late_probe(np.full(len(ts), number), ts))
        if views:
            # row by row: a row's view rows go in before the next row moves the watermark (mqo.views)
            prepared = self.pipeline.prepare(number, batch)
            blocks = [b for i in range(len(prepared)) for b in self._derived(self.pipeline.push_prepared(prepared, i))]
            out = MatchBatch(self.ensure_plan(), blocks)
        else:
            out = self.pipeline.push_batch(number, batch)
        tables = self.registrations.tables
        if tables:
            out = tables.join_batch(self.ensure_plan(), out)
        out.blocks.extend(self._emit())  # a batch emits at its end (mqo.views); joined there
        return out

    def prepare(self, stream: str, batch: Any) -> PreparedBatch:
        """Decide the attribute predicates of a batch of one stream's tuples (no state
        changes besides consuming automatic ids); feed its rows to :meth:`replay`."""
        return self.pipeline.prepare(self._stream(stream), batch)

    def replay(
        self,
        prepared: list[PreparedBatch],
        which: np.ndarray,
        row_indexes: np.ndarray,
        *,
        last: bool = True,
    ) -> Iterator[tuple[int, list[ResultBlock]]]:
        """Match prepared rows in a given arrival order (row ``row_indexes[j]`` of batch
        ``prepared[which[j]]`` arrives j-th) as if pushed in turn; yields (j, result
        blocks) for each row visited (those late or that some query wants; a run of
        rows that find nothing when they arrive is stored at once and yielded as its
        last row, :mod:`mqo.replay_chunks`).

        A replay in parts (an input read a chunk at a time) goes on where the part
        before ended; ``last`` False for a part that is not the last (its end emits
        nothing; :meth:`end_replay` ends the replay)."""
        plan = self.ensure_plan()  # the pipeline runs on the current plan
        views = self.registrations.views
        # rows with results of view queries are visited: their view rows go in before the next row
        words = views.view_words(plan) if views else None
        if views and views.aggregating:
            return self._replay_emitting(prepared, which, row_indexes, words, last)
        replayed = self.pipeline.replay(prepared, which, row_indexes, words)
        if not views:
            return ((j, self._join_tables(blocks)) for j, blocks in replayed) if self.registrations.tables else replayed
        return ((j, self._join_tables(self._derived(blocks))) for j, blocks in replayed)

    def end_replay(self) -> list[ResultBlock]:
        """What the end of a replay emits (aggregate views' windows the watermark has
        passed), for a replay in parts whose last part was replayed with ``last=False``."""
        return self._emit() if self.registrations.views and self.registrations.views.aggregating else []

    def _replay_emitting(
        self,
        prepared: list[PreparedBatch],
        which: np.ndarray,
        row_indexes: np.ndarray,
        words: Any,
        end: bool = True,
    ) -> Iterator[tuple[int, list[ResultBlock]]]:
        """:meth:`replay` with aggregate views: their windows are emitted once
        :data:`REPLAY_EMIT_EVERY` rows were visited since the last time (in this replay
        or the parts before it), after each row whose number among the rows replayed is a
        multiple of :data:`REPLAY_EMIT_ROWS` (the replay made in pieces cut there, as a
        replay in parts is, with processing time read once for all of them:
        :meth:`Clock.one_reading`) and at the end (when changes only which row's results
        hold a result, not the results: :mod:`mqo.views`). Every point depends on the
        rows alone, not on how a caller cut them into parts."""
        pipeline = self.pipeline
        if pipeline.yield_at is None:  # (the visits at the next emission; a quiet run ends there)
            pipeline.yield_at = pipeline.visits + REPLAY_EMIT_EVERY
        n = len(row_indexes)
        # (counted apart from pipeline.arrived, which also counts the view rows made)
        cuts = range(REPLAY_EMIT_ROWS - pipeline.replayed % REPLAY_EMIT_ROWS, n + 1, REPLAY_EMIT_ROWS)
        with pipeline.clock.one_reading():
            yield from self._replay_pieces(prepared, which, row_indexes, words, [*cuts, n])
        if not end:
            return
        last = self._emit()
        if last and n:
            yield n - 1, last

    def _replay_pieces(
        self, prepared: list[PreparedBatch], which: np.ndarray, row_indexes: np.ndarray, words: Any, stops: list[int]
    ) -> Iterator[tuple[int, list[ResultBlock]]]:
        """The replay of :meth:`_replay_emitting`, a piece up to each of ``stops`` at a time."""
        pipeline = self.pipeline
        start = 0
        for stop in stops:
            if stop <= start:
                continue
            replayed = pipeline.replay(prepared, which[start:stop], row_indexes[start:stop], words)
            for j, blocks in replayed:
                out = self._join_tables(self._derived(blocks))
                due = pipeline.yield_at is not None and pipeline.visits >= pipeline.yield_at
                if due and pipeline.replay_mark is not None:
                    # at the watermark after this row: the clock is at the last row's already
                    pipeline.yield_at = pipeline.visits + REPLAY_EMIT_EVERY
                    out += self._emit(mark=pipeline.replay_mark)
                yield start + j, out
            pipeline.replayed += stop - start
            if pipeline.replayed % REPLAY_EMIT_ROWS == 0:  # (the clock is as after the piece's last row)
                out = self._emit(mark=pipeline.clock.mark)
                if out:
                    yield stop - 1, out
            start = stop

    def poll_aggregates(self) -> AggregateBatch:
        """The aggregate rows not yet taken, one per (query, window, group) whose window the
        watermark has passed (also after :meth:`replay`, which emits nothing itself)."""
        self._pending += self._emit()
        return self.registrations.take_aggregates()

    def flush(self) -> AggregateBatch:
        """End of input: emit every window that holds data; returns every aggregate row
        not yet taken (the match results aggregate views' rows find: :meth:`take_results`)."""
        self._pending += self._emit()
        self._pending += self._emit(flush=True)
        return self.registrations.take_aggregates(flush=True)

    def release(self) -> MatchBatch:
        """``emit='ordered'``: the held results the watermark has passed by now, in ``ts``
        order (call it when no tuple comes: a stream may have gone idle since)."""
        plan = self.ensure_plan()
        blocks = self.pipeline.release()
        return MatchBatch(plan, blocks + self._emit())

    def flush_results(self) -> MatchBatch:
        """End of input under ``emit='ordered'``: every held result, in ``ts`` order
        (results released by later tuples start a new ordered run)."""
        return MatchBatch(self.ensure_plan(), self.pipeline.flush())

    @property
    def next_release_ts(self) -> float | None:
        """The smallest ``ts`` of a held result (None when none is held)."""
        return self._held().first_ts

    @property
    def held_results(self) -> int:
        """How many results ``emit='ordered'`` holds (``ts`` at or after the watermark)."""
        return len(self._held())

    def _held(self) -> HeldResults:
        if self.pipeline.held is not None:
            self.ensure_plan()  # a query unregistered since withdraws its held results
        return self.pipeline.holding()

    def snapshot(self, queries: bool = True) -> dict[str, Any]:
        """Everything needed to carry on elsewhere, as plain data (dicts, lists, numbers,
        strings, numpy arrays; its parts: :mod:`mqo.snapshot`), which
        :func:`mqo.encode_snapshot` writes as bytes (docs/SNAPSHOTS.md); a restored
        matcher evaluates exactly as this one would.
        ``queries=False`` leaves the match queries out: restore that ``like=`` a matcher
        that has them (as a Spark worker does in every micro-batch)."""
        return take_snapshot(self.config, self.registrations, self.pipeline, queries)

    @classmethod
    def restore(
        cls,
        snapshot: Mapping[str, Any],
        like: Matcher | None = None,
        late_sink: Callable[[LateTuple], None] | None = None,
        **overrides: Any,
    ) -> Matcher:
        """A matcher that continues exactly where ``snapshot`` was taken. ``like``: a
        matcher with the same streams and queries, whose compiled plan it shares instead
        of compiling them again (neither may then register or unregister queries: they
        would diverge); its match queries must be the snapshot's (ids and texts), else a
        :class:`~mqo.SnapshotError` names the ids that differ."""
        config = restored_config(snapshot, like is not None, overrides)
        m = cls(snapshot["ddl"] if like is None else like.catalog, config=config, late_sink=late_sink)
        load_snapshot(snapshot, m.registrations, m.pipeline, None if like is None else like.registrations)
        return m
