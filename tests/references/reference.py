"""An exact reference matcher that cannot share a bug with the engine.

Queries and schemas are **structures** here (the dataclasses of
``tests/references/exact_language.py``), not text: the
reference evaluates the structure and prints it as query language (:meth:`Query.to_text`,
:meth:`Schema.ddl`) for the engine to parse. It imports nothing from ``predicates``,
``mqo``, ``indexes`` or ``runtime`` (``tests/differential/test_exact_differential.py`` checks that), so
no parser, binder, normalizer or index of the engine stands between a query and its
answer here.

The rules (docs/ARCHITECTURE.md, "Semantics" and "Exact numbers", made precise;
tests/references/test_reference.py holds hand-computed cases of them):

1. Numbers are exact rationals (:class:`fractions.Fraction`): an INTEGER value is the
   integer itself; a FLOAT value (and every ``ts``, heartbeat and the allowed lateness)
   is the shortest decimal that reads back as the same double, ``Fraction(repr(x))``, so
   2.3 means 23/10; a literal of a query means exactly what is written (``0.1`` is 1/10,
   ``1 / 3`` is 1/3). Durations are exact: ``100 ms`` is 1/10 s, ``0.1 min`` is 6 s.
2. SQL three-valued logic: a missing column, ``None`` and a FLOAT NaN are NULL; arithmetic
   with NULL is NULL, division by zero is NULL; a comparison with NULL is UNKNOWN; NOT,
   AND, OR are Kleene's. A query reports an assignment only if its condition is TRUE.
3. ``id`` is the given one, else the number of tuples pushed before on that stream (late
   ones included).
4. Time (``time='per-stream'``, the default): each stream has ``M_s``, the largest ts of
   its tuples (late ones included) and heartbeats, and a lateness ``L_s`` (its own, else
   the allowed lateness L). A stream is *active* unless declared idle (it is active again
   once it sends a tuple or a heartbeat). The watermark ``W`` starts at -inf; after each
   tuple, heartbeat and idle declaration it becomes ``max(W, min over active s of
   M_s - L_s)`` when there is an active stream and every active stream has an ``M_s``
   (else it stays). A tuple is late iff ``ts < W`` (W before it arrives); a late tuple is
   counted and nothing else. ``time='global'``: one ``M`` over all streams, ``W = M - L``.
   A heartbeat without a stream is a heartbeat of every stream.
5. After each accepted tuple (after matching it) and each heartbeat or idle declaration
   the retention horizon becomes ``H = max(H, W - Wmax)``, ``Wmax`` the largest MAXWINDOW
   of the registered queries over 2+ aliases (0 if none).
6. A query registered when the horizon is ``H`` sees only tuples with ``ts >= H``
   (``since``); a query registered before any horizon sees everything.
7. When a tuple is accepted, each registered query reading its stream reports every
   assignment of accepted tuples to its aliases (a tuple of alias a's stream to a) that
   gives the new tuple to at least one alias and earlier accepted tuples to the others
   (a stream read under several aliases, a self-join, may give the new tuple to several
   of them, or earlier tuples of its stream to some), such that every member has
   ``ts >= since``, ``max ts - min ts <= MAXWINDOW``
   (queries over 2+ aliases), and WINDOW AND WHERE is TRUE. One result per assignment
   and query, however many disjuncts hold. ``ts`` of a result is the largest member ts;
   its values are the SELECT items (``*``: every declared column of every alias, named
   ``alias.col``; ``alias.*`` likewise for one alias).

8. A SELECT item that is an expression (not a bare column) is computed in IEEE doubles,
   one operation at a time, on the values as pushed: an INTEGER value and ``id`` are
   integers (and + - * of integers stays an exact integer), a FLOAT value, ``ts`` and
   every literal are doubles; division by zero and NaN are NULL. (Predicates are exact;
   a reported value is a double anyway.)

Idleness after a processing-time timeout is modelled as a declaration (``set_idle``) at
the point the timeout passes.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Union

# the structures and numbers, re-exported: workloads and tests import them from here
from tests.references.exact_language import (
    COMPARISONS,
    FLOAT,
    INTEGER,
    SPELLINGS,
    STRING,
    UNITS,
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
    Not,
    Num,
    Or,
    Query,
    Schema,
    Spelling,
    Star,
    Str,
    Stream,
    cond_text,
    const,
    decimal_text,
    exact,
    expr_text,
)

# -------------------------------------------------------------- evaluation

Row = dict[str, Any]  # column -> exact value, plus "ts" (Fraction) and "id" (int)
Env = Mapping[str, Row]  # alias -> row
Value = Union[Fraction, str, None]  # noqa: UP007


def _arith(op: str, left: Fraction, right: Fraction) -> Fraction | None:
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    return None if right == 0 else left / right  # division by zero is NULL


def evaluate(expr: Expr, env: Env) -> Value:
    """The exact value of an expression, None for NULL."""
    if isinstance(expr, Col):
        return env[expr.alias][expr.name]
    if isinstance(expr, Num):
        return expr.value
    if isinstance(expr, Str):
        return expr.value
    if isinstance(expr, Neg):
        value = evaluate(expr.operand, env)
        return None if value is None else -value  # type: ignore[operator]
    left = evaluate(expr.left, env)
    right = evaluate(expr.right, env)
    if left is None or right is None:
        return None
    return _arith(expr.op, left, right)  # type: ignore[arg-type]


def _compare(op: str, left: Any, right: Any) -> bool:
    if op == "<":
        return left < right
    if op == "<=":
        return left <= right
    if op == ">":
        return left > right
    if op == ">=":
        return left >= right
    if op == "=":
        return left == right
    return left != right


def truth(cond: Cond, env: Env) -> bool | None:
    """Kleene truth of a condition: True, False or None (UNKNOWN)."""
    if isinstance(cond, Cmp):
        left = evaluate(cond.left, env)
        right = evaluate(cond.right, env)
        if left is None or right is None:
            return None
        return _compare(cond.op, left, right)
    if isinstance(cond, Not):
        value = truth(cond.item, env)
        return None if value is None else not value
    # Kleene: one False decides an AND, one True an OR (the rest need not be looked at)
    decisive = isinstance(cond, Or)
    unknown = False
    for item in cond.items:
        value = truth(item, env)
        if value is not None and bool(value) is decisive:
            return decisive
        unknown = unknown or value is None
    return None if unknown else not decisive


@dataclass(frozen=True)
class Result:
    query: str
    ts: Fraction
    ids: tuple[tuple[str, int], ...]  # sorted (alias, id)
    values: tuple[tuple[str, Value], ...]  # sorted (name, exact value)

    def __hash__(self) -> int:
        # Only a speed-up: a Fraction's hash costs a modular inverse, and tests count
        # results by the hundred thousand; equal results have equal queries and ids, and
        # equality still compares every field.
        return hash((self.query, self.ids))

    def __str__(self) -> str:
        ids = ", ".join(f"{a}={i}" for a, i in self.ids)
        values = ", ".join(f"{k}={_show(v)}" for k, v in self.values)
        return f"{self.query} ts={_show(self.ts)} ids({ids}) values({values})"


def _show(value: Value) -> str:
    if isinstance(value, Fraction):
        text = decimal_text(value)
        return text if text is not None else f"{value.numerator}/{value.denominator}"
    return repr(value)


def exact_result(query: Any, ts: Any, ids: Mapping[str, Any], values: Mapping[str, Any]) -> Result:
    """A result reported by the engine (or read back from a file), made comparable with
    the reference's: numbers as exact Fractions of what was reported, NaN kept visible."""

    def one(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return "NaN (should be NULL)"
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, int):
            return Fraction(v)
        if hasattr(v, "item"):  # numpy scalars
            return one(v.item())
        return _decimal_of(float(v))

    return Result(
        str(query),
        one(ts),
        tuple(sorted((str(a), int(i)) for a, i in ids.items())),
        tuple(sorted((str(k), one(v)) for k, v in values.items())),
    )


