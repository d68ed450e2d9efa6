"""``mqo match``: a declared stream with no input does not hold time back.

Under per-stream time every declared stream holds the watermark back until it speaks or
goes idle. A stream the run has no input for never speaks; were it not idle from the
start, nothing would be purged until the idle timeout (processing time), and the window
state, with every join probe, would grow with the whole input.
"""

from __future__ import annotations

from pathlib import Path

import runtime.local.match as local
from mqo import Matcher
from runtime.io.inputs import InputSpec
from tests.cli.clirun import write

STREAMS = "REGISTER STREAM B (x FLOAT);\nREGISTER STREAM H (vib FLOAT);\n"
SILENT = "REGISTER STREAM K (fluid FLOAT);\n"
QUERIES = (
    "Query ID: near\nSELECT * FROM B, H MAXWINDOW 3 sec WHERE B.x <= H.vib;\n"
    "Query ID: hot\nSELECT * FROM H WHERE H.vib > 150;\n"
)
ROWS = 2_000


def _inputs(tmp: Path) -> list[InputSpec]:
    # H's every 7th tuple comes 4 s late (older than the watermark with lateness 2)
    b = write(tmp / "B.csv", "ts,x\n" + "".join(f"{i},{i % 200}\n" for i in range(ROWS)))
    h_ts = [i + 0.5 - (4 if i % 7 == 6 else 0) for i in range(ROWS)]
    h = write(tmp / "H.csv", "ts,vib\n" + "".join(f"{t},{(3 * i) % 200}\n" for i, t in enumerate(h_ts)))
    return [InputSpec("B", b), InputSpec("H", h)]


def _run(tmp: Path, ddl: str, name: str) -> tuple[Matcher, str, local.Summary]:
    m = Matcher(ddl, allowed_lateness=2)
    m.register_queries(QUERIES)
    out = tmp / f"{name}.jsonl"
    summary = local.run_match(m, _inputs(tmp), str(out), "jsonl", late_path=str(tmp / f"{name}.late.jsonl"))
    return m, out.read_text(), summary


def test_a_stream_without_input_is_idle_from_the_start(tmp_path: Path) -> None:
    with_silent, got, summary = _run(tmp_path, STREAMS + SILENT, "silent")
    _, want, want_summary = _run(tmp_path, STREAMS, "plain")
    assert got == want and got.count("\n") > ROWS  # the same results, in the same order
    assert summary.late == want_summary.late > 0  # the same tuples late
    # the state holds about the window (3 s plus 2 s lateness at 1 tuple/s per stream)
    assert with_silent.watermark > ROWS - 10
    stored = sum(len(s.buckets) for s in with_silent.state.streams)
    assert stored < 50, stored
