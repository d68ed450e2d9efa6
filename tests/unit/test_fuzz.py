"""Fuzzing the language layer: whatever the text, the only error is QueryError.

Random text, random token soup, and random mutations (deletions, insertions,
duplications, swaps) of the thesis' queries go through the whole front end (lexer,
parser, binder, normalizer). Each either compiles or raises QueryError with a position
inside the text; any other exception is a bug.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from predicates import Catalog, QueryError
from predicates.frontend import compile_queries
from tests.conftest import WORKLOADS

CATALOG = Catalog.from_ddl((WORKLOADS / "streams.ddl").read_text())
THESIS = [p.read_text() for p in sorted(WORKLOADS.glob("fig*.mqo")) if "fig5_1_" not in p.name]
TOKENS = [
    "SELECT", "FROM", "WHERE", "WINDOW", "MAXWINDOW", "Max", "Window", "AND", "OR", "NOT", "AS", "Query", "ID",
    ":", "*", ",", ".", ";", "(", ")", "<", "<=", ">", ">=", "=", "!=", "<>", "lt", "lt=", "gt", "gt=", "+", "-",
    "/", "B", "H", "T", "K", "B.pressure", "H.vib", "T.fluct", "B.ts", "H.ts", "pressure", "0", "2", "0.5", "1e3",
    "20", "sec", "ms", "minute", "'x'", "TRUE", "--", "\n", " ",
]  # fmt: skip


def compiles_or_reports(text: str) -> None:
    try:
        compile_queries(text, CATALOG, source_name="fuzz.mqo")
    except QueryError as err:
        rendered = str(err)  # rendering must not fail either
        assert rendered.startswith("fuzz.mqo")
        if err.span is not None:
            assert 0 <= err.span.start <= len(text)


@given(st.text(max_size=200))
@settings(max_examples=400, deadline=None)
def test_random_text(text):
    compiles_or_reports(text)


@given(st.lists(st.sampled_from(TOKENS), max_size=40))
@settings(max_examples=600, deadline=None)
def test_token_soup(tokens):
    compiles_or_reports(" ".join(tokens))


@st.composite
def mutated_thesis_query(draw):
    text = draw(st.sampled_from(THESIS))
    for _ in range(draw(st.integers(1, 4))):
        if not text:
            break
        i = draw(st.integers(0, len(text) - 1))
        j = draw(st.integers(i, min(len(text), i + 12)))
        action = draw(st.sampled_from(["delete", "insert", "duplicate", "swap", "token"]))
        if action == "delete":
            text = text[:i] + text[j:]
        elif action == "insert":
            text = text[:i] + draw(st.text(max_size=5)) + text[i:]
        elif action == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif action == "swap":
            k = draw(st.integers(0, len(text) - 1))
            chars = list(text)
            chars[i], chars[k] = chars[k], chars[i]
            text = "".join(chars)
        else:
            text = text[:i] + " " + draw(st.sampled_from(TOKENS)) + " " + text[j:]
    return text


@given(mutated_thesis_query())
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_thesis_queries(text):
    compiles_or_reports(text)
