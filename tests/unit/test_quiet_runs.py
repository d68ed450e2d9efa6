"""Rows a replay stores without matching them (:mod:`mqo.replay_chunks`): a B whose
queries want their H and K partners at or after its ts, when no stored H or K is that
new, ends no result when it arrives; a run of such rows is stored at once with the
attribute outcome the batch kernels gave each. The H and K tuples after them must
find them exactly as if each had been matched: under the queries whose predicates
on B's own column the stored B passes, and no others."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import numpy as np

import mqo
from mqo.batch import MatchBatch

DDL = "REGISTER STREAM B (x INTEGER); REGISTER STREAM H (y INTEGER); REGISTER STREAM K (z INTEGER);"
COLUMN = {"B": "x", "H": "y", "K": "z"}
Row = tuple[str, float, int]


def later_query(lo: int, hi: int) -> str:
    """H and K at or after B, equal values, B's value at least ``lo``, K's at most ``hi``."""
    return (
        "SELECT * FROM B, H, K WINDOW B.ts <= H.ts AND B.ts <= K.ts MAXWINDOW 10 "
        f"WHERE B.x = H.y AND H.y = K.z AND B.x >= {lo} AND K.z <= {hi}"
    )


ANY_ORDER = "SELECT * FROM B, H, K MAXWINDOW 10 WHERE B.x = H.y AND H.y = K.z AND B.x < 1"


def single_queries(values: list[int], rng: random.Random) -> dict[str, tuple[int, ...]]:
    """Queries of B alone: one of several disjuncts (decided alone, without the
    engine), one plain; B's value for each to hold."""
    either, least = rng.sample(values, 2), rng.choice(values)
    return {"either": tuple(either), "least": tuple(v for v in range(5) if v >= least)}


def single_text(name: str, holds: tuple[int, ...]) -> str:
    if name == "either":
        return " OR ".join(f"B.x = {v}" for v in holds).join(("SELECT * FROM B WHERE ", ""))
    return f"SELECT * FROM B WHERE B.x >= {min(holds, default=5)}"


def brute_force(
    rows: list[Row], queries: dict[str, tuple[int, int] | None], singles: dict[str, tuple[int, ...]]
) -> list[tuple[str, int, int, int]]:
    """(query, B id, H id, K id) of every result (ids: positions in ``rows``, -1 for
    none); a join query's bounds, or None for :data:`ANY_ORDER`; a single query's values."""
    by = {s: [(j, ts, v) for j, (name, ts, v) in enumerate(rows) if name == s] for s in "BHK"}
    found = [(name, b, -1, -1) for name, holds in singles.items() for b, _, bx in by["B"] if bx in holds]
    for (b, bts, bx), (h, hts, hy), (k, kts, kz) in itertools.product(by["B"], by["H"], by["K"]):
        if not bx == hy == kz or max(bts, hts, kts) - min(bts, hts, kts) > 10:
            continue
        for name, bounds in queries.items():
            if bounds is None:
                if bx < 1:
                    found.append((name, b, h, k))
            elif bx >= bounds[0] and kz <= bounds[1] and bts <= hts and bts <= kts:
                found.append((name, b, h, k))
    return sorted(found)


def stream_rows(
    rng: random.Random, n: int, steps: tuple[float, ...], weights: tuple[int, ...] = (6, 2, 2), late: float = 0.0
) -> list[Row]:
    """``n`` rows of B, H and K (in ``weights``' shares) whose ts grow by ``steps``; a
    share ``late`` of them 3 seconds behind."""
    rows: list[Row] = []
    top = 0.0
    for _ in range(n):
        top += rng.choice(steps)
        behind = late and rng.random() < late
        rows.append((rng.choices("BHK", weights)[0], max(0.0, top - 3.0) if behind else top, rng.randint(0, 3)))
    return rows


def replay_part(
    m: mqo.Matcher, rows: list[Row], first_id: int, last: bool = True
) -> Iterator[tuple[int, list[mqo.Match]]]:
    """``rows`` (in ts order, ids from ``first_id`` on) replayed, each stream's rows
    prepared as one batch (B's also ingested by aggregate views reading it): (position,
    its matches) per yield."""
    prepared, which, positions = [], np.zeros(len(rows), np.int64), np.zeros(len(rows), np.int64)
    for k, s in enumerate("BHK"):
        mine = [(p, ts, v) for p, (name, ts, v) in enumerate(rows) if name == s]
        batch = {"ts": [r[1] for r in mine], "id": [first_id + r[0] for r in mine], COLUMN[s]: [r[2] for r in mine]}
        prepared.append(m.prepare(s, batch))
        if m.registrations.aggregating(s):
            m.registrations.ingest(s, batch)
        for position, (p, *_) in enumerate(mine):
            which[p], positions[p] = k, position
    for j, blocks in m.replay(prepared, which, positions, last=last):
        yield first_id + j, MatchBatch(m.ensure_plan(), blocks).matches()


