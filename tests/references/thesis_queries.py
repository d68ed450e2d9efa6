"""The thesis' workload files (experiments/workloads) as exact structures, and random data
for them whose values are taken from the queries' own constants.

The reference cannot use the engine's parser (tests/references/reference.py), so this
module reads the small part of the language those files use: ``Query ID:`` headers,
``SELECT *`` or a list of columns, ``FROM`` streams, ``WINDOW`` and ``WHERE`` as
comparisons joined by AND (the thesis spellings ``lt``, ``lt=``, ... included), and
``MAXWINDOW`` / ``Max Window`` with a duration; ``--`` comments. Anything else is an
error naming the file and the text, so a new workload file cannot be half read.
tests/differential/test_exact_thesis.py holds that each query printed from its
structure compiles, in the engine, to what the file's text compiles to.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.references.exact_ops import Chooser, Op, Push, Register, Workload
from tests.references.reference import (
    FLOAT,
    INTEGER,
    And,
    Bin,
    Cmp,
    Col,
    Column,
    Cond,
    Duration,
    Expr,
    Item,
    Neg,
    Num,
    Query,
    Schema,
    Stream,
)

_TYPES = {"FLOAT": FLOAT, "DOUBLE": FLOAT, "REAL": FLOAT, "INTEGER": INTEGER, "INT": INTEGER}
_OPS = {"lt": "<", "lt=": "<=", "le": "<=", "gt": ">", "gt=": ">=", "ge": ">=", "<>": "!=", "==": "="}
_TOKEN = re.compile(
    r"\s*(lt=|gt=|<=|>=|!=|<>|==|[<>=*/+(),-]|\d+(?:\.\d+)?|[A-Za-z_][A-Za-z_0-9]*(?:\.[A-Za-z_0-9]+)?)"
)
_CLAUSE = re.compile(r"\b(select|from|window|max\s*window|where)\b", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|sec|s|min)?\s*$", re.IGNORECASE)


def _strip_comments(text: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())


def read_schema(text: str) -> Schema:
    """``REGISTER STREAM S (col TYPE, ...);`` statements."""
    streams = []
    for name, body in re.findall(r"REGISTER\s+STREAM\s+(\w+)\s*\(([^)]*)\)", _strip_comments(text), re.IGNORECASE):
        columns = []
        for part in body.split(","):
            col, ctype = part.split()
            columns.append(Column(col, _TYPES[ctype.upper()], ctype))
        streams.append(Stream(name, tuple(columns)))
    return Schema(tuple(streams))


class _Tokens:
    def __init__(self, text: str, where: str) -> None:
        self.items: list[str] = []
        pos = 0
        while pos < len(text.rstrip()):
            found = _TOKEN.match(text, pos)
            if found is None:
                raise ValueError(f"{where}: cannot read {text[pos:]!r}")
            self.items.append(found.group(1))
            pos = found.end()
        self.at = 0
        self.where = where

    def peek(self) -> str | None:
        return self.items[self.at] if self.at < len(self.items) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ValueError(f"{self.where}: the text ends too early")
        self.at += 1
        return token

    def done(self) -> None:
        if self.peek() is not None:
            raise ValueError(f"{self.where}: unexpected {self.peek()!r}")


def _expr(tokens: _Tokens) -> Expr:
    left = _term(tokens)
    while tokens.peek() in ("+", "-"):
        op = tokens.take()
        left = Bin(op, left, _term(tokens))
    return left


def _term(tokens: _Tokens) -> Expr:
    left = _factor(tokens)
    while tokens.peek() in ("*", "/"):
        op = tokens.take()
        left = Bin(op, left, _factor(tokens))
    return left


def _factor(tokens: _Tokens) -> Expr:
    token = tokens.take()
    if token == "-":
        return Neg(_factor(tokens))
    if token == "(":
        inner = _expr(tokens)
        if tokens.take() != ")":
            raise ValueError(f"{tokens.where}: a ( is not closed")
        return inner
    if token[0].isdigit():
        return Num(token)
    if "." in token:
        alias, name = token.split(".")
        return Col(alias, name)
    raise ValueError(f"{tokens.where}: not an expression: {token!r}")


def _condition(text: str, where: str) -> Cond:
    tokens = _Tokens(text, where)
    items: list[Cond] = []
    while True:
        left = _expr(tokens)
        op = tokens.take()
        op = _OPS.get(op.lower(), op)
        if op not in ("<", "<=", ">", ">=", "=", "!="):
            raise ValueError(f"{where}: not a comparison: {op!r}")
        items.append(Cmp(op, left, _expr(tokens)))
        if tokens.peek() is None:
            break
        if tokens.take().lower() != "and":
            raise ValueError(f"{where}: only AND joins the comparisons of a thesis workload")
    return items[0] if len(items) == 1 else And(tuple(items))


def read_queries(text: str, source: str) -> list[Query]:
    """The queries of a workload file; a query without a header is named by its position."""
    pieces = re.split(r"(?im)^\s*query\s+id\s*:\s*(\S+)\s*$", _strip_comments(text))
    named: list[tuple[str | None, str]] = [(None, pieces[0])] if pieces[0].strip() else []
    named += list(zip(pieces[1::2], pieces[2::2], strict=True))
    queries = []
    for position, (name, body) in enumerate(named, start=1):
        where = f"{source}, query {name or position}"
        parts = _CLAUSE.split(body.strip().rstrip(";"))
        clauses = {re.sub(r"\s+", "", k.lower()): v.strip() for k, v in zip(parts[1::2], parts[2::2], strict=True)}
        select = None
        if clauses["select"] != "*":
            select = tuple(Item(Col(*ref.strip().split("."))) for ref in clauses["select"].split(","))
        sources = tuple((s.strip(), s.strip()) for s in clauses["from"].split(","))
        maxwindow = None
        if "maxwindow" in clauses:
            found = _DURATION.match(clauses["maxwindow"])
            if found is None:
                raise ValueError(f"{where}: cannot read the duration {clauses['maxwindow']!r}")
            maxwindow = Duration(found.group(1), (found.group(2) or "").lower())
        window = _condition(clauses["window"], where) if "window" in clauses else None
        condition = _condition(clauses["where"], where) if "where" in clauses else None
        queries.append(Query(name or str(position), sources, maxwindow, condition, window, select))
    return queries


def read_workload(path: Path, schema_path: Path) -> tuple[Schema, list[Query]]:
    return read_schema(schema_path.read_text()), read_queries(path.read_text(), path.name)


# ------------------------------------------------------------------------ data


def _comparisons(cond: Cond | None) -> list[Cmp]:
    if cond is None:
        return []
    if isinstance(cond, Cmp):
        return [cond]
    return [c for item in cond.items for c in _comparisons(item)]  # type: ignore[union-attr]


def _leaves(expr: Expr) -> list[Expr]:
    if isinstance(expr, Bin):
        return _leaves(expr.left) + _leaves(expr.right)
    if isinstance(expr, Neg):
        return _leaves(expr.operand)
    return [expr]


def column_domains(queries: Sequence[Query]) -> dict[tuple[str, str], list[Fraction]]:
    """Values worth drawing for each (stream, column): the constants its comparisons
    mention, one more, one less, half and double, shared among the columns a comparison
    joins (so that equalities and boundaries hit)."""
    groups: list[tuple[set[tuple[str, str]], set[Fraction]]] = []
    for query in queries:
        stream_of = dict(query.sources)
        for cmp in _comparisons(query.where) + _comparisons(query.window):
            leaves = _leaves(cmp.left) + _leaves(cmp.right)
            cols = {(stream_of[x.alias], x.name) for x in leaves if isinstance(x, Col) and x.name not in ("ts", "id")}
            nums = {x.value for x in leaves if isinstance(x, Num)}
            groups.append((cols, nums))
    domains: dict[tuple[str, str], set[Fraction]] = {}
    for cols, nums in groups:
        for col in cols:
            domains.setdefault(col, set()).update(v for k in nums for v in (k, k + 1, k - 1, k / 2, k * 2))
    for _ in range(2):
        for cols, _ in groups:
            shared = set().union(*(domains.get(col, set()) for col in cols))
            for col in cols:
                domains[col] = domains.get(col, set()) | shared
    return {col: sorted(values) for col, values in domains.items() if values}


def build_thesis_workload(c: Chooser, schema: Schema, queries: Sequence[Query], max_tuples: int = 60) -> Workload:
    """Random data for the given queries, values from :func:`column_domains`; queries
    registered at the start or mid-stream, in their order; ties, out-of-order and late
    tuples, NULLs."""
    domains = column_domains(queries)
    fallback = sorted({v for values in domains.values() for v in values}) or [Fraction(0)]
    lateness = c.pick((0.0, 0.0, 2.0))
    pending = list(queries)
    ops: list[Op] = [Register(pending.pop(0)) for _ in range(c.integer(1, len(pending)))]
    newest = Fraction(0)
    n = 0
    while n < max_tuples and (n < 3 or not c.chance(5)):
        n += 1
        if pending and c.chance(10):
            ops.append(Register(pending.pop(0), by_argument=c.chance(30)))
        stream = c.pick(schema.streams)
        values: dict[str, Any] = {}
        for col in stream.columns:
            if c.chance(7):
                continue  # NULL
            value = c.pick(domains.get((stream.name, col.name), fallback))
            values[col.name] = int(value // 1) if col.type == INTEGER else float(value)
        newest += c.pick((0, 0, 1, 1, 2, 3))
        ts = max(Fraction(0), newest - c.pick((0, 0, 0, 0, 1, 2, 3)))
        ops.append(Push(stream.name, float(ts), values))
    return Workload(schema, lateness, ops)


@st.composite
def thesis_workloads(draw: Any, schema: Schema, queries: Sequence[Query], **options: Any) -> Workload:
    return build_thesis_workload(Chooser(draw=draw), schema, queries, **options)


def random_thesis_workload(seed: int, schema: Schema, queries: Sequence[Query], **options: Any) -> Workload:
    return build_thesis_workload(Chooser(rnd=random.Random(seed)), schema, queries, **options)
