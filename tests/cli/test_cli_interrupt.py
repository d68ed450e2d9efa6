"""Nothing lost: ``mqo match`` stopped by SIGINT or SIGTERM part-way leaves complete,
correct output up to where it stopped, says how far it got, and its late and reject
files; results reach the output while it runs; the matching loop is linear.

The interrupt tests run the real command in a subprocess over inputs large enough to
take several seconds, wait until results have reached the output file (so the run is
matching, not starting up) and then send the signal. What the output must hold is
computed here from the generated rows: every result of the first N tuples in arrival
order, N as the command reports it; nothing more, nothing cut.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import runtime.local.match as local
from mqo import Matcher
from runtime.io import writers as outputs
from runtime.io.inputs import InputSpec
from tests.cli.clirun import COMMAND, strict_lines, write
from tests.conftest import EXAMPLES

DDL = "REGISTER STREAM B (x FLOAT, tag STRING);\nREGISTER STREAM H (vib FLOAT);\n"
QUERIES = "Query ID: all_b\nSELECT * FROM B;\nQuery ID: hot_h\nSELECT * FROM H WHERE H.vib > 90;\n"
ROWS = 150_000  # per stream: many seconds of matching, stopped after the first writes
LATE_ROW = 5  # H's row 5 comes with an old ts: a late tuple
BAD_LINE = 12  # B's line 12 does not parse: a rejected row (with --on-bad-row skip)


def b_row(i: int) -> tuple[float, int, float, str]:
    return (2.0 * i, i, i * 0.5, f"t{i % 7}")


def h_row(j: int) -> tuple[float, int, float]:
    return (0.5 if j == LATE_ROW else 2.0 * j + 1, j, float((j * 37) % 180))


def make_inputs(tmp: Path) -> tuple[str, str, str, str]:
    b_lines = ["ts,id,x,tag"]
    for i in range(ROWS):
        ts, ident, x, tag = b_row(i)
        b_lines.append(f"{ts!r},{ident},{x!r},{tag}" if len(b_lines) + 1 != BAD_LINE else f"{ts!r},{ident},oops,{tag}")
    h_lines = ["ts,id,vib"] + [
        ",".join(repr(v) if isinstance(v, float) else str(v) for v in h_row(j)) for j in range(ROWS)
    ]
    return (
        write(tmp / "s.ddl", DDL),
        write(tmp / "q.mqo", QUERIES),
        write(tmp / "B.csv", "\n".join(b_lines) + "\n"),
        write(tmp / "H.csv", "\n".join(h_lines) + "\n"),
    )


def expected_results(n: int) -> list[dict[str, Any]]:
    """The results of the first ``n`` tuples in arrival order (the smallest next ts
    first, ties by input order; the rejected B row is not a tuple; the late H tuple is
    a tuple but gives no result)."""
    bad_b = BAD_LINE - 2
    b = [b_row(i) for i in range(ROWS) if i != bad_b]
    h = [h_row(j) for j in range(ROWS)]
    out: list[dict[str, Any]] = []
    i = j = 0
    newest = float("-inf")
    for _ in range(n):
        if j >= len(h) or (i < len(b) and b[i][0] <= h[j][0]):
            ts, ident, x, tag = b[i]
            i += 1
            out.append({"query": "all_b", "ts": ts, "ids": {"B": ident}, "values": {"B.x": x, "B.tag": tag}})
        else:
            ts, ident, vib = h[j]
            j += 1
            if ts < newest:
                continue  # late
            if vib > 90:
                out.append({"query": "hot_h", "ts": ts, "ids": {"H": ident}, "values": {"H.vib": vib}})
        newest = max(newest, ts)
    return out


def run_and_stop(tmp: Path, output: Path, signum: int) -> tuple[int, str]:
    ddl, queries, b, h = make_inputs(tmp)
    args = ["match", "--schema", ddl, "--queries", queries, "--input", f"B={b}", "--input", f"H={h}"]
    args += ["--output", str(output), "--on-bad-row", "skip", "--no-progress"]
    proc = subprocess.Popen([*COMMAND, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Results in the file: the run is matching. (A Parquet file starts with a few
        # bytes of header; it is written under a temporary name until it is closed.)
        written = [output, *(tmp / f".{output.name}.{proc.pid}.partial",)]
        enough = 4096 if output.suffix == ".parquet" else 0
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if any(p.is_file() and p.stat().st_size > enough for p in written):
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before it could be interrupted: " + proc.stderr.read()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_interrupt_leaves_every_result_so_far_and_nothing_cut(tmp_path: Path, signum: int, fmt: str) -> None:
    output = tmp_path / f"out.{fmt}"
    rc, err = run_and_stop(tmp_path, output, signum)
    assert rc == 128 + signum, err
    assert "Traceback" not in err
    name = signal.Signals(signum).name
    # the inputs are read as they are matched: the total is said when they were read to their end
    m = re.search(
        rf"interrupted \({name}\) after ([\d,]+)(?: of ([\d,]+))? tuples(?: \(the input was not read to its end\))?;"
        r" .* up to ts (\S+)",
        err,
    )
    assert m, err
    done = int(m.group(1).replace(",", ""))
    assert 0 < done < 2 * ROWS - 1
    assert m.group(2) is None or int(m.group(2).replace(",", "")) == 2 * ROWS - 1
    if fmt == "jsonl":
        got = strict_lines(output.read_text())
    else:
        got = pq.read_table(output).to_pylist()
        got = [{"query": r["query"], "ts": r["ts"], "ids": dict(r["ids"]), "values": _values(r)} for r in got]
        assert not list(tmp_path.glob(".*partial")), "the temporary Parquet file was left behind"
    assert got == expected_results(done)
    assert float(m.group(3)) == max(r["ts"] for r in got)
    # the reject and late files were written too, as far as the run got
    rejects = strict_lines((tmp_path / f"out.{fmt}.rejects.jsonl").read_text())
    assert [(r["line"], r["column"]) for r in rejects] == [(BAD_LINE, "x")]
    late = strict_lines((tmp_path / f"out.{fmt}.late.jsonl").read_text())
    assert [(t["stream"], t["id"]) for t in late] == [("H", LATE_ROW)]
    assert re.search(r"^tuples:\s+" + m.group(1) + r" \(", err, re.M)


def _values(row: dict[str, Any]) -> dict[str, Any]:
    names = ("B.x", "B.tag") if row["query"] == "all_b" else ("H.vib",)
    return {n: row[n] for n in names}


def _in_heavy_imports(pid: int) -> bool:
    """Whether the process has mapped numpy's or Arrow's libraries: it is past
    Python's own start-up and inside ``mqo``'s imports (which run inside ``main``)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False
    return "numpy" in maps or "arrow" in maps


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc to see how far start-up got")
@pytest.mark.parametrize(
    ("delay", "signum"),
    [(0.0, signal.SIGINT), (0.1, signal.SIGINT), (0.3, signal.SIGINT), (0.1, signal.SIGTERM)],
    ids=["SIGINT-at-imports", "SIGINT-0.1s-later", "SIGINT-0.3s-later", "SIGTERM-0.1s-later"],
)
def test_a_signal_during_start_up_is_one_line_not_a_traceback(tmp_path: Path, delay: float, signum: int) -> None:
    """A signal while ``mqo match`` imports its libraries (the first second or so).
    (One in the first few hundredths of a second, while Python itself starts and
    before any of ``mqo``'s code runs, is Python's own to report.)"""
    icu = EXAMPLES / "icu"
    args = ["match", "--schema", str(icu / "streams.ddl"), "--queries", str(icu / "running_example.mqo")]
    args += [a for s in "BHKT" for a in ("--input", f"{s}={icu / f'{s}.csv'}")]
    args += ["--output", str(tmp_path / "o.jsonl")]
    proc = subprocess.Popen([*COMMAND, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while proc.poll() is None and not _in_heavy_imports(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.002)
    time.sleep(delay)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err
    if proc.returncode != 0:  # (a fast machine may have finished first)
        assert proc.returncode == 128 + signum
        assert f"interrupted ({signal.Signals(signum).name})" in err
        assert len(err.strip().splitlines()) <= 6, err


# ----------------------------------------------------- in-process: flushing, linearity


def _inputs(tmp: Path, n: int) -> list[InputSpec]:
    b = write(tmp / "B.csv", "ts,id,x,tag\n" + "".join(f"{2 * i},{i},{i},t\n" for i in range(n)))
    h = write(tmp / "H.csv", "ts,id,vib\n" + "".join(f"{2 * i + 1},{i},{i % 180}\n" for i in range(n)))
    return [InputSpec("B", b), InputSpec("H", h)]


def _matcher() -> Matcher:
    m = Matcher(DDL, store="candidates")
    m.register_queries(QUERIES)
    return m


def test_results_are_written_in_pieces_as_they_come(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[int] = []
    original = outputs.JsonlWriter.write_batch

    def counting(self: outputs.JsonlWriter, batch: Any) -> int:
        n = original(self, batch)
        writes.append(n)
        return n

    monkeypatch.setattr(outputs.JsonlWriter, "write_batch", counting)
    monkeypatch.setattr(local, "_FLUSH_BLOCKS", 100)  # by size
    out = tmp_path / "o.jsonl"
    summary = local.run_match(_matcher(), _inputs(tmp_path, 1000), str(out), "jsonl")
    assert len(writes) >= summary.results // 100 and sum(writes) == summary.results
    assert len(strict_lines(out.read_text())) == summary.results

    writes.clear()
    monkeypatch.setattr(local, "_FLUSH_BLOCKS", 10**9)
    monkeypatch.setattr(local, "_FLUSH_SECONDS", 0.0)  # by time: every check is due
    summary = local.run_match(_matcher(), _inputs(tmp_path, 300), str(out), "jsonl")
    assert len(writes) > summary.results // 2


def test_matching_loop_does_not_recount_what_it_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The quadratic bug counted every buffered result on every row. Counted here by
    calls, not by time: the results held are counted a bounded number of times."""
    from mqo.results import ResultBlock

    calls = 0
    original = ResultBlock.__len__

    def counting(self: ResultBlock) -> int:
        nonlocal calls
        calls += 1
        return original(self)

    monkeypatch.setattr(ResultBlock, "__len__", counting)
    summary = local.run_match(_matcher(), _inputs(tmp_path, 3000), str(tmp_path / "o.jsonl"), "jsonl")
    assert summary.results > 3000
    assert calls <= 3 * summary.results  # the bug made it about results**2 / 2
