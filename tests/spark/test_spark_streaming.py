"""The Structured Streaming stage: file sources, ``availableNow`` runs stopped and
restarted from the checkpoint, a replayed micro-batch, a late tuple; the outputs of
all runs together equal the local engine's results with no duplicates."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from runtime.spark.spec import SparkStageError
from runtime.spark.streaming import match_stream, write_files
from tests.spark.test_spark_batch import COLUMNS, DDL, STREAMS, Workload, key_of, make_workload, reference

SCHEMAS = {
    "B": "ts double, id bigint, pressure double, temp double, pid bigint",
    "H": "ts double, id bigint, beatrate double, vib double, pid bigint",
    "T": "ts double, id bigint, fluct double, pid bigint, tag string",
}
CHUNK = 15.0  # seconds of data per file (the workloads span 60 s: four files per stream)
LAST = 3


def write_chunk(base: Path, rows: dict[str, list[dict[str, Any]]], k: int) -> None:
    """One CSV file per stream holding chunk ``k``; file times increase with k so the
    source takes the files in order."""
    for s in STREAMS:
        part = [r for r in rows[s] if r.get("chunk", min(int(r["ts"] // CHUNK), LAST)) == k]
        folder = base / "in" / s
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"part{k:03d}.csv"
        frame = pd.DataFrame(part, columns=["ts", "id", *COLUMNS[s]])
        frame["pid"] = frame["pid"].astype("Int64")  # else NULLs make it float, and "3.0" is no bigint
        frame.to_csv(path, index=False)
        os.utime(path, (1_000_000 + k, 1_000_000 + k))


def csv_streams(spark: Any, folder: Path, schemas: dict[str, str]) -> dict[str, Any]:
    """A streaming source per stream over ``folder / name``'s CSV files, one file per
    micro-batch (so the tests decide what each micro-batch holds)."""
    return {
        s: spark.readStream.schema(schema).option("header", True).option("maxFilesPerTrigger", 1).csv(str(folder / s))
        for s, schema in schemas.items()
    }


def command_stream(spark: Any, folder: Path) -> Any:
    """The control stream over ``folder``'s JSON lines of commands, one file per micro-batch."""
    schema = "ts double, command string, query string"
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(folder))


def run(spark: Any, base: Path, workload: Workload, lateness: float, partition_by: str) -> list[int]:
    """One availableNow run from the checkpoint; returns the batch ids it ran."""
    streams = csv_streams(spark, base / "in", {s: SCHEMAS[s] for s in STREAMS})
    results = match_stream(streams, workload.queries, schema=DDL, allowed_lateness=lateness, partition_by=partition_by)
    query = write_files(results, str(base / "out"), str(base / "ck"), available_now=True)
    query.awaitTermination()
    return [p["batchId"] for p in query.recentProgress]


def replay_last_batch(base: Path) -> int:
    """Forget that the last micro-batch committed, as if the driver died after the sink
    wrote it but before the commit log did: the restart must run it again."""
    commits = base / "ck" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    crc = commits / f".{last}.crc"
    if crc.exists():
        crc.unlink()
    return last


@pytest.mark.spark
@pytest.mark.parametrize(("seed", "keyed"), [(21, False), (22, True)])
def test_restart_from_checkpoint_loses_and_duplicates_nothing(
    spark_session: Any, tmp_path: Path, seed: int, keyed: bool
) -> None:
    workload = make_workload(seed, keyed=keyed, n_queries=8, per_stream=70)
    lateness = 4.0
    late_id = max(r["id"] for r in workload.rows["B"]) + 1
    late_row = {"ts": 2.0, "id": late_id, "pressure": 10.0, "temp": 10.0, "pid": 1, "chunk": 3}
    expected = reference(workload, allowed_lateness=lateness)  # without the late tuple
    assert expected
    files = {s: list(rows) for s, rows in workload.rows.items()}
    files["B"].append(late_row)  # written with chunk 3, long after the watermark passed ts 2

    # run 1: two chunks, with no-data micro-batches off so that it ends on a batch with data
    write_chunk(tmp_path, files, 0)
    write_chunk(tmp_path, files, 1)
    spark_session.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    try:
        first = run(spark_session, tmp_path, workload, lateness, "key" if keyed else "time")
    finally:
        spark_session.conf.unset("spark.sql.streaming.noDataMicroBatches.enabled")
    replayed = replay_last_batch(tmp_path)

    # run 2: the rest of the data arrives; the uncommitted batch runs again first
    write_chunk(tmp_path, files, 2)
    write_chunk(tmp_path, files, 3)
    second = run(spark_session, tmp_path, workload, lateness, "key" if keyed else "time")
    assert replayed in first and replayed in second, (first, second)

    out = spark_session.read.parquet(str(tmp_path / "out")).collect()
    results = [r for r in out if r["query"] is not None]
    late = [r for r in out if r["query"] is None]
    got = [
        key_of(r["query"], r["ts"], r["ids"], {k: v for k, v in r.asDict().items() if k not in ("query", "ts", "ids")})
        for r in results
    ]
    duplicates = [k for k, n in Counter(got).items() if n > 1]
    assert not duplicates, f"{len(duplicates)} results written twice"
    assert Counter(got) == Counter(expected)
    assert [(r["ts"], dict(r["ids"])) for r in late] == [(2.0, {"B": late_id})]


@pytest.mark.spark
def test_stream_inputs_are_checked(spark_session: Any, tmp_path: Path) -> None:
    (tmp_path / "B").mkdir()
    batch = spark_session.createDataFrame([(1.0, 0, 1.0, 1.0, 1)], SCHEMAS["B"])
    with pytest.raises(SparkStageError, match="stream B: not a streaming DataFrame"):
        match_stream({"B": batch}, "SELECT * FROM B", schema=DDL)
    no_id = spark_session.readStream.schema("ts double, pressure double, temp double, pid bigint").csv(
        str(tmp_path / "B")
    )
    with pytest.raises(SparkStageError, match="stream B: a streaming DataFrame needs an 'id' column"):
        match_stream({"B": no_id}, "SELECT * FROM B", schema=DDL)


@pytest.mark.spark
def test_self_joins_stream_like_the_local_engine(spark_session: Any, tmp_path: Path) -> None:
    workload = make_workload(33, n_queries=5, per_stream=40, self_joins=True)
    expected = reference(workload, allowed_lateness=4.0)
    assert any(dict(ids).keys() >= {"b1", "b2"} for _, _, ids, _ in expected), "self-join results expected"
    for k in range(LAST + 1):
        write_chunk(tmp_path, workload.rows, k)
    run(spark_session, tmp_path, workload, 4.0, "time")
    out = spark_session.read.parquet(str(tmp_path / "out")).collect()
    got = [
        key_of(r["query"], r["ts"], r["ids"], {k: v for k, v in r.asDict().items() if k not in ("query", "ts", "ids")})
        for r in out
        if r["query"] is not None
    ]
    assert Counter(got) == Counter(expected)
