"""The lexer over bytes (predicates.token_scan, compiled in indexes.lexer_kernels) reads
exactly the tokens of the lexer's regular expression (predicates.lexer), and its cut
keeps every piece it cannot vouch for away from the comparison cache."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from indexes import lexer_kernels
from predicates.errors import Source
from predicates.lexer import T, tokenize
from predicates.token_scan import (
    BLANK_TABLE,
    COMPARISON_BOUNDS,
    COMPARISON_GROUP,
    COMPARISON_NUMBERS,
    ERROR,
    FIRST_TOKEN,
    IDENT,
    LAST_TOKEN,
    NAME_TOKEN,
    NUMBER,
    ONE_ROWS,
    OP,
    PIECE_COMPARISONS,
    PREFIX_BOUNDS,
    PREFIX_GROUP,
    PREFIX_PIECE,
    PUNCT,
    QUOTED,
    SELECT_TOKEN,
    STRING,
    TOKEN_END,
    TOKEN_START,
    WHERE_TOKEN,
    WORDS,
)
from predicates.token_scan import cut_tokens as plain_cut_tokens
from predicates.token_scan import lex_bytes as plain_lex_bytes
from predicates.token_scan import read_one as plain_read_one

KINDS = {IDENT: T.IDENT, QUOTED: T.IDENT, NUMBER: T.NUMBER, STRING: T.STRING, OP: T.OP, PUNCT: T.PUNCT, ERROR: T.ERROR}
LEXERS = [plain_lex_bytes, lexer_kernels.lex_bytes]

# pieces the lexer reads in many ways next to each other: numbers with dots and
# exponents, the thesis' operators, quotes doubled and left open, comments, blanks
PIECES = st.sampled_from(
    ["1", "12", ".", "5.", ".5", "1.2.3", "e", "E", "e5", "1e", "1e5", "1E+", "2.5e-3", "+", "-", "--", "*", "/", "<",
     ">", "=", "!", "!=", "<>", "==", "<=", ">=", "lt=", "gt=", "LT=", "lt", "gt", "x", "_a1", "Query", "ID", ":",
     ";", ",", "(", ")", "[", "]", "'", "''", "'a'", "'it''s'", '"', '""', '"q"', '"a""b"', " ", "\t", "\n", "\r",
     "\f", "\x0b", "#", "@", "\x00", "AND", "and", "SELECT", "FROM", "WHERE", "E.a1"]
)  # fmt: skip


def lexed(lexer, texts: list[str]) -> list[list[tuple[T, str, int, int]]]:
    """Each text's tokens from ``lexer``, as the regular-expression lexer gives them
    (without its end token; an error token's text is where it is)."""
    joined = "".join(texts)
    data = np.frombuffer(joined.encode("ascii"), np.uint8)
    ends = np.cumsum([len(t) for t in texts], dtype=np.int64)
    text_tokens, kind, start, end = lexer(data, ends, BLANK_TABLE)
    out = []
    base = 0
    for t, text in enumerate(texts):
        tokens = []
        for i in range(text_tokens[t], text_tokens[t + 1]):
            s, e = int(start[i]) - base, int(end[i]) - base
            raw = text[s:e]
            if kind[i] == QUOTED:
                raw = raw[1:-1].replace('""', '"')
            tokens.append((KINDS[int(kind[i])], raw if kind[i] != ERROR else "", s, e))
        out.append(tokens)
        base += len(text)
    return out


def regex_lexed(text: str) -> list[tuple[T, str, int, int]]:
    return [
        (t.kind, t.text if t.kind is not T.ERROR else "", t.start, t.end)
        for t in tokenize(Source(text))
        if t.kind is not T.EOF
    ]


@pytest.mark.parametrize("lexer", LEXERS, ids=["plain", "kernel"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(st.lists(PIECES, max_size=12).map("".join), min_size=1, max_size=4))
@example(texts=["'ab''cd", '"x""', "a'b''\nc'", "1.e5.5", "lt==1", "gt=<", "--x\n1", "x --", "'''"])
def test_the_byte_lexer_reads_the_tokens_of_the_lexer(lexer, texts: list[str]) -> None:
    assert lexed(lexer, texts) == [regex_lexed(text) for text in texts]


def cut(texts: list[str]) -> tuple[np.ndarray, ...]:
    joined = "".join(texts)
    data = np.frombuffer(joined.encode("ascii"), np.uint8)
    ends = np.cumsum([len(t) for t in texts], dtype=np.int64)
    return plain_cut_tokens(data, *plain_lex_bytes(data, ends, BLANK_TABLE), WORDS)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT * FROM E WHERE E.a > 1 OR E.b < 2",
        "SELECT (E.a) FROM E WHERE E.a > 1",
        "SELECT * FROM E WHERE NOT E.a > 1",
        "SELECT * FROM E[RANGE 5 SECONDS] WHERE E.a > 1",
        "SELECT count(*) FROM E WHERE E.a > 1",
        "SELECT * FROM E WHERE E.a > 1 GROUP BY E.b",
        "SELECT * FROM E, F WHERE E.a > 1 WINDOW E.ts < F.ts",
        "SELECT * FROM E, F WHERE E.a > 1 MAXWINDOW 5",
        "SELECT * FROM E, F WINDOW (E.ts < F.ts) MAXWINDOW 5 WHERE E.a > 1",
        "SELECT * FROM E WHERE E.a > 1 AND",
        "SELECT * FROM E WHERE AND E.a > 1",
        "SELECT * FROM E WHERE",
        "SELECT * FROM E",
        "SELECT * FROM E WHERE E.a > 1 SELECT * FROM E WHERE E.a > 2",
        "SELECT * FROM E WHERE E.a > 1 Query ID: x SELECT * FROM E WHERE E.a > 2",
        "Query ID: SELECT * FROM E WHERE E.a > 1",
        "Query ID: ; SELECT * FROM E WHERE E.a > 1",
        "SELECT * FROM E WHERE E.a > 1 WHERE E.b > 2",
        "SELECT * WHERE E.a > 1 FROM E",
        "SELECT * FROM E WHERE E.a BETWEEN 1 AND 2",
        "SELECT * FROM E WHERE E.a > 1 ! 2",
        "CREATE VIEW v AS SELECT * FROM E WHERE E.a > 1",
        "SELECT * FROM E WHERE E.a > 1; SELECT * FROM E WHERE E.b > 'x",
    ],
)
def test_the_cut_leaves_what_it_cannot_vouch_for_to_the_parser(text: str) -> None:
    doubt, text_pieces, *_ = cut([text])
    assert doubt.tolist() == [True] and text_pieces.tolist() == [0, 0]


