"""The lexer over many texts' bytes at once, and the cut of their queries into comparisons.

:func:`lex_bytes` reads the tokens of the language (:mod:`predicates.lexer`, whose
regular expression is the definition: a differential test holds the two equal) from
ASCII texts laid one after the other, into arrays: a kind, a start and an end per
token. Blanks and comments are no tokens; a character that starts no token is an
:data:`ERROR` token and ends its text's tokens, as in the lexer.

:func:`cut_tokens` reads those arrays as the comparison cache
(:mod:`predicates.token_cache`) needs them: each text's pieces (one query each,
ending at ``;``), each piece's header name, its **prefix** (the tokens from SELECT to
WHERE: the SELECT list, FROM, and any WINDOW and MAXWINDOW clause) and its WHERE
clause cut at the AND tokens into **comparisons**. A prefix and a comparison are keyed
by their token skeleton: per token its kind and its text, but a comparison's NUMBER
tokens are holes (the constants, read here as exact doubles when they are plain).
Equal skeletons get one group number in a batch. Anything this cut cannot vouch for is
a **doubt** and its whole text goes to the parser: an error token, a bracket or colon,
a parenthesis before WHERE, a keyword of another construct (OR, NOT, GROUP, HAVING,
CREATE, BETWEEN, ...) or WINDOW and MAXWINDOW outside the prefix, a second SELECT or
header in a piece, a missing or repeated FROM/WHERE, an empty comparison. The cut only
splits a text; what a prefix or a comparison means is the parser's, learned once per
skeleton (one cut inside its parentheses does not parse alone: the parser's).
:func:`read_one` is both for one text, into arrays kept from call to call. All are plain
functions of arrays, compiled in :mod:`indexes.lexer_kernels` (else run uncompiled).
"""

from __future__ import annotations

import numpy as np

from predicates.lexer import BLANK_CHARS

IDENT, QUOTED, NUMBER, STRING, OP, PUNCT, ERROR = 1, 2, 3, 4, 5, 6, 7
BLANK_TABLE = np.zeros(256, np.bool_)
BLANK_TABLE[np.frombuffer(BLANK_CHARS.encode("ascii"), np.uint8)] = True
DIGITS = 15  # digits of a decimal whose double is always the decimal (predicates.template_scan)
POW10 = np.array([1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15], np.float64)
_HASH_MASK = 0xFFFFFFFFFFFF
_HASH_PRIME = 1099511628211

# the words a cut piece may not hold (upper case): they start constructs the cut does
# not read, or end a query otherwise than ';' does; with any of them, the parser reads
_DOUBT_WORDS = ["OR", "NOT", "WINDOW", "MAXWINDOW", "MAX", "GROUP", "HAVING", "CREATE", "VIEW", "TABLE", "QUERY",
                "SELECT", "FROM", "WHERE", "BETWEEN", "IN", "IS", "LIKE", "CASE", "WHEN", "ISTREAM", "DSTREAM",
                "RSTREAM"]  # fmt: skip
# the first letters of the words (a bit per letter from A): other identifiers are no word
_FIRST_LETTERS = sum(1 << (ord(letter) - 65) for letter in {word[0] for word in _DOUBT_WORDS})
WORDS = np.frombuffer(" ".join(_DOUBT_WORDS).encode("ascii") + b" ", np.uint8)  # each followed by a blank
# the rows of the cut's int64 arrays (:func:`_cut_into`), and of one text's (:func:`read_one`)
CUT_ROWS = 14
(SELECT_TOKEN, WHERE_TOKEN, FIRST_TOKEN, LAST_TOKEN, PREFIX_PIECE, PREFIX_HASHES, COMPARISON_HASHES, COMPARISON_GROUP,
 COMPARISON_BOUNDS, PIECE_COMPARISONS, PREFIX_GROUP, NAME_TOKEN, COMPARISON_NUMBERS, PREFIX_BOUNDS, SKELETON_START,
 SKELETON_END, TOKEN_START, TOKEN_END) = range(18)  # fmt: skip
