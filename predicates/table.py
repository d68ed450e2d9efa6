"""Query templates with named parameters, instantiated from a table of constants.

Subscriptions usually live in a database: one query shape, one row of constants per
subscriber. A **template** is a query text where ``:name`` (a colon written right
before a name, no blank between) stands for a number taken from column ``name`` of the
table; each row is one query, and it means exactly the query text that the template
becomes with each ``:name`` replaced by the row's value **as it prints** (Python's
``repr`` of the double, or the integer's digits: ``0.1`` means one tenth). A value that
makes its query never match (a division by zero, a contradiction) does so exactly as the
written-out text would.

The template is compiled once: its parameters are replaced by ``1`` and the text is cut
into comparison patterns by the fast compiler (:mod:`predicates.templates`), which also
decides, per pattern, which numbers only ever add to the comparison. A parameter that
only adds (``E.x >= :lo``, ``B.p <= 2 * H.v + :c``) gives the predicate's constant by an
exact linear formula, applied to the whole column at once (for the usual ``column OP
:p``, the constant is the column's double itself). Any other parameter (a factor, a
divisor, a window length) is **structural**: the rows are grouped by its value and each
group's text is compiled once. Rows the shortcuts cannot take are compiled from their
written-out text, one by one, through the usual path (so errors keep their positions).

It uses the fast compiler's pattern caches directly; its rows are
:class:`~predicates.records.RowBlock` rows, as the template cache's
(:mod:`predicates.template_cache`) are.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from predicates.clauses import HOLE, NUMBER_SPLIT, lexer_blanks_only, split_header, split_skeleton
from predicates.errors import QueryError, Source, Span
from predicates.lexer import T, tokenize
from predicates.normalize import PLACEHOLDER, ListKey, Residual
from predicates.numbers import faithful
from predicates.records import (
    INF,
    CompiledQuery,
    Conjunction,
    RowBlock,
    RowQueries,
    RowQuery,
    maxwindow_value,
    predicate_text,
    query_text,
)
from predicates.templates import UNKNOWN, ComparisonTemplate, FastCompiler

_PLACEHOLDER = "1"
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
    name, _ = split_header(text)
    if name is not None:
        raise QueryError("a template has no Query ID header: each row's id comes from the table")
    tokens = tokenize(Source(text, source_name))
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
    compile_text: Callable[[str, int], CompiledQuery],
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
    queries = compile_table(registry.compiler, parsed, columns, names, compile_text)
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
    """One comparison of a compiled template group: how each row's predicate follows."""

    template: ComparisonTemplate
    numbers: list[str]  # the pattern's numbers in the placeholder text
    params: list[str | None]  # per number: the parameter it stands for, or None (a literal)


def compile_table(
    compiler: FastCompiler,
    template: QueryTemplate,
    columns: Mapping[str, np.ndarray],
    names: Sequence[str],
    compile_text: Callable[[str, int], CompiledQuery],
) -> Sequence[CompiledQuery]:
    """One compiled query per row (named by ``names``): a :class:`RowQueries` when one
    block holds them all. ``compile_text(text, row)`` compiles a row's written-out text
    the usual way (the fallback)."""
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

    def one_by_one(rows: np.ndarray) -> None:
        for row in rows.tolist():
            compiled = compile_text(row_text(row), row)
            out[row] = compiled.renamed(names[row])

    all_rows = np.arange(n)
    parts = _compile_group(compiler, template, {})
    if parts is None:
        one_by_one(all_rows)
        return out  # type: ignore[return-value]
    structural = [p for p in template.names if p not in parts[3]]
    if not structural:
        block = _instantiate(parts, all_rows, columns, names, text_of, out, row_text)
        return RowQueries(names, block) if block is not None else out  # type: ignore[return-value]
    # group rows by the structural parameters' values; compile each group once
    keys = np.column_stack([columns[p].astype(np.float64) if columns[p].dtype.kind == "f" else columns[p]
                            for p in structural])  # fmt: skip
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    for group, rows in enumerate(np.split(order, bounds)):
        fixed = {p: text_of(p, int(first[group])) for p in structural}
        group_parts = _compile_group(compiler, template, fixed)
        if group_parts is None or any(p not in group_parts[3] for p in template.names if p not in fixed):
            one_by_one(rows)
        else:
            block = _instantiate(group_parts, rows, columns, names, text_of, out, row_text)
            if block is not None and len(rows) == n:  # one group: every row, in order
                return RowQueries(names, block)
            if block is not None:
                for k, row in enumerate(rows.tolist()):
                    out[row] = RowQuery(names[row], block, k)
    return out  # type: ignore[return-value]


_Compiled = tuple[Any, Any, list[_Part | Residual | bool], set[str]]


