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


def test_rows_without_candidates_get_no_results_in_every_order() -> None:
    """A row the attribute kernels leave no candidate is still flagged for the engine
    under an order whose first phase is not the attribute one; deciding it alone must
    read no other row's candidates (its ``kept`` is -1). Here every other row holds the
    OR query, so borrowing a neighbour's bits would report the rows that hold none."""
    ddl = "REGISTER STREAM A (x INTEGER, tag STRING); REGISTER STREAM B (y INTEGER);"
    queries = [
        "Query ID: q1\nSELECT * FROM A WHERE A.tag <= 'B' OR A.x > 5;",
        "Query ID: pair\nSELECT * FROM A, B MAXWINDOW 2 WHERE A.x = B.y AND A.x > 100;",
    ]
    n = 200
    xs = [9 if i % 2 else 0 for i in range(n)]  # odd rows hold q1 (x > 5), even rows nothing
    tags = [None if i % 2 == 0 else "Z" for i in range(n)]
    for order in mqo.ORDERS:
        m = mqo.Matcher(ddl, store="candidates", order=order)
        m.register_queries(queries)
        prepared = [m.prepare("A", {"ts": [i / 10 for i in range(n)], "x": xs, "tag": tags})]
        plan = m.ensure_plan()
        got = set()
        for _, blocks in m.replay(prepared, np.zeros(n, np.int64), np.arange(n)):
            for match in mqo.batch.MatchBatch(plan, blocks).matches():
                assert match.query == "q1"
                got.add(match.ids["A"])
        assert got == set(range(1, n, 2)), order