ONE_ROWS = 18
READ_ROWS = slice(PIECE_COMPARISONS, SKELETON_END + 1)  # (what a reading of known templates reads)
# indexes of the words the cut looks for in WORDS (by their place)
W_QUERY, W_SELECT, W_FROM, W_WHERE, W_WINDOW, W_MAXWINDOW = (
    _DOUBT_WORDS.index(w) for w in ("QUERY", "SELECT", "FROM", "WHERE", "WINDOW", "MAXWINDOW")
)


def _is_digit(c: int) -> bool:
    return 48 <= c <= 57


def _is_word_start(c: int) -> bool:
    return c == 95 or 65 <= c <= 90 or 97 <= c <= 122


def _is_word(c: int) -> bool:
    return c == 95 or 48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122


def _quoted_end(data: np.ndarray, i: int, b: int, quote: int) -> int:
    """The end of the quoted token starting at ``i`` (``'...'`` or ``"..."``, the quote
    doubled inside, no line feed), or -1. As the lexer's expression backtracks: a
    token left open closes at the first quote of its last doubled quote."""
    j = i + 1
    last_pair = -1
    while j < b:
        c = data[j]
        if c == 10:
            break
        if c == quote:
            if j + 1 < b and data[j + 1] == quote:
                last_pair = j
                j += 2
                continue
            return j + 1
        j += 1
    return last_pair + 1 if last_pair >= 0 else -1


def lex_bytes(data: np.ndarray, text_ends: np.ndarray, blank: np.ndarray) -> tuple[np.ndarray, ...]:
    """The tokens of each text (``data``: uint8, text ``t`` ending at ``text_ends[t]``;
    ``blank``: per byte, whether the lexer skips it). Returns ``text_tokens`` (T + 1:
    text ``t``'s tokens are ``text_tokens[t]:text_tokens[t + 1]``), ``kind``, ``start``
    and ``end`` per token (in ``data``)."""
    n = len(data)
    n_texts = len(text_ends)
    kind = np.empty(n + n_texts, np.uint8)
    start = np.empty(n + n_texts, np.int64)
    end = np.empty(n + n_texts, np.int64)
    text_tokens = np.zeros(n_texts + 1, np.int64)
    k = _lex_into(data, text_ends, blank, kind, start, end, text_tokens)
    return text_tokens, kind[:k], start[:k], end[:k]


def _lex_into(
    data: np.ndarray,
    text_ends: np.ndarray,
    blank: np.ndarray,
    kind: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    text_tokens: np.ndarray,
) -> int:
    """:func:`lex_bytes` into the given arrays (of ``len(data) + len(text_ends)`` tokens);
    returns the count of tokens."""
    n_texts = len(text_ends)
    text_tokens[0] = 0
    k = 0
    a = 0
    for t in range(n_texts):
        b = text_ends[t]
        i = a
        while i < b:
            c = int(data[i])
            if blank[c]:
                i += 1
                continue
            if c == 45 and i + 1 < b and data[i + 1] == 45:  # a comment, to the line's end
                while i < b and data[i] != 10:
                    i += 1
                continue
            j = i
            what = 0
            if _is_digit(c) or (c == 46 and i + 1 < b and _is_digit(int(data[i + 1]))):
                j = i + 1
                while j < b and _is_digit(int(data[j])):
                    j += 1
                if c != 46 and j < b and data[j] == 46:
                    j += 1
                    while j < b and _is_digit(int(data[j])):
                        j += 1
                if j < b and (data[j] == 101 or data[j] == 69):
                    x = j + 1
                    if x < b and (data[x] == 43 or data[x] == 45):
                        x += 1
                    if x < b and _is_digit(int(data[x])):
                        while x < b and _is_digit(int(data[x])):
                            x += 1
                        j = x
                what = NUMBER
            elif (
                (c == 108 or c == 76 or c == 103 or c == 71)
                and i + 2 < b
                and (data[i + 1] == 116 or data[i + 1] == 84)
                and data[i + 2] == 61
                and not (i + 3 < b and (data[i + 3] == 61 or data[i + 3] == 60 or data[i + 3] == 62))
            ):
                j = i + 3  # lt= / gt= joined (the thesis' spelling)
                what = OP
            elif _is_word_start(c):
                j = i + 1
                while j < b and _is_word(int(data[j])):
                    j += 1
                what = IDENT
            elif c == 34 or c == 39:
                j = _quoted_end(data, i, b, c)
                what = (QUOTED if c == 34 else STRING) if j > 0 else ERROR
                if j < 0:
                    j = i + 1
            elif c == 60 or c == 62 or c == 33 or c == 61:  # < > ! =
                d = int(data[i + 1]) if i + 1 < b else 0
                if d == 61 or (c == 60 and d == 62):  # <= >= != == <>
                    j = i + 2
                    what = OP
                elif c != 33:
                    j = i + 1
                    what = OP
                else:
                    j = i + 1
                    what = ERROR
            elif c == 43 or c == 45 or c == 42 or c == 47:  # + - * /
                j = i + 1
                what = OP
            elif c == 40 or c == 41 or c == 44 or c == 46 or c == 59 or c == 58 or c == 91 or c == 93:
                j = i + 1
                what = PUNCT
            else:
                j = i + 1
                what = ERROR
            kind[k] = what
            start[k] = i
            end[k] = j
            k += 1
            if what == ERROR:
                break
            i = j
        text_tokens[t + 1] = k
        a = b
    return k


