"""What ``mqo serve`` needs of the file system besides reading and writing: when a
file in a watched directory is complete enough to take, and one service per
checkpoint directory.

**Settling.** A file written in place (opened, written in pieces, closed) is seen by a
poll while it grows. A file is taken once its size and modification time are what
they were at a look at least ``settle`` seconds ago (the CLI's ``--poll``): a writer
that paused for a whole poll interval is taken as complete. What a later write adds
is then not read; :mod:`runtime.local.serve` compares every taken file with what it was and
reports a change (never a silent loss). Moving a finished file in stays the safe way.

**The checkpoint lock.** Two services on one checkpoint directory would overwrite each
other's checkpoint (and race on its temporary file). :func:`checkpoint_lock` holds an
exclusive ``flock`` on ``DIR/serve.lock`` for the life of the process and writes the
holder (pid, host, start time) into it, so the second service can say who holds it.
The lock goes with the process (a ``kill -9`` frees it); the file stays, naming the
last holder, which is harmless (removing it would race with the next holder).
"""

from __future__ import annotations

import datetime
import fcntl
import os
import socket
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from runtime.workload import CliError

LOCK_NAME = "serve.lock"

Signature = tuple[int, int]  # (size in bytes, modification time in ns): writing a file changes one


def signature(path: Path) -> Signature | None:
    """What a write changes of ``path``; None when it is not a regular file (any more)."""
    try:
        st = path.stat()
    except OSError:  # gone since the directory was listed
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_size, st.st_mtime_ns)


class Settling:
    """Which files have stopped changing: each look at a file is remembered with the
    time it was first seen as it is now."""

    def __init__(self, settle: float, clock: Callable[[], float]) -> None:
        self.settle = settle
        self.clock = clock
        self._looks: dict[Path, tuple[Signature, float]] = {}
        self._seen: set[Path] = set()
        self.waiting: set[Path] = set()  # seen in this round of looks, not settled yet

    def begin(self) -> None:
        """A new round of looks (a step)."""
        self._seen = set()
        self.waiting = set()

    def ready(self, path: Path, sig: Signature) -> bool:
        """Whether ``path`` (as ``sig``) is unchanged since a look ``settle`` seconds
        ago; with ``settle`` 0, at first sight."""
        now = self.clock()
        self._seen.add(path)
        seen = self._looks.get(path)
        if seen is None or seen[0] != sig:
            self._looks[path] = (sig, now)
            ready = self.settle <= 0
        else:
            ready = now - seen[1] >= self.settle
        if not ready:
            self.waiting.add(path)
        return ready

    def changed(self, path: Path, sig: Signature | None) -> None:
        """``path`` changed while it was read: it waits to settle again."""
        self._looks.pop(path, None)
        if sig is not None:
            self._looks[path] = (sig, self.clock())
            self.waiting.add(path)

    def end(self) -> None:
        """Forget the files this round did not see (taken, moved away or deleted)."""
        self._looks = {p: look for p, look in self._looks.items() if p in self._seen}

    def forget(self, path: Path) -> None:
        self._seen.discard(path)
        self._looks.pop(path, None)


@contextmanager
def checkpoint_lock(folder: str, option: str = "--checkpoint") -> Iterator[None]:
    """Hold ``folder`` for this process (see the module docstring); a CliError naming
    the holder when another process holds it."""
    path = Path(folder) / LOCK_NAME
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise CliError(f"{option} {folder}: cannot open the lock file {path} ({err.strerror or err})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 400, 0).decode(errors="replace").strip() or "it has not written its name yet"
            raise CliError(
                f"{option} {folder} is in use by another mqo serve ({holder}); stop that one first, or give "
                f"another {option}"
            ) from None
        except OSError as err:
            raise CliError(f"{option} {folder}: cannot lock {path} ({err.strerror or err})") from None
        since = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        holder = f"pid {os.getpid()} on {socket.gethostname()}, since {since}\n".encode()
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder, 0)
        except OSError as err:
            raise CliError(f"{option} {folder}: cannot write the lock file {path} ({err.strerror or err})") from None
        yield
    finally:
        os.close(fd)  # releases the lock


def temporary_path(path: Path) -> Path:
    """Where ``path`` is written before it is renamed over it (a dot file beside it)."""
    return path.with_name(f".{path.name}.tmp")


def sync_paths(paths: Sequence[Path]) -> None:
    """``fsync`` each path (files, or folders after a rename in them)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomically(path: Path, blob: bytes) -> None:
    """``blob`` at ``path`` whole or not at all: written beside it, synced, renamed
    over it. On a failure (a full or read-only file system) the OSError is raised with
    the temporary file removed and ``path`` as it was."""
    tmp = temporary_path(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            rest = memoryview(blob)
            while rest:
                rest = rest[os.write(fd, rest) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with suppress(OSError):
            tmp.unlink()
        raise
