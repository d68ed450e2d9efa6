"""The cut of a few texts on the lexer's matches (predicates.token_cut) reads every text
as the cut kernel (predicates.token_scan.cut_tokens) does: the same doubts, pieces,
header names, prefix and comparison skeletons and numbers, so that both find the same
templates in the comparison cache."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from predicates.lexer import token_matches
from predicates.token_cut import KIND_OF, cut_text
from tests.unit.test_token_cache import JOINS, ODD, PREFIXES, TAILS, TERMS, WHERE_ODD, text_of, with_odd
from tests.unit.test_token_scan import PIECES, cut

WORDS = st.sampled_from(
    [" WINDOW ", " MAXWINDOW ", " max ", " OR ", " WHERE ", " FROM ", " Query ID: q ", " BETWEEN ", " AND ", " (", ") "]
)


def kernel_pieces(text: str):
    """The kernel's cut of ``text`` as :func:`cut_text` gives it (None: a doubt)."""
    (doubt, _, name_token, select_token, where_token, prefix_group, piece_comparisons, first_token, last_token,
     comparison_group, comparison_numbers, values, _, prefix_bytes, prefix_bounds, comparison_bytes,
     comparison_bounds) = cut([text])  # fmt: skip
    if doubt[0]:
        return None
    pieces = []
    for k in range(len(name_token)):
        g = prefix_group[k]
        comparisons = []
        for c in range(piece_comparisons[k], piece_comparisons[k + 1]):
            h = comparison_group[c]
            skeleton = comparison_bytes[comparison_bounds[h] : comparison_bounds[h + 1]].tobytes()
            numbers = values[comparison_numbers[c] : comparison_numbers[c + 1]].tolist()
            comparisons.append((skeleton, int(first_token[c]), int(last_token[c]), numbers))
        prefix = prefix_bytes[prefix_bounds[g] : prefix_bounds[g + 1]].tobytes()
        pieces.append((int(name_token[k]), int(select_token[k]), int(where_token[k]), prefix, comparisons))
    return pieces


def python_pieces(text: str):
    got = cut_text(text)
    if got is None:
        return None
    pieces = []
    for piece in got.pieces:
        comparisons = []
        for c, (skeleton, first, last, n0) in enumerate(piece.comparisons):
            n1 = piece.comparisons[c + 1][3] if c + 1 < len(piece.comparisons) else len(piece.numbers)
            comparisons.append((skeleton, first, last, piece.numbers[n0:n1]))
        pieces.append((piece.name_token, piece.select_token, piece.where_token, piece.prefix, comparisons))
    return pieces


def same(a, b) -> bool:
    """Equal, NaN equal to NaN (a number that is not a plain decimal)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PREFIXES, TERMS, st.lists(JOINS, min_size=5, max_size=5), TAILS, ODD, WHERE_ODD)
@example(
    "SELECT * FROM B, H WINDOW B.ts <= H.ts MAXWINDOW 20 sec", [("B.temp", "<", "3 * H.vib + (-1)")], [], "", "", "end"
)
def test_the_cut_of_a_few_texts_is_the_kernels(prefix, terms, joins, tail, odd, where) -> None:
    text = with_odd(text_of(prefix, terms, joins, tail), odd, where)
    if text.isascii():
        assert same(python_pieces(text), kernel_pieces(text)), text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(PIECES, WORDS, st.just(" E.a1 > 1 ")), max_size=24).map("".join))
@example("E.a > 1 : 2")
@example("E.a > 1 AND E.b [ 2")
@example("(E.a > 1) AND (E.b < 2 + (3))")
@example("E.a > 1 MAXWINDOW 2")
@example("E.a > 1 AND max(E.b) > 2")
@example("E.a > 1 ; Query ID: x SELECT * FROM E, F WINDOW E.ts <= F.ts MAXWINDOW 3 WHERE E.a < 2.50")
@example("E.a > 1 AND AND E.b < 2")
@example("E.a > 1 AND E.b < 2 # 3")
@example("E.a > 1.5e3 AND E.b < 1234567890123456 AND E.c < 123456789012345 AND E.d > 00.10")
def test_the_cut_of_any_tokens_is_the_kernels(text: str) -> None:
    """Texts of pieces the lexer reads in many ways (and the cut's words)."""
    text = "SELECT * FROM E WHERE " + text
    assert same(python_pieces(text), kernel_pieces(text)), text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(PIECES, WORDS, st.just(" E.a1 > 1 "), st.just("\n")), max_size=24).map("".join))
@example("E.a > 1 ;\nQuery ID: 'it''s'\n SELECT * FROM E WHERE E.a < 2.50")
@example("E.a > 1 ; Query ID: 7 SELECT * FROM E WHERE E.a < .5")
def test_a_cuts_tokens_are_the_lexers(text: str) -> None:
    """The tokens a cut makes from its runs (for learning, and a header's name) are the
    lexer's: kinds, starts and ends, all at once and one at a time."""
    text = "Query ID: q1\nSELECT * FROM E WHERE " + text
    got = cut_text(text)
    if got is None:
        return
    groups, starts, ends = token_matches(text)
    kinds = [KIND_OF[g] for g in groups]
    assert got.tokens() == (kinds, starts, ends)
    assert [got.token(i) for i in range(len(kinds))] == list(zip(kinds, starts, ends, strict=True))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(PIECES, WORDS, st.just(" E.a1 > 1 "), st.just(" AND E.a2 <= 3.5"), st.just(" AND\n"), st.just("\n")),
        min_size=8,
        max_size=48,
    ).map("".join)
)
@example(" AND ".join(f"E.a{i % 7} >= {i}.5" for i in range(20)))
@example(" AND ".join(f"E.a{i % 7} >= {i}.5" for i in range(20)) + " AND")
@example(" AND ".join(f"E.a{i % 7} >= {i}.5" for i in range(20)) + " AND AND E.a1 < 2")
@example(" AND ".join(f"E.a{i % 7} >= {i}.5" for i in range(20)) + "; E.a1 < 2 AND E.a2 < 3")
@example("E.a1 > 1 AND\n" * 12 + "E.b < (2 + 3) AND 'x' = E.s")
def test_the_cut_of_many_comparisons_is_the_kernels(text: str) -> None:
    """A query's comparisons after its last clause word are joined a run at a time: the same pieces, comparisons, token numbers and numbers as the kernel's."""
    text = "Query ID: q1\nSELECT * FROM E WHERE " + text
    if text.isascii():
        expected = kernel_pieces(text)
        assert same(python_pieces(text), expected), text
