"""Tokens of the query language and the DDL.

One compiled regular expression does the scanning. Keywords are not special here: they
are identifiers that the parser recognises case-insensitively, so a keyword can still be
a column name where the grammar allows it. The thesis operator spellings ``lt=`` and
``gt=`` are joined into one token only when the ``=`` follows with no space, so
``lt =`` stays two tokens and is rejected by the parser with a clear message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from predicates.errors import Source, Span


class T(Enum):
    """Token kinds."""

    IDENT = "identifier"
    NUMBER = "number"
    STRING = "string"
    OP = "operator"
    PUNCT = "punctuation"
    ERROR = "error"
    EOF = "end of input"


@dataclass(frozen=True, slots=True)
class Token:
    kind: T
    text: str
    start: int
    end: int

    @property
    def span(self) -> Span:
        return Span(self.start, self.end)

    @property
    def upper(self) -> str:
        return self.text.upper()

    def describe(self) -> str:
        if self.kind is T.EOF:
            return "end of input"
        if self.kind is T.STRING:
            return f"string {self.text}"
        return f"'{self.text}'"


# what the lexer reads as a blank, a number and a word
BLANK_CHARS = " \t\r\n\f"
BLANK = r"[ \t\r\n\f]"
NUMBER_LITERAL = r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
WORD = r"[A-Za-z_][A-Za-z_0-9]*"

# the tokens, in the order the lexer tries them (the first that matches is the token)
_ALTERNATIVES = (
    ("ws", f"{BLANK}+"),
    ("comment", r"--[^\n]*"),
    ("number", NUMBER_LITERAL),
    ("thesis_op", r"(?i:lt=|gt=)(?![=<>])"),
    ("ident", WORD),
    ("quoted_ident", r'"(?:[^"\n]|"")*"'),
    ("string", r"'(?:[^'\n]|'')*'"),
    ("op", r"<=|>=|<>|!=|==|<|>|=|\+|-|\*|/"),
    ("punct", r"[(),.;:\[\]]"),
)
_TOKEN_RE = re.compile("|".join(f"(?P<{name}>{pattern})" for name, pattern in _ALTERNATIVES))
# The same alternatives as one **run**: the tokens up to the next number or the next
# blank that holds a line break (blanks and comments among them), then that number.
# ``(?![0-9]|\.[0-9])`` first: where a number starts (a digit, or a dot and a digit:
# where NUMBER_LITERAL matches), the lexer takes the number (no blank or comment
# starts with a digit or a dot); ``(?>...)`` and ``*+``: the first alternative that
# matches is kept and never given back, as the lexer keeps it. In the run a blank is
# one without a line break (taken whole, ``++``); a blank with one ends the run, whole.
# ``findall`` then reads a text in C, a match per number or line, and the runs recur
# (" AND E.a5 <= ", a header's line apart from the SELECT line after it).
_OTHERS = "|".join(pattern for name, pattern in _ALTERNATIVES if name not in ("ws", "number"))
_RUN_KEPT = f"((?:(?![0-9]|\\.[0-9])(?>[ \\t\\r\\f]++(?!\\n)|{_OTHERS}))*+{BLANK}*+)({NUMBER_LITERAL})?"
# The same runs without atomic groups or possessive repeats: some Python 3.11 releases
# (3.11.2, Debian 12's) mishandle the lookahead inside the possessive repeat and cut
# "52" into "5" and "2". Nothing after the repeat can fail, so a greedy repeat is never
# given back here either, and a blank that must not precede a line break is one
# followed by no blank and no line break. About a quarter slower: taken only where the
# interpreter fails the check below (tests/unit/test_lexer_runs.py holds the two equal).
_RUN_PLAIN = f"((?:(?![0-9]|\\.[0-9])(?:[ \\t\\r\\f]+(?![ \\t\\r\\f\\n])|{_OTHERS}))*{BLANK}*)({NUMBER_LITERAL})?"


def _run_expression() -> re.Pattern[str]:
    kept = re.compile(_RUN_KEPT)
    if kept.findall("a = 52  \n.5") == [("a = ", "52"), ("  \n", ".5"), ("", "")]:
        return kept
    return re.compile(_RUN_PLAIN)


_RUN_RE = _run_expression()
# a run's tokens (groups, starts and ends from the run's start), by its text: query
# texts written by a program repeat their runs (" AND E.a5 <= ") thousands of times
_RUNS: dict[str, tuple[list[str], list[int], list[int]]] = {}
_RUNS_KEPT = 4096


def token_runs(text: str) -> list[tuple[str, str]] | None:
    """``text`` as its runs (see ``_RUN_RE``): per run its text before a number and the
    number ('' for none); None where they do not tile it (a character that starts no
    token: :func:`token_matches` places the error)."""
    runs: list[tuple[str, str]] = _RUN_RE.findall(text)
    if sum([len(r) + len(n) for r, n in runs]) != len(text):
        return None
    return runs


def run_matches(run: str) -> tuple[list[str], list[int], list[int]]:
    """:func:`token_matches` of a run of :func:`token_runs`, cached by its text: a run's
    tokens depend on its text alone (its last token is a whole blank, or is followed by
    a number's digit or dot or by the end, and no token but an identifier, a ``.`` or a
    comment would reach into a digit or a dot, and each of those would have taken the
    number into itself, ending no run there). The lists are shared: not to be changed."""
    cached = _RUNS.get(run)
    if cached is None:
        cached = matches_one_by_one(run)
        if len(_RUNS) >= _RUNS_KEPT:
            _RUNS.clear()
        _RUNS[run] = cached
    return cached


def token_matches(text: str) -> tuple[list[str], list[int], list[int]]:
    """The lexer's reading of ``text`` as three lists: per token its group in the
    expression (``number``, ``ident``, ``quoted_ident``, ``string``, ``op``,
    ``thesis_op``, ``punct``; ``error`` for a character that starts no token, which
    ends the lists), its start and its end. Blanks and comments are no tokens.
    Read run by run (:func:`token_runs`, :func:`run_matches`)."""
    runs = token_runs(text)
    if runs is None:
        return matches_one_by_one(text)
    groups: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pos = 0
    for run, number in runs:
        if run:
            run_groups, run_starts, run_ends = run_matches(run)
            groups += run_groups
            starts += map(pos.__add__, run_starts)
            ends += map(pos.__add__, run_ends)
            pos += len(run)
        if number:
            groups.append("number")
            starts.append(pos)
            pos += len(number)
            ends.append(pos)
    return groups, starts, ends


def matches_one_by_one(text: str) -> tuple[list[str], list[int], list[int]]:
    """:func:`token_matches`, a match of the lexer's expression at a time."""
    groups: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pos = 0
    for m in _TOKEN_RE.finditer(text):
        if m.start() != pos:
            break  # (a character no token starts with: the search went past it)
        group = m.lastgroup
        end = m.end()
        if group != "ws" and group != "comment":
            groups.append(group)  # type: ignore[arg-type]
            starts.append(pos)
            ends.append(end)
        pos = end
    if pos < len(text):
        groups.append("error")
        starts.append(pos)
        ends.append(pos + 1)
    return groups, starts, ends


