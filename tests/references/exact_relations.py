"""Reference of ISTREAM and DSTREAM, derived from the exact aggregate reference's RSTREAM.

Shares no code with the engine (imports nothing from mqo, predicates or indexes). The
aggregate reference (:mod:`tests.references.agg_reference`) gives every (window, group)
that holds data, in Fractions; this module runs it on the query without its HAVING
(the HAVING aggregate added to the calls), decides HAVING itself, and from the
sequence of relations derives what the operators report (README, "ISTREAM and
DSTREAM"):

* the relation at a window: its groups holding data that pass HAVING, with their
  SELECT values;
* time windows: window k ends at ``k*s``; the previous window is ``k - 1`` (a window
  without data is the empty relation); at the end of input the windows after the
  data are empty (not a landmark's); a query removed when the newest ts is ``U``
  saw the windows ending before ``U - lateness`` close;
* count windows: per group, its previous window is its own previous one;
* ISTREAM: a group new or with other values than in the previous window, with this
  window's bounds and values; DSTREAM: a group of the previous window that is not in
  this one, with this window's bounds and the previous window's values.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tests.references.agg_reference import RefQuery, Result, arrivals, call_name, evaluate, exact

HOLDS = {  # a comparison of exact values, by operator
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


@dataclass
class RelQuery(RefQuery):
    """An aggregate reference query with its relation-to-stream operator."""

    op: str = "RSTREAM"

    def text(self) -> str:
        head, _select, rest = super().text().partition("\nSELECT ")
        return f"{head}\nSELECT {self.op} {rest}"


def _having_holds(q: RefQuery, values: dict[str, Any]) -> bool:
    assert q.having is not None
    f, c, op, const = q.having
    v = values[call_name(f, c)]
    return v is not None and HOLDS[op](exact(v) if isinstance(v, float) else v, exact(const))


def _windows(q: RefQuery, tuples: list[tuple[float, dict[str, Any]]], lateness: Any) -> list[tuple[Result, bool]]:
    """Every (window, group) holding data, with whether it passes HAVING."""
    calls = list(q.calls)
    if q.having is not None and q.having[:2] not in calls:
        calls.append(q.having[:2])
    bare = dataclasses.replace(q, calls=calls, having=None)
    rows = evaluate([bare], tuples, lateness)
    shown = {call_name(f, c) for f, c in q.calls}
    out = []
    for r in rows:
        ok = q.having is None or _having_holds(q, r.values)
        out.append((Result(r.query, r.start, r.end, r.group, {k: v for k, v in r.values.items() if k in shown}), ok))
    return out


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a[k] == b[k] for k in a)


def _closed_until(q: RefQuery, tuples: list[tuple[float, dict[str, Any]]], lateness: Any) -> Fraction | None:
    """A removed query: windows ending before this closed while it was registered."""
    if q.removed_at is None:
        return None
    arr = arrivals(tuples, lateness)
    if q.removed_at < len(arr):
        until = arr[q.removed_at].newest_before
    else:
        until = max((exact(a.ts) for a in arr if not a.late), default=None)
    return None if until is None else until - exact(lateness)


def relation_stream(q: RelQuery, tuples: list[tuple[float, dict[str, Any]]], lateness: Any) -> list[Result]:
    """What ``q`` reports (any operator) over ``tuples``."""
    rows = _windows(q, tuples, lateness)
    if q.op == "RSTREAM":
        return [r for r, ok in rows if ok]
    out: list[Result] = []

    def step(start: Any, end: Fraction, before: dict, current: dict) -> None:
        if q.op == "ISTREAM":
            for key, values in current.items():
                if key not in before or not _same(before[key], values):
                    out.append(Result(q.name, start, end, key, values))
        else:
            for key, values in before.items():
                if key not in current:
                    out.append(Result(q.name, start, end, key, values))

    if q.rows:
        present: dict[tuple, dict] = {}
        for r, ok in rows:  # per group in window order
            before = {r.group: present[r.group]} if r.group in present else {}
            current = {r.group: r.values} if ok else {}
            step(r.start, r.end, before, current)
            present.pop(r.group, None)
            present.update(current)
        return out

    def bounds(k: int) -> tuple[Fraction | None, Fraction]:
        end = k * q.slide
        return (None if q.range_ is None else end - q.range_), end

    by_window: dict[int, dict[tuple, dict]] = {}
    for r, ok in rows:
        k = r.end / q.slide
        assert k.denominator == 1
        window = by_window.setdefault(int(k), {})
        if ok:
            window[r.group] = r.values
    present = {}
    last: int | None = None
    for k in sorted(by_window):
        if last is not None and k > last + 1 and present:
            step(*bounds(last + 1), present, {})
            present = {}
        step(*bounds(k), present, by_window[k])
        present, last = by_window[k], k
    if present and last is not None:
        until = _closed_until(q, tuples, lateness)
        if q.removed_at is None and q.range_ is not None:
            step(*bounds(last + 1), present, {})  # the end of input: every later window is empty
        elif q.removed_at is not None and until is not None and (last + 1) * q.slide < until:
            step(*bounds(last + 1), present, {})
    return out


def relation_streams(
    queries: list[RelQuery], tuples: list[tuple[float, dict[str, Any]]], lateness: Any
) -> list[Result]:
    return [r for q in queries for r in relation_stream(q, tuples, lateness)]


__all__ = ["RelQuery", "relation_stream", "relation_streams"]
