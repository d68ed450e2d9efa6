"""Aggregate views in the Spark batch stages (runtime/spark/aggregate_views.py) against
the local matcher and the exact view reference (tests/references/exact_views.py,
rules 5-6).

Seeded graphs: an aggregate view over a declared stream (RSTREAM, ISTREAM or DSTREAM,
grouped), one over a match view of a join, one over an aggregate view (level 2), a
match query joining two aggregate views on the window end (NEXMark Q5's shape), one
joining an aggregate view with a stream, and aggregate queries over aggregate views
(count windows among them); tuples at half-second steps with ties and NULLs. Every
match result equals the reference's and the local matcher's, an aggregate view
member's id included (the stage numbers those rows as the local engine does); every
aggregate row equals the local matcher's exactly.
"""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction
from typing import Any

import pytest

import mqo
from runtime.spark.cli import stage_rows
from tests.references.exact_language import And, Cmp, Col, Duration, Item, Query
from tests.references.exact_views import AggView, View, ViewReference
from tests.references.reference import Result, exact_result
from tests.spark.helpers import XY, stream_frames
from tests.spark.test_spark_view_aggregates import SCHEMA, row_key, tuples

OPS = ("RSTREAM", "ISTREAM", "DSTREAM")


def workload(rng: random.Random) -> tuple[list[View | AggView], list[Query], list[str]]:
    counts = AggView(
        "counts",
        "B",
        Fraction(4),
        Fraction(2),
        ("x",),
        (("n", "COUNT", None), ("top", "MAX", "y")),
        (),
        rng.choice(OPS),
    )
    pairs = View(
        Query(
            "pairs",
            (("b", "B"), ("h", "H")),
            maxwindow=Duration(rng.choice(("1", "2"))),
            where=Cmp(rng.choice(("=", ">=")), Col("b", "x"), Col("h", "x")),
            select=(Item(Col("b", "x"), "x"), Item(Col("h", "y"), "y")),
        )
    )
    per_pair = AggView(
        "pc",
        "pairs",
        Fraction(3),
        Fraction(3, 2),
        ("x",),
        (("n", "COUNT", None), ("low", "MIN", "y")),
        (),
        rng.choice(OPS),
    )
    most = AggView("most", "counts", Fraction(2), Fraction(2), (), (("m", "MAX", "n"),))
    readers = [
        Query(
            "hottest",
            (("c", "counts"), ("m", "most")),
            maxwindow=Duration("0"),
            where=And((Cmp("=", Col("c", "n"), Col("m", "m")), Cmp("=", Col("c", "ts"), Col("m", "ts")))),
        ),
        Query(
            "near",
            (("r", "pc"), ("s", "H")),
            maxwindow=Duration(rng.choice(("1", "2.5"))),
            where=Cmp("=", Col("r", "x"), Col("s", "x")),
        ),
    ]
    window = rng.choice(("ROWS 2", "ROWS 3 SLIDE 2", "RANGE 4 sec SLIDE 2 sec"))
    over = [
        f"Query ID: tops\nSELECT counts.x, COUNT(*), MAX(counts.top), SUM(counts.n) FROM counts [{window}] "
        "GROUP BY counts.x;",
        "Query ID: lows\nSELECT AVG(pc.low), COUNT(*) FROM pc [RANGE 6 sec SLIDE 3 sec];",
    ]
    return [counts, pairs, per_pair, most], readers, over


def results_of(rows: list[Any]) -> list[Result]:
    names = [c for c in rows[0].asDict() if c not in ("query", "ts", "ids")] if rows else []
    return [exact_result(r["query"], r["ts"], r["ids"], {c: r[c] for c in names if r[c] is not None}) for r in rows]


@pytest.mark.spark
@pytest.mark.parametrize("seed", [1, 2])
def test_aggregate_views_equal_the_local_matcher_and_the_reference(spark_session: Any, seed: int) -> None:
    from runtime.spark.aggregate import aggregate_batch
    from runtime.spark.batch import match_batch

    rng = random.Random(seed)
    views, readers, over = workload(rng)
    rows = tuples(rng, 160)
    reference = ViewReference(SCHEMA)
    for view in views:
        if isinstance(view, AggView):
            reference.create_agg_view(view)
        else:
            reference.create_view(view)
    for q in readers:
        reference.register(q)
    texts = [v.to_text() for v in views] + [q.to_text() for q in readers]
    local = mqo.Matcher(SCHEMA.ddl())
    local.register_queries(texts + over)
    expected: list[Result] = []
    found: list[Any] = []
    for stream, ts, ident, values in rows:
        expected += reference.push(stream, ts, values, id=ident)
        found += local.push(stream, ts, values, ident)
    expected += reference.flush()
    aggregates = local.flush().to_pylist()
    found += local.take_results().matches()

    def comparable(results: list[Result]) -> Counter[Any]:
        # (values as the reference names them: its result values of the query's own SELECT *)
        return Counter((r.query, r.ts, r.ids, tuple(v for v in r.values if v[1] is not None)) for r in results)

    want = comparable(expected)
    assert comparable([exact_result(m.query, m.ts, m.ids, m.values) for m in found]) == want

    frames = stream_frames(spark_session, rows, {"B": XY, "H": XY})
    stage = match_batch(frames, texts, schema=SCHEMA.ddl(), partitions=4).collect()
    assert comparable(results_of(stage)) == want
    queries = local.registrations.output_aggregates()
    table = aggregate_batch(frames, [v.to_text() for v in views] + over, schema=SCHEMA.ddl(), partitions=4).toArrow()
    got = stage_rows(table, queries).to_pylist()
    assert Counter(map(row_key, got)) == Counter(map(row_key, aggregates))
    # what the workload holds: results of both readers, rows of both aggregates
    assert {r.query for r in expected} == {"hottest", "near"}
    assert {r["query"] for r in aggregates} == {"tops", "lows"}


