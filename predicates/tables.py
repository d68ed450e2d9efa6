"""Tables: ``CREATE TABLE name (col TYPE, ...) KEY (cols)``, reference data joined
with streams as of each tuple's ts (mqo.tables holds the rows).

A table is declared among queries (a query file, ``register_queries``). The
statements are cut out of the text before the parser sees it (:func:`split_tables`:
each is replaced by blanks, so every position in the text stays where it was) and
the text's queries are bound against a copy of the catalog holding the tables
(:attr:`~predicates.catalog.StreamSchema.table_key` marks a table's schema).

A query reading a table (:func:`compile_table_query`) is compiled as the query over
its streams (the table members taken out: the engine matches it as any query), plus
what joins each result with the tables (:class:`TableJoin`): the table's full KEY
must be bound by equality with stream columns, each as a conjunct of WHERE (a
temporal join: Flink's ``FOR SYSTEM_TIME AS OF``); the conjuncts that read one table
member alone are that member's filter (decided once per row version, for every
query); the other conjuncts reading a table are decided on the joined result. The
query's results keep its SELECT (a table member's columns included); ``ids`` name
the stream members only.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from fractions import Fraction

from predicates.ast import And, ColumnRef, Comparison, Condition, Duration, Query
from predicates.catalog import Catalog, Column, StreamSchema
from predicates.ddl_grammar import TYPE_NAMES
from predicates.errors import QueryError, Source, Span, did_you_mean
from predicates.lexer import T, Token, tokenize
from predicates.normalize import ColumnOrder, normalize, push_not
from predicates.parser import RESERVED
from predicates.records import CompiledQuery, from_normalized
from predicates.semantic import BoundQuery, bind, referenced_aliases

_CREATE_TABLE = re.compile(r"\bcreate\s+table\b", re.IGNORECASE)
_SIZED = frozenset({"CHAR", "VARCHAR"})
_NEXT_STATEMENT = frozenset({"QUERY", "SELECT", "CREATE"})


@dataclass(frozen=True)
class TableDefinition:
    """A compiled ``CREATE TABLE``: the table's schema (its KEY in ``table_key``) and text."""

    name: str
    schema: StreamSchema
    text: str
    span: Span | None = dataclasses.field(default=None, compare=False)  # where it stands in its source

    @property
    def key(self) -> tuple[str, ...]:
        return self.schema.table_key

    def renamed(self, name: str) -> TableDefinition:
        if name != self.name:
            raise QueryError(f"table {self.name} is named by its CREATE TABLE; it cannot be registered as {name}")
        return self


@dataclass(frozen=True)
class TableJoin:
    """One table member of a query: ``alias`` reads ``table``; the key's columns (in
    KEY order) equal the stream columns ``key_refs``; ``filter`` is the conjunction of
    the conjuncts that read this member alone (negation normal form), or None."""

    alias: str
    table: str
    key_refs: tuple[ColumnRef, ...]
    filter: Condition | None

    @property
    def as_of_aliases(self) -> tuple[str, ...]:
        """The stream members whose ts the table is read as of (the newest of them)."""
        return tuple(dict.fromkeys(ref.alias for ref in self.key_refs if ref.alias is not None))


@dataclass(frozen=True)
class TableQuery:
    """A query reading tables: the query over its streams (registered as any match
    query, its SELECT the whole query's), its table members and the conditions decided
    on the joined result (``residuals``, negation normal form)."""

    query: CompiledQuery
    joins: tuple[TableJoin, ...]
    residuals: tuple[Condition, ...]

    @property
    def name(self) -> str:
        return self.query.name

    def renamed(self, name: str) -> TableQuery:
        return dataclasses.replace(self, query=self.query.renamed(name))


# ------------------------------------------------------------------ statements


def table_names(catalog: Catalog) -> list[str]:
    """The catalog's tables' names, lowercased (for :func:`mentions_table`)."""
    return [s.name.lower() for s in catalog if s.table_key]


