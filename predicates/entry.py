"""The one compile entry: query text in, query records out, or the front end's error.

``compile(text, catalog)`` gives one record per query of ``text``: a
:class:`~predicates.records.CompiledQuery` for a match query (the record the registry
keeps), an :class:`~predicates.aggregate.AggregateQuery` for a windowed aggregate
query. Or it raises the full front end's :class:`~predicates.errors.QueryError` with
its position in ``text``. The fast paths (:mod:`predicates.flat`,
:mod:`predicates.templates`) are caches behind it: they take a text only when they give
exactly the front end's query, and every text they do not take, and every error, goes
through the front end (lexer, parser, binder, normalizer). Pass one ``compiler`` to many
calls to keep its caches.
"""

from __future__ import annotations

import re
from collections.abc import Container, Sequence

from predicates.aggregate import AggregateQuery, compile_aggregate
from predicates.catalog import Catalog
from predicates.clauses import split_query_texts
from predicates.errors import QueryError
from predicates.frontend import FrontEndRecord, column_order, front_end, name_queries
from predicates.normalize import DEFAULT_MAX_DISJUNCTS
from predicates.parser import parse_queries
from predicates.records import RowQueries
from predicates.tables import TableDefinition, mentions_table, table_names
from predicates.template_cache import clashes, instantiate
from predicates.templates import FastCompiler
from predicates.views import ViewDefinition, mentions_view

Record = FrontEndRecord
_PREFILTER_CHUNK = 16384  # texts joined at once to look for views and tables

# what only aggregate queries have (a window in FROM, GROUP BY, HAVING, an aggregate)
_LOOKS_AGGREGATE = re.compile(
    r"\[|\bgroup\s+by\b|\bhaving\b|\b(?:count|sum|avg|min|max|stddev|variance)\s*\(", re.IGNORECASE
)


_CALLS = tuple(f"{name}(" for name in ("count", "sum", "avg", "min", "max", "stddev", "variance"))
# the letters other than ASCII that the expression's IGNORECASE takes for these words'
# letters (dotted and dotless i, long s): folded so that the substrings see them too
_FOLDS = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s"})


def looks_aggregate(text: str) -> bool:
    """Whether ``text`` may be an aggregate query (False: it is surely not one)."""
    # substring tests first: registering ten thousand match queries should not cost a
    # case-insensitive regular expression search over each of them (the text folded
    # and without blanks holds ``max(`` wherever the expression finds ``MAX (``)
    if "[" not in text:
        folded = text.lower() if text.isascii() else text.translate(_FOLDS).lower()
        if "group" not in folded and "having" not in folded:
            if "(" not in text:
                return False
            squeezed = "".join(folded.split())
            if not any(call in squeezed for call in _CALLS):
                return False
    return _LOOKS_AGGREGATE.search(text) is not None


def compile(
    text: str,
    catalog: Catalog,
    *,
    source_name: str = "<string>",
    first_position: int = 1,
    taken: Container[str] = (),
    max_disjuncts: int = DEFAULT_MAX_DISJUNCTS,
    compiler: FastCompiler | None = None,
) -> list[Record]:
    """Every query of ``text`` as a record, all or nothing; queries without a ``Query
    ID`` header are named by their position from ``first_position``; ``taken``: names
    already used (a query named so is an error)."""
    return list(
        compile_many(
            [text],
            catalog,
            source_name=source_name,
            first_position=first_position,
            taken=taken,
            max_disjuncts=max_disjuncts,
            compiler=compiler,
        )
    )


def compile_many(
    texts: Sequence[str],
    catalog: Catalog,
    *,
    source_name: str = "<string>",
    first_position: int = 1,
    taken: Container[str] = (),
    max_disjuncts: int = DEFAULT_MAX_DISJUNCTS,
    compiler: FastCompiler | None = None,
) -> Sequence[Record]:
    """:func:`compile` of each text in turn, numbered on from one to the next; an
    error names its text as ``source_name[k]`` (just ``source_name`` if there is one
    text). Names are checked against ``taken``, not across texts. When the template
    cache read every text from one template, the records are one :class:`RowQueries`
    (the rows of one block), else a list."""
    if isinstance(texts, str):
        raise TypeError("compile_many takes a list of texts (compile takes one)")
    compiler = _compiler_for(catalog, max_disjuncts, compiler)
    if may_mention_views_or_tables(texts, catalog):
        # (views and tables are few: their texts skip the caches)
        return _one_by_one(texts, catalog, source_name, first_position, taken, max_disjuncts, compiler)
    reading = compiler.templates.read(texts)
    names = reading.names
    if reading.all_read():  # (the usual bulk registration: every text read from templates)
        every = names if None not in names else [name or str(first_position + i) for i, name in enumerate(names)]
        if not clashes(every, taken):  # type: ignore[arg-type]
            rows = instantiate(reading, every, whole=True)  # type: ignore[arg-type]
            return rows if isinstance(rows, RowQueries) else [q for of_text in rows for q in of_text or ()]
    names = list(names)
    parsed: dict[int, list[Record]] = {}
    position = first_position
    for k, text in enumerate(texts):
        pieces = reading.read(k)
        if pieces is not None:
            named = [names[p] or str(position + i) for i, p in enumerate(pieces)]
            if not clashes(named, taken):
                names[pieces.start : pieces.stop] = named
                position += len(named)
                continue
            reading.unread(k)  # a name given twice or taken: the parser says where
        where = source_name if len(texts) == 1 else f"{source_name}[{k}]"
        parsed[k] = _compile_text(text, catalog, where, position, taken, max_disjuncts, compiler)
        position += len(parsed[k])
    rows = instantiate(reading, names, whole=not parsed)
    if isinstance(rows, RowQueries):
        return rows
    out: list[Record] = []
    for k, records in enumerate(rows):
        out += records if records is not None else parsed[k]
    return out