def replayed(m: mqo.Matcher, rows: list[Row], cuts: list[int]) -> list[mqo.Match]:
    """``rows`` replayed a part at a time (cut at ``cuts``); under ``emit='ordered'``
    what the end releases too."""
    found: list[mqo.Match] = []
    for start, end in itertools.pairwise([0, *cuts, len(rows)]):
        for _, matches in replay_part(m, rows[start:end], start):
            found += matches
    if m.config.emit == "ordered":
        found += m.flush_results().matches()
    return found


def test_rows_stored_without_a_visit_are_found_by_later_tuples() -> None:
    rng = random.Random(3)
    quiet = 0
    for trial in range(40):
        rows = stream_rows(rng, 60, (0.0, 0.5, 1.0))
        values = [v for _, _, v in rows]
        queries: dict[str, tuple[int, int] | None] = {
            f"q{k}": (rng.choice(values), rng.choice(values)) for k in range(3)
        }
        if trial % 2:
            queries["any_order"] = None  # (B rows of this one always have a stored partner to try)
        singles = single_queries(values, rng) if trial % 3 else {}
        want = brute_force(rows, queries, singles)
        cuts = sorted(rng.sample(range(1, len(rows)), 2))
        emit = ("arrival", "ordered")[trial % 4 // 2]
        m = mqo.Matcher(DDL, time="global", emit=emit, order=("adaptive", "AJW", "JWA")[trial % 3])
        for name, bounds in queries.items():
            m.register_query(ANY_ORDER if bounds is None else later_query(*bounds), name)
        for name, holds in singles.items():
            m.register_query(single_text(name, holds), name)
        got = sorted((r.query, r.ids["B"], r.ids.get("H", -1), r.ids.get("K", -1)) for r in replayed(m, rows, cuts))
        assert got == want, (trial, rows, queries)
        quiet += m.counters.quiet
    assert quiet > 250, "the workload should store many B rows without a visit"


def test_a_registration_between_parts_is_seen_by_the_rows_stored_before_it() -> None:
    """Rows stored without a visit under one plan meet a query registered after them as
    rows matched one by one do: a replay and pushes one at a time, with a query added
    after the first part, give the same results."""
    rng = random.Random(8)
    for _ in range(25):
        rows = stream_rows(rng, 50, (0.0, 0.5, 1.0))
        cut = rng.randint(5, 45)
        first, later = (rng.randint(0, 3), rng.randint(0, 3)), (rng.randint(0, 3), rng.randint(0, 3))
        results = []
        for replay in (True, False):
            m = mqo.Matcher(DDL, time="global")
            m.register_query(later_query(*first), "first")
            if replay:
                found = [r for _, matches in replay_part(m, rows[:cut], 0) for r in matches]
                m.register_query(later_query(*later), "later")
                found += [r for _, matches in replay_part(m, rows[cut:], cut) for r in matches]
            else:
                found = []
                for j, (stream, ts, value) in enumerate(rows):
                    if j == cut:
                        m.register_query(later_query(*later), "later")
                    found += m.push(stream, ts, {COLUMN[stream]: value}, id=j)
            results.append(sorted((r.query, r.ids["B"], r.ids["H"], r.ids["K"]) for r in found))
        assert results[0] == results[1], rows


VIEW_DDL = DDL + " REGISTER STREAM V (x INTEGER);"  # (V: no rows; the view reads B)
VIEW_QUERIES = [
    "CREATE VIEW hot AS SELECT b.x AS x, COUNT(*) AS n FROM B b [RANGE 2 sec SLIDE 1 sec] GROUP BY b.x;",
    "Query ID: bhot\nSELECT b.x, h.n FROM B b, hot h WINDOW b.ts <= h.ts MAXWINDOW 3 sec WHERE b.x = h.x;",
    "Query ID: hotb\nSELECT b.x, h.n FROM B b, hot h WINDOW h.ts <= b.ts MAXWINDOW 3 sec WHERE b.x = h.x;",
    "Query ID: near\nSELECT h.x, k.y FROM hot h, H k MAXWINDOW 1 sec WHERE h.x = k.y;",
]


def positions(m: mqo.Matcher, rows: list[Row], cuts: list[int]) -> list[tuple[object, list[tuple]]]:
    """(position, its results) for every yield with results of a replay in parts, then
    what the end emits and releases; a result as (query, ts, ids, values)."""
    got: list[tuple[object, list[tuple]]] = []

    def add(at: object, matches: list[mqo.Match]) -> None:
        found = sorted((r.query, r.ts, sorted(r.ids.items()), sorted(r.values.items())) for r in matches)
        if found:
            got.append((at, found))

    for start, end in itertools.pairwise([0, *cuts, len(rows)]):
        for at, matches in replay_part(m, rows[start:end], start, last=end == len(rows)):
            add(at, matches)
    m.flush()
    add("flush", m.take_results().matches())
    if m.config.emit == "ordered":
        add("end", m.flush_results().matches())
    return got


def test_quiet_runs_leave_every_result_at_its_position(monkeypatch) -> None:
    """A replay with quiet runs against the same replay visiting every row (the engine
    told no row ends nothing): the same results at the same positions, under both emit
    modes (a run ends at the row whose watermark releases a held result) and with an
    aggregate view (a run ends where the view's windows are emitted), with late and
    out-of-order rows, OR queries decided alone, the columnar pair step, a self-join,
    several orders and ``check=True``."""
    from mqo.engine import Engine

    ends_nothing = Engine.ends_nothing
    rng = random.Random(21)
    quiet = 0
    for trial in range(24):
        views = trial % 4 == 0  # (a view needs emit="arrival": even trials; many B rows a second)
        if views:
            rows = stream_rows(rng, 400, (0.0, 0.05, 0.1, 0.25), (8, 1, 1), late=0.05)
        else:
            rows = stream_rows(rng, rng.choice((60, 200)), (0.0, 0.1, 0.25, 0.5, 1.0), late=0.05)
        texts = [f"Query ID: q{k}\n{later_query(rng.randint(0, 3), rng.randint(0, 3))};" for k in range(2)]
        texts += rng.sample(
            [
                "Query ID: either\nSELECT * FROM B WHERE B.x = 1 OR B.x = 3;",
                "Query ID: pair\nSELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 5 WHERE B.x = H.y AND B.x >= 1;",
                "Query ID: self\nSELECT * FROM B b1, B b2 WINDOW b1.ts <= b2.ts MAXWINDOW 3 WHERE b1.x = b2.x AND b1.x = 2;",
            ],
            rng.randint(0, 2),
        )
        if views:
            texts += VIEW_QUERIES
        settings = {
            "emit": ("arrival", "ordered")[trial % 2],
            "order": ("adaptive", "AJW", "JWA")[trial % 3],
            "check": trial % 4 == 3,
            "allowed_lateness": rng.choice((0.0, 2.0)),
            "time": rng.choice(("global", "per-stream")),
            "late_sink": lambda late: None,
        }
        cuts = sorted(rng.sample(range(1, len(rows)), 2))
        outcomes = []
        for visit_all in (False, True):
            if visit_all:
                monkeypatch.setattr(Engine, "ends_nothing", lambda self, s, ts, slots: 0)
            m = mqo.Matcher(VIEW_DDL if views else DDL, **settings)
            m.register_queries(texts)
            outcomes.append(positions(m, rows, cuts))
            quiet += m.counters.quiet
            monkeypatch.setattr(Engine, "ends_nothing", ends_nothing)
        assert outcomes[0] == outcomes[1], (trial, settings, texts)
    assert quiet > 500, "the workloads should store many rows without a visit"


def test_a_visited_rows_or_results_read_off_its_int_are_the_batch_rule() -> None:
    """A visited row's results of OR queries decided alone are read off its candidate
    int (``first_disjuncts``); a batch's rows by ``first_of_records`` over arrays: for
    any set of surviving disjuncts both keep the lowest slot of each query."""
    from mqo.alone import first_disjuncts, first_of_records

    m = mqo.Matcher("REGISTER STREAM B (auction INTEGER, price INTEGER);")
    rnd = random.Random(3)
    for q in range(40):
        terms = " OR ".join(f"B.auction = {a}" for a in sorted(rnd.sample(range(30), rnd.randint(1, 6))))
        m.register_query(f"SELECT * FROM B WHERE {terms}", f"q{q}")
    plan = m.ensure_plan()
    assert plan.n_slots > 64  # (an int wider than a word)
    for _ in range(300):
        slots = np.array(sorted(rnd.sample(range(plan.n_slots), rnd.randint(0, 30))), np.int64)
        bits = sum(1 << int(q) for q in slots)
        _, want = first_of_records(plan, np.zeros(len(slots), np.int64), slots)
        assert first_disjuncts(plan, bits).tolist() == want.tolist()