def test_a_prefix_keeps_its_window_and_a_comparison_its_parentheses() -> None:
    """WINDOW and MAXWINDOW between FROM and WHERE are the prefix's (its skeleton, with
    its numbers); a comparison's parentheses and numbers are its own."""
    texts = [
        "SELECT * FROM E, F WINDOW E.ts <= F.ts MAXWINDOW 5 sec WHERE E.a <= 2 * F.a + (-3) AND E.b > 1",
        "SELECT * FROM E, F WINDOW E.ts <= F.ts MAXWINDOW 6 sec WHERE E.a <= 3 * F.a + (-4)",
    ]
    (doubt, text_pieces, _, _, _, prefix_group, piece_comparisons, _, _, group, _, values, *_) = cut(texts)
    assert doubt.tolist() == [False, False] and text_pieces.tolist() == [0, 1, 2]
    assert prefix_group.tolist() == [0, 1]  # (another window length: another prefix)
    assert piece_comparisons.tolist() == [0, 2, 3] and group.tolist() == [0, 1, 0]
    assert values.tolist() == [2.0, 3.0, 1.0, 3.0, 4.0]


def test_a_prefix_first_seen_in_a_doubtful_text_is_learned_from_a_later_piece() -> None:
    """The pieces of a text the parser reads are undone: a prefix group they made gets
    its first piece from the next text that has it."""
    texts = [
        "SELECT * FROM E WHERE E.a > 1 AND",  # (its prefix is cut before its empty comparison)
        "SELECT E.a FROM E WHERE E.a > 4",
        "SELECT * FROM E WHERE E.a > 5",
    ]
    doubt, text_pieces, *_, prefix_piece, _, _, _, _ = cut(texts)
    assert doubt.tolist() == [True, False, False] and text_pieces.tolist() == [0, 0, 1, 2]
    assert prefix_piece.tolist() == [1, 0]  # (SELECT * FROM E: the third text's piece, not the second's)