@functools.lru_cache(maxsize=1 << 16)
def _decimal_of(x: float) -> Fraction:
    """``Fraction(repr(x))``, remembered: results repeat the same few values many times
    (and -0.0, which equals 0.0 as a key, is 0 either way)."""
    return Fraction(repr(x))


def engine_results(matches: Iterable[Any]) -> list[Result]:
    """``mqo.Match`` objects (anything with query, ts, ids, values) as results."""
    return [exact_result(m.query, m.ts, m.ids, m.values) for m in matches]


@dataclass
class Registered:
    query: Query
    since: Fraction | None  # None: before any horizon (sees everything)
    check: Callable[[Env], bool] = field(repr=False, default=lambda env: True)
    streams: frozenset[str] = frozenset()  # the query's streams

    def __post_init__(self) -> None:
        self.streams = frozenset(self.query.streams)


class Reference:
    """The contract computed the slow, exact way (see the module docstring)."""

    def __init__(
        self,
        schema: Schema,
        allowed_lateness: Any = 0,
        *,
        prune: bool = True,
        time: str = "per-stream",
        stream_lateness: Mapping[str, Any] | None = None,
    ) -> None:
        self.schema = schema
        self.lateness = exact(allowed_lateness)
        assert isinstance(self.lateness, Fraction) and self.lateness >= 0
        assert time in ("per-stream", "global")
        # global time is per-stream time with one clock every tuple belongs to
        self.clocks = [s.name for s in schema.streams] if time == "per-stream" else ["*"]
        own = {name: exact(v) for name, v in (stream_lateness or {}).items()}
        self.stream_late: dict[str, Fraction] = {c: own.get(c, self.lateness) for c in self.clocks}  # type: ignore[misc]
        self.newest: dict[str, Fraction | None] = dict.fromkeys(self.clocks)
        self.idle: set[str] = set()
        self.watermark: Fraction | None = None  # W; None is -inf
        self.queries: dict[str, Registered] = {}
        # accepted tuples per stream, sorted by ts, and their ts (for bisect)
        self.stored: dict[str, list[Row]] = {s.name: [] for s in schema.streams}
        self.stamps: dict[str, list[Fraction]] = {s.name: [] for s in schema.streams}
        self.pushed: dict[str, int] = dict.fromkeys(self.stored, 0)
        self.late: list[tuple[str, Fraction, int]] = []
        self.horizon: Fraction | None = None  # H; None is -inf
        # Pruning drops stored tuples older than H. It only saves time: such a tuple is
        # in no result (a query registered before H was reached has MAXWINDOW <= Wmax,
        # and every later tuple has ts >= H + Wmax; a query registered after has since
        # >= H). tests/differential/test_exact_differential.py checks that pruning changes nothing.
        self.prune = prune

    # --------------------------------------------------------------- queries

    def register(self, query: Query) -> str:
        if query.name in self.queries:
            raise ValueError(f"query id {query.name} is already registered")
        if len({a.lower() for a, _ in query.sources}) != len(query.sources):
            raise ValueError("an alias is used twice")
        for _, stream in query.sources:
            self.schema.stream(stream)
        if len(query.sources) > 1 and query.maxwindow is None:
            raise ValueError("MAXWINDOW is required with two or more streams")
        conds = [c for c in (query.window, query.where) if c is not None]
        whole = conds[0] if len(conds) == 1 else And(tuple(conds)) if conds else None
        check = (lambda env: True) if whole is None else (lambda env: truth(whole, env) is True)
        self.queries[query.name] = Registered(query, self.horizon, check)
        return query.name

    def unregister(self, name: str) -> None:
        del self.queries[name]

    # ---------------------------------------------------------------- tuples

    def push(
        self, stream: str, ts: float, values: Mapping[str, Any] | None = None, id: int | None = None
    ) -> list[Result]:
        spec = self.schema.stream(stream)
        exact_ts = exact(ts)
        assert isinstance(exact_ts, Fraction), f"ts must be a number, got {ts!r}"
        if id is None:
            id = self.pushed[stream]
        self.pushed[stream] += 1
        late = self.watermark is not None and exact_ts < self.watermark
        self._speak(stream, exact_ts)
        if late:
            self.late.append((stream, exact_ts, id))
            return []
        given = dict(values or {})
        row: Row = {}
        for col in spec.columns:
            row[col.name] = exact(given.pop(col.name, None), col.type)
        if given:
            raise KeyError(f"stream {stream} has no column(s) {sorted(given)}")
        row["ts"] = exact_ts
        row["id"] = int(id)
        results: list[Result] = []
        pools: dict[tuple[str, Fraction, Fraction], list[Row]] = {}  # only a speed-up, as in _pool
        for reg in self.queries.values():
            if stream in reg.streams:
                results.extend(self._results(reg, stream, row, pools))
        at = bisect.bisect_right(self.stamps[stream], exact_ts)
        self.stamps[stream].insert(at, exact_ts)
        self.stored[stream].insert(at, row)
        self._advance()
        return results

    def heartbeat(self, ts: float, stream: str | None = None) -> None:
        """One event: every stream named has nothing more before ``ts`` (all of them at
        once: the watermark is settled after, not between, the streams)."""
        exact_ts = exact(ts)
        assert isinstance(exact_ts, Fraction)
        for name in [stream] if stream is not None else [s.name for s in self.schema.streams]:
            c = self._clock(name)
            old = self.newest[c]
            self.newest[c] = exact_ts if old is None else max(old, exact_ts)
            self.idle.discard(c)
        self._settle()
        self._advance()

    def set_idle(self, stream: str) -> None:
        self.idle.add(self._clock(stream))
        self._settle()
        self._advance()

    def _clock(self, stream: str) -> str:
        return stream if self.clocks != ["*"] else "*"

    def _speak(self, stream: str, ts: Fraction) -> None:
        c = self._clock(stream)
        old = self.newest[c]
        self.newest[c] = ts if old is None else max(old, ts)
        self.idle.discard(c)
        self._settle()

    def _settle(self) -> None:
        active = [c for c in self.clocks if c not in self.idle]
        if not active:
            return
        marks = []
        for c in active:
            newest = self.newest[c]
            if newest is None:
                return
            marks.append(newest - self.stream_late[c])
        low = min(marks)
        if self.watermark is None or low > self.watermark:
            self.watermark = low

    @property
    def late_count(self) -> int:
        return len(self.late)

    # ------------------------------------------------------------- internals

    def _advance(self) -> None:
        if self.watermark is None:
            return
        windows = [r.query.maxwindow.seconds for r in self.queries.values() if len(r.query.sources) > 1]
        wmax = max(windows, default=Fraction(0))  # type: ignore[arg-type]
        candidate = self.watermark - wmax
        if self.horizon is None or candidate > self.horizon:
            self.horizon = candidate
            if self.prune:
                for name, stamps in self.stamps.items():
                    cut = bisect.bisect_left(stamps, candidate)
                    del stamps[:cut], self.stored[name][:cut]

    def _pool(self, stream: str, lo: Fraction, hi: Fraction, pools: dict) -> list[Row]:
        """The stored tuples of ``stream`` with ``lo <= ts <= hi``, remembered in
        ``pools`` for the other queries of the same push (the store does not change
        while one tuple is matched)."""
        key = (stream, lo, hi)
        if key not in pools:
            stamps = self.stamps[stream]
            pools[key] = self.stored[stream][bisect.bisect_left(stamps, lo) : bisect.bisect_right(stamps, hi)]
        return pools[key]

    def _results(self, reg: Registered, stream: str, new: Row, pools: dict | None = None) -> list[Result]:
        pools = {} if pools is None else pools
        query, since = reg.query, reg.since
        multi = len(query.sources) > 1
        window = query.maxwindow.seconds if multi else None  # type: ignore[union-attr]
        choices: list[list[Row]] = []
        # Only a speed-up: a combination must hold the new tuple, so when one alias alone
        # reads its stream, that alias holds it and nothing else.
        alone = sum(s == stream for _, s in query.sources) == 1
        for _, alias_stream in query.sources:
            if not multi or (alone and alias_stream == stream):
                choices.append([new])
                continue
            # Only a speed-up: the tests below reject whatever this skips.
            lo = new["ts"] - window if since is None else max(since, new["ts"] - window)
            pool = self._pool(alias_stream, lo, new["ts"] + window, pools)
            # every alias of the new tuple's stream may hold it (several at once, too)
            choices.append([*pool, new] if alias_stream == stream else pool)
        out = []
        for combo in itertools.product(*choices):
            if not any(r is new for r in combo):
                continue  # its last tuple arrived before: reported then
            stamps = [r["ts"] for r in combo]
            if since is not None and min(stamps) < since:
                continue
            if multi and max(stamps) - min(stamps) > window:  # type: ignore[operator]
                continue
            env = {alias: r for (alias, _), r in zip(query.sources, combo, strict=True)}
            if not reg.check(env):
                continue
            out.append(
                Result(
                    query.name,
                    max(stamps),
                    tuple(sorted((alias, r["id"]) for alias, r in env.items())),
                    tuple(sorted(select_values(self.schema, query, env).items())),
                )
            )
        return out


