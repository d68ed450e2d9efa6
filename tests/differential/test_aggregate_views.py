"""Aggregate views against their exact reference (tests/references/exact_views.py, rules 5-6).

Random view graphs up to depth 3 mixing match views and aggregate views (RSTREAM,
ISTREAM, DSTREAM; COUNT, SUM, MIN, MAX, AVG; GROUP BY or not; WHERE or not), each
reading a declared stream or an earlier view; match queries reading the views (alone,
or joined with a stream or another view); late tuples, heartbeats, views created and
readers registered or removed while tuples flow, unread views dropped. Compared
exactly: every view's rows (an aggregate view's with their ids, which its order
decides), every reader's results, and the late count; through push, push_batch, and a
snapshot restored halfway. Plus the CLI's path (prepare + replay) against push.
"""

from __future__ import annotations

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
from mqo.snapshot_codec import decode_snapshot, encode_snapshot
from tests.references.exact_language import FLOAT, INTEGER, And, Cmp, Col, Column, Duration, Item, Num, Query, Schema
from tests.references.exact_language import Stream as RefStream
from tests.references.exact_language import exact as exact_value
from tests.references.exact_views import AggView, View, ViewReference
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
TIMES = tuple(Fraction(k, 2) for k in range(0, 30))
WINDOWS = (
    (Fraction(1), Fraction(1)),
    (Fraction(2), Fraction(1)),
    (Fraction(2), Fraction(2)),
    (Fraction(3), Fraction(3, 2)),
)


@dataclass
class Graph:
    views: list[View | AggView] = field(default_factory=list)
    readers: list[Query] = field(default_factory=list)
    columns: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # stream -> (column, type)
    depth: dict[str, int] = field(default_factory=dict)  # views' depth (1 over streams only)


def _columns(name: str, g: Graph) -> list[tuple[str, str]]:
    return g.columns.get(name) or [(c.name, c.type) for c in SCHEMA.stream(name).columns]


def _literal(draw: Any, ctype: str) -> str:
    return draw(st.sampled_from(("1", "2", "4") if ctype == INTEGER else ("0.5", "1.5", "2.3")))


def _pred(draw: Any, alias: str, cols: list[tuple[str, str]]) -> Cmp:
    col, ctype = draw(st.sampled_from(cols))
    return Cmp(draw(st.sampled_from(("<", "<=", ">", ">=", "="))), Col(alias, col), Num(_literal(draw, ctype)))


def _agg_view(draw: Any, name: str, source: str, cols: list[tuple[str, str]]) -> tuple[AggView, list[tuple[str, str]]]:
    size, slide = draw(st.sampled_from(WINDOWS))
    group = [c for c, _ in cols if draw(st.integers(0, 3)) == 0][:2]
    calls: list[tuple[str, str, str | None]] = [(f"{name}_0", "COUNT", None)]  # (names no source column has)
    for col, ctype in cols:
        funcs = ["MIN", "MAX"] + (["SUM", "AVG"] if ctype == INTEGER else [])  # FLOAT sums are rounded sums
        func = draw(st.sampled_from([None, *funcs]))
        if func is not None:
            calls.append((f"{name}_{len(calls)}", func, col))
    where = []
    if draw(st.booleans()):
        col, ctype = draw(st.sampled_from(cols))
        where.append((col, draw(st.sampled_from(("<", ">=", "="))), _literal(draw, ctype)))
    op = draw(st.sampled_from(("RSTREAM", "RSTREAM", "ISTREAM", "DSTREAM")))
    view = AggView(name, source, size, slide, tuple(group), tuple(calls), tuple(where), op)
    types = dict(cols)
    out = [(g, types[g]) for g in group]
    for column, func, read in calls:
        out.append((column, INTEGER if func == "COUNT" else types[read] if func in ("SUM", "MIN", "MAX") else FLOAT))  # type: ignore[index]
    return view, out