def may_mention_views_or_tables(texts: Sequence[str], catalog: Catalog) -> bool:
    """Whether any of ``texts`` may declare a view or declare or read a table (False:
    surely none does). Many texts are looked at at once, joined by line feeds (a word
    of one text never runs into the next): a word can be in them only if each of its
    letters is, in some case, and only then are they lowered to look for it. A text's
    own tests run only where the joined texts may hold ``view``, ``table`` or a
    table's name, or are not ASCII (whose lowering may make ASCII letters)."""
    tables = table_names(catalog)
    words = ["view", "table", *tables]
    letters = {c for word in words for c in word}
    for first in range(0, len(texts), _PREFILTER_CHUNK):
        chunk = texts[first : first + _PREFILTER_CHUNK]
        joined = "\n".join(chunk)
        if joined.isascii():
            present = {c for c in letters if c in joined or c.upper() in joined}
            maybe = [word for word in words if present.issuperset(word)]
            if not maybe or not any(word in joined.lower() for word in maybe):
                continue
        if any(mentions_view(t) or mentions_table(t, catalog, tables) for t in chunk):
            return True
    return False


def _one_by_one(
    texts: Sequence[str],
    catalog: Catalog,
    source_name: str,
    first_position: int,
    taken: Container[str],
    max_disjuncts: int,
    compiler: FastCompiler,
) -> list[Record]:
    """The texts compiled in turn, those after a view reading it as a stream."""
    out: list[Record] = []
    for k, text in enumerate(texts):
        where = source_name if len(texts) == 1 else f"{source_name}[{k}]"
        records = _compile_text(text, catalog, where, first_position + len(out), taken, max_disjuncts, compiler)
        out += records
        for record in records:  # the texts after a view read it as a stream
            if isinstance(record, (ViewDefinition, TableDefinition)):
                catalog = catalog.with_view(record.schema)
                compiler = FastCompiler(catalog, max_disjuncts)
    return out


def _compile_text(
    text: str,
    catalog: Catalog,
    source_name: str,
    first_position: int,
    taken: Container[str],
    max_disjuncts: int,
    compiler: FastCompiler,
) -> list[Record]:
    """One text the template cache did not read: through the comparison caches of
    ``compiler`` where they take it, else the front end."""
    if mentions_view(text) or mentions_table(text, catalog):  # (views, tables: their texts skip the caches)
        return front_end(
            text,
            catalog,
            source_name=source_name,
            first_position=first_position,
            taken=taken,
            max_disjuncts=max_disjuncts,
        )
    flat = compiler.flat.compile(text, first_position)
    if flat is not None and flat.name not in taken:
        return [flat]  # one plain match query (a subscription): nothing to cut or check
    out: list[Record] = []
    try:
        for piece in split_query_texts(text):
            position = first_position + len(out)
            aggregate = _aggregate_piece(piece, catalog, position, source_name, max_disjuncts)
            out.append(aggregate if aggregate is not None else compiler.compile(piece, position, source_name))
    except QueryError:
        pass  # the front end below reports it, where it is in the whole text
    else:
        names = [q.name for q in out]
        if len(set(names)) == len(names) and not any(name in taken for name in names):
            return out
    # the front end raises the error with its position (or, where a fast path cut the
    # text otherwise than the parser, compiles it: its queries are the records)
    return front_end(
        text, catalog, source_name=source_name, first_position=first_position, taken=taken, max_disjuncts=max_disjuncts
    )


def _compiler_for(catalog: Catalog, max_disjuncts: int, compiler: FastCompiler | None) -> FastCompiler:
    if compiler is None:
        return FastCompiler(catalog, max_disjuncts)
    if compiler.catalog is not catalog or compiler.max_disjuncts != max_disjuncts:
        raise ValueError("the compiler was made for another catalog or disjunct limit")
    return compiler


def _aggregate_piece(
    text: str, catalog: Catalog, position: int, source_name: str, max_disjuncts: int
) -> AggregateQuery | None:
    """The aggregate query of one query's text, or None when it is a match query."""
    if not looks_aggregate(text):
        return None
    queries = parse_queries(text, source_name, first_position=position)
    if len(queries) != 1:
        raise QueryError("not one query")  # cut otherwise than the parser: the front end decides
    if not queries[0].is_aggregate:
        return None
    (name,) = name_queries(queries, first_position=position)
    return compile_aggregate(queries[0], catalog, name, column_order(catalog), max_disjuncts)


__all__ = ["Record", "compile", "compile_many", "looks_aggregate", "may_mention_views_or_tables"]