def _word_of(data: np.ndarray, s: int, e: int, words: np.ndarray) -> int:
    """Which of ``words`` (upper case, each followed by a blank) the identifier
    ``data[s:e]`` is in any case, or -1."""
    first = int(data[s]) & 0xDF  # (upper case)
    if e - s < 2 or e - s > 9 or not (65 <= first <= 90) or not (_FIRST_LETTERS >> (first - 65)) & 1:
        return -1  # (most identifiers: a column, a stream, AND)
    w = 0
    x = 0
    n = len(words)
    while x < n:
        y = x
        while words[y] != 32:
            y += 1
        if y - x == e - s:
            same = True
            for z in range(e - s):
                c = int(data[s + z])
                if 97 <= c <= 122:
                    c -= 32
                if c != words[x + z]:
                    same = False
                    break
            if same:
                return w
        w += 1
        x = y + 1
    return -1


def _is_and(data: np.ndarray, s: int, e: int) -> bool:
    return e - s == 3 and (data[s] | 32) == 97 and (data[s + 1] | 32) == 110 and (data[s + 2] | 32) == 100


def _is_id(data: np.ndarray, s: int, e: int) -> bool:
    return e - s == 2 and (data[s] | 32) == 105 and (data[s + 1] | 32) == 100


def _grown(slots: np.ndarray, hashes: np.ndarray, n_groups: int) -> np.ndarray:
    """``slots`` twice the size once the groups fill half of it (a batch has few skeletons)."""
    if 2 * (n_groups + 1) <= len(slots):
        return slots
    size = 2 * len(slots)
    grown = np.full(size, -1, np.int64)
    for g in range(n_groups):
        at = hashes[g] & (size - 1)
        while grown[at] != -1:
            at = (at + 1) & (size - 1)
        grown[at] = g
    return grown


def _group(
    buffer: np.ndarray,
    o0: int,
    o: int,
    h: int,
    slots: np.ndarray,
    hashes: np.ndarray,
    bounds: np.ndarray,
    n_groups: int,
) -> int:
    """The group of the skeleton ``buffer[o0:o]`` (hash ``h``): an earlier group with
    the same bytes, else ``n_groups`` (a new one, whose bytes stay in the buffer).
    ``slots`` has room for one more group (:func:`_grown`)."""
    size = len(slots)
    at = h & (size - 1)
    while True:
        g = slots[at]
        if g == -1:
            slots[at] = n_groups
            hashes[n_groups] = h
            bounds[n_groups] = o0
            bounds[n_groups + 1] = o
            return n_groups
        if hashes[g] == h and bounds[g + 1] - bounds[g] == o - o0:
            same = True
            f0 = bounds[g]
            for x in range(o - o0):
                if buffer[f0 + x] != buffer[o0 + x]:
                    same = False
                    break
            if same:
                return int(g)
        at = (at + 1) & (size - 1)


