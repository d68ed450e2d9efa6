"""Normalization of bound queries into canonical, shareable predicates.

1. NOT is pushed down to the comparisons (``NOT x < 5`` becomes ``x >= 5``). With SQL's
   three-valued logic this is exact: a comparison with NULL is unknown either way.
2. The condition is expanded into disjunctive normal form. The number of disjuncts is
   computed before expanding (products over AND, sums over OR), so a condition that
   would blow up is rejected up front with a clear error instead of eating memory.
3. Each comparison is brought to one side, ``sum(a_i * col_i) + b OP 0``, in exact
   rational arithmetic, and then:

   ======================  ==============================  ==========================
   columns                 canonical form                  kind
   ======================  ==============================  ==========================
   none                    a constant truth value          decided at registration
   one                     ``x OP c``                      attribute
   two, same stream        ``x OP k*y + c``                attribute (two columns)
   two ``ts`` columns      ``x.ts OP k*y.ts + c``          window
   two, other streams      ``x OP k*y + c``                join
   three or more, or not   the comparison as written       residual
   linear
   ======================  ==============================  ==========================

   ``x`` is the side whose stream comes first in declaration order (then column order),
   so ``B.pressure > T.fluct`` and ``T.fluct < 0.5 * B.pressure`` land in lists of the
   same columns and operator. Dividing by ``x``'s coefficient flips the operator when it
   is negative. A column whose coefficient cancels to zero keeps the comparison a
   residual: dropping it would turn a NULL comparison (false) into a true one.

The **list key** of a predicate is (kind, x, operator, y, factor k); predicates of one
list differ only in ``c``. Within a list the **covering order** is the order of ``c``:
for any values of ``x`` and ``y``, ``x OP k*y + c`` is monotone in ``c``, so the
satisfied predicates of a list are always a prefix or suffix in that order, whatever
the sign of the values. (The thesis ordered by factor, which is only right for
non-negative values; factors here split lists instead.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction
from typing import Any

from predicates.ast import (
    And,
    Arith,
    BoolLit,
    ColumnRef,
    Comparison,
    Condition,
    Expr,
    Negate,
    Not,
    Number,
    Or,
    StringLit,
    condition_text,
)
from predicates.errors import QueryError
from predicates.numbers import faithful, to_float
from predicates.semantic import BoundQuery, OutputColumn, referenced_aliases

DEFAULT_MAX_DISJUNCTS = 64

NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "=": "!=", "!=": "="}
MIRRORED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}


PLACEHOLDER = object()


class Kind(Enum):
    ATTRIBUTE = "attribute"
    JOIN = "join"
    WINDOW = "window"
    RESIDUAL = "residual"

    @property
    def letter(self) -> str:
        """A, J, W (R): how evaluation orders such as ``AJW`` name the types."""
        return self.value[0].upper()


INDEXED_KINDS = (Kind.ATTRIBUTE, Kind.JOIN, Kind.WINDOW)  # the types kept in predicate lists


@dataclass(frozen=True, slots=True, order=True)
class ColumnKey:
    stream: str
    column: str

    def __str__(self) -> str:
        return f"{self.stream}.{self.column}"


@dataclass(frozen=True, slots=True)
class ListKey:
    """What the predicates of one list share: ``left op factor*right + c``.

    ``right`` is None for one-column attribute predicates. ``factor`` is None unless the
    predicate is numeric with two columns. ``family`` is 'number', 'string' or
    'boolean'. (Keys are hashed a lot when many queries register: the hash is kept.)
    """

    kind: Kind
    left: ColumnKey
    op: str
    right: ColumnKey | None = None
    factor: Fraction | None = None
    family: str = "number"
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.kind, self.left, self.op, self.right, self.factor, self.family)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def streams(self) -> tuple[str, ...]:
        if self.right is None or self.right.stream == self.left.stream:
            return (self.left.stream,)
        return (self.left.stream, self.right.stream)

    @property
    def factor_value(self) -> float:
        return to_float(self.factor) if self.factor is not None else 1.0

    def rhs_text(self, constant: object = PLACEHOLDER) -> str:
        """Text of the right-hand side, with ``constant`` or the placeholder ``c``."""
        placeholder = constant is PLACEHOLDER
        if self.right is None:
            return "c" if placeholder else format_constant(constant)
        if self.factor is None or self.factor == 1:
            term = str(self.right)
        elif self.factor == -1:
            term = f"-{self.right}"
        else:
            term = f"{format_constant(self.factor)}*{self.right}"
        if self.factor is None:
            return term  # strings and booleans: no offset
        if placeholder:
            return f"{term} + c"
        assert isinstance(constant, (Fraction, float, int))
        if constant == 0:
            return term
        if constant < 0:
            return f"{term} - {format_constant(-constant)}"
        return f"{term} + {format_constant(constant)}"

    def describe(self) -> str:
        """The list as a pattern, e.g. ``B.pressure > 2*T.fluct + c``."""
        return f"{self.left} {self.op} {self.rhs_text()}"


Constant = Fraction | str | bool | None


@dataclass(frozen=True, slots=True)
class Predicate:
    """A canonical predicate: ``key.left key.op key.factor*key.right + constant``.

    ``constant`` is exact (a Fraction for numbers); ``value`` is what the engine
    compares with. Two predicates are the same predicate exactly when key and constant
    are equal; that is what queries share.
    """

    key: ListKey
    constant: Constant

    @property
    def kind(self) -> Kind:
        return self.key.kind

    @property
    def value(self) -> float | Fraction | str | bool | None:
        """The constant as the engine keeps it: a float when the float means exactly
        the constant, else the Fraction (:func:`predicates.numbers.faithful`)."""
        if isinstance(self.constant, Fraction):
            return faithful(self.constant)
        return self.constant

    def describe(self) -> str:
        return f"{self.key.left} {self.key.op} {self.key.rhs_text(self.constant)}"


@dataclass(frozen=True, slots=True)
class Residual:
    """A comparison that is not shared: evaluated as written, after the indexed ones."""

    comparison: Comparison
    aliases: frozenset[str]

    @property
    def text(self) -> str:
        return condition_text(self.comparison)


@dataclass(frozen=True, slots=True)
class Conjunct:
    """One disjunct of a query: all of its predicates and residuals must hold."""

    predicates: tuple[Predicate, ...]
    residuals: tuple[Residual, ...]

    def of_kind(self, kind: Kind) -> tuple[Predicate, ...]:
        return tuple(p for p in self.predicates if p.kind is kind)


@dataclass(frozen=True)
class NormalizedQuery:
    """A bound query as a disjunction of conjuncts of canonical predicates.

    ``disjuncts`` is empty when the condition can never hold (it is decided false at
    registration); it holds one empty conjunct when there is no condition at all.
    """

    bound: BoundQuery
    disjuncts: tuple[Conjunct, ...]

    @property
    def name(self) -> str:
        return self.bound.name

    @property
    def aliases(self) -> tuple[tuple[str, str], ...]:
        return self.bound.aliases

    @property
    def streams(self) -> tuple[str, ...]:
        return self.bound.streams

    @property
    def maxwindow(self) -> float:
        return to_float(self.bound.maxwindow) if self.bound.maxwindow is not None else 0.0

    @property
    def outputs(self) -> tuple[OutputColumn, ...]:
        return self.bound.outputs


ColumnOrder = Callable[[ColumnKey], tuple[Any, ...]]


# ----------------------------------------------------------------- NNF and DNF


def push_not(cond: Condition, negate: bool = False) -> Condition:
    """Negation normal form: NOT only ever appears folded into comparison operators."""
    if isinstance(cond, Not):
        return push_not(cond.operand, not negate)
    if isinstance(cond, Comparison):
        if not negate:
            return cond
        return Comparison(NEGATED[cond.op], cond.left, cond.right, cond.span, cond.op_span)
    items = tuple(push_not(item, negate) for item in cond.items)
    conjunctive = isinstance(cond, And) != negate
    return And(items, cond.span) if conjunctive else Or(items, cond.span)


def dnf_size(cond: Condition) -> int:
    """How many disjuncts the DNF of an NNF condition has (before simplification)."""
    if isinstance(cond, Comparison):
        return 1
    if isinstance(cond, And):
        return math.prod(dnf_size(item) for item in cond.items)
    if isinstance(cond, Or):
        return sum(dnf_size(item) for item in cond.items)
    raise TypeError(f"not in negation normal form: {cond!r}")


def to_dnf(cond: Condition, max_disjuncts: int = DEFAULT_MAX_DISJUNCTS) -> list[list[Comparison]]:
    """Disjunctive normal form of ``cond``; raises QueryError past ``max_disjuncts``."""
    nnf = push_not(cond)
    size = dnf_size(nnf)
    if size > max_disjuncts:
        raise QueryError(
            f"this condition expands to {size} alternatives (the limit is {max_disjuncts})",
            None,
            None,
            hint="OR inside AND multiplies; split the query into several queries or raise max_disjuncts",
        )
    return _expand(nnf)


def _expand(cond: Condition) -> list[list[Comparison]]:
    if isinstance(cond, Comparison):
        return [[cond]]
    if isinstance(cond, Or):
        return [conj for item in cond.items for conj in _expand(item)]
    result: list[list[Comparison]] = [[]]
    for item in cond.items:  # type: ignore[union-attr]
        result = [left + right for left in result for right in _expand(item)]
    return result


# --------------------------------------------------------------- linear forms


def linearize(expr: Expr) -> tuple[dict[ColumnKey, Fraction], Fraction] | None:
    """``expr`` as (coefficients, constant) if it is linear, else None.

    Coefficients that cancel to zero are kept (as zeros) so the caller can tell.
    """
    if isinstance(expr, Number):
        return {}, expr.value
    if isinstance(expr, ColumnRef):
        assert expr.stream is not None
        return {ColumnKey(expr.stream, expr.name): Fraction(1)}, Fraction(0)
    if isinstance(expr, Negate):
        inner = linearize(expr.operand)
        return None if inner is None else _scale(inner, Fraction(-1))
    if isinstance(expr, Arith):
        left, right = linearize(expr.left), linearize(expr.right)
        if left is None or right is None:
            return None
        if expr.op == "+":
            return _add(left, right, 1)
        if expr.op == "-":
            return _add(left, right, -1)
        if expr.op == "*":
            if not left[0]:
                return _scale(right, left[1])
            if not right[0]:
                return _scale(left, right[1])
            return None
        if expr.op == "/":
            if right[0]:
                return None
            if right[1] == 0:
                return None  # division by zero: evaluated as a residual (the value is NULL)
            return _scale(left, 1 / right[1])
    return None


def _scale(lin: tuple[dict[ColumnKey, Fraction], Fraction], k: Fraction) -> tuple[dict[ColumnKey, Fraction], Fraction]:
    coeffs, const = lin
    return {col: a * k for col, a in coeffs.items()}, const * k


def _add(
    a: tuple[dict[ColumnKey, Fraction], Fraction], b: tuple[dict[ColumnKey, Fraction], Fraction], sign: int
) -> tuple[dict[ColumnKey, Fraction], Fraction]:
    coeffs = dict(a[0])
    for col, coef in b[0].items():
        coeffs[col] = coeffs.get(col, Fraction(0)) + sign * coef
    return coeffs, a[1] + sign * b[1]


# ------------------------------------------------------------- canonical forms


def truth(lhs: Any, op: str, rhs: Any) -> bool:
    if op == "<":
        return bool(lhs < rhs)
    if op == "<=":
        return bool(lhs <= rhs)
    if op == ">":
        return bool(lhs > rhs)
    if op == ">=":
        return bool(lhs >= rhs)
    if op == "=":
        return bool(lhs == rhs)
    return bool(lhs != rhs)


def _kind_of_pair(x: ColumnKey, y: ColumnKey) -> Kind:
    if x.stream == y.stream:
        return Kind.ATTRIBUTE
    if x.column == "ts" and y.column == "ts":
        return Kind.WINDOW
    return Kind.JOIN


def canonicalize(cmp: Comparison, order: ColumnOrder) -> Predicate | Residual | bool:
    """The canonical predicate of one comparison, a residual, or a constant truth value."""
    left, right = cmp.left, cmp.right
    if isinstance(left, (StringLit, BoolLit)) or isinstance(right, (StringLit, BoolLit)) or _non_numeric(left):
        return _canonicalize_plain(cmp, order)
    if _divides_by_zero(left) or _divides_by_zero(right):
        return False  # x / 0 is NULL, and a comparison with NULL never holds
    lin = linearize(Arith("-", left, right, cmp.span))
    if lin is None:
        return Residual(cmp, frozenset(referenced_aliases(cmp)))
    coeffs, const = lin
    if any(a == 0 for a in coeffs.values()) or len(coeffs) > 2:
        return Residual(cmp, frozenset(referenced_aliases(cmp)))
    if not coeffs:
        return truth(const, cmp.op, 0)
    cols = sorted(coeffs, key=order)
    x = cols[0]
    a = coeffs[x]
    op = cmp.op if a > 0 else MIRRORED[cmp.op]
    c = -const / a
    if len(cols) == 1:
        return Predicate(ListKey(Kind.ATTRIBUTE, x, op), c)
    y = cols[1]
    k = -coeffs[y] / a
    return Predicate(ListKey(_kind_of_pair(x, y), x, op, y, k), c)


def _divides_by_zero(expr: Expr) -> bool:
    """Whether ``expr`` divides by a constant zero somewhere (its value is always NULL)."""
    if isinstance(expr, Negate):
        return _divides_by_zero(expr.operand)
    if not isinstance(expr, Arith):
        return False
    if expr.op == "/":
        divisor = linearize(expr.right)
        if divisor is not None and not divisor[0] and divisor[1] == 0:
            return True
    return _divides_by_zero(expr.left) or _divides_by_zero(expr.right)


def _non_numeric(expr: Expr) -> bool:
    return isinstance(expr, ColumnRef) and expr.ctype is not None and not expr.ctype.is_numeric


def _canonicalize_plain(cmp: Comparison, order: ColumnOrder) -> Predicate | bool:
    """String and boolean comparisons: columns and literals only (the binder checked)."""
    left, right, op = cmp.left, cmp.right, cmp.op
    family = "string" if isinstance(left, StringLit) or isinstance(right, StringLit) else "boolean"
    if isinstance(left, ColumnRef) and left.ctype is not None:
        family = left.ctype.family
    elif isinstance(right, ColumnRef) and right.ctype is not None:
        family = right.ctype.family
    if not isinstance(left, ColumnRef) and not isinstance(right, ColumnRef):
        return truth(left.value, op, right.value)  # type: ignore[union-attr]
    if not isinstance(left, ColumnRef):
        left, right, op = right, left, MIRRORED[op]
    assert isinstance(left, ColumnRef) and left.stream is not None
    x = ColumnKey(left.stream, left.name)
    if not isinstance(right, ColumnRef):
        return Predicate(ListKey(Kind.ATTRIBUTE, x, op, family=family), right.value)  # type: ignore[union-attr]
    assert right.stream is not None
    y = ColumnKey(right.stream, right.name)
    if order(y) < order(x):
        x, y, op = y, x, MIRRORED[op]
    return Predicate(ListKey(_kind_of_pair(x, y), x, op, y, family=family), None)


def normalize(bound: BoundQuery, order: ColumnOrder, max_disjuncts: int = DEFAULT_MAX_DISJUNCTS) -> NormalizedQuery:
    """Normalize a bound query. Errors are attributed to the query."""
    try:
        return _normalize(bound, order, max_disjuncts)
    except QueryError as err:
        if err.source is None:
            cond = bound.condition
            err = QueryError(err.message, bound.source, cond.span if cond else bound.query.span, hint=err.hint)
        raise err.in_query(bound.name) from None


def _normalize(bound: BoundQuery, order: ColumnOrder, max_disjuncts: int) -> NormalizedQuery:
    if bound.condition is None:
        return NormalizedQuery(bound, (Conjunct((), ()),))
    conjuncts: list[Conjunct] = []
    seen_conjuncts: set[tuple[Any, ...]] = set()
    for comparisons in to_dnf(bound.condition, max_disjuncts):
        preds: dict[Predicate, None] = {}
        residuals: dict[str, Residual] = {}
        possible = True
        for cmp in comparisons:
            canon = canonicalize(cmp, order)
            if canon is True:
                continue
            if canon is False:
                possible = False
                break
            if isinstance(canon, Residual):
                residuals.setdefault(canon.text, canon)
            else:
                preds[canon] = None
        if not possible:
            continue
        identity = (frozenset(preds), frozenset(residuals))
        if identity in seen_conjuncts:
            continue
        seen_conjuncts.add(identity)
        conjuncts.append(Conjunct(tuple(preds), tuple(residuals.values())))
    return NormalizedQuery(bound, tuple(conjuncts))


# -------------------------------------------------------------- covering order


def most_covering_first(op: str) -> bool:
    """True when larger constants cover more (``x < c`` holds for more x as c grows)."""
    return op in ("<", "<=")


def format_constant(value: object) -> str:
    """Short, exact-where-possible text of a constant."""
    if isinstance(value, float):  # the usual constant first: a table's million rows print so
        return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)
    if isinstance(value, Fraction):
        if value.denominator == 1:
            return str(value.numerator)
        shown = faithful(value)
        if isinstance(shown, float):
            return repr(shown)
        return f"{value.numerator}/{value.denominator}"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)
