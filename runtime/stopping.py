"""Stopping a run cleanly on SIGINT (Ctrl-C) or SIGTERM.

Outside the part of a run that writes results, a signal stops the run at once
(:class:`KeyboardInterrupt`, or :class:`Terminated` for SIGTERM, whose default action
would kill the process without flushing anything). While results are being written,
:func:`deferred_stop` turns the first signal into a request that the matching loop
honours after the tuple it is on: every result of every tuple matched so far is
written, files are closed whole (complete JSON lines, a valid Parquet file), and the
run reports how far it got. A second signal stops at once, except in the middle of a
write, which finishes first so that no line is cut.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that the same clean-up runs."""


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def exit_status(signum: int) -> int:
    """The shell's status for a process ended by a signal: 128 + its number."""
    return 128 + signum


def raise_on_sigterm() -> None:
    """Make SIGTERM raise :class:`Terminated` (in the main thread; elsewhere a no-op)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)


class StopFlag:
    """What :func:`deferred_stop` hands the loop: the signal asked for, if any."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._writing = 0

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @contextmanager
    def writing(self) -> Iterator[None]:
        """A write that a second signal must not cut in two."""
        self._writing += 1
        try:
            yield
        finally:
            self._writing -= 1

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
        elif not self._writing:
            raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


@contextmanager
def deferred_stop() -> Iterator[StopFlag]:
    """Within the block, SIGINT and SIGTERM set the flag instead of stopping at once."""
    flag = StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag  # signals reach only the main thread; nothing to defer
        return
    previous = {s: signal.signal(s, flag._handle) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
