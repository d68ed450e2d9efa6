"""The lexer reads a text run by run (the tokens up to each number, cached by their
text: predicates.lexer.token_runs and run_matches); that reading is the lexer's own,
a match of its expression at a time, on any text: tokens, groups, bounds and the
error token's place."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from predicates import lexer
from predicates.lexer import matches_one_by_one, token_matches, token_runs

# pieces that sit next to numbers in every way the lexer may read them
PIECES = st.sampled_from(
    ["1", "2.5", ".5", "7.", "1e5", "1e", "3E-2", "e5", "a", "a1", "_x", ".", "..", "-", "--", "-- c\n", "\n",
     " ", "\t", "lt=", "gt=", "LT", "=", "<", "<=", ">", "*", "'s'", "'", "''", '"q"', '"', "(", ")", ";", ":",
     "$", "é", " \n ", "\r\n", "\n\t", "AND", "E.a19", " AND ", "WHERE", "9x", "0.1.2"]
)  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(st.lists(PIECES, max_size=14))
@example(["a", ".5"])
@example(["1e", "5"])
@example([".", "5"])
@example(["-- c", "5"])
@example(["lt=", "5"])
@example(["a", " \n ", "1"])
@example(["-- c\n", " ", "x"])
def test_run_by_run_is_the_lexers_reading(pieces: list[str]) -> None:
    text = "".join(pieces)
    # twice: the second reading takes the runs from the cache
    assert token_matches(text) == matches_one_by_one(text)
    assert token_matches(text) == matches_one_by_one(text)


@given(st.lists(PIECES, max_size=14))
def test_runs_tile_the_text_or_there_is_an_error(pieces: list[str]) -> None:
    text = "".join(pieces)
    runs = token_runs(text)
    groups, _, _ = matches_one_by_one(text)
    if runs is None:
        assert groups[-1] == "error"
    else:
        assert "".join(run + number for run, number in runs) == text
        assert "error" not in groups


@settings(max_examples=600, deadline=None)
@given(st.lists(PIECES, max_size=14))
@example(["a", " = ", "52"])
@example(["a", "  \n", ".5"])
@example(["a", "\t \t", "\n"])
def test_the_runs_without_possessive_repeats_are_the_same(pieces: list[str]) -> None:
    """The expression taken where the interpreter mishandles possessive repeats (some
    Python 3.11 releases) reads every text as the lexer does, run for run."""
    text = "".join(pieces)
    plain = re.compile(lexer._RUN_PLAIN)
    runs = plain.findall(text)
    tiles = sum(len(r) + len(n) for r, n in runs) == len(text)
    if lexer._RUN_RE.pattern == lexer._RUN_KEPT:  # (this interpreter reads both right)
        assert runs == lexer._RUN_RE.findall(text)
    groups, starts, ends = matches_one_by_one(text)
    if not tiles:
        assert groups[-1] == "error"
        return
    numbers = [(start, end) for group, start, end in zip(groups, starts, ends, strict=True) if group == "number"]
    at, found = 0, []
    for run, number in runs:
        at += len(run)
        if number:
            found.append((at, at + len(number)))
            at += len(number)
    assert found == numbers  # (each run ends where the lexer reads a number, and takes it whole)
