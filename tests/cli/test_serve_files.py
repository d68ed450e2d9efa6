"""``mqo serve`` loses no file and corrupts no checkpoint: a file written in place is
taken once it stops changing, and a change after it was taken is reported; one service
per checkpoint directory; a checkpoint that cannot be written is a one-line error that
leaves the last one as it was; ``--poll`` and ``--output`` are checked.

The service tests run the real command in a subprocess and wait for what it writes
(never for a length of time); the settling rule is driven by an injected clock.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import runtime.local.serve as serve
from runtime.local.serve import CHECKPOINT_FILE, LocalService
from runtime.local.serve_files import LOCK_NAME, write_atomically
from tests.cli.clirun import COMMAND, mqo, strict_lines

DDL = "REGISTER STREAM B (pressure FLOAT);"
QUERY = "Query ID: all\nSELECT * FROM B;\n"
WAIT = 120.0  # seconds: how long a test waits for the service before it fails


def folders(root: Path) -> dict[str, Path]:
    made = {name: root / name for name in ("q", "in", "out", "ck")}
    for folder in made.values():
        folder.mkdir(parents=True, exist_ok=True)
    (root / "s.ddl").write_text(DDL)
    (made["q"] / "all.mqo").write_text(QUERY)
    return made


def serve_args(root: Path, *more: str) -> list[str]:
    return [
        "serve",
        "--schema",
        str(root / "s.ddl"),
        "--queries",
        str(root / "q"),
        "--input",
        f"B={root / 'in'}",
        "--output",
        str(root / "out"),
        "--checkpoint",
        str(root / "ck"),
        *more,
    ]


def wait_for(what: str, ready: Callable[[], bool], proc: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + WAIT
    while not ready():
        assert proc is None or proc.poll() is None, f"the service ended before {what}"
        assert time.monotonic() < deadline, f"no {what} after {WAIT} s"
        time.sleep(0.05)


@contextmanager
def running(root: Path, *more: str) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A service in the background (its stderr in a file); stopped with SIGINT."""
    err = root / f"stderr-{len(list(root.glob('stderr-*')))}.txt"
    with err.open("w") as sink:
        proc = subprocess.Popen([*COMMAND, *serve_args(root, *more)], stdout=subprocess.DEVNULL, stderr=sink, text=True)
    try:
        yield proc, err
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def rows_read(out: Path) -> list[float]:
    return [r["ts"] for p in sorted(out.glob("results-*.jsonl")) for r in strict_lines(p.read_text())]


# ------------------------------------------------------------- case 7


def test_a_file_is_taken_once_it_stops_changing(tmp_path: Path) -> None:
    """Written in place in two parts, a file is not taken while it changes: all of its
    rows are read, in one step."""
    made = folders(tmp_path)
    now = [0.0]
    service = LocalService(
        DDL, {"B": str(made["in"])}, *(str(made[k]) for k in ("q", "out", "ck")), settle=1.0, clock=lambda: now[0]
    )
    data = made["in"] / "1.csv"
    data.write_text("ts,pressure\n1,10\n")
    assert service.step().idle  # seen for the first time (the query file too): it may still be written
    data.write_text("ts,pressure\n1,10\n2,20\n3,30\n")  # the writer goes on
    now[0] = 5.0
    assert service.step().files == 0  # changed since the last look (the query file is taken)
    now[0] = 5.5
    assert service.step().idle  # unchanged, but not for a whole second yet
    now[0] = 6.0
    report = service.step()
    assert (report.files, report.tuples) == (1, 3)
    assert rows_read(made["out"]) == [1.0, 2.0, 3.0]


