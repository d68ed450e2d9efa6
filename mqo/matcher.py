"""The public matcher: register streams and queries, push tuples, get matches.

A :class:`Matcher` owns a catalog, a :class:`~mqo.registry.QueryRegistry`, the
compiled plan (rebuilt lazily after registration changes, so bulk registration
compiles once) and the window state. Registration is all or nothing: a text with one
bad query registers none of them and raises :class:`~predicates.QueryError` naming
that query and where it is.

Queries are compiled through their shapes (:mod:`predicates.templates`): the first
query of a shape runs the whole front end, the rest are instantiated, which is what
makes registering a million queries a matter of seconds.
"""

from __future__ import annotations

import gc
import pickle
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from indexes import kernels
from indexes.stored import StoredTuple
from mqo.batch import EXACT, MatchBatch, SingleResults, columns_of, value_types
from mqo.clock import Clock
from mqo.engine import Engine, ResultBlock
from mqo.explain import explain_text
from mqo.plan import KIND_OF_LETTER, CompiledPlan, compile_plan
from mqo.prepare import ENGINE, SINGLE, STORE, PreparedBatch, prepare_batch
from mqo.registry import QueryRegistry
from mqo.reorder import AdaptivePolicy
from mqo.results import LateTuple, Match, TupleError
from mqo.rows import RowBuilder
from mqo.state import WindowState, auto_bucket_width
from mqo.stats import Counters
from predicates import DEFAULT_MAX_DISJUNCTS, Catalog, Kind, NormalizedQuery, QueryError, compile_queries
from predicates.errors import did_you_mean
from predicates.numbers import to_float
from predicates.templates import CompiledQuery, split_query_texts

ORDERS = ("AJW", "AWJ", "JAW", "JWA", "WAJ", "WJA")
KERNEL_PUSH_SLOTS = 4096
STORE_MODES = ("all", "candidates")
MISSING_MODES = ("error", "null")
SNAPSHOT_FORMAT = 3
LATE_KEPT = 10_000


def _plain_value(value: Any) -> Any:
    if isinstance(value, float | np.floating):
        return None if value != value else float(value)
    return value


def _late_data(late: LateTuple) -> dict[str, Any]:
    return {
        "stream": late.stream,
        "ts": late.ts,
        "id": late.id,
        "values": dict(late.values),
        "watermark": late.watermark,
        "allowed_lateness": late.allowed_lateness,
    }


class NeverMatchesWarning(UserWarning):
    """A registered query whose condition can never hold."""


def _since_text(since: float | Fraction) -> float | str:
    """A registration horizon as snapshot data (exact: a Fraction as its text)."""
    return since if isinstance(since, float) else str(since)


def _since_value(data: float | str) -> float | Fraction:
    return Fraction(data) if isinstance(data, str) else float(data)


def parse_order(order: str) -> tuple[Kind, Kind, Kind] | None:
    """``'AJW'`` or ``'static:AJW'`` as the three predicate types in evaluation order;
    None for ``'adaptive'``."""
    if order.lower() == "adaptive":
        return None
    text = order.upper()
    if text.startswith("STATIC:"):
        text = text[len("STATIC:") :]
    if text not in ORDERS:
        raise ValueError(
            f"unknown evaluation order {order!r}; use adaptive or one of {', '.join(ORDERS)} (or static:XYZ)"
        )
    return tuple(KIND_OF_LETTER[ch] for ch in text)  # type: ignore[return-value]


