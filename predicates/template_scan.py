"""The key of the template cache: many query texts' skeletons, found at once with numpy.

A piece of text (one query) is looked up in :mod:`predicates.template_cache` by its
**skeleton**: its bytes with each constant replaced by a mark (``\\x01``) and, after a
known header (``Query ID:``), the name replaced by another (``\\x02``). A constant
here is a run of digits and at most one dot, with at least one digit and at most 15,
between two characters of :data:`EDGES` (characters no token runs across into a
number). This module only finds such runs; what they mean is the template's: a
template is learned from the lexer's tokens and the parser's tree of a piece with
that skeleton, and it holds only when each of its runs is one of the lexer's number
tokens (so a piece with the same skeleton is read as the same tokens with other
numbers). Values are read exactly: a decimal of at most 15 digits is read by the C
library's correctly rounded conversion (numpy's text reader), which is the double
``float()`` reads, and the decimal is its shortest text.

All of it is a few passes of numpy over the pieces' bytes (joined by NUL): tens of
thousands of texts a second, where reading each with a regular expression in Python
costs more than the rest of registering it.
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from predicates.lexer import BLANK_CHARS

# the characters a constant of a template may touch on either side: no token runs
# across them into a number (a blank, an operator, a parenthesis, a comma, a colon, a
# semicolon, and the NUL that separates pieces while they are scanned)
EDGES = BLANK_CHARS + "()<>=!+-*/,:;\x00"
_EDGE = np.zeros(256, bool)
_EDGE[np.frombuffer(EDGES.encode("ascii"), np.uint8)] = True
DIGITS = 15  # digits of a decimal whose double is always the decimal (its shortest text)
MARK = b"\x01"  # a constant's place in a skeleton
NAME = b"\x02"  # the header name's place in a skeleton


def scannable(piece: str) -> bool:
    """Whether a piece can be scanned: ASCII, without the bytes that separate pieces
    and mark holes (a piece holding them is read by the parser)."""
    return piece.isascii() and "\x00" not in piece and "\x01" not in piece and "\x02" not in piece


CHUNK = 4096  # pieces scanned together: their arrays stay in the cache (and a million texts are not one array)


def scan(pieces: list[str], headers: list[tuple[bytes, bytes]]) -> Scan:
    """The scan of ``pieces``, made a chunk at a time (the arrays of a scan are a few
    times its text's bytes: a million texts at once would be gigabytes)."""
    if len(pieces) <= CHUNK:
        return Scan(pieces, headers)
    chunks = [Scan(pieces[i : i + CHUNK], headers) for i in range(0, len(pieces), CHUNK)]
    whole = chunks[0]
    runs = np.cumsum([0] + [len(c.values) for c in chunks])
    whole.first_runs = np.concatenate([c.first_runs[:-1] + runs[i] for i, c in enumerate(chunks)] + [runs[-1:]])
    whole.first_run = whole.first_runs.tolist()
    whole.values = np.concatenate([c.values for c in chunks])
    whole.starts = np.concatenate([c.starts for c in chunks])
    whole.ends = np.concatenate([c.ends for c in chunks])
    for name in ("unread", "names", "skeletons"):
        setattr(whole, name, list(chain.from_iterable(getattr(c, name) for c in chunks)))
    return whole


class Scan:
    """The skeletons and constants of many pieces (see the module's docstring).

    ``headers``: (the bytes before a header's name, the byte after it) of the known
    templates: where a piece starts with one and a word follows, the word is cut out
    as the piece's ``names`` entry (None where none is)."""

    def __init__(self, pieces: list[str], headers: list[tuple[bytes, bytes]]) -> None:
        joined = "\x00".join(pieces)
        text = np.frombuffer(joined.encode("ascii"), np.uint8)
        n = len(text)
        digit = (text - 48) < 10  # (uint8: the others wrap past 9)
        dot = text == 46
        numeric = digit | dot
        bounds = np.flatnonzero(numeric[1:] != numeric[:-1]) + 1
        if n and numeric[0]:
            bounds = np.concatenate(([0], bounds))
        if len(bounds) % 2:
            bounds = np.append(bounds, n)
        starts, ends = bounds[0::2], bounds[1::2]
        edged = _EDGE[text[np.minimum(ends, n - 1)]] | (ends == n)
        edged &= _EDGE[text[starts - 1]] | (starts == 0)
        starts, ends = starts[edged], ends[edged]
        dot_at = np.flatnonzero(dot)
        dot_run = np.searchsorted(starts, dot_at, "right") - 1
        in_run = (dot_run >= 0) & (dot_at < np.append(ends, 0)[dot_run])  # (-1: none before)
        dots = np.bincount(dot_run[in_run], minlength=len(starts))
        constant = dots < ends - starts  # ('.' alone is punctuation, not a constant)
        starts, ends, dots = starts[constant], ends[constant], dots[constant]
        digits = ends - starts - dots
        piece_starts = np.concatenate(([0], np.flatnonzero(text == 0) + 1))
        run_piece = np.searchsorted(piece_starts, starts, "right") - 1
        self.first_runs = np.searchsorted(run_piece, np.arange(len(pieces) + 1))
        self.first_run: list[int] = self.first_runs.tolist()
        # a piece with a constant the lexer reads otherwise ('1.2.3' is two numbers), or
        # whose double need not be the decimal, is not read here (the parser reads it)
        unread = np.zeros(len(pieces), bool)
        unread[run_piece[(dots > 1) | (digits > DIGITS)]] = True  # (one of each: see ``plain`` below)
        self.unread: list[bool] = unread.tolist()
        # (arrays: a million texts have twenty million constants, which as Python ints
        # would take gigabytes; only a piece a template is learned from needs its own)
        self.starts = starts - piece_starts[run_piece]  # within their piece
        self.ends = ends - piece_starts[run_piece]
        # which characters are in a constant: the numeric ones, but those of the runs
        # that are not constants (the digits of a name such as a19)
        inside = numeric.copy()
        others = np.ones(len(bounds) // 2, bool)
        others[np.searchsorted(bounds[0::2], starts)] = False
        other_starts, other_ends = bounds[0::2][others], bounds[1::2][others]
        lengths = other_ends - other_starts
        shift = other_starts - (np.cumsum(lengths) - lengths)
        inside[np.arange(int(lengths.sum())) + np.repeat(shift, lengths)] = False
        # the doubles, read by the C library from the constants' text alone (a blank
        # after each): a decimal of at most 15 digits reads as its own shortest double
        # (the others, which make their piece unread, are not read)
        plain = (dots <= 1) & (digits <= DIGITS)
        numbers = np.zeros(n + 1, bool)
        lengths = ends - starts + 1  # (with the character after)
        shift = starts[plain] - (np.cumsum(lengths[plain]) - lengths[plain])
        numbers[np.arange(int(lengths[plain].sum())) + np.repeat(shift, lengths[plain])] = True
        spaced = np.append(text, np.uint8(0))[numbers]
        spaced[(spaced - 48 >= 10) & (spaced != 46)] = 32
        self.values = np.full(len(starts), np.nan)
        if plain.any():
            self.values[plain] = np.fromstring(spaced.tobytes(), np.float64, sep=" ")
        # the skeletons: a constant's first character becomes the mark, the rest go
        keep = ~inside
        keep[starts] = True
        marked = text.copy()
        marked[starts] = MARK[0]
        self.names: list[str | None] = [None] * len(pieces)
        self._named = np.zeros(len(pieces), bool)
        for before, after in headers:
            self._cut_names(joined, text, piece_starts, before, after, keep, marked)
        self.skeletons: list[bytes] = marked[keep].tobytes().split(b"\x00")

    def _cut_names(
        self,
        joined: str,
        text: np.ndarray,
        piece_starts: np.ndarray,
        before: bytes,
        after: bytes,
        keep: np.ndarray,
        marked: np.ndarray,
    ) -> None:
        """Cut the names of the pieces that start with ``before`` (a header's bytes up
        to its name, without constants) and a word that ``after`` ends."""
        if MARK in before:
            return  # (a header after a comment with a number: each piece is looked up alone)
        n = len(text)
        first = piece_starts[piece_starts + len(before) < n]
        for i, byte in enumerate(before):
            first = first[text[first + i] == byte]
        if not len(first):
            return
        name_starts = first + len(before)
        enders = np.flatnonzero(text == after[0])
        at = np.searchsorted(enders, name_starts)
        found = at < len(enders)
        name_starts, name_ends = name_starts[found], enders[at[found]]
        words = [joined[start:end] for start, end in zip(name_starts.tolist(), name_ends.tolist(), strict=True)]
        good = [word.isidentifier() for word in words]  # one word (ASCII: the lexer's WORD)
        pieces = np.searchsorted(piece_starts, name_starts, "right") - 1
        chosen = np.array(good, bool) & ~self._named[pieces]  # (a piece is named by the first header it has)
        pieces, name_starts, name_ends = pieces[chosen], name_starts[chosen], name_ends[chosen]
        words = [word for word, take in zip(words, chosen.tolist(), strict=True) if take]
        self._named[pieces] = True
        lengths = name_ends - name_starts - 1  # all but the first character go
        shift = name_starts + 1 - (np.cumsum(lengths) - lengths)
        keep[np.arange(int(lengths.sum())) + np.repeat(shift, lengths)] = False
        marked[name_starts] = NAME[0]
        names = self.names
        for k, word in zip(pieces.tolist(), words, strict=True):
            names[k] = word


__all__ = ["CHUNK", "DIGITS", "EDGES", "MARK", "NAME", "Scan", "scan", "scannable"]
