"""Query templates with named parameters, instantiated from a table of constants.

Subscriptions usually live in a database: one query shape, one row of constants per
subscriber. A **template** is a query text where ``:name`` (a colon written right
before a name, no blank between) stands for a number taken from column ``name`` of the
table; each row is one query, and it means exactly the query text that the template
becomes with each ``:name`` replaced by the row's value **as it prints** (Python's
``repr`` of the double, or the integer's digits: ``0.1`` means one tenth). A value that
makes its query never match (a division by zero, a contradiction) does so exactly as the
written-out text would.

The template is compiled once: its free parameters are written as ``1`` and the text
is read by the comparison cache (:class:`~predicates.token_cache.TokenCache`), on the
lexer's tokens like any query text: its prefix (SELECT to WHERE) and, per comparison,
the template that says which of its numbers only ever add to it. A parameter that
only adds (``E.x >= :lo``, ``B.p <= 2 * H.v + :c``) gives the predicate's constant by an
exact linear formula, applied to the whole column at once (for the usual ``column OP
:p``, the constant is the column's double itself). Any other parameter (a factor, a
divisor, a window length, a number of the SELECT list or the WINDOW clause) is
**structural**: the rows are grouped by its value and each group's text is compiled
once. Rows the cache cannot take (a string comparison, a residual, OR) are compiled
from their written-out texts in one call through the compile entry, as
``register_queries`` would (so errors keep their positions).

Its rows are :class:`~predicates.records.RowBlock` rows, as the template cache's
(:mod:`predicates.template_cache`) are.
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

import predicates.entry as compile_entry
from predicates.errors import QueryError, Source, Span
from predicates.lexer import T, header_end, tokenize
from predicates.normalize import PLACEHOLDER, ListKey, Residual
from predicates.records import (
    CompiledQuery,
    Conjunction,
    Formula,
    RowBlock,
    RowQueries,
    RowQuery,
    predicate_text,
    query_text,
)
from predicates.token_cache import Prefix, Shortcut, TokenCache
from predicates.token_cut import CutTokens, cut_text
from predicates.token_scan import NUMBER

_PLACEHOLDER = "1"
# compiles rows' written-out texts the usual way (texts, their rows): one query each
CompileTexts = Callable[[list[str], list[int]], Sequence[CompiledQuery]]
_EXACT_INTEGERS = 2**53


@dataclass(frozen=True)
class QueryTemplate:
    """A template's text and its parameters (name, start, end) in order of position."""

    text: str
    params: tuple[tuple[str, int, int], ...]

    @property
    def names(self) -> tuple[str, ...]:
        """Parameter names, each once, in order of first use."""
        return tuple(dict.fromkeys(name for name, _, _ in self.params))

    def written(self, values: Mapping[str, str]) -> str:
        """The template with each parameter replaced by its text in ``values``."""
        out = []
        last = 0
        for name, start, end in self.params:
            out.append(self.text[last:start])
            out.append(values[name])
            last = end
        out.append(self.text[last:])
        return "".join(out)


def parse_template(text: str, source_name: str = "<template>") -> QueryTemplate:
    """Find the ``:name`` parameters of a template (by the lexer's tokens, so a colon in
    a string or a comment is not one)."""
    tokens = tokenize(Source(text, source_name))
    if header_end(tokens):
        raise QueryError("a template has no Query ID header: each row's id comes from the table")
    params = []
    for colon, word in itertools.pairwise(tokens):
        if colon.kind is T.PUNCT and colon.text == ":":
            if word.kind is not T.IDENT or word.start != colon.end or text[word.start] == '"':
                raise QueryError(
                    "a ':' must be followed by a parameter name (':lo')",
                    Source(text, source_name),
                    Span(colon.start, colon.end),
                )
            params.append((word.text, colon.start, word.end))
    if not params:
        raise QueryError("the template has no :name parameter", Source(text, source_name), Span(0, len(text)))
    return QueryTemplate(text, tuple(params))


def printed(column: np.ndarray) -> list[str]:
    """Each value of a numeric column as it prints (what it means in a query)."""
    if column.dtype.kind in "iu":
        return [str(v) for v in column.tolist()]
    return [repr(v) for v in column.astype(np.float64).tolist()]


