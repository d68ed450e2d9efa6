"""A real ``mqo serve --http`` in a subprocess on a free loopback port (the service
binds port 0 and names the port it got on its start line), and the inputs the tests
post to it."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa

from tests.cli.clirun import COMMAND
from tests.conftest import EXAMPLES

SCHEMA = str(EXAMPLES / "icu" / "streams.ddl")
START_LINE = re.compile(r"HTTP on (http://\S+?)/ ")


class Service:
    """One running service: ``client`` talks to it; ``stderr`` is what it printed."""

    def __init__(self, *args: str, schema: str = SCHEMA, cwd: Path | None = None) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [*COMMAND, "serve", "--schema", schema, *args],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            cwd=cwd,
            env=env,
        )
        self.lines: list[str] = []
        started = threading.Event()
        self.url: str | None = None

        def drain() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.lines.append(line)
                found = START_LINE.search(line)
                if found:
                    self.url = found.group(1)
                    started.set()
            started.set()

        threading.Thread(target=drain, daemon=True).start()
        started.wait(120)
        if self.url is None:
            self.proc.wait(30)
            raise RuntimeError(f"the service did not start: {self.stderr}")
        self.client = httpx.Client(base_url=self.url, timeout=60)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int:
        """Ctrl-C, as a user stops it; its exit status."""
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(60)

    def kill(self) -> None:
        """``kill -9``: no clean stop, nothing written at the end."""
        self.client.close()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(60)

    def results(self, after: int = 0) -> list[tuple[int, dict[str, Any]]]:
        """Every result after ``after`` as (cursor, record), page by page. Cursors number
        every result, so a page of n results ending at cursor c holds c - n + 1 .. c."""
        out: list[tuple[int, dict[str, Any]]] = []
        while True:
            page = self.client.get("/results", params={"after": after, "limit": 1000}).json()
            assert page["missed"] == 0
            found = page["results"]
            if not found:
                return out
            out.extend(zip(range(page["cursor"] - len(found) + 1, page["cursor"] + 1), found, strict=True))
            after = page["cursor"]


HIGH = "Query ID: high\nSELECT * FROM B WHERE B.pressure > 120;\n"
QUERIES = (
    HIGH
    + "Query ID: pair\nSELECT B.pressure, H.beatrate FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 5 sec WHERE B.temp > H.vib;\n"
    + "Query ID: calm\nSELECT * FROM H WHERE H.beatrate < 60 AND H.alert = 1;\n"
    + "Query ID: per10\nSELECT COUNT(*), AVG(B.pressure), MAX(B.temp) FROM B [RANGE 10 SLIDE 5];\n"
)
COLUMNS = {"B": ["pressure", "temp", "alert"], "H": ["beatrate", "vib", "alert"]}


def random_rows(seed: int, n: int) -> dict[str, list[dict[str, Any]]]:
    """Per stream (B, H), rows in ts order with values that match now and then."""
    rng = random.Random(seed)
    rows: dict[str, list[dict[str, Any]]] = {"B": [], "H": []}
    for stream in rows:
        ts = 0.0
        for _ in range(n):
            ts = round(ts + rng.choice([0.0, 0.1, 0.5, 1.0, 2.5]), 1)
            if stream == "B":
                values = {
                    "pressure": rng.randint(60, 160),
                    "temp": round(rng.uniform(30, 120), 2),
                    "alert": rng.randint(0, 1),
                }
            else:
                values = {
                    "beatrate": rng.randint(40, 140),
                    "vib": round(rng.uniform(20, 110), 2),
                    "alert": rng.randint(0, 1),
                }
            rows[stream].append({"ts": ts, **values})
    return rows


def write_csv(path: Path, stream: str, rows: list[dict[str, Any]]) -> str:
    path.write_text(csv_text(stream, rows))
    return str(path)


def csv_text(stream: str, rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["ts", *COLUMNS[stream]])
    for row in rows:
        writer.writerow([repr(row["ts"]), *(row[c] for c in COLUMNS[stream])])
    return out.getvalue()


def ndjson_text(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def arrow_bytes(stream: str, rows: list[dict[str, Any]]) -> bytes:
    types = {"pressure": pa.float64(), "temp": pa.float64(), "beatrate": pa.float64(), "vib": pa.float64()}
    table = pa.table(
        {
            "ts": pa.array([r["ts"] for r in rows], pa.float64()),
            **{c: pa.array([r[c] for r in rows], types.get(c, pa.int64())) for c in COLUMNS[stream]},
        }
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def arrival_runs(rows: dict[str, list[dict[str, Any]]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The tuples in ``mqo match``'s arrival order (ts, then input order B, H), cut into
    runs of one stream: posted run by run, they arrive as ``mqo match`` reads them."""
    merged = sorted(
        ((row["ts"], k, i, stream) for k, stream in enumerate(rows) for i, row in enumerate(rows[stream])),
    )
    runs: list[tuple[str, list[dict[str, Any]]]] = []
    for _, _, i, stream in merged:
        if runs and runs[-1][0] == stream:
            runs[-1][1].append(rows[stream][i])
        else:
            runs.append((stream, [rows[stream][i]]))
    return runs


def post(client: httpx.Client, stream: str, rows: list[dict[str, Any]], fmt: str, **headers: str) -> httpx.Response:
    if fmt == "csv":
        body: bytes = csv_text(stream, rows).encode()
        kind = "text/csv"
    elif fmt == "ndjson":
        body, kind = ndjson_text(rows).encode(), "application/x-ndjson"
    else:
        body, kind = arrow_bytes(stream, rows), "application/vnd.apache.arrow.stream"
    return client.post(f"/streams/{stream}", content=body, headers={"Content-Type": kind, **headers})


def wait_for(condition: Any, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds} s for {what}")
        time.sleep(0.05)
