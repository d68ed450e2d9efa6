"""Syntax tree of queries and DDL statements.

Every node keeps the :class:`~predicates.errors.Span` it was parsed from, so semantic
errors and ``explain`` can point back at the text. The binder
(:mod:`predicates.semantic`) returns trees of the same classes with every
:class:`ColumnRef` resolved (``alias``/``stream``/``ctype`` filled in).

Number literals keep their exact value as a :class:`~fractions.Fraction`, so
normalization (``T.fluct * 2 = 103`` -> ``T.fluct = 51.5``) is exact arithmetic and
only the final constant is rounded to a float.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction

from predicates.errors import Source, Span


class ColumnType(Enum):
    """Column types of the DDL (and of the implicit ``ts`` and ``id`` columns)."""

    INTEGER = "INTEGER"
    FLOAT = "FLOAT"
    BYTE = "BYTE"
    STRING = "STRING"
    BOOLEAN = "BOOLEAN"

    @property
    def is_numeric(self) -> bool:
        return self in NUMERIC_TYPES

    @property
    def family(self) -> str:
        """'number', 'string' or 'boolean': what the type compares with."""
        if self.is_numeric:
            return "number"
        return "string" if self is ColumnType.STRING else "boolean"


# a set: hot paths (a pushed tuple's values) test membership without the property's call
NUMERIC_TYPES = frozenset({ColumnType.INTEGER, ColumnType.FLOAT, ColumnType.BYTE})


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True)
class Number:
    value: Fraction
    text: str
    span: Span


@dataclass(frozen=True, slots=True)
class StringLit:
    value: str
    span: Span


@dataclass(frozen=True, slots=True)
class BoolLit:
    value: bool
    span: Span


@dataclass(frozen=True, slots=True)
class ColumnRef:
    """``qualifier.name`` or a bare ``name``; resolved fields are set by the binder."""

    qualifier: str | None
    name: str
    span: Span
    alias: str | None = None
    stream: str | None = None
    ctype: ColumnType | None = None

    @property
    def resolved(self) -> bool:
        return self.alias is not None

    def display(self) -> str:
        if self.alias is not None:
            return f"{self.alias}.{self.name}"
        return self.name if self.qualifier is None else f"{self.qualifier}.{self.name}"


@dataclass(frozen=True, slots=True)
class Arith:
    """A binary arithmetic operation: ``op`` is one of ``+ - * /``."""

    op: str
    left: Expr
    right: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Negate:
    operand: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Aggregate:
    """``func(arg)`` of an aggregate query; ``arg`` is None for ``COUNT(*)``."""

    func: str  # COUNT SUM AVG MIN MAX STDDEV VARIANCE
    arg: Expr | None
    span: Span


Expr = Number | StringLit | BoolLit | ColumnRef | Arith | Negate | Aggregate


# ----------------------------------------------------------------- conditions


@dataclass(frozen=True, slots=True)
class Comparison:
    """``left op right`` with ``op`` in canonical spelling (``< <= > >= = !=``)."""

    op: str
    left: Expr
    right: Expr
    span: Span
    op_span: Span


@dataclass(frozen=True, slots=True)
class And:
    items: tuple[Condition, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Or:
    items: tuple[Condition, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Not:
    operand: Condition
    span: Span


Condition = Comparison | And | Or | Not


# -------------------------------------------------------------------- queries


@dataclass(frozen=True, slots=True)
class SelectItem:
    """One SELECT entry. ``star_of`` is set for ``alias.*``; ``expr`` is None then."""

    expr: Expr | None
    name: str | None
    span: Span
    star_of: str | None = None


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """A window on a stream in FROM (the aggregation issue): ``kind`` is 'range'
    (``[RANGE d SLIDE s]``, ``[RANGE d]``: slide = range), 'unbounded'
    (``[RANGE UNBOUNDED SLIDE s]``) or 'rows' (``[ROWS n SLIDE m]``). ``size`` and
    ``slide`` are seconds for time windows and row counts for 'rows'."""

    kind: str
    size: Fraction | None
    slide: Fraction
    span: Span


@dataclass(frozen=True, slots=True)
class FromItem:
    stream: str
    alias: str | None
    span: Span
    window: WindowSpec | None = None


@dataclass(frozen=True, slots=True)
class Duration:
    seconds: Fraction
    text: str
    span: Span


@dataclass(frozen=True, slots=True)
class Query:
    """One parsed query. ``select`` is None for ``SELECT *``."""

    name: str | None
    name_span: Span | None
    select: tuple[SelectItem, ...] | None
    from_: tuple[FromItem, ...]
    window: Condition | None
    maxwindow: Duration | None
    where: Condition | None
    span: Span
    source: Source = field(compare=False, repr=False)
    group_by: tuple[Expr, ...] = ()
    having: Condition | None = None
    # CQL's relation-to-stream operator after SELECT (ISTREAM, DSTREAM, RSTREAM), None
    # when not written; only aggregate queries take one
    stream_op: str | None = None
    stream_op_span: Span | None = None
    view_span: Span | None = None  # ``CREATE VIEW name AS``: the view's name (``name`` holds it)

    @property
    def is_aggregate(self) -> bool:
        """A windowed aggregate query (a window in FROM, GROUP BY, HAVING or an aggregate)."""
        return (
            any(item.window is not None for item in self.from_)
            or bool(self.group_by)
            or self.having is not None
            or any(item.expr is not None and has_aggregate(item.expr) for item in self.select or ())
        )

    def condition(self) -> Condition | None:
        """WINDOW and WHERE together (they mean the same: both must hold)."""
        parts = [c for c in (self.window, self.where) if c is not None]
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        return And(tuple(parts), parts[0].span.cover(parts[1].span))


# ------------------------------------------------------------------------ DDL


@dataclass(frozen=True, slots=True)
class ColumnDecl:
    name: str
    ctype: ColumnType
    span: Span
    length: int | None = None


@dataclass(frozen=True, slots=True)
class StreamDecl:
    name: str
    columns: tuple[ColumnDecl, ...]
    span: Span
    source: Source = field(compare=False, repr=False)
    lateness: Duration | None = None  # ALLOWED LATENESS: the stream's own


# ------------------------------------------------------------------- printing


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}


def has_aggregate(expr: Expr) -> bool:
    if isinstance(expr, Aggregate):
        return True
    if isinstance(expr, Arith):
        return has_aggregate(expr.left) or has_aggregate(expr.right)
    if isinstance(expr, Negate):
        return has_aggregate(expr.operand)
    return False


def expr_text(expr: Expr) -> str:
    """Canonical text of an expression (used for default SELECT names and explain)."""
    if isinstance(expr, Aggregate):
        return f"{expr.func}({'*' if expr.arg is None else expr_text(expr.arg)})"
    if isinstance(expr, Number):
        return expr.text
    if isinstance(expr, StringLit):
        return "'" + expr.value.replace("'", "''") + "'"
    if isinstance(expr, BoolLit):
        return "TRUE" if expr.value else "FALSE"
    if isinstance(expr, ColumnRef):
        return expr.display()
    if isinstance(expr, Negate):
        inner = expr_text(expr.operand)
        return f"-{inner}" if isinstance(expr.operand, (Number, ColumnRef, Aggregate)) else f"-({inner})"
    prec = _PRECEDENCE[expr.op]
    left = expr_text(expr.left)
    right = expr_text(expr.right)
    if isinstance(expr.left, Arith) and _PRECEDENCE[expr.left.op] < prec:
        left = f"({left})"
    if isinstance(expr.right, Arith) and _PRECEDENCE[expr.right.op] <= prec:
        right = f"({right})"
    return f"{left} {expr.op} {right}"


def condition_text(cond: Condition) -> str:
    if isinstance(cond, Comparison):
        return f"{expr_text(cond.left)} {cond.op} {expr_text(cond.right)}"
    if isinstance(cond, Not):
        return f"NOT ({condition_text(cond.operand)})"
    joiner = " AND " if isinstance(cond, And) else " OR "
    parts = []
    for item in cond.items:
        text = condition_text(item)
        parts.append(f"({text})" if isinstance(item, (And, Or)) else text)
    return joiner.join(parts)
