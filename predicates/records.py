"""The compiled query record, from compiling a text to the registry: its context
(SELECT, FROM and the MAXWINDOW unit, shared by the queries written alike), its
disjuncts as (list key, constant) conjunctions plus residuals, and the exact linear
formulas a template's constants are made from (:mod:`predicates.token_cache`)."""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import repeat
from typing import Any

import numpy as np

from predicates.errors import Source
from predicates.lexer import header_end, literal_problem, tokenize
from predicates.normalize import (
    ColumnKey,
    ListKey,
    NormalizedQuery,
    Residual,
    format_constant,
)
from predicates.numbers import EXACT_INTEGERS, decimal_text, exact, faithful, to_float
from predicates.semantic import BoundQuery

INF = float("inf")


# ------------------------------------------------------------ symbolic constants


class LinearConst:
    """``beta + sum(alpha_i * p_i)`` over parameters ``p_i``, exact (Fractions)."""

    __slots__ = ("beta", "terms")

    def __init__(self, beta: Fraction, terms: dict[int, Fraction]) -> None:
        self.beta = beta
        self.terms = {i: a for i, a in terms.items() if a != 0}

    def _combine(self, other: object, sign: int) -> LinearConst:
        if isinstance(other, LinearConst):
            terms = dict(self.terms)
            for i, a in other.terms.items():
                terms[i] = terms.get(i, Fraction(0)) + sign * a
            return LinearConst(self.beta + sign * other.beta, terms)
        return LinearConst(self.beta + sign * Fraction(other), dict(self.terms))  # type: ignore[call-overload]

    def __add__(self, other: object) -> LinearConst:
        return self._combine(other, 1)

    __radd__ = __add__

    def __sub__(self, other: object) -> LinearConst:
        return self._combine(other, -1)

    def __rsub__(self, other: object) -> LinearConst:
        return (-self)._combine(other, 1)

    def __mul__(self, k: object) -> LinearConst:
        if isinstance(k, LinearConst):
            raise TypeError("a product of two parameters is not linear")
        f = Fraction(k)  # type: ignore[call-overload]
        return LinearConst(self.beta * f, {i: a * f for i, a in self.terms.items()})

    __rmul__ = __mul__

    def __truediv__(self, k: object) -> LinearConst:
        if isinstance(k, LinearConst):
            raise TypeError("a division by a parameter is not linear")
        divisor: Fraction = Fraction(k)  # type: ignore[call-overload]
        return self * (1 / divisor)

    def __neg__(self) -> LinearConst:
        return self * -1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LinearConst) and self.beta == other.beta and self.terms == other.terms

    def __hash__(self) -> int:
        return hash((self.beta, tuple(sorted(self.terms.items()))))


class Formula:
    """How a numeric constant follows from a comparison's parameters:
    ``beta + sum(alpha_i * p_i)``."""

    __slots__ = ("_alpha", "_constant", "_index", "beta", "fast", "terms")

    def __init__(self, beta: Fraction, terms: tuple[tuple[int, Fraction], ...]) -> None:
        self.beta = beta
        self.terms = terms
        # One parameter times a power of two (or a constant): float arithmetic is exact.
        fast = not terms
        if len(terms) == 1 and beta == 0:
            alpha = abs(terms[0][1])
            fast = alpha.numerator & (alpha.numerator - 1) == 0 and alpha.denominator & (alpha.denominator - 1) == 0
        self.fast = fast
        self._index = terms[0][0] if terms else 0
        self._alpha = to_float(terms[0][1]) if terms else 0.0
        self._constant = faithful(beta)

    @classmethod
    def of(cls, value: object) -> Formula:
        if isinstance(value, LinearConst):
            return cls(value.beta, tuple(sorted(value.terms.items())))
        return cls(Fraction(value), ())  # type: ignore[call-overload]

    def value(self, texts: Sequence[str]) -> float | Fraction:
        if not self.terms:
            return self._constant
        if self.fast:
            return scaled_number(texts[self._index], self._alpha)
        return faithful(self.beta + sum((a * Fraction(texts[i]) for i, a in self.terms), Fraction(0)))