def mentions_table(text: str, catalog: Catalog, names: list[str] | None = None) -> bool:
    """Whether ``text`` may declare or read a table (False: it surely does not);
    ``names``: :func:`table_names` of ``catalog``, when many texts are looked at."""
    lowered = text.lower()
    if "table" in lowered and _CREATE_TABLE.search(text) is not None:
        return True
    names = table_names(catalog) if names is None else names
    return any(name in lowered and re.search(rf"\b{re.escape(name)}\b", lowered) for name in names)


def split_tables(text: str, source_name: str) -> tuple[str, list[TableDefinition]]:
    """``text`` with its ``CREATE TABLE`` statements blanked out (line breaks kept, so
    positions stay), and the tables they declare, in order."""
    if _CREATE_TABLE.search(text) is None:
        return text, []
    source = Source(text, source_name)
    tokens = tokenize(source)
    kept = list(text)
    tables: list[TableDefinition] = []
    i = 0
    while i < len(tokens) - 1:
        tok = tokens[i]
        if tok.kind is T.IDENT and tok.upper == "CREATE" and tokens[i + 1].upper == "TABLE":
            table, i = _statement(tokens, i, source)
            assert table.span is not None
            start, end = table.span.start, table.span.end
            kept[start:end] = [c if c == "\n" else " " for c in text[start:end]]
            tables.append(table)
            continue
        i += 1
    return "".join(kept), tables


def _statement(tokens: list[Token], i: int, source: Source) -> tuple[TableDefinition, int]:
    """The ``CREATE TABLE`` statement starting at token ``i``, and the token after it."""
    start = tokens[i].start
    i += 2

    def error(message: str, tok: Token, hint: str | None = None) -> QueryError:
        return QueryError(message, source, tok.span, hint=hint)

    def expect(punct: str, where: str) -> Token:
        nonlocal i
        tok = tokens[i]
        if tok.kind is not T.PUNCT or tok.text != punct:
            raise error(f"expected '{punct}' {where}, found {tok.describe()}", tok)
        i += 1
        return tok

    def name(what: str) -> Token:
        nonlocal i
        tok = tokens[i]
        if tok.kind is not T.IDENT:
            raise error(f"expected {what}, found {tok.describe()}", tok)
        i += 1
        return tok

    table = name("a table name after CREATE TABLE")
    expect("(", f"after the name of table {table.text}")
    columns: list[Column] = []
    spans: dict[str, Token] = {}
    while True:
        col = name("a column name")
        if col.upper in RESERVED:
            raise error(f"'{col.text}' is a reserved word of the query language and cannot name a column", col)
        if col.text.lower() == "ts":
            raise error(
                f"table {table.text} cannot declare a column named ts",
                col,
                hint="a table row's ts is the event time its version takes effect (the ts column of a table file)",
            )
        if col.text.lower() in spans:
            raise error(f"column {col.text} is declared twice in table {table.text}", col)
        kind = name(f"a type for column {col.text}")
        if kind.upper not in TYPE_NAMES:
            raise error(
                f"unknown type '{kind.text}' for column {col.text}" + did_you_mean(kind.text, list(TYPE_NAMES)),
                kind,
                hint="types are INTEGER, FLOAT, BYTE, CHAR(n), VARCHAR, STRING, TEXT, BOOLEAN",
            )
        length = None
        if kind.upper in _SIZED and tokens[i].kind is T.PUNCT and tokens[i].text == "(":
            i += 1
            number = tokens[i]
            if number.kind is not T.NUMBER or not number.text.isdigit() or len(number.text) > 9:
                raise error(f"expected a whole-number length, found {number.describe()}", number)
            i += 1
            length = int(number.text)
            expect(")", "after the length")
        spans[col.text.lower()] = col
        columns.append(Column(col.text, TYPE_NAMES[kind.upper], length))
        if not (tokens[i].kind is T.PUNCT and tokens[i].text == ","):
            break
        i += 1
    expect(")", f"to end the columns of table {table.text}")
    word = tokens[i]
    if word.upper != "KEY":
        raise error(
            f"expected KEY (columns) after the columns of table {table.text}, found {word.describe()}",
            word,
            hint="a table is joined by its key, e.g. CREATE TABLE patients (id INTEGER, ward STRING) KEY (id)",
        )
    i += 1
    expect("(", "after KEY")
    key: list[str] = []
    while True:
        col = name("a key column")
        found = spans.get(col.text.lower())
        if found is None:
            known = [c.name for c in columns]
            raise error(
                f"KEY column {col.text} is not a column of table {table.text}" + did_you_mean(col.text, known), col
            )
        if found.text in key:
            raise error(f"column {col.text} is in the KEY twice", col)
        key.append(found.text)
        if not (tokens[i].kind is T.PUNCT and tokens[i].text == ","):
            break
        i += 1
    end = expect(")", "to end the KEY").end
    if tokens[i].kind is T.PUNCT and tokens[i].text == ";":
        end = tokens[i].end
        i += 1
    elif not (tokens[i].kind is T.EOF or tokens[i].upper in _NEXT_STATEMENT):
        raise error(f"expected ';' after CREATE TABLE {table.text}, found {tokens[i].describe()}", tokens[i])
    schema = StreamSchema(table.text, tuple(columns), table_key=tuple(key))
    return TableDefinition(table.text, schema, source.text[start:end], Span(start, end)), i


