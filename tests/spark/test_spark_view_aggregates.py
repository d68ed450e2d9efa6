"""Aggregates over match views in the Spark batch aggregate stage
(``runtime.spark.aggregate_batch``) against the local matcher and the exact references
(tests/references/exact_views.py for the views' rows, agg_reference.py for the windows).

Seeded random view graphs of depth up to 3 (joins of B and H, views of a view, a view
joined with a stream, on the key or not, so both partitionings run), aggregate queries
over their views (RANGE windows with COUNT/SUM/MIN/MAX/AVG, GROUP BY, HAVING; count
windows; ISTREAM and DSTREAM), on tuples at half-second steps with ties, NULLs and
time buckets many enough that view rows rest on tuples of the bucket before. Every
aggregate row equals the local matcher's fed the tuples in ``(ts, stream, id)`` order,
exactly (the stage's order of view rows of one ts is the local engine's:
runtime/spark/view_rows.py, "Order"), and the RANGE windows over INTEGER sums and any
MIN/MAX equal the exact reference's. (Late tuples are left out before a batch stage:
tests/cli/test_view_aggregates_spark_cli.py has them.)
"""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction
from typing import Any

import pytest

import mqo
from runtime.spark.cli import stage_rows
from runtime.spark.spec import SparkStageError, stage_matcher
from tests.references.agg_reference import RefQuery, evaluate
from tests.references.exact_language import FLOAT, INTEGER, And, Cmp, Col, Column, Duration, Item, Num, Query, Schema
from tests.references.exact_language import Stream as RefStream
from tests.references.exact_views import View, ViewReference, view_rows
from tests.spark.helpers import XY, stream_frames

SCHEMA = Schema(
    (
        RefStream("B", (Column("x", INTEGER), Column("y", FLOAT))),
        RefStream("H", (Column("x", INTEGER), Column("y", FLOAT))),
    )
)
WINDOWS = ((Fraction(4), Fraction(2)), (Fraction(6), Fraction(3)), (Fraction(3), Fraction(3)))


def graph(rng: random.Random) -> list[View]:
    """Up to three views, each with columns x (INTEGER) and y (FLOAT): a join of B and
    H first, then views of a view (filtered) or of a view joined with B."""
    views = []
    for k in range(rng.randint(1, 3)):
        name = f"v{k}"
        if k == 0:
            a, b = ("b", "B"), ("h", "H")
        else:
            a = ("p", rng.choice([v.name for v in views]))
            b = ("s", "B") if rng.random() < 0.6 else None  # type: ignore[assignment]
        on_key = rng.random() < 0.5
        if b is None:
            where: Any = Cmp(rng.choice(("<=", ">=")), Col("p", "y"), Num(rng.choice(("0.5", "1.5"))))
            query = Query(name, (a,), where=where, select=(Item(Col("p", "x"), "x"), Item(Col("p", "y"), "y")))
        else:
            join = Cmp("=", Col(a[0], "x"), Col(b[0], "x")) if on_key else Cmp(">=", Col(a[0], "y"), Col(b[0], "y"))
            where = And((join, Cmp("<", Col(b[0], "y"), Num("2.3")))) if rng.random() < 0.4 else join
            query = Query(
                name,
                (a, b),
                maxwindow=Duration(rng.choice(("1", "2", "2.5"))),
                where=where,
                select=(Item(Col(a[0], "x"), "x"), Item(Col(b[0], "y"), "y")),
            )
        views.append(View(query))
    return views