def numeric_column(name: str, column: Any) -> np.ndarray:
    values = np.asarray(column)
    if values.dtype.kind not in "iuf" or values.ndim != 1:
        raise QueryError(f"parameter :{name}: its column must hold numbers (found {values.dtype})")
    if values.dtype.kind == "f":
        values = values.astype(np.float64, copy=False)
        if not np.isfinite(values).all():
            row = int(np.flatnonzero(~np.isfinite(values))[0])
            raise QueryError(f"parameter :{name}: row {row} is {values[row]}, which no query text can write")
    elif values.dtype.kind == "u":
        if len(values) and values.max() > np.iinfo(np.int64).max:
            raise QueryError(f"parameter :{name}: a value is past the 64-bit integers")
        values = values.astype(np.int64)
    return values


def table_queries(
    template: str,
    table: Any,
    id_column: str | None,
    source_name: str,
    registry: Any,
    first_position: int,
    compile_texts: CompileTexts,
    taken: Container[str] = (),
) -> tuple[list[str], Sequence[CompiledQuery]]:
    """(ids, query records) of ``table``'s rows under ``template`` for ``registry``
    (``Matcher.register_table``). An id already registered (or in ``taken``) is an
    error; so is an id given twice, which the registry finds among the rows of a
    :class:`RowQueries` as it adds them (the rows are compiled before it says so)."""
    parsed = parse_template(template, source_name)
    columns = {p: numeric_column(p, table_column(table, p)) for p in parsed.names}
    n = len(next(iter(columns.values())))
    if any(len(c) != n for c in columns.values()):
        raise QueryError("the table's columns differ in length")
    if id_column is not None:
        names = list(map(str, np.asarray(table_column(table, id_column)).tolist()))
    else:
        names = [str(first_position + i) for i in range(n)]
    registered = registry.queries.keys()
    if not registered.isdisjoint(names) or (taken and any(name in taken for name in names)):
        name = next(name for name in names if name in registered or name in taken)
        raise QueryError(f"query id {name} is already registered")
    queries = compile_table(registry.compiler, parsed, columns, names, compile_texts)
    # (the registry finds a name given twice among a block's rows as it adds them)
    if type(queries) is not RowQueries and len(set(names)) != len(names):
        raise QueryError(f"query id {first_repeated(names)} is given twice")
    return names, queries


