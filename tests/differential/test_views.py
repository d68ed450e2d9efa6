"""Views against their exact reference (tests/references/exact_views.py).

Random view graphs up to depth 3 (views over streams, over views, joins of a view with a
stream, self-joins of a view), queries reading them, late tuples, and registrations
and removals while tuples flow; every result is compared exactly (query, ts, values,
and the ids of stream members: a view row's id is its number in the order the engine
makes them, which the reference does not model within one tuple's results). Aggregates
over a view of a join are compared with the aggregate reference over the reference's
view rows; every path: push, push_batch, prepare + replay, snapshot and restore.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import mqo
from mqo.batch import MatchBatch
from mqo.snapshot_codec import decode_snapshot, encode_snapshot
from tests.references.agg_reference import RefQuery, evaluate
from tests.references.exact_language import (
    FLOAT,
    INTEGER,
    And,
    Bin,
    Cmp,
    Col,
    Column,
    Duration,
    Item,
    Num,
    Or,
    Query,
    Schema,
)
from tests.references.exact_language import Stream as RefStream
from tests.references.exact_views import View, ViewReference, view_rows
from tests.references.reference import Result, exact_result

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")

SCHEMA = Schema(
    (
        RefStream("B", (Column("x", INTEGER), Column("y", FLOAT))),
        RefStream("H", (Column("x", INTEGER), Column("y", FLOAT))),
    )
)
VALUES_X = (0, 1, 2, 3)
VALUES_Y = (0.5, 1.5, 2.3, 0.3)
TIMES = tuple(Fraction(k, 2) for k in range(0, 24))


@dataclass
class Graph:
    """What a workload registers, in order: views and readers (a reader is a Query)."""

    views: list[View] = field(default_factory=list)
    readers: list[Query] = field(default_factory=list)
    columns: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # stream -> (column, type)
    level: dict[str, int] = field(default_factory=dict)


def _columns(name: str, graph: Graph) -> list[tuple[str, str]]:
    if name in graph.columns:
        return graph.columns[name]
    return [(c.name, c.type) for c in SCHEMA.stream(name).columns]


def _pred(draw: Any, alias: str, cols: list[tuple[str, str]]) -> Cmp:
    col, ctype = draw(st.sampled_from(cols))
    value = draw(st.sampled_from(("1", "2") if ctype == INTEGER else ("0.5", "1.5", "2.3")))
    return Cmp(draw(st.sampled_from(("<", "<=", ">", ">=", "="))), Col(alias, col), Num(value))


@st.composite
def graphs(draw: Any) -> Graph:
    """Up to three levels of views (each reading streams or views of lower levels), and readers."""
    g = Graph()
    n_views = draw(st.integers(1, 4))
    for k in range(n_views):
        name = f"v{k}"
        inputs = ["B", "H"] + [v.name for v in g.views]
        deep = [s for s in inputs if g.level.get(s, 0) < 3]
        first = draw(st.sampled_from(deep))
        join = draw(st.booleans())
        sources = [(first.lower() + "1", first)]
        if join:
            second = draw(st.sampled_from(deep))
            sources.append((second.lower() + "2", second))
        level = 1 + max(g.level.get(s, 0) for _, s in sources)
        if level > 3:
            continue
        items = []
        cols: list[tuple[str, str]] = []
        for alias, stream in sources:
            for col, ctype in _columns(stream, g):
                if draw(st.booleans()) or not items:
                    out = f"{col}_{len(items)}"
                    items.append(Item(Col(alias, col), out))
                    cols.append((out, ctype))
        if draw(st.booleans()):
            items.append(Item(Col(sources[-1][0], "ts"), f"t{len(items)}"))
            cols.append((f"t{len(items) - 1}", FLOAT))
        where = [_pred(draw, alias, _columns(stream, g)) for alias, stream in sources if draw(st.booleans())]
        if join:
            (a1, s1), (a2, s2) = sources
            c1, c2 = _columns(s1, g)[0][0], _columns(s2, g)[0][0]
            where.append(Cmp(draw(st.sampled_from(("<", "<=", ">="))), Col(a1, c1), Col(a2, c2)))
        query = Query(
            name,
            tuple(sources),
            maxwindow=Duration(draw(st.sampled_from(("1", "2.5", "4")))) if join else None,
            where=And(tuple(where)) if len(where) > 1 else (where[0] if where else None),
            select=tuple(items),
        )
        g.views.append(View(query))
        g.columns[name] = cols
        g.level[name] = level
    for k in range(draw(st.integers(1, 3))):
        # a reader of a view, or (beside the views) of a stream alone: its rows' results
        # need no visit of the engine, but a view query's rows do (mqo.alone)
        first = draw(st.sampled_from([v.name for v in g.views])) if k == 0 or draw(st.booleans()) else None
        sources: list[tuple[str, str]] = [("r", first or draw(st.sampled_from(("B", "H"))))]
        if draw(st.booleans()):
            sources.append(("s", draw(st.sampled_from(("B", "H", *(v.name for v in g.views))))))
        where = [_pred(draw, a, _columns(s, g)) for a, s in sources if draw(st.booleans())]
        cond = And(tuple(where)) if len(where) > 1 else (where[0] if where else None)
        if len(sources) == 1 and draw(st.booleans()):
            # disjuncts of a single-stream query (decided by the kernels alone), one of them
            # perhaps a residual (then the engine decides them all)
            cols = _columns(sources[0][1], g)
            items = [_pred(draw, "r", cols) for _ in range(draw(st.integers(2, 3)))]
            if draw(st.booleans()):
                (c1, _), (c2, _) = cols[0], cols[-1]
                items.append(Cmp(">", Bin("*", Col("r", c1), Col("r", c2)), Num("2")))
            cond = Or(tuple(items)) if cond is None else And((cond, Or(tuple(items))))
        g.readers.append(
            Query(f"q{k}", tuple(sources), maxwindow=Duration("3") if len(sources) > 1 else None, where=cond)
        )
    return g


def _views_at(ops: list[tuple[str, Any]]) -> int:
    """Where the views created mid-stream are now."""
    return next(i for i, op in enumerate(ops) if op[0] == "views")


@st.composite
def workloads(draw: Any) -> tuple[Graph, list[tuple[str, Any]], Fraction]:
    """A graph, and operations: tuples (with late ones when there is lateness),
    views and readers registered mid-stream, removals of readers and of views no
    query reads."""
    g = draw(graphs())
    lateness = draw(st.sampled_from((Fraction(0), Fraction(3, 2))))
    n = draw(st.integers(4, 30))
    ops: list[tuple[str, Any]] = []
    now = Fraction(0)
    for _ in range(n):
        now = max(now, draw(st.sampled_from(TIMES)))
        ts = now - draw(st.sampled_from((Fraction(0), Fraction(0), Fraction(1), Fraction(2))))
        stream = draw(st.sampled_from(("B", "H")))
        ops.append(
            ("push", (stream, float(ts), {"x": draw(st.sampled_from(VALUES_X)), "y": draw(st.sampled_from(VALUES_Y))}))
        )
    # the views from the k-th on are created mid-stream (at ``at``), and readers of them after
    k = draw(st.integers(0, len(g.views)))
    at = draw(st.integers(0, len(ops)))
    late_views = g.views[k:]
    if late_views:
        ops.insert(at, ("views", late_views))
    late_names = {v.name for v in late_views}
    for q in g.readers:
        needs_late = any(s in late_names for _, s in q.sources)
        if needs_late or draw(st.booleans()):  # registered mid-stream
            # (after the views, wherever earlier insertions moved them)
            first = _views_at(ops) + 1 if needs_late and late_views else 0
            ops.insert(draw(st.integers(first, len(ops))), ("register", q))
    removed = [q for q in g.readers if draw(st.booleans())]
    for q in removed:
        where = [i for i, op in enumerate(ops) if op == ("register", q)]
        ops.insert(draw(st.integers(where[0] + 1 if where else 0, len(ops))), ("unregister", q.name))
    # a view no query reads may go while tuples flow (the streams after it are renumbered)
    read = {s for q in [*g.readers, *(v.query for v in g.views)] for _, s in q.sources}
    for view in [v for v in g.views if v.name not in read and draw(st.booleans())]:
        where = [i for i, op in enumerate(ops) if op[0] == "views" and view in op[1]]
        ops.insert(draw(st.integers(where[0] + 1 if where else 0, len(ops))), ("drop_view", view.name))
    return g, ops, lateness


def _key(result: Result, view_aliases: dict[str, set[str]]) -> tuple[Any, ...]:
    aliases = view_aliases.get(result.query, set())
    return (result.query, result.ts, tuple(i for i in result.ids if i[0] not in aliases), result.values)


def _engine_results(matches: Any) -> list[Result]:
    return [exact_result(m.query, m.ts, m.ids, m.values) for m in matches]


def run(workload: Any, path: str, draw: Any = None) -> None:
    """``path``: every tuple through one door (``push``, ``batch``: each run of one
    stream's tuples in one ``push_batch``, ``replay``), ``snapshot`` (pushes, restored
    from a snapshot halfway), or ``mixed``: each tuple through a door ``draw`` picks,
    a snapshot or a look at the state drawn after each batch or replay."""
    g, ops, lateness = workload
    reference = ViewReference(SCHEMA, lateness)
    store = "all"
    if path == "replay":  # as the CLI: queries fixed at the start, only the tuples they can use stored
        ops, store = [op for op in ops if op[0] == "push"], "candidates"
    m = mqo.Matcher(SCHEMA.ddl(), allowed_lateness=float(lateness), late_sink=lambda t: None, store=store)
    early = [q for q in g.readers if ("register", q) not in ops]
    late_views = [v for kind, arg in ops if kind == "views" for v in arg]
    early_views = [v for v in g.views if v not in late_views]
    texts = [v.to_text() for v in early_views] + [q.to_text() for q in early]
    note("\n".join(texts))
    if texts:
        m.register_queries(texts)
    for v in early_views:
        reference.create_view(v)
    for q in early:
        reference.register(q)
    view_names = {v.name for v in g.views}
    view_aliases = {q.name: {a for a, s in q.sources if s in view_names} for q in g.readers}
    expected: list[Result] = []
    got: list[Result] = []
    pending: list[tuple[str, float, dict[str, Any]]] = []

    door = path  # the door of the tuples pending

    def flush_batch() -> None:
        if not pending:
            return
        if door == "batch":
            stream = pending[0][0]
            cols = {"ts": [p[1] for p in pending], **{c: [p[2][c] for p in pending] for c in ("x", "y")}}
            got.extend(_engine_results(m.push_batch(stream, cols).matches()))
        elif door == "replay":  # the CLI's way: each stream's rows prepared, replayed in arrival order
            got.extend(_engine_results(_replayed(m, pending)))
        pending.clear()
        if draw is not None:
            act = draw(st.sampled_from(("nothing", "snapshot", "state")), label="then")
            if act == "snapshot":
                m.snapshot()
            elif act == "state":
                assert m.state is not None

    for i, (kind, arg) in enumerate(ops):
        if kind == "push":
            stream, ts, values = arg
            expected.extend(reference.push(stream, ts, values))
            if draw is not None:
                chosen = draw(st.sampled_from(("push", "batch", "replay")), label="door")
                if chosen != door:
                    flush_batch()
                    door = chosen
            if door == "batch":
                if pending and pending[0][0] != stream:
                    flush_batch()
                pending.append(arg)
            elif door == "replay":
                pending.append(arg)
            else:
                got.extend(_engine_results(m.push(stream, ts, values)))
        else:
            flush_batch()
            if kind == "views":  # created while tuples flow, in one call
                note("mid-stream:\n" + "\n".join(v.to_text() for v in arg))
                m.register_queries([v.to_text() for v in arg])
                for v in arg:
                    reference.create_view(v)
            elif kind == "register":
                reference.register(arg)
                m.register_query(arg.to_text())
            elif kind == "drop_view":
                reference.drop_view(arg)
                m.unregister_query(arg)
            else:
                reference.unregister(arg)
                m.unregister_query(arg)
        if path == "snapshot" and i == len(ops) // 2:
            m = mqo.Matcher.restore(decode_snapshot(encode_snapshot(m.snapshot())), late_sink=lambda t: None)
    flush_batch()
    event("results" if expected else "no results")
    assert Counter(_key(r, view_aliases) for r in got) == Counter(_key(r, view_aliases) for r in expected)
    assert m.late_count == reference.late_count


def _replayed(m: mqo.Matcher, pushes: list[tuple[str, float, dict[str, Any]]]) -> list[Any]:
    """The results of ``pushes`` (any streams) through ``prepare`` and ``replay``."""
    streams = sorted({p[0] for p in pushes})
    mine = {s: [p for p in pushes if p[0] == s] for s in streams}
    prepared = [
        m.prepare(s, {"ts": [p[1] for p in mine[s]], **{c: [p[2][c] for p in mine[s]] for c in ("x", "y")}})
        for s in streams
    ]
    which = np.array([streams.index(p[0]) for p in pushes], np.int64)
    seen = dict.fromkeys(streams, 0)
    rows = []
    for p in pushes:
        rows.append(seen[p[0]])
        seen[p[0]] += 1
    found = MatchBatch(m.ensure_plan())
    for _, blocks in m.replay(prepared, which, np.array(rows, np.int64)):
        found.blocks.extend(blocks)
    found.blocks.extend(m.take_results().blocks)
    return found.matches()


SETTINGS: dict[str, Any] = {
    "deadline": None,
    "max_examples": 60,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


@settings(**SETTINGS)
@given(workloads(), st.sampled_from(("push", "batch", "snapshot", "replay")))
def test_views_equal_the_reference(workload: Any, path: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run(workload, path)


@settings(**SETTINGS)
@given(workloads(), st.data())
def test_views_equal_the_reference_through_every_door_in_turn(workload: Any, data: Any) -> None:
    """One matcher, each tuple through a drawn door (tests/differential/test_mixed_doors.py
    does the same without views)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run(workload, "mixed", data.draw)