def aggregates(rng: random.Random, views: list[View]) -> tuple[list[RefQuery], list[str]]:
    """Aggregate queries over the views: RANGE windows the reference checks, plus count
    windows, float sums and ISTREAM/DSTREAM the local matcher checks."""
    checked = []
    for k in range(3):
        view = rng.choice(views).name
        size, slide = rng.choice(WINDOWS)
        group = [f"{view}.x"] if rng.random() < 0.5 else []
        calls: list[tuple[str, str | None]] = [("COUNT", None), ("SUM", f"{view}.x"), ("AVG", f"{view}.x")]
        calls += [("MIN", f"{view}.y"), ("MAX", f"{view}.y")]
        where = [(f"{view}.x", ">=", 1)] if rng.random() < 0.3 else []
        having = ("COUNT", None, ">=", 2) if rng.random() < 0.3 else None
        checked.append(RefQuery(f"a{k}", view, size, slide, where, group, calls, having))
    local_only = []
    for k, op in enumerate(("", "ISTREAM ", "DSTREAM ")):
        view = rng.choice(views).name
        window = "ROWS 3 SLIDE 2" if not op else "RANGE 4 sec SLIDE 2 sec"
        by = f" GROUP BY {view}.x" if op or rng.random() < 0.5 else ""
        lead = f"{view}.x, " if by else ""
        local_only.append(
            f"Query ID: b{k}\nSELECT {op}{lead}COUNT(*), SUM({view}.y), MAX({view}.y) FROM {view} [{window}]{by};"
        )
    return checked, local_only


def tuples(rng: random.Random, n: int = 150) -> list[tuple[str, float, int, dict[str, Any]]]:
    """(stream, ts, id, values) in (ts, stream, id) order; ties, NULLs, 0 .. 60 s."""
    rows = []
    counts = {"B": 0, "H": 0}
    for _ in range(n):
        stream = rng.choice("BH")
        y = None if rng.random() < 0.1 else rng.choice((0.5, 1.5, 2.3, 0.3))
        rows.append((stream, rng.randrange(0, 121) / 2, counts[stream], {"x": rng.randrange(0, 3), "y": y}))
        counts[stream] += 1
    return sorted(rows, key=lambda r: (r[1], r[0], r[2]))


def row_key(row: dict[str, Any]) -> str:
    return repr(sorted((k, sorted(v.items()) if isinstance(v, dict) else v) for k, v in row.items()))


def equal_exactly(engine: Any, value: Any) -> bool:
    """An engine's value against the reference's (a Fraction, or None): an integer
    exactly, a double as the double nearest the exact value (AVG) or the value itself."""
    if value is None or engine is None:
        return value is None and engine is None
    return Fraction(engine) == value if isinstance(engine, int) else engine == float(value)


@pytest.mark.spark
@pytest.mark.parametrize("seed", [10, 11, 20])  # by key (depth 3); by time (depth 2, 3)
def test_aggregates_over_views_equal_the_local_matcher_and_the_reference(spark_session: Any, seed: int) -> None:
    from runtime.spark.aggregate import aggregate_batch

    rng = random.Random(seed)
    views = graph(rng)
    checked, local_only = aggregates(rng, views)
    texts = [v.to_text() for v in views] + [q.text() for q in checked] + local_only
    rows = tuples(rng)

    local = mqo.Matcher(SCHEMA.ddl())
    local.register_queries(texts)
    reference = ViewReference(SCHEMA)
    for view in views:
        reference.create_view(view)
    for stream, ts, ident, values in rows:
        local.push(stream, ts, values, ident)
        reference.push(stream, ts, values, id=ident)
    want = local.flush().to_pylist()

    frames = stream_frames(spark_session, rows, {"B": XY, "H": XY})
    stage = aggregate_batch(frames, texts, schema=SCHEMA.ddl(), partitions=5).toArrow()
    queries = [registered.query for registered in local.aggregator.queries.values()]  # type: ignore[union-attr]
    got = stage_rows(stage, queries).to_pylist()
    assert Counter(map(row_key, got)) == Counter(map(row_key, want))

    # the reference: each view's rows recomputed from its definition, then the windows
    expected = 0
    for q in checked:
        exact_rows = {
            (float(r.end), tuple(r.group)): r.values for r in evaluate([q], view_rows(reference, q.stream), 10**9)
        }
        engine = {(r["window_end"], tuple(r["group"].values())): r["values"] for r in got if r["query"] == q.name}
        assert sorted(engine, key=repr) == sorted(exact_rows, key=repr), q.text()
        for key, values in exact_rows.items():
            for name, value in values.items():
                assert equal_exactly(engine[key][name], value), (q.text(), key, name, engine[key][name], value)
        expected += len(exact_rows)
    # what the workload holds: windows of the checked queries, and rows of the others
    assert expected > 0
    assert {r["query"] for r in want} & {"b0", "b1", "b2"}


