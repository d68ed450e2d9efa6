"""``Matcher.replay`` yields each row's results at that row's position (what a Spark task
reads to keep the results of the rows it owns), also for rows with single-stream results
only, which it decides a run at a time (mqo/alone.py)."""

from __future__ import annotations

import numpy as np

import mqo

DDL = "REGISTER STREAM B (x INTEGER); REGISTER STREAM H (y INTEGER);"
QUERIES = [
    "Query ID: some_b\nSELECT * FROM B WHERE B.x > 2;",
    "Query ID: either\nSELECT * FROM B WHERE B.x = 1 OR B.x = 4 OR B.x > 6;",
    "Query ID: h\nSELECT * FROM H WHERE H.y < 3;",
    "Query ID: pair\nSELECT * FROM B, H MAXWINDOW 2 WHERE B.x = H.y AND B.x = 5;",
]


def test_each_result_comes_at_its_rows_position() -> None:
    rng = np.random.default_rng(5)
    n = 3000  # more than one run of rows decided alone
    streams = rng.integers(0, 2, n)
    values = rng.integers(0, 9, n)
    m = mqo.Matcher(DDL, store="candidates")  # as the CLI
    m.register_queries(QUERIES)
    rows = np.zeros(n, np.int64)
    prepared = []
    for k, (name, column) in enumerate((("B", "x"), ("H", "y"))):
        mine = np.flatnonzero(streams == k)
        rows[mine] = np.arange(len(mine))
        prepared.append(m.prepare(name, {"ts": (mine / 10).tolist(), column: values[mine].tolist()}))
    plan = m.ensure_plan()
    seen, queries = 0, set()
    last = -1
    for j, blocks in m.replay(prepared, streams, rows):
        assert j > last  # positions in arrival order
        last = j
        for match in mqo.batch.MatchBatch(plan, blocks).matches():
            queries.add(match.query)
            alias = "B" if streams[j] == 0 else "H"
            assert match.ids[alias] == rows[j] and match.ts == j / 10, (j, match)
            seen += 1
    assert queries == {"some_b", "either", "h", "pair"} and seen > n / 2
