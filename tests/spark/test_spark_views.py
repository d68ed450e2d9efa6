"""Match views in the Spark batch stage (``runtime.spark.match_batch``) against the
local matcher and the exact view reference (tests/references/exact_views.py).

Views over views (depth 2) and queries reading them, on generated tuples at
half-second steps, time buckets of width 4 (so ties fall on bucket edges, and many
results rest on tuples of the bucket before, through a chain of views reaching 3.5 s
back; about a task per bucket, so every edge is a task's start): every result the
local matcher finds for the tuples in ``(ts, stream, id)`` order, the Spark stage
finds once. A view member's id is the view row's number in its
task (runtime/spark/batch.py, "Views"), so results are compared without it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

import mqo
from runtime.spark.spec import SparkStageError, build_spec, stage_matcher, view_margin
from tests.references.exact_language import FLOAT, INTEGER, And, Cmp, Col, Column, Duration, Item, Num, Query, Schema
from tests.references.exact_language import Stream as RefStream
from tests.references.exact_views import View, ViewReference
from tests.references.reference import Result, exact_result
from tests.spark.helpers import XY, stream_frames

SCHEMA = Schema(
    (
        RefStream("B", (Column("x", INTEGER), Column("y", FLOAT))),
        RefStream("H", (Column("x", INTEGER), Column("y", FLOAT))),
    )
)
# pairs: B and H within 2 s; near: a pair and a later B within 1.5 s (depth 2: 3.5 s back)
PAIRS = View(
    Query(
        "pairs",
        (("b", "B"), ("h", "H")),
        maxwindow=Duration("2"),
        where=And((Cmp("=", Col("b", "x"), Col("h", "x")), Cmp(">", Col("b", "y"), Col("h", "y")))),
        select=(Item(Col("b", "x"), "x"), Item(Col("h", "y"), "y"), Item(Col("b", "y"), "by")),
    )
)
NEAR = View(
    Query(
        "near",
        (("p", "pairs"), ("s", "B")),
        maxwindow=Duration("1.5"),
        where=And((Cmp("=", Col("p", "x"), Col("s", "x")), Cmp(">=", Col("s", "y"), Col("p", "y")))),
        select=(Item(Col("p", "x"), "x"), Item(Col("s", "y"), "y")),
    )
)
READERS = (
    Query("deep", (("r", "near"),), where=Cmp(">=", Col("r", "y"), Num("1.5"))),
    Query("echo", (("r", "pairs"), ("s", "H")), maxwindow=Duration("1"), where=Cmp("=", Col("r", "x"), Col("s", "x"))),
    Query("plain", (("b", "B"), ("h", "H")), maxwindow=Duration("1"), where=Cmp("<", Col("b", "y"), Col("h", "y"))),
)
TEXTS = [PAIRS.to_text(), NEAR.to_text(), *(q.to_text() for q in READERS)]
VIEW_ALIASES = {"deep": {"r"}, "echo": {"r"}}
WIDTH = 4.0


def tuples(seed: int = 5, n: int = 160) -> list[tuple[str, float, int, dict[str, Any]]]:
    """(stream, ts, id, values) in (ts, stream in DDL order, id) order: the stage's."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, float, dict[str, Any]]] = []
    for _ in range(n):
        stream = "B" if rng.random() < 0.5 else "H"
        ts = float(rng.integers(0, 81)) / 2  # 0 .. 40 by halves: the bucket edges 4, 8, ... among them
        rows.append((stream, ts, {"x": int(rng.integers(0, 3)), "y": float(rng.choice((0.5, 1.5, 2.3)))}))
    counts = {"B": 0, "H": 0}
    numbered = []
    for stream, ts, values in rows:  # ids in generation order, so not sorted by ts
        numbered.append((stream, ts, counts[stream], values))
        counts[stream] += 1
    return sorted(numbered, key=lambda r: (r[1], r[0], r[2]))


def key(result: Result) -> tuple[Any, ...]:
    aliases = VIEW_ALIASES.get(result.query, set())
    return (result.query, result.ts, tuple(i for i in result.ids if i[0] not in aliases), result.values)


