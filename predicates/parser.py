"""Parser of the query language and the DDL (README, "The query language").

Hand-written because the grammar is small, errors must point at an exact column with a
message written for this language ("a missing AND between two comparisons?") and the
normalizer needs exact literals; a parsing library would add a dependency and a second
grammar notation for worse messages. The grammar lives in these tables:

* ``COMPARISON_OPERATORS`` - every accepted spelling of a comparison, thesis ones too;
* ``INFIX`` - binding powers of the infix operators (Pratt: conditions and arithmetic are
  one precedence grammar, so ``(B.x + 1) > 5`` and ``(B.x > 5 OR B.y < 2)`` need no look-ahead);
* ``CLAUSES`` - the clauses after FROM, each allowed once, in any order;
* ``DURATION_UNITS`` - the words of durations (the DDL's are in :mod:`predicates.ddl_grammar`).

Grammar (keywords case-insensitive, ``--`` comments)::

    file      := { [header | view] query [';'] }   -- a query also ends at the next
    header    := 'QUERY' 'ID' [':'] name            -- header, CREATE VIEW or SELECT
    view      := 'CREATE' 'VIEW' name 'AS'          -- a named query others read
    query     := 'SELECT' [stream_op] ('*' | item {',' item})
                 'FROM' stream [['AS'] alias] {',' stream [['AS'] alias]}
                 { 'WINDOW' cond | ('MAXWINDOW' | 'MAX' 'WINDOW') duration | 'WHERE' cond }
    item      := alias '.' '*' | expr [['AS'] name]
    cond/expr := Pratt over: OR < AND < NOT < comparison < + - < * / < unary -
    duration  := number [unit]
    ddl       := { ('REGISTER' | 'CREATE') 'STREAM' name '(' coldef {',' coldef} ')'
                   ['ALLOWED' 'LATENESS' duration] [';'] }
    coldef    := name type ['(' number ')']
    stream_op := 'ISTREAM' | 'DSTREAM' | 'RSTREAM'  -- before a select item (aggregate queries)
"""

from __future__ import annotations

from fractions import Fraction

from predicates.aggregate_grammar import AGGREGATE_FUNCTIONS, AggregateGrammar
from predicates.ast import (
    And,
    Arith,
    BoolLit,
    ColumnRef,
    Comparison,
    Condition,
    Duration,
    Expr,
    FromItem,
    Negate,
    Not,
    Number,
    Or,
    Query,
    SelectItem,
    StreamDecl,
    StringLit,
)
from predicates.ddl_grammar import DdlGrammar
from predicates.errors import QueryError, Source, Span, did_you_mean
from predicates.lexer import T, Token, literal_problem, string_value, tokenize

COMPARISON_OPERATORS: dict[str, str] = {
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
    "=": "=",
    "==": "=",
    "!=": "!=",
    "<>": "!=",
    # the thesis' spellings
    "LT": "<",
    "LT=": "<=",
    "LE": "<=",
    "GT": ">",
    "GT=": ">=",
    "GE": ">=",
}

# operator -> (left binding power, right binding power)
_OR, _AND, _NOT, _CMP, _ADD, _MUL, _UNARY = 10, 20, 30, 40, 50, 60, 70
INFIX: dict[str, tuple[int, int]] = {
    "OR": (_OR, _OR + 1),
    "AND": (_AND, _AND + 1),
    **{op: (_CMP, _CMP + 1) for op in COMPARISON_OPERATORS},
    "+": (_ADD, _ADD + 1),
    "-": (_ADD, _ADD + 1),
    "*": (_MUL, _MUL + 1),
    "/": (_MUL, _MUL + 1),
}

CLAUSES = ("WINDOW", "MAXWINDOW", "WHERE", "GROUP", "HAVING")

# aggregate functions of aggregate queries (the aggregation issue)
AGGREGATES = frozenset(AGGREGATE_FUNCTIONS)

MAX_LITERAL = Fraction(1.7976931348623157e308)

RESERVED = frozenset({"SELECT", "FROM", "WHERE", "WINDOW", "MAXWINDOW", "AND", "OR", "NOT", "AS"})

