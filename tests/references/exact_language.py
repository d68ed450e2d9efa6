"""The query language as the exact reference writes it: schemas, queries and conditions
as structures (printed as text for the engine to parse) and exact numbers.
Nothing here imports the engine (see tests/references/reference.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any, Union

INTEGER, FLOAT, STRING = "INTEGER", "FLOAT", "STRING"
COMPARISONS = ("<", "<=", ">", ">=", "=", "!=")
# The engine's spellings of each operator (thesis spellings included).
SPELLINGS = {"<": ("lt",), "<=": ("le", "lt="), ">": ("gt",), ">=": ("ge", "gt="), "=": ("==",), "!=": ("<>",)}
UNITS = {"": Fraction(1), "ms": Fraction(1, 1000), "sec": Fraction(1), "s": Fraction(1), "min": Fraction(60)}
UNITS.update({"h": Fraction(3600), "seconds": Fraction(1), "minutes": Fraction(60)})
UNITS.update({"second": Fraction(1), "minute": Fraction(60), "hour": Fraction(3600), "hours": Fraction(3600)})


# ------------------------------------------------------------------ numbers


def exact(value: Any, ctype: str = FLOAT) -> Fraction | str | None:
    """A pushed value as the contract reads it (rule 1 and 2): None for NULL/NaN."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"booleans are not modelled: {value!r}")
    if isinstance(value, str):
        return value
    if isinstance(value, Fraction):
        return value
    if ctype == INTEGER and isinstance(value, int):
        return Fraction(value)
    number = float(value)
    if math.isnan(number):
        return None
    return Fraction(repr(number))


def decimal_text(value: Fraction) -> str | None:
    """``value`` as a plain decimal (``-0.3``, ``12``), or None when it has no finite one."""
    den = value.denominator
    twos = fives = 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    if den != 1:
        return None
    digits = max(twos, fives)
    scaled = abs(value) * 10**digits
    assert scaled.denominator == 1
    text = str(scaled.numerator).rjust(digits + 1, "0")
    if digits:
        text = f"{text[:-digits]}.{text[-digits:]}".rstrip("0").rstrip(".")
    return ("-" if value < 0 else "") + text


# -------------------------------------------------------------- structures


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # INTEGER, FLOAT or STRING
    spelling: str | None = None  # the type as written in the DDL (INT, DOUBLE, ...)


@dataclass(frozen=True)
class Stream:
    name: str
    columns: tuple[Column, ...]

    def ddl(self) -> str:
        cols = ", ".join(f"{c.name} {c.spelling or c.type}" for c in self.columns)
        return f"REGISTER STREAM {self.name} ({cols});"

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"stream {self.name} has no column {name}")


@dataclass(frozen=True)
class Schema:
    streams: tuple[Stream, ...]

    def ddl(self) -> str:
        return "\n".join(s.ddl() for s in self.streams)

    def stream(self, name: str) -> Stream:
        for s in self.streams:
            if s.name == name:
                return s
        raise KeyError(f"no stream {name}")


@dataclass(frozen=True)
class Col:
    """``alias.name``; ``name`` may be ``ts`` or ``id``."""

    alias: str
    name: str


@dataclass(frozen=True)
class Num:
    """A non-negative numeric literal, kept as written (``0.3333333333``, ``7``)."""

    text: str

    @cached_property
    def value(self) -> Fraction:
        return Fraction(self.text)


@dataclass(frozen=True)
class Str:
    value: str


@dataclass(frozen=True)
class Neg:
    operand: Expr


@dataclass(frozen=True)
class Bin:
    op: str  # + - * /
    left: Expr
    right: Expr


Expr = Union[Col, Num, Str, Neg, Bin]  # noqa: UP007 - a runtime alias, used before Python 3.12's `type`


@dataclass(frozen=True)
class Cmp:
    op: str  # one of COMPARISONS
    left: Expr
    right: Expr
    spelling: str | None = None  # how the operator is written, if not as ``op``


@dataclass(frozen=True)
class And:
    items: tuple[Cond, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Cond, ...]


@dataclass(frozen=True)
class Not:
    item: Cond


Cond = Union[Cmp, And, Or, Not]  # noqa: UP007


@dataclass(frozen=True)
class Duration:
    """``amount unit`` as written (``0.3 sec``, ``100 ms``, ``5``)."""

    amount: str
    unit: str = ""

    @cached_property
    def seconds(self) -> Fraction:  # (read per combination by the reference: made once)
        return Fraction(self.amount) * UNITS[self.unit]

    def text(self) -> str:
        return f"{self.amount} {self.unit}".strip()