class Matcher:
    """Shared matching of many continuous queries over a few streams.

    ``schema`` is DDL text or a :class:`~predicates.Catalog` (streams can also be added
    later with :meth:`register_streams`). ``order`` is ``'adaptive'`` (the default: the
    order of the three predicate types is re-picked per stream from measured
    selectivity and cost, see :mod:`mqo.reorder`) or a static order such as ``'AJW'``.
    ``store='candidates'`` keeps only tuples that a registered multi-stream query can
    still use, which is faster but means a query
    registered later does not see tuples no query wanted when they arrived (the CLI
    and the Spark stages, whose queries are fixed, use it). ``missing='null'`` lets a
    pushed tuple leave out columns (they are NULL); by default that is an error, since a
    misspelled or forgotten column would otherwise silently never match.
    """

    def __init__(
        self,
        schema: str | Catalog | None = None,
        *,
        allowed_lateness: float = 0.0,
        order: str = "adaptive",
        late_sink: Callable[[LateTuple], None] | None = None,
        bucket_width: float | None = None,
        max_disjuncts: int = DEFAULT_MAX_DISJUNCTS,
        store: str = "all",
        check: bool = False,
        missing: str = "error",
    ) -> None:
        if bucket_width is not None and not bucket_width > 0:
            raise ValueError("bucket_width must be > 0")
        if store not in STORE_MODES:
            raise ValueError(f"store must be one of {', '.join(STORE_MODES)}, not {store!r}")
        if missing not in MISSING_MODES:
            raise ValueError(f"missing must be one of {', '.join(MISSING_MODES)}, not {missing!r}")
        self.missing = missing
        self.catalog = schema if isinstance(schema, Catalog) else Catalog()
        if isinstance(schema, str):
            self.catalog.register_ddl(schema)
        self.clock = Clock(allowed_lateness)
        self.order = parse_order(order) or (Kind.ATTRIBUTE, Kind.JOIN, Kind.WINDOW)
        self.order_name = order
        self.adaptive = parse_order(order) is None
        self.policy: AdaptivePolicy | None = None
        self.late_sink = late_sink
        self.late_tuples: deque[LateTuple] = deque(maxlen=LATE_KEPT)
        self.counters = Counters()
        self.max_disjuncts = max_disjuncts
        self.store = store
        self.check = check
        self.registry = QueryRegistry(self.catalog, max_disjuncts)
        self._bucket_width = bucket_width
        self._plan: CompiledPlan | None = None
        self._plan_version = 0
        self._state: WindowState | None = None
        self._engine: Engine | None = None
        self._rows: list[RowBuilder] = []
        self._next_position = 1
        self._frozen = False  # shares its queries with another matcher (restore(like=))
        self._seq = 0
        self._warned_late = False

    # ------------------------------------------------------------ registration

    def register_streams(self, ddl: str, source_name: str = "<schema>") -> list[str]:
        """Declare streams from DDL; returns their names."""
        if len(self.registry):
            raise QueryError("streams must be declared before queries are registered", None, None)
        if self._seq:
            raise QueryError("streams must be declared before tuples are pushed", None, None)
        schemas = self.catalog.register_ddl(ddl, source_name)
        self._plan = None
        self._state = None
        return [s.name for s in schemas]

    def compile(self, text: str, source_name: str = "<query>") -> list[NormalizedQuery]:
        """Parse, check and normalize query text without registering it."""
        return compile_queries(
            text,
            self.catalog,
            source_name=source_name,
            first_position=self._next_position,
            taken=self.registry.queries.keys(),
            max_disjuncts=self.max_disjuncts,
        )

    def register_query(self, text: str, query_id: str | None = None, source_name: str = "<query>") -> str:
        """Register one query; returns its id (``query_id``, else its ``Query ID:``, else its position)."""
        compiled = self._compile_texts([text], source_name)
        if len(compiled) != 1:
            raise QueryError(f"expected one query, found {len(compiled)}; use register_queries", None, None)
        query = compiled[0] if query_id is None else compiled[0].renamed(str(query_id))
        self._check_names([query], [text], source_name)
        self._add([query])
        return query.name

    def register_queries(self, texts: str | Iterable[str], source_name: str = "<queries>") -> list[str]:
        """Register many queries at once (a file's text, or a list of query texts).

        All or nothing; returns the ids in order.
        """
        sources = [texts] if isinstance(texts, str) else list(texts)
        # Compiling allocates many small objects and no reference cycles; the cyclic
        # collector would otherwise scan the growing registry again and again (half the
        # time of a million registrations).
        collecting = gc.isenabled()
        gc.disable()
        try:
            instances = self._compile_texts(sources, source_name)
            self._check_names(instances, sources, source_name)
            self._add(instances)
        finally:
            if collecting:
                gc.enable()
        return [inst.name for inst in instances]

    def _compile_texts(self, sources: list[str], source_name: str) -> list[CompiledQuery]:
        instances: list[CompiledQuery] = []
        compile_one = self.registry.compiler.compile
        for k, text in enumerate(sources):
            name = source_name if len(sources) == 1 else f"{source_name}[{k}]"
            try:
                for piece in split_query_texts(text):
                    instances.append(compile_one(piece, self._next_position + len(instances), name))
            except QueryError as err:
                # Report the error where it is in the whole text, not in the piece.
                compile_queries(
                    text,
                    self.catalog,
                    source_name=name,
                    first_position=self._next_position + len(instances),
                    max_disjuncts=self.max_disjuncts,
                )
                raise err from None
        return instances

    def _check_names(self, instances: list[CompiledQuery], sources: list[str], source_name: str) -> None:
        seen: set[str] = set()
        registered = self.registry.queries
        for inst in instances:
            if inst.name in registered or inst.name in seen:
                # the front end names the duplicate with its position
                for k, text in enumerate(sources):
                    compile_queries(
                        text,
                        self.catalog,
                        source_name=source_name if len(sources) == 1 else f"{source_name}[{k}]",
                        taken=self.registry.queries.keys(),
                        max_disjuncts=self.max_disjuncts,
                    )
                where = "is already registered" if inst.name in self.registry else "is given twice"
                raise QueryError(f"query id {inst.name} {where}", None, None)
            seen.add(inst.name)

    def _check_not_frozen(self) -> None:
        if self._frozen:
            raise QueryError(
                "this matcher shares its queries with another (Matcher.restore(..., like=...)); "
                "register or unregister queries on a matcher of its own",
                None,
                None,
            )

    def unregister_query(self, query_id: str) -> None:
        """Remove a query; it reports nothing more."""
        self._check_not_frozen()
        if query_id not in self.registry:
            raise KeyError(f"no query with id {query_id!r} is registered")
        self.registry.remove(query_id)
        self._plan = None

    def _add(self, instances: list[CompiledQuery], since_ts: float | list[float] | None = None) -> None:
        self._check_not_frozen()
        never = [q.name for q in instances if not q.disjuncts]
        if never:
            shown = ", ".join(never[:5]) + (f" and {len(never) - 5} more" if len(never) > 5 else "")
            warnings.warn(
                f"query {shown} can never match: its condition is always false "
                "(a contradiction, or a division by zero, whose value is NULL)",
                NeverMatchesWarning,
                stacklevel=3,
            )
        self.registry.add(instances, self.clock.horizon if since_ts is None else since_ts)
        self._next_position += len(instances)
        self._plan = None

    @property
    def query_ids(self) -> list[str]:
        return list(self.registry.queries)

    # ------------------------------------------------------------------- plan

    @property
    def plan(self) -> CompiledPlan:
        """The compiled plan for the current registrations (compiled on demand)."""
        if self._plan is None:
            self._plan_version += 1
            plan = compile_plan(self.registry, self._plan_version)
            width = self._bucket_width or auto_bucket_width(plan.retention_window, self.allowed_lateness)
            if self._state is None:
                self._state = WindowState(len(plan.streams), width)
                self._rows = [RowBuilder(schema, self.missing == "null") for schema in plan.streams]
            self._state.configure(plan.indexed_positions, width)
            self._attach_engine(plan)
            self._plan = plan
            if self.check:
                self._check_plan(plan)
        return self._plan

    def _check_plan(self, plan: CompiledPlan) -> None:
        """``check=True``: every structure's invariants, after a (re)compile."""
        self.registry._check()
        for kind in plan.lists:
            for lst in plan.lists[kind]:
                lst.covering._check()
                lst.kill._check()
        assert self._state is not None
        self._state._check()

    def _attach_engine(self, plan: CompiledPlan) -> None:
        """A fresh engine on ``plan`` and the state (and the adaptive policy's hooks)."""
        assert self._state is not None
        self._engine = Engine(plan, self._state, self.counters, check_qed=self.check)
        if self.adaptive:
            if self.policy is None or len(self.policy.streams) != len(plan.streams):
                self.policy = AdaptivePolicy([s.name for s in plan.streams])
            self.policy.list_pass.clear()  # list numbers change with the plan
            self._engine.list_observer = self.policy.observe_list

    def _process(self, t: StoredTuple, cand: int | None = None) -> list[ResultBlock]:
        """Run the engine on one tuple in the current order (adaptive or static)."""
        engine = self._engine
        assert engine is not None
        policy = self.policy
        if policy is None:
            return engine.process(t, self.order, cand)
        s = t.stream
        blocks = engine.process(t, policy.order_for(s), cand, measure=True)
        policy.observe(s, engine.phases)
        if policy.seen[s] % 256 == 1:
            engine.attr_lists[s] = policy.list_order(engine.attr_lists[s], engine.attr_lists[s])
        return blocks

    @property
    def state(self) -> WindowState:
        """The stored tuples (after the plan is compiled)."""
        self.plan  # noqa: B018 - compiles the plan and creates the state
        assert self._state is not None
        return self._state

    def explain(self) -> str:
        """Predicate lists in covering order, who uses what, each query's bits, and the
        evaluation order with the statistics behind it."""
        plan = self.plan
        if self.policy is None:
            return explain_text(self.registry, plan, order=f"static {''.join(k.name[0] for k in self.order)}")
        notes = self.policy.describe() or ["no tuples seen yet; starting with AJW for every stream"]
        return explain_text(self.registry, plan, order="adaptive", order_note=notes)

    def value_types(self) -> dict[str, Any]:
        """Arrow types of the SELECT values over the registered queries."""
        return value_types(self.registry)

    # --------------------------------------------------------------- matching

    @property
    def allowed_lateness(self) -> float:
        return self.clock.allowed_lateness

    @property
    def watermark(self) -> float:
        """The largest timestamp seen (tuples and heartbeats); -inf before any."""
        return self.clock.newest

    @property
    def retention_horizon(self) -> float:
        """Tuples older than this may have been purged."""
        return to_float(self.clock.horizon)

    @property
    def late_count(self) -> int:
        return self.counters.late

    def _stream(self, plan: CompiledPlan, stream: str) -> int:
        try:
            return plan.stream_number(stream)
        except KeyError:
            raise TupleError(f"unknown stream {stream!r}" + did_you_mean(stream, plan.catalog.names())) from None

    def push(
        self, stream: str, ts: float, values: Mapping[str, Any] | None = None, id: int | None = None
    ) -> list[Match]:
        """Match one tuple against every registered query; returns the results whose
        last tuple it is. A late tuple returns no results and goes to the late sink."""
        blocks = self._push_blocks(stream, ts, values, id)
        return MatchBatch(self.plan, blocks).matches() if blocks else []

    def _push_blocks(
        self, stream: str, ts: float, values: Mapping[str, Any] | None, id: int | None
    ) -> list[ResultBlock]:
        plan = self.plan
        s = self._stream(plan, stream)
        row = self._rows[s].build(ts, values, id)
        if plan.n_slots >= KERNEL_PUSH_SLOTS and plan.attr_lists[s] and not self.check:
            # Many queries: decide the tuple's attributes in the kernels (a batch of one)
            # rather than with the per-tuple engine's Python-int masks.
            schema = plan.streams[s]
            one = {"ts": [row[0]], **{c.name: [v] for c, v in zip(schema.columns, row[2:], strict=True)}}
            prepared = prepare_batch(
                plan,
                s,
                np.array([row[0]]),
                np.array([row[1]], np.int64),
                columns_of(one, schema)[2],
                self.store == "all",
            )
            return self.push_prepared(prepared, 0)
        self.counters.tuples += 1
        if self.clock.is_late(row[0]):
            self._late(plan, s, row)
            return []
        t = StoredTuple(s, self._seq, row)
        self._seq += 1
        engine = self._engine
        assert engine is not None and self._state is not None
        blocks = self._process(t)
        if self.store == "all":
            self._store(t)
        else:
            wanted = plan.multi_stream_slots & plan.stream_slots[s]
            if wanted & ~engine.attribute_kill(t, wanted):
                self._store(t)
        self._advance(row[0])
        return blocks

    def prepare(self, stream: str, batch: Any) -> PreparedBatch:
        """Decide the attribute predicates of a batch of one stream's tuples (no state
        changes besides consuming automatic ids). Feed its rows, in arrival order, to
        :meth:`push_prepared`."""
        plan = self.plan
        s = self._stream(plan, stream)
        ts, ids, columns = columns_of(batch, plan.streams[s], self.missing == "null")
        rows = self._rows[s]
        start = rows.next_id
        rows.restart_ids(start + len(ts))
        if ids is None:
            ids = np.arange(start, start + len(ts), dtype=np.int64)
        return prepare_batch(plan, s, ts, ids, columns, self.store == "all")

    def push_prepared(self, prepared: PreparedBatch, i: int) -> list[ResultBlock]:
        """Match row ``i`` of a prepared batch (rows in arrival order); result blocks."""
        ts = float(prepared.ts[i])
        self.counters.tuples += 1
        if self.clock.is_late(ts):
            self._late(self.plan, prepared.stream, prepared.row(i))
            return []
        blocks = self._matched_row(prepared, i, int(prepared.flags[i]))
        self._advance(ts)
        return blocks

    def replay(
        self, prepared: list[PreparedBatch], which: np.ndarray, rows: np.ndarray
    ) -> Iterator[tuple[int, list[ResultBlock]]]:
        """Match prepared rows in a given arrival order: row ``rows[j]`` of batch
        ``prepared[which[j]]`` arrives j-th. Exactly like :meth:`push_prepared` on each
        row in turn, but only rows that are late or that some query wants are visited
        one by one; yields (j, result blocks) for each visited row."""
        n = len(rows)
        if not n:
            return
        ts = np.empty(n, np.float64)
        flags = np.empty(n, np.int8)
        for k, prep in enumerate(prepared):
            chosen = which == k
            ts[chosen] = prep.ts[rows[chosen]]
            flags[chosen] = prep.flags[rows[chosen]]
        late, before = self.clock.late_mask(ts)
        self.counters.tuples += n
        plan = self.plan
        for j in np.flatnonzero(late | (flags != 0)).tolist():
            prep, i = prepared[int(which[j])], int(rows[j])
            if late[j]:
                self._late(plan, prep.stream, prep.row(i))
                continue
            self._advance(float(before[j]))
            blocks = self._matched_row(prep, i, int(flags[j]))
            self._advance(float(ts[j]))
            yield j, blocks
        accepted = ts[~late]
        if len(accepted):
            self._advance(float(accepted.max()))

    def _matched_row(self, prepared: PreparedBatch, i: int, flags: int) -> list[ResultBlock]:
        """Row i of a prepared batch, known not to be late."""
        blocks: list[ResultBlock] = []
        if not flags:
            return blocks
        plan = self.plan
        t = StoredTuple(prepared.stream, self._seq, prepared.row(i))
        self._seq += 1
        if flags & SINGLE:
            members: list[StoredTuple | None] = [None] * len(plan.streams)
            members[prepared.stream] = t
            block = ResultBlock(prepared.single_slots(i), members, t.row[0])
            blocks.append(block)
            self.counters.results += len(block)
        if flags & ENGINE:
            blocks.extend(self._process(t, prepared.engine_cand(i)))
        if flags & STORE:
            assert self._state is not None
            self._store(t)
        return blocks

    def push_batch(self, stream: str, batch: Any) -> MatchBatch:
        """Match a batch of one stream's tuples, in row order, as if pushed one by one.

        ``batch`` is an Arrow table or record batch, a pandas DataFrame or a dict of
        columns (``ts``, optional ``id``, the stream's columns). The attribute phase of
        all rows runs in numba kernels, single-stream results are read off the
        candidate bits of all rows at once, and only rows that multi-stream queries
        need go through the join engine. Results come back as a
        :class:`~mqo.batch.MatchBatch` (``len``, ``.to_arrow()``, ``.matches()``).
        """
        plan = self.plan
        if self.check:
            # QED checks need every tuple's attribute bits: go one by one
            s = self._stream(plan, stream)
            schema = plan.streams[s]
            ts, ids, columns = columns_of(batch, schema, self.missing == "null")
            exact = columns.pop(EXACT, {})
            blocks: list[ResultBlock] = []
            for i in range(len(ts)):
                values = {name: _plain_value(col[i]) for name, col in columns.items()}
                values.update({name: column.value(i) for name, column in exact.items()})
                blocks.extend(
                    self._push_blocks(schema.name, float(ts[i]), values, None if ids is None else int(ids[i]))
                )
            return MatchBatch(plan, blocks)
        prepared = self.prepare(stream, batch)
        out = MatchBatch(plan)
        n = len(prepared)
        if not n:
            return out
        late, _ = self.clock.late_mask(prepared.ts)
        flags = np.where(late, 0, prepared.flags).astype(np.int8)
        single_rows = np.flatnonzero(flags & SINGLE)
        if len(single_rows):
            sub = prepared.candidates(single_rows)
            counts = kernels.count_bits(sub, prepared.single_mask)
            row_of, slots = kernels.select_bits(sub, prepared.single_mask, counts)
            rows = [prepared.row(int(i)) for i in single_rows]
            out.singles.append(SingleResults(prepared.stream, rows, row_of, slots))
            self.counters.results += len(slots)
        rest = flags & ~SINGLE
        self.counters.tuples += n
        for i in np.flatnonzero(late | (rest != 0)).tolist():
            if late[i]:
                self._late(plan, prepared.stream, prepared.row(i))
                continue
            ts = float(prepared.ts[i])
            out.blocks.extend(self._matched_row(prepared, i, int(rest[i])))
            self._advance(ts)
        if (~late).any():
            self._advance(float(prepared.ts[~late].max()))
        return out

    def heartbeat(self, ts: float) -> None:
        """Advance time without a tuple, so quiet streams still purge their state."""
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts != ts:
            raise TupleError(f"heartbeat ts must be a number, got {ts!r}")
        self.plan  # noqa: B018 - make sure the state exists
        self._advance(float(ts))

    def _store(self, t: StoredTuple) -> None:
        assert self._state is not None
        self._state.insert(t)
        if self.check:
            self._state._check()

    def _advance(self, ts: float) -> None:
        if self.clock.advance(ts, self.plan.retention_window_exact):
            assert self._state is not None
            if self._state.purge(self.clock.purge_horizon()) and self.check:
                self._state._check()

    def _late(self, plan: CompiledPlan, s: int, row: tuple[Any, ...]) -> None:
        schema = plan.streams[s]
        late = LateTuple(
            stream=schema.name,
            ts=row[0],
            id=row[1],
            values={c.name: v for c, v in zip(schema.columns, row[2:], strict=True)},
            watermark=self.clock.newest,
            allowed_lateness=self.allowed_lateness,
        )
        self.counters.late += 1
        self.late_tuples.append(late)
        if self.late_sink is not None:
            self.late_sink(late)
        elif not self._warned_late:
            self._warned_late = True
            warnings.warn(
                f"late tuple on stream {late.stream}: {late.reason}; it is not matched. "
                "Late tuples are counted in Matcher.late_count and kept in Matcher.late_tuples; "
                "pass late_sink= to handle them, or raise allowed_lateness.",
                stacklevel=3,
            )

    # ------------------------------------------------------------- snapshots

    def snapshot(self, queries: bool = True) -> dict[str, Any]:
        """Everything needed to carry on elsewhere, as plain Python data: settings,
        streams, queries (text, id, registration horizon), stored tuples, clocks, the
        late tuples kept, and the adaptive order's statistics (so a restored matcher
        evaluates, and orders the results of a push, exactly as this one would).

        With ``queries=False`` only the clocks, the stored tuples and the counters are
        kept: restore that with ``like=`` a matcher that has the queries (a Spark
        worker restoring window state in every micro-batch does not re-register
        thousands of queries each time)."""
        state = self.state
        data: dict[str, Any] = {
            "format": SNAPSHOT_FORMAT,
            "settings": {
                "allowed_lateness": self.allowed_lateness,
                "order": self.order_name,
                "bucket_width": self._bucket_width,
                "max_disjuncts": self.max_disjuncts,
                "store": self.store,
                "missing": self.missing,
            },
            "next_position": self._next_position,
            "clock": self.clock.snapshot(),
            "seq": self._seq,
            "next_ids": [rows.next_id for rows in self._rows],
            "counters": self.counters.as_dict(),
            "state": state.snapshot(),
            "late": [_late_data(late) for late in self.late_tuples],
            "order": self._order_snapshot(),
        }
        if queries:
            data["ddl"] = self.catalog.ddl()
            data["queries"] = [(rq.name, rq.text, _since_text(rq.since_ts)) for rq in self.registry]
        return data

    @classmethod
    def restore(cls, snapshot: Mapping[str, Any], like: Matcher | None = None, **overrides: Any) -> Matcher:
        """A matcher that continues exactly where ``snapshot`` was taken.

        ``like``: a matcher with the same streams and queries whose compiled plan the
        restored one shares instead of registering and compiling them again (then
        neither may register or unregister queries afterwards; they would diverge).
        """
        if snapshot.get("format") != SNAPSHOT_FORMAT:
            raise ValueError(f"unsupported snapshot format {snapshot.get('format')!r}")
        settings = {**snapshot["settings"], **overrides}
        if like is None:
            if "queries" not in snapshot:
                raise ValueError("this snapshot has no queries (snapshot(queries=False)); restore it with like=")
            m = cls(snapshot["ddl"], **settings)
            names = [name for name, _, _ in snapshot["queries"]]
            instances = m._compile_texts([text for _, text, _ in snapshot["queries"]], "<snapshot>")
            instances = [query.renamed(name) for name, query in zip(names, instances, strict=True)]
            m._add(instances, since_ts=[_since_value(since) for _, _, since in snapshot["queries"]])
            plan = m.plan
        else:
            m = cls(like.catalog, **settings)
            m.registry = like.registry
            like._frozen = m._frozen = True
            plan = like.plan
            m._plan, m._plan_version = plan, like._plan_version
            m._rows = [RowBuilder(schema, m.missing == "null") for schema in plan.streams]
        m._next_position = snapshot["next_position"]
        m.clock.load(snapshot["clock"])
        m._seq = snapshot["seq"]
        for rows, next_id in zip(m._rows, snapshot["next_ids"], strict=True):
            rows.restart_ids(next_id)
        m.counters.load(snapshot["counters"])
        m._state = WindowState.restore(snapshot["state"], plan.indexed_positions)
        m._attach_engine(plan)
        m.late_tuples.extend(LateTuple(**late) for late in snapshot.get("late", ()))
        m._restore_order(snapshot.get("order"))
        return m

    def _order_snapshot(self) -> dict[str, Any] | None:
        """The adaptive order's statistics and the engine's order of attribute lists:
        with them a restored matcher evaluates, and so reports, in the same order."""
        if self.policy is None or self._engine is None:
            return None
        lists = [[lst.index for lst in per_stream] for per_stream in self._engine.attr_lists]
        return {"policy": pickle.dumps(self.policy), "attribute_lists": lists}

    def _restore_order(self, data: dict[str, Any] | None) -> None:
        if data is None or not self.adaptive or self._engine is None:
            return
        self.policy = pickle.loads(data["policy"])
        self._engine.list_observer = self.policy.observe_list
        plan = self.plan
        self._engine.attr_lists = [
            [plan.lists[Kind.ATTRIBUTE][i] for i in per_stream] for per_stream in data["attribute_lists"]
        ]
