"""``mqo serve --http`` end to end, as a client sees it: the real command in a
subprocess on a free loopback port, driven over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cli.clirun import mqo, strict_lines
from tests.http.running import (
    HIGH,
    QUERIES,
    SCHEMA,
    Service,
    arrival_runs,
    post,
    random_rows,
    write_csv,
)


@pytest.fixture
def service():
    running = Service("--http", "127.0.0.1:0", "--max-body", "200000")
    yield running
    assert running.stop() == 0


def test_results_equal_mqo_match_whatever_the_format(service: Service, tmp_path: Path) -> None:
    """The same tuples posted in arrival order (as CSV, JSON lines and Arrow in turn)
    give exactly the lines ``mqo match`` writes for them, aggregate rows included
    (the last heartbeat closes every window, as the end of input does)."""
    rows = random_rows(7, 150)
    queries = tmp_path / "q.mqo"
    queries.write_text(QUERIES)
    inputs = [f"{s}=" + write_csv(tmp_path / f"{s}.csv", s, r) for s, r in rows.items()]
    run = mqo(
        "match", "--schema", service_schema(), "--queries", str(queries), *(a for i in inputs for a in ("--input", i))
    )
    assert run.returncode == 0, run.stderr
    expected = strict_lines(run.stdout)
    assert {r["query"] for r in expected} == {"high", "pair", "calm", "per10"}

    answer = service.client.post("/queries", content=QUERIES)
    assert answer.status_code == 201 and answer.json() == {"ids": ["high", "pair", "calm", "per10"]}
    formats = ["csv", "ndjson", "arrow"]
    for k, (stream, run_rows) in enumerate(arrival_runs(rows)):
        reply = post(service.client, stream, run_rows, formats[k % 3])
        assert reply.status_code == 200, reply.text
        assert reply.json()["accepted"] == len(run_rows) and reply.json()["rejected"] == []
    assert service.client.post("/heartbeat", json={"ts": 1e6}).status_code == 200
    got = [r for _, r in service.results()]
    # within a post, results come by row but single-stream ones first: compare as multisets of lines
    assert sorted(map(json.dumps, got)) == sorted(map(json.dumps, expected))
    text = service.client.get("/results", params={"limit": 10000}).text
    # the records are the engine's own text: the same bytes as mqo match's lines
    assert sorted(line for line in run.stdout.splitlines()) == sorted(
        json.dumps(r, separators=(",", ":")) for r in json.loads(text)["results"]
    )


def service_schema() -> str:
    return SCHEMA


def test_register_list_unregister(service: Service) -> None:
    c = service.client
    assert c.get("/health").json() == {"status": "ok", "queries": 0, "watermark": None, "cursor": 0}
    assert c.post("/queries", content=QUERIES).json()["ids"] == ["high", "pair", "calm", "per10"]
    listed = c.get("/queries").json()["queries"]
    assert [(q["id"], q["kind"]) for q in listed] == [
        ("high", "match"),
        ("pair", "match"),
        ("calm", "match"),
        ("per10", "aggregate"),
    ]
    assert "B.pressure > 120" in listed[0]["text"]
    assert c.delete("/queries/high").status_code == 204
    assert c.delete("/queries/high").status_code == 404
    assert "high" not in [q["id"] for q in c.get("/queries").json()["queries"]]
    # a removed query reports nothing more
    assert post(c, "B", [{"ts": 1.0, "pressure": 150, "temp": 10.0, "alert": 0}], "ndjson").json()["results"] == 0
    assert c.get("/health").json()["queries"] == 3


def test_a_bad_query_names_line_and_column_and_registers_nothing(service: Service) -> None:
    c = service.client
    text = HIGH + "Query ID: bad\nSELECT *\nFROM B WHERE B.presure > 1;\n"
    answer = c.post("/queries", content=text)
    assert answer.status_code == 400
    body = answer.json()
    assert (body["line"], body["column"]) == (5, 14)
    assert "presure" in body["error"] and "did you mean 'pressure'" in body["error"]
    assert c.get("/queries").json()["queries"] == []  # all or nothing


def test_bad_rows_are_named_and_the_good_ones_matched(service: Service) -> None:
    c = service.client
    c.post("/queries", content=HIGH)
    body = "\n".join(
        [
            '{"ts": 1, "pressure": 150, "temp": 20, "alert": 0}',
            '{"ts": 2, "pressure": 1e400, "temp": 20, "alert": 0}',  # not finite
            '{"ts": 3, "pressure": 150, "temp": 20}',  # a column missing
            '{"ts": 4, "pressure": "150", "temp": 20, "alert": 0}',  # a string in a number column
            "[1, 2]",
            '{"ts": 5, "pressure": 150, "temp": 20, "alert": 99999999999999999999}',  # beyond 64 bits
            '{"ts": 6, "pressure": 121, "temp": null, "alert": 1, "colour": 3}',  # unknown column
            '{"ts": 7, "pressure": 130, "temp": null, "alert": 1}',
        ]
    )
    reply = c.post("/streams/B", content=body, headers={"Content-Type": "application/x-ndjson"}).json()
    assert reply["accepted"] == 2 and reply["late"] == 0 and reply["results"] == 2
    assert [(r["row"], r.get("column")) for r in reply["rejected"]] == [
        (1, "pressure"),
        (2, "alert"),
        (3, "pressure"),
        (4, None),
        (5, "alert"),
        (6, "colour"),
    ]
    assert "not a finite number" in reply["rejected"][0]["error"]
    assert "out of range" in reply["rejected"][4]["error"]
    csv_reply = c.post(
        "/streams/B", content="ts,pressure,temp,alert\n8,150,1,0\n9,x,1,0\n", headers={"Content-Type": "text/csv"}
    ).json()
    assert csv_reply["accepted"] == 1
    assert csv_reply["rejected"] == [{"row": 1, "line": 3, "column": "pressure", "error": "'x' is not a number"}]
    assert [r["ts"] for _, r in service.results()] == [1.0, 7.0, 8.0]
    # a late tuple is counted, not matched
    late = post(c, "B", [{"ts": 0.5, "pressure": 150, "temp": 1.0, "alert": 0}], "ndjson").json()
    assert (late["accepted"], late["late"], late["results"]) == (0, 1, 0)


def test_errors_are_json_with_the_reason(service: Service) -> None:
    c = service.client
    unknown = c.post("/streams/X", content="ts\n1\n", headers={"Content-Type": "text/csv"})
    assert unknown.status_code == 404 and unknown.json()["streams"] == ["B", "T", "H", "K"]
    header = c.post("/streams/B", content="ts,pressure\n1,2\n", headers={"Content-Type": "text/csv"})
    assert header.status_code == 400 and "body:1: the header lacks column(s) temp, alert" in header.json()["error"]
    kind = c.post("/streams/B", content="x", headers={"Content-Type": "text/plain"})
    assert kind.status_code == 415
    big = c.post("/streams/B", content=b"x" * 200_001, headers={"Content-Type": "text/csv"})
    assert big.status_code == 413 and big.json()["limit"] == 200_000
    assert (
        c.post(
            "/streams/B", content=b"not arrow", headers={"Content-Type": "application/vnd.apache.arrow.stream"}
        ).status_code
        == 400
    )
    assert c.post("/heartbeat", json={"stream": "B", "ts": "soon"}).status_code == 400
    assert c.get("/results", params={"after": "-1"}).status_code == 400
    assert c.get("/nowhere").json() == {"error": "Not Found"}


def test_idempotency_key_makes_a_retry_count_once(service: Service) -> None:
    c = service.client
    c.post("/queries", content=HIGH)
    rows = [{"ts": 1.0, "pressure": 150, "temp": 1.0, "alert": 0}]
    first = post(c, "B", rows, "ndjson", **{"Idempotency-Key": "k1"}).json()
    again = post(c, "B", rows, "ndjson", **{"Idempotency-Key": "k1"}).json()
    assert first["results"] == 1 and again == {**first, "duplicate": True}
    assert len(service.results()) == 1
    assert c.get("/metrics").text.count("mqo_tuples_in_total 1\n") == 1


def test_results_by_cursor_query_and_server_sent_events(service: Service) -> None:
    c = service.client
    c.post("/queries", content=QUERIES)
    for stream, run_rows in arrival_runs(random_rows(3, 60)):
        assert post(c, stream, run_rows, "ndjson").status_code == 200
    everything = service.results()
    assert [k for k, _ in everything] == list(range(1, len(everything) + 1)) and len(everything) > 20
    page = c.get("/results", params={"after": 5, "limit": 3}).json()
    assert page["cursor"] == 8 and page["results"] == [r for _, r in everything[5:8]]
    only = c.get("/results", params={"query": "calm", "limit": 10000}).json()["results"]
    assert only == [r for _, r in everything if r["query"] == "calm"] and only
    # the event stream: one result per event, its cursor the event id; resumable
    with c.stream("GET", "/results/stream", headers={"Last-Event-ID": "10"}) as events:
        seen = read_events(events.iter_lines(), len(everything) - 10)
    assert seen == [(k, r) for k, r in everything[10:]]
    with (
        httpx.Client(base_url=service.url, timeout=60) as other,
        other.stream("GET", "/results/stream?after=0") as events,
    ):
        lines = events.iter_lines()
        first = read_events(lines, 1)
        # a result found while the stream is open arrives on it
        post(c, "B", [{"ts": 1e5, "pressure": 150, "temp": 1.0, "alert": 0}], "ndjson")
        rest = read_events(lines, len(everything))
    assert first + rest[:-1] == everything and rest[-1][1]["ts"] == 1e5


def read_events(lines: Iterator[str], n: int) -> list[tuple[int, dict]]:
    out: list[tuple[int, dict]] = []
    event_id = None
    for line in lines:
        if line.startswith("id: "):
            event_id = int(line[4:])
        elif line.startswith("data: "):
            out.append((event_id, json.loads(line[6:])))
            if len(out) == n:
                return out
    return out


def test_explain_metrics_and_page(service: Service) -> None:
    c = service.client
    c.post("/queries", content=QUERIES + "Query ID: high2\nSELECT * FROM B WHERE B.pressure > 130;\n")
    for stream, run_rows in arrival_runs(random_rows(5, 40)):
        post(c, stream, run_rows, "csv")
    plan = c.get("/explain").json()
    pressure = next(lst for lst in plan["lists"] if lst["key"] == "B.pressure > c")
    assert pressure["readers"] == ["high", "high2"] and len(pressure["predicates"]) == 2
    assert 0 < pressure["selectivity"] < 1  # some recent B tuples pass it, some do not
    assert "Attribute predicate lists" in plan["text"] and plan["order"]["mode"] == "adaptive"
    # the engine's own account (Matcher.explain_data), not a reading of the text
    ids = {q["id"] for q in c.get("/queries").json()["queries"]}
    assert {q for lst in plan["lists"] for p in lst["predicates"] for q in p["queries"]} <= ids
    sharing = plan["sharing"]
    assert f"sharing ratio {sharing['ratio']:.2f} ({sharing['occurrences']} predicate occurrences" in plan["text"]
    assert {s["stream"] for s in plan["order"]["streams"]} == {"B", "H"} and plan["sample"] == 80
    metrics = c.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = metrics.text
    for name in (
        "mqo_tuples_in_total 80",
        "mqo_queries 5",
        "mqo_push_seconds_count",
        "mqo_resident_memory_bytes",
        'mqo_list_selectivity{kind="A",list="B.pressure > c"}',
        "mqo_late_total 0",
    ):
        assert name in text
    page = c.get("/")
    assert page.status_code == 200 and '<script src="/page/page.js">' in page.text
    assert c.get("/page/page.js").status_code == 200 and c.get("/page/../app.py").status_code == 404


def test_a_token_guards_every_change(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret-token-of-some-length\n")
    running = Service("--http", "127.0.0.1:0", "--token-file", str(token))
    try:
        c = running.client
        assert c.post("/queries", content=HIGH).status_code == 401
        wrong = c.post("/queries", content=HIGH, headers={"Authorization": "Bearer s3cret-token-of-some-lengtX"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        assert c.delete("/queries/high").status_code == 401
        assert c.get("/queries").status_code == 200  # reading needs no token
        good = {"Authorization": "Bearer s3cret-token-of-some-length"}
        assert c.post("/queries", content=HIGH, headers=good).status_code == 201
    finally:
        assert running.stop() == 0


def test_another_address_needs_a_token() -> None:
    run = mqo("serve", "--http", "0.0.0.0:0", "--schema", service_schema())
    assert run.returncode == 2
    assert "reachable from other machines: give --token-file" in run.stderr
    mixed = mqo("serve", "--http", "127.0.0.1:0", "--schema", service_schema(), "--input", "B=somewhere")
    assert mixed.returncode == 2 and "--http runs on its own: --input" in mixed.stderr


def test_results_past_the_bound_are_dropped_and_counted() -> None:
    running = Service("--http", "127.0.0.1:0", "--keep-results", "3")
    try:
        c = running.client
        c.post("/queries", content=HIGH)
        rows = [{"ts": float(t), "pressure": 150, "temp": 1.0, "alert": 0} for t in range(5)]
        assert post(c, "B", rows, "ndjson").json()["results"] == 5
        page = c.get("/results", params={"after": 0}).json()
        # cursors 1 and 2 are gone: a reader resuming at 0 is told it missed them
        assert page["missed"] == 2 and [r["ts"] for r in page["results"]] == [2.0, 3.0, 4.0] and page["cursor"] == 5
        assert c.get("/results", params={"after": 2}).json()["missed"] == 0
        assert "mqo_results_dropped_total 2\n" in c.get("/metrics").text
    finally:
        assert running.stop() == 0