# ------------------------------------------------------------- aggregates over a join view

PAIRS = View(
    Query(
        "pairs",
        (("b", "B"), ("h", "H")),
        maxwindow=Duration("2"),
        where=Cmp(">", Col("b", "y"), Col("h", "y")),
        select=(Item(Col("b", "y"), "pressure"), Item(Col("h", "x"), "rate")),
    )
)


@st.composite
def pair_inputs(draw: Any) -> tuple[list[tuple[str, float, dict[str, Any]]], RefQuery]:
    tuples = []
    now = Fraction(0)
    for _ in range(draw(st.integers(2, 40))):
        now += draw(st.sampled_from((Fraction(0), Fraction(1, 2), Fraction(3, 2))))
        stream = draw(st.sampled_from(("B", "H")))
        tuples.append(
            (stream, float(now), {"x": draw(st.sampled_from(VALUES_X)), "y": draw(st.sampled_from(VALUES_Y))})
        )
    slide = draw(st.sampled_from((Fraction(1), Fraction(2))))
    query = RefQuery(
        "avg_pairs",
        "pairs",
        slide * draw(st.sampled_from((1, 2, 3))),
        slide,
        [("pairs.rate", ">=", 1)] if draw(st.booleans()) else [],
        ["pairs.rate"] if draw(st.booleans()) else [],
        [("AVG", "pairs.pressure"), ("COUNT", None), ("SUM", "pairs.rate")],
    )
    return tuples, query


