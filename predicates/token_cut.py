"""The cut of a few texts, on the lexer's own matches: what :func:`~predicates.token_scan.cut_tokens` gives for many.

``register_query`` compiles one text at a time. Once numba is loaded, one kernel call
reads it (:func:`~predicates.token_scan.read_one`); before, loading numba would cost
more than the text and the kernels' plain-Python form walks bytes one by one, so here
the lexer's regular expression reads the
text run by run (:func:`predicates.lexer.token_runs`: the tokens up to each number,
whose kinds, words and skeleton parts are cached by the run's text), and the cut walks
its tokens with the same rules as ``cut_tokens``: pieces at ``;``,
a header's name, a **prefix** from SELECT to WHERE (with any WINDOW and MAXWINDOW),
comparisons between the AND tokens, and the same **skeletons** (per token its kind
byte and its text; a comparison's numbers as their kind byte alone), so that both
find the same templates in :class:`~predicates.token_cache.TokenCache`. A test holds
the two cuts equal on random texts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain, pairwise
from typing import Any, cast

import numpy as np

from predicates.lexer import matches_one_by_one, run_matches, token_runs
from predicates.token_scan import DIGITS, ERROR, IDENT, NUMBER, OP, PUNCT, QUOTED, STRING

# the lexer's groups as the kernels' kinds
KIND_OF = {"ident": IDENT, "quoted_ident": QUOTED, "number": NUMBER, "string": STRING, "op": OP, "thesis_op": OP,
           "punct": PUNCT, "error": ERROR}  # fmt: skip
_KIND_CHAR = {kind: chr(kind) for kind in KIND_OF.values()}  # (a skeleton's kind byte)
# the words that end a piece's reading (predicates.token_scan._DOUBT_WORDS), upper case
_DOUBT = frozenset(
    {"OR", "NOT", "MAX", "GROUP", "HAVING", "CREATE", "VIEW", "TABLE", "BETWEEN", "IN", "IS", "LIKE", "CASE", "WHEN",
     "ISTREAM", "DSTREAM", "RSTREAM"}
)  # fmt: skip


@dataclass(slots=True)
class Piece:
    """One query of a text as the cut reads it (token numbers index the text's tokens)."""

    name_token: int  # -1: no header
    select_token: int
    where_token: int
    prefix: bytes  # the prefix's skeleton
    comparisons: list[tuple[bytes, int, int, int]]  # (skeleton, first token, end token, first number)
    numbers: list[float]  # every comparison's numbers in order (NaN: not a plain decimal)


@dataclass(slots=True)
class Cut:
    """A text's runs (:func:`predicates.lexer.token_runs`) and its pieces; its tokens are
    made from the runs where they are asked for (learning a template, a header's name).
    ``unkept``: the runs read without the runs' cache (a header's line), by number."""

    runs: list[tuple[str, str]]
    pieces: list[Piece]
    unkept: dict[int, _RunRead]

    def _read(self, r: int) -> _RunRead:
        read = self.unkept.get(r)
        if read is None:
            run, number = self.runs[r]
            read = _run_tokens(run, number != "")
        return read

    def tokens(self) -> tuple[list[int], list[int], list[int]]:
        """The text's tokens: kinds, starts and ends."""
        kind: list[int] = []
        start: list[int] = []
        end: list[int] = []
        pos = 0
        for r, (run, number) in enumerate(self.runs):
            run_kind, run_start, run_end = self._read(r)[:3]
            kind += run_kind
            start += map(pos.__add__, run_start)
            end += map(pos.__add__, run_end)
            pos += len(run)
            if number:  # (the run's number placeholder: this number's bounds)
                pos += len(number)
                end[-1] = pos
        return kind, start, end

    def name(self, text: str, i: int) -> str:
        """The header name of token ``i`` of ``text`` (this cut's), as the parser reads it."""
        kind, start, end = self.token(i)
        return header_name(kind, text[start:end])

    def token(self, i: int) -> tuple[int, int, int]:
        """Token ``i``'s kind, start and end (the runs before it read, not the rest)."""
        count = pos = 0
        for r, (run, number) in enumerate(self.runs):
            run_kind, run_start, run_end = self._read(r)[:3]
            if i < count + len(run_kind):
                j = i - count
                if number and j == len(run_kind) - 1:
                    return NUMBER, pos + len(run), pos + len(run) + len(number)
                return run_kind[j], pos + run_start[j], pos + run_end[j]
            count += len(run_kind)
            pos += len(run) + len(number)
        raise IndexError(i)


def plain_value(text: str) -> float:
    """A number token's value when it is a plain decimal of at most 15 digits (then
    ``float`` is its exact decimal), else NaN; as the cut kernel reads it."""
    digits = text.replace(".", "", 1)
    if len(digits) > DIGITS or not digits.isdigit():  # (an exponent, a second dot)
        return math.nan
    return float(text)


def shape_of(runs: list[tuple[str, str]]) -> tuple[tuple[object, ...], tuple[int, str] | None, dict[int, _RunRead]]:
    """What a text's cut follows from but its numbers and its header's name, as a key
    (its runs' texts, which of them end with a number, and the tokens of a header's
    line but its last, with that one's kind); that last token's kind and text (the
    header's name where the cut reads one there; None without a header's line); and
    the header's line as read (for :func:`cut_text`). Texts of one shape cut alike: the
    same token kinds, words and skeleton parts at the same places, but for the numbers'
    and the name's texts, which the cut does not look at (but a prefix's numbers, which
    the caller compares)."""
    first, number = runs[0]
    header: tuple[object, ...] = ()
    name = None
    unkept: dict[int, _RunRead] = {}
    if not number and first[:5].upper() == "QUERY" and first not in _RUNS[False]:
        read = unkept[0] = _run_tokens(first, False, keep=False)
        kinds, starts, ends, _, parts = read[:5]
        if kinds:
            header = (*parts[:-1], kinds[-1])
            name = (kinds[-1], first[starts[-1] : ends[-1]])
            runs = runs[1:]
    return (header, tuple([run for run, _ in runs]), tuple([number != "" for _, number in runs])), name, unkept


def cut_text(
    text: str, runs: list[tuple[str, str]] | None = None, unkept: dict[int, _RunRead] | None = None
) -> Cut | None:
    """The pieces of an ASCII ``text``, or None where ``cut_tokens`` finds a doubt; its
    runs ``runs`` if given (``unkept``: those of them read already, by number, as
    :func:`shape_of` gives them), else the lexer's (:func:`predicates.lexer.token_runs`)."""
    if runs is None:
        runs = token_runs(text)
    if runs is None:
        return None  # (a character that starts no token: a doubt)
    # per run its tokens as the cut reads them, from the runs' cache (a header's line,
    # which never recurs, read without it)
    with_number, without = _RUNS[True], _RUNS[False]
    found = [(with_number if number else without).get(run) for run, number in runs]
    if unkept:
        for r, header in unkept.items():
            found[r] = header
    else:
        unkept = {}
    if None in found:
        for r, got in enumerate(found):
            if got is None:
                run, number = runs[r]
                keep = number != "" or run[:5].upper() != "QUERY"
                got = found[r] = _run_tokens(run, number != "", keep)
                if not keep:
                    unkept[r] = got
    read = cast(list[_RunRead], found)
    # the runs after the last that holds a word or mark other than a comparison's (the
    # comparisons of a text's last query, the most of it) are read a run at a time
    head = len(read)
    tail: list[_RunRead] = []
    tail_tokens = 0
    if head > _FEWEST_TAIL_RUNS and read[-_FEWEST_TAIL_RUNS][5] is not None:  # (a few cost more to join than to walk)
        while head and read[head - 1][5] is not None:
            head -= 1
        tail = read[head:]
        tail_tokens = sum([r[8] for r in tail])
        if tail_tokens:
            read = read[:head]
        else:
            head, tail = len(read), []
    # per token of the head runs its kind, its word (upper case: the words the cut looks
    # for, none longer than MAXWINDOW) and its part of a skeleton (kind byte and text;
    # a number's: its kind byte alone)
    kind = list(chain.from_iterable([r[0] for r in read]))
    words = list(chain.from_iterable([r[3] for r in read]))
    parts = list(chain.from_iterable([r[4] for r in read]))
    number_texts = [number for _, number in runs if number]
    values = plain_values(number_texts)
    number_part = _KIND_CHAR[NUMBER]
    n = len(kind)
    semicolons = [x for x in range(n) if parts[x] == _SEMICOLON] if ";" in text else []
    pieces: list[Piece] = []
    open_end = False  # whether the last piece reaches the head's end (its last comparison goes on in the tail)
    i = 0
    while i < n:
        if parts[i] == _SEMICOLON:  # a stray ';': no query
            i += 1
            continue
        q = next((x for x in semicolons if x > i), n)
        name = -1
        s = i
        if q - s >= 3 and words[s] == "QUERY" and words[s + 1] == "ID":
            s += 2
            if parts[s] == _COLON:
                s += 1
            if s < q and kind[s] != OP and kind[s] != PUNCT:
                name = s
                s += 1
            else:
                return None
        if s >= q or words[s] != "SELECT":
            return None
        where_at = _where_token(words, parts, s, q)
        if where_at < 0:
            return None
        # (the numbers before the WHERE: a prefix's are part of its skeleton, as text)
        k = parts[:where_at].count(number_part)
        prefix_parts = parts[s:where_at]
        if number_part in prefix_parts:
            k_prefix = k - prefix_parts.count(number_part)
            for x, part in enumerate(prefix_parts):
                if part == number_part:
                    prefix_parts[x] = number_part + number_texts[k_prefix]
                    k_prefix += 1
        prefix = "".join(prefix_parts).encode("ascii")
        comparisons: list[tuple[bytes, int, int, int]] = []
        numbers: list[float] = []
        open_end = q == n and tail_tokens > 0
        x = where_at + 1
        while x <= q:
            try:
                y = words.index("AND", x, q)
            except ValueError:
                y = q
            if y == x and not (y == n and open_end):
                return None  # an empty comparison (WHERE AND, a trailing AND)
            own = parts[x:y]
            comparisons.append(("".join(own).encode("ascii"), x, y, len(numbers)))
            if number_part in own:
                count = own.count(number_part)
                numbers += values[k : k + count]
                k += count
            x = y + 1
        pieces.append(Piece(name, s, where_at, prefix, comparisons, numbers))
        i = q + 1 if q < n else q
    if tail:
        if not open_end:
            return None  # (tokens after the last ';' that begin no SELECT)
        head_numbers = sum([1 for _, number in runs[:head] if number])
        _cut_tail(pieces[-1], tail, n, values[head_numbers:])
        if not pieces[-1].comparisons:
            return None
    return Cut(runs, pieces, unkept)


def _cut_tail(piece: Piece, tail: list[_RunRead], token: int, tail_values: list[float]) -> None:
    """The comparisons of ``piece`` that go on in the runs ``tail`` (which hold no word
    or mark but a comparison's and AND; their first token is number ``token``), joined
    from each run's parts between its AND words; none where one is empty."""
    comparisons = piece.comparisons
    skeleton, first, _, first_number = comparisons.pop()
    numbers = len(piece.numbers)
    for read in tail:
        segments, segment_first, and_at, count = cast(list[bytes], read[5]), read[6], read[7], read[8]
        skeleton += segments[0]
        for j in range(1, len(segments)):
            end = token + and_at[j - 1]
            if end == first:
                comparisons.clear()
                return
            comparisons.append((skeleton, first, end, first_number))
            skeleton, first, first_number = segments[j], token + segment_first[j], numbers
        token += count
        numbers += read[9]
    if token == first:
        comparisons.clear()
        return
    comparisons.append((skeleton, first, token, first_number))
    piece.numbers += tail_values


def plain_values(numbers: list[str]) -> list[float]:
    """:func:`plain_value` of each number; at once where none has more than 15
    characters or an exponent (then each is a plain decimal of at most 15 digits)."""
    if not numbers:
        return []
    joined = "".join(numbers)
    if max(map(len, numbers)) <= DIGITS and "e" not in joined and "E" not in joined:
        return list(map(float, numbers))
    return list(map(plain_value, numbers))


# A run's tokens as the cut reads them: kinds, starts and ends from the run's start (a
# number's end is its start: the caller sets it), words and skeleton parts; then, for a
# run of no word or mark but a comparison's and AND, its parts joined between its AND
# words (None for another run), each such segment's first token and the AND tokens
# (from the run's start), its count of tokens and whether it ends with a number.
_RunRead = tuple[
    list[int], list[int], list[int], list[str], list[str], list[bytes] | None, list[int], list[int], int, bool
]
# by the run's text, for runs with a number and without
_RUNS: dict[bool, dict[str, _RunRead]] = {True: {}, False: {}}
_RUNS_KEPT = 4096
_FEWEST_TAIL_RUNS = 8  # runs of comparisons read a run at a time (a few cost more to join than to walk)


def _run_tokens(run: str, number: bool, keep: bool = True) -> _RunRead:
    """A run's tokens (:func:`predicates.lexer.run_matches`) as the cut reads them, with
    its number's last if ``number``; cached by the run's text (it holds no number)
    where ``keep``. The lists are shared: not to be changed."""
    runs = _RUNS[number]
    cached = runs.get(run)
    if cached is not None:
        return cached
    groups, starts, ends = run_matches(run) if keep else matches_one_by_one(run)
    kinds = [KIND_OF[g] for g in groups]
    words = [
        run[s:e].upper() if g == "ident" and e - s <= 9 else "" for g, s, e in zip(groups, starts, ends, strict=True)
    ]
    parts = [_KIND_CHAR[k] + run[s:e] for k, s, e in zip(kinds, starts, ends, strict=True)]
    if number:  # (the number's start is the run's end; its end is set per text)
        n = len(run)
        kinds, starts, ends = [*kinds, NUMBER], [*starts, n], [*ends, n]
        words, parts = [*words, ""], [*parts, _KIND_CHAR[NUMBER]]
    segments: list[bytes] | None = None
    segment_first: list[int] = []
    and_at: list[int] = []
    if _NOT_IN_COMPARISONS.isdisjoint(words) and _MARKS.isdisjoint(parts):
        and_at = [x for x, word in enumerate(words) if word == "AND"]
        bounds = [-1, *and_at, len(parts)]
        segment_first = [a + 1 for a in bounds[:-1]]
        segments = ["".join(parts[a + 1 : b]).encode("ascii") for a, b in pairwise(bounds)]
    cached = (kinds, starts, ends, words, parts, segments, segment_first, and_at, len(kinds), number)
    if keep:
        if len(runs) >= _RUNS_KEPT:
            runs.clear()
        runs[run] = cached
    return cached


_SEMICOLON = _KIND_CHAR[PUNCT] + ";"
_COLON = _KIND_CHAR[PUNCT] + ":"
_NOT_AFTER_SELECT = _DOUBT | {"QUERY", "SELECT"}
_BRACKETS = {_KIND_CHAR[PUNCT] + c for c in "[]:"}
_PARENTHESES = {_KIND_CHAR[PUNCT] + c for c in "()"}
# what a run of a query's comparisons holds none of (a word that ends a piece's reading
# or begins a clause, a bracket, a colon or a ';')
_NOT_IN_COMPARISONS = _NOT_AFTER_SELECT | {"FROM", "WHERE", "WINDOW", "MAXWINDOW"}
_MARKS = _BRACKETS | {_SEMICOLON}


def _where_token(words: list[str], parts: list[str], s: int, q: int) -> int:
    """The WHERE token of the piece of tokens ``s:q`` (its SELECT at ``s``), or -1 for
    a doubt: one FROM, then one WHERE with tokens between them and any WINDOW or
    MAXWINDOW between them too, no other word of a doubt, no ``[``, ``]`` or ``:``, and
    no parenthesis before the WHERE."""
    after = words[s + 1 : q]
    if after.count("FROM") != 1 or after.count("WHERE") != 1 or not _NOT_AFTER_SELECT.isdisjoint(after):
        return -1
    from_at = s + 1 + after.index("FROM")
    where_at = s + 1 + after.index("WHERE")
    if where_at <= from_at + 1:
        return -1
    for word in ("WINDOW", "MAXWINDOW"):
        if word in after and not all(from_at < x < where_at for x in range(s + 1, q) if words[x] == word):
            return -1
    if not _BRACKETS.isdisjoint(parts[s + 1 : q]) or not _PARENTHESES.isdisjoint(parts[s + 1 : where_at]):
        return -1
    return where_at


class Tokens:
    """The token arrays of one batch, read back as text where learning needs it."""

    __slots__ = ("end", "kind", "source", "start")

    def __init__(self, source: str, kind: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        self.source = source
        self.kind = kind
        self.start = start
        self.end = end

    def text(self, i: int) -> str:
        return self.source[int(self.start[i]) : int(self.end[i])]

    def name(self, i: int) -> str:
        """The header name of token ``i``, as the parser reads it."""
        return header_name(int(self.kind[i]), self.text(i))

    def joined(self, first: int, last: int) -> str:
        """Tokens ``first:last`` as text: a blank where the text had blanks or a comment
        between two of them, none where it had none (``E.a3``, not ``E . a3``)."""
        parts = []
        for i in range(first, last):
            if i > first and self.start[i] > self.end[i - 1]:
                parts.append(" ")
            parts.append(self.text(i))
        return "".join(parts)


class CutTokens(Tokens):
    """The tokens of one text's cut, made from its runs the first time they are read
    (a text whose templates are all known reads none)."""

    __slots__ = ("cut",)

    def __init__(self, source: str, cut: Cut) -> None:  # (kind, start and end: unset until read)
        self.source = source
        self.cut = cut

    def __getattr__(self, name: str) -> Any:
        if name not in ("kind", "start", "end"):
            raise AttributeError(name)
        self.kind, self.start, self.end = self.cut.tokens()  # type: ignore[assignment]
        return getattr(self, name)


def header_name(kind: int, text: str) -> str:
    """A header's name token of kind ``kind`` and text ``text``, as the parser reads it."""
    if kind == STRING:
        return text[1:-1].replace("''", "'")
    if kind == QUOTED:
        return text[1:-1].replace('""', '"')
    return text


__all__ = [
    "KIND_OF",
    "Cut",
    "CutTokens",
    "Piece",
    "Tokens",
    "cut_text",
    "header_name",
    "plain_value",
    "plain_values",
    "shape_of",
]