@dataclass(frozen=True)
class Star:
    """``alias.*``."""

    alias: str


@dataclass(frozen=True)
class Item:
    """A column in the SELECT list, optionally renamed; or an expression (``col`` any
    :data:`Expr`), which must be named."""

    col: Expr
    name: str | None = None
    with_as: bool = True  # ``expr AS name``, else ``expr name``

    @property
    def output(self) -> str:
        if self.name is not None:
            return self.name
        assert isinstance(self.col, Col), "an expression in the SELECT list needs a name"
        return f"{self.col.alias}.{self.col.name}"


@dataclass(frozen=True)
class Spelling:
    """How a query is written where the language allows several forms (no effect on
    its meaning): the MAXWINDOW keyword, and ``FROM B AS b`` rather than ``FROM B b``."""

    maxwindow: str = "MAXWINDOW"  # or "MAX WINDOW", "MaxWindow"
    alias_as: bool = False


@dataclass(frozen=True)
class Query:
    name: str
    sources: tuple[tuple[str, str], ...]  # (alias, stream) in FROM order
    maxwindow: Duration | None = None
    where: Cond | None = None
    window: Cond | None = None
    select: tuple[Item | Star, ...] | None = None  # None: SELECT *
    spelling: Spelling = Spelling()

    @property
    def streams(self) -> tuple[str, ...]:
        return tuple(s for _, s in self.sources)

    def to_text(self, header: bool = True) -> str:
        """The query in the engine's language, with a ``Query ID:`` header (without one
        when ``header`` is False: the id is then given beside the text)."""
        if self.select is None:
            select = "*"
        else:
            parts = []
            for item in self.select:
                if isinstance(item, Star):
                    parts.append(f"{item.alias}.*")
                else:
                    named = "" if not item.name else f" AS {item.name}" if item.with_as else f" {item.name}"
                    parts.append(expr_text(item.col) + named)
            select = ", ".join(parts)
        join = " AS " if self.spelling.alias_as else " "
        sources = ", ".join(s if a == s else f"{s}{join}{a}" for a, s in self.sources)
        lines = [f"Query ID: {self.name}"] if header else []
        lines += [f"SELECT {select}", f"FROM {sources}"]
        if self.window is not None:
            lines.append(f"WINDOW {cond_text(self.window)}")
        if self.maxwindow is not None:
            lines.append(f"{self.spelling.maxwindow} {self.maxwindow.text()}")
        if self.where is not None:
            lines.append(f"WHERE {cond_text(self.where)}")
        return "\n".join(lines) + ";"


def const(value: Fraction) -> Expr:
    """An exact constant as an expression: a decimal literal if it has one, else ``p / q``."""
    text = decimal_text(abs(value))
    expr: Expr = (
        Num(text) if text is not None else Bin("/", Num(str(abs(value.numerator))), Num(str(value.denominator)))
    )
    return Neg(expr) if value < 0 else expr


# ---------------------------------------------------------------- printing

_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}


def expr_text(expr: Expr) -> str:
    if isinstance(expr, Col):
        return f"{expr.alias}.{expr.name}"
    if isinstance(expr, Num):
        return expr.text
    if isinstance(expr, Str):
        return "'" + expr.value.replace("'", "''") + "'"
    if isinstance(expr, Neg):
        inner = expr_text(expr.operand)
        return f"-({inner})" if isinstance(expr.operand, (Bin, Neg)) else f"-{inner}"
    mine = _PRECEDENCE[expr.op]
    left = expr_text(expr.left)
    right = expr_text(expr.right)
    if isinstance(expr.left, Bin) and _PRECEDENCE[expr.left.op] < mine:
        left = f"({left})"
    # a - (b + c), a / (b * c): the right operand binds tighter than it would alone
    if isinstance(expr.right, Bin) and (
        _PRECEDENCE[expr.right.op] < mine or (_PRECEDENCE[expr.right.op] == mine and expr.op in "-/")
    ):
        right = f"({right})"
    return f"{left} {expr.op} {right}"


def cond_text(cond: Cond) -> str:
    if isinstance(cond, Cmp):
        return f"{expr_text(cond.left)} {cond.spelling or cond.op} {expr_text(cond.right)}"
    if isinstance(cond, Not):
        return f"NOT ({cond_text(cond.item)})"
    joiner = " AND " if isinstance(cond, And) else " OR "
    return joiner.join(cond_text(i) if isinstance(i, (Cmp, Not)) else f"({cond_text(i)})" for i in cond.items)
