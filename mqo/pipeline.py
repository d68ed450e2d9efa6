"""The way every tuple goes through a matcher, whichever door it came in by.

``push`` (one tuple), ``push_batch`` (a batch of one stream), and ``prepare`` +
``replay`` (batches of several streams in a given arrival order, the CLI's and the
Spark stages' way) all take the same steps:

1. **rows**: values are validated and become stored rows (:mod:`mqo.rows`,
   :func:`mqo.batch_input.columns_of`);
2. **lateness**: the clock decides which tuples are late (:mod:`mqo.clock`); a late
   tuple is reported (counted, kept, handed to the late sink), never matched;
3. **attributes**: a batch's attribute lists (one pushed tuple is a batch of one
   row) are decided by :func:`mqo.prepare.prepare_batch` in numba kernels, up front;
   under ``check=True`` each row is decided again list by list and compared;
4. **joins and windows**: the engine grows partial results through the window
   state (:mod:`mqo.engine`), in the order the reorderer picks; in a replay, the
   slots over exactly two declared streams are decided for all its rows at once by
   the columnar join step (:mod:`mqo.pair_step`), and the engine decides the rest;
5. **store and purge**: the tuple is kept for later ones, and old buckets go as the
   clock's horizon moves;
6. **emission**: under ``emit='arrival'`` the results go out at once; under
   ``emit='ordered'`` they are held (:mod:`mqo.emit`) and released in ``ts`` order
   once the watermark has passed them: after every tuple, heartbeat and idle
   declaration, on :meth:`Pipeline.release` and, at end of input, :meth:`Pipeline.flush`.

A stream read under several aliases of a query (a self-join) is read in roles, each an
engine stream of its own (:attr:`mqo.plan.CompiledPlan.live_roles`): a tuple, once
found not late (lateness is the declared stream's), is matched and stored in role 1,
then matched and stored in role 2, and so on. An assignment of tuples to the roles is
then found exactly once: when its newest tuple arrives, in the last role that tuple
holds (earlier roles already store the tuple, later ones do not yet).

A :class:`Pipeline` holds what these steps share: the compiled plan (attached anew
when registrations change), the window state, the engine, the adaptive policy, the
row builders and the clock.
"""

from __future__ import annotations

import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from indexes.stored import StoredTuple
from mqo.alone import alone_runs, alone_singles, in_arrival_order, single_block
from mqo.batch import MatchBatch, SingleResults
from mqo.batch_input import columns_of
from mqo.clock import Clock, Mark, clock_for
from mqo.config import MatcherConfig
from mqo.emit import HeldResults
from mqo.engine import Engine
from mqo.pair_step import PairSteps, steps_for
from mqo.pipeline_state import check_plan, fill_roles, load_pipeline, pipeline_snapshot
from mqo.plan import CompiledPlan
from mqo.prepare import (
    ENGINE,
    SINGLE,
    STORE,
    PreparedBatch,
    attribute_work,
    check_prepared,
    prepare_batch,
)
from mqo.reorder import AdaptivePolicy
from mqo.replay_chunks import run_cut, store_quietly, visited_chunk
from mqo.results import LateTuple, ResultBlock, TupleError
from mqo.row_layout import row_columns, row_layout
from mqo.rows import RowBuilder
from mqo.state import WindowState, auto_bucket_width, moved_state, stream_names
from mqo.stats import Counters
from predicates import Kind
from predicates.catalog import StreamSchema
from predicates.errors import did_you_mean
from predicates.numbers import decimal_of

LATE_KEPT = 10_000
ROWS_AT_ONCE = 1024  # a replay makes the stored rows of this many visited rows at a time
ROUND_SHARE = 4  # a push_batch takes the columnar join step if it keeps at most this many rows per row of the batch
DEFAULT_ORDER = (Kind.ATTRIBUTE, Kind.JOIN, Kind.WINDOW)