def scaled_number(text: str, alpha: float) -> float | Fraction:
    """The constant ``text * alpha`` (``alpha`` a signed power of two) as the engine
    keeps it (:func:`~predicates.numbers.faithful`). A literal of at most 15
    characters has at most 15 digits, and every such decimal is the shortest one of
    its double: then the double is the constant and no Fraction is needed."""
    value = float(text) * alpha + 0.0  # + 0.0: no negative zero
    plain = "e" not in text and "E" not in text  # (1e-400 is short, and not the double 0.0)
    if (alpha == 1.0 or alpha == -1.0) and len(text) <= 15 and plain:
        return value
    if (value == INF or value == -INF) and float(text) in (INF, -INF):
        return value  # a literal out of range: the full front end reports it
    if not plain and literal_problem(text) is not None:
        return INF  # (1e-999999: Fraction would compute the power) the front end reports it
    return faithful(Fraction(text) * Fraction(alpha))


# ---------------------------------------------------------------- compiled forms


class Conjunction(Sequence[tuple[ListKey, Any]]):
    """A disjunct's indexed predicates, ``(list key, constant)`` pairs, stored as two
    columns: the keys, and the constants as an ``array('d')`` when they are all
    numbers. A registered query keeps these for its lifetime; as pairs they would take
    three times the memory (a tuple and a float object per predicate)."""

    __slots__ = ("keys", "values")

    def __init__(self, keys: tuple[ListKey, ...], values: Sequence[Any]) -> None:
        self.keys = keys
        self.values = values

    @classmethod
    def of(cls, pairs: Iterable[tuple[ListKey, Any]], numeric: bool | None = None) -> Conjunction:
        """From pairs; ``numeric``: whether every constant is a float (checked if None)."""
        pairs = list(pairs)
        values = [v for _, v in pairs]
        if numeric is None:
            numeric = all(type(v) is float for v in values)
        return cls(tuple([k for k, _ in pairs]), array("d", values) if numeric else tuple(values))

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[tuple[ListKey, Any]]:
        return zip(self.keys, self.values, strict=True)

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        if isinstance(i, slice):
            return list(self)[i]
        return (self.keys[i], self.values[i])

    def __repr__(self) -> str:
        return f"Conjunction({list(self)!r})"


Disjunct = tuple[Conjunction, tuple[Residual, ...]]


@dataclass(eq=False)
class Context:
    """A query's SELECT and FROM (and MAXWINDOW unit): what its comparisons resolve
    against and what its results carry. Shared by every query with the same text."""

    select_text: str
    from_text: str
    bound: BoundQuery
    window_scale: Fraction | None

    @property
    def aliases(self) -> tuple[tuple[str, str], ...]:
        return self.bound.aliases

    @property
    def streams(self) -> tuple[str, ...]:
        return self.bound.streams

    @property
    def multi_stream(self) -> bool:
        return len(self.bound.aliases) > 1


@dataclass(eq=False, slots=True)  # a million registered queries: no dict each
class CompiledQuery:
    """A query ready to register: its name, context, MAXWINDOW in seconds, and its
    disjuncts as (list key, constant) pairs plus residuals. ``text`` is kept only for
    queries the fast path did not take (the others can be written back from parts)."""

    name: str
    context: Context
    maxwindow: float | Fraction | None
    disjuncts: tuple[Disjunct, ...]
    source_text: str | None = None

    def renamed(self, name: str) -> CompiledQuery:
        return CompiledQuery(name, self.context, self.maxwindow, self.disjuncts, self.source_text)

    @property
    def text(self) -> str:
        """A query text that compiles back to this query (with a ``Query ID:`` header)."""
        header = f"Query ID: {_quote_name(self.name)}\n"
        if self.source_text is not None:
            source = self.source_text
            return header + source[header_end(tokenize(Source(source))) :].strip()
        if not self.disjuncts:
            return header + query_text(self.context, self.maxwindow, None)
        (preds, residuals), *_ = self.disjuncts
        bound = self.context.bound
        aliased = bound if bound.self_join else None  # (decided once, not per predicate)
        conds = [predicate_text(key, _exact(value, key), aliased) for key, value in preds]
        conds += [r.text for r in residuals]
        return header + query_text(self.context, self.maxwindow, conds)


