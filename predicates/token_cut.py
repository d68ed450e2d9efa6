"""The cut of a few texts, on the lexer's own matches: what :func:`~predicates.token_scan.cut_tokens` gives for many.

``register_query`` compiles one text at a time. The kernels' fixed cost (arrays in and
out, a dozen numpy calls) is then most of the time, and their plain-Python form (no
numba yet) walks bytes one by one; here the lexer's regular expression
(:func:`predicates.lexer.token_matches`, the definition of the tokens) reads the text,
and the cut walks its tokens with the same rules as ``cut_tokens``: pieces at ``;``,
a header's name, a **prefix** from SELECT to WHERE (with any WINDOW and MAXWINDOW),
comparisons between the AND tokens, and the same **skeletons** (per token its kind
byte and its text; a comparison's numbers as their kind byte alone), so that both
find the same templates in :class:`~predicates.token_cache.TokenCache`. A test holds
the two cuts equal on random texts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from predicates.lexer import token_matches
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
    """A text's tokens (kind, start, end) and its pieces."""

    kind: list[int]
    start: list[int]
    end: list[int]
    pieces: list[Piece]


def plain_value(text: str) -> float:
    """A number token's value when it is a plain decimal of at most 15 digits (then
    ``float`` is its exact decimal), else NaN; as the cut kernel reads it."""
    digits = text.replace(".", "", 1)
    if len(digits) > DIGITS or not digits.isdigit():  # (an exponent, a second dot)
        return math.nan
    return float(text)


def cut_text(text: str) -> Cut | None:
    """The pieces of an ASCII ``text``, or None where ``cut_tokens`` finds a doubt."""
    groups, start, end = token_matches(text)
    kind = [KIND_OF[g] for g in groups]
    # (upper case: the words the cut looks for, none longer than MAXWINDOW)
    words = [
        text[s:e].upper() if g == "ident" and e - s <= 9 else "" for g, s, e in zip(groups, start, end, strict=True)
    ]
    n = len(kind)
    pieces: list[Piece] = []
    i = 0
    while i < n:
        if kind[i] == PUNCT and text[start[i]] == ";":  # a stray ';': no query
            i += 1
            continue
        q = i
        while q < n and not (kind[q] == PUNCT and text[start[q]] == ";"):
            q += 1
        name = -1
        s = i
        if q - s >= 3 and words[s] == "QUERY" and words[s + 1] == "ID":
            s += 2
            if kind[s] == PUNCT and text[start[s]] == ":":
                s += 1
            if s < q and kind[s] != OP and kind[s] != PUNCT and kind[s] != ERROR:
                name = s
                s += 1
            else:
                return None
        if s >= q or words[s] != "SELECT":
            return None
        from_at = where_at = -1
        for x in range(s + 1, q):
            k = kind[x]
            if k == ERROR:
                return None
            if k == PUNCT:
                ch = text[start[x]]
                if ch in "[]:" or (ch in "()" and where_at < 0):
                    return None
            elif k == IDENT:
                word = words[x]
                if word == "FROM" and from_at < 0 and where_at < 0:
                    from_at = x
                elif word == "WHERE" and from_at >= 0 and where_at < 0:
                    where_at = x
                elif word in ("WINDOW", "MAXWINDOW") and from_at >= 0 and where_at < 0:
                    pass
                elif word in _DOUBT or word in ("QUERY", "SELECT", "FROM", "WHERE", "WINDOW", "MAXWINDOW"):
                    return None
        if from_at < 0 or where_at < 0 or from_at + 1 == where_at:
            return None
        prefix = "".join([_KIND_CHAR[kind[x]] + text[start[x] : end[x]] for x in range(s, where_at)]).encode("ascii")
        comparisons: list[tuple[bytes, int, int, int]] = []
        numbers: list[float] = []
        x = where_at + 1
        while x <= q:
            y = x
            while y < q and words[y] != "AND":
                y += 1
            if y == x:
                return None  # an empty comparison (WHERE AND, a trailing AND)
            parts = []
            first_number = len(numbers)
            for z in range(x, y):
                if kind[z] == NUMBER:
                    parts.append(_KIND_CHAR[NUMBER])
                    numbers.append(plain_value(text[start[z] : end[z]]))
                else:
                    parts.append(_KIND_CHAR[kind[z]] + text[start[z] : end[z]])
            comparisons.append(("".join(parts).encode("ascii"), x, y, first_number))
            x = y + 1
        pieces.append(Piece(name, s, where_at, prefix, comparisons, numbers))
        i = q + 1 if q < n else q
    return Cut(kind, start, end, pieces)


__all__ = ["KIND_OF", "Cut", "Piece", "cut_text", "plain_value"]
