"""Backpressure and limits of the HTTP service, decided without timing: the engine
thread is held busy by a job that waits for the test, so the queue fills for sure."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

with warnings.catch_warnings():  # starlette asks for httpx2, a fork; httpx still works
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from runtime.http.app import Limits, build_app
from runtime.http.service import Busy, Service
from tests.http.running import SCHEMA


@pytest.fixture
def service() -> Iterator[Service]:
    running = Service(Path(SCHEMA).read_text(), queue_size=1)
    yield running
    running.close()


def test_a_full_queue_is_refused_at_once_with_retry_after(service: Service) -> None:
    release = threading.Event()
    entered = threading.Event()

    def hold() -> None:
        entered.set()
        release.wait(60)

    held = service.submit(hold)
    entered.wait(60)  # the engine thread is inside the first job
    queued = service.submit(lambda: "queued")  # the one place in the queue
    with pytest.raises(Busy):
        service.submit(lambda: "refused")
    client = TestClient(build_app(service, Limits()))
    answer = client.post("/queries", content="SELECT * FROM B WHERE B.pressure > 1;")
    assert answer.status_code == 429 and answer.headers["retry-after"] == "1"
    assert answer.json() == {"error": "the ingest queue is full; retry later"}
    stream = client.post(
        "/streams/B", content="ts,pressure,temp,alert\n1,2,3,4\n", headers={"Content-Type": "text/csv"}
    )
    assert stream.status_code == 429
    release.set()
    held.result(60)
    assert queued.result(60) == "queued"
    # nothing refused was applied; the service takes work again
    assert client.get("/queries").json() == {"queries": []}
    assert client.post("/queries", content="SELECT * FROM B WHERE B.pressure > 1;").status_code == 201
    assert service.stats.busy == 3


def test_a_body_without_a_length_is_cut_at_the_limit(service: Service) -> None:
    client = TestClient(build_app(service, Limits(max_body=1000, max_rows=3)))

    def chunks() -> Iterator[bytes]:
        yield b"ts,pressure,temp,alert\n"
        for _ in range(200):
            yield b"1,2,3,4\n"

    answer = client.post("/streams/B", content=chunks(), headers={"Content-Type": "text/csv"})
    assert answer.status_code == 413 and answer.json()["limit"] == 1000
    rows = client.post(
        "/streams/B", content="ts,pressure,temp,alert\n" + "1,2,3,4\n" * 4, headers={"Content-Type": "text/csv"}
    )
    assert rows.status_code == 413 and "4 rows in one post; the limit is 3" in rows.json()["error"]
    assert service.stats.tuples == 0
