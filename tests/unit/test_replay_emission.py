"""A replay with aggregate views emits their windows as the rows come, also when no
row is ever visited (the base stream only aggregated, the match queries reading views
only): after every row whose arrival number is a multiple of ``REPLAY_EMIT_ROWS``.
Before, such a replay emitted nothing until its end: ``mqo match`` held every slice of
the input (NEXMark's Q5 variants alone: 1.2 GiB at 1,000,000 events, 470 MiB now).
Where it emits depends on the rows alone: replayed in parts of any sizes, the results
come at the same rows, and they are the results of pushing the rows one batch at a time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mqo import Matcher
from mqo import matcher as matcher_module

DDL = "REGISTER STREAM B (k INTEGER, x FLOAT);"
QUERIES = """
CREATE VIEW per AS SELECT B.k AS k, COUNT(*) AS n FROM B [RANGE 2 SLIDE 1] GROUP BY B.k;

Query ID: busy
SELECT per.k, per.n FROM per WHERE per.n >= 3;
"""
N = 1200


def rows(seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"ts": np.arange(N) / 20, "k": rng.integers(0, 6, N), "x": rng.integers(0, 9, N) / 3}


def matcher() -> Matcher:
    m = Matcher(DDL, store="candidates")  # (as mqo match runs: B's rows are then never visited)
    m.register_queries(QUERIES)
    return m


def replayed(parts: list[int]) -> tuple[list[tuple[int, Any]], Matcher, int]:
    """(arrival position, result) of every result of a replay of the rows in parts of
    these sizes (the last part ends the replay), the matcher after it, and the most
    slices a store held at a part's end. Each part's rows go into the aggregate queries
    first, as ``mqo match`` puts a round's."""
    most = 0
    m = matcher()
    batch = rows()
    prepared = m.prepare("B", batch)
    found: list[tuple[int, Any]] = []
    start = 0
    for k, size in enumerate(parts):
        at = np.arange(start, start + size)
        assert m.aggregator is not None
        part = {name: column[at] for name, column in batch.items()}
        m.aggregator.ingest("B", part, late=np.zeros(size, bool), arrival=at + 1)
        last = k == len(parts) - 1
        for j, blocks in m.replay([prepared], np.zeros(size, np.int64), at, last=last):
            found += [(start + j, (r.query, r.ts, tuple(sorted(r.ids.items())))) for r in m._matches(blocks, False)]
        start += size
        most = max(most, *(store.slices_kept for store in m.aggregator.stores.values()))
    m.flush()  # (the end of input, as mqo match ends: every window holding data)
    found += [(N, (r.query, r.ts, tuple(sorted(r.ids.items())))) for r in m.take_results().matches()]
    return found, m, most


@pytest.fixture(autouse=True)
def often(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(matcher_module, "REPLAY_EMIT_ROWS", 100)


def test_windows_close_as_rows_come_when_no_row_is_visited() -> None:
    found, m, _ = replayed([N])
    assert found, "the view found nothing: the test would show nothing"
    positions = [j for j, _ in found]
    assert m.pipeline.visits == 0
    assert min(positions) < N // 4, "no result before the end of the replay"
    assert all(j % 100 == 99 or j >= N - 1 for j in positions)  # (at the emission points)
    # in parts of 100 rows (5 s), each part's end finds the slices before it gone
    assert replayed([100] * (N // 100))[2] <= 12


@pytest.mark.parametrize("parts", [[1] * 10 + [N - 10], [37, 400, 763], [99, 1, 100, 1000], [N - 1, 1]])
def test_the_same_results_at_the_same_rows_whatever_the_parts(parts: list[int]) -> None:
    assert sum(parts) == N
    assert replayed(parts)[0] == replayed([N])[0]


def test_the_results_are_those_of_push_batch() -> None:
    m = matcher()
    batch = rows()
    pushed = []
    for start in range(0, N, 50):
        part = {name: column[start : start + 50] for name, column in batch.items()}
        pushed += m.push_batch("B", part).matches()
    pushed += m.take_results().matches()
    m.flush()  # (the end of input: every window holding data)
    pushed += m.take_results().matches()
    key = [(r.query, r.ts, tuple(sorted(r.ids.items()))) for r in pushed]
    assert sorted(key) == sorted(result for _, result in replayed([N])[0])


def test_the_same_rows_after_a_snapshot_between_parts() -> None:
    """The rows replayed so far are part of a snapshot: a matcher restored between two
    parts emits at the rows the one that went on would."""
    whole = replayed([650, 550])[0]
    m = matcher()
    batch = rows()
    found: list[tuple[int, Any]] = []
    for start, size in ((0, 650), (650, 550)):
        at = np.arange(start, start + size)
        assert m.aggregator is not None
        m.aggregator.ingest("B", {n: c[at] for n, c in batch.items()}, late=np.zeros(size, bool), arrival=at + 1)
        prepared = m.prepare("B", {n: c[at] for n, c in batch.items()})
        for j, blocks in m.replay([prepared], np.zeros(size, np.int64), np.arange(size), last=start > 0):
            found += [(start + j, (r.query, r.ts, tuple(sorted(r.ids.items())))) for r in m._matches(blocks, False)]
        if start == 0:
            m = Matcher.restore(m.snapshot())
    m.flush()
    found += [(N, (r.query, r.ts, tuple(sorted(r.ids.items())))) for r in m.take_results().matches()]
    assert found == whole


def test_a_replay_in_pieces_reads_processing_time_once() -> None:
    """Which streams are idle is decided as for one replay of all its rows: with a clock
    whose processing time moves on at every reading, a piece after the first would find
    A, silent since, idle, and its next tuple, far behind B, late."""
    ddl = "REGISTER STREAM A (x FLOAT); REGISTER STREAM B (x FLOAT);"
    text = QUERIES.replace("B.k", "A.x").replace("FROM B", "FROM A")
    readings = iter(range(0, 10**6, 5))
    m = Matcher(ddl, time="per-stream", idle_timeout=3, store="candidates", now=lambda: float(next(readings)))
    m.register_queries(text)
    a_ts, b_ts = np.array([0.0, 1.0, 2.0, 20.0]), np.arange(3, 100, 0.1)
    a = m.prepare("A", {"ts": a_ts, "x": np.ones(len(a_ts))})
    b = m.prepare("B", {"ts": b_ts, "x": np.ones(len(b_ts))})
    which = np.concatenate([[0, 0, 0], np.ones(len(b_ts), np.int64), [0]])  # A's 20 s arrives last
    at = np.concatenate([[0, 1, 2], np.arange(len(b_ts)), [3]])
    assert len(at) > 5 * 100  # (several pieces)
    list(m.replay([a, b], which, at))
    assert m.late_count == 0
