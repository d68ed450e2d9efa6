"""``mqo serve --http --checkpoint``: a post answered 200 survives ``kill -9``, and a
client resuming with its cursor loses no result and sees none twice."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.clirun import mqo, strict_lines
from tests.http.running import QUERIES, SCHEMA, Service, arrival_runs, post, random_rows, write_csv


def test_kill_9_and_restart_lose_nothing_and_repeat_nothing(tmp_path: Path) -> None:
    rows = random_rows(11, 120)
    runs = arrival_runs(rows)
    half = len(runs) // 2
    checkpoint = tmp_path / "state"
    # a snapshot every 4 operations: the last ones before the kill are in the log only
    args = ("--http", "127.0.0.1:0", "--checkpoint", str(checkpoint), "--snapshot-every", "4")

    first = Service(*args)
    assert first.client.post("/queries", content=QUERIES).status_code == 201
    for k, (stream, run_rows) in enumerate(runs[:half]):
        answer = post(first.client, stream, run_rows, "ndjson", **{"Idempotency-Key": f"run-{k}"})
        assert answer.status_code == 200
    before = first.results()
    assert len(before) > 10
    first.kill()
    assert (checkpoint / "http-wal.jsonl").stat().st_size > 0  # some operations were only in the log

    second = Service(*args)
    try:
        # one service per checkpoint
        clash = mqo("serve", "--http", "127.0.0.1:0", "--schema", SCHEMA, "--checkpoint", str(checkpoint))
        assert clash.returncode == 2 and "is in use by another mqo serve" in clash.stderr
        assert second.results() == before  # the same results under the same cursors
        assert [q["id"] for q in second.client.get("/queries").json()["queries"]] == ["high", "pair", "calm", "per10"]
        # a client that got no answer retries the last post: it counts once
        stream, run_rows = runs[half - 1]
        retry = post(second.client, stream, run_rows, "ndjson", **{"Idempotency-Key": f"run-{half - 1}"}).json()
        assert retry["duplicate"] is True
        assert second.results(after=before[-1][0]) == []
        for k, (stream, run_rows) in enumerate(runs[half:], start=half):
            post(second.client, stream, run_rows, "csv", **{"Idempotency-Key": f"run-{k}"})
        second.client.post("/heartbeat", json={"ts": 1e6})
        after = second.results()
    finally:
        assert second.stop() == 0

    assert after[: len(before)] == before
    assert [k for k, _ in after] == list(range(1, len(after) + 1))
    queries = tmp_path / "q.mqo"
    queries.write_text(QUERIES)
    inputs = [a for s, r in rows.items() for a in ("--input", f"{s}=" + write_csv(tmp_path / f"{s}.csv", s, r))]
    run = mqo("match", "--schema", SCHEMA, "--queries", str(queries), *inputs)
    assert run.returncode == 0, run.stderr
    expected = strict_lines(run.stdout)
    assert sorted(json.dumps(r) for _, r in after) == sorted(json.dumps(r) for r in expected)

    # a clean stop writes a snapshot; the next start carries on from it with an empty log
    third = Service(*args)
    try:
        assert (checkpoint / "http-wal.jsonl").stat().st_size == 0
        assert third.results() == after
        assert third.client.get("/health").json()["cursor"] == len(after)
    finally:
        assert third.stop() == 0


def test_a_torn_log_record_was_never_answered(tmp_path: Path) -> None:
    """A crash in the middle of writing a record leaves a cut last line: it was never
    acknowledged, so the restart drops it and carries on."""
    checkpoint = tmp_path / "state"
    args = ("--http", "127.0.0.1:0", "--checkpoint", str(checkpoint))
    first = Service(*args)
    first.client.post("/queries", content="Query ID: high\nSELECT * FROM B WHERE B.pressure > 120;\n")
    post(first.client, "B", [{"ts": 1.0, "pressure": 150, "temp": 1.0, "alert": 0}], "ndjson")
    first.kill()
    log = checkpoint / "http-wal.jsonl"
    whole = log.read_bytes()
    log.write_bytes(whole + b'{"seq":3,"op":"push","stream":"B","batch":{"ts":[2.0],"pres')
    second = Service(*args)
    try:
        assert [r["ts"] for _, r in second.results()] == [1.0]
        assert log.read_bytes() == whole
        post(second.client, "B", [{"ts": 3.0, "pressure": 150, "temp": 1.0, "alert": 0}], "ndjson")
        assert [(k, r["ts"]) for k, r in second.results()] == [(1, 1.0), (2, 3.0)]
    finally:
        assert second.stop() == 0