def _match_view(draw: Any, name: str, sources: list[tuple[str, str]], g: Graph) -> tuple[View, list[tuple[str, str]]]:
    items: list[Item] = []
    cols: list[tuple[str, str]] = []
    for alias, stream in sources:
        for col, ctype in _columns(stream, g):
            if draw(st.booleans()) or not items:
                items.append(Item(Col(alias, col), f"{col}_{len(items)}"))
                cols.append((f"{col}_{len(items) - 1}", ctype))
    where = [_pred(draw, alias, _columns(stream, g)) for alias, stream in sources if draw(st.booleans())]
    if len(sources) > 1:
        (a1, s1), (a2, s2) = sources
        c1 = next(c for c, t in _columns(s1, g) if t in (INTEGER, FLOAT))
        c2 = next(c for c, t in _columns(s2, g) if t in (INTEGER, FLOAT))
        where.append(Cmp(draw(st.sampled_from(("<=", ">=", "="))), Col(a1, c1), Col(a2, c2)))
    query = Query(
        name,
        tuple(sources),
        maxwindow=Duration(draw(st.sampled_from(("0", "1", "2.5")))) if len(sources) > 1 else None,
        where=And(tuple(where)) if len(where) > 1 else (where[0] if where else None),
        select=tuple(items),
    )
    return View(query), cols


@st.composite
def graphs(draw: Any) -> Graph:
    """Views of depth up to 3, at least one an aggregate view, and match queries reading them."""
    g = Graph()
    for k in range(draw(st.integers(1, 4))):
        name = f"v{k}"
        deep = [s for s in ["B", "H", *(v.name for v in g.views)] if g.depth.get(s, 0) < 3]
        first = draw(st.sampled_from(deep))
        aggregate = k == 0 or draw(st.booleans())
        view: View | AggView
        if aggregate:
            view, cols = _agg_view(draw, name, first, _columns(first, g))
            depth = g.depth.get(first, 0) + 1
        else:
            sources = [(first.lower() + "1", first)]
            if draw(st.booleans()):
                second = draw(st.sampled_from(deep))
                sources.append((second.lower() + "2", second))
            view, cols = _match_view(draw, name, sources, g)
            depth = 1 + max(g.depth.get(s, 0) for _, s in sources)
        g.views.append(view)
        g.columns[name] = cols
        g.depth[name] = depth
    for k in range(draw(st.integers(1, 3))):
        view = draw(st.sampled_from(g.views))
        sources = [("r", view.name)]
        if draw(st.booleans()):
            sources.append(("s", draw(st.sampled_from(("B", "H", *(v.name for v in g.views))))))
        where = [_pred(draw, a, _columns(s, g)) for a, s in sources if draw(st.booleans())]
        if len(sources) > 1 and draw(st.booleans()):
            where.append(Cmp("=", Col("r", "ts"), Col("s", "ts")))  # the same window end, as Q5 joins
        g.readers.append(
            Query(
                f"q{k}",
                tuple(sources),
                maxwindow=Duration(draw(st.sampled_from(("0", "3")))) if len(sources) > 1 else None,
                where=And(tuple(where)) if len(where) > 1 else (where[0] if where else None),
            )
        )
    return g


def _name(view: View | AggView) -> str:
    return view.name


def _views_at(ops: list[tuple[str, Any]]) -> int:
    """Where the views created mid-stream are now."""
    return next(i for i, op in enumerate(ops) if op[0] == "views")


@st.composite
def workloads(draw: Any) -> tuple[Graph, list[tuple[str, Any]], Fraction]:
    g = draw(graphs())
    lateness = draw(st.sampled_from((Fraction(0), Fraction(3, 2))))
    ops: list[tuple[str, Any]] = []
    now = Fraction(0)
    for _ in range(draw(st.integers(4, 30))):
        now = max(now, draw(st.sampled_from(TIMES)))
        if draw(st.integers(0, 9)) == 0:
            ops.append(("heartbeat", (float(now + draw(st.sampled_from((Fraction(0), Fraction(2))))), None)))
            continue
        ts = now - draw(st.sampled_from((Fraction(0), Fraction(0), Fraction(1), Fraction(2))))
        values = {"x": draw(st.sampled_from(VALUES_X)), "y": draw(st.sampled_from(VALUES_Y))}
        ops.append(("push", (draw(st.sampled_from(("B", "H"))), float(ts), values)))
    k = draw(st.integers(0, len(g.views)))
    at = draw(st.integers(0, len(ops)))
    late_views = g.views[k:]
    if late_views:
        ops.insert(at, ("views", late_views))
    late_names = {v.name for v in late_views}
    for q in g.readers:
        needs_late = any(s in late_names for _, s in q.sources)
        if needs_late or draw(st.booleans()):
            # (after the views, wherever earlier insertions moved them)
            first = _views_at(ops) + 1 if needs_late else 0
            ops.insert(draw(st.integers(first, len(ops))), ("register", q))
    for q in [q for q in g.readers if draw(st.booleans())]:
        where = [i for i, op in enumerate(ops) if op == ("register", q)]
        ops.insert(draw(st.integers(where[0] + 1 if where else 0, len(ops))), ("unregister", q.name))
    read = {s for q in g.readers for _, s in q.sources}
    read |= {v.source for v in g.views if isinstance(v, AggView)}
    read |= {s for v in g.views if isinstance(v, View) for _, s in v.query.sources}
    for view in [v for v in g.views if v.name not in read and draw(st.booleans())]:
        where = [i for i, op in enumerate(ops) if op[0] == "views" and view in op[1]]
        ops.insert(draw(st.integers(where[0] + 1 if where else 0, len(ops))), ("drop_view", view.name))
    return g, ops, lateness


