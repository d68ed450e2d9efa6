"""The aggregation issue's part of the grammar: windows in FROM and aggregate calls.

A mixin of the parser (:class:`predicates.parser._Parser`), kept apart so the parser
stays near its size::

    window    := '[' ( 'ROWS' n ['SLIDE' m]
                     | 'RANGE' 'UNBOUNDED' slide
                     | 'RANGE' duration [slide] ) ']'
    slide     := 'SLIDE' duration | ',' 'FREQUENCY' duration
    aggregate := ('COUNT' '(' '*' ')') | func '(' expr ')'
    stream_op := 'ISTREAM' | 'DSTREAM' | 'RSTREAM'   -- right after SELECT
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from predicates.ast import Aggregate, Expr, WindowSpec
from predicates.errors import Span, did_you_mean
from predicates.lexer import T, Token

# The aggregate functions of aggregate queries, in the order error messages list them.
# The query language has no other functions, so any other name before '(' is an error.
AGGREGATE_FUNCTIONS = ("COUNT", "SUM", "AVG", "MIN", "MAX", "STDDEV", "VARIANCE")
STREAM_OPS = ("ISTREAM", "DSTREAM", "RSTREAM")  # CQL's relation-to-stream operators, after SELECT


class AggregateGrammar:
    # provided by the parser
    peek: Any
    advance: Any
    error: Any
    at_word: Any
    at_punct: Any
    expect_punct: Any
    parse_duration: Any
    parse_expr: Any

    def parse_window(self) -> WindowSpec:
        """``[RANGE d [SLIDE s | , FREQUENCY s]]``, ``[RANGE UNBOUNDED SLIDE s]``,
        ``[ROWS n [SLIDE m]]``."""
        open_tok = self.advance()
        kind_tok = self.peek()
        if self.at_word("ROWS"):
            self.advance()
            size = self._row_count("ROWS")
            slide = size
            if self._at_slide():
                slide = self._row_count("SLIDE")
            close = self.expect_punct("]", "to end the window")
            return WindowSpec("rows", size, slide, Span(open_tok.start, close.end))
        if not self.at_word("RANGE"):
            raise self.error(
                f"expected RANGE or ROWS in a window, found {kind_tok.describe()}",
                kind_tok.span,
                hint="windows are [RANGE 10 min SLIDE 1 min], [RANGE 1 h], [ROWS 50] or [RANGE UNBOUNDED SLIDE 1 min]",
            )
        self.advance()
        if self.at_word("UNBOUNDED"):
            unbounded = self.advance()
            if not self._at_slide():
                raise self.error(
                    "a landmark window [RANGE UNBOUNDED] needs SLIDE (how often it reports)", unbounded.span
                )
            slide = self._positive_duration("SLIDE")
            close = self.expect_punct("]", "to end the window")
            return WindowSpec("unbounded", None, slide, Span(open_tok.start, close.end))
        size = self._positive_duration("RANGE")
        slide = self._positive_duration("SLIDE") if self._at_slide() else size
        close = self.expect_punct("]", "to end the window")
        return WindowSpec("range", size, slide, Span(open_tok.start, close.end))

    def _at_slide(self) -> bool:
        """SLIDE, or CSQL's ', FREQUENCY' (a synonym)."""
        if self.at_word("SLIDE"):
            self.advance()
            return True
        if self.at_punct(",") and self.at_word("FREQUENCY", 1):
            self.advance()
            self.advance()
            return True
        return False

    def _positive_duration(self, what: str) -> Fraction:
        duration = self.parse_duration()
        if duration.seconds <= 0:
            raise self.error(f"{what} must be longer than zero", duration.span)
        seconds: Fraction = duration.seconds
        return seconds

    def _row_count(self, what: str) -> Fraction:
        tok = self.peek()
        if tok.kind is not T.NUMBER or not tok.text.isdigit() or int(tok.text) <= 0 or len(tok.text) > 12:
            raise self.error(
                f"{what} of a ROWS window takes a whole number of rows above zero, found {tok.describe()}", tok.span
            )
        self.advance()
        return Fraction(int(tok.text))

    def parse_stream_op(self) -> Token | None:
        """``ISTREAM``, ``DSTREAM`` or ``RSTREAM`` right after SELECT when a select
        item follows it (``SELECT istream FROM S`` still selects a column so named)."""
        tok, nxt = self.peek(), self.peek(1)
        if tok.kind is not T.IDENT or tok.upper not in STREAM_OPS:
            return None
        starts_item = (
            (nxt.kind is T.IDENT and nxt.upper not in ("FROM", "AS"))
            or nxt.kind in (T.NUMBER, T.STRING)
            or (nxt.kind is T.OP and nxt.text in ("*", "-"))
            or (nxt.kind is T.PUNCT and nxt.text == "(")
        )
        return self.advance() if starts_item else None

    def unknown_function(self, tok: Token) -> Exception:
        """The error for ``name(`` where name is no aggregate function (``MEDIAN(S.temp)``):
        without it the parser would read a column ``MEDIAN`` and stumble on the '('."""
        supported = ", ".join(AGGREGATE_FUNCTIONS)
        error: Exception = self.error(
            f"unknown function {tok.text}{did_you_mean(tok.text, AGGREGATE_FUNCTIONS)}; "
            f"the functions are the aggregates {supported}",
            tok.span,
        )
        return error

    def aggregate(self, tok: Token) -> Aggregate:
        self.advance()
        self.advance()  # the '('
        arg: Expr | None = None
        inner = self.peek()
        if inner.kind is T.OP and inner.text == "*":
            if tok.upper != "COUNT":
                raise self.error(f"only COUNT takes '*'; {tok.upper} takes a column", inner.span)
            self.advance()
        else:
            arg = self.parse_expr()
        close = self.expect_punct(")", f"to close {tok.upper}(")
        return Aggregate(tok.upper, arg, Span(tok.start, close.end))