def query_text(context: Context, maxwindow: float | Fraction | None, conditions: list[str] | None) -> str:
    """The text (without a header) of a query of ``context`` and ``maxwindow`` whose
    WHERE clause is ``conditions`` joined by AND (None: a query that never matches)."""
    parts = [f"SELECT {context.select_text} FROM {context.from_text}"]
    if maxwindow is not None and context.window_scale is not None:
        seconds = exact(maxwindow)
        # a window past the doubles as its exact decimal: a/b does not parse
        shown = decimal_text(seconds) if isinstance(maxwindow, Fraction) else None
        parts.append(f"MAXWINDOW {shown or format_constant(seconds)}")
    if conditions is None:
        parts.append("WHERE 1 = 0")
    elif conditions:
        parts.append("WHERE " + " AND ".join(conditions))
    return " ".join(parts)


def predicate_text(key: ListKey, constant: Any, bound: BoundQuery | None) -> str:
    """A predicate as query text (``constant``: its exact value, or ``PLACEHOLDER`` for
    a ``c``): columns of a stream read under several aliases are named by the alias of
    their role (``b2.pressure``, not the role ``B#2.pressure``); ``bound`` None: the
    query reads no stream twice."""
    if bound is None or not bound.self_join:
        return f"{key.left} {key.op} {key.rhs_text(constant)}"
    alias_of = {role.lower(): alias for alias, role in bound.role_aliases}

    def named(col: ColumnKey) -> ColumnKey:
        return ColumnKey(alias_of.get(col.stream.lower(), col.stream), col.column)

    right = None if key.right is None else named(key.right)
    shown = ListKey(key.kind, named(key.left), key.op, right, key.factor, key.family)
    return f"{shown.left} {shown.op} {shown.rhs_text(constant)}"


def _exact(value: Any, key: ListKey) -> Any:
    """A constant as its text is printed from: what it means (a double below 2**53
    as it is: it prints as its shortest decimal, or as its integer, either way what
    it means; no Fraction made for each of a million table rows' constants)."""
    if key.family == "number" and value is not None:
        return value if type(value) is float and -EXACT_INTEGERS < value < EXACT_INTEGERS else exact(value)
    return value


def maxwindow_value(text: str, scale: Fraction) -> float | Fraction:
    """A MAXWINDOW of ``text`` units of ``scale`` seconds, as the engine keeps it."""
    plain = "e" not in text and "E" not in text
    if scale == 1 and len(text) <= 15 and plain:
        return float(text)
    if not plain and literal_problem(text) is not None:
        return INF  # the front end reports it
    seconds = Fraction(text) * scale
    return INF if to_float(seconds) == INF else faithful(seconds)


def has_fraction(compiled: CompiledQuery) -> bool:
    return any(isinstance(v, Fraction) for preds, _ in compiled.disjuncts for v in preds.values)


def _quote_name(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_0-9.]+", name) else "'" + name.replace("'", "''") + "'"