def tokenize(source: Source) -> list[Token]:
    """All tokens of ``source``, ending with one EOF token.

    A character that starts no token becomes an ERROR token (its text is the message)
    and ends the list; the parser raises when it reaches it, so the error is reported
    inside the query it belongs to.
    """
    text = source.text
    tokens: list[Token] = []
    groups, starts, ends = token_matches(text)
    for group, pos, end in zip(groups, starts, ends, strict=True):
        if group == "error":
            ch = text[pos]
            if ch == "'":
                message = "unterminated string literal"
            elif ch == '"':
                message = "unterminated quoted name"
            else:
                message = f"unexpected character {ch!r}"
            tokens.append(Token(T.ERROR, message, pos, pos + 1))
        elif group == "quoted_ident":
            tokens.append(Token(T.IDENT, text[pos + 1 : end - 1].replace('""', '"'), pos, end))
        else:
            tokens.append(Token(_KINDS[group], text[pos:end], pos, end))
    n = len(text)
    tokens.append(Token(T.EOF, "", n, n))
    return tokens


def header_end(tokens: list[Token]) -> int:
    """The offset just past a leading ``Query ID [:] name`` header, as the parser reads
    one (0: ``tokens``, a text's, start with none)."""
    if len(tokens) < 3 or any(t.kind is not T.IDENT for t in tokens[:2]):
        return 0
    if tokens[0].upper != "QUERY" or tokens[1].upper != "ID":
        return 0
    name = tokens[3] if tokens[2].kind is T.PUNCT and tokens[2].text == ":" else tokens[2]
    return name.end if name.kind in (T.IDENT, T.NUMBER, T.STRING) else 0


_KINDS = {"number": T.NUMBER, "ident": T.IDENT, "string": T.STRING, "op": T.OP, "thesis_op": T.OP, "punct": T.PUNCT}


MAX_DIGITS = 1000  # significant digits of a literal
MIN_ORDER = -1000  # the smallest nonzero literal is about 1e-1000


def literal_problem(text: str) -> str | None:
    """Why a number literal's text cannot be a value (None if it can). Checked on the
    text before any conversion: ``Fraction('1e99999999')`` would compute a
    hundred-million-digit power, and ints over 4,300 digits are refused by Python."""
    mantissa, _, exp = text.lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    if len(exp.lstrip("+-").lstrip("0")) > 5:
        return "has an exponent out of range"
    if not digits:
        return None  # zero
    if len(digits) > MAX_DIGITS:
        return f"has more than {MAX_DIGITS} significant digits"
    stripped = whole.lstrip("0")
    # the position of the first significant digit, as a power of ten
    order = (len(stripped) if stripped else -(len(fraction) - len(fraction.lstrip("0")))) + (int(exp) if exp else 0)
    if order > 309:
        return "is too large (the largest is about 1.8e308)"
    if order < MIN_ORDER:
        return "is too close to zero (the smallest is about 1e-1000)"
    return None


def string_value(token: Token) -> str:
    """The value of a STRING token ('it''s' -> it's)."""
    return token.text[1:-1].replace("''", "'")