def declare(tables: list[TableDefinition], catalog: Catalog, source_name: str, text: str) -> Catalog:
    """A copy of ``catalog`` with ``tables`` in it (a name taken already is an error)."""
    for table in tables:
        if catalog.get(table.name) is not None:
            schema = catalog.require(table.name)
            kind = "table" if schema.table_key else "view" if schema.view else "stream"
            raise QueryError(f"a {kind} named {table.name} exists already", Source(text, source_name), table.span)
        catalog = catalog.with_view(table.schema)
    return catalog


# --------------------------------------------------------------------- queries


def reads_tables(query: Query, catalog: Catalog) -> bool:
    return any((s := catalog.get(item.stream)) is not None and s.table_key for item in query.from_)


def compile_table_query(
    query: Query, catalog: Catalog, name: str, order: ColumnOrder, max_disjuncts: int
) -> TableQuery:
    """The :class:`TableQuery` of a parsed match query reading tables (errors with positions)."""
    try:
        return _compile(query, catalog, name, order, max_disjuncts)
    except QueryError as err:
        raise err.in_query(name) from None


def _compile(query: Query, catalog: Catalog, name: str, order: ColumnOrder, max_disjuncts: int) -> TableQuery:
    source = query.source
    is_table = {item.span: bool(catalog.require(item.stream, source, item.span).table_key) for item in query.from_}
    if query.is_aggregate or query.view_span is not None:
        what = "an aggregate query" if query.is_aggregate else "a view"
        raise QueryError(
            f"{what} cannot read a table yet; a match query can",
            source,
            next(i.span for i in query.from_ if is_table[i.span]),
        )
    streams = [item for item in query.from_ if not is_table[item.span]]
    tables = [item for item in query.from_ if is_table[item.span]]
    if not streams:
        raise QueryError(
            "a query over tables alone has no tuples to match; join a table with a stream",
            source,
            tables[0].span,
            hint="e.g. SELECT * FROM H, patients P WHERE H.patient = P.id",
        )
    seen: dict[str, object] = {}
    for item in tables:
        if item.stream.lower() in seen:
            raise QueryError(
                f"table {item.stream} is read twice in this query (a table is read once)", source, item.span
            )
        seen[item.stream.lower()] = item
    if len(streams) > 1 and query.maxwindow is None:
        raise QueryError(
            f"a query over {len(streams)} streams needs MAXWINDOW (tables do not count)",
            source,
            streams[0].span.cover(streams[-1].span),
            hint="MAXWINDOW bounds how far apart in time the tuples of one result may be, e.g. 'MAXWINDOW 20 sec'",
        )
    # bound whole (MAXWINDOW given or not: tables need none), then taken apart
    bound = bind(
        dataclasses.replace(query, maxwindow=query.maxwindow or Duration(Fraction(0), "0", query.span)), catalog, name
    )
    table_aliases = {alias: stream for alias, stream in bound.aliases if catalog.require(stream).table_key}
    conjuncts = _conjuncts(bound.condition)
    stream_part: list[Condition] = []
    residuals: list[Condition] = []
    filters: dict[str, list[Condition]] = {alias: [] for alias in table_aliases}
    keys: dict[str, dict[str, ColumnRef]] = {alias: {} for alias in table_aliases}
    for cond in conjuncts:
        reads = referenced_aliases(cond)
        read_tables = reads & table_aliases.keys()
        if not read_tables:
            stream_part.append(cond)
            continue
        binding = _key_binding(cond, table_aliases, catalog)
        if binding is not None and binding[1] not in keys[binding[0]]:
            keys[binding[0]][binding[1]] = binding[2]
        elif reads == read_tables and len(read_tables) == 1:
            filters[next(iter(read_tables))].append(push_not(cond))
        else:
            residuals.append(push_not(cond))
    joins: list[TableJoin] = []
    for item, (alias, table) in zip(tables, table_aliases.items(), strict=True):
        key = catalog.require(table).table_key
        missing = [col for col in key if col not in keys[alias]]
        if missing:
            shown = " AND ".join(f"{alias}.{col} = <stream>.<column>" for col in missing)
            raise QueryError(
                f"table {table} is joined by its whole KEY ({', '.join(key)}); "
                f"no equality binds {', '.join(missing)} to a stream's column",
                source,
                item.span,
                hint=f"add {shown} to WHERE (as a conjunct, not under OR or NOT)",
            )
        refs = tuple(keys[alias][col] for col in key)
        conds = filters[alias]
        joins.append(
            TableJoin(
                alias,
                table,
                refs,
                None if not conds else conds[0] if len(conds) == 1 else And(tuple(conds), query.span),
            )
        )
    stream_aliases = [(a, s) for a, s in bound.aliases if a not in table_aliases]
    roles = tuple(r for (a, _), r in zip(bound.aliases, bound.roles, strict=True) if a not in table_aliases)
    condition = (
        None if not stream_part else stream_part[0] if len(stream_part) == 1 else And(tuple(stream_part), query.span)
    )
    over_streams = BoundQuery(
        name=name,
        aliases=tuple(stream_aliases),
        outputs=bound.outputs,
        condition=condition,
        maxwindow=query.maxwindow.seconds if query.maxwindow is not None else None,
        query=query,
        roles=roles,
    )
    compiled = from_normalized(normalize(over_streams, order, max_disjuncts))
    return TableQuery(compiled, tuple(joins), tuple(residuals))


def _conjuncts(cond: Condition | None) -> list[Condition]:
    if cond is None:
        return []
    if isinstance(cond, And):
        return [c for item in cond.items for c in _conjuncts(item)]
    return [cond]


def _key_binding(cond: Condition, tables: dict[str, str], catalog: Catalog) -> tuple[str, str, ColumnRef] | None:
    """(table alias, key column, stream column) when ``cond`` is ``T.key = S.col``."""
    if not isinstance(cond, Comparison) or cond.op != "=":
        return None
    for mine, other in ((cond.left, cond.right), (cond.right, cond.left)):
        if not (isinstance(mine, ColumnRef) and isinstance(other, ColumnRef)):
            return None
        if mine.alias in tables and other.alias is not None and other.alias not in tables:
            key = catalog.require(tables[mine.alias]).table_key
            if mine.name in key:
                return mine.alias, mine.name, other
    return None


__all__ = [
    "TableDefinition",
    "TableJoin",
    "TableQuery",
    "compile_table_query",
    "declare",
    "mentions_table",
    "reads_tables",
    "split_tables",
    "table_names",
]