class Pipeline:
    def __init__(
        self,
        config: MatcherConfig,
        late_sink: Callable[[LateTuple], None] | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.now = now
        self.clock: Clock = clock_for(config, (), now)
        self.counters = Counters()
        self.late_sink = late_sink
        self.late_tuples: deque[LateTuple] = deque(maxlen=LATE_KEPT)
        self.order = config.static_order or DEFAULT_ORDER
        # A static order is kept as given: under a join- or window-first order an arriving
        # tuple's pairs are formed before its attribute predicates prune them (the adaptive
        # order, free to choose, applies the kernels' attribute decisions first)
        self.attributes_first = config.static_order is None or config.static_order[0] is Kind.ATTRIBUTE
        self.policy: AdaptivePolicy | None = None
        self.plan: CompiledPlan | None = None
        self.state: WindowState | None = None
        self.engine: Engine | None = None
        self.row_builders: list[RowBuilder] = []  # per declared stream: its tuples' values become stored rows
        self.seq = 0
        self.arrived = 0  # tuples that came in (late ones too): the arrival order of results
        self.held: HeldResults | None = HeldResults() if config.emit == "ordered" else None
        self._warned_late = False
        self._keep_window = decimal_of(config.keep_window)
        self._retention = self._keep_window  # the window kept: the plan's, at least keep_window
        # aggregate views (mqo.views, rule 3): the horizon stops at their last emission's watermark
        self.capped = False
        self.retention_cap: Mark | None = None
        self.replay_mark: Mark | None = None  # a replay's watermark after the row last yielded
        self.visits = 0  # rows replays visited or stored in quiet runs (mqo.replay_chunks)
        self.yield_at: int | None = None  # the visits after which a replay's caller wants a yield
        self.replayed = 0  # rows given to replays with aggregate views (Matcher._replay_emitting)
        self._pairs: PairSteps | None = None  # the replay's columnar join step, for self.plan
        self._advanced: tuple[Any, ...] | None = None  # what _advance was last given

    # ------------------------------------------------------------------ plan

    def attach(self, plan: CompiledPlan) -> None:
        """Run on ``plan`` from now on (the stored tuples stay)."""
        config = self.config
        self.whole_state()
        self._retention = max(plan.retention_window_exact, self._keep_window)
        width = config.bucket_width or auto_bucket_width(plan.retention_window, config.allowed_lateness)
        if self.state is None:
            self.state = WindowState(len(plan.streams), width)
        real = plan.streams[: plan.n_real]  # ids are the declared streams' and the views'
        renumbered = self.plan is not None and stream_names(self.plan.streams) != stream_names(plan.streams)
        if renumbered:  # a view came or went: streams after it moved
            assert self.plan is not None
            self.state = moved_state(self.state, self.plan, plan)
            builders = dict(zip(stream_names(self.plan.streams[: self.plan.n_real]), self.row_builders, strict=False))
            self.row_builders = [builders.get(schema.name) or self._builder(schema) for schema in real]
        if len(self.row_builders) != len(real):
            self.row_builders = [self._builder(schema) for schema in real]
        # clocks are the declared streams' (before views, tables): a view's time is its inputs'
        clocked = [schema for schema in real if not schema.view and not schema.table_key]
        names = [schema.name for schema in clocked]
        if self.clock.names != (names if config.time == "per-stream" else ["*"]) or not self.clock.declared:
            # streams are all declared before the first tuple, so the clock has no time yet
            self.clock = clock_for(config, clocked, self.now)
        self.state.configure(plan.indexed_positions, width)
        if self.plan is not None:
            fill_roles(self.state, self.plan, plan)
        if self.held is not None and self.plan is not None:
            self.held.renumber(self.plan, plan)
        self.plan = plan
        self.engine = Engine(plan, self.state, self.counters, check_qed=config.check)
        if config.static_order is None:
            if self.policy is None or len(self.policy.streams) != len(plan.streams) or renumbered:
                self.policy = AdaptivePolicy([s.name for s in plan.streams])
            self.policy.list_pass.clear()  # list numbers change with the plan
            self.engine.list_observer = self.policy.observe_list
        if config.check:
            check_plan(self, plan)

    def _builder(self, schema: StreamSchema) -> RowBuilder:
        return RowBuilder(schema, self.config.missing == "null")

    def _check_time(self, released: Mark | None) -> None:
        """``check=True``: the clock's invariants, and the held results' right after a
        release at the watermark ``released`` (None: none just now)."""
        self.clock._check()
        if self.held is not None:
            clock = self.clock
            passed = None if released is None else (lambda ts: clock.passed(ts, released))
            self.held._check(passed, None if self.plan is None else self.plan.n_slots, self.arrived)

    def stream_number(self, name: str) -> int:
        """The number of the declared stream ``name`` in the plan run on (else a
        :class:`~mqo.results.TupleError` naming the nearest stream)."""
        assert self.plan is not None
        try:
            return self.plan.stream_number(name)
        except KeyError:
            raise TupleError(f"unknown stream {name!r}" + did_you_mean(name, self.plan.catalog.names())) from None

    # ------------------------------------------------------------- one tuple

    def push(self, s: int, ts: Any, values: Mapping[str, Any] | None, id: int | None) -> list[ResultBlock]:
        """One tuple of stream number ``s``: a batch of one row, which takes the same
        steps as any batch; the result blocks whose last tuple it is."""
        plan = self.plan
        assert plan is not None
        row = self.row_builders[s].build(ts, values, id)
        ts_one, id_one = np.array([row[0]]), np.array([row[1]], np.int64)
        prepared = self._attributes(s, ts_one, id_one, row_columns(row, plan.per_stream(s, row_layout)), row)
        return self.push_prepared(prepared, 0)

    def prepare_derived(self, s: int, batch: Mapping[str, Any]) -> PreparedBatch:
        """Rows of the view numbered ``s`` made in one generation (columns with ``ts``
        and ``id``): counted as arrived, their attribute phase decided at once."""
        plan = self.plan
        assert plan is not None
        ts, ids, columns = columns_of(batch, plan.streams[s], self.config.missing == "null")
        assert ids is not None
        builder = self.row_builders[s]
        builder.restart_ids(builder.next_id + len(ts))  # (what building the rows one by one takes)
        self.counters.tuples += len(ts)
        self.arrived += len(ts)
        return self._attributes(s, ts, ids, columns)

    def push_derived(self, prepared: PreparedBatch, i: int) -> list[ResultBlock]:
        """Row i of a view's prepared rows matched and stored without the clock (a view's
        time is its inputs', :mod:`mqo.views`: never late); the blocks it ends."""
        self._touched(prepared.stream)
        return self._matched_row(prepared, i, int(prepared.flags[i]))

    def _attributes(
        self, s: int, ts: np.ndarray, ids: np.ndarray, columns: dict[str, Any], pushed: tuple[Any, ...] | None = None
    ) -> PreparedBatch:
        """The attribute phase of rows of stream ``s``, counted (and under
        ``check=True`` compared with the lists decided row by row)."""
        plan = self.plan
        assert plan is not None
        prepared = prepare_batch(plan, s, ts, ids, columns, self.config.store == "all", pushed, self.attributes_first)
        for part in (prepared, *prepared.roles):
            comparisons, bitset_ops = plan.per_stream(part.stream, attribute_work)
            self.counters.comparisons += comparisons * len(part)
            self.counters.bitset_ops += bitset_ops * len(part)
        if self.config.check:
            check_prepared(plan, prepared, self.attributes_first)
        return prepared

    # --------------------------------------------------------------- batches

    def prepare(self, s: int, batch: Any) -> PreparedBatch:
        """Decide the attribute predicates of a batch of stream ``s`` (no state changes
        besides consuming automatic ids)."""
        plan = self.plan
        assert plan is not None
        ts, ids, columns = columns_of(batch, plan.streams[s], self.config.missing == "null")
        builder = self.row_builders[s]
        start = builder.next_id
        builder.restart_ids(start + len(ts))
        if ids is None:
            ids = np.arange(start, start + len(ts), dtype=np.int64)
        return self._attributes(s, ts, ids, columns)

    def push_prepared(self, prepared: PreparedBatch, i: int) -> list[ResultBlock]:
        """Row ``i`` of a prepared batch (rows in arrival order)."""
        ts = float(prepared.ts[i])
        self.counters.tuples += 1
        self.arrived += 1
        s = prepared.stream
        self._touched(s)
        if self.clock.is_late(s, ts):
            self._late(s, prepared.row(i), self.clock.mark)
            self.clock.observe(s, ts)
            return self._emitted([])
        blocks = self._matched_row(prepared, i, int(prepared.flags[i]))
        self.clock.observe(s, ts)
        self._advance(self.clock.mark)
        return self._emitted(blocks)

    def replay(
        self,
        prepared: list[PreparedBatch],
        which: np.ndarray,
        row_indexes: np.ndarray,
        apart: np.ndarray | None = None,
        singles: list[SingleResults] | None = None,
        columnar: bool = True,
    ) -> Iterator[tuple[int, list[ResultBlock]]]:
        """Prepared rows in a given arrival order: row ``row_indexes[j]`` of
        ``prepared[which[j]]`` arrives j-th. Only rows that are late or that some query
        wants are visited one by one, save those whose only results are single-stream
        ones (:mod:`mqo.alone`; none of the slots of the bitset ``apart``): theirs are
        made a run at a time, and yielded row by row before the next row visited. Yields
        (j, result blocks) for each row visited or with such results. Given ``singles``,
        the results of the rows decided alone go there instead, a run at a time as
        columns (no block per row: for a caller that keeps a batch's results together).
        Unless ``columnar``, the engine decides every slot (no columnar join step).

        Under ``emit='ordered'`` the blocks yielded at row j are those released once
        row j is in (the watermark after it); what rows that are not visited release
        comes with the next visited row, and the rest with a last (n - 1, blocks)."""
        n = len(row_indexes)
        if not n:
            return
        held = self.held
        # (held results go in with their arrival numbers one by one: no runs of single-stream ones)
        ts, flags, own, streams, alone = in_arrival_order(prepared, which, row_indexes, apart, held is None)
        late, marks = self.clock.late_mask(streams, ts)
        marks.append(self.clock.mark)
        self.counters.tuples += n
        first = self.arrived + 1
        self.arrived += n
        alone &= ~late
        pairs = self._pair_steps() if columnar else None
        if not columnar:
            self.whole_state()
        paired: dict[int, list[ResultBlock]] = {}
        taken = 0  # the slots the pair steps decide, which the engine leaves out
        if pairs is not None:  # the slots over a pair of streams, for the whole round at once
            paired, found = pairs.run(prepared, which, row_indexes, late)
            self.counters.results += found
            taken = pairs.mask
            # (own and flags are one: a plan with roles has no steps)
            own = flags = pairs.engine_flags(prepared, which, row_indexes, own)
        visit = late | ((flags != 0) & ~alone)
        visit[list(paired)] = True  # (a row whose only work is the step's results is visited for them)
        visited = np.flatnonzero(visit)
        alone_at = np.flatnonzero(alone)
        runs_at = np.searchsorted(alone_at, visited)  # the rows decided alone before each visited row
        runs = runs_at.tolist()
        done = 0  # rows decided alone handed over
        advanced = -1  # the row whose watermark the horizon was last moved to
        done_all = False
        resume, engine = 0, self.engine  # (resume: the rows before it were stored in a quiet run)
        try:
            for v, (j, before) in enumerate(zip(visited.tolist(), runs, strict=True)):
                if v < resume:
                    continue
                if before > done:
                    yield from self._alone(prepared, which, row_indexes, alone_at[done:before], pairs, singles)
                    done = before
                c = v % ROWS_AT_ONCE
                if c == 0:  # the next visited rows' stored rows, candidates and quiet runs, a batch at a time
                    at = visited[v : v + ROWS_AT_ONCE]
                    before_at = runs_at[v : v + ROWS_AT_ONCE]
                    parts, quiet = visited_chunk(prepared, which, row_indexes, own, late, marks, at, paired, before_at)
                k, i, own_flags, is_late, row, cand, mark = parts[c]
                prep = prepared[k]
                if is_late:
                    self._late(prep.stream, row, marks[j])
                    continue
                if advanced != j:
                    self._advance(marks[j])
                count = quiet[c] > c and run_cut(
                    self, parts, c, engine.ends_nothing(prep.stream, ts[at[c : quiet[c]]], prep.engine_bits & ~taken)
                )
                self.visits += count or 1
                if count:  # rows that find nothing when they arrive: stored without a visit (mqo.replay_chunks)
                    store_quietly(self, parts[c : c + count], prepared)
                    resume, j, mark, blocks = v + count, int(at[c + count - 1]), parts[c + count - 1][6], []
                else:
                    blocks = self._matched_row(prep, i, own_flags, row, cand, taken)
                if j in paired:
                    blocks += paired[j]
                self.replay_mark = mark
                self._advance(mark)
                advanced = j + 1
                if pairs is not None:  # (the rows up to the last handed over are in, if the replay is left)
                    pairs.upto = j
                if held is None:
                    yield j, blocks
                    continue
                held.add(blocks, first + j)
                released = self._released(mark)
                if self.config.check:
                    self._check_time(mark)
                if released:
                    yield j, released
            if done < len(alone_at):
                yield from self._alone(prepared, which, row_indexes, alone_at[done:], pairs, singles)
            self._advance(self.clock.mark)
            done_all = True
        finally:  # (also when the replay is left: the step keeps the rows up to the last handed over)
            if pairs is not None and pairs.running:
                pairs.commit(self.clock.purge_horizon(), None if done_all else pairs.upto)
        released = [] if held is None else self._released(self.clock.mark)
        if self.config.check:
            self._check_time(self.clock.mark)
        if released:
            yield n - 1, released

    def _alone(
        self,
        prepared: list[PreparedBatch],
        which: np.ndarray,
        row_indexes: np.ndarray,
        positions: np.ndarray,
        pairs: PairSteps | None,
        singles: list[SingleResults] | None,
    ) -> Iterator[tuple[int, list[ResultBlock]]]:
        """The results of a replay's rows decided alone: yielded row by row, or put in
        ``singles`` if given (:meth:`replay`)."""
        if singles is None:
            yield from alone_runs(self, prepared, which, row_indexes, positions, pairs)
        else:
            singles += alone_singles(self, prepared, which, row_indexes, positions, pairs)

    def _pair_steps(self) -> PairSteps | None:
        """The replay's columnar join step, if the plan has pairs it takes (:func:`mqo.pair_step.steps_for`)."""
        self._pairs = steps_for(self, self._pairs)
        return self._pairs if self._pairs is not None and self._pairs.steps else None

    def _touched(self, s: int) -> None:
        """A tuple of stream ``s`` came in by another door than a replay."""
        if self._pairs is not None and s in self._pairs.streams:
            self.whole_state()

    def whole_state(self) -> WindowState | None:
        """The window state with every stored tuple in it (:meth:`mqo.pair_step.PairSteps.spill`)."""
        if self._pairs is not None:
            assert self.state is not None
            self.seq += self._pairs.spill(self.state, self.seq, self.clock.purge_horizon())
            self._pairs = None
        return self.state

    def push_batch(self, s: int, batch: Any) -> MatchBatch:
        """A batch of stream ``s``, in row order, as if pushed one by one: a replay of
        its rows in that order (:meth:`replay`), the results in arrival order."""
        plan = self.plan
        assert plan is not None
        prepared = self.prepare(s, batch)
        n = len(prepared)
        out = MatchBatch(plan)
        # the columnar join step lays out the rows it keeps (or, made anew, the stored
        # ones) again each round: a batch much smaller than those leaves the pairs to
        # the engine, so that a row costs the same whatever the batch size (a push of a
        # few rows between large batches does not copy the whole window each time)
        pairs = self._pairs
        if pairs is not None:
            laid_out = sum(len(step.kept) for step in pairs.steps)
        else:
            laid_out = len(self.state) if self.state is not None else 0
        columnar = n * ROUND_SHARE >= laid_out
        replayed = self.replay(
            [prepared], np.zeros(n, np.int64), np.arange(n, dtype=np.int64), singles=out.singles, columnar=columnar
        )
        for _, blocks in replayed:
            out.blocks.extend(blocks)
        return out

    def _matched_row(
        self,
        prepared: PreparedBatch,
        i: int,
        flags: int,
        row: tuple[Any, ...] | None = None,
        cand: int | None = None,
        skip: int = 0,
    ) -> list[ResultBlock]:
        """Row i of a prepared batch, known not to be late (``flags``: its role 1's
        work; then its further roles, each with its own flags); ``row``: its stored row,
        and ``cand``: its role 1's engine candidates (:meth:`PreparedBatch.engine_cand`), if made;
        ``skip``: slots the engine leaves out (the pair steps')."""
        blocks: list[ResultBlock] = []
        roles = [role for role in prepared.roles if role.flags[i]] if prepared.roles else prepared.roles
        if not flags and not roles:
            return blocks
        assert self.plan is not None
        t = StoredTuple(prepared.stream, self.seq, prepared.row(i) if row is None else row)
        self.seq += 1
        self._matched_flags(prepared, i, flags, t, blocks, cand, skip)
        for role in roles:
            self._matched_flags(role, i, int(role.flags[i]), StoredTuple(role.stream, t.seq, t.row), blocks)
        return blocks

    def _matched_flags(
        self,
        prepared: PreparedBatch,
        i: int,
        flags: int,
        t: StoredTuple,
        blocks: list[ResultBlock],
        cand: int | None = None,
        skip: int = 0,
    ) -> None:
        """What ``flags`` ask for tuple ``t``, row i of ``prepared`` (``cand``: its engine
        candidates, if made; ``skip``: slots the engine leaves out): results to ``blocks``."""
        assert self.plan is not None
        if not flags & ENGINE:
            cand = 0
        elif cand is None:
            cand = prepared.engine_cand(i)
        alone = cand & prepared.disjunct_bits  # single-stream queries' disjuncts (mqo.alone)
        plan = self.plan
        if flags & SINGLE or alone:
            blocks.append(single_block(plan, prepared, i, bool(flags & SINGLE), alone, t))
            self.counters.results += len(blocks[-1])
        if flags & ENGINE and (cand != alone or not alone):
            # the engine on t in the current order, adaptive or static
            engine, policy = self.engine, self.policy
            assert engine is not None
            if policy is None or not plan.order_matters[t.stream]:
                blocks += engine.process(t, self.order, cand, skip=skip | alone)
            else:
                blocks += policy.process(engine, t, cand, skip | alone)
        if flags & STORE:
            state = self.state
            assert state is not None
            state.insert(t)
            if self.config.check:
                state._check()

    # ------------------------------------------------------------ time, state

    def heartbeat(self, s: int | None, ts: float) -> list[ResultBlock]:
        """Stream ``s`` (every stream when None) has nothing more before ``ts``; the
        results this releases (``emit='ordered'``)."""
        self.clock.heartbeat(s, ts)
        self._advance(self.clock.mark)
        return self._emitted([])

    def set_idle(self, s: int) -> list[ResultBlock]:
        """Stream ``s`` stops holding time back until it speaks again; the results
        this releases (``emit='ordered'``)."""
        self.clock.set_idle(s)
        self._advance(self.clock.mark)
        return self._emitted([])

    def release(self) -> list[ResultBlock]:
        """The held results the watermark has passed by now (a stream may have gone
        idle since the last tuple: the clock is read again), in order."""
        self._advance(self.clock.current())
        return self._emitted([])

    def flush(self) -> list[ResultBlock]:
        """End of input: every held result, in order."""
        return [] if self.held is None else self.held.release_all()

    def holding(self) -> HeldResults:
        """The results held for ordered emission (an empty holder under ``emit='arrival'``)."""
        return HeldResults() if self.held is None else self.held

    def _emitted(self, blocks: list[ResultBlock]) -> list[ResultBlock]:
        """What goes out after the tuple that found ``blocks`` (the last to arrive):
        ``blocks`` themselves, or under ``emit='ordered'`` what the watermark releases."""
        if self.held is None:
            if self.config.check:
                self._check_time(None)
            return blocks
        self.held.add(blocks, self.arrived)
        released = self._released(self.clock.mark)
        if self.config.check:
            self._check_time(self.clock.mark)
        return released

    def _released(self, mark: Mark | None) -> list[ResultBlock]:
        """The held results older than the watermark ``mark``."""
        assert self.held is not None
        if mark is None or not self.held:
            return []
        clock = self.clock
        return self.held.release(lambda ts: clock.passed(ts, mark))

    def release_retention(self, mark: Mark | None) -> None:
        """Aggregate views emitted at the watermark ``mark``: the horizon may follow it."""
        if mark is not None:
            self.retention_cap = (
                mark if self.retention_cap is None else self.clock.lower(mark, self.retention_cap, True)
            )
            self._advance(mark)

    def _advance(self, mark: Mark | None) -> None:
        """Move the retention horizon to the watermark ``mark`` (with aggregate views:
        no further than their last emission's) and purge what falls behind it."""
        assert self.plan is not None and self.state is not None
        # (twice per visited row, mostly at the watermark it was last at: given all it
        # was given last time, the horizon, which only grows but on load, is past it)
        key = (mark, self.capped, self.retention_cap, self._retention, self.clock)
        if key == self._advanced:
            return
        self._advanced = key
        if self.capped:
            if self.retention_cap is None or mark is None:
                return
            mark = self.clock.lower(mark, self.retention_cap)
        moved = self.clock.advance(self._retention, mark)
        if moved and self.state.purge(self.clock.purge_horizon()) and self.config.check:
            self.state._check()

    def _late(self, s: int, row: tuple[Any, ...], mark: Mark | None) -> None:
        assert self.plan is not None
        watermark, lateness = (
            (-np.inf, self.clock.allowed_lateness) if mark is None else (mark[0], self.clock.lateness[mark[1]])
        )
        late = LateTuple.of_row(self.plan.streams[s], row, watermark, lateness)
        self.counters.late += 1
        self.late_tuples.append(late)
        if self.late_sink is not None:
            self.late_sink(late)
        elif not self._warned_late:
            self._warned_late = True
            warnings.warn(late.warning(), stacklevel=4)

    # ------------------------------------------------------------- snapshots

    def snapshot(self) -> dict[str, Any]:
        """The matching state as plain data (see :meth:`mqo.Matcher.snapshot`)."""
        self.whole_state()
        return pipeline_snapshot(self)

    def load(self, data: Mapping[str, Any], plan: CompiledPlan) -> None:
        """Continue from :meth:`snapshot` data, on ``plan`` (the same queries)."""
        self._pairs = None  # (the rows kept for the state replaced: not put into the one loaded)
        self._advanced = None  # (the clock loaded may be behind)
        load_pipeline(self, data, plan)
        if self.config.check:
            self._check_time(None)