@settings(**SETTINGS)
@given(pair_inputs(), st.booleans())
def test_aggregate_over_a_join_view_equals_the_reference(inputs: Any, batch: bool) -> None:
    tuples, query = inputs
    reference = ViewReference(SCHEMA)
    reference.create_view(PAIRS)
    m = mqo.Matcher(SCHEMA.ddl())
    m.register_queries([PAIRS.to_text(), query.text()])
    got: list[Any] = []
    for stream, ts, values in tuples:
        reference.push(stream, ts, values)
        if batch:
            m.push_batch(stream, {"ts": [ts], **{k: [v] for k, v in values.items()}})
        else:
            m.push(stream, ts, values)
        got += m.poll_aggregates().rows
    got += m.flush().rows
    expected = evaluate([query], view_rows(reference, "pairs"), lateness=10**9)
    exp = {(float(r.end), tuple(map(str, r.group))): r.values for r in expected}
    have = {(r.window_end, tuple(map(str, r.group.values()))): r.values for r in got}
    assert sorted(have) == sorted(exp)
    for key, values in exp.items():
        for name, value in values.items():
            engine = have[key][name]
            if value is None:
                assert engine is None
            else:
                assert math.isclose(float(engine), float(value), rel_tol=1e-12), (key, name, engine, value)