def _create(reference: ViewReference, view: View | AggView) -> None:
    if isinstance(view, AggView):
        reference.create_agg_view(view)
    else:
        reference.create_view(view)


def _key(result: Result, view_aliases: dict[str, set[str]]) -> tuple[Any, ...]:
    aliases = view_aliases.get(result.query, set())
    return (result.query, result.ts, tuple(i for i in result.ids if i[0] not in aliases), result.values)


def run(workload: Any, path: str) -> None:
    g, ops, lateness = workload
    reference = ViewReference(SCHEMA, lateness)
    made: list[tuple[str, Fraction, int | None, tuple[Any, ...]]] = []
    aggregate_views = {v.name for v in g.views if isinstance(v, AggView)}

    def sink(view: str, ts: float, id: int, values: dict[str, Any]) -> None:
        types = dict(g.columns[view])
        row = tuple(sorted((k, exact_value(v, types[k])) for k, v in values.items()))
        made.append((view, exact_value(ts), id if view in aggregate_views else None, row))

    def fresh(m: mqo.Matcher) -> mqo.Matcher:
        m.view_sink = sink
        return m

    m = fresh(mqo.Matcher(SCHEMA.ddl(), allowed_lateness=float(lateness), late_sink=lambda t: None))
    early = [q for q in g.readers if ("register", q) not in ops]
    late_views = [v for kind, arg in ops if kind == "views" for v in arg]
    early_views = [v for v in g.views if v not in late_views]
    texts = [v.to_text() for v in early_views] + [q.to_text() for q in early]
    note("\n".join(texts))
    if texts:
        m.register_queries(texts)
    for v in early_views:
        _create(reference, v)
    for q in early:
        reference.register(q)
    names = {v.name for v in g.views}
    view_aliases = {q.name: {a for a, s in q.sources if s in names} for q in g.readers}
    expected: list[Result] = []
    got: list[Result] = []
    pending: list[tuple[str, float, dict[str, Any]]] = []

    def results(matches: Any) -> list[Result]:
        return [exact_result(r.query, r.ts, r.ids, r.values) for r in matches]

    def flush_batch() -> None:
        if pending:
            cols = {"ts": [p[1] for p in pending], **{c: [p[2][c] for p in pending] for c in ("x", "y")}}
            got.extend(results(m.push_batch(pending[0][0], cols).matches()))
            pending.clear()

    for i, (kind, arg) in enumerate(ops):
        if kind == "push":
            stream, ts, values = arg
            expected.extend(reference.push(stream, ts, values))
            if path == "batch":
                if pending and pending[0][0] != stream:
                    flush_batch()
                pending.append(arg)
            else:
                got.extend(results(m.push(stream, ts, values)))
            continue
        flush_batch()
        if kind == "heartbeat":
            expected.extend(reference.heartbeat(arg[0]))
            got.extend(results(m.heartbeat(arg[0])))
        elif kind == "views":
            note("mid-stream:\n" + "\n".join(v.to_text() for v in arg))
            m.register_queries([v.to_text() for v in arg])
            for v in arg:
                _create(reference, v)
        elif kind == "register":
            reference.register(arg)
            m.register_query(arg.to_text())
        elif kind == "drop_view":
            reference.drop_view(arg)
            m.unregister_query(arg)
        else:
            reference.unregister(arg)
            m.unregister_query(arg)
        if path == "snapshot" and i >= len(ops) // 2 and not getattr(m, "_restored", False):
            m = fresh(mqo.Matcher.restore(decode_snapshot(encode_snapshot(m.snapshot())), late_sink=lambda t: None))
            m._restored = True  # type: ignore[attr-defined]
    flush_batch()
    expected.extend(reference.flush())
    m.flush()
    got.extend(results(m.take_results().matches()))
    rows = [
        (name, ts, row_id if name in aggregate_views else None, tuple(sorted(values.items())))
        for name, rows in reference.rows.items()
        for ts, row_id, values in rows
    ]
    event("view rows" if rows else "no view rows")
    event("results" if expected else "no results")
    assert Counter(made) == Counter(rows)
    assert Counter(_key(r, view_aliases) for r in got) == Counter(_key(r, view_aliases) for r in expected)
    assert m.late_count == reference.late_count


