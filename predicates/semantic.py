"""Semantic checks: bind a parsed query to the catalog.

The binder resolves every column reference to an alias of the FROM clause and checks:
unknown stream or column (with the closest name suggested), an ambiguous bare column,
an alias repeated in FROM, values of
different families compared (a string with a number), arithmetic on strings or
booleans, ordering comparisons on booleans, and MAXWINDOW missing on a multi-stream
query. Each error points at the offending text.

A stream may appear several times in FROM under different aliases (a self-join): the
k-th occurrence reads the stream's role k (:func:`predicates.catalog.role_name`), and
the binder resolves each alias's columns to its role, so predicates between aliases of
one stream become join and window predicates between roles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from predicates.ast import (
    Aggregate,
    And,
    Arith,
    BoolLit,
    ColumnRef,
    ColumnType,
    Comparison,
    Condition,
    Expr,
    Negate,
    Not,
    Number,
    Or,
    Query,
    StringLit,
    expr_text,
)
from predicates.catalog import ROLE_MARK, Catalog, StreamSchema, role_name
from predicates.errors import QueryError, Source, Span, did_you_mean


@dataclass(frozen=True, slots=True)
class OutputColumn:
    """One value of a result record: its name and the expression that computes it."""

    name: str
    expr: Expr


@dataclass(frozen=True)
class BoundQuery:
    """A query whose columns are resolved against the catalog.

    ``aliases`` lists ``(alias, stream)`` in FROM order. ``roles`` names the role each
    alias reads (the stream itself unless the stream occurs before in FROM; see
    :func:`predicates.catalog.role_name`): the stream of its resolved columns.
    ``maxwindow`` is in seconds (None for single-stream queries without one).
    ``condition`` is WINDOW AND WHERE.
    """

    name: str
    aliases: tuple[tuple[str, str], ...]
    outputs: tuple[OutputColumn, ...]
    condition: Condition | None
    maxwindow: Fraction | None
    query: Query = field(repr=False, compare=False)
    roles: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.roles:
            object.__setattr__(self, "roles", self.streams)

    @property
    def role_aliases(self) -> tuple[tuple[str, str], ...]:
        """``(alias, role)`` in FROM order: what the engine's streams are."""
        return tuple((alias, role) for (alias, _), role in zip(self.aliases, self.roles, strict=True))

    @property
    def self_join(self) -> bool:
        """Whether a stream is read under two or more aliases."""
        return any(ROLE_MARK in role for role in self.roles)

    @property
    def source(self) -> Source:
        return self.query.source

    @property
    def streams(self) -> tuple[str, ...]:
        return tuple(stream for _, stream in self.aliases)

    def stream_of(self, alias: str) -> str:
        for a, s in self.aliases:
            if a == alias:
                return s
        raise KeyError(alias)