def cut_tokens(
    data: np.ndarray,
    text_tokens: np.ndarray,
    kind: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    words: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """The pieces, prefixes and comparisons of each text's tokens (see the module).

    Returns ``doubt`` (T: the parser reads the text), ``text_pieces`` (T + 1),
    per piece ``name_token`` (-1: no header), ``select_token``, ``where_token`` (its
    prefix is the tokens ``select_token:where_token``), ``prefix_group``,
    ``piece_comparisons`` (P + 1); per comparison ``first_token``, ``last_token``
    (its tokens, end excluded), ``comparison_group``,
    ``comparison_numbers`` (C + 1); per number ``values`` (NaN: not a plain decimal of
    at most 15 digits); per prefix group ``prefix_piece``, its first piece (-1: none);
    the skeletons of the prefixes' and comparisons' groups
    (``prefix_bytes``, ``prefix_bounds``, ``comparison_bytes``, ``comparison_bounds``).
    A doubtful text has no pieces."""
    n_texts = len(text_tokens) - 1
    n_tokens = len(kind)
    doubt = np.zeros(n_texts, np.bool_)
    text_pieces = np.zeros(n_texts + 1, np.int64)
    rows = np.empty((CUT_ROWS, n_tokens + 2), np.int64)
    values = np.empty(n_tokens + 1, np.float64)
    room = 2 * len(data) + n_tokens + 16
    skeletons = np.empty((2, room), np.uint8)
    p, c, r, n_prefixes, n_groups = _cut_into(
        data, text_tokens, kind, start, end, words, doubt, text_pieces, rows, values, skeletons
    )
    return (
        doubt,
        text_pieces,
        rows[NAME_TOKEN, :p],
        rows[SELECT_TOKEN, :p],
        rows[WHERE_TOKEN, :p],
        rows[PREFIX_GROUP, :p],
        rows[PIECE_COMPARISONS, : p + 1],
        rows[FIRST_TOKEN, :c],
        rows[LAST_TOKEN, :c],
        rows[COMPARISON_GROUP, :c],
        rows[COMPARISON_NUMBERS, : c + 1],
        values[:r],
        rows[PREFIX_PIECE, :n_prefixes],
        skeletons[0, : rows[PREFIX_BOUNDS, n_prefixes]],
        rows[PREFIX_BOUNDS, : n_prefixes + 1],
        skeletons[1, : rows[COMPARISON_BOUNDS, n_groups]],
        rows[COMPARISON_BOUNDS, : n_groups + 1],
    )


def _cut_into(
    data: np.ndarray,
    text_tokens: np.ndarray,
    kind: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    words: np.ndarray,
    doubt: np.ndarray,
    text_pieces: np.ndarray,
    rows: np.ndarray,
    values: np.ndarray,
    skeletons: np.ndarray,
) -> tuple[int, int, int, int, int]:
    """:func:`cut_tokens` into the given arrays (int64 ``rows``: the rows named above, of ``len(kind) + 2``;
    ``skeletons``: the prefixes' and comparisons' bytes, two rows of ``2 * len(data) + len(kind) + 16``). Returns
    the counts of pieces, comparisons, numbers, prefix groups and comparison groups."""
    n_texts = len(text_tokens) - 1
    name_token = rows[NAME_TOKEN]
    select_token = rows[SELECT_TOKEN]
    where_token = rows[WHERE_TOKEN]
    prefix_group = rows[PREFIX_GROUP]
    piece_comparisons = rows[PIECE_COMPARISONS]
    first_token = rows[FIRST_TOKEN]
    last_token = rows[LAST_TOKEN]
    comparison_group = rows[COMPARISON_GROUP]
    comparison_numbers = rows[COMPARISON_NUMBERS]
    prefix_piece = rows[PREFIX_PIECE]
    prefix_hashes = rows[PREFIX_HASHES]
    comparison_hashes = rows[COMPARISON_HASHES]
    prefix_bounds = rows[PREFIX_BOUNDS]
    comparison_bounds = rows[COMPARISON_BOUNDS]
    prefix_bytes = skeletons[0]
    comparison_bytes = skeletons[1]
    text_pieces[0] = 0
    piece_comparisons[0] = 0
    comparison_numbers[0] = 0
    prefix_bounds[0] = 0
    comparison_bounds[0] = 0
    prefix_slots = np.full(64, -1, np.int64)
    comparison_slots = np.full(64, -1, np.int64)
    n_prefixes = 0
    n_comparison_groups = 0
    p = 0  # pieces
    c = 0  # comparisons
    r = 0  # numbers
    for t in range(n_texts):
        p0, c0, r0 = p, c, r
        ok = True
        doubt[t] = False
        i = text_tokens[t]
        stop = text_tokens[t + 1]
        while ok and i < stop:
            if kind[i] == PUNCT and data[start[i]] == 59:  # a stray ';': no query
                i += 1
                continue
            # one piece: up to its ';' or the text's end
            prefix_group[p] = -1
            q = i
            while q < stop and not (kind[q] == PUNCT and data[start[q]] == 59):
                q += 1
            name = -1
            s = i
            if (
                q - s >= 3
                and kind[s] == IDENT
                and _word_of(data, start[s], end[s], words) == W_QUERY
                and kind[s + 1] == IDENT
                and _is_id(data, start[s + 1], end[s + 1])
            ):
                s += 2
                if kind[s] == PUNCT and data[start[s]] == 58:
                    s += 1
                if s < q and kind[s] != OP and kind[s] != PUNCT and kind[s] != ERROR:
                    name = s
                    s += 1
                else:
                    ok = False
                    break
            if s >= q or kind[s] != IDENT or _word_of(data, start[s], end[s], words) != W_SELECT:
                ok = False
                break
            from_at = -1
            where_at = -1
            for x in range(s + 1, q):
                kx = kind[x]
                if kx == ERROR:
                    ok = False
                    break
                if kx == PUNCT:
                    ch = data[start[x]]
                    # [ ] : anywhere, and ( ) before WHERE (a call in SELECT, a window in
                    # FROM); a comparison's parentheses are its own (one that does not
                    # parse alone, cut inside them, is the parser's)
                    if ch == 91 or ch == 93 or ch == 58 or ((ch == 40 or ch == 41) and where_at < 0):
                        ok = False
                        break
                elif kx == IDENT:
                    w = _word_of(data, start[x], end[x], words)
                    if w == W_FROM and from_at < 0 and where_at < 0:
                        from_at = x
                    elif w == W_WHERE and from_at >= 0 and where_at < 0:
                        where_at = x
                    elif (w == W_WINDOW or w == W_MAXWINDOW) and from_at >= 0 and where_at < 0:  # noqa: SIM109 (numba)
                        pass  # a window clause: part of the prefix (the parser learns it)
                    elif w >= 0:
                        ok = False
                        break
            if not ok or from_at < 0 or where_at < 0 or from_at + 1 == where_at:
                ok = False
                break
            # the prefix's skeleton: every token's kind and text, SELECT to WHERE
            o0 = prefix_bounds[n_prefixes]
            o = o0
            h = 0
            for x in range(s, where_at):
                prefix_bytes[o] = kind[x]
                o += 1
                h = (h * _HASH_PRIME + int(kind[x])) & _HASH_MASK
                for y in range(start[x], end[x]):
                    prefix_bytes[o] = data[y]
                    o += 1
                    h = (h * _HASH_PRIME + int(data[y])) & _HASH_MASK
            prefix_slots = _grown(prefix_slots, prefix_hashes, n_prefixes)
            g = _group(prefix_bytes, o0, o, h, prefix_slots, prefix_hashes, prefix_bounds, n_prefixes)
            if g == n_prefixes:
                n_prefixes += 1
                prefix_piece[g] = p
            elif prefix_piece[g] < 0:  # (its first piece was undone with its text)
                prefix_piece[g] = p
            name_token[p] = name
            select_token[p] = s
            where_token[p] = where_at
            prefix_group[p] = g
            # the comparisons: the tokens between WHERE, the ANDs and the piece's end
            x = where_at + 1
            while x <= q:
                y = x
                while y < q and not (kind[y] == IDENT and _is_and(data, start[y], end[y])):
                    y += 1
                if y == x:
                    ok = False  # an empty comparison (WHERE AND, a trailing AND)
                    break
                o0 = comparison_bounds[n_comparison_groups]
                o = o0
                h = 0
                for z in range(x, y):
                    comparison_bytes[o] = kind[z]
                    o += 1
                    h = (h * _HASH_PRIME + int(kind[z])) & _HASH_MASK
                    if kind[z] == NUMBER:
                        digits = 0
                        dots = 0
                        after_dot = 0
                        mantissa = 0
                        plain = True
                        for v in range(start[z], end[z]):
                            d = int(data[v])
                            if d == 46:
                                dots += 1
                            elif 48 <= d <= 57:
                                digits += 1
                                if digits <= DIGITS:
                                    mantissa = mantissa * 10 + (d - 48)
                                if dots:
                                    after_dot += 1
                            else:
                                plain = False  # an exponent
                        if plain and dots <= 1 and digits <= DIGITS:
                            values[r] = mantissa / POW10[after_dot]  # exact (predicates.template_scan)
                        else:
                            values[r] = np.nan
                        r += 1
                        continue
                    for v in range(start[z], end[z]):
                        comparison_bytes[o] = data[v]
                        o += 1
                        h = (h * _HASH_PRIME + int(data[v])) & _HASH_MASK
                comparison_slots = _grown(comparison_slots, comparison_hashes, n_comparison_groups)
                g = _group(
                    comparison_bytes,
                    o0,
                    o,
                    h,
                    comparison_slots,
                    comparison_hashes,
                    comparison_bounds,
                    n_comparison_groups,
                )
                if g == n_comparison_groups:
                    n_comparison_groups += 1
                first_token[c] = x
                last_token[c] = y
                comparison_group[c] = g
                c += 1
                comparison_numbers[c] = r
                x = y + 1
            if not ok:
                break
            p += 1
            piece_comparisons[p] = c
            i = q + 1 if q < stop else q
        if not ok:
            # the text is the parser's; its pieces, comparisons and numbers are undone
            # (groups it made stay: they are only skeletons)
            doubt[t] = True
            for k in range(p0, p + 1):  # (a group whose first piece was one of them has none)
                g = prefix_group[k]
                if g >= 0 and prefix_piece[g] >= p0:
                    prefix_piece[g] = -1
            p, c, r = p0, c0, r0
        text_pieces[t + 1] = p
    return p, c, r, n_prefixes, n_comparison_groups


def read_one(
    data: np.ndarray,
    blank: np.ndarray,
    words: np.ndarray,
    rows: np.ndarray,
    values: np.ndarray,
    skeletons: np.ndarray,
    tokens: np.ndarray,
) -> tuple[int, int, int, int, int, int, int]:
    """:func:`lex_bytes` then :func:`cut_tokens` of one text (``data``) into arrays kept from call to call (none
    made or handed back): ``rows`` (:data:`ONE_ROWS` rows of ``len(data) + 3``: the cut's, each comparison's skeleton's
    bounds, the tokens' bounds), ``values`` and ``skeletons`` as :func:`_cut_into` takes them, ``tokens`` (kinds).
    Returns whether the text is a doubt, its count of tokens, then :func:`_cut_into`'s counts."""
    text_ends = np.empty(1, np.int64)
    text_ends[0] = len(data)
    text_tokens = np.empty(2, np.int64)
    doubt = np.empty(1, np.bool_)
    text_pieces = np.empty(2, np.int64)
    k = _lex_into(data, text_ends, blank, tokens, rows[TOKEN_START], rows[TOKEN_END], text_tokens)
    p, c, r, n_prefixes, n_groups = _cut_into(
        data, text_tokens, tokens[:k], rows[TOKEN_START, :k], rows[TOKEN_END, :k], words, doubt, text_pieces, rows,
        values, skeletons,
    )  # fmt: skip
    for x in range(c):  # (each comparison's skeleton in the skeleton bytes)
        rows[SKELETON_START, x] = rows[COMPARISON_BOUNDS, rows[COMPARISON_GROUP, x]]
        rows[SKELETON_END, x] = rows[COMPARISON_BOUNDS, rows[COMPARISON_GROUP, x] + 1]
    return int(doubt[0]), k, p, c, r, n_prefixes, n_groups


__all__ = [
    "BLANK_TABLE",
    "ERROR",
    "IDENT",
    "NUMBER",
    "OP",
    "PUNCT",
    "QUOTED",
    "STRING",
    "WORDS",
    "cut_tokens",
    "lex_bytes",
    "read_one",
]
