"""Running the real ``mqo`` command and reading what it wrote strictly.

:func:`mqo` runs it as a separate process. :func:`in_session` runs it in this process
on the test run's Spark session, for ``--engine spark``: each ``mqo match --engine
spark`` as a process starts a JVM and a Spark session of its own (15-20 s, most of
such a run), whereas in this process the command finds the running session, uses it
and leaves it running (``runtime.spark.cli.spark_session``), so one JVM per test
worker serves them all. The local engine's runs stay processes (they start no JVM), and
``test_cli_engines_agree.test_jsonl_output_is_the_same_on_both_engines`` keeps one
``--engine spark`` run a process of its own, end to end (the command starting, quieting
and stopping its own Spark)."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import signal
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

COMMAND = [sys.executable, "-m", "runtime.cli"]


def mqo(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``mqo ARGS`` as a separate process; its status, stdout and stderr."""
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def in_session(spark: SparkSession, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``mqo ARGS`` run by ``runtime.cli.main`` in this process, with ``spark`` (the
    ``spark_session`` fixture) the running session: its status, stdout and stderr as
    :func:`mqo` gives them. Within the run, what a fresh process would have
    (:func:`_as_a_process`); after it, ``spark`` as it was: running, the same
    temporary views, streaming queries and settings (what a notebook relies on when it
    runs the command in its session). Not in the stderr returned: what Spark's JVM and
    its Python workers print (a task's log line of values written as NULL), which goes
    to this process's own stderr, where a process of the command would hold it."""
    from pyspark.sql import SparkSession

    assert SparkSession.getActiveSession() is not None, "in_session runs on the running session"
    before = _session_state(spark)
    with _as_a_process(cwd) as (out, err):
        status = _status_of_main(list(args))
    active = SparkSession.getActiveSession()
    assert active is not None, "the run stopped the session"
    assert _session_state(active) == before, "the run left the session changed"
    return subprocess.CompletedProcess(["mqo", *args], status, out.getvalue(), err.getvalue())


def _status_of_main(argv: list[str]) -> int:
    """The exit status ``python -m runtime.cli ARGV`` would end with: what ``main``
    returns, or the status of the SystemExit it raises (argparse's usage errors), or,
    for any other exception, 1 with the traceback on stderr, as the interpreter does."""
    from runtime.cli import main

    try:
        return main(argv)
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc(file=sys.stderr)
        return 1


class _Captured(io.TextIOWrapper):
    """A standard stream of a process whose output is a pipe: text over a byte
    ``buffer`` (which the writers use for ``--output -``), read back as text."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", newline="\n", write_through=True)

    def getvalue(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]


# Python's default warning filters (a fresh interpreter's, with no -W or PYTHONWARNINGS),
# in order; pytest's own (every DeprecationWarning shown) would add warning lines to
# the command's stderr that no process of it writes.
_FRESH_FILTERS: list[tuple[Any, type[Warning], str]] = [
    ("default", DeprecationWarning, r"__main__\Z"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
]


def _show_on_stderr(message: Warning | str, category: type[Warning], filename: str, lineno: int, *_: Any) -> None:
    """A warning outside the command's own handling, as a process shows it."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno))


@contextlib.contextmanager
def _as_a_process(cwd: Path | None) -> Iterator[tuple[_Captured, _Captured]]:
    """For the run: its own stdout and stderr, ``cwd`` as the current directory, a fresh
    interpreter's warning filters and display; after it, what the run may set for the
    rest of a process put back: the environment (the Spark set-up sets variables), the
    SIGTERM handler (``main`` makes SIGTERM raise) and the root logger."""
    out, err = _Captured(), _Captured()
    environment = dict(os.environ)
    on_sigterm = signal.getsignal(signal.SIGTERM)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    where = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.resetwarnings()
            for action, category, module in _FRESH_FILTERS:
                warnings.filterwarnings(action, category=category, module=module, append=True)
            warnings.showwarning = _show_on_stderr
            yield out, err
    finally:
        os.chdir(where)
        for name in set(os.environ) - set(environment):
            del os.environ[name]
        os.environ.update({name: value for name, value in environment.items() if os.environ.get(name) != value})
        if on_sigterm is not None:
            signal.signal(signal.SIGTERM, on_sigterm)
        root.handlers[:], root.level = handlers, level


def _session_state(spark: SparkSession) -> tuple[Any, ...]:
    """What a run on a borrowed session must leave as it was."""
    views = sorted(t.name for t in spark.catalog.listTables() if t.isTemporary)
    return views, sorted(q.id for q in spark.streams.active), sorted(spark.conf.getAll.items())


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_lines(text: str) -> list[dict[str, Any]]:
    """Every line of a JSON-lines text read by a strict parser (no NaN, no Infinity),
    and the text ends with a newline (no cut line)."""
    assert text == "" or text.endswith("\n"), "the last line is cut"
    return [json.loads(line, parse_constant=_no_constant) for line in text.splitlines()]


def match(
    *args: str,
    schema: str,
    queries: str,
    inputs: list[str],
    cwd: Path | None = None,
    spark: SparkSession | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``mqo match`` with these files: a process of its own, or, given ``spark``, run
    in this process on that session (:func:`in_session`)."""
    spec = [a for s in inputs for a in ("--input", s)]
    full = ("match", "--schema", schema, "--queries", queries, *spec, *args)
    return in_session(spark, *full, cwd=cwd) if spark is not None else mqo(*full, cwd=cwd, timeout=timeout)
