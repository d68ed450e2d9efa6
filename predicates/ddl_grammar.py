"""The DDL's part of the grammar: stream declarations.

A mixin of the parser (:class:`predicates.parser._Parser`), kept apart as the
aggregate grammar is::

    ddl       := { ('REGISTER' | 'CREATE') 'STREAM' name '(' coldef {',' coldef} ')'
                   ['ALLOWED' 'LATENESS' duration] [';'] }
    coldef    := name type ['(' number ')']
    view      := 'CREATE' 'VIEW' name 'AS'   -- before a query's SELECT (predicates.views)
"""

from __future__ import annotations

from typing import Any

from predicates.ast import ColumnDecl, ColumnType, Duration, StreamDecl
from predicates.errors import Span, did_you_mean
from predicates.lexer import T

TYPE_NAMES: dict[str, ColumnType] = {
    "INTEGER": ColumnType.INTEGER,
    "INT": ColumnType.INTEGER,
    "BIGINT": ColumnType.INTEGER,
    "FLOAT": ColumnType.FLOAT,
    "DOUBLE": ColumnType.FLOAT,
    "REAL": ColumnType.FLOAT,
    "BYTE": ColumnType.BYTE,
    "CHAR": ColumnType.STRING,
    "VARCHAR": ColumnType.STRING,
    "STRING": ColumnType.STRING,
    "TEXT": ColumnType.STRING,
    "BOOLEAN": ColumnType.BOOLEAN,
    "BOOL": ColumnType.BOOLEAN,
}
_SIZED_TYPES = frozenset({"CHAR", "VARCHAR"})


class DdlGrammar:
    # provided by the parser
    source: Any
    peek: Any
    advance: Any
    error: Any
    at_word: Any
    at_punct: Any
    expect_punct: Any
    expect_word: Any
    expect_name: Any
    parse_duration: Any
    reserved: frozenset[str]  # words of the query language, no column's name
    pending_name: str | None

    def at_create_view(self) -> bool:
        return bool(self.at_word("CREATE") and self.at_word("VIEW", 1))

    def parse_view_head(self, header: str | None) -> Span | None:
        """``CREATE VIEW name AS`` before a query (the span of the name), or None."""
        if not self.at_create_view():
            return None
        if header is not None:
            raise self.error(
                "a view is named by CREATE VIEW, not by a 'Query ID:' header",
                self.peek().span,
                hint=f"drop the header 'Query ID: {header}'",
            )
        self.advance()
        self.advance()
        view = self.expect_name("a view name after CREATE VIEW")
        self.pending_name = view.text
        self.expect_word("AS", f"after CREATE VIEW {view.text}")
        return view.span  # type: ignore[no-any-return]

    def parse_ddl(self) -> list[StreamDecl]:
        decls: list[StreamDecl] = []
        while self.peek().kind is not T.EOF:
            if self.at_punct(";"):
                self.advance()
                continue
            decls.append(self.parse_stream_decl())
        return decls

    def parse_stream_decl(self) -> StreamDecl:
        tok = self.peek()
        if not (self.at_word("REGISTER") or self.at_word("CREATE")):
            raise self.error(f"expected REGISTER STREAM, found {tok.describe()}", tok.span)
        self.advance()
        kind = self.peek()
        if kind.kind is T.IDENT and kind.upper == "RELATION":
            raise self.error("relations are not supported; declare a STREAM", kind.span)
        self.expect_word("STREAM", f"after {tok.upper}")
        name = self.expect_name("a stream name")
        self.expect_punct("(", f"after the name of stream {name.text}")
        columns = [self.parse_column_decl()]
        while self.at_punct(","):
            self.advance()
            columns.append(self.parse_column_decl())
        close = self.expect_punct(")", f"to end the columns of stream {name.text}")
        end = close.end
        lateness: Duration | None = None
        if self.at_word("ALLOWED"):
            self.advance()
            self.expect_word("LATENESS", f"after ALLOWED in the declaration of stream {name.text}")
            if self.at_word("REGISTER") or self.at_word("CREATE"):  # not a unit: the next declaration
                nxt = self.peek()
                raise self.error(f"expected a duration such as '5 sec', found {nxt.describe()}", nxt.span)
            lateness = self.parse_duration(ends=("REGISTER", "CREATE"))  # the next declaration (no ';')
            end = lateness.span.end
        if self.at_punct(";"):
            self.advance()
        elif self.peek().kind is not T.EOF and not (self.at_word("REGISTER") or self.at_word("CREATE")):
            nxt = self.peek()
            hint = "a stream's own lateness is written ALLOWED LATENESS 5 sec" if nxt.upper == "LATENESS" else None
            raise self.error(
                f"expected ';' after the declaration of stream {name.text}, found {nxt.describe()}", nxt.span, hint
            )
        return StreamDecl(name.text, tuple(columns), Span(tok.start, end), self.source, lateness)

    def parse_column_decl(self) -> ColumnDecl:
        name = self.peek()
        if name.kind is not T.IDENT:
            raise self.error(f"expected a column name, found {name.describe()}", name.span)
        if name.upper in self.reserved:
            raise self.error(
                f"'{name.text}' is a reserved word of the query language and cannot name a column",
                name.span,
                hint=f"rename the column (quoting does not help); reserved: {', '.join(sorted(self.reserved))}",
            )
        self.advance()
        type_tok = self.peek()
        if type_tok.kind is not T.IDENT:
            raise self.error(f"expected a type for column {name.text}, found {type_tok.describe()}", type_tok.span)
        self.advance()
        type_name = type_tok.upper
        if type_name not in TYPE_NAMES:
            raise self.error(
                f"unknown type '{type_tok.text}' for column {name.text}"
                + did_you_mean(type_tok.text, list(TYPE_NAMES)),
                type_tok.span,
                hint="types are INTEGER, FLOAT, BYTE, CHAR(n), VARCHAR, STRING, TEXT, BOOLEAN",
            )
        length: int | None = None
        end = type_tok.end
        if self.at_punct("("):
            if type_name not in _SIZED_TYPES:
                raise self.error(f"type {type_name} takes no length", self.peek().span)
            self.advance()
            num = self.peek()
            if num.kind is not T.NUMBER or not num.text.isdigit():
                raise self.error(f"expected a whole-number length, found {num.describe()}", num.span)
            if len(num.text) > 9:
                raise self.error(f"length {num.text[:20]}... is too large", num.span)
            self.advance()
            length = int(num.text)
            end = self.expect_punct(")", "after the length").end
        return ColumnDecl(name.text, TYPE_NAMES[type_name], Span(name.start, end), length)
