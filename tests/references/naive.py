"""A slow, obviously-correct reference evaluator for the differential tests.

It shares nothing with the engine (``mqo/``, ``indexes/``, ``predicates.normalize``): it
parses and binds each query with the language layer and then evaluates the *original*
condition tree of the query, under SQL three-valued logic, on every combination of
stored tuples. It keeps every accepted tuple forever and decides by the rules below what
each combination may see. The rules (docs/ARCHITECTURE.md, Semantics and Time, made precise):

1. Tuples are pushed one at a time. Missing columns are NULL; a float NaN is NULL.
2. ``id`` is the given one, else the number of tuples pushed before on that stream
   (late ones included).
3. ``M`` is the largest ts of accepted tuples and heartbeats. A tuple is late iff
   ``ts < M - L``; a late tuple is recorded in :attr:`ReferenceMatcher.late` and nothing
   else.
4. After each accepted tuple (after matching it) and each heartbeat, the retention
   horizon becomes ``H = max(H, M - L - Wmax)``, ``Wmax`` being the largest MAXWINDOW of
   the registered queries over 2+ streams (0 if none).
5. A query registered when the horizon is ``H`` only sees tuples with ``ts >= H``.
6. When an accepted tuple arrives, each registered query reading its stream reports every
   assignment of that tuple to its alias and of earlier accepted tuples to the other
   aliases whose members all have ``ts >= since``, whose span ``max ts - min ts`` is at
   most MAXWINDOW (multi-stream queries only), and whose condition is TRUE.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections import defaultdict

from predicates import BoundQuery, Catalog, bind, parse_queries
from predicates.ast import And, Arith, BoolLit, ColumnRef, Comparison, Negate, Not, Number, Or, StringLit

Row = dict  # column name (declared spelling, plus "ts" and "id") -> value

_COMPARE = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "=": operator.eq,
    "!=": operator.ne,
}

_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def clean(value: object) -> object:
    """A pushed or computed value as the reference sees it: NaN is NULL, numbers are floats."""
    if value is None:
        return None
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        value = float(value)
        return None if math.isnan(value) else value
    return value


def evaluate_expr(expr, env: dict[str, Row]) -> object:
    """Value of a bound expression; ``env`` maps each alias to its tuple. NULL is None."""
    if isinstance(expr, Number):
        return float(expr.value)
    if isinstance(expr, (StringLit, BoolLit)):
        return expr.value
    if isinstance(expr, ColumnRef):
        return env[expr.alias][expr.name]
    if isinstance(expr, Negate):
        value = evaluate_expr(expr.operand, env)
        return None if value is None else -value
    if isinstance(expr, Arith):
        left = evaluate_expr(expr.left, env)
        right = evaluate_expr(expr.right, env)
        if left is None or right is None:
            return None
        if expr.op == "/":
            return None if right == 0 else clean(left / right)
        return clean(_ARITH[expr.op](left, right))
    raise TypeError(f"not an expression: {expr!r}")


def evaluate_condition(cond, env: dict[str, Row]) -> bool | None:
    """Kleene three-valued truth of a bound condition: True, False or None (UNKNOWN)."""
    if isinstance(cond, Comparison):
        left = evaluate_expr(cond.left, env)
        right = evaluate_expr(cond.right, env)
        if left is None or right is None:
            return None
        return _COMPARE[cond.op](left, right)
    if isinstance(cond, Not):
        value = evaluate_condition(cond.operand, env)
        return None if value is None else not value
    if isinstance(cond, And):
        values = [evaluate_condition(item, env) for item in cond.items]
        if False in values:
            return False
        return None if None in values else True
    if isinstance(cond, Or):
        values = [evaluate_condition(item, env) for item in cond.items]
        if True in values:
            return True
        return None if None in values else False
    raise TypeError(f"not a condition: {cond!r}")


class ReferenceMatcher:
    """The semantics of ``mqo.Matcher`` computed the slow way (see the module docstring)."""

    def __init__(self, ddl: str, allowed_lateness: float = 0.0) -> None:
        self.catalog = Catalog.from_ddl(ddl)
        self.lateness = float(allowed_lateness)
        self.queries: dict[str, tuple[BoundQuery, float]] = {}  # id -> (query, since_ts)
        self.stored: dict[str, list[Row]] = defaultdict(list)  # stream -> accepted tuples
        self.pushed: dict[str, int] = defaultdict(int)  # stream -> tuples pushed (auto ids)
        self.late: list[tuple[str, float, object]] = []
        self.max_ts = -math.inf  # M
        self.horizon = -math.inf  # H
        self.registered_count = 0

    # ------------------------------------------------------------------ queries

    def register_query(self, text: str, query_id: str | None = None) -> str:
        parsed = parse_queries(text, "<query>")
        if len(parsed) != 1:
            raise ValueError(f"expected one query, got {len(parsed)}")
        query = parsed[0]
        if query_id is None:
            query_id = query.name if query.name is not None else str(self.registered_count + 1)
        if query_id in self.queries:
            raise ValueError(f"query id {query_id} is already registered")
        bound = bind(query, self.catalog, query_id)
        self.queries[query_id] = (bound, self.horizon)
        self.registered_count += 1
        return query_id

    def unregister_query(self, query_id: str) -> None:
        del self.queries[query_id]

    # ------------------------------------------------------------------- tuples

    def push(self, stream: str, ts: float, values: dict | None = None, id: object = None) -> list[dict]:
        schema = self.catalog.require(stream)
        stream = schema.name
        ts = float(ts)
        if id is None:
            id = self.pushed[stream]
        self.pushed[stream] += 1
        if ts < self.max_ts - self.lateness:
            self.late.append((stream, ts, id))
            return []
        self.max_ts = max(self.max_ts, ts)

        row: Row = {col.name: None for col in schema.columns}
        for key, value in (values or {}).items():
            found = schema.index_of(key)
            if found is None:
                raise KeyError(f"stream {stream} has no column {key}")
            row[schema.columns[found].name] = clean(value)
        row["ts"] = ts
        row["id"] = id

        results = []
        for query_id, (query, since) in self.queries.items():
            results.extend(self._results(query_id, query, since, stream, row))
        self.stored[stream].append(row)
        self._advance_horizon()
        return results

    def heartbeat(self, ts: float) -> None:
        self.max_ts = max(self.max_ts, float(ts))
        self._advance_horizon()

    # ---------------------------------------------------------------- internals

    def _advance_horizon(self) -> None:
        windows = [float(q.maxwindow) for q, _ in self.queries.values() if len(q.aliases) > 1]
        wmax = max(windows, default=0.0)
        self.horizon = max(self.horizon, self.max_ts - self.lateness - wmax)

    def _results(self, query_id: str, query: BoundQuery, since: float, stream: str, new: Row) -> list[dict]:
        if stream not in query.streams:
            return []
        multi = len(query.aliases) > 1
        window = float(query.maxwindow) if multi else math.inf
        # Candidates per alias. Dropping a stored tuple further than `window` from the new
        # one only skips combinations the span check below would reject anyway.
        choices = []
        for _, alias_stream in query.aliases:
            if not multi:
                choices.append([new])
                continue
            near = [r for r in self.stored[alias_stream] if r["ts"] >= since and abs(r["ts"] - new["ts"]) <= window]
            # a stream read under several aliases (a self-join) may give the new tuple to
            # any of them, to several at once, or earlier tuples to some
            choices.append([*near, new] if alias_stream == stream else near)
        results = []
        for combo in itertools.product(*choices):
            if not any(row is new for row in combo):
                continue  # reported when its last tuple arrived
            env = {alias: row for (alias, _), row in zip(query.aliases, combo, strict=True)}
            stamps = [row["ts"] for row in combo]
            if min(stamps) < since:
                continue
            if multi and max(stamps) - min(stamps) > window:
                continue
            if query.condition is not None and evaluate_condition(query.condition, env) is not True:
                continue
            results.append(
                {
                    "query": query_id,
                    "ts": max(stamps),
                    "ids": {alias: row["id"] for alias, row in env.items()},
                    "values": {out.name: evaluate_expr(out.expr, env) for out in query.outputs},
                }
            )
        return results


__all__ = ["ReferenceMatcher", "clean", "evaluate_condition", "evaluate_expr"]
