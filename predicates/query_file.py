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
not UTF-8 raises the decoder's error; the whole file's read then says where.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import overload

_SEARCH = 1 << 16  # bytes read at a time to find the next ';'


class QueryFileParts(Sequence[str]):
    """The parts of the query file at ``path``, cut at byte offsets ``cuts`` (the first
    0, the last the file's size). ``inspect``: called with each part as it is read
    (the prefilter for views and tables). O(1) memory but for the cuts; each part
    read costs its bytes twice for a moment."""

    def __init__(self, path: str | os.PathLike[str], cuts: list[int]) -> None:
        self.path = Path(path)
        self.cuts = cuts
        self.inspect: Callable[[str], None] | None = None

    @classmethod
    def of(cls, path: str | os.PathLike[str], part_bytes: int) -> QueryFileParts | None:
        """The file's parts, or None when it has one part only (or cannot be opened:
        the file's whole read then says why). One pass over the file, ``_SEARCH``
        bytes at a time past each ``part_bytes``."""
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                cuts = [0]
                while size - cuts[-1] > part_bytes:
                    at = cuts[-1] + part_bytes
                    f.seek(at)
                    while True:
                        block = f.read(_SEARCH)
                        if not block:
                            break
                        found = block.find(b";")
                        if found >= 0:
                            cuts.append(at + found + 1)
                            break
                        at += len(block)
                    if not block:  # no ';' in the rest: it is the last part's
                        break
        except OSError:
            return None
        if cuts[-1] != size:
            cuts.append(size)
        return cls(path, cuts) if len(cuts) > 2 else None

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
        with open(self.path, "rb") as f:
            f.seek(self.cuts[k])
            data = f.read(self.cuts[k + 1] - self.cuts[k])
        text = data.decode("utf-8")
        del data
        if "\r" in text:  # (universal newlines, as the whole file's read has them)
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if self.inspect is not None:
            self.inspect(text)
        return text

    def __iter__(self) -> Iterator[str]:
        for k in range(len(self)):
            yield self[k]


__all__ = ["QueryFileParts"]
