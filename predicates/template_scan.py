"""The key of the template cache: many query texts' skeletons, found in one pass.

A text is cut into **pieces** (one query each) after each ``;``, the blanks before a
piece left out (a text without ``;`` is one piece; a blank rest after the last ``;``
is none). A piece is looked up in :mod:`predicates.template_cache` by its
**skeleton**: its bytes with each constant replaced by a mark (``\\x01``) and, after a
known header (``Query ID:``), the name replaced by another (``\\x02``). A constant
here is a run of digits and dots, with at least one digit, between two characters of
:data:`EDGES` or a piece's ends (characters no token runs across into a number).
This module only finds such runs; what they mean is the template's: a template is
learned from the lexer's tokens and the parser's tree of a piece with that skeleton,
and it holds only when each of its runs is one of the lexer's number tokens (so a
piece with the same skeleton is read as the same tokens with other numbers).

**Values are exact.** A constant is read here only when it has at most one dot and at
most :data:`DIGITS` (15) digits, leading zeros counted (a piece with another constant
is not read: the parser reads it). Such a decimal is ``m / 10**f`` with ``m`` its
digits as an integer (``m < 10**15 < 2**53``: a double holds it exactly) and ``f`` the
digits after the dot (``10**f``, ``f <= 15 <= 22``: a double holds it exactly, here
from a table of literals). IEEE division is correctly rounded, so ``m / 10**f`` is the
double nearest the decimal, which is what ``float()`` of its text gives (Clinger's
fast path); and a decimal of at most 15 significant digits is the shortest text of its
double, so the value is the decimal as written (DESIGN §5). No ``fastmath``.

All of it is one pass over the pieces' bytes, :func:`scan_bytes`: a plain function
of arrays, compiled by numba in :mod:`indexes.template_kernels` (the language package
stays pure Python; whoever holds the kernel hands it to the cache, see
:attr:`predicates.template_cache.TemplateCache.scanner`). It cuts the pieces, the
names and the constants, writes the skeletons one after the other and numbers the
distinct ones (a hash, and each piece's skeleton compared byte by byte with its
group's first: a piece whose skeleton only shares the hash is left to the parser),
so that what is done per piece after it is array work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from predicates.lexer import BLANK_CHARS

# the characters a constant of a template may touch on either side: no token runs
# across them into a number (a blank, an operator, a parenthesis, a comma, a colon, a
# semicolon, and NUL)
EDGES = BLANK_CHARS + "()<>=!+-*/,:;\x00"
EDGE_TABLE = np.zeros(256, np.bool_)
EDGE_TABLE[np.frombuffer(EDGES.encode("ascii"), np.uint8)] = True
BLANK_TABLE = np.zeros(256, np.bool_)
BLANK_TABLE[np.frombuffer(BLANK_CHARS.encode("ascii"), np.uint8)] = True
DIGITS = 15  # digits of a decimal whose double is always the decimal (its shortest text)
MARK = b"\x01"  # a constant's place in a skeleton
NAME = b"\x02"  # the header name's place in a skeleton
# 10**f for f <= DIGITS, each a double exactly (written as literals: read exactly)
POW10 = np.array([1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15], np.float64)
# a piece's flags: a constant that is not a plain decimal (1), a byte that is not
# ASCII or is NUL, the mark or the name's mark (2): the parser reads such a piece
NOT_PLAIN, NOT_SCANNABLE = 1, 2
FOLLOW = True  # pieces compared with the skeleton before them first (a test turns it off)
_HASH_MASK = 0xFFFFFFFFFFFF  # (48 bits: the product wraps alike compiled or not)
_HASH_PRIME = 1099511628211

# what :func:`scan_bytes` returns (see there)
ScanArrays = tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
]  # fmt: skip
ByteScanner = Callable[..., ScanArrays]  # scan_bytes, compiled


def scan_bytes(
    data: np.ndarray,
    text_ends: np.ndarray,
    edge: np.ndarray,
    blank: np.ndarray,
    header_bytes: np.ndarray,
    header_ends: np.ndarray,
    header_after: np.ndarray,
) -> ScanArrays:
    """One pass over ``data`` (uint8: texts one after the other, text ``t`` ending at
    ``text_ends[t]``). ``edge``, ``blank``: per byte, whether it is in :data:`EDGES`,
    a blank. Headers: header ``j``'s bytes up to the name are
    ``header_bytes[header_ends[j - 1]:header_ends[j]]``, the byte after the name
    ``header_after[j]``; a piece starting with them and a word (``[A-Za-z_]\\w*``)
    before that byte has the word as its name (the first header that fits).

    Returns, for ``P`` pieces, ``R`` constants, ``G`` distinct skeletons:
    ``text_pieces`` (T + 1: text ``t``'s pieces are ``text_pieces[t]:text_pieces[t + 1]``),
    ``piece_start``, ``piece_end`` (in ``data``), ``flags`` (:data:`NOT_PLAIN`,
    :data:`NOT_SCANNABLE`), ``name_start``, ``name_end`` (-1: no name), ``group`` (its
    skeleton's number; -1 for a flagged piece or a hash shared with another skeleton),
    ``reps`` (G: each skeleton's first piece), ``skeletons`` (the bytes of every piece's
    skeleton, one after the other), ``skeleton_bounds`` (P + 1), ``run_first`` (P + 1:
    piece ``k``'s constants are ``run_first[k]:run_first[k + 1]``), ``run_start``,
    ``run_end`` (in their piece), ``values`` (their doubles; NaN where not plain) and
    ``names`` (the names, each followed by a line feed)."""
    n_texts = len(text_ends)
    n = len(data)
    semicolons = 0
    numeric_runs = n_texts  # (at least the constants, as a run may be cut where a text ends: room made once)
    numeric = False
    for i in range(n):
        c = data[i]
        if c == 59:
            semicolons += 1
        was = numeric
        numeric = c == 46 or 48 <= c <= 57
        if numeric and not was:
            numeric_runs += 1
    capacity = semicolons + n_texts
    text_pieces = np.zeros(n_texts + 1, np.int64)
    piece_start = np.empty(capacity, np.int64)
    piece_end = np.empty(capacity, np.int64)
    p = 0
    a = 0
    for t in range(n_texts):
        b = text_ends[t]
        i = a
        while True:  # a piece ends after each ';' (blanks before it left out); a blank rest is none
            q = i
            while q < b and data[q] != 59:
                q += 1
            s = i
            while s < q and blank[data[s]]:
                s += 1
            if q < b:
                piece_start[p] = s
                piece_end[p] = q + 1
                p += 1
                i = q + 1
            else:
                if s < b:
                    piece_start[p] = s
                    piece_end[p] = b
                    p += 1
                break
        text_pieces[t + 1] = p
        a = b
    flags = np.zeros(p, np.uint8)
    name_start = np.full(p, -1, np.int64)
    name_end = np.full(p, -1, np.int64)
    group = np.full(p, -1, np.int64)
    hashes = np.zeros(p, np.int64)
    reps = np.empty(p, np.int64)
    skeletons = np.empty(n, np.uint8)  # (a skeleton is never longer than its piece)
    skeleton_bounds = np.zeros(p + 1, np.int64)
    names = np.empty(n + p, np.uint8)
    run_first = np.zeros(p + 1, np.int64)
    run_start = np.empty(numeric_runs, np.int32)
    run_end = np.empty(numeric_runs, np.int32)
    values = np.empty(numeric_runs, np.float64)
    size = 2
    while size < 2 * p:
        size *= 2
    slots = np.full(size, -1, np.int64)
    n_groups = 0
    last = -1  # the group of the last piece grouped
    n_names = 0
    r = 0
    o = 0
    n_headers = len(header_after)
    for k in range(p):
        s = piece_start[k]
        e = piece_end[k]
        ns = -1
        ne = -1
        for j in range(n_headers):
            h0 = 0 if j == 0 else header_ends[j - 1]
            w = s + header_ends[j] - h0
            if w >= e:
                continue
            fits = True
            for x in range(header_ends[j] - h0):
                if data[s + x] != header_bytes[h0 + x]:
                    fits = False
                    break
            c = int(data[w])
            if not fits or not (c == 95 or 65 <= c <= 90 or 97 <= c <= 122):
                continue
            z = w + 1
            while z < e:
                c = int(data[z])
                if not (c == 95 or 48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122):
                    break
                z += 1
            if z < e and data[z] == header_after[j]:
                ns = w
                ne = z
                break
        name_start[k] = ns
        name_end[k] = ne
        if FOLLOW and last >= 0:
            # most pieces have the skeleton of the one before: walk it and the piece
            # together, each byte compared once, each constant read where the skeleton
            # has one (where they part, the piece is scanned as any other below). The
            # bytes that match are the skeleton's, whose constants were edged and whose
            # runs were maximal: a piece that matches to its end has that skeleton.
            x = skeleton_bounds[reps[last]]
            x_end = skeleton_bounds[reps[last] + 1]
            i = s
            rr = r
            n_before = n_names
            named = ns < 0
            while x < x_end:
                m = skeletons[x]
                if m == 1:
                    j = i
                    dots = 0
                    digits = 0
                    after_dot = 0
                    mantissa = 0
                    while j < e:
                        d = int(data[j])
                        if d == 46:
                            dots += 1
                        elif 48 <= d <= 57:
                            digits += 1
                            if digits <= DIGITS:
                                mantissa = mantissa * 10 + (d - 48)
                            if dots:
                                after_dot += 1
                        else:
                            break
                        j += 1
                    if digits == 0 or dots > 1 or digits > DIGITS or (j < e and not edge[data[j]]):
                        break  # (before it is the skeleton's edge; after it, one must be too)
                    run_start[rr] = i - s
                    run_end[rr] = j - s
                    values[rr] = mantissa / POW10[after_dot]  # (exact: the module's docstring)
                    rr += 1
                    i = j
                elif m == 2:
                    if i != ns:
                        break
                    for y in range(ns, ne):
                        names[n_names] = data[y]
                        n_names += 1
                    names[n_names] = 10
                    n_names += 1
                    named = True
                    i = ne
                elif i >= e or data[i] != m:
                    break
                else:
                    i += 1
                x += 1
            if x == x_end and i == e and named:
                r = rr
                run_first[k + 1] = r
                skeleton_bounds[k + 1] = o  # (its skeleton is its group's: not written)
                group[k] = last
                continue
            h = 0
            if ns >= 0 and not named and i > ns:
                n_names = n_before  # (the name was passed as the skeleton's bytes: all again)
                i = s
            else:  # on from where they part: the skeleton so far is the one followed
                x0 = skeleton_bounds[reps[last]]
                while x > x0 and (skeletons[x - 1] == 46 or 48 <= skeletons[x - 1] <= 57):
                    x -= 1  # (back to the start of a run of digits written as they are:
                    i -= 1  # what follows it here may make it a constant)
                for y in range(x0, x):
                    skeletons[o] = skeletons[y]
                    o += 1
                    h = (h * _HASH_PRIME + int(skeletons[y])) & _HASH_MASK
                r = rr
        else:
            h = 0
            i = s
        bad = 0
        while i < e:
            c = int(data[i])
            if i == ns:
                skeletons[o] = 2
                o += 1
                h = (h * _HASH_PRIME + 2) & _HASH_MASK
                for x in range(ns, ne):
                    names[n_names] = data[x]
                    n_names += 1
                names[n_names] = 10
                n_names += 1
                i = ne
                continue
            if c >= 128 or c <= 2:
                bad |= NOT_SCANNABLE
            if c == 46 or 48 <= c <= 57:
                j = i
                dots = 0
                digits = 0
                after_dot = 0
                mantissa = 0
                while j < e:
                    d = int(data[j])
                    if d == 46:
                        dots += 1
                    elif 48 <= d <= 57:
                        digits += 1
                        if digits <= DIGITS:
                            mantissa = mantissa * 10 + (d - 48)
                        if dots:
                            after_dot += 1
                    else:
                        break
                    j += 1
                if digits and (i == s or edge[data[i - 1]]) and (j == e or edge[data[j]]):
                    run_start[r] = i - s
                    run_end[r] = j - s
                    if dots <= 1 and digits <= DIGITS:
                        values[r] = mantissa / POW10[after_dot]  # (exact: the module's docstring)
                    else:
                        values[r] = np.nan
                        bad |= NOT_PLAIN
                    r += 1
                    skeletons[o] = 1
                    o += 1
                    h = (h * _HASH_PRIME + 1) & _HASH_MASK
                else:
                    for x in range(i, j):
                        skeletons[o] = data[x]
                        o += 1
                        h = (h * _HASH_PRIME + int(data[x])) & _HASH_MASK
                i = j
                continue
            skeletons[o] = c
            o += 1
            h = (h * _HASH_PRIME + c) & _HASH_MASK
            i += 1
        skeleton_bounds[k + 1] = o
        run_first[k + 1] = r
        flags[k] = bad
        hashes[k] = h
        if bad:
            continue
        at = h & (size - 1)
        while True:  # open addressing: the skeleton's group, or a new one
            g = slots[at]
            if g == -1:
                slots[at] = n_groups
                reps[n_groups] = k
                group[k] = last = n_groups
                n_groups += 1
                break
            first = reps[g]
            if hashes[first] == h:
                f0 = skeleton_bounds[first]
                length = skeleton_bounds[first + 1] - f0
                same = length == o - skeleton_bounds[k]
                if same:
                    k0 = skeleton_bounds[k]
                    for x in range(length):
                        if skeletons[f0 + x] != skeletons[k0 + x]:
                            same = False
                            break
                if same:
                    group[k] = last = g
                break  # (another skeleton of the same hash: the parser reads the piece)
            at = (at + 1) & (size - 1)
    return (
        text_pieces,
        piece_start[:p],
        piece_end[:p],
        flags,
        name_start,
        name_end,
        group,
        reps[:n_groups],
        skeletons[:o],
        skeleton_bounds,
        run_first,
        run_start[:r],
        run_end[:r],
        values[:r],
        names[:n_names],
    )


CHUNK = 16384  # texts scanned at once (their arrays stay small: a million texts are not one array)
CHUNK_CHARS = 1 << 23  # characters scanned at once, about (a longer text is cut into parts)


def scan_batches(texts: Sequence[str]) -> Iterator[tuple[list[str], list[bool] | None]]:
    """The texts in scan batches, each with whether each part starts its text (None:
    each does). A batch ends at :data:`CHUNK` texts, or after the text that brings it
    to :data:`CHUNK_CHARS` characters. A longer text (a file of a million queries) is
    cut after a ``;`` into parts (:func:`text_parts`): a piece never runs across a
    ``;``, so the parts' pieces are the text's, and no copy or scan array is as long as
    the text. A list of short texts (the usual call) is cut into slices, O(batches)
    after one pass for the lengths; any other sequence is walked text by text."""
    if isinstance(texts, list):
        lengths = np.fromiter(map(len, texts), np.int64, len(texts))
        if not len(texts) or int(lengths.max()) <= CHUNK_CHARS:
            ends = np.cumsum(lengths)
            first = 0
            while first < len(texts):  # (the text that reaches CHUNK_CHARS is the batch's last)
                reached = int(np.searchsorted(ends, (ends[first - 1] if first else 0) + CHUNK_CHARS))
                stop = min(first + CHUNK, reached + 1, len(texts))
                yield texts[first:stop], None
                first = stop
            return
    batch: list[str] = []
    starts: list[bool] | None = None
    size = 0
    for text in texts:
        for k, part in enumerate((text,) if len(text) <= CHUNK_CHARS else text_parts(text)):
            if batch and (len(batch) >= CHUNK or size >= CHUNK_CHARS):
                yield batch, starts
                batch, starts, size = [], None, 0
            if k and starts is None:
                starts = [True] * len(batch)
            if starts is not None:
                starts.append(not k)
            batch.append(part)
            size += len(part)
    if batch:
        yield batch, starts


def text_parts(text: str) -> Iterator[str]:
    """The parts of a long text, each up to the first ``;`` at or past
    :data:`CHUNK_CHARS` characters in (the last, the rest; the text itself if short)."""
    start = 0
    while len(text) - start > CHUNK_CHARS:
        cut = text.find(";", start + CHUNK_CHARS - 1)
        if cut < 0:
            break
        yield text[start : cut + 1]
        start = cut + 1
    if start == 0 or start < len(text):
        yield text[start:] if start else text


class Scan:
    """The pieces, skeletons and constants of some texts (:func:`scan_bytes`).

    ``headers``: (the bytes before a header's name, the byte after it) of the known
    templates. A text that is not ASCII is scanned as an empty text (no pieces: the
    parser reads it)."""

    def __init__(self, texts: Sequence[str], headers: list[tuple[bytes, bytes]], scanner: ByteScanner) -> None:
        joined = "".join(texts)
        if not joined.isascii():
            texts = [text if text.isascii() else "" for text in texts]
            joined = "".join(texts)
        self.text = joined
        data = np.frombuffer(joined.encode("ascii"), np.uint8)
        text_ends = np.cumsum(np.fromiter(map(len, texts), np.int64, len(texts)))
        # (a header with a constant before its name is not cut: each piece is looked up alone)
        usable = [(before, after) for before, after in headers if MARK not in before and len(after) == 1]
        header_bytes = np.frombuffer(b"".join(before for before, _ in usable), np.uint8)
        header_ends = np.cumsum(np.array([len(before) for before, _ in usable], np.int64))
        header_after = np.frombuffer(b"".join(after for _, after in usable), np.uint8)
        (
            self.text_pieces,
            self.piece_start,
            self.piece_end,
            self.flags,
            self.name_start,
            self.name_end,
            self.group,
            self.reps,
            skeletons,
            bounds,
            self.run_first,
            self.run_start,
            self.run_end,
            self.values,
            names,
        ) = scanner(data, text_ends, EDGE_TABLE, BLANK_TABLE, header_bytes, header_ends, header_after)
        self._skeletons, self._bounds = skeletons, bounds
        named = names.tobytes().decode("ascii").split("\n")[:-1]
        self.names: list[str | None]
        if len(named) == len(self.flags):
            self.names = list(named)
        else:
            self.names = [None] * len(self.flags)
            for k, name in zip(np.flatnonzero(self.name_start >= 0).tolist(), named, strict=True):
                self.names[k] = name

    def __len__(self) -> int:
        """How many pieces."""
        return len(self.flags)

    def skeleton(self, g: int) -> bytes:
        """The skeleton of group ``g`` (made when asked for: a scan of texts whose
        names are not cut yet has as many as pieces)."""
        k = int(self.reps[g])
        return bytes(self._skeletons[self._bounds[k] : self._bounds[k + 1]])

    def piece(self, k: int) -> str:
        return self.text[int(self.piece_start[k]) : int(self.piece_end[k])]

    def runs(self, k: int) -> list[tuple[int, int]]:
        """Piece ``k``'s constants as (start, end) in the piece."""
        first, stop = int(self.run_first[k]), int(self.run_first[k + 1])
        return list(zip(self.run_start[first:stop].tolist(), self.run_end[first:stop].tolist(), strict=True))

    def piece_values(self, k: int) -> Any:
        return self.values[int(self.run_first[k]) : int(self.run_first[k + 1])]


__all__ = [
    "BLANK_TABLE",
    "CHUNK",
    "CHUNK_CHARS",
    "DIGITS",
    "EDGES",
    "EDGE_TABLE",
    "MARK",
    "NAME",
    "NOT_PLAIN",
    "NOT_SCANNABLE",
    "POW10",
    "ByteScanner",
    "Scan",
    "ScanArrays",
    "scan_batches",
    "scan_bytes",
    "text_parts",
]
