"""Reference evaluator of windowed aggregate queries, straight from the definitions.

Shares no code with the engine (imports nothing from mqo, predicates or indexes):
queries are structures, printed as text for the engine; every window is recomputed
from the stored tuples with Fractions of what the numbers mean (a float is its
shortest decimal, ``repr``).

Semantics (README, "Windowed aggregation"):

* a tuple is late when ``ts < newest - lateness`` (``newest``: the largest ts accepted
  before it); late tuples are in no window;
* a landmark query reports ``(-inf, k*s]`` for every end the watermark passed, and at
  the end of input up to its last tuple;
* a query ``[RANGE d SLIDE s]`` has windows ``(k*s - d, k*s]`` for integers k; one
  registered when the newest ts is ``R`` reports only windows with ``k*s - d >= R``;
  a ``[RANGE UNBOUNDED SLIDE s]`` query (registered before any tuple) has windows
  ``(-inf, k*s]``;
* a window is reported per group of the tuples in it that satisfy WHERE (a comparison
  with NULL is false), only when it has such tuples; HAVING filters the groups;
* a query removed when the newest ts is ``U`` keeps only the windows it had reported:
  those with ``k*s < U - lateness``.

Count windows ``[ROWS n SLIDE m]`` (``rows=True``; ``range_`` is n, ``slide`` m):

* a query's rows are the tuples arriving after its registration (and before its
  removal) that are not late and satisfy WHERE; per group they are numbered 1, 2, ...
  by ts, ties by arrival;
* window k is rows ``max(1, k*m - n + 1) .. k*m``, for every k with ``k*m`` rows; its
  start and end are the ts of its first and last row;
* at the end of input each group's next window (``k = R // m + 1`` over R rows, when R
  is not a multiple of m) with the rows it holds, if any;
* a query removed when the newest ts is ``U`` keeps the windows whose row ``k*m`` has
  ``ts <= U - lateness`` (final then), and no end-of-input window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any


def exact(v: Any) -> Fraction:
    return Fraction(repr(v)) if isinstance(v, float) else Fraction(v)


@dataclass
class RefQuery:
    name: str
    stream: str
    range_: Fraction | None  # None: UNBOUNDED
    slide: Fraction
    where: list[tuple[str, str, Any]]  # (column, op, constant), ANDed
    group_by: list[str]
    calls: list[tuple[str, str | None]]  # (func, column) in SELECT order
    having: tuple[str, str | None, str, Any] | None = None  # (func, column, op, constant)
    registered_at: int = 0  # index of the first tuple it sees arrive
    removed_at: int | None = None
    rows: bool = False  # [ROWS range_ SLIDE slide]

    def text(self) -> str:
        def dur(x: Fraction) -> str:
            return f"{float(x)!r} sec" if x.denominator != 1 else f"{x.numerator} sec"

        if self.rows:
            window = f"ROWS {self.range_} SLIDE {self.slide}"
        else:
            window = f"RANGE UNBOUNDED SLIDE {dur(self.slide)}" if self.range_ is None else f"RANGE {dur(self.range_)}"
        if not self.rows and self.range_ is not None and self.slide != self.range_:
            window += f" SLIDE {dur(self.slide)}"
        select = [*self.group_by, *(call_name(f, c) for f, c in self.calls)]
        text = f"Query ID: {self.name}\nSELECT {', '.join(select)} FROM {self.stream} [{window}]"
        if self.where:
            text += " WHERE " + " AND ".join(f"{c} {op} {const!r}" for c, op, const in self.where)
        if self.group_by:
            text += " GROUP BY " + ", ".join(self.group_by)
        if self.having is not None:
            f, c, op, const = self.having
            text += f" HAVING {call_name(f, c)} {op} {const!r}"
        return text + ";"


def bare(column: str) -> str:
    """``H.vib`` -> ``vib`` (tuples hold bare column names)."""
    return column.rsplit(".", 1)[-1]


def call_name(func: str, column: str | None) -> str:
    return f"{func}({'*' if column is None else column})"


_OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


@dataclass
class Arrival:
    ts: float
    values: dict[str, Any]
    late: bool = False
    newest_before: Fraction | None = None


@dataclass
class Result:
    query: str
    start: Fraction | None
    end: Fraction
    group: tuple[Any, ...]
    values: dict[str, Any] = field(default_factory=dict)


def arrivals(tuples: list[tuple[float, dict[str, Any]]], lateness: Any) -> list[Arrival]:
    out = []
    newest: Fraction | None = None
    late_by = exact(lateness)
    for ts, values in tuples:
        t = exact(ts)
        a = Arrival(ts, values, newest_before=newest)
        a.late = newest is not None and t < newest - late_by
        if not a.late:
            newest = t if newest is None else max(newest, t)
        out.append(a)
    return out


def aggregate(func: str, values: list[Fraction], rows: int) -> Any:
    if func == "COUNT":
        return len(values) if values is not None else rows
    if not values:
        return None
    if func == "SUM":
        return sum(values, Fraction(0))
    if func == "AVG":
        return sum(values, Fraction(0)) / len(values)
    if func == "MIN":
        return min(values)
    if func == "MAX":
        return max(values)
    if len(values) < 2:
        return None
    mean = sum(values, Fraction(0)) / len(values)
    var = sum(((v - mean) ** 2 for v in values), Fraction(0)) / (len(values) - 1)
    return var if func == "VARIANCE" else math.sqrt(var)


def evaluate(queries: list[RefQuery], tuples: list[tuple[float, dict[str, Any]]], lateness: Any) -> list[Result]:
    arr = arrivals(tuples, lateness)
    late_by = exact(lateness)
    out: list[Result] = []
    for q in queries:
        since = arr[q.registered_at].newest_before if q.registered_at < len(arr) else None
        if q.registered_at >= len(arr) and arr:
            seen = [exact(a.ts) for a in arr if not a.late]
            since = max(seen) if seen else None
        until: Fraction | None = None
        if q.removed_at is not None:
            if q.removed_at < len(arr):
                until = arr[q.removed_at].newest_before
            else:
                until = max((exact(a.ts) for a in arr if not a.late), default=None)
            if until is None:
                continue  # removed before any tuple: nothing reported
        members = []
        for i, a in enumerate(arr):
            if a.late or i < q.registered_at or (q.removed_at is not None and i >= q.removed_at):
                continue
            ok = True
            for col, op, const in q.where:
                v = a.values.get(bare(col))
                if v is None or not _OPS[op](exact(v), exact(const)):
                    ok = False
                    break
            if ok:
                members.append(a)
        if not members:
            continue
        if q.rows:
            removed = None if q.removed_at is None else until - late_by  # type: ignore[operator]
            out += _count_windows(q, members, removed)
            continue
        times = [exact(a.ts) for a in members]
        s = q.slide
        k_hi = math.ceil((max(times) + (q.range_ or 0)) / s)
        if q.range_ is None:
            # landmark windows never empty again: reported while the watermark passes
            # their end, and at the end of input up to the last tuple
            final = max((exact(a.ts) for a in arr if not a.late), default=None)
            if final is not None:
                k_hi = max(k_hi, math.ceil((final - late_by) / s) - 1)
        # only the windows holding a member (with a landmark's, every end after the
        # first): a gap of 1e9 s between tuples is not 1e9 windows to look at
        ks: set[int] = set()
        for t in times:
            last = k_hi if q.range_ is None else math.ceil((t + q.range_) / s) - 1
            ks.update(range(math.ceil(t / s), min(last, k_hi) + 1))
        for k in sorted(ks):
            end = k * s
            start = None if q.range_ is None else end - q.range_
            if since is not None and (start is None or start < since):
                continue
            if until is not None and not end < until - late_by:
                continue
            inside = [a for a, t in zip(members, times, strict=True) if t <= end and (start is None or t > start)]
            groups: dict[tuple[Any, ...], list[Arrival]] = {}
            for a in inside:
                groups.setdefault(tuple(a.values.get(bare(g)) for g in q.group_by), []).append(a)
            for key, rows in groups.items():
                values: dict[str, Any] = {}
                for f, c in q.calls + ([q.having[:2]] if q.having else []):
                    vals = (
                        None
                        if c is None
                        else [exact(a.values[bare(c)]) for a in rows if a.values.get(bare(c)) is not None]
                    )
                    values[call_name(f, c)] = aggregate(f, vals, len(rows))  # type: ignore[arg-type]
                if q.having is not None:
                    f, c, op, const = q.having
                    v = values[call_name(f, c)]
                    if v is None or not _OPS[op](exact(v) if isinstance(v, float) else v, exact(const)):
                        continue
                out.append(Result(q.name, start, end, key, values))
    return out


def _results(q: RefQuery, rows: list[Arrival], start: Fraction | None, end: Fraction, key: tuple) -> list[Result]:
    values: dict[str, Any] = {}
    for f, c in q.calls + ([q.having[:2]] if q.having else []):
        vals = None if c is None else [exact(a.values[bare(c)]) for a in rows if a.values.get(bare(c)) is not None]
        values[call_name(f, c)] = aggregate(f, vals, len(rows))  # type: ignore[arg-type]
    if q.having is not None:
        f, c, op, const = q.having
        v = values[call_name(f, c)]
        if v is None or not _OPS[op](exact(v) if isinstance(v, float) else v, exact(const)):
            return []
    return [Result(q.name, start, end, key, values)]


def _count_windows(q: RefQuery, members: list[Arrival], removed: Fraction | None) -> list[Result]:
    """[ROWS n SLIDE m] over a query's rows (in arrival order), straight from the definition."""
    n, m = int(q.range_), int(q.slide)  # type: ignore[arg-type]
    groups: dict[tuple[Any, ...], list[tuple[Fraction, int, Arrival]]] = {}
    for i, a in enumerate(members):
        groups.setdefault(tuple(a.values.get(bare(g)) for g in q.group_by), []).append((exact(a.ts), i, a))
    out: list[Result] = []
    for key, rows in groups.items():
        rows.sort(key=lambda r: (r[0], r[1]))
        total = len(rows)
        ends = list(range(m, total + 1, m))
        if removed is None and total % m:
            ends.append(total)  # the end of input: the next window, with the rows it has
        for e in ends:
            k = (e + m - 1) // m  # window k ends at row k*m (or at the last row)
            first = max(1, k * m - n + 1)
            if first > e:
                continue
            if removed is not None and rows[e - 1][0] > removed:
                continue
            window = [a for _, _, a in rows[first - 1 : e]]
            out += _results(q, window, rows[first - 1][0], rows[e - 1][0], key)
    return out