def from_normalized(nq: NormalizedQuery, name: str | None = None, text: str | None = None) -> CompiledQuery:
    """A fully normalized query in the registered form."""
    bound = nq.bound
    scale = Fraction(1) if bound.maxwindow is not None else None
    context = Context("*", "", bound, scale)
    disjuncts = tuple(
        (Conjunction.of((p.key, p.value) for p in conj.predicates), tuple(conj.residuals)) for conj in nq.disjuncts
    )
    maxwindow = faithful(bound.maxwindow) if bound.maxwindow is not None else None
    source = text if text is not None else bound.source.text[bound.query.span.start : bound.query.span.end]
    return CompiledQuery(name or nq.name, context, maxwindow, disjuncts, source)


# ------------------------------------------------------------------ row blocks


class RowBlock:
    """What the rows of one template group share, and their constants as one flat
    array of doubles, row after row (a row's slice is a ready ``array('d')``)."""

    __slots__ = ("context", "keys", "maxwindow", "residuals", "values", "width")

    def __init__(
        self,
        context: Any,
        maxwindow: Any,
        keys: tuple[ListKey, ...],
        residuals: tuple[Residual, ...],
        columns: Sequence[np.ndarray],
    ) -> None:
        """``columns``: each key's constants, row by row (numbers a double holds exactly)."""
        self.context = context
        self.maxwindow = maxwindow
        self.keys = keys
        self.residuals = residuals
        self.width = width = len(keys)
        n = len(columns[0]) if columns else 0
        # written column by column into the array itself: no row-major copy made between
        self.values = array("d", [0.0]) * (n * width)
        if n * width:
            table = np.frombuffer(self.values, np.float64).reshape(n, width)
            for j, column in enumerate(columns):
                table[:, j] = column
            table += 0.0  # -0.0 prints as a zero and is one

    @classmethod
    def of_table(
        cls, context: Any, maxwindow: Any, keys: tuple[ListKey, ...], residuals: tuple[Residual, ...], table: np.ndarray
    ) -> RowBlock:
        """A block of a [rows, keys] array of constants (numbers a double holds exactly)."""
        block = cls(context, maxwindow, keys, residuals, [])
        values = array("d")
        values.frombytes(np.ascontiguousarray(table + 0.0, np.float64).tobytes())  # (-0.0 is a zero)
        block.values = values
        return block


class RowQuery(CompiledQuery):
    """A table row's query record: its constants are row ``row`` of its block, made
    into a :class:`Conjunction` only when asked for (a million rows hold no array,
    conjunction and tuples each). Read like any :class:`CompiledQuery`."""

    __slots__ = ("block", "row")

    def __init__(self, name: str, block: RowBlock, row: int) -> None:
        self.name = name
        self.source_text = None
        self.block = block
        self.row = row

    @property
    def context(self) -> Any:  # type: ignore[override]
        return self.block.context

    @property
    def maxwindow(self) -> Any:  # type: ignore[override]
        return self.block.maxwindow

    @property
    def disjuncts(self) -> tuple[Any, ...]:  # type: ignore[override]
        block = self.block
        start = self.row * block.width
        return ((Conjunction(block.keys, block.values[start : start + block.width]), block.residuals),)


class RowQueries(Sequence[RowQuery]):
    """A table's queries when one block holds all of them, row after row: query ``k`` is
    named ``names[k]`` and reads row ``k``. The registry keeps such a table as its block
    (:meth:`mqo.registry.QueryRegistry.add`); a :class:`RowQuery` is made only when one
    is looked at."""

    __slots__ = ("block", "names")

    def __init__(self, names: list[str], block: RowBlock) -> None:
        if len(block.values) != len(names) * block.width:
            raise ValueError(f"{len(names)} names for {len(block.values) // max(block.width, 1)} rows")
        self.names = names
        self.block = block

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, k: int) -> RowQuery:  # type: ignore[override]
        if not -len(self.names) <= k < len(self.names):
            raise IndexError(k)
        k %= len(self.names)
        return RowQuery(self.names[k], self.block, k)

    def __iter__(self) -> Iterator[RowQuery]:
        return map(RowQuery, self.names, repeat(self.block), range(len(self.names)))
