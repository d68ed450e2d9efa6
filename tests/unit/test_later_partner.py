"""A tuple whose queries' window predicates want a later partner than any stored one
starts no probe (``CompiledPlan.later_partner``): a bid joined with an aggregate view's
row at its window's end, which is made after the bid, costs nothing when it arrives;
its results are found when the row does."""

from __future__ import annotations

import itertools
import random

import numpy as np

import mqo
from mqo.batch import MatchBatch

DDL = "REGISTER STREAM B (x INTEGER); REGISTER STREAM H (y INTEGER);"


def brute_force(rows: list[tuple[str, float, int]], offset: float, lateness: float) -> list[tuple[int, int]]:
    """The (B id, H id) pairs (ids: positions in ``rows``) with equal values,
    ``B.ts <= H.ts - offset`` and within MAXWINDOW 10, of the tuples that are not late
    (one clock: older than the newest ts less ``lateness``)."""
    kept: dict[str, list[tuple[int, float, int]]] = {"B": [], "H": []}
    newest = -float("inf")
    for j, (stream, ts, value) in enumerate(rows):
        if ts >= newest - lateness:
            kept[stream].append((j, ts, value))
        newest = max(newest, ts)
    return sorted(
        (b, h)
        for (b, bts, bx), (h, hts, hy) in itertools.product(kept["B"], kept["H"])
        if bx == hy and bts <= hts - offset and abs(hts - bts) <= 10
    )


def test_a_tuple_newer_than_every_partner_it_needs_probes_nothing() -> None:
    m = mqo.Matcher(DDL)
    m.register_query("SELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 10 WHERE B.x = H.y", "q")
    m.push("H", 0.0, {"y": 1})
    probes = m.counters.index_probes
    for k in range(50):  # every stored H is older than these: none can be their partner
        assert m.push("B", 1.0 + k * 0.1, {"x": 1}) == []
    assert m.counters.index_probes == probes and m.counters.intermediate == 0
    found = m.push("H", 6.0, {"y": 1})  # found when their partner arrives
    assert len(found) == 50 and m.counters.index_probes > probes


def test_out_of_order_partners_are_still_found() -> None:
    """Stored partners at or after a tuple (tuples out of order within the lateness),
    a tie on ts, and an offset (``B.ts <= H.ts - 0.5`` wants H half a second later;
    ``B.ts <= H.ts + 0.5`` accepts an H a little older: no skip) against brute force."""
    rng = random.Random(7)
    for offset in (0.5, 0.0, -0.5):
        for _ in range(20):
            rows = []
            top = 0.0
            for _ in range(40):
                top += rng.choice((0.0, 0.25, 0.5, 1.0))
                rows.append(
                    (rng.choice("BH"), max(0.0, top - rng.choice((0.0, 0.0, 0.5, 1.0, 3.0))), rng.randint(0, 2))
                )
            m = mqo.Matcher(DDL, allowed_lateness=2.0, time="global", late_sink=lambda late: None)
            m.register_query(f"SELECT * FROM B, H WINDOW B.ts <= H.ts - {offset} MAXWINDOW 10 WHERE B.x = H.y", "q")
            found = []
            for j, (stream, ts, value) in enumerate(rows):
                found += m.push(stream, ts, {"x" if stream == "B" else "y": value}, id=j)
            got = sorted((r.ids["B"], r.ids["H"]) for r in found)
            assert got == brute_force(rows, offset, 2.0), (offset, rows)


def test_mixed_queries_with_attribute_filters_against_brute_force() -> None:
    """Tuples that stop early (their attribute candidates all want a later partner) and
    tuples that go on for the other query: every result of both, exactly once, in an
    order that runs attributes first and in one that runs joins first."""
    rng = random.Random(11)
    for trial in range(30):
        rows = [(rng.choice("BH"), float(j // 2), rng.randint(0, 3)) for j in range(40)]
        m = mqo.Matcher(DDL, order=("AJW", "JAW", "WAJ", "adaptive")[trial % 4])
        m.register_query("SELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 10 WHERE B.x >= 2 AND B.x = H.y", "later")
        m.register_query("SELECT * FROM B, H MAXWINDOW 10 WHERE B.x < 2 AND B.x = H.y", "any_order")
        found = []
        for j, (stream, ts, value) in enumerate(rows):
            found += m.push(stream, ts, {"x" if stream == "B" else "y": value}, id=j)
        got = sorted((r.query, r.ids["B"], r.ids["H"]) for r in found)
        by_id = {j: row for j, row in enumerate(rows)}
        want = sorted(
            ("later" if by_id[b][2] >= 2 else "any_order", b, h)
            for b, h in itertools.product(range(len(rows)), repeat=2)
            if by_id[b][0] == "B"
            and by_id[h][0] == "H"
            and by_id[b][2] == by_id[h][2]
            and abs(by_id[h][1] - by_id[b][1]) <= 10
            and (by_id[b][2] < 2 or by_id[b][1] <= by_id[h][1])
        )
        assert got == want, rows


def test_what_a_tuple_finds_stored_follows_every_change_of_its_partners() -> None:
    """The engine keeps what a stream's partners store between its tuples and looks
    again when one changes (``Engine._feed``): H tuples arriving between B's (some
    newer than the B's after them), gaps in time over which the window's purge empties
    H, and tuples of a third stream K (stored for a query of its own, no partner of B's)
    in between. Pushed one by one and replayed, every (B, H) pair against brute force;
    and a B newer than every stored H probes nothing, whatever K did before it."""
    ddl = DDL + " REGISTER STREAM K (z INTEGER);"
    column = {"B": "x", "H": "y", "K": "z"}
    rng = random.Random(5)
    for _ in range(25):
        rows, top = [], 0.0
        for _ in range(60):
            top += rng.choice((2.0, 25.0) if rng.random() < 0.1 else (0.0, 0.5, 1.0))
            rows.append((rng.choice("BHHK"), top, rng.randint(0, 2)))
        others = [j for j, row in enumerate(rows) if row[0] != "K"]  # brute force's ids: positions among B and H
        want = [(others[b], others[h]) for b, h in brute_force([rows[j] for j in others], 0.0, 0.0)]
        for replayed in (False, True):
            m = mqo.Matcher(ddl, time="global")
            m.register_query("SELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 10 WHERE B.x = H.y", "q")
            m.register_query("SELECT * FROM K, H MAXWINDOW 5 WHERE K.z = H.y", "k")
            found = []
            if replayed:
                prepared = []
                for s in "BHK":
                    mine = [(j, ts, v) for j, (name, ts, v) in enumerate(rows) if name == s]
                    batch = {"ts": [r[1] for r in mine], "id": [r[0] for r in mine], column[s]: [r[2] for r in mine]}
                    prepared.append(m.prepare(s, batch))
                which = np.array(["BHK".index(name) for name, _, _ in rows])
                positions = np.array([sum(1 for r in rows[:j] if r[0] == rows[j][0]) for j in range(len(rows))])
                for _, blocks in m.replay(prepared, which, positions):
                    found += MatchBatch(m.ensure_plan(), blocks).matches()
            else:
                for j, (stream, ts, value) in enumerate(rows):
                    probes = m.counters.index_probes
                    found += m.push(stream, ts, {column[stream]: value}, id=j)
                    if stream == "B" and all(r[1] < ts for r in rows[:j] if r[0] == "H"):
                        assert m.counters.index_probes == probes, "a B newer than every H probed"
            got = sorted((r.ids["B"], r.ids["H"]) for r in found if r.query == "q")
            assert got == want, (replayed, rows)