def test_a_file_written_while_it_is_read_is_read_again_later(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that changes while it is being read is not taken from that read (it
    may end inside a row); a later step takes it whole."""
    made = folders(tmp_path)
    data = made["in"] / "1.csv"
    data.write_text("ts,pressure\n1,10\n")
    read = serve.read_stream

    def read_while_written(*args, **kwargs):  # type: ignore[no-untyped-def]
        got = read(*args, **kwargs)
        if not data.read_text().endswith("3,30\n"):
            with data.open("a") as f:
                f.write("2,20\n3,30\n")
        return got

    monkeypatch.setattr(serve, "read_stream", read_while_written)
    service = LocalService(DDL, {"B": str(made["in"])}, *(str(made[k]) for k in ("q", "out", "ck")), log=io.StringIO())
    first = service.step()
    assert (first.registered, first.files, first.tuples) == (1, 0, 0)
    assert service.step().tuples == 3
    assert rows_read(made["out"]) == [1.0, 2.0, 3.0]


def test_a_file_that_grows_after_it_was_taken_is_reported(tmp_path: Path) -> None:
    """The issue's case: a header and a row, later two more rows. The service takes the
    first part (it stood still for a poll interval), then reports the change in the
    step's input-errors file and on stderr, naming the file; it keeps running."""
    made = folders(tmp_path)
    data = made["in"] / "grows.csv"
    data.write_text("ts,pressure\n1,10\n")
    with running(tmp_path, "--poll", "0.2") as (proc, err):
        wait_for("first step", lambda: (made["out"] / "results-000001.jsonl").exists(), proc)
        with data.open("a") as f:
            f.write("2,20\n3,30\n")
        errors = made["out"] / "input-errors-000002.jsonl"
        wait_for("report of the change", errors.exists, proc)
        wait_for("warning on stderr", lambda: "grows.csv" in err.read_text().split("step 1:")[-1], proc)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=WAIT) == 0
    [record] = strict_lines(errors.read_text())
    assert record["file"] == str(data) and record["stream"] == "B"
    assert "changed after step 1 read it (17 bytes then, 27 now)" in record["error"]
    text = err.read_text()
    assert f"warning: {data}: changed after step 1 read it" in text and "Traceback" not in text
    assert "1 file(s) changed after they were read" in text
    assert rows_read(made["out"]) == [1.0]  # what was read; the rest is reported, not read twice
    # reported once: a restart finds nothing new
    again = mqo(*serve_args(tmp_path, "--once", "--poll", "0.1"))
    assert again.returncode == 0 and "step" not in again.stderr.split("\n", 1)[1], again.stderr


# ------------------------------------------------------------- case 8


def test_a_second_service_on_one_checkpoint_is_refused(tmp_path: Path) -> None:
    made = folders(tmp_path)
    (made["in"] / "1.csv").write_text("ts,pressure\n1,10\n")
    with running(tmp_path, "--poll", "0.2") as (proc, _):
        wait_for("first step", lambda: (made["ck"] / CHECKPOINT_FILE).exists(), proc)
        for engine in (["--once"], ["--engine", "spark", "--max-window", "10"]):
            second = mqo(*serve_args(tmp_path, *engine))
            assert second.returncode == 2, second.stderr
            assert second.stderr.count("\n") == 1 and "Traceback" not in second.stderr
            assert f"--checkpoint {made['ck']} is in use by another mqo serve (pid {proc.pid} on " in second.stderr
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=WAIT) == 0
    assert (made["ck"] / LOCK_NAME).exists()
    (made["in"] / "2.csv").write_text("ts,pressure\n2,20\n")
    after = mqo(*serve_args(tmp_path, "--once", "--poll", "0.1"))  # free once the holder is gone
    assert after.returncode == 0 and "step 2:" in after.stderr, after.stderr


# ------------------------------------------------------------- case 9

