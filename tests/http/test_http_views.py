"""Aggregate views in ``mqo serve --http``: the workload of tests/cli/test_serve_views.py
(an aggregate view over a match view, one over it, match readers, an aggregate query
over the view) posted run by run in the service's arrival order, a ``kill -9`` and a
restart from the checkpoint half-way, a heartbeat at the end; the readers' results
against the exact reference of views, the aggregate rows against the Python API."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import mqo
from tests.cli.test_serve_views import LATENESS, SCHEMA, TEXT, key, merged, reference, steps
from tests.http.running import Service, post
from tests.references.reference import exact_result


def runs(plan: list[dict[str, list[Any]]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The tuples in arrival order, cut into runs of one stream (each run one post)."""
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for step in plan:
        for stream, ts, values in merged(step):
            if out and out[-1][0] == stream:
                out[-1][1].append({"ts": ts, **values})
            else:
                out.append((stream, [{"ts": ts, **values}]))
    return out


def test_aggregate_views_over_http_equal_the_reference(tmp_path: Path) -> None:
    schema = tmp_path / "s.ddl"
    schema.write_text(SCHEMA.ddl())
    plan = steps(seed=8)  # (another workload than the CLI test's, with late tuples too)
    posts = runs(plan)
    end = max(ts for step in plan for rows in step.values() for ts, _ in rows) + 3
    args = ("--http", "127.0.0.1:0", "--allowed-lateness", str(LATENESS), "--checkpoint", str(tmp_path / "ck"))
    args += ("--snapshot-every", "5")
    service = Service(*args, schema=str(schema))
    try:
        assert service.client.post("/queries", content=TEXT).status_code == 201
        listed = {q["id"]: q["kind"] for q in service.client.get("/queries").json()["queries"]}
        assert listed == {
            "pairs": "view",
            "busy": "aggregate view",
            "peak": "aggregate view",
            "crowded": "match",
            "near": "match",
            "peaks": "match",
            "per_busy": "aggregate",
        }
        late = 0
        for k, (stream, rows) in enumerate(posts):
            if k == len(posts) // 2:
                service.kill()
                service = Service(*args, schema=str(schema))
            reply = post(service.client, stream, rows, "ndjson")
            assert reply.status_code == 200, reply.text
            late += reply.json()["late"]
        assert service.client.post("/heartbeat", json={"ts": end}).status_code == 200
        lines = [r for _, r in service.results()]
    finally:
        assert service.stop() == 0
    want, ref = reference(plan)
    want.update(key(r) for r in ref.heartbeat(end))
    got = Counter(key(exact_result(r["query"], r["ts"], r["ids"], r["values"])) for r in lines if "window_end" not in r)
    assert got == want
    assert late == ref.late_count and late > 0
    m = mqo.Matcher(SCHEMA.ddl(), allowed_lateness=LATENESS, late_sink=lambda t: None)
    m.register_queries(TEXT)
    for step in plan:
        for stream, ts, values in merged(step):
            m.push(stream, ts, values)
    m.heartbeat(end)
    want_rows = sorted(json.dumps(r, sort_keys=True) for r in m.poll_aggregates().to_pylist())
    assert sorted(json.dumps(r, sort_keys=True) for r in lines if "window_end" in r) == want_rows and want_rows
