"""Views through the API: what a user relies on besides the results (those are
compared with the exact reference in tests/differential/test_views.py): removal rules,
refusals that name the view, the view graph in ``explain``, a snapshot round trip
through bytes, and a view created while tuples flow over a self-join."""

from __future__ import annotations

from typing import Any

import pytest

import mqo
from mqo.snapshot_codec import decode_snapshot, encode_snapshot
from predicates import QueryError

DDL = "REGISTER STREAM B (pressure FLOAT); REGISTER STREAM H (beatrate INTEGER, vib FLOAT);"
PAIRS = """CREATE VIEW pairs AS
SELECT B.pressure AS pressure, H.beatrate AS rate
FROM B, H MAXWINDOW 5 sec WHERE B.pressure > H.vib;"""
FAST = "Query ID: fast\nSELECT p.pressure, p.rate FROM pairs p WHERE p.rate > 100;"


def feed(m: mqo.Matcher, n: int, start: int = 0) -> list[tuple[str, float, tuple[Any, ...]]]:
    out = []
    for i in range(start, start + n):
        for r in m.push("B", 2.0 * i, {"pressure": 80.0 + (7 * i) % 25}):
            out.append((r.query, r.ts, tuple(sorted(r.values.items()))))
        for r in m.push("H", 2.0 * i + 1, {"beatrate": 95 + (3 * i) % 15, "vib": 85.0}):
            out.append((r.query, r.ts, tuple(sorted(r.values.items()))))
    return out


def test_a_view_read_by_queries_cannot_be_removed_until_they_are() -> None:
    m = mqo.Matcher(DDL)
    m.register_queries([PAIRS, FAST, "Query ID: n\nSELECT COUNT(*) FROM pairs [RANGE 10 sec];"])
    with pytest.raises(QueryError, match="view pairs is read by fast, n; unregister those first"):
        m.unregister_query("pairs")
    assert m.views == ["pairs"] and "pairs" in m.query_ids
    m.unregister_query("fast")
    m.unregister_query("n")
    m.unregister_query("pairs")
    assert m.views == [] and "pairs" not in m.catalog
    assert feed(m, 5) == []
    m.register_queries([PAIRS, FAST])  # the name is free again
    assert feed(m, 20, start=5)


def test_refusals_name_the_view() -> None:
    m = mqo.Matcher(DDL)
    m.register_queries([PAIRS])
    with pytest.raises(mqo.TupleError, match="pairs is a view"):
        m.push("pairs", 1.0, {"pressure": 1.0, "rate": 1})
    with pytest.raises(mqo.TupleError, match="pairs is a view"):
        m.heartbeat("pairs", 1.0)
    with pytest.raises(QueryError, match="streams must be declared before queries"):
        m.register_streams("REGISTER STREAM K (x FLOAT);")
    with pytest.raises(QueryError, match="view p2 is named by its CREATE VIEW"):
        m.register_query(PAIRS.replace("pairs", "p2", 1), query_id="other")
    fresh = mqo.Matcher(DDL)  # all or nothing: an aggregate over the view refused as it is registered
    feed(fresh, 2)
    with pytest.raises(QueryError, match="must be registered before the first tuple"):
        fresh.register_queries([PAIRS, "Query ID: all\nSELECT COUNT(*) FROM pairs [RANGE UNBOUNDED SLIDE 1];"])
    assert fresh.views == [] and fresh.query_ids == [] and "pairs" not in fresh.catalog
    fresh.register_queries([PAIRS, FAST])
    assert feed(fresh, 20, start=2)
    ordered = mqo.Matcher(DDL, emit="ordered")
    with pytest.raises(QueryError, match="view pairs needs emit='arrival'"):
        ordered.register_queries([PAIRS, FAST])
    assert ordered.query_ids == [] and "pairs" not in ordered.catalog


def test_explain_shows_the_graph() -> None:
    m = mqo.Matcher(DDL)
    m.register_queries([PAIRS, "CREATE VIEW hi AS SELECT p.rate AS rate FROM pairs p WHERE p.rate > 100;", FAST])
    text = m.explain()
    assert "pairs (level 1; ts, id, pressure FLOAT, rate INTEGER) <- B, H; read by hi, fast" in text
    assert "hi (level 2; ts, id, rate INTEGER) <- pairs; read by no query" in text


def test_snapshot_round_trip_carries_the_views_state() -> None:
    queries = [PAIRS, FAST, "Query ID: avg\nSELECT AVG(pairs.pressure), COUNT(*) FROM pairs [RANGE 10 sec];"]
    whole = mqo.Matcher(DDL)
    whole.register_queries(queries)
    expected = feed(whole, 30)
    expected_rows = whole.flush().rows
    first = mqo.Matcher(DDL)
    first.register_queries(queries)
    got = feed(first, 13)
    restored = mqo.Matcher.restore(decode_snapshot(encode_snapshot(first.snapshot())))
    assert restored.views == ["pairs"]
    got += feed(restored, 17, start=13)
    assert got == expected and any(q == "fast" for q, _, _ in got)
    # (rows emitted and not yet taken travel with the snapshot)
    assert [(r.window_end, r.values) for r in restored.flush().rows] == [
        (r.window_end, r.values) for r in expected_rows
    ]