class Scope:
    """Aliases of one query's FROM clause."""

    def __init__(self, query: Query, catalog: Catalog) -> None:
        self.query = query
        self.source = query.source
        self.entries: list[tuple[str, StreamSchema]] = []
        self.roles: list[str] = []  # the role each entry reads (see BoundQuery)
        occurrences: dict[str, int] = {}
        by_alias: dict[str, Span] = {}
        for item in query.from_:
            schema = catalog.require(item.stream, self.source, item.span)
            alias = item.alias if item.alias is not None else schema.name
            alias_key = alias.lower()
            if alias_key in by_alias:
                hint = None
                if item.alias is None or alias_key == schema.name.lower():
                    name = schema.name
                    hint = f"a stream read twice needs an alias for each reading, as in FROM {name} a, {name} b"
                raise QueryError(f"alias {alias} is used twice in FROM", self.source, item.span, hint=hint)
            k = occurrences[schema.name.lower()] = occurrences.get(schema.name.lower(), 0) + 1
            by_alias[alias_key] = item.span
            self.entries.append((alias, schema))
            self.roles.append(role_name(schema.name, k))

    def role_of(self, alias: str) -> str:
        for (a, _), role in zip(self.entries, self.roles, strict=True):
            if a == alias:
                return role
        raise KeyError(alias)

    def resolve(self, ref: ColumnRef) -> ColumnRef:
        if ref.qualifier is not None:
            entry = self._entry_for(ref)
            alias, schema = entry
            found = schema.lookup(ref.name)
            if found is None:
                raise QueryError(
                    f"unknown column '{ref.name}' of stream {schema.name}" + did_you_mean(ref.name, schema.all_names()),
                    self.source,
                    ref.span,
                    hint=f"{schema.name} has columns: {', '.join(schema.all_names())}",
                )
            role = self.role_of(alias)
            return ColumnRef(ref.qualifier, found[0], ref.span, alias=alias, stream=role, ctype=found[1])
        hits = [(alias, schema, schema.lookup(ref.name)) for alias, schema in self.entries]
        hits = [h for h in hits if h[2] is not None]
        if not hits:
            pool = [n for _, schema in self.entries for n in schema.all_names()]
            raise QueryError(
                f"unknown column '{ref.name}'" + did_you_mean(ref.name, pool),
                self.source,
                ref.span,
                hint="qualify columns with their stream, as in B.pressure",
            )
        if len(hits) > 1:
            options = " or ".join(f"{alias}.{found[0]}" for alias, _, found in hits)  # type: ignore[index]
            raise QueryError(f"column '{ref.name}' is ambiguous: {options}", self.source, ref.span)
        alias, schema, found = hits[0]
        role = self.role_of(alias)
        return ColumnRef(None, found[0], ref.span, alias=alias, stream=role, ctype=found[1])  # type: ignore[index]

    def _entry_for(self, ref: ColumnRef) -> tuple[str, StreamSchema]:
        qualifier = ref.qualifier or ""
        for alias, schema in self.entries:
            if alias.lower() == qualifier.lower():
                return alias, schema
        readings = [(alias, schema) for alias, schema in self.entries if schema.name.lower() == qualifier.lower()]
        if len(readings) > 1:
            qual_span = Span(ref.span.start, ref.span.start + len(qualifier))
            raise QueryError(
                f"stream {readings[0][1].name} is read under several aliases here; "
                f"'{qualifier}' could be any of {', '.join(a for a, _ in readings)}",
                self.source,
                qual_span,
                hint=f"qualify the column with one of the aliases, as in {readings[0][0]}.{ref.name}",
            )
        if readings:
            return readings[0]
        names = [a for a, _ in self.entries] + [s.name for _, s in self.entries]
        qual_span = Span(ref.span.start, ref.span.start + len(qualifier))
        raise QueryError(
            f"'{qualifier}' is not a stream or alias of this query" + did_you_mean(qualifier, names),
            self.source,
            qual_span,
            hint=f"the FROM clause reads: {', '.join(a for a, _ in self.entries)}",
        )


def _family(expr: Expr) -> str:
    if isinstance(expr, Number):
        return "number"
    if isinstance(expr, StringLit):
        return "string"
    if isinstance(expr, BoolLit):
        return "boolean"
    if isinstance(expr, ColumnRef):
        assert expr.ctype is not None
        return expr.ctype.family
    return "number"


def _describe(expr: Expr, family: str) -> str:
    article = "an" if family[0] in "aeiou" else "a"
    if isinstance(expr, (Number, StringLit, BoolLit)):
        return f"{article} {family}"
    return f"{expr_text(expr)} ({article} {family})"


class Binder:
    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.source = scope.source

    def expr(self, node: Expr) -> Expr:
        if isinstance(node, ColumnRef):
            return self.scope.resolve(node)
        if isinstance(node, Aggregate):
            return Aggregate(node.func, None if node.arg is None else self.expr(node.arg), node.span)
        if isinstance(node, Arith):
            left, right = self.expr(node.left), self.expr(node.right)
            for side in (left, right):
                fam = _family(side)
                if fam != "number":
                    raise QueryError(
                        f"'{node.op}' needs numbers, but {_describe(side, fam)} is not one", self.source, side.span
                    )
            return Arith(node.op, left, right, node.span)
        if isinstance(node, Negate):
            operand = self.expr(node.operand)
            fam = _family(operand)
            if fam != "number":
                raise QueryError(f"cannot negate {_describe(operand, fam)}", self.source, operand.span)
            return Negate(operand, node.span)
        return node

    def condition(self, node: Condition) -> Condition:
        if isinstance(node, Comparison):
            left, right = self.expr(node.left), self.expr(node.right)
            lf, rf = _family(left), _family(right)
            if lf != rf:
                raise QueryError(
                    f"cannot compare {_describe(left, lf)} with {_describe(right, rf)}",
                    self.source,
                    node.span,
                )
            if lf == "boolean" and node.op not in ("=", "!="):
                raise QueryError("booleans compare only with = and !=", self.source, node.op_span)
            return Comparison(node.op, left, right, node.span, node.op_span)
        if isinstance(node, Not):
            return Not(self.condition(node.operand), node.span)
        items = tuple(self.condition(item) for item in node.items)
        return And(items, node.span) if isinstance(node, And) else Or(items, node.span)


