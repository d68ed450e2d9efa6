"""The one compile entry: query text in, query records out, or the front end's error.

``compile(text, catalog)`` gives one record per query of ``text``: a
:class:`~predicates.records.CompiledQuery` for a match query (the record the registry
keeps), an :class:`~predicates.aggregate.AggregateQuery` for a windowed aggregate
query. Or it raises the full front end's :class:`~predicates.errors.QueryError` with
its position in ``text``. There is one reader of the language, the front end (lexer,
parser, binder, normalizer); what comes before it are two caches keyed on what the
lexer reads: the template cache (:mod:`predicates.template_cache`: a text's skeleton,
its constants cut out) and the comparison cache (:mod:`predicates.token_cache`: the
token skeletons of a text's prefix and comparisons). They take a text only when they
give exactly the front end's queries; every text they do not take, and every error,
goes through the front end. Pass one ``compiler`` (a
:class:`~predicates.token_cache.TokenCache`) to many calls to keep its caches.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from itertools import pairwise
from typing import cast

from predicates.catalog import Catalog
from predicates.errors import Source
from predicates.frontend import FrontEndRecord, front_end
from predicates.lexer import T, tokenize
from predicates.normalize import DEFAULT_MAX_DISJUNCTS
from predicates.query_file import QueryFileParts
from predicates.records import CompiledQuery, RowQueries
from predicates.tables import TableDefinition, mentions_table, table_names
from predicates.template_cache import Reading, clashes, instantiate
from predicates.token_cache import TokenCache
from predicates.views import ViewDefinition, mentions_view

Record = FrontEndRecord
_PREFILTER_CHUNK = 16384  # texts joined at once to look for views and tables
_LOWER_AT_ONCE = 4096  # characters of joined texts lowered without looking for letters first

# the functions of aggregate queries (a call of one makes a query an aggregate query)
_AGGREGATE_CALLS = frozenset({"COUNT", "SUM", "AVG", "MIN", "MAX", "STDDEV", "VARIANCE"})


def looks_aggregate(text: str) -> bool:
    """Whether ``text`` may be an aggregate query (False: it is surely not one), on the
    lexer's tokens: a window in brackets, GROUP BY, HAVING or an aggregate's call."""
    tokens = tokenize(Source(text))
    for token, after in pairwise(tokens):
        if token.kind is T.PUNCT and token.text == "[":
            return True
        if token.kind is T.IDENT:
            word = token.upper
            if word == "HAVING" or (word == "GROUP" and after.kind is T.IDENT and after.upper == "BY"):
                return True
            if word in _AGGREGATE_CALLS and after.kind is T.PUNCT and after.text == "(":
                return True
    return False


def compile(
    text: str,
    catalog: Catalog,
    *,
    source_name: str = "<string>",
    first_position: int = 1,
    taken: Container[str] = (),
    max_disjuncts: int = DEFAULT_MAX_DISJUNCTS,
    compiler: TokenCache | None = None,
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
    compiler: TokenCache | None = None,
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
        return _one_by_one(texts, catalog, source_name, first_position, taken, max_disjuncts)
    reading = compiler.templates.read(texts)
    names = reading.names
    every_read = _every_read(reading, first_position, taken)
    if every_read is not None:  # (the usual bulk registration: every text read from templates)
        return every_read
    if not reading.groups:  # (none read from templates: a few texts, texts of many shapes)
        read = compiler.read(texts)
        if None not in read:  # (every text read: named at once, checked at once)
            readings = cast(list[tuple[list[str | None], list[CompiledQuery]]], read)
            queries = [query for _, of_text in readings for query in of_text]
            given = [name for of_text, _ in readings for name in of_text]
            for j, (query, name) in enumerate(zip(queries, given, strict=True)):
                query.name = name if name is not None else str(first_position + j)
            if not clashes([query.name for query in queries], taken):
                return queries
        records: list[Record] = []
        for k, from_cache in enumerate(read):
            where = source_name if len(texts) == 1 else f"{source_name}[{k}]"
            position = first_position + len(records)
            records += _read_or_parsed(texts[k], from_cache, compiler, where, position, taken)
        return records
    names = list(names)
    unread = [k for k in range(len(texts)) if reading.read(k) is None]
    from_tokens = compiler.read([texts[k] for k in unread]) if unread else []
    token_read = dict(zip(unread, from_tokens, strict=True))
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
        parsed[k] = _read_or_parsed(text, token_read.get(k), compiler, where, position, taken)
        position += len(parsed[k])
    rows = instantiate(reading, names, whole=not parsed)
    if isinstance(rows, RowQueries):
        return rows
    out: list[Record] = []
    for k, of_text in enumerate(rows):
        out += of_text if of_text is not None else parsed[k]
    return out


def compile_read(
    texts: Sequence[str],
    catalog: Catalog,
    *,
    first_position: int = 1,
    taken: Container[str] = (),
    max_disjuncts: int = DEFAULT_MAX_DISJUNCTS,
    compiler: TokenCache | None = None,
) -> Sequence[Record] | None:
    """What :func:`compile_many` gives ``texts`` when the template cache reads every
    one of them and their names are free and given once, else None (nothing else is
    tried: no text goes to the parser). For texts read one at a time, each once, in
    order (:class:`~predicates.query_file.QueryFileParts`), the prefilter for views
    and tables looks at each as the cache reads it."""
    compiler = _compiler_for(catalog, max_disjuncts, compiler)
    mentions: list[bool] = []
    parts = texts if isinstance(texts, QueryFileParts) else None
    if parts is not None:  # (a file's parts, read as asked: each looked at then, not read twice)
        parts.inspect = lambda text: mentions.append(may_mention_views_or_tables([text], catalog))
    elif may_mention_views_or_tables(texts, catalog):
        return None
    try:
        reading = compiler.templates.read(texts)
    finally:
        if parts is not None:
            parts.inspect = None
    return None if any(mentions) else _every_read(reading, first_position, taken)


def _every_read(reading: Reading, first_position: int, taken: Container[str]) -> Sequence[Record] | None:
    """The records of a reading whose every text was read, when no name is taken or
    given twice (:func:`~predicates.template_cache.clashes`), else None."""
    if not reading.all_read():
        return None
    names = reading.names
    every = names if None not in names else [name or str(first_position + i) for i, name in enumerate(names)]
    if clashes(every, taken):  # type: ignore[arg-type]
        return None
    rows = instantiate(reading, every, whole=True)  # type: ignore[arg-type]
    return rows if isinstance(rows, RowQueries) else [q for of_text in rows for q in of_text or ()]


def _read_or_parsed(
    text: str,
    from_cache: tuple[list[str | None], list[CompiledQuery]] | None,
    compiler: TokenCache,
    source_name: str,
    position: int,
    taken: Container[str],
) -> list[Record]:
    """A text's records: the comparison cache's reading of it (``from_cache``; queries
    without a header named by their position from ``position``) where it has one and
    its names are free, else the front end's, whose match queries written with the
    same FROM and SELECT share one context (results are built once per context), as
    the caches' do."""
    if from_cache is not None:
        header_names, queries = from_cache
        for i, (query, name) in enumerate(zip(queries, header_names, strict=True)):
            query.name = name if name is not None else str(position + i)
        if not clashes([query.name for query in queries], taken):
            return queries  # type: ignore[return-value]
    records = front_end(
        text,
        compiler.catalog,
        source_name=source_name,
        first_position=position,
        taken=taken,
        max_disjuncts=compiler.max_disjuncts,
    )
    shared = compiler.parsed_contexts
    for record in records:
        if type(record) is CompiledQuery:
            context = record.context
            bound = context.bound
            source = bound.source.text
            outputs = tuple((out.name, source[out.expr.span.start : out.expr.span.end]) for out in bound.outputs)
            key = (len(compiler.catalog), bound.aliases, outputs, context.window_scale)  # (a catalog grown: anew)
            record.context = shared.setdefault(key, context)
    if len(shared) > _CONTEXTS_KEPT:
        shared.clear()
    return records