def test_replay_matches_push_with_views() -> None:
    """The CLI's path (prepare + replay over several streams) gives push's results."""
    ddl = SCHEMA.ddl()
    texts = [PAIRS.to_text(), "Query ID: hot\nSELECT p.pressure, p.rate FROM pairs p WHERE p.rate >= 2;"]
    rng = np.random.default_rng(7)
    rows = [
        (
            "B" if rng.random() < 0.5 else "H",
            float(k) / 2,
            {"x": int(rng.integers(0, 4)), "y": float(rng.choice(VALUES_Y))},
        )
        for k in range(60)
    ]
    pushed = mqo.Matcher(ddl)
    pushed.register_queries(texts)
    expected = Counter(
        (r.query, r.ts, tuple(sorted(r.values.items()))) for s, t, v in rows for r in pushed.push(s, t, v)
    )
    replayed = mqo.Matcher(ddl)
    replayed.register_queries(texts)
    prepared = []
    for stream in ("B", "H"):
        mine = [r for r in rows if r[0] == stream]
        cols = {"ts": [r[1] for r in mine], "x": [r[2]["x"] for r in mine], "y": [r[2]["y"] for r in mine]}
        prepared.append(replayed.prepare(stream, cols))
    which = np.array([0 if s == "B" else 1 for s, _, _ in rows])
    positions = {0: 0, 1: 0}
    indexes = []
    for w in which.tolist():
        indexes.append(positions[w])
        positions[w] += 1
    got: Counter[Any] = Counter()
    for _, blocks in replayed.replay(prepared, which, np.array(indexes)):
        for r in MatchBatch(replayed.ensure_plan(), blocks).matches():
            got[(r.query, r.ts, tuple(sorted(r.values.items())))] += 1
    assert got == expected and sum(expected.values()) > 0
