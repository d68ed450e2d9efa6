"""Cutting query texts into clauses and comparisons, without parsing them.

The fast compiler (:mod:`predicates.templates`) only needs to know where a text's
clauses and comparisons are, and which of its characters are numbers; everything else
it takes from patterns it compiled once. Two cutters serve it:

* :func:`split_skeleton` reads the clauses off the text's **skeleton**, the pieces
  left between its numbers by one regular-expression split, with string methods
  only (the common case: no parentheses, strings or comments);
* :func:`split_scanned` scans tokens, aware of strings and parentheses, for texts
  whose conditions are still a flat AND.

Both give up (None) on anything unusual; the full front end then compiles the text
and reports any error with its position. :func:`split_query_texts` cuts a query file
into one text per query, as the parser would.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise

from predicates.lexer import BLANK, NUMBER_LITERAL, WORD

# a number not inside a word; the lookahead first lets the scanner skip ahead to the
# next digit or dot instead of testing the lookbehind at every character
NUMBER_SPLIT = re.compile(rf"(?=[0-9.])(?<![\w.])({NUMBER_LITERAL})")
# a header as the lexer reads it: its blanks (not Python's wider whitespace), and a name
# that is one token (a word, a number or a string), not the start of a longer one
HEADER = re.compile(
    rf"{BLANK}*(?:--[^\n]*\n{BLANK}*)*query{BLANK}+id{BLANK}*:?{BLANK}*"
    rf"('(?:[^'\n]|'')*'|{WORD}|{NUMBER_LITERAL})(?![A-Za-z_0-9.'])",
    re.IGNORECASE,
)
_QUOTED_OR_COMMENT = re.compile(r"'(?:[^'\n]|'')*'|\"(?:[^\"\n]|\"\")*\"|--[^\n]*")
# the lookahead names every first character the alternatives can start with: the
# scanner skips to the next such character instead of trying them all at every one
_SCAN = re.compile(
    r"(?=['()\-;safmnow])"
    rf"(?:'(?:[^'\n]|'')*'|--[^\n]*|[()]|;|\b(select|from|window|maxwindow|max{BLANK}+window|where|and|or|not)\b)",
    re.IGNORECASE,
)


def lexer_blanks_only(text: str) -> bool:
    """Whether every character of ``text`` outside strings and comments that is not
    printable is one of the lexer's blanks (space, tab, CR, LF, form feed). The cutters
    below use Python's string methods, which take more for blanks (a no-break space,
    a vertical tab, U+2028) and would read past characters the lexer rejects: a text
    that fails this goes to the full front end, which says where the character is."""
    if "\t" in text or "\r" in text or "\f" in text:
        text = text.replace("\t", " ").replace("\r", " ").replace("\f", " ")
    if text.replace("\n", " ").isprintable():
        return True
    return _QUOTED_OR_COMMENT.sub("", text).replace("\n", " ").isprintable()


def split_header(text: str) -> tuple[str | None, str]:
    """(the ``Query ID:`` header's name or None, the text after it)."""
    m = HEADER.match(text)
    if m is None:
        return None, text
    raw = m.group(1)
    return (raw[1:-1].replace("''", "'") if raw.startswith("'") else raw), text[m.end() :]


def split_numbers(text: str) -> tuple[str | None, tuple[str, ...], tuple[str, ...]]:
    """(header name, pieces, numbers) of a query text."""
    name, body = split_header(text)
    parts = NUMBER_SPLIT.split(body)
    return name, tuple(parts[0::2]), tuple(parts[1::2])


@dataclass
class Clauses:
    select: str
    from_: str
    maxwindow: str | None
    comparisons: list[str]


@dataclass
class Shape:
    """A plain query text's clauses, read off its skeleton."""

    select: str
    from_: str
    unit: str | None  # MAXWINDOW's unit ("" for bare seconds); None without MAXWINDOW
    window_index: int | None  # which number is MAXWINDOW's
    # per WINDOW / WHERE clause: its first number, and its comparisons as patterns
    # (the comparison's text with a hole for each number)
    conditions: list[tuple[int, list[str]]]
    select_has_numbers: bool


HOLE = "\x00"  # where a number was taken out of the skeleton
_GLUED = re.compile(r"\x00[\w.]")
_CLAUSE_KEYWORDS = (" from ", " window ", " maxwindow ", " where ")


def split_skeleton(skeleton: tuple[str, ...], numbers: Sequence[str]) -> Shape | None:
    """The clauses of a text whose conditions are flat ANDs of comparisons, from its
    skeleton (pieces between numbers), or None (parentheses, strings, comments, OR,
    NOT, or anything unusual: the caller tries a slower path). Whitespace is
    normalized, so it is part of no pattern."""
    flat = HOLE.join(skeleton)
    if "(" in flat or "'" in flat or "--" in flat or '"' in flat or _GLUED.search(flat) is not None:
        return None  # (a number glued to a word: the lexer decides what that is)
    norm = flat if "  " not in flat and "\n" not in flat and "\t" not in flat else " ".join(flat.split())
    norm = norm.strip()
    if norm.endswith(";"):
        norm = norm[:-1].rstrip()
    lower = norm.lower()
    if len(lower) != len(norm) or not lower.startswith("select ") or ";" in norm:
        return None
    if " or " in lower or " not " in lower:
        return None
    i = lower.find(" max window ")
    if i >= 0:
        norm = norm[:i] + " MAXWINDOW " + norm[i + 12 :]
        lower = norm.lower()
    marks = []
    for keyword in _CLAUSE_KEYWORDS:
        i = lower.find(keyword)
        if i >= 0:
            if lower.find(keyword, i + 1) >= 0:
                return None
            marks.append((i, keyword))
    marks.sort()
    if not marks or marks[0][1] != " from ":
        return None
    select = norm[7 : marks[0][0]]
    select_has_numbers = HOLE in select
    if select_has_numbers:  # numbers in SELECT are part of the context's text
        parts = select.split(HOLE)
        select = parts[0] + "".join(n + p for n, p in zip(numbers, parts[1:], strict=False))
    from_ = ""
    unit = None
    window_index = None
    conditions: list[tuple[int, list[str]]] = []
    for (start, keyword), (stop, _) in pairwise([*marks, (len(norm), "")]):
        begin = start + len(keyword)
        text = norm[begin:stop]
        first = norm.count(HOLE, 0, begin)
        if keyword == " from ":
            if HOLE in text:
                return None
            from_ = text
        elif keyword == " maxwindow ":
            if not text.startswith(HOLE) or text.count(HOLE) != 1:
                return None
            unit = text[1:].strip()
            window_index = first
        else:
            ands = lower.count(" and ", begin, stop)
            texts = text.split(" AND ")  # AND is usually written in one case
            if len(texts) != ands + 1:
                lows = lower[begin:stop].split(" and ")
                ends = list(accumulate((len(low) + 5 for low in lows), initial=0))
                texts = [text[a : b - 5] for a, b in pairwise(ends)]
            if "" in texts:
                return None
            conditions.append((first, texts))
    return Shape(select.strip(), from_.strip(), unit, window_index, conditions, select_has_numbers)


def split_scanned(body: str) -> Clauses | None:
    """Clauses found by scanning tokens (strings, parentheses and comments aware)."""
    clauses: dict[str, str] = {}
    cuts: list[tuple[str, int, int]] = []
    depth = 0
    and_cuts: list[tuple[int, int]] = []
    for m in _SCAN.finditer(body):
        token = m.group(0)
        first = token[0]
        if first == "'" or token.startswith("--"):
            if token.startswith("--"):
                return None  # comments: leave them to the full front end
            continue
        if token == "(":
            depth += 1
            continue
        if token == ")":
            depth -= 1
            continue
        if token == ";":
            if body[m.end() :].strip():
                return None
            continue
        word = m.group(1).lower()
        if word[0] == "m" and len(word) > 9:
            word = "maxwindow"
        if depth:
            if word in ("and", "or", "not", "select", "from", "where", "window", "maxwindow"):
                return None
            continue
        if word in ("or", "not"):
            return None
        if word == "and":
            and_cuts.append((m.start(), m.end()))
            continue
        if word in clauses or any(c[0] == word for c in cuts):
            return None
        cuts.append((word, m.start(), m.end()))
    if depth or not cuts or cuts[0][0] != "select" or body[: cuts[0][1]].strip():
        return None
    for (word, _, end), nxt in zip(cuts, [*cuts[1:], (None, len(body), len(body))], strict=True):
        clauses[word] = body[end : nxt[1]]
    if "from" not in clauses or len(cuts) != len(clauses):
        return None
    comparisons: list[str] = []
    for word in ("window", "where"):
        if word not in clauses:
            continue
        start = next(end for w, _, end in cuts if w == word)
        stop = start + len(clauses[word])
        bounds = [start, *[x for a, b in and_cuts if start <= a < stop for x in (a, b)], stop]
        for i in range(0, len(bounds), 2):
            piece = body[bounds[i] : bounds[i + 1]].strip().rstrip(";").strip()
            if not piece:
                return None
            comparisons.append(piece)
    window_text = clauses.get("maxwindow")
    return Clauses(
        clauses["select"].strip(),
        clauses["from"].strip().rstrip(";").strip(),
        window_text.strip().rstrip(";").strip() if window_text is not None else None,
        comparisons,
    )


# (the lexer's blanks, not \s: a piece of a no-break space is not blank to the lexer)
_BOUNDARIES = re.compile(rf"'(?:[^'\n]|'')*'|--[^\n]*|;|\bquery{BLANK}+id\b|\bselect\b", re.IGNORECASE)
_BLANK = re.compile(rf"(?:{BLANK}|;|--[^\n]*)*")


def split_query_texts(text: str) -> list[str]:
    """A query file cut into one text per query, the way the parser cuts it (a query
    ends at ``;``, at the next ``Query ID`` header, or at the next SELECT), without
    parsing it. Pieces holding only blanks, comments and ``;`` are dropped."""
    lower = text.lower()
    if lower.count("select") == 1 and lower.count("query") <= 1 and ";" not in text.rstrip().rstrip(";"):
        return [text] if _BLANK.fullmatch(text) is None else []
    pieces = _cut_at_semicolons(text, lower)
    if pieces is None:
        pieces = _cut_by_scanning(text)
    return [p for p in pieces if _BLANK.fullmatch(p) is None]


def _cut_at_semicolons(text: str, lower: str) -> list[str] | None:
    """The cut of a file whose queries all end with ``;`` (the usual query file), by
    splitting at them; None when something else could end a query there: a string or a
    comment anywhere, or a piece with a second SELECT or header, or its header after
    its SELECT (counted as substrings: a word in a name counts too, and then the
    scan decides)."""
    if "'" in text or "--" in text or not text.isascii():  # (ASCII: lower keeps positions)
        return None
    parts = text.split(";")
    for low in lower.split(";"):
        if low.count("select") > 1 or low.count("query") > 1:
            return None
        header = low.find("query")
        if header >= 0 and low.find("select") >= 0 and header > low.find("select"):
            return None
    return [part + ";" for part in parts[:-1]] + [parts[-1]]


def _cut_by_scanning(text: str) -> list[str]:
    """The cut at every ``;``, ``Query ID`` header and SELECT that ends a query,
    outside strings and comments."""
    pieces: list[str] = []
    start = 0
    seen_select = False
    seen_header = False
    for m in _BOUNDARIES.finditer(text):
        word = m.group(0)
        first = word[0]
        if first in "'-":
            continue
        if word == ";":
            pieces.append(text[start : m.end()])
            start = m.end()
            seen_select = seen_header = False
            continue
        if first in "qQ":
            if seen_select or seen_header:
                pieces.append(text[start : m.start()])
                start = m.start()
                seen_select = False
            seen_header = True
        else:
            if seen_select:
                pieces.append(text[start : m.start()])
                start = m.start()
                seen_header = False
            seen_select = True
    pieces.append(text[start:])
    return pieces