@pytest.mark.spark
def test_views_in_the_batch_stage_equal_the_local_matcher_and_the_reference(spark_session: Any) -> None:
    from runtime.spark.batch import match_batch

    rows = tuples()
    reference = ViewReference(SCHEMA)
    for view in (PAIRS, NEAR):
        reference.create_view(view)
    for q in READERS:
        reference.register(q)
    local = mqo.Matcher(SCHEMA.ddl())
    local.register_queries(TEXTS)
    expected: list[Result] = []
    found: list[Result] = []
    for stream, ts, ident, values in rows:
        expected += reference.push(stream, ts, values, id=ident)
        found += [exact_result(m.query, m.ts, m.ids, m.values) for m in local.push(stream, ts, values, ident)]
    want = Counter(key(r) for r in expected)
    assert Counter(key(r) for r in found) == want

    frames = stream_frames(spark_session, rows, {"B": XY, "H": XY})
    stage = match_batch(frames, TEXTS, schema=SCHEMA.ddl(), partitions=12, bucket_width=WIDTH).collect()
    assert Counter(key(r) for r in results(stage)) == want
    # without "plain" (no equality) every join is on x and pairs selects b.x: by key
    keyed = match_batch(frames, TEXTS[:4], schema=SCHEMA.ddl(), partitions=3, partition_by="key").collect()
    assert Counter(key(r) for r in results(keyed)) == Counter(k for k in want.elements() if k[0] != "plain")
    # what the workload holds: results of every query, some at a bucket edge, and some
    # that only the view chain's margin (3.5 s) finds, not the largest MAXWINDOW's (2 s)
    assert {r.query for r in expected} == {"deep", "echo", "plain"}
    assert any(r.ts % 4 == 0 for r in expected)
    assert by_buckets(rows, 3.5) == want != by_buckets(rows, 2.0)


def results(rows: list[Any]) -> list[Result]:
    """The stage's result rows as the reference's (each query's own values)."""
    names = [c for c in rows[0].asDict() if c not in ("query", "ts", "ids")] if rows else []
    return [exact_result(r["query"], r["ts"], r["ids"], {c: r[c] for c in names if r[c] is not None}) for r in rows]


def by_buckets(rows: list[tuple[str, float, int, dict[str, Any]]], margin: float) -> Counter[Any]:
    """The results of a local matcher per bucket of width 4 given the tuples of
    ``margin`` seconds before it, each reported by the bucket holding its ts."""
    out: Counter[Any] = Counter()
    for k in range(int(rows[-1][1] // WIDTH) + 1):
        m = mqo.Matcher(SCHEMA.ddl())
        m.register_queries(TEXTS)
        for stream, ts, ident, values in rows:
            if k * WIDTH - margin <= ts < (k + 1) * WIDTH:
                for r in m.push(stream, ts, values, ident):
                    if r.ts >= k * WIDTH:
                        out[key(exact_result(r.query, r.ts, r.ids, r.values))] += 1
    return out


def test_the_margin_is_the_longest_chain_of_windows_through_views() -> None:
    m = mqo.Matcher(SCHEMA.ddl())
    m.register_queries(TEXTS)
    assert view_margin(m) == 3.5  # deep reads near (1.5) over pairs (2)
    spec = build_spec(m)
    assert (spec.mode, spec.max_window) == ("time", 3.5)
    with pytest.raises(SparkStageError, match=r"bucket_width 3 is smaller than the largest MAXWINDOW \(through views"):
        build_spec(m, bucket_width=3.0)


def test_views_are_refused_where_the_stages_cannot_run_them() -> None:
    keyed = mqo.Matcher(SCHEMA.ddl())
    keyed.register_queries([PAIRS.to_text(), READERS[1].to_text()])  # every join on x; pairs.x is b.x
    assert (build_spec(keyed).mode, build_spec(keyed).key_columns) == ("key", (("B", "x"), ("H", "x")))
    apart = mqo.Matcher(SCHEMA.ddl())  # joined on its k, which is h.y, not the key h.x
    apart.register_queries(
        [
            "CREATE VIEW w AS SELECT h.y AS k, b.x AS x FROM B b, H h MAXWINDOW 2 WHERE b.x = h.x;",
            "Query ID: q\nSELECT * FROM w r, H s MAXWINDOW 1 WHERE r.k = s.x;",
        ]
    )
    assert build_spec(apart).mode == "time"
    with pytest.raises(
        SparkStageError,
        match=r"partition_by='key' cannot run view w: its key column k .* use partition_by='time' \(or 'auto'\)",
    ):
        build_spec(apart, partition_by="key")
    with pytest.raises(SparkStageError, match=r"streaming aggregate stages do not run views \(view pairs\)"):
        stage_matcher(keyed, None, {}, None)
    counting = mqo.Matcher(
        SCHEMA.ddl()
    )  # an aggregate view runs (test_spark_aggregate_views); a match view over it in the match stage only
    counting.register_queries(
        [
            "CREATE VIEW counts AS SELECT B.x AS x, COUNT(*) AS n FROM B [RANGE 4 SLIDE 2] GROUP BY B.x;",
            "CREATE VIEW many AS SELECT c.x AS x FROM counts c WHERE c.n > 2;",
        ]
    )
    with pytest.raises(
        SparkStageError,
        match=r"view many is a match view reading aggregate view counts: the Spark aggregate stages and --output-view",
    ):
        stage_matcher(counting, None, {}, None, kind="aggregate", views=True)
    with pytest.raises(SparkStageError, match=r"no stream DataFrames given"):  # (the match stage runs it)
        stage_matcher(counting, None, {}, None, views=True)