@pytest.mark.spark
def test_an_aggregate_view_over_a_stream_without_tuples_has_no_rows(spark_session: Any) -> None:
    """A stream given no DataFrame (``mqo match --engine spark`` gives none for a stream
    without tuples) has no tuples: an aggregate view over it has no rows, and the
    queries over the other views run, as in the local engine."""
    from runtime.spark.batch import match_batch

    texts = [
        "CREATE VIEW quiet AS SELECT H.x AS x, COUNT(*) AS n FROM H [RANGE 4 sec SLIDE 2 sec] GROUP BY H.x;",
        "CREATE VIEW counts AS SELECT B.x AS x, COUNT(*) AS n FROM B [RANGE 4 sec SLIDE 2 sec] GROUP BY B.x;",
        "Query ID: busy\nSELECT * FROM counts c, B MAXWINDOW 1 sec WHERE c.x = B.x AND c.n >= 2;",
        "Query ID: calm\nSELECT * FROM quiet q, B MAXWINDOW 1 sec WHERE q.x = B.x;",
    ]
    rows = [r for r in tuples(random.Random(4), 80) if r[0] == "B"]
    local = mqo.Matcher(SCHEMA.ddl())
    local.register_queries(texts)
    found = [m for stream, ts, ident, values in rows for m in local.push(stream, ts, values, ident)]
    local.flush()
    found += local.take_results().matches()
    want = Counter(
        exact_result(m.query, m.ts, m.ids, {k: v for k, v in m.values.items() if v is not None}) for m in found
    )
    got = match_batch(stream_frames(spark_session, rows, {"B": XY}), texts, schema=SCHEMA.ddl(), partitions=2).collect()
    assert Counter(results_of(got)) == want and {r.query for r in want} == {"busy"}


TABLED = [
    "CREATE TABLE zones (x INTEGER, label STRING) KEY (x);",
    "CREATE VIEW counts AS SELECT B.x AS x, COUNT(*) AS n FROM B [RANGE 4 sec SLIDE 2 sec] GROUP BY B.x;",
    "Query ID: labelled\nSELECT c.x, c.n, z.label FROM counts c, zones z WHERE c.x = z.x AND c.n >= 2;",
    "Query ID: met\nSELECT c.n, h.y, z.label FROM counts c, H h, zones z MAXWINDOW 1 sec "
    "WHERE c.x = h.x AND h.x = z.x AND c.n >= 2;",
]


def zoned(texts: list[str]) -> mqo.Matcher:
    """A matcher of ``texts`` whose table zones gets versions from the start, at 20 s
    and at 40 s (a delete)."""
    m = mqo.Matcher(SCHEMA.ddl())
    m.register_queries(texts)
    m.upsert_rows("zones", [{"x": 0, "label": "zero"}, {"x": 1, "label": "one"}, {"x": 2, "label": "two"}], None)
    m.upsert_rows("zones", [{"x": 1, "label": "uno"}], 20.0)
    m.delete_rows("zones", [0], 40.0)
    return m


@pytest.mark.spark
def test_aggregate_views_run_with_tables(spark_session: Any) -> None:
    """An aggregate view's rows joined with a table as of their ts (the window's end),
    alone and with a stream: the local matcher's results, an aggregate view member's id
    included (the stage numbers those rows as the local engine does)."""
    from runtime.spark.batch import match_batch

    rows = tuples(random.Random(6), 160)
    local = zoned(TABLED)
    found = [m for stream, ts, ident, values in rows for m in local.push(stream, ts, values, ident)]
    local.flush()
    found += local.take_results().matches()

    def key(query: str, ts: float, ids: Any, values: dict[str, Any]) -> Result:
        return exact_result(query, ts, ids, {k: v for k, v in values.items() if v is not None})

    want = Counter(key(m.query, m.ts, m.ids, m.values) for m in found)
    frames = stream_frames(spark_session, rows, {"B": XY, "H": XY})
    got = match_batch(frames, zoned(TABLED), partitions=4).collect()
    names = [c for c in got[0].asDict() if c not in ("query", "ts", "ids")]
    assert Counter(key(r["query"], r["ts"], r["ids"], {c: r[c] for c in names}) for r in got) == want
    # what the run holds: both queries, labels of every version (zero only before 40 s)
    labels = {(m.query, m.values["z.label"]) for m in found}
    assert {q for q, _ in labels} == {"labelled", "met"} and {"one", "uno", "zero"} <= {lb for _, lb in labels}
    assert max(m.ts for m in found if m.values["z.label"] == "zero") < 40 <= max(m.ts for m in found)