def select_values(schema: Schema, query: Query, env: Env) -> dict[str, Value]:
    """A result's SELECT values by name: a column as it is, an expression in doubles."""
    values: dict[str, Value] = {}
    for name, expr in outputs(schema, query):
        if isinstance(expr, Col):
            values[name] = evaluate(expr, env)
        else:
            streams = {alias: schema.stream(stream) for alias, stream in query.sources}
            values[name] = in_doubles(expr, env, streams)
    return values


def in_doubles(expr: Expr, env: Env, streams: Mapping[str, Stream]) -> Value:
    """A SELECT expression's value (rule 8): IEEE doubles, one operation at a time, on
    the values as pushed; integers stay exact integers under + - *."""

    def value(e: Expr) -> int | float | str | None:
        if isinstance(e, Col):
            v = env[e.alias][e.name]
            if v is None or isinstance(v, str):
                return v
            integer = e.name == "id" or (e.name != "ts" and streams[e.alias].column(e.name).type == INTEGER)
            return int(v) if integer else float(v)
        if isinstance(e, Num):
            return float(e.value)
        if isinstance(e, Str):
            return e.value
        if isinstance(e, Neg):
            v = value(e.operand)
            return None if v is None else -v  # type: ignore[operator]
        left, right = value(e.left), value(e.right)
        if left is None or right is None:
            return None
        if e.op == "/":
            return None if right == 0 else left / right  # type: ignore[operator]
        out = left + right if e.op == "+" else left - right if e.op == "-" else left * right  # type: ignore[operator]
        return None if out != out else out  # NaN (inf - inf) is NULL

    result = value(expr)
    if result is None or isinstance(result, str):
        return result
    return Fraction(result) if isinstance(result, int) else Fraction(repr(result))