_CONTEXTS_KEPT = 8192


def may_mention_views_or_tables(texts: Sequence[str], catalog: Catalog) -> bool:
    """Whether any of ``texts`` may declare a view or declare or read a table (False:
    surely none does). Many texts are looked at at once, joined by line feeds (a word
    of one text never runs into the next): past a few thousand characters, a word can
    be in them only if each of its letters is, in some case, and only then are they
    lowered to look for it (a few texts are lowered at once: ``register_query``). A text's
    own tests run only where the joined texts may hold ``view``, ``table`` or a
    table's name, or are not ASCII (whose lowering may make ASCII letters)."""
    tables = table_names(catalog)
    words = ["view", "table", *tables]
    for first in range(0, len(texts), _PREFILTER_CHUNK):
        chunk = texts[first : first + _PREFILTER_CHUNK]
        joined = "\n".join(chunk)
        if joined.isascii():
            if len(joined) > _LOWER_AT_ONCE:  # (lowered only if each letter of a word is in it)
                present = {c for c in set("".join(words)) if c in joined or c.upper() in joined}
                maybe = [word for word in words if present.issuperset(word)]
            else:  # (a few texts: lowering costs less than looking for each letter twice)
                maybe = words
            lowered = joined.lower() if maybe else ""
            if not any(word in lowered for word in maybe):
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
) -> list[Record]:
    """The texts compiled in turn by the front end, those after a view reading it as a
    stream (views and tables are few: their texts skip the caches)."""
    out: list[Record] = []
    for k, text in enumerate(texts):
        where = source_name if len(texts) == 1 else f"{source_name}[{k}]"
        records = front_end(
            text,
            catalog,
            source_name=where,
            first_position=first_position + len(out),
            taken=taken,
            max_disjuncts=max_disjuncts,
        )
        out += records
        for record in records:  # the texts after a view read it as a stream
            if isinstance(record, (ViewDefinition, TableDefinition)):
                catalog = catalog.with_view(record.schema)
    return out


def _compiler_for(catalog: Catalog, max_disjuncts: int, compiler: TokenCache | None) -> TokenCache:
    if compiler is None:
        return TokenCache(catalog, max_disjuncts)
    if compiler.catalog is not catalog or compiler.max_disjuncts != max_disjuncts:
        raise ValueError("the compiler was made for another catalog or disjunct limit")
    return compiler


__all__ = ["Record", "compile", "compile_many", "compile_read", "looks_aggregate", "may_mention_views_or_tables"]
