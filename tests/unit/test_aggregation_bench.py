"""The aggregation benchmark's two DuckDB formulations compute the windows mqo does:
same rows (query, window, group) and the same values, on a small generated workload."""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import numpy as np
import pytest

import mqo
from experiments.aggregation import (
    DDL,
    per_query_statements,
    query_text,
    set_based_statements,
    workload,
    write_csv,
)


def _duck_rows(tmp: Path, statements: list[str], out: Path) -> dict[tuple, tuple]:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE h AS SELECT * FROM read_csv('{tmp / 'h.csv'}', header = true)")
    for statement in statements:
        con.execute(statement)
    rows: dict[tuple, tuple] = {}
    for path in sorted(out.iterdir()):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            key = (r["query"], float(r["window_end"]), r["patient"])
            assert key not in rows
            rows[key] = (
                float(r["window_start"]),
                r["COUNT(*)"],
                r["SUM(H.vib)"],
                r["AVG(H.vib)"],
                r["MIN(H.vib)"],
                r["MAX(H.vib)"],
            )
    return rows


@pytest.mark.parametrize("mix", ["a", "b"])
def test_duckdb_formulations_compute_the_same_windows(tmp_path: Path, mix: str) -> None:
    data, queries = workload(20_000, 8, seed=3, mix=mix)
    if mix == "b":  # two queries of one filter, so that a set-based family's panes are their GCD
        queries[5]["filter"] = queries[6]["filter"]
    for q in queries[:4]:  # short windows too, so that many end inside the data
        q["range"] = q["range"] % 900 + 120
    write_csv(tmp_path / "h.csv", data)
    m = mqo.Matcher(DDL)
    m.register_queries("".join(query_text(q) for q in queries))
    m.push_batch("H", data)
    engine = {
        (r.query, r.window_end, r.group.get("patient")): (
            r.window_start,
            r.values["COUNT(*)"],
            r.values["SUM(H.vib)"],
            r.values["AVG(H.vib)"],
            r.values["MIN(H.vib)"],
            r.values["MAX(H.vib)"],
        )
        for r in m.flush()
    }
    assert len(engine) > 100
    for kind, build in (("per_query", per_query_statements), ("set_based", set_based_statements)):
        out = tmp_path / kind
        out.mkdir()
        duck = _duck_rows(tmp_path, build(queries, out), out)
        assert set(duck) == set(engine), kind
        for key, (start, n, total, avg, lo, hi) in duck.items():
            e = engine[key]
            assert (start, n, lo, hi) == (e[0], e[1], e[4], e[5]), (kind, key)
            assert math.isclose(total, e[2], rel_tol=1e-12) and math.isclose(avg, e[3], rel_tol=1e-12), (kind, key)
    assert np.asarray(data["ts"]).max() > max(q["range"] for q in queries[:4])