def outputs(schema: Schema, query: Query) -> list[tuple[str, Expr]]:
    """The SELECT values of a query: (name, column or expression) in order (rule 7)."""
    out: list[tuple[str, Expr]] = []
    items: Sequence[Item | Star] = query.select or tuple(Star(a) for a, _ in query.sources)
    for item in items:
        if isinstance(item, Star):
            stream = dict(query.sources)[item.alias]
            out.extend((f"{item.alias}.{col.name}", Col(item.alias, col.name)) for col in schema.stream(stream).columns)
        else:
            out.append((item.output, item.col))
    return out


__all__ = [
    "COMPARISONS",
    "FLOAT",
    "INTEGER",
    "SPELLINGS",
    "STRING",
    "UNITS",
    "And",
    "Bin",
    "Cmp",
    "Col",
    "Column",
    "Cond",
    "Duration",
    "Env",
    "Expr",
    "Item",
    "Neg",
    "Not",
    "Num",
    "Or",
    "Query",
    "Reference",
    "Registered",
    "Result",
    "Row",
    "Schema",
    "Spelling",
    "Star",
    "Str",
    "Stream",
    "Value",
    "cond_text",
    "const",
    "decimal_text",
    "engine_results",
    "evaluate",
    "exact",
    "exact_result",
    "expr_text",
    "in_doubles",
    "outputs",
    "truth",
]
