"""The exact reference of tables (README, "Tables"): reference data joined as of ts,
evaluated from query structures with Fractions, sharing no code with the engine (it
imports nothing from ``mqo``, ``predicates``, ``indexes`` or ``runtime``).

The rules, on top of the reference's (:mod:`tests.references.reference`):

1. ``CREATE TABLE t (cols) KEY (k...)`` declares ``t``; its rows come from changes:
   ``upsert(t, rows, ts)`` makes each row a version of its key from ``ts`` on (None:
   from the start, before every number), ``delete(t, keys, ts)`` a version that says
   the key has no row from ``ts`` on. Changes are numbered in the order made.
2. A query may read tables beside its streams (a table once). Each table member's
   whole KEY is given by conjuncts of WHERE ``T.k = S.c`` (S a stream member).
3. When a tuple is accepted, a query reading tables reports every assignment of
   stream tuples that rule 7 of the reference would report for the query over its
   streams alone without a condition (MAXWINDOW, since), extended, for each table
   member T, by T's row as of ``a``: the version of the key (the values of the
   ``S.c`` of rule 2, exact: 1.0 and 1 are one key; a NULL gives no row) with the
   largest (ts, number) among those with ts <= a, ``a`` the largest ts of the
   members S of rule 2; no result when there is none or it is a delete. Then WINDOW
   AND WHERE must be TRUE (Kleene, as the reference) over all members. A table row's
   ``ts`` is its version's; its values are its columns.
4. ``ids`` name the stream members only; ``*`` is every column of every member,
   tables included.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tests.references.exact_language import And, Cmp, Col, Column, Cond, Query, Schema, Stream, exact
from tests.references.reference import (
    Reference,
    Registered,
    Result,
    evaluate,
    select_values,
    truth,
)


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]

    def to_text(self) -> str:
        cols = ", ".join(f"{c.name} {c.type}" for c in self.columns)
        return f"CREATE TABLE {self.name} ({cols}) KEY ({', '.join(self.key)});"

    def as_stream(self) -> Stream:
        return Stream(self.name, self.columns)


@dataclass
class _Version:
    ts: Fraction | None  # None: from the start
    number: int
    row: dict[str, Any] | None  # None: deleted


class TableReference(Reference):
    """The exact reference with tables (rules 1-4)."""

    def __init__(self, schema: Schema, tables: Sequence[Table], allowed_lateness: Any = 0, **settings: Any) -> None:
        super().__init__(schema, allowed_lateness, **settings)
        self.tables = {t.name: t for t in tables}
        self.whole = Schema(tuple(schema.streams) + tuple(t.as_stream() for t in tables))
        self.versions: dict[str, dict[tuple[Any, ...], list[_Version]]] = {t.name: {} for t in tables}
        self.changes = 0
        self.table_queries: dict[str, Query] = {}  # the queries reading tables, whole

    # ------------------------------------------------------------- changes

    def upsert(self, table: str, rows: Sequence[Mapping[str, Any]], ts: Any) -> None:
        spec = self.tables[table]
        when = None if ts is None else exact(ts)
        for values in rows:
            row = {c.name: exact(values.get(c.name), c.type) for c in spec.columns}
            row["ts"] = when
            self._add(table, tuple(row[k] for k in spec.key), row, when)

    def delete(self, table: str, keys: Sequence[Mapping[str, Any]], ts: Any) -> None:
        spec = self.tables[table]
        types = {c.name: c.type for c in spec.columns}
        when = None if ts is None else exact(ts)
        for key in keys:
            self._add(table, tuple(exact(key[k], types[k]) for k in spec.key), None, when)

    def _add(self, table: str, key: tuple[Any, ...], row: dict[str, Any] | None, ts: Fraction | None) -> None:
        self.versions[table].setdefault(key, []).append(_Version(ts, self.changes, row))
        self.changes += 1

    def as_of(self, table: str, key: tuple[Any, ...], at: Fraction) -> dict[str, Any] | None:
        if any(v is None for v in key):
            return None
        seen = [v for v in self.versions[table].get(key, []) if v.ts is None or v.ts <= at]
        if not seen:
            return None
        newest = max(seen, key=lambda v: (0 if v.ts is None else 1, v.ts or 0, v.number))
        return newest.row

    # ------------------------------------------------------------- queries

    def register(self, query: Query) -> str:
        members = [(a, s) for a, s in query.sources if s in self.tables]
        if not members:
            return super().register(query)
        streams = tuple((a, s) for a, s in query.sources if s not in self.tables)
        over_streams = dataclasses.replace(query, sources=streams, where=None, window=None, select=None)
        super().register(over_streams)  # (rule 3: MAXWINDOW and since as the reference has them)
        self.table_queries[query.name] = query
        return query.name

    def unregister(self, name: str) -> None:
        super().unregister(name)
        self.table_queries.pop(name, None)

    def _results(self, reg: Registered, stream: str, new: dict[str, Any], pools: dict | None = None) -> list[Result]:
        query = self.table_queries.get(reg.query.name)
        if query is None:
            return super()._results(reg, stream, new, pools)
        members = [(a, s) for a, s in query.sources if s in self.tables]
        streams = reg.query.sources
        inner = reg
        conds = [c for c in (query.window, query.where) if c is not None]
        whole = conds[0] if len(conds) == 1 else And(tuple(conds))
        out = []
        for found in super()._results(inner, stream, new, pools):
            ids = dict(found.ids)
            env: dict[str, Any] = {a: self._row(s, ids[a], stream, new) for a, s in streams}
            for alias, table in members:
                refs = _key_refs(whole, alias, self.tables[table].key)
                at = max(env[s.alias]["ts"] for s in refs.values())
                row = self.as_of(table, tuple(evaluate(refs[k], env) for k in self.tables[table].key), at)
                if row is None:
                    break
                env[alias] = row
            else:
                if truth(whole, env) is True:
                    values = select_values(self.whole, query, env)
                    out.append(Result(query.name, found.ts, found.ids, tuple(sorted(values.items()))))
        return out

    def _row(self, stream: str, id: int, new_stream: str, new: dict[str, Any]) -> dict[str, Any]:
        """A member's row by its id (ids are unique within a stream; the new tuple is not stored yet)."""
        if stream == new_stream and new["id"] == id:
            return new
        return next(row for row in self.stored[stream] if row["id"] == id)


def _key_refs(cond: Cond, alias: str, key: tuple[str, ...]) -> dict[str, Col]:
    """The stream column each key column of member ``alias`` equals (rule 2)."""
    refs: dict[str, Col] = {}
    for c in _conjuncts(cond):
        if isinstance(c, Cmp) and c.op == "=" and isinstance(c.left, Col) and isinstance(c.right, Col):
            for mine, other in ((c.left, c.right), (c.right, c.left)):
                if mine.alias == alias and mine.name in key and other.alias != alias and mine.name not in refs:
                    refs[mine.name] = other
    assert set(refs) == set(key), f"member {alias}: its key is not bound ({refs})"
    return refs


def _conjuncts(cond: Cond) -> list[Cond]:
    if isinstance(cond, And):
        return [x for item in cond.items for x in _conjuncts(item)]
    return [cond]


__all__ = ["Table", "TableReference"]
