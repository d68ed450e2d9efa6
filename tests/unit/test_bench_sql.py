"""Benchmarks (b) and (b') against DuckDB (experiments.bench_sql) at small sizes: each
run asserts inside that mqo and the SQL statements found the same results; here, that
the rows come out and the SQL is built as meant. No timings are checked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from experiments import bench, bench_sql
from experiments._data import ICU_DDL
from experiments.bench_sql import SHAPES, THESIS, cuts, sql
from mqo import Matcher

METRICS = [
    "mqo match (whole process), seconds",
    "DuckDB, one SQL query per query (whole process), seconds",
    "speed-up mqo / DuckDB",
    "speed-up mqo / set-based DuckDB",
]
PARQUET = [
    "Parquet output: mqo match (whole process), seconds",
    "Parquet output: set-based DuckDB (whole process), seconds",
    "Parquet output: speed-up mqo / set-based DuckDB",
]


def test_shapes_register_with_mqo_and_differ() -> None:
    rng = np.random.default_rng(0)
    m = Matcher(ICU_DDL)
    for k, shape in enumerate(SHAPES):
        values = {name: draw(rng, 1)[0] for name, draw in shape.constants.items()}
        m.register_query(shape.mqo(f"s{k}", values).rstrip(";"))
    assert len(m.registry) == len(SHAPES) >= 5
    assert len({(s.streams, s.where, s.window, s.first) for s in SHAPES}) == len(SHAPES)


def test_the_set_based_statement_cuts_each_stream_by_the_loosest_constants() -> None:
    assert cuts(THESIS, "q") == {
        "B": ["b.pressure < (SELECT max(c1) FROM q)"],
        "H": ["h.beatrate > (SELECT min(c2) FROM q)"],
    }
    ratio = next(s for s in SHAPES if s.name == "b_ratio")
    assert cuts(ratio, "q") == {"B": ["b.alert = 0", "b.pressure <= 0.5 * b.temp + ((SELECT max(c1) FROM q))"]}
    # a constant that multiplies, or a conjunct of two streams, does not cut
    assert (
        sql(THESIS.where, lambda c: f"q.{c}") == "b.pressure < q.c1 AND h.beatrate > q.c2 AND b.pressure <= q.k * h.vib"
    )


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_constants_never_sit_on_the_data_grid(shape: bench_sql.Shape) -> None:
    """Constants other than the thesis' (drawn like (b)'s) fall between data values,
    so DuckDB's doubles and mqo's exact arithmetic cannot disagree on a tie."""
    if shape is THESIS:
        return
    rng = np.random.default_rng(1)
    for name, draw in shape.constants.items():
        if name == "k":
            continue
        for text in draw(rng, 50):
            assert round(float(text) * 2000) % 2 == 1 or round(float(text) * 4000) % 2 == 1, text


def test_heterogeneous_variant_at_a_small_size() -> None:
    rows = bench_sql.bench_hetero(70, [2000], 3, seed=5)
    assert {r["benchmark"] for r in rows} == {"b'"}
    assert [r["metric"] for r in rows if r["metric"] in METRICS] == [
        METRICS[0],
        METRICS[1],
        METRICS[2],
        METRICS[3],
    ]
    assert [r["metric"] for r in rows if r["metric"].startswith("Parquet")] == PARQUET
    assert "7 shape(s)" in rows[0]["note"] and "register" in rows[0]["note"]
    assert "of 21 queries timed" in rows[1]["note"]
    assert all(r["met"] in (True, False) for r in rows if r["target"])


def test_the_thesis_variant_at_two_sizes() -> None:
    """A second size's rows say their size, time the per-query SQL on a sample, and
    hold mqo to 2x the set-based statement from 2 x 250,000 tuples on."""
    rows = bench_sql.bench_duckdb(20, [1000, 1500], seed=3, sample=4)
    first = [r for r in rows if not r["metric"].startswith("2 x")]
    second = [r for r in rows if r["metric"].startswith("2 x 1,500 tuples: ")]
    assert [r["metric"] for r in first if r["metric"] in METRICS] == METRICS
    assert [r["metric"].removeprefix("2 x 1,500 tuples: ") for r in second if r["target"]] == [
        "speed-up mqo / DuckDB",
        "speed-up mqo / set-based DuckDB",
        "Parquet output: speed-up mqo / set-based DuckDB",
    ]
    assert len(first) == len(second) == len(rows) / 2
    assert "of 4 queries timed" in second[1]["note"] and "queries timed" not in first[1]["note"]
    assert first[-1]["target"] == ">= 1.5x" and second[-1]["target"] == ">= 1.5x"
    assert bench_sql.set_based_target(250_000) == 2.0 and bench_sql.set_based_target(50_000) == 1.5


def test_bench_main_runs_b_and_b_prime_into_one_table(tmp_path: Path) -> None:
    assert bench.main(["--only", "b,b'", "--quick", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "results.md").read_text()
    assert table.index("| b | mqo match") < table.index("| b' | mqo match")
    assert "one set-based statement per shape" in table
