"""Windowed aggregate queries (the aggregation issue): bind and normalize.

An aggregate query reads one stream through a window in FROM::

    SELECT H.patient, AVG(H.beatrate) AS avg_rate, COUNT(*)
    FROM H [RANGE 10 min SLIDE 1 min]
    WHERE H.alert = 1 AND H.vib > 80
    GROUP BY H.patient
    HAVING AVG(H.beatrate) > 100;

:func:`compile_aggregate` turns it into an :class:`AggregateQuery`: the window, the
GROUP BY columns, the distinct aggregates (function, column) it needs, the SELECT
outputs and HAVING over them, and the WHERE as a :class:`NormalizedQuery` of the
plain single-stream query ``SELECT * FROM H WHERE ...`` (the same normalizer as match
queries: its attribute predicates go to the shared predicate lists, residuals and OR
are allowed). Errors carry positions as every other error of the language.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from predicates.ast import (
    Aggregate,
    And,
    Arith,
    ColumnRef,
    ColumnType,
    Comparison,
    Condition,
    Expr,
    Negate,
    Not,
    Or,
    Query,
    WindowSpec,
    expr_text,
    has_aggregate,
)
from predicates.catalog import Catalog
from predicates.errors import QueryError
from predicates.normalize import DEFAULT_MAX_DISJUNCTS, ColumnOrder, NormalizedQuery, normalize, push_not
from predicates.semantic import Binder, Scope, bind

FUNCTIONS = ("COUNT", "SUM", "AVG", "MIN", "MAX", "STDDEV", "VARIANCE")
# windows one tuple may fall in (RANGE / SLIDE): each is a row of output, and the
# end of input reports every window holding data, so [RANGE 1e15 SLIDE 1] would
# report 1e15 rows per tuple; a week in seconds (604,800) is within it
MAX_WINDOWS_PER_TUPLE = 1_000_000


@dataclass(frozen=True, slots=True)
class AggregateCall:
    """One aggregate a query needs: ``column`` None is ``COUNT(*)``."""

    func: str
    column: str | None
    ctype: ColumnType | None

    def text(self) -> str:
        return f"{self.func}({'*' if self.column is None else self.column})"


@dataclass(frozen=True)
class AggregateQuery:
    name: str
    stream: str
    alias: str
    window: WindowSpec
    group_by: tuple[str, ...]  # column names of the stream
    group_types: tuple[ColumnType, ...]
    calls: tuple[AggregateCall, ...]  # distinct, in order of first use
    outputs: tuple[tuple[str, Expr], ...]  # bound; columns of GROUP BY and aggregates
    having: Condition | None  # bound, over the same
    where: NormalizedQuery  # SELECT * FROM stream WHERE ...: the filter
    text: str = field(default="", compare=False)
    # CQL's relation-to-stream operator: RSTREAM every group of every window (the
    # default), ISTREAM a group new or changed since the previous window, DSTREAM a
    # group gone since it (mqo.aggregation.relations)
    stream_op: str = "RSTREAM"

    @property
    def filter_key(self) -> tuple[Any, ...]:
        """Queries whose WHERE normalizes alike share one filter."""
        return (self.stream.lower(), _disjuncts_key(self.where))


def _disjuncts_key(nq: NormalizedQuery) -> tuple[Any, ...]:
    return tuple(
        sorted(
            (tuple(sorted(p.describe() for p in c.predicates)), tuple(sorted(r.text for r in c.residuals)))
            for c in nq.disjuncts
        )
    )


def compile_aggregate(
    query: Query,
    catalog: Catalog,
    name: str,
    order: ColumnOrder,
    max_disjuncts: int = DEFAULT_MAX_DISJUNCTS,
) -> AggregateQuery:
    """Bind and normalize one aggregate query; errors name ``name``."""
    try:
        return _compile(query, catalog, name, order, max_disjuncts)
    except QueryError as err:
        raise err.in_query(name) from None


def _compile(query: Query, catalog: Catalog, name: str, order: ColumnOrder, max_disjuncts: int) -> AggregateQuery:
    source = query.source
    if len(query.from_) != 1:
        raise QueryError(
            "an aggregate query reads one stream; joins feeding an aggregate are not supported yet",
            source,
            query.from_[1].span,
        )
    item = query.from_[0]
    if item.window is None:
        raise QueryError(
            "an aggregate query needs a window on its stream",
            source,
            item.span,
            hint=f"e.g. FROM {item.stream} [RANGE 10 min SLIDE 1 min], [RANGE 1 h], [ROWS 50]",
        )
    window = item.window
    if window.size is not None and window.size / window.slide > MAX_WINDOWS_PER_TUPLE:
        unit = "rows" if window.kind == "rows" else "s"
        many = math.ceil(window.size / window.slide)
        raise QueryError(
            f"a tuple would fall in {_count(many)} windows of this one"
            f" ({_number(window.size)} {unit} long, one every {_number(window.slide)} {unit});"
            f" at most {MAX_WINDOWS_PER_TUPLE:,} are supported",
            source,
            window.span,
            hint=f"make SLIDE at least {'ROWS' if window.kind == 'rows' else 'RANGE'} / 1,000,000",
        )
    for clause, what in ((query.window, "WINDOW"), (query.maxwindow, "MAXWINDOW")):
        if clause is not None:
            raise QueryError(
                f"{what} is for match queries; an aggregate query's window is in FROM", source, clause.span
            )
    if query.select is None or any(s.star_of is not None for s in query.select):
        raise QueryError("an aggregate query selects aggregates and GROUP BY columns, not *", source, query.span)
    plain = replace(
        query,
        from_=(replace(item, window=None),),
        select=None,
        group_by=(),
        having=None,
        stream_op=None,
        stream_op_span=None,
    )
    where = normalize(bind(plain, catalog, name), order, max_disjuncts)
    scope = Scope(plain, catalog)
    binder = Binder(scope)
    alias, schema = scope.entries[0]
    if query.where is not None and _find_aggregate(query.where) is not None:
        found = _find_aggregate(query.where)
        assert found is not None
        raise QueryError("aggregates are not allowed in WHERE; use HAVING", source, found.span)
    group: list[str] = []
    types: list[ColumnType] = []
    for expr in query.group_by:
        if not isinstance(expr, ColumnRef):
            raise QueryError("GROUP BY takes columns of the stream", source, expr.span)
        ref = binder.expr(expr)
        assert isinstance(ref, ColumnRef) and ref.ctype is not None
        if ref.name in group:
            raise QueryError(f"column {ref.name} is grouped twice", source, expr.span)
        group.append(ref.name)
        types.append(ref.ctype)
    calls: dict[tuple[str, str | None], AggregateCall] = {}
    outputs: list[tuple[str, Expr]] = []
    for sel in query.select:
        assert sel.expr is not None
        bound = _check(binder.expr(sel.expr), group, calls, source)
        out_name = sel.name if sel.name is not None else expr_text(bound)
        if any(out_name == n for n, _ in outputs):
            raise QueryError(f"the result has two values named '{out_name}'; rename one with AS", source, sel.span)
        outputs.append((out_name, bound))
    having = None
    if query.having is not None:
        # NOT folded into the comparisons: a comparison with NULL is false, and so is its negation
        having = push_not(_check_condition(binder.condition(query.having), group, calls, source))
    return AggregateQuery(
        name=name,
        stream=schema.name,
        alias=alias,
        window=item.window,
        group_by=tuple(group),
        group_types=tuple(types),
        calls=tuple(calls.values()),
        outputs=tuple(outputs),
        having=having,
        where=where,
        text=source.text[query.span.start : query.span.end],
        stream_op=query.stream_op or "RSTREAM",
    )


def _count(n: int) -> str:
    """A whole number for a message: with commas, or as 1.23e+45 when long (``%.3g``,
    which a double past 1.8e308 cannot take: RANGE 1e300 sec SLIDE 1e-300 sec)."""
    if n < 10**12:
        return f"{n:,}"
    if n < 10**300:
        return f"{float(n):.3g}"
    digits = str(n)  # (truncated, not rounded: the count is only said)
    mantissa = f"{digits[0]}.{digits[1:3]}".rstrip("0").rstrip(".")
    return f"{mantissa}e+{len(digits) - 1}"


def _number(value: Fraction) -> str:
    """A duration or count as a short text: 1e+15, 1e-09, 3600."""
    return f"{float(value):g}"


def _find_aggregate(node: Expr | Condition) -> Aggregate | None:
    if isinstance(node, Aggregate):
        return node
    if isinstance(node, (Arith, Comparison)):
        return _find_aggregate(node.left) or _find_aggregate(node.right)
    if isinstance(node, (Negate, Not)):
        return _find_aggregate(node.operand)
    if isinstance(node, (And, Or)):
        for sub in node.items:
            found = _find_aggregate(sub)
            if found is not None:
                return found
    return None


def _check(expr: Expr, group: list[str], calls: dict[Any, Any], source: object) -> Expr:
    """A SELECT or HAVING value: aggregates of columns, GROUP BY columns, numbers."""
    if isinstance(expr, Aggregate):
        column = None
        ctype = None
        if expr.arg is not None:
            if not isinstance(expr.arg, ColumnRef) or has_aggregate(expr.arg):
                raise QueryError(f"{expr.func} takes a column of the stream", source, expr.arg.span)  # type: ignore[arg-type]
            column, ctype = expr.arg.name, expr.arg.ctype
            if expr.func != "COUNT" and ctype is not None and not ctype.is_numeric and expr.func not in ("MIN", "MAX"):
                raise QueryError(f"{expr.func} needs a numeric column; {column} is {ctype.value}", source, expr.span)  # type: ignore[arg-type]
            if expr.func in ("MIN", "MAX") and ctype is not None and not ctype.is_numeric:
                raise QueryError(f"{expr.func} of a {ctype.value} column is not supported yet", source, expr.span)  # type: ignore[arg-type]
        calls.setdefault((expr.func, column), AggregateCall(expr.func, column, ctype))
        return expr
    if isinstance(expr, ColumnRef):
        if expr.name not in group:
            raise QueryError(
                f"column {expr.display()} is neither grouped nor aggregated",
                source,  # type: ignore[arg-type]
                expr.span,
                hint=f"add it to GROUP BY, or aggregate it (e.g. MAX({expr.display()}))",
            )
        return expr
    if isinstance(expr, Arith):
        return Arith(
            expr.op, _check(expr.left, group, calls, source), _check(expr.right, group, calls, source), expr.span
        )
    if isinstance(expr, Negate):
        return Negate(_check(expr.operand, group, calls, source), expr.span)
    return expr


def _check_condition(cond: Condition, group: list[str], calls: dict[Any, Any], source: object) -> Condition:
    if isinstance(cond, Comparison):
        left = _check(cond.left, group, calls, source)
        right = _check(cond.right, group, calls, source)
        return Comparison(cond.op, left, right, cond.span, cond.op_span)
    if isinstance(cond, Not):
        return Not(_check_condition(cond.operand, group, calls, source), cond.span)
    items = tuple(_check_condition(c, group, calls, source) for c in cond.items)
    return And(items, cond.span) if isinstance(cond, And) else Or(items, cond.span)


def filter_text(query: AggregateQuery) -> str:
    """The WHERE as a single-stream match query (what the shared filter registers),
    in the words the user wrote."""
    plain = query.where.bound.query
    head = f"SELECT * FROM {query.stream} AS {query.alias}"
    if plain.where is None:
        return head
    return f"{head} WHERE {plain.source.text[plain.where.span.start : plain.where.span.end]}"
