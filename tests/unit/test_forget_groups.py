"""A slice store forgets the groups that hold data in no held slice
(``SliceStore._forget_groups``): memory follows the groups of the windows still open,
not every group ever seen (NEXMark's auctions: a new key every few bids, for ever).
Forgetting changes no row any query emits, also for ISTREAM/DSTREAM (which compare
groups by key across windows), groups that come back after being forgotten, and a
snapshot taken between; the store's invariants (``check=True``) hold after every change.
Only the order of a window's groups may differ (emission lists them by first arrival,
and a group that comes back after being forgotten arrives anew; files order them by key).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from mqo import Matcher
from mqo.aggregation import slices

DDL = "REGISTER STREAM B (k INTEGER, x FLOAT);"
QUERIES = """
Query ID: per_key
SELECT B.k, COUNT(*), SUM(B.x), MAX(B.x) FROM B [RANGE 10 SLIDE 5] GROUP BY B.k;

Query ID: rising
SELECT ISTREAM B.k, COUNT(*) FROM B [RANGE 4 SLIDE 2] GROUP BY B.k HAVING COUNT(*) >= 2;

Query ID: gone
SELECT DSTREAM B.k, SUM(B.x) FROM B [RANGE 4 SLIDE 2] GROUP BY B.k;
"""


def batches(n: int, seed: int) -> Iterator[dict[str, np.ndarray]]:
    """Keys that keep changing (a new one every few rows) and old keys that come back
    now and then, 10 rows a second of event time, in batches of 250."""
    rng = np.random.default_rng(seed)
    ts = np.arange(n) / 10
    fresh = np.arange(n) // 3
    old = rng.integers(0, max(1, n // 3), n)
    k = np.where(rng.random(n) < 0.1, old, fresh)
    x = rng.integers(-50, 50, n) / 7
    for start in range(0, n, 250):
        part = slice(start, start + 250)
        yield {"ts": ts[part], "k": k[part], "x": x[part]}


def run(n: int, seed: int, snapshot_at: int | None = None) -> tuple[list[str], int]:
    """Every aggregate row emitted, and the most groups a store held at once."""
    m = Matcher(DDL, check=True)
    m.register_queries(QUERIES)
    rows: list[str] = []
    most = 0
    for i, b in enumerate(batches(n, seed)):
        if snapshot_at is not None and i == snapshot_at:
            m = Matcher.restore(m.snapshot())
        m.push_batch("B", b)
        rows += m.poll_aggregates().json_lines()
        assert m.aggregator is not None
        most = max([most, *(len(store.group_keys) for store in m.aggregator.stores.values())])
    rows += m.flush().json_lines()
    return rows, most


@pytest.mark.parametrize("seed", [1, 2])
def test_forgetting_groups_changes_no_row_and_bounds_the_groups(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 6000  # 2,000 keys over 600 s, about 35 in a 10 s window
    kept, most_kept = run(n, seed)
    monkeypatch.setattr(slices, "FORGET_AT", 16)
    forgotten, most = run(n, seed)
    assert sorted(forgotten) == sorted(kept) and len(kept) > 1000
    assert most_kept > 1900  # (without forgetting: every key ever seen, about 2,000)
    assert most < 400, f"a store held {most} groups"


def test_forgetting_across_a_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    kept, _ = run(3000, 3)
    monkeypatch.setattr(slices, "FORGET_AT", 16)
    assert sorted(run(3000, 3, snapshot_at=5)[0]) == sorted(kept)
