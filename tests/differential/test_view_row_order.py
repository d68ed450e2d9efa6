"""The rows one tuple makes in a match view are numbered in one order: by view, then
by their members' ids (mqo/views.py), not in the order the joins found them, which
the adaptive join order changes with what the matcher has seen. So a matcher started
later (as a Spark task is, on a bucket and its margin) makes a view's rows of one ts
in the order the whole run makes them (what a count window over the view, ``ROWS
n``, numbers rows of one ts by: tests/spark/test_spark_view_aggregates.py)."""

from __future__ import annotations

import random
from typing import Any

import pytest

import mqo

DDL = "REGISTER STREAM B (pressure FLOAT); REGISTER STREAM H (beatrate INTEGER, vib FLOAT);"
PAIRS = (
    "CREATE VIEW pairs AS SELECT B.pressure AS pressure, H.beatrate AS rate "
    "FROM B, H MAXWINDOW 5 sec WHERE B.pressure > H.vib;"
)


def tuples(seed: int = 1, n: int = 200) -> list[tuple[str, float, int, dict[str, Any]]]:
    """(stream, ts, id, values) in (ts, stream, id) order: many B and H of one ts, so
    one tuple makes many pairs."""
    rng = random.Random(seed)
    rows = []
    counts = {"B": 0, "H": 0}
    for _ in range(n):
        stream = rng.choice("BH")
        if stream == "B":
            values: dict[str, Any] = {"pressure": rng.choice([1.5, 2.3, 0.5])}
        else:
            values = {"beatrate": rng.randrange(3), "vib": rng.choice([0.3, 1.5, 2.0])}
        rows.append((stream, rng.randrange(0, 120) / 2, counts[stream], values))
        counts[stream] += 1
    return sorted(rows, key=lambda r: (r[1], r[0], r[2]))


def made_from(rows: list[tuple[str, float, int, dict[str, Any]]], start: float) -> list[Any]:
    """The rows of ``pairs`` a matcher fed the tuples from ``start`` on makes at or after
    ``start + 5`` (where it has every member), in the order made."""
    m = mqo.Matcher(DDL)
    m.register_queries([PAIRS])
    made: list[Any] = []
    m.view_sink = lambda view, ts, ident, values: made.append((ts, sorted(values.items())))
    for stream, ts, ident, values in rows:
        if ts >= start:
            m.push(stream, ts, values, ident)
    return [r for r in made if r[0] >= start + 5]


@pytest.mark.parametrize("start", [20.0, 40.0, 45.0])
def test_a_later_start_makes_the_view_rows_in_the_same_order(start: float) -> None:
    rows = tuples()
    whole_rows = made_from(rows, 0.0)
    assert made_from(rows, start) == [r for r in whole_rows if r[0] >= start + 5]
    # one tuple makes several rows (else there were no order to keep)
    assert len({ts for ts, _ in whole_rows}) < len(whole_rows) / 2


def test_replay_numbers_a_single_stream_view_rows_in_arrival_order() -> None:
    """The CLI's replay gives a view over one stream its rows in the order push does:
    one tuple's at a time, in arrival order (ts out of order within the lateness), though
    rows with single-stream results only are otherwise decided a run at a time."""
    import numpy as np

    ddl = "REGISTER STREAM B (pressure FLOAT);"
    texts = [
        "CREATE VIEW high AS SELECT B.pressure AS p FROM B WHERE B.pressure > 1;",
        "Query ID: plain\nSELECT * FROM B WHERE B.pressure > 0 OR B.pressure < -5;",
        "Query ID: reads\nSELECT h.p FROM high h WHERE h.p > 2;",
    ]
    rng = random.Random(3)
    ts = [k + rng.choice([0.0, -1.5, -3.0]) for k in range(80)]
    pressure = [rng.choice([0.5, 1.5, 2.5, 3.5]) for _ in ts]

    def rows_of(replay: bool) -> tuple[list[Any], list[Any]]:
        m = mqo.Matcher(ddl, allowed_lateness=3.0, store="candidates")  # as the CLI
        m.register_queries(texts)
        made: list[Any] = []
        m.view_sink = lambda view, t, ident, values: made.append((t, ident, values["p"]))
        if replay:
            prepared = [m.prepare("B", {"ts": ts, "pressure": pressure})]
            found = [
                (r.query, r.ts, r.values.get("p"))
                for _, blocks in m.replay(prepared, np.zeros(len(ts), np.int64), np.arange(len(ts)))
                for r in mqo.batch.MatchBatch(m.ensure_plan(), blocks).matches()
            ]
        else:
            pushes = zip(ts, pressure, strict=True)
            found = [(r.query, r.ts, r.values.get("p")) for t, p in pushes for r in m.push("B", t, {"pressure": p})]
        return made, found

    pushed_rows, pushed = rows_of(False)
    replayed_rows, replayed = rows_of(True)
    assert replayed_rows == pushed_rows and len(pushed_rows) > 20
    assert sorted(replayed) == sorted(pushed) and any(q == "reads" for q, _, _ in pushed)