def test_the_aggregate_stage_takes_match_views_and_refuses_the_rest() -> None:
    view = "CREATE VIEW pairs AS SELECT b.x AS x, h.y AS y FROM B b, H h MAXWINDOW 2 WHERE b.x = h.x;"
    over = "Query ID: n\nSELECT COUNT(*) FROM pairs [RANGE 4 sec];"
    m = stage_matcher([view, over], SCHEMA.ddl(), {"B": None}, None, kind="aggregate", views=True)  # type: ignore[dict-item]
    assert m.views == ["pairs"]
    plain = "Query ID: q\nSELECT * FROM pairs r WHERE r.x > 1;"
    with pytest.raises(SparkStageError, match=r"match queries \(q\) go to runtime.spark.match_batch"):
        stage_matcher([view, over, plain], SCHEMA.ddl(), {"B": None}, None, kind="aggregate", views=True)  # type: ignore[dict-item]
    with pytest.raises(SparkStageError, match=r"streaming aggregate stages do not run views \(view pairs\)"):
        stage_matcher([view, over], SCHEMA.ddl(), {"B": None}, None, kind="aggregate")  # type: ignore[dict-item]
    from runtime.spark.aggregate import aggregate_batch

    with pytest.raises(SparkStageError, match=r"pairs is a view: its rows come from its query over the streams"):
        aggregate_batch({"B": None, "pairs": None}, [view, over], schema=SCHEMA.ddl(), partitions=2)  # type: ignore[dict-item]
    counts = "CREATE VIEW counts AS SELECT B.x AS x, COUNT(*) AS c FROM B [RANGE 4 SLIDE 2] GROUP BY B.x;"
    over_counts = "Query ID: c\nSELECT MAX(counts.c) FROM counts [RANGE 4 sec];"
    both = stage_matcher([counts, over_counts], SCHEMA.ddl(), {"B": None}, None, kind="aggregate", views=True)  # type: ignore[dict-item]
    assert both.views == ["counts"]  # (an aggregate view runs: test_spark_aggregate_views)


@pytest.mark.spark
def test_a_count_window_over_a_view_counts_the_rows_of_one_tuple_in_the_local_order(spark_session: Any) -> None:
    """One tuple makes many rows of ``pairs`` (tests/differential/test_view_row_order.py's
    input); a count window numbers rows of one ts in the order made, which a task
    started on a later bucket makes as the whole run does."""
    from runtime.spark.aggregate import aggregate_batch
    from tests.differential.test_view_row_order import DDL, PAIRS
    from tests.differential.test_view_row_order import tuples as pair_tuples

    counted = (
        "Query ID: last3\nSELECT pairs.rate, MAX(pairs.pressure), COUNT(*) FROM pairs [ROWS 3] GROUP BY pairs.rate;"
    )
    rows = pair_tuples()
    local = mqo.Matcher(DDL)
    local.register_queries([PAIRS, counted])
    for stream, ts, ident, values in rows:
        local.push(stream, ts, values, ident)
    want = local.flush().to_pylist()
    frames = stream_frames(
        spark_session,
        rows,
        {"B": "ts double, id long, pressure double", "H": "ts double, id long, beatrate long, vib double"},
    )
    stage = aggregate_batch(frames, [PAIRS, counted], schema=DDL, partitions=4).toArrow()
    queries = [registered.query for registered in local.aggregator.queries.values()]  # type: ignore[union-attr]
    assert Counter(map(row_key, stage_rows(stage, queries).to_pylist())) == Counter(map(row_key, want))
    assert len(want) > 100