def first_repeated(names: Iterable[str]) -> str | None:
    """The first name that was seen before (None when all are different)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def table_column(table: Any, name: str) -> Any:
    """Column ``name`` of a pandas DataFrame, an Arrow table or a mapping, as numpy."""
    if hasattr(table, "column_names") and hasattr(table, "column"):  # Arrow
        if name not in table.column_names:
            raise QueryError(f"the table has no column {name!r}")
        return table.column(name).to_numpy()
    try:
        column = table[name]
    except (KeyError, IndexError):
        raise QueryError(f"the table has no column {name!r}") from None
    return column.to_numpy() if hasattr(column, "to_numpy") else column


# --------------------------------------------------------------------- compiling


@dataclass
class _Part:
    """One comparison of a compiled template group: its template (the comparison
    cache's), its numbers in the group's text and, per number, the parameter it
    stands for (None: a literal of the template)."""

    shortcut: Shortcut
    numbers: list[float]
    params: list[str | None]


def compile_table(
    cache: TokenCache,
    template: QueryTemplate,
    columns: Mapping[str, np.ndarray],
    names: Sequence[str],
    compile_texts: CompileTexts,
) -> Sequence[CompiledQuery]:
    """One compiled query per row (named by ``names``): a :class:`RowQueries` when one
    block holds them all. ``compile_texts(texts, rows)`` compiles rows' written-out
    texts the usual way (the fallback), one query each."""
    n = len(names)
    names = names if isinstance(names, list) else list(names)
    out: list[CompiledQuery | None] = [None] * n
    texts: dict[str, list[str] | None] = dict.fromkeys(template.names)

    def text_of(name: str, row: int) -> str:
        got = texts[name]
        if got is None:
            got = texts[name] = printed(columns[name])
        return got[row]

    def row_text(row: int) -> str:
        return template.written({p: text_of(p, row) for p in template.names})

    def from_texts(rows: np.ndarray) -> None:
        listed = rows.tolist()
        for row, compiled in zip(listed, compile_texts([row_text(row) for row in listed], listed), strict=True):
            out[row] = compiled.renamed(names[row])

    all_rows = np.arange(n)
    parts = _compile_group(cache, template, {}) if not _signs_glue(template, columns) else None
    if parts is None:
        from_texts(all_rows)
        return out  # type: ignore[return-value]
    structural = [p for p in template.names if p not in parts.additive]
    if not structural:
        block = _instantiate(parts, all_rows, columns, names, text_of, out, row_text)
        return RowQueries(names, block) if block is not None else out  # type: ignore[return-value]
    # group rows by the structural parameters' values; compile each group once
    # (a double by its bits: -0.0 prints otherwise than 0.0, and its group's text says so)
    keys = np.column_stack([columns[p].astype(np.float64).view(np.int64) if columns[p].dtype.kind == "f"
                            else columns[p] for p in structural])  # fmt: skip
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    by_text: list[np.ndarray] = []
    for group, rows in enumerate(np.split(order, bounds)):
        fixed = {p: text_of(p, int(first[group])) for p in structural}
        group_parts = _compile_group(cache, template, fixed)
        if group_parts is None or any(p not in group_parts.additive for p in template.names if p not in fixed):
            by_text.append(rows)
        else:
            block = _instantiate(group_parts, rows, columns, names, text_of, out, row_text)
            if block is not None and len(rows) == n:  # one group: every row, in order
                return RowQueries(names, block)
            if block is not None:
                for k, row in enumerate(rows.tolist()):
                    out[row] = RowQuery(names[row], block, k)
    if by_text:
        from_texts(np.sort(np.concatenate(by_text)))  # (in one call: the bulk reader's)
    return out  # type: ignore[return-value]


def _signs_glue(template: QueryTemplate, columns: Mapping[str, np.ndarray]) -> bool:
    """Whether a negative value written right after a ``-`` would make a comment of
    the rest of its line (``2-:c`` with ``c = -1``): then the texts decide."""
    return any(
        start and template.text[start - 1] == "-" and bool(np.signbit(columns[name]).any())
        for name, start, _ in template.params
    )


@dataclass
class _Group:
    """A template group compiled: its prefix; its comparisons read from templates
    (``parts``); the others' predicates and residuals, the same for every row
    (``fixed``, ``residuals``; ``never``: one of them never holds); and which free
    parameters are additive."""

    prefix: Prefix
    parts: list[_Part]
    fixed: list[tuple[ListKey, Any]]
    residuals: dict[str, Residual]
    never: bool
    additive: set[str]


def _compile_group(cache: TokenCache, template: QueryTemplate, fixed: Mapping[str, str]) -> _Group | None:
    """The template with ``fixed`` parameters written in and the others at a
    placeholder, read by the comparison cache (:class:`~predicates.token_cache.TokenCache`,
    on the lexer's tokens): its prefix, its comparisons' templates and which free
    parameters are **additive** (a comparison's number that the template's formula
    takes as a parameter). Any other free parameter (a factor, a divisor, a number in
    the SELECT list, WINDOW or MAXWINDOW, a placeholder glued to what follows it, a
    number of a comparison no template reads) is structural: the groups write it in.
    A comparison no template reads and with no free parameter is compiled once, as its
    context's only condition. None: a text the cache does not read (the rows are
    compiled from their texts)."""
    values = {p: fixed.get(p, _PLACEHOLDER) for p in template.names}
    text = template.written(values)
    if not text.isascii():
        return None
    # where each free parameter's placeholder starts in the written text
    starts: dict[int, str] = {}
    shift = 0
    for name, start, end in template.params:
        if name not in fixed:
            starts[start + shift] = name
        shift += len(values[name]) - (end - start)
    cut = cut_text(text)
    if cut is None or len(cut.pieces) != 1 or cut.pieces[0].name_token >= 0:
        return None
    piece = cut.pieces[0]
    if any(math.isnan(v) for v in piece.numbers):
        return None  # (a number that is no plain decimal: the texts decide)
    tokens = CutTokens(text, cut)
    prefix = cache.prefix(piece.prefix, tokens, piece.select_token, piece.where_token)
    if prefix is None:
        return None
    firsts = [first for _, _, _, first in piece.comparisons]
    group = _Group(prefix, [], [], {}, False, set())
    structural: set[str] = set()
    number_ends = [*firsts[1:], len(piece.numbers)]
    shortcuts = cache.comparison_templates(prefix, piece, tokens, firsts)
    for (_, first, last, n0), n1, shortcut in zip(piece.comparisons, number_ends, shortcuts, strict=True):
        spans = [(tokens.start[i], tokens.end[i]) for i in range(first, last) if tokens.kind[i] == NUMBER]
        params = [starts.pop(int(a), None) for a, _ in spans]
        if shortcut is None:
            if any(params):
                structural.update(p for p in params if p is not None)
            elif not _compile_fixed(cache, prefix.head + tokens.joined(first, last), group):
                return None
            continue
        free = (shortcut.number,) if shortcut.formula is None else shortcut.params
        for i, ((a, b), param) in enumerate(zip(spans, params, strict=True)):
            if param is not None:
                glued = b - a != len(_PLACEHOLDER)
                (structural if glued or i not in free else group.additive).add(param)
        group.parts.append(_Part(shortcut, piece.numbers[n0:n1], params))
    structural.update(starts.values())  # (not a comparison's number: written in by the groups)
    group.additive -= structural
    return group


def _compile_fixed(cache: TokenCache, text: str, group: _Group) -> bool:
    """Add the predicates and residuals of the one-comparison query ``text`` (a
    comparison no template reads, with no parameter) to ``group``; False when it is
    not one conjunction (the rows are then compiled from their texts)."""
    try:
        (query,) = compile_entry.compile(text, cache.catalog, max_disjuncts=cache.max_disjuncts, compiler=cache)
    except QueryError:
        return False  # (the rows' texts say where)
    if not isinstance(query, CompiledQuery) or len(query.disjuncts) > 1:
        return False
    if not query.disjuncts:
        group.never = True
        return True
    ((preds, residuals),) = query.disjuncts
    group.fixed += list(preds)
    group.residuals.update((r.text, r) for r in residuals)
    return True


def _instantiate(
    group: _Group,
    rows: np.ndarray,
    columns: Mapping[str, np.ndarray],
    names: Sequence[str],
    text_of: Callable[[str, int], str],
    out: list[CompiledQuery | None],
    row_text: Callable[[int], str],
) -> RowBlock | None:
    """The queries of ``rows`` from a group's compiled parts: put in ``out``, or, when
    their constants are all doubles, returned as one block (row ``k`` of the block is
    ``rows[k]``) for the caller to read its queries from."""
    prefix = group.prefix
    if group.never:
        for row in rows.tolist():
            out[row] = CompiledQuery(names[row], prefix.context, prefix.maxwindow, ())
        return None
    keys: list[ListKey] = [*prefix.keys, *(key for key, _ in group.fixed)]
    value_columns: list[np.ndarray | list[Any]] = [
        _constant_column(v, len(rows)) for v in (*prefix.values, *(v for _, v in group.fixed))
    ]
    for part in group.parts:
        shortcut = part.shortcut
        keys.append(shortcut.key)
        if shortcut.formula is None:  # one number times 1 or -1
            param = part.params[shortcut.number]
            if param is None:
                value_columns.append(_constant_column(shortcut.constant(part.numbers, 0), len(rows)))
                continue
            column = columns[param]
            column = column if len(rows) == len(column) else column[rows]  # all rows are in order
            if column.dtype.kind == "f" or np.abs(column).max(initial=0) < _EXACT_INTEGERS:
                # the double of a printed double is the double: exact
                # (a column of doubles as it is: the block makes -0.0 a zero as it copies)
                # (integers as they are: the block reads them as doubles as it fills)
                value_columns.append(column if shortcut.alpha == 1.0 else column * shortcut.alpha + 0.0)
                continue
            formula = Formula(Fraction(0), ((0, Fraction(int(shortcut.alpha))),))
            sources: list[str | None] = [param]
            literals = [""]
        else:
            formula = shortcut.formula
            sources = [part.params[i] for i in shortcut.params]
            # (a plain decimal of at most 15 digits prints as itself: repr is its text)
            literals = [repr(part.numbers[i]) for i in shortcut.params]
            if all(p is None for p in sources):  # only the template's own numbers: one constant
                value_columns.append(_constant_column(formula.value(literals), len(rows)))
                continue
        value_columns.append([
            formula.value([text_of(p, row) if p is not None else literals[j] for j, p in enumerate(sources)])
            for row in rows.tolist()
        ])  # fmt: skip
    residuals = tuple(group.residuals.values())
    numeric = all(isinstance(c, np.ndarray) for c in value_columns)
    if numeric and len(set(keys)) == len(keys) and value_columns:
        return _row_block(prefix.context, prefix.maxwindow, tuple(keys), residuals, value_columns)  # type: ignore[arg-type]
    for j, row in enumerate(rows.tolist()):
        pairs = dict.fromkeys((k, _plain(c[j])) for k, c in zip(keys, value_columns, strict=True))
        query = CompiledQuery(names[row], prefix.context, prefix.maxwindow, ((Conjunction.of(pairs), residuals),))
        if any(isinstance(v, Fraction) for _, v in pairs):
            query.source_text = row_text(row)  # a constant past the doubles: keep the text
        out[row] = query
    return None


_FILL_ROWS = 1 << 16  # rows of a block filled at a time: a few MB, in cache while written


def _row_block(
    context: Any, maxwindow: Any, keys: tuple[ListKey, ...], residuals: tuple[Residual, ...], columns: list[np.ndarray]
) -> RowBlock:
    """:class:`RowBlock` of ``columns`` (doubles, or integers a double holds exactly),
    its row-major constants filled a band of rows at a time: column by column over the
    whole block wrote every column with a stride of a row (3x slower at a million rows
    of 20), and an integer column is read as doubles in the band, not copied whole."""
    block = RowBlock(context, maxwindow, keys, residuals, [])
    n, width = len(columns[0]), len(keys)
    values = array("d", [0.0]) * (n * width)
    table = np.frombuffer(values, np.float64).reshape(n, width)
    for start in range(0, n, _FILL_ROWS):
        band = table[start : start + _FILL_ROWS]
        for j, column in enumerate(columns):
            band[:, j] = column[start : start + _FILL_ROWS]
        band += 0.0  # -0.0 prints as a zero and is one
    block.values = values
    return block


def block_template(block: RowBlock) -> str:
    """A template whose query for a row of the block's constants (parameter ``c{j}``
    for key ``j``) is that row's query: how a snapshot keeps a table's rows."""
    bound = block.context.bound
    conds = []
    for j, key in enumerate(block.keys):
        pattern = predicate_text(key, PLACEHOLDER, bound)
        if not pattern.endswith(" c"):  # (a numeric key's text ends with its constant)
            raise AssertionError(f"no constant to make a parameter of in {pattern!r}")
        conds.append(f"{pattern[:-1]}:c{j}")
    conds += [r.text for r in block.residuals]
    return query_text(block.context, block.maxwindow, conds)


def _constant_column(value: Any, n: int) -> np.ndarray | list[Any]:
    """One constant for every row: a column of doubles when it is one (the fast way)."""
    return np.full(n, value, np.float64) if type(value) is float else [value] * n


def _plain(value: Any) -> Any:
    # (an integer column's value, a double exactly: as an INTEGER column's constant reads)
    return float(value) + 0.0 if isinstance(value, (np.floating, np.integer)) else value  # -0.0 is a zero


__all__ = [
    "QueryTemplate",
    "RowBlock",
    "RowQueries",
    "RowQuery",
    "block_template",
    "compile_table",
    "first_repeated",
    "numeric_column",
    "parse_template",
    "printed",
    "table_column",
    "table_queries",
]