def _compile_group(compiler: FastCompiler, template: QueryTemplate, fixed: Mapping[str, str]) -> _Compiled | None:
    """(context, maxwindow, parts, additive parameters) of the template with ``fixed``
    parameters written in and the others at the placeholder, or None (not a shape the
    fast compiler cuts: the rows go one by one)."""
    values = {p: fixed.get(p, _PLACEHOLDER) for p in template.names}
    text = template.written(values)
    # which number of the text each free parameter is: by offsets
    starts: dict[int, str] = {}
    shift = 0
    for name, start, end in template.params:
        if name not in fixed:
            starts[start + shift] = name
        shift += len(values[name]) - (end - start)
    parts_text = NUMBER_SPLIT.split(text)
    skeleton, numbers = tuple(parts_text[0::2]), parts_text[1::2]
    param_of: list[str | None] = []
    offset = 0
    for piece, number in zip(skeleton, numbers, strict=False):
        offset += len(piece)
        param_of.append(starts.pop(offset, None))
        offset += len(number)
    if any(p is not None and n != _PLACEHOLDER for p, n in zip(param_of, numbers, strict=False)):
        return None  # the placeholder ran into what follows it (``:lo.5``): the texts decide
    if starts or any(c in text for c in "('\"") or not lexer_blanks_only(text):
        return None  # a parameter the number split does not see as one number, or a text to scan
    shape = split_skeleton(skeleton, numbers)
    if shape is None or shape.select_has_numbers:
        return None
    context = compiler.context_for(shape.select, shape.from_, shape.unit)
    if context is None:
        return None
    maxwindow = None
    additive: set[str] = set()
    structural: set[str] = set()
    if shape.window_index is not None:
        window_param = param_of[shape.window_index]
        if window_param is not None:
            structural.add(window_param)  # a window length: the groups write it in
        else:
            maxwindow = maxwindow_value(numbers[shape.window_index], context.window_scale)  # type: ignore[arg-type]
            if maxwindow == INF:
                return None
    parts: list[_Part | Residual | bool] = []
    for k, patterns in shape.conditions:
        for pattern in patterns:
            count = pattern.count(HOLE)
            nums = numbers[k : k + count]
            params = param_of[k : k + count]
            k += count
            got = compiler._comparison(context, None, (pattern, nums))
            if got is UNKNOWN:
                return None
            known = compiler._structure.get((context, pattern))
            tmpl = (
                None if known is None else compiler._templates.get(((context, pattern), tuple(nums[i] for i in known)))
            )
            if tmpl is None:
                return None
            free = set(tmpl.params)
            for i, p in enumerate(params):
                if p is not None:
                    (additive if i in free else structural).add(p)
            if tmpl.formula is None:
                parts.append(got if isinstance(got, (bool, Residual)) else _Part(tmpl, nums, params))
            else:
                parts.append(_Part(tmpl, nums, params))
    return context, maxwindow, parts, additive - structural


def _instantiate(
    compiled: _Compiled,
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
    context, maxwindow, parts, _ = compiled
    if False in parts:
        for row in rows.tolist():
            out[row] = CompiledQuery(names[row], context, maxwindow, ())
        return None
    residuals = tuple({r.text: r for r in parts if isinstance(r, Residual)}.values())
    keys: list[ListKey] = []
    value_columns: list[np.ndarray | list[Any]] = []
    for part in parts:
        if not isinstance(part, _Part):
            continue
        tmpl = part.template
        keys.append(tmpl.key)  # type: ignore[arg-type]
        formula = tmpl.formula
        if formula is None or not formula.terms:
            constant = tmpl.constant if formula is None else formula.value(())
            value_columns.append(_constant_column(constant, len(rows)))
            continue
        # the number each formula term reads: a literal of the template or a parameter
        sources = [part.params[tmpl.params[i]] for i, _ in formula.terms]
        if formula.fast and sources[0] is not None and formula._alpha in (1.0, -1.0):
            column = columns[sources[0]]
            column = column if len(rows) == len(column) else column[rows]  # all rows are in order
            if column.dtype.kind == "f" or np.abs(column).max(initial=0) < _EXACT_INTEGERS:
                # the double of a printed double is the double: exact
                # (a column of doubles as it is: the block makes -0.0 a zero as it copies)
                # (integers as they are: the block reads them as doubles as it fills)
                value_columns.append(column if formula._alpha == 1.0 else column * formula._alpha + 0.0)
                continue
        local = [part.numbers[i] for i in tmpl.params]
        if all(p is None for p in sources):  # only the template's own numbers: one constant
            value_columns.append(_constant_column(_value(formula, local), len(rows)))
            continue
        values = []
        for row in rows.tolist():
            texts = [
                text_of(p, row) if p is not None else local[j]
                for j, p in enumerate(part.params[i] for i in tmpl.params)
            ]
            values.append(_value(formula, texts))
        value_columns.append(values)
    key_tuple = tuple(keys)
    numeric = all(isinstance(c, np.ndarray) for c in value_columns)
    distinct_keys = len(set(keys)) == len(keys)
    if numeric and distinct_keys and value_columns:
        return _row_block(context, maxwindow, key_tuple, residuals, value_columns)  # type: ignore[arg-type]
    for j, row in enumerate(rows.tolist()):
        pairs = dict.fromkeys((k, _plain(c[j])) for k, c in zip(keys, value_columns, strict=True))
        query = CompiledQuery(names[row], context, maxwindow, ((Conjunction.of(pairs), residuals),))
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


def _value(formula: Any, texts: list[str]) -> float | Fraction:
    """The formula's constant for these numbers' texts (signed: a negative value's sign
    is part of its text, and the formula is linear in it)."""
    beta = formula.beta
    total = beta + sum((a * Fraction(texts[i]) for i, a in formula.terms), Fraction(0))
    return faithful(total)


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