FULL_DISK = """
import errno, os, sys
write, replace = os.write, os.replace
full = os.path.realpath(sys.argv[1])

def fails(path):
    return os.path.realpath(path).startswith(full + os.sep)

def write_half(fd, data):
    # the file system fills up half-way through a temporary file there
    if fails(os.readlink(f"/proc/self/fd/{fd}")):
        write(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return write(fd, data)

def replace_none(src, dst):
    if fails(dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return replace(src, dst)

os.write, os.replace = write_half, replace_none
from runtime.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("full", ["ck", "out"])
def test_a_step_that_cannot_be_written_keeps_the_last_checkpoint(tmp_path: Path, full: str) -> None:
    """A full disk under the checkpoint (or the step's output files): a one-line error,
    no temporary file left, the last checkpoint as it was; a restart does the step again."""
    made = folders(tmp_path)
    (made["in"] / "1.csv").write_text("ts,pressure\n1,10\n")
    assert mqo(*serve_args(tmp_path, "--once", "--poll", "0.1")).returncode == 0
    good = {p.name: p.read_bytes() for p in made["ck"].iterdir() if p.name != LOCK_NAME}
    (made["in"] / "2.csv").write_text("ts,pressure\n2,20\n")
    failed = subprocess.run(
        [COMMAND[0], "-c", FULL_DISK, str(made[full]), *serve_args(tmp_path, "--once", "--poll", "0.1")],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert failed.returncode == 2, failed.stderr
    assert "Traceback" not in failed.stderr
    last = failed.stderr.splitlines()[-1]
    if full == "ck":
        assert last.startswith(f"mqo serve: error: cannot write the checkpoint {made['ck']}")
        assert "(No space left on device); step 2 is not committed (the checkpoint is still step 1's)" in last
    else:
        assert last == (
            f"mqo serve: error: cannot write the files of step 2 in {made['out']} (No space left on device); it is"
            " not committed and a restart does it again"
        )
    # no temporary file anywhere, the last good checkpoint as it was
    assert {p.name: p.read_bytes() for p in made["ck"].iterdir() if p.name != LOCK_NAME} == good
    assert not [p for p in (*made["ck"].iterdir(), *made["out"].iterdir()) if p.name.startswith(".")]
    # the restart does step 2 again
    again = mqo(*serve_args(tmp_path, "--once", "--poll", "0.1"))
    assert again.returncode == 0 and "step 2: 1 data file(s), 1 tuples, 1 results" in again.stderr, again.stderr
    assert rows_read(made["out"]) == [1.0, 2.0]


def test_write_atomically_leaves_the_old_file_on_a_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "state"
    target.write_bytes(b"good")
    real = os.write

    def full(fd: int, data: bytes) -> int:
        real(fd, bytes(data)[:3])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError, match="No space"):
        write_atomically(target, b"new and longer")
    monkeypatch.undo()
    assert target.read_bytes() == b"good" and sorted(p.name for p in tmp_path.iterdir()) == ["state"]


# ------------------------------------------------------------ case 10


@pytest.mark.parametrize("poll", ["0", "-1", "0.01", "nan", "inf", "soon"])
def test_poll_must_be_a_sensible_interval(tmp_path: Path, poll: str) -> None:
    folders(tmp_path)
    done = mqo(*serve_args(tmp_path, "--once", "--poll", poll))
    assert done.returncode == 2
    assert f"argument --poll: {poll!r} is not a poll interval; give seconds >= 0.1" in done.stderr
    assert not (tmp_path / "ck" / LOCK_NAME).exists()  # refused before anything ran


@pytest.mark.parametrize("engine", [[], ["--engine", "spark", "--max-window", "10"]], ids=["local", "spark"])
@pytest.mark.parametrize(
    ("option", "where"), [("--output", "in"), ("--output", "in/results"), ("--checkpoint", "in/ck")]
)
def test_outputs_inside_an_input_directory_are_refused(
    tmp_path: Path, option: str, where: str, engine: list[str]
) -> None:
    folders(tmp_path)
    (tmp_path / "in" / "1.csv").write_text("ts,pressure\n1,10\n")
    args = serve_args(tmp_path, "--once", *engine)
    args[args.index(option) + 1] = str(tmp_path / where)
    done = mqo(*args)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"mqo serve: error: {option} {tmp_path / where} is in the input directory of --input B={tmp_path / 'in'}:"
        " the service would read what it writes there as data; give a directory outside the inputs\n"
    )
    assert sorted(p.name for p in (tmp_path / "in").iterdir()) == ["1.csv"]  # nothing was written there
