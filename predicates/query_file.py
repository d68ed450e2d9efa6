"""A query file read in parts: a million subscriptions registered from a file without
its text held whole.

A query file's text held as one string costs its size, and reading it costs twice
that for a moment (the bytes and the string). :class:`QueryFileParts` is the file as
a sequence of texts instead, each cut after the first ``;`` past ``part_bytes`` bytes
(a ``;`` byte is never inside a UTF-8 character) and read from the file only when
asked for. The template cache reads a sequence of texts one batch at a time
(:mod:`predicates.template_cache`), and a piece never runs across a ``;``, so the
parts' pieces are the file's: when every one of them is read from a template, the
file compiles without the parser and without its text (:func:`predicates.entry.compile_read`).
Any other file is read whole and compiled as a text (the parser then reports an error
with its line in the file).

A part is decoded as :meth:`pathlib.Path.read_text` decodes the file: UTF-8 with
universal newlines (a ``\\r\\n`` is never cut: a cut follows a ``;``). A part that is
not UTF-8 raises the decoder's error, and a file written over while its parts are
read raises :class:`FileChanged`: the whole file's read then says where, or reads it
as it is. Only a regular file is read in parts (a pipe is read once, whole).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import overload

_SEARCH = 1 << 16  # bytes read at a time to find the next ';'


class FileChanged(OSError):
    """The file changed while its parts were read (its size or modification time)."""


class QueryFileParts(Sequence[str]):
    """The parts of an open query file (``fd``), cut at byte offsets ``cuts`` (the
    first 0, the last the file's size). ``inspect``: called with each part as it is
    read (the prefilter for views and tables). A context manager: it closes the file.
    O(1) memory but for the cuts and the part last read; each part read costs its
    bytes twice for a moment.

    Every part is read from the one descriptor opened at the start, so a file replaced
    meanwhile (an editor's save: a new file renamed over it) is still read as it was;
    one written over in place shows in its size or modification time, and reading a
    part then raises :class:`FileChanged` (the registration reads the file whole)."""

    def __init__(self, path: str | os.PathLike[str], fd: int, cuts: list[int]) -> None:
        self.path = Path(path)
        self.fd = fd
        self.cuts = cuts
        self.inspect: Callable[[str], None] | None = None
        status = os.fstat(fd)
        self._version = (status.st_size, status.st_mtime_ns)
        self._last: tuple[int, str] | None = None

    @classmethod
    def of(cls, path: str | os.PathLike[str], part_bytes: int) -> QueryFileParts | None:
        """The parts of the regular file at ``path``, or None when it has one part only
        or is no regular file (a pipe is read once, whole) or cannot be opened (the
        whole read then says why). One pass over the file, ``_SEARCH`` bytes at a time
        past each ``part_bytes``; a blank rest after the last cut is the last part's."""
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                return None
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            size = os.fstat(fd).st_size
            cuts = [0]
            while size - cuts[-1] > part_bytes:
                found = _next_semicolon(fd, cuts[-1] + part_bytes)
                if found < 0:  # no ';' in the rest: it is the last part's
                    break
                cuts.append(found + 1)
            if len(cuts) > 1 and not os.pread(fd, size - cuts[-1], cuts[-1]).strip():
                cuts.pop()  # (a blank rest is no piece: no part of its own)
            if cuts[-1] != size:
                cuts.append(size)
        except OSError:
            os.close(fd)
            return None
        if len(cuts) > 2:
            return cls(path, fd, cuts)
        os.close(fd)
        return None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> QueryFileParts:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self.cuts) - 1

    @overload
    def __getitem__(self, k: int) -> str: ...

    @overload
    def __getitem__(self, k: slice) -> Sequence[str]: ...

    def __getitem__(self, k: int | slice) -> str | Sequence[str]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(k)
        if self._last is not None and self._last[0] == k:
            return self._last[1]
        start, end = self.cuts[k], self.cuts[k + 1]
        data = os.pread(self.fd, end - start, start)
        status = os.fstat(self.fd)
        if len(data) != end - start or (status.st_size, status.st_mtime_ns) != self._version:
            raise FileChanged(f"{self.path} changed while it was read")
        text = data.decode("utf-8")
        del data
        if "\r" in text:  # (universal newlines, as the whole file's read has them)
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if self.inspect is not None:
            self.inspect(text)
        self._last = (k, text)
        return text


def _next_semicolon(fd: int, at: int) -> int:
    """The offset of the first ``;`` at or after ``at``, else -1."""
    while True:
        block = os.pread(fd, _SEARCH, at)
        if not block:
            return -1
        found = block.find(b";")
        if found >= 0:
            return at + found
        at += len(block)


__all__ = ["FileChanged", "QueryFileParts"]