def test_a_view_created_while_tuples_flow_keeps_the_stored_tuples() -> None:
    """A view registered mid-stream moves the streams after it (the roles of a
    self-join); the stored tuples move with them, so the self-join loses nothing."""
    rise = "Query ID: rise\nSELECT b2.pressure FROM B b1, B b2 MAXWINDOW 6 sec WHERE b2.pressure > b1.pressure + 5;"
    whole = mqo.Matcher(DDL)
    whole.register_queries([rise])
    expected = [r for r in feed(whole, 30) if r[0] == "rise"]
    joined = "Query ID: pj\nSELECT p.pressure, h.vib FROM pairs p, H h MAXWINDOW 4 sec WHERE p.rate > h.beatrate - 5;"
    # both matchers keep B and H stored alike (a query over both that never matches)
    keep = "Query ID: keep\nSELECT * FROM B, H MAXWINDOW 6 sec WHERE B.pressure < 0;"
    m = mqo.Matcher(DDL)
    m.register_queries([rise, keep])
    got = feed(m, 10)
    m.register_queries([PAIRS, FAST, joined])
    later = feed(m, 20, start=10)
    # (results of one tuple may come in another order: the adaptive order starts anew)
    assert sorted(got + [r for r in later if r[0] == "rise"]) == sorted(expected)
    # the view's readers find what they find without the self-join (no stream moved there)
    alone = mqo.Matcher(DDL)
    alone.register_queries([keep])
    feed(alone, 10)
    alone.register_queries([PAIRS, FAST, joined])
    readers = sorted(feed(alone, 20, start=10))
    assert sorted(r for r in later if r[0] != "rise") == readers
    assert {q for q, _, _ in readers} == {"fast", "pj"}


def test_a_plan_holds_at_most_63_streams() -> None:
    """Views are streams of the plan, whose stream masks are 64-bit: past 63 streams a
    registration is refused with an error naming the view, and nothing of it stays."""
    m = mqo.Matcher("REGISTER STREAM B (x INTEGER); REGISTER STREAM H (x INTEGER);")
    m.register_queries([f"CREATE VIEW v{k} AS SELECT B.x AS x FROM B WHERE B.x > {k};" for k in range(60)])
    texts = [f"CREATE VIEW w{k} AS SELECT H.x AS x FROM H;" for k in range(3)]
    with pytest.raises(mqo.QueryError, match=r"view w1 would make 65 streams .* at most 63"):
        m.register_queries(texts)
    assert len(m.views) == 60 and m.catalog.get("w0") is None
    m.register_queries(texts[:1])
    assert m.push("B", 1.0, {"x": 5}) == [] and len(m.views) == 61


def test_a_generation_of_view_rows_is_decided_in_one_batch_per_view(monkeypatch: pytest.MonkeyPatch) -> None:
    """An emission's aggregate rows (one per group) go through the attribute kernels as
    one batch per view, not one call per row; the rows are matched one by one after,
    and find what pushing them one by one found (against the rows themselves)."""
    import mqo.pipeline

    sizes: list[int] = []
    real = mqo.pipeline.prepare_batch

    def counting(plan: Any, stream: int, ts: Any, *args: Any, **kwargs: Any) -> Any:
        if plan.streams[stream].view:
            sizes.append(len(ts))
        return real(plan, stream, ts, *args, **kwargs)

    monkeypatch.setattr(mqo.pipeline, "prepare_batch", counting)
    m = mqo.Matcher("REGISTER STREAM Bid (auction INTEGER, price INTEGER);")
    m.register_queries(
        [
            "CREATE VIEW bids AS SELECT B.auction AS auction, COUNT(*) AS n FROM Bid B [RANGE 10 sec] GROUP BY B.auction;",
            "Query ID: busy\nSELECT c.auction, c.n FROM bids c WHERE c.n >= 3;",
        ]
    )
    counts: dict[int, int] = {}
    for k in range(200):
        auction = (k * 7) % 40
        counts[auction] = counts.get(auction, 0) + 1
        m.push("Bid", 0.01 + k * 0.04, {"auction": auction, "price": k})  # all in the window (0, 10]
    found = m.push("Bid", 10.5, {"auction": 1000, "price": 0})  # the first window closes
    assert sizes == [40]
    assert sorted((r.values["c.auction"], r.values["c.n"]) for r in found) == sorted(
        (a, n) for a, n in counts.items() if n >= 3
    )