def test_the_cut_reads_pieces_headers_and_comparisons() -> None:
    texts = [
        "Query ID: s1\nSELECT * FROM E WHERE E.a >= 10.5 AND E.a <= 20;\n;Query ID 'x y' SELECT * FROM E WHERE E.b < -3",
        "select * from E where E.a >= 7 and E.b < 1e3 -- and or not\n;  ",
    ]
    (doubt, text_pieces, name_token, _, _, prefix_group, piece_comparisons, _, _, group, numbers, values,
     prefix_piece, *_) = cut(texts)  # fmt: skip
    assert doubt.tolist() == [False, False]
    assert text_pieces.tolist() == [0, 2, 3]
    assert (name_token >= 0).tolist() == [True, True, False]
    assert prefix_group.tolist() == [0, 0, 1]  # (the prefix is its tokens' text: SELECT and select differ)
    assert piece_comparisons.tolist() == [0, 2, 3, 5]
    assert group.tolist() == [0, 1, 2, 0, 3]  # E.a >= # alike in the first and third pieces
    assert prefix_piece.tolist() == [0, 2]
    assert numbers.tolist() == [0, 1, 2, 3, 4, 5]
    assert values[:4].tolist() == [10.5, 20.0, 3.0, 7.0] and np.isnan(values[4])  # (1e3 is no plain decimal)


# texts that cut into pieces (headers, joins, windows, several queries) and texts that do not
CUT_TEXTS = st.lists(
    st.sampled_from(
        ["Query ID: q1\n", "SELECT * FROM E", " WHERE ", "E.a1 > 1", " AND ", "E.a2 <= 3.5", " ; ", "SELECT * FROM E, F",
         " WINDOW E.ts <= F.ts", " MAXWINDOW 2 sec", "E.a1 >= 2 * F.a1 + (-3)", " OR ", "1e3", "1234567890123456",
         "(E.a1 < 2)", "'x'", "[", "é", "--c\n", "\n"]
    ),
    max_size=16,
).map("".join)  # fmt: skip


@pytest.mark.parametrize("reader", [plain_read_one, lexer_kernels.read_one], ids=["plain", "kernel"])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(CUT_TEXTS, min_size=1, max_size=6))
@example(texts=["Query ID: a\nSELECT * FROM E WHERE E.a1 > 1 AND E.a2 < 2; SELECT * FROM E WHERE E.a1 > 3", "x", ""])
def test_one_text_read_into_kept_arrays_is_the_batch_cut(reader, texts: list[str]) -> None:
    """One text at a time, into the same arrays call after call (as the comparison cache
    reads a register_query): the tokens, doubt, pieces, comparisons, numbers and
    skeletons of the two kernels over that text alone, whatever was read before."""
    texts = [text for text in texts if text.isascii()]
    room = 2 * max(map(len, texts), default=0) + 16
    rows = np.full((ONE_ROWS, room + 3), -7, np.int64)
    values = np.full(room + 2, 7.5)
    skeletons = np.full((2, 3 * room + 16), 7, np.uint8)
    kinds = np.full(room + 1, 7, np.uint8)
    for text in texts:
        data = np.frombuffer(text.encode("ascii"), np.uint8)
        doubt, n_tokens, p, c, r, n_prefixes, n_groups = reader(
            data, BLANK_TABLE, WORDS, rows, values, skeletons, kinds
        )
        _, kind, start, end = plain_lex_bytes(data, np.array([len(text)], np.int64), BLANK_TABLE)
        assert (kinds[:n_tokens].tolist(), rows[TOKEN_START, :n_tokens].tolist(), rows[TOKEN_END, :n_tokens].tolist()) == (
            kind.tolist(), start.tolist(), end.tolist())  # fmt: skip
        want = cut([text])
        assert bool(doubt) == bool(want[0][0])
        got = [rows[NAME_TOKEN, :p], rows[SELECT_TOKEN, :p], rows[WHERE_TOKEN, :p], rows[PREFIX_GROUP, :p],
               rows[PIECE_COMPARISONS, : p + 1], rows[FIRST_TOKEN, :c], rows[LAST_TOKEN, :c],
               rows[COMPARISON_GROUP, :c], rows[COMPARISON_NUMBERS, : c + 1], values[:r],
               rows[PREFIX_PIECE, :n_prefixes]]  # fmt: skip
        for mine, theirs in zip(got, want[2:13], strict=True):
            np.testing.assert_array_equal(mine, theirs, err_msg=text)
        prefix_end, comparison_end = rows[PREFIX_BOUNDS, n_prefixes], rows[COMPARISON_BOUNDS, n_groups]
        assert skeletons[0, :prefix_end].tobytes() == want[13].tobytes()
        assert rows[PREFIX_BOUNDS, : n_prefixes + 1].tolist() == want[14].tolist()
        assert skeletons[1, :comparison_end].tobytes() == want[15].tobytes()
        assert rows[COMPARISON_BOUNDS, : n_groups + 1].tolist() == want[16].tolist()