# How deeply expressions may nest (levels of operators, parentheses, NOT). Every later
# step (binding, normalization, evaluation) walks the tree recursively; this bound
# keeps them all far inside Python's recursion limit, so a 2,000-term sum or 1,000
# nested parentheses get a positioned error instead of a RecursionError.
MAX_DEPTH = 200

DURATION_UNITS: dict[str, Fraction] = {
    **dict.fromkeys(("MS", "MSEC", "MSECS", "MILLISECOND", "MILLISECONDS"), Fraction(1, 1000)),
    **dict.fromkeys(("S", "SEC", "SECS", "SECOND", "SECONDS"), Fraction(1)),
    **dict.fromkeys(("MIN", "MINS", "MINUTE", "MINUTES"), Fraction(60)),
    **dict.fromkeys(("H", "HR", "HRS", "HOUR", "HOURS"), Fraction(3600)),
}


def _is_condition(node: Expr | Condition) -> bool:
    return isinstance(node, (Comparison, And, Or, Not))


class _Parser(AggregateGrammar, DdlGrammar):
    reserved = RESERVED

    def __init__(self, source: Source) -> None:
        self.source = source
        self.tokens = tokenize(source)
        self.pos = 0
        self.pending_name: str | None = None
        self.nesting = 0  # open _pratt calls (parentheses, NOT, unary minus)

    # ------------------------------------------------------------ token helpers

    def peek(self, ahead: int = 0) -> Token:
        tok = self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]
        if tok.kind is T.ERROR:
            raise QueryError(tok.text, self.source, tok.span)
        return tok

    def advance(self) -> Token:
        tok = self.tokens[self.pos]
        if tok.kind is not T.EOF:
            self.pos += 1
        return tok

    def error(self, message: str, span: Span, hint: str | None = None) -> QueryError:
        return QueryError(message, self.source, span, hint=hint)

    def at_word(self, word: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.kind is T.IDENT and tok.upper == word

    def at_punct(self, text: str) -> bool:
        tok = self.peek()
        return tok.kind is T.PUNCT and tok.text == text

    def expect_punct(self, text: str, what: str) -> Token:
        tok = self.peek()
        if tok.kind is T.PUNCT and tok.text == text:
            return self.advance()
        raise self.error(f"expected '{text}' {what}, found {tok.describe()}", tok.span)

    def expect_word(self, word: str, what: str) -> Token:
        tok = self.peek()
        if tok.kind is T.IDENT and tok.upper == word:
            return self.advance()
        raise self.error(f"expected {word} {what}, found {tok.describe()}", tok.span)

    def expect_name(self, what: str) -> Token:
        tok = self.peek()
        if tok.kind is T.IDENT and tok.upper not in RESERVED:
            return self.advance()
        found = f"keyword {tok.upper}" if tok.kind is T.IDENT else tok.describe()
        raise self.error(f"expected {what}, found {found}", tok.span)

    def number(self, tok: Token) -> Fraction:
        """The exact value of a NUMBER token."""
        problem = literal_problem(tok.text)
        if problem is not None:
            shown = tok.text if len(tok.text) <= 30 else tok.text[:20] + f"... ({len(tok.text):,} characters)"
            raise self.error(f"number {shown} {problem}", tok.span)
        return Fraction(tok.text)

    def at_header(self) -> bool:
        return self.at_word("QUERY") and self.at_word("ID", 1)

    def at_maxwindow(self) -> bool:
        return self.at_word("MAXWINDOW") or (self.at_word("MAX") and self.at_word("WINDOW", 1))

    def at_name_not_clause(self) -> bool:
        """An identifier that can be an alias (not a keyword, not MAX WINDOW / QUERY ID)."""
        tok = self.peek()
        return (
            tok.kind is T.IDENT
            and tok.upper not in RESERVED
            and not self.at_maxwindow()
            and not self.at_header()
            and not self.at_create_view()
            and not self.at_group_or_having()
        )

    def at_group_or_having(self) -> bool:
        return self.at_word("HAVING") or (self.at_word("GROUP") and self.at_word("BY", 1))

    # ------------------------------------------------------------------ queries

    def parse_queries(self, first_position: int = 1) -> list[Query]:
        queries: list[Query] = []
        while self.peek().kind is not T.EOF:
            if self.at_punct(";"):
                self.advance()
                continue
            self.pending_name = None
            try:
                queries.append(self.parse_query())
            except QueryError as err:
                raise err.in_query(self.pending_name or str(first_position + len(queries))) from None
        return queries

    def parse_query(self) -> Query:
        start = self.peek().start
        name: str | None = None
        name_span: Span | None = None
        if self.at_header():
            self.advance()
            self.advance()
            if self.at_punct(":"):
                self.advance()
            tok = self.peek()
            if tok.kind is T.IDENT or tok.kind is T.NUMBER:
                name = tok.text
            elif tok.kind is T.STRING:
                name = string_value(tok)
            else:
                raise self.error(f"expected a query id after 'Query ID:', found {tok.describe()}", tok.span)
            name_span = tok.span
            self.pending_name = name
            self.advance()
        view_span = self.parse_view_head(name)
        if view_span is not None:
            name, name_span = self.source.text[view_span.start : view_span.end], view_span
        tok = self.peek()
        if not self.at_word("SELECT"):
            if name is not None and tok.kind is T.EOF:
                raise self.error(f"query header '{name}' is not followed by a query", name_span or tok.span)
            raise self.error(f"expected SELECT, found {tok.describe()}", tok.span)
        self.advance()
        stream_op = self.parse_stream_op()
        select = self.parse_select_list()
        self.expect_word("FROM", "after the SELECT list")
        from_ = self.parse_from_list()
        clauses: dict[str, object] = {}
        clause_spans: dict[str, Span] = {}
        while True:
            tok = self.peek()
            if self.at_maxwindow():
                clause = "MAXWINDOW"
                self.advance()
                if tok.upper == "MAX":
                    self.advance()
            elif self.at_group_or_having() or (tok.kind is T.IDENT and tok.upper in ("WINDOW", "WHERE")):
                clause = tok.upper
                self.advance()
                if clause == "GROUP":
                    self.advance()
            else:
                break
            if clause in clauses:
                raise self.error(
                    f"{clause} is given twice in this query",
                    tok.span,
                    hint=f"the first {clause} is at line {self.source.line_col(clause_spans[clause].start)[0]}",
                )
            clause_spans[clause] = tok.span
            if clause == "MAXWINDOW":
                clauses[clause] = self.parse_duration()
            elif clause == "GROUP":
                clauses[clause] = self.parse_group_by()
            else:
                clauses[clause] = self.parse_condition()
        end_tok = self.tokens[self.pos - 1]
        tok = self.peek()
        if tok.kind is T.PUNCT and tok.text == ";":
            self.advance()
        elif not (tok.kind is T.EOF or self.at_header() or self.at_word("SELECT") or self.at_create_view()):
            raise self._end_of_query_error(tok)
        return Query(
            name=name,
            name_span=name_span,
            select=select,
            from_=from_,
            window=clauses.get("WINDOW"),  # type: ignore[arg-type]
            maxwindow=clauses.get("MAXWINDOW"),  # type: ignore[arg-type]
            where=clauses.get("WHERE"),  # type: ignore[arg-type]
            span=Span(start, end_tok.end),
            source=self.source,
            group_by=clauses.get("GROUP", ()),  # type: ignore[arg-type]
            having=clauses.get("HAVING"),  # type: ignore[arg-type]
            stream_op=None if stream_op is None else stream_op.upper,
            stream_op_span=None if stream_op is None else stream_op.span,
            view_span=view_span,
        )

    def parse_group_by(self) -> tuple[Expr, ...]:
        items = [self.parse_expr()]
        while self.at_punct(","):
            self.advance()
            items.append(self.parse_expr())
        return tuple(items)

    def _end_of_query_error(self, tok: Token) -> QueryError:
        prev = self.tokens[self.pos - 1]
        if tok.kind in (T.IDENT, T.NUMBER, T.STRING) and prev.kind in (T.IDENT, T.NUMBER, T.STRING, T.PUNCT):
            return self.error(
                f"expected AND, OR or the end of the query, found {tok.describe()}",
                tok.span,
                hint="is an AND missing between two comparisons?",
            )
        if tok.kind is T.IDENT and tok.upper in ("AND", "OR"):
            return self.error(f"{tok.upper} is not followed by a condition", tok.span)
        return self.error(f"expected the end of the query, found {tok.describe()}", tok.span)

    def parse_select_list(self) -> tuple[SelectItem, ...] | None:
        tok = self.peek()
        if tok.kind is T.OP and tok.text == "*":
            self.advance()
            return None
        items = [self.parse_select_item()]
        while self.at_punct(","):
            self.advance()
            items.append(self.parse_select_item())
        return tuple(items)

    def parse_select_item(self) -> SelectItem:
        tok = self.peek()
        nxt, after = self.peek(1), self.peek(2)
        if tok.kind is T.IDENT and nxt.kind is T.PUNCT and nxt.text == "." and after.kind is T.OP and after.text == "*":
            self.pos += 3
            return SelectItem(None, None, Span(tok.start, after.end), star_of=tok.text)
        expr = self.parse_expr()
        name: str | None = None
        end = expr.span.end
        if self.at_word("AS"):
            self.advance()
            name_tok = self.expect_name("a name after AS")
            name, end = name_tok.text, name_tok.end
        elif self.at_name_not_clause():
            name_tok = self.advance()
            name, end = name_tok.text, name_tok.end
        return SelectItem(expr, name, Span(expr.span.start, end))

    def parse_from_list(self) -> tuple[FromItem, ...]:
        items = [self.parse_from_item()]
        while self.at_punct(","):
            self.advance()
            items.append(self.parse_from_item())
        return tuple(items)

    def parse_from_item(self) -> FromItem:
        tok = self.expect_name("a stream name")
        alias: str | None = None
        end = tok.end
        window = self.parse_window() if self.at_punct("[") else None
        if window is not None:
            end = window.span.end
        if self.at_word("AS"):
            self.advance()
            alias_tok = self.expect_name("an alias after AS")
            alias, end = alias_tok.text, alias_tok.end
        elif self.at_name_not_clause():
            alias_tok = self.advance()
            alias, end = alias_tok.text, alias_tok.end
        if window is None and self.at_punct("["):
            window = self.parse_window()
        return FromItem(tok.text, alias, Span(tok.start, end), window)

    # --------------------------------------------------------------- durations

    def parse_duration(self, ends: tuple[str, ...] = ()) -> Duration:
        """``number [unit]``; a word of ``ends`` after the number is not its unit."""
        tok = self.peek()
        if tok.kind is not T.NUMBER:
            raise self.error(f"expected a duration such as '20 sec', found {tok.describe()}", tok.span)
        value = self.number(tok)
        self.advance()
        if value > MAX_LITERAL:
            raise self.error(f"duration {tok.text} is too large", tok.span)
        end = tok.end
        scale = Fraction(1)
        # a word that ends the duration is not its unit: a window's SLIDE ([RANGE 10
        # SLIDE 5]), or a word of ``ends`` (the next DDL declaration)
        if self.at_name_not_clause() and not self.at_word("SLIDE") and self.peek().upper not in ends:
            unit_tok = self.advance()
            unit = unit_tok.upper
            if unit not in DURATION_UNITS:
                raise self.error(
                    f"unknown duration unit '{unit_tok.text}'"
                    + did_you_mean(unit_tok.text, [u.lower() for u in DURATION_UNITS]),
                    unit_tok.span,
                    hint="durations take ms, s (sec, seconds), min (minutes) or h (hours); a bare number is seconds",
                )
            scale = DURATION_UNITS[unit]
            end = unit_tok.end
        text = self.source.text[tok.start : end]
        return Duration(value * scale, text, Span(tok.start, end))

    # ------------------------------------------------- conditions and arithmetic

    def parse_condition(self) -> Condition:
        node = self.pratt(0)
        if not _is_condition(node):
            raise self.error(
                "expected a condition (a comparison such as B.pressure < 90), found an expression",
                node.span,
            )
        return node  # type: ignore[return-value]

    def parse_expr(self) -> Expr:
        node = self.pratt(0)
        if _is_condition(node):
            raise self.error("expected a value, found a condition", node.span)
        return node  # type: ignore[return-value]

    def infix_operator(self, tok: Token) -> str | None:
        if tok.kind is T.OP:
            return tok.text.upper() if tok.text.upper() in INFIX else None
        if tok.kind is T.IDENT and tok.upper in INFIX:
            return tok.upper
        return None

    def pratt(self, min_bp: int) -> Expr | Condition:
        return self._pratt(min_bp)[0]

    def _pratt(self, min_bp: int) -> tuple[Expr | Condition, int]:
        """The expression and its depth (the longest chain of operators in it)."""
        left, depth = self.prefix()
        while True:
            tok = self.peek()
            op = self.infix_operator(tok)
            if op is None:
                break
            lbp, rbp = INFIX[op]
            if lbp < min_bp:
                break
            self.advance()
            right, right_depth = self._pratt(rbp)
            combined = self.combine(op, tok, left, right)
            # AND and OR lists are flat: a side that was merged into the new list adds no level
            depth = max(
                d if isinstance(combined, (And, Or)) and isinstance(side, type(combined)) else d + 1
                for side, d in ((left, depth), (right, right_depth))
            )
            if depth > MAX_DEPTH:
                raise self._too_deep(tok.span)
            left = combined
        return left, depth

    def _too_deep(self, span: Span) -> QueryError:
        return self.error(
            f"the expression is nested too deeply (more than {MAX_DEPTH} levels of operators or parentheses)",
            span,
            hint="each operator of a chain such as a + b + c counts one level; split the condition or simplify it",
        )

    def prefix(self) -> tuple[Expr | Condition, int]:
        tok = self.peek()
        if (
            (tok.kind is T.IDENT and tok.upper == "NOT")
            or (tok.kind is T.OP and tok.text in ("-", "+"))
            or (tok.kind is T.PUNCT and tok.text == "(")
        ):
            # these recurse in the parser itself, whatever depth the tree gets
            self.nesting += 1
            try:
                if self.nesting > MAX_DEPTH:
                    raise self._too_deep(tok.span)
                node, depth = self.nested(tok)
                if depth > MAX_DEPTH:
                    raise self._too_deep(tok.span)
                return node, depth
            finally:
                self.nesting -= 1
        return self.leaf(tok), 1

    def nested(self, tok: Token) -> tuple[Expr | Condition, int]:
        """NOT, unary minus or plus, or parentheses, and what they apply to."""
        if tok.kind is T.IDENT and tok.upper == "NOT":
            self.advance()
            operand, depth = self._pratt(_NOT)
            if not _is_condition(operand):
                raise self.error("NOT applies to a condition, not to a value", operand.span)
            return Not(operand, Span(tok.start, operand.span.end)), depth + 1  # type: ignore[arg-type]
        if tok.kind is T.OP and tok.text in ("-", "+"):
            self.advance()
            operand, depth = self._pratt(_UNARY)
            if _is_condition(operand):
                raise self.error(f"unary '{tok.text}' applies to a value, not to a condition", operand.span)
            if tok.text == "+":
                return operand, depth
            if isinstance(operand, Number):
                return Number(-operand.value, "-" + operand.text, Span(tok.start, operand.span.end)), depth
            return Negate(operand, Span(tok.start, operand.span.end)), depth + 1  # type: ignore[arg-type]
        self.advance()  # the '('
        inner, depth = self._pratt(0)
        close = self.peek()
        if not (close.kind is T.PUNCT and close.text == ")"):
            raise self.error(
                f"expected ')' to close the '(' at column {self.source.line_col(tok.start)[1]},"
                f" found {close.describe()}",
                close.span,
            )
        self.advance()
        return inner, depth

    def leaf(self, tok: Token) -> Expr | Condition:
        """A number, string, boolean or column reference."""
        if tok.kind is T.NUMBER:
            value = self.number(tok)
            self.advance()
            if abs(value) > MAX_LITERAL:
                raise self.error(f"number {tok.text} is too large (the largest is about 1.8e308)", tok.span)
            return Number(value, tok.text, tok.span)
        if tok.kind is T.STRING:
            self.advance()
            return StringLit(string_value(tok), tok.span)
        if tok.kind is T.IDENT:
            word = tok.upper
            if word in ("TRUE", "FALSE"):
                self.advance()
                return BoolLit(word == "TRUE", tok.span)
            if word in RESERVED:
                raise self.error(f"expected a value, found keyword {word}", tok.span)
            if self.peek(1).kind is T.PUNCT and self.peek(1).text == "(":
                if word in AGGREGATES:
                    return self.aggregate(tok)
                raise self.unknown_function(tok)
            self.advance()
            if self.at_punct("."):
                self.advance()
                col = self.peek()
                if col.kind is not T.IDENT:
                    raise self.error(f"expected a column name after '{tok.text}.', found {col.describe()}", col.span)
                self.advance()
                return ColumnRef(tok.text, col.text, Span(tok.start, col.end))
            return ColumnRef(None, tok.text, tok.span)
        if tok.kind is T.EOF:
            raise self.error("the query ends where a value was expected", tok.span)
        raise self.error(f"expected a value, found {tok.describe()}", tok.span)

    def combine(self, op: str, tok: Token, left: Expr | Condition, right: Expr | Condition) -> Expr | Condition:
        span = left.span.cover(right.span)
        if op in ("AND", "OR"):
            for side in (left, right):
                if not _is_condition(side):
                    raise self.error(f"{op} joins conditions; this is a value, not a comparison", side.span)
            cls = And if op == "AND" else Or
            items: list[Condition] = []
            for side in (left, right):
                items.extend(side.items if isinstance(side, cls) else (side,))  # type: ignore[arg-type]
            return cls(tuple(items), span)
        if op in COMPARISON_OPERATORS:
            if isinstance(left, Comparison):
                raise self.error(
                    "comparisons cannot be chained; join them with AND",
                    tok.span,
                    hint="write 'a < b AND b < c' instead of 'a < b < c'",
                )
            for side in (left, right):
                if _is_condition(side):
                    raise self.error("a condition cannot be compared; compare values", side.span)
            return Comparison(COMPARISON_OPERATORS[op], left, right, span, tok.span)  # type: ignore[arg-type]
        for side in (left, right):
            if _is_condition(side):
                raise self.error(f"'{op}' applies to values, not to conditions", side.span)
        return Arith(op, left, right, span)  # type: ignore[arg-type]


def parse_queries(text: str, name: str = "<string>", *, first_position: int = 1) -> list[Query]:
    """Parse a query file: zero or more queries. Errors name the query they are in
    (its header, or its 1-based position counted from ``first_position``)."""
    return _Parser(Source(text, name)).parse_queries(first_position)


def parse_query(text: str, name: str = "<string>") -> Query:
    """Parse exactly one query."""
    parser = _Parser(Source(text, name))
    queries = parser.parse_queries()
    if len(queries) != 1:
        span = queries[1].span if len(queries) > 1 else Span(0, len(text))
        raise QueryError(f"expected one query, found {len(queries)}", parser.source, span)
    return queries[0]


def parse_ddl(text: str, name: str = "<string>") -> list[StreamDecl]:
    """Parse stream declarations."""
    return _Parser(Source(text, name)).parse_ddl()


def parse_duration(text: str, name: str = "<string>") -> Fraction:
    """Parse a duration such as ``'500 ms'`` into seconds."""
    parser = _Parser(Source(text, name))
    duration = parser.parse_duration()
    tok = parser.peek()
    if tok.kind is not T.EOF:
        raise parser.error(f"unexpected {tok.describe()} after the duration", tok.span)
    return duration.seconds