SETTINGS: dict[str, Any] = {
    "deadline": None,
    "max_examples": 60,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


@settings(**SETTINGS)
@given(workloads(), st.sampled_from(("push", "batch", "snapshot")))
def test_aggregate_views_equal_the_reference(workload: Any, path: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run(workload, path)


def test_replay_matches_push_with_aggregate_views() -> None:
    """The CLI's path (prepare + replay, then flush) finds push's results."""
    texts = [
        "CREATE VIEW hot AS SELECT b.x AS x, COUNT(*) AS n FROM B b [RANGE 2 sec SLIDE 1 sec] GROUP BY b.x;",
        "CREATE VIEW top AS SELECT MAX(h.n) AS most FROM hot h [RANGE 1 sec];",
        "Query ID: hottest\nSELECT h.x, h.n FROM hot h, top t WINDOW h.ts = t.ts MAXWINDOW 0 sec WHERE h.n = t.most;",
        "Query ID: near\nSELECT h.x, k.y FROM hot h, H k MAXWINDOW 1 sec WHERE h.x = k.x;",
    ]
    rng = np.random.default_rng(11)
    rows = [
        ("B" if rng.random() < 0.6 else "H", k / 4, {"x": int(rng.integers(0, 3)), "y": float(rng.choice(VALUES_Y))})
        for k in range(200)
    ]

    def key(r: Any) -> tuple[Any, ...]:
        return (r.query, r.ts, tuple(sorted(r.values.items())))

    pushed = mqo.Matcher(SCHEMA.ddl())
    pushed.register_queries(texts)
    expected = Counter(key(r) for s, t, v in rows for r in pushed.push(s, t, v))
    pushed.flush()
    expected.update(key(r) for r in pushed.take_results().matches())
    replayed = mqo.Matcher(SCHEMA.ddl())
    replayed.register_queries(texts)
    prepared = []
    for stream in ("B", "H"):
        mine = [r for r in rows if r[0] == stream]
        prepared.append(
            replayed.prepare(
                stream, {"ts": [r[1] for r in mine], "x": [r[2]["x"] for r in mine], "y": [r[2]["y"] for r in mine]}
            )
        )
    which = np.array([0 if s == "B" else 1 for s, _, _ in rows])
    seen = {0: 0, 1: 0}
    indexes = []
    for w in which.tolist():
        indexes.append(seen[w])
        seen[w] += 1
    # the aggregate queries take the B tuples up front, as the CLI feeds them
    replayed.registrations.ingest("B", prepared_columns(rows, "B"))
    got: Counter[Any] = Counter()
    for _, blocks in replayed.replay(prepared, which, np.array(indexes)):
        got.update(key(r) for r in mqo.MatchBatch(replayed.ensure_plan(), blocks).matches())
    replayed.flush()
    got.update(key(r) for r in replayed.take_results().matches())
    assert got == expected
    assert {q for q, _, _ in expected} == {"hottest", "near"}


def prepared_columns(rows: list[tuple[str, float, dict[str, Any]]], stream: str) -> dict[str, list[Any]]:
    mine = [r for r in rows if r[0] == stream]
    return {"ts": [r[1] for r in mine], "x": [r[2]["x"] for r in mine], "y": [r[2]["y"] for r in mine]}
