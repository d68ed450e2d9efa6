"""The aggregate Spark benchmark at a tiny size: the stage, the per-query
``groupBy(window(...))`` jobs and both set-based formulations write the same windows,
groups and values (the benchmark fails otherwise), also for a RANGE shorter than its
SLIDE (windows with gaps), a RANGE not a multiple of its SLIDE, and a filter nothing
passes for a while."""

from __future__ import annotations

import argparse
import csv
import shutil
from pathlib import Path
from typing import Any

import pytest

from experiments import spark_aggregation as bench

pytestmark = pytest.mark.spark


def test_engines_agree_at_a_tiny_size(spark_session: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["--queries", "6", "--tuples", "4000", "--sample", "6", "--out", str(out), "--no-progress"]
    assert bench.main(argv) == 0
    with (out / "spark_aggregation.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    assert int(row["result_rows"]) > 0 and row["per_query_timed"] == "6"
    assert "per-query / stage" in (out / "spark_aggregation.md").read_text()


def test_windows_with_gaps_and_offsets(spark_session: Any) -> None:
    frame, _ = bench.make_frame(spark_session, 3000, 1, seed=3)
    queries = [
        {"range": 300, "slide": 600, "filter": "H.alert = 1", "group": True},  # gaps between windows
        {"range": 420, "slide": 180, "filter": "H.vib > 90", "group": False},  # RANGE not a multiple of SLIDE
        {"range": 60, "slide": 60, "filter": "H.vib > 90", "group": True},  # some minutes empty
    ]
    queries = [{**q, "name": f"q{i}"} for i, q in enumerate(queries)]
    filters = sorted({q["filter"] for q in queries})
    args = argparse.Namespace(parts=2, span=None)
    folders = [
        bench.run_stage(frame, queries, "t", args)[1],
        bench.run_prefix(spark_session, frame, queries, filters)[1],
        bench.run_panes(spark_session, frame, queries, filters)[1],
    ]
    try:
        qids = list(range(len(queries)))
        stage = bench.sample_rows(spark_session, folders[0], qids)
        assert {k[0] for k in stage} == set(qids)
        for folder in folders[1:]:
            bench.same("set-based", bench.sample_rows(spark_session, folder, qids), stage)
        single = [
            (i, e, p, n, s, s / n, lo, hi)
            for i, q in enumerate(queries)
            for e, p, n, s, lo, hi in bench.per_query(frame, q)
        ]
        bench.same("per-query", bench.keyed(single), stage)
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
