"""The one compile entry: query text in, query records out, or the front end's error.

``compile(text, catalog)`` gives one :class:`~predicates.templates.CompiledQuery` per
query of ``text`` (the record the registry keeps), or raises the full front end's
:class:`~predicates.errors.QueryError` with its position in ``text``. The fast paths
(:mod:`predicates.flat`, :mod:`predicates.templates`) are caches behind it: they take
a text only when they give exactly the front end's query, and every text they do not
take, and every error, goes through the front end (lexer, parser, binder, normalizer).
Pass one ``compiler`` to many calls to keep its caches.
"""

from __future__ import annotations

from collections.abc import Iterable

from predicates.catalog import Catalog
from predicates.clauses import split_query_texts
from predicates.errors import QueryError
from predicates.frontend import compile_queries
from predicates.normalize import DEFAULT_MAX_DISJUNCTS
from predicates.records import CompiledQuery, from_normalized
from predicates.templates import FastCompiler


def compile(
    text: str,
    catalog: Catalog,
    *,
    source_name: str = "<string>",
    first_position: int = 1,
    taken: Iterable[str] = (),
    max_disjuncts: int = DEFAULT_MAX_DISJUNCTS,
    compiler: FastCompiler | None = None,
) -> list[CompiledQuery]:
    """Every query of ``text`` as a record, all or nothing; queries without a ``Query
    ID`` header are named by their position from ``first_position``; ``taken``: names
    already used (a query named so is an error)."""
    if compiler is None:
        compiler = FastCompiler(catalog, max_disjuncts)
    elif compiler.catalog is not catalog or compiler.max_disjuncts != max_disjuncts:
        raise ValueError("the compiler was made for another catalog or disjunct limit")
    taken = set(taken)
    out: list[CompiledQuery] = []
    try:
        for piece in split_query_texts(text):
            out.append(compiler.compile(piece, first_position + len(out), source_name))
    except QueryError:
        pass  # the front end below reports it, where it is in the whole text
    else:
        names = [q.name for q in out]
        if len(set(names)) == len(names) and taken.isdisjoint(names):
            return out
    # the front end raises the error with its position (or, where a fast path cut the
    # text otherwise than the parser, compiles it: its queries are the records)
    queries = compile_queries(
        text, catalog, source_name=source_name, first_position=first_position, taken=taken, max_disjuncts=max_disjuncts
    )
    return [from_normalized(nq) for nq in queries]


__all__ = ["compile"]