def bind(query: Query, catalog: Catalog, name: str) -> BoundQuery:
    """Resolve and check ``query``; errors are attributed to query ``name``."""
    try:
        return _bind(query, catalog, name)
    except QueryError as err:
        raise err.in_query(name) from None


def _bind(query: Query, catalog: Catalog, name: str) -> BoundQuery:
    if query.is_aggregate:
        raise QueryError(
            "this is an aggregate query (a window in FROM, an aggregate, GROUP BY or HAVING); it is not a match query",
            query.source,
            query.span,
            hint="register aggregate queries with Matcher.register_query or mqo match; "
            "the Spark stages do not run them yet",
        )
    if query.stream_op is not None:
        raise QueryError(
            f"{query.stream_op} applies to aggregate queries (a relation per window); a match query's results"
            " are a stream already",
            query.source,
            query.stream_op_span,
            hint="remove it, or aggregate over a window in FROM (e.g. FROM H [RANGE 1 min] ... GROUP BY ...)",
        )
    scope = Scope(query, catalog)
    binder = Binder(scope)
    outputs: list[OutputColumn] = []
    if query.select is None:
        for alias, schema in scope.entries:
            outputs.extend(_star_columns(alias, schema, scope.role_of(alias)))
    else:
        for item in query.select:
            if item.star_of is not None:
                target = ColumnRef(item.star_of, "id", item.span)
                alias, schema = scope._entry_for(target)
                outputs.extend(_star_columns(alias, schema, scope.role_of(alias)))
                continue
            assert item.expr is not None
            expr = binder.expr(item.expr)
            out_name = item.name if item.name is not None else expr_text(expr)
            outputs.append(OutputColumn(out_name, expr))
    seen: set[str] = set()
    for out in outputs:
        if out.name in seen:
            raise QueryError(
                f"the result has two values named '{out.name}'; rename one with AS",
                query.source,
                _output_span(query, out),
            )
        seen.add(out.name)
    condition = query.condition()
    bound_condition = binder.condition(condition) if condition is not None else None
    maxwindow = query.maxwindow.seconds if query.maxwindow is not None else None
    if len(scope.entries) > 1 and maxwindow is None:
        from_span = query.from_[0].span.cover(query.from_[-1].span)
        raise QueryError(
            f"a query over {len(scope.entries)} streams needs MAXWINDOW",
            query.source,
            from_span,
            hint="MAXWINDOW bounds how far apart in time the tuples of one result may be, e.g. 'MAXWINDOW 20 sec'",
        )
    return BoundQuery(
        name=name,
        aliases=tuple((alias, schema.name) for alias, schema in scope.entries),
        outputs=tuple(outputs),
        condition=bound_condition,
        maxwindow=maxwindow,
        query=query,
        roles=tuple(scope.roles),
    )


def _star_columns(alias: str, schema: StreamSchema, role: str) -> list[OutputColumn]:
    return [
        OutputColumn(
            f"{alias}.{col.name}",
            ColumnRef(alias, col.name, Span(0, 0), alias=alias, stream=role, ctype=col.ctype),
        )
        for col in schema.columns
    ]


def _output_span(query: Query, out: OutputColumn) -> Span:
    if query.select is not None:
        for item in query.select:
            if item.name == out.name or (item.expr is not None and item.expr.span == out.expr.span):
                return item.span
    return query.span


def referenced_aliases(node: Expr | Condition) -> set[str]:
    """Aliases a bound expression or condition reads."""
    if isinstance(node, ColumnRef):
        return {node.alias} if node.alias is not None else set()
    if isinstance(node, (Arith, Comparison)):
        return referenced_aliases(node.left) | referenced_aliases(node.right)
    if isinstance(node, (Negate, Not)):
        return referenced_aliases(node.operand)
    if isinstance(node, (And, Or)):
        out: set[str] = set()
        for item in node.items:
            out |= referenced_aliases(item)
        return out
    return set()


__all__ = ["BoundQuery", "ColumnType", "OutputColumn", "bind", "referenced_aliases"]
