"""Tables: reference data kept as versions in event time, joined with results by key.

A table (``CREATE TABLE``, :mod:`predicates.tables`) holds rows by KEY. Each change
(:meth:`Tables.upsert`, :meth:`Tables.delete`) is a **version** of its key that takes
effect at its event time ``ts``; a result reads, for each table member of its query,
the version of the key its stream columns give that is newest at or before the ``ts``
of the tuples giving the key (the newest of them, when several do): a temporal join,
so an update at ts 50 is not seen by a tuple of ts 40. Versions of one key at one ts
take effect in the order they were made (the last one wins).

**Once per version.** A query's conjuncts that read one table member alone (``P.ward
= 'ICU'``) are decided when a version is made, for every query reading the table: the
version carries the bits of the readers (query, member) whose filter it passes
(re-decided lazily when the readers change). Joining a result then costs a hash probe
and a bit test; the conjuncts reading a table member and a stream (``P.age > H.x``)
are decided on the joined result.

**The engine's view.** A query reading tables is registered as the query over its
streams (:class:`predicates.tables.TableQuery`), its SELECT the whole query's: the
engine matches it as any query and the results of its slots are joined here
(:meth:`Tables.join_blocks`), the version's row put in the table's stream place (a
table is a stream of the plan that never stores a tuple), so results are written as
any other. A result whose join fails is dropped: it is not a result of the query.

**Bounded memory.** A result's tuples are never older than the clock's retention
horizon, so a version superseded by one at or before the horizon can never be read
again and is dropped (and a key deleted at or before it is forgotten), when a change
is made.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from numbers import Real
from typing import Any

import numpy as np

from indexes.stored import StoredTuple
from mqo.batch import MatchBatch, SingleResults
from mqo.expressions import TestFn, column_position, compile_test
from mqo.plan import CompiledPlan
from mqo.results import ResultBlock, TupleError
from mqo.rows import RowBuilder
from predicates.ast import And, Comparison, Condition, Or, condition_text
from predicates.catalog import StreamSchema
from predicates.errors import did_you_mean
from predicates.tables import TableDefinition, TableQuery

Rows = list[Any]


def compile_condition(
    cond: Condition, stream_number: Callable[[str], int], schema_of: Callable[[str], StreamSchema]
) -> TestFn:
    """A condition in negation normal form as a test on member rows (NULL: false)."""
    if isinstance(cond, Comparison):
        return compile_test(cond, stream_number, schema_of)
    parts = [compile_condition(item, stream_number, schema_of) for item in cond.items]  # type: ignore[union-attr]
    if isinstance(cond, And):
        return lambda rows: all(part(rows) for part in parts)
    assert isinstance(cond, Or)
    return lambda rows: any(part(rows) for part in parts)


class Version:
    """A key's row from ``ts`` on (``row`` None: deleted), the readers it passes."""

    __slots__ = ("generation", "member", "passes", "row", "ts")

    def __init__(self, ts: float, row: tuple[Any, ...] | None, member: StoredTuple | None) -> None:
        self.ts = ts
        self.row = row
        self.member = member
        self.passes = 0
        self.generation = -1


class TableRows:
    """One table's versions by key, and its readers (query, member) with their filters."""

    def __init__(self, definition: TableDefinition) -> None:
        self.definition = definition
        schema = definition.schema
        self.schema = schema
        self.builder = RowBuilder(schema)
        self.key_builder = RowBuilder(schema, missing_null=True)
        # (declared positions: a declared id is also put at the implicit id's place, see rows_of)
        self.key_positions = [schema.index_of(c) + 2 for c in definition.key]  # type: ignore[operator]
        declared_id = schema.index_of("id")
        self.id_position = None if declared_id is None else declared_id + 2
        self.versions: dict[tuple[Any, ...], list[Version]] = {}
        self.stamps: dict[tuple[Any, ...], list[float]] = {}
        self.count = 0  # versions held
        self.compact_at = 16  # versions held past which the next change drops old ones
        self.made = 0  # versions made (the implicit id of a table without an id column)
        self.readers: list[tuple[str, TestFn | None]] = []
        self.generation = 0

    @property
    def name(self) -> str:
        return self.definition.name

    def set_readers(self, readers: list[tuple[str, TestFn | None]]) -> None:
        self.readers = readers
        self.generation += 1

    def passes(self, version: Version) -> int:
        """The bits of the readers whose filter ``version`` passes (decided once per
        version and set of readers)."""
        if version.generation != self.generation:
            rows = [version.row]
            bits = 0
            for bit, (_, test) in enumerate(self.readers):
                if test is None or test(rows):
                    bits |= 1 << bit
            version.passes, version.generation = bits, self.generation
        return version.passes

    def probe(self, key: tuple[Any, ...], as_of: float) -> Version | None:
        stamps = self.stamps.get(key)
        if stamps is None:
            return None
        k = bisect_right(stamps, as_of) - 1
        return self.versions[key][k] if k >= 0 else None

    # ------------------------------------------------------------- changes

    def rows_of(self, rows: Iterable[Mapping[str, Any]], ts: float) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
        """(key, row) of each given row, checked (all before any is applied)."""
        out = []
        for k, values in enumerate(rows):
            try:
                row = list(self.builder.build(0.0, values, self.made + k))
            except TupleError as err:
                raise TupleError(_table_message(str(err), self.name, k)) from None
            row[0] = ts
            if self.id_position is not None:
                row[1] = row[self.id_position]  # (a table's declared id is read as its id)
            out.append((self._key(row, k), tuple(row)))
        return out

    def keys_of(self, keys: Iterable[Any]) -> list[tuple[Any, ...]]:
        names = self.definition.key
        out = []
        for k, given in enumerate(keys):
            if isinstance(given, Mapping):
                values = dict(given)
            else:
                parts = given if isinstance(given, tuple) else (given,)
                if len(parts) != len(names):
                    raise TupleError(
                        f"table {self.name}, key {k}: expected {len(names)} value(s) for "
                        f"KEY ({', '.join(names)}), got {given!r}"
                    )
                values = dict(zip(names, parts, strict=True))
            extra = [c for c in values if str(c).lower() not in {n.lower() for n in names}]
            if extra:
                raise TupleError(
                    f"table {self.name}, key {k}: {extra[0]!r} is not a KEY column (KEY: {', '.join(names)})"
                )
            try:
                row = self.key_builder.build(0.0, values)
            except TupleError as err:
                raise TupleError(_table_message(str(err), self.name, k, "key")) from None
            out.append(self._key(row, k, "key"))
        return out

    def _key(self, row: Any, k: int, what: str = "row") -> tuple[Any, ...]:
        key = tuple(row[p] for p in self.key_positions)
        for name, value in zip(self.definition.key, key, strict=True):
            if value is None:
                raise TupleError(
                    f"table {self.name}, {what} {k}: KEY column {name} is NULL (a row needs its whole key)"
                )
        return key

    def apply(self, changes: Sequence[tuple[tuple[Any, ...], tuple[Any, ...] | None]], ts: float) -> None:
        for key, row in changes:
            member = None if row is None else StoredTuple(-1, -1, row)
            stamps = self.stamps.setdefault(key, [])
            at = bisect_right(stamps, ts)  # after the versions of the same ts: the last made wins
            stamps.insert(at, ts)
            self.versions.setdefault(key, []).insert(at, Version(ts, row, member))
            self.count += 1
            self.made += 1

    def compact(self, horizon: float) -> None:
        """Drop the versions no result can read any more (see the module docstring)."""
        for key in list(self.stamps):
            stamps = self.stamps[key]
            k = bisect_right(stamps, horizon) - 1  # the version in effect at the horizon
            if k <= 0 and not (k == 0 and len(stamps) == 1 and self.versions[key][0].row is None):
                continue
            versions = self.versions[key]
            if versions[k].row is None and k == len(stamps) - 1:
                k += 1  # deleted and nothing after: the key is gone
            self.count -= k
            del stamps[:k], versions[:k]
            if not stamps:
                del self.stamps[key], self.versions[key]


def _table_message(message: str, table: str, k: int, what: str = "row") -> str:
    prefix = f"stream {table}"
    rest = message[len(prefix) :] if message.startswith(prefix) else ": " + message
    return f"table {table}, {what} {k}{rest}"


class Tables:
    """The declared tables, the queries reading them, and the joins of their results."""

    def __init__(self) -> None:
        self.tables: dict[str, TableRows] = {}  # by lower-case name
        self.queries: dict[str, TableQuery] = {}
        self._plan: tuple[CompiledPlan, np.ndarray, dict[int, Any]] | None = None

    def __bool__(self) -> bool:
        return bool(self.tables)

    def names(self) -> list[str]:
        return [t.name for t in self.tables.values()]

    def declare(self, definition: TableDefinition) -> None:
        self.tables[definition.name.lower()] = TableRows(definition)

    def declare_like(self, other: Tables) -> None:
        """Declare ``other``'s tables and queries here, without its versions (a matcher
        restored ``like=`` another shares its plan, never its table rows)."""
        for table in other.tables.values():
            self.declare(table.definition)
        self.add_queries(list(other.queries.values()))

    def undeclare(self, name: str) -> None:
        del self.tables[name.lower()]

    def table(self, name: str) -> TableRows:
        rows = self.tables.get(str(name).lower())
        if rows is None:
            known = [t.name for t in self.tables.values()]
            raise TupleError(
                f"no table named {name!r}"
                + did_you_mean(str(name), known)
                + (f" (tables: {', '.join(known)})" if known else " (no table is declared: CREATE TABLE declares one)")
            )
        return rows

    def add_queries(self, queries: list[TableQuery]) -> None:
        for query in queries:
            self.queries[query.name] = query
        self._readers_changed()

    def remove_query(self, name: str) -> None:
        if self.queries.pop(name, None) is not None:
            self._readers_changed()

    def _readers_changed(self) -> None:
        readers: dict[str, list[tuple[str, TestFn | None]]] = {name: [] for name in self.tables}
        for query in self.queries.values():
            for join in query.joins:
                table = self.tables[join.table.lower()]
                test = (
                    None
                    if join.filter is None
                    else compile_condition(join.filter, lambda s: 0, lambda s, t=table: t.schema)
                )
                readers[join.table.lower()].append((query.name, test))
        for name, table in self.tables.items():
            table.set_readers(readers[name])
        self._plan = None

    def account(self) -> list[dict[str, Any]]:
        """Each table for ``explain``: its KEY, rows and versions held, and its readers
        (query, member, key binding, the filter decided once per version)."""
        out = []
        for table in self.tables.values():
            readers = []
            for query in self.queries.values():
                for join in query.joins:
                    if join.table.lower() == table.name.lower():
                        keys = [
                            f"{join.alias}.{k} = {r.alias}.{r.name}"
                            for k, r in zip(table.definition.key, join.key_refs, strict=True)
                        ]
                        readers.append(
                            {
                                "query": query.name,
                                "alias": join.alias,
                                "key": keys,
                                "filter": None if join.filter is None else condition_text(join.filter),
                                "on_result": [condition_text(c) for c in query.residuals],
                            }
                        )
            out.append(
                {
                    "name": table.name,
                    "key": list(table.definition.key),
                    "keys": len(table.stamps),
                    "versions": table.count,
                    "readers": readers,
                }
            )
        return out

    # ------------------------------------------------------------- changes

    def upsert(self, name: str, rows: Any, ts: Any, horizon: float) -> int:
        table = self.table(name)
        when = _version_ts(ts, table.name)
        changes = table.rows_of(_records(rows), when)
        table.apply(changes, when)
        self._compact(table, horizon)
        return len(changes)

    def delete(self, name: str, keys: Iterable[Any], ts: Any, horizon: float) -> int:
        table = self.table(name)
        when = _version_ts(ts, table.name)
        if isinstance(keys, (str, bytes, Mapping)):
            raise TupleError(f"table {table.name}: keys must be a list of keys (a value, a tuple or a mapping each)")
        found = table.keys_of(keys)
        table.apply([(key, None) for key in found], when)
        self._compact(table, horizon)
        return len(found)

    def _compact(self, table: TableRows, horizon: float) -> None:
        # amortized: a pass over the keys once the versions held have doubled since the
        # last pass (so a horizon that stands still costs O(1) per change, not O(keys))
        if table.count > table.compact_at:
            table.compact(horizon)
            table.compact_at = 2 * table.count + 16

    # ------------------------------------------------------------- joins

    def _joins_of(self, plan: CompiledPlan) -> tuple[np.ndarray, dict[int, Any]]:
        """Per slot of ``plan``: whether its query reads tables; per such record, how
        its results are joined (the tables, key readers, as-of streams, residuals)."""
        if self._plan is not None and self._plan[0] is plan:
            return self._plan[1], self._plan[2]
        numbers = {s.name.lower(): i for i, s in enumerate(plan.streams)}

        def number(name: str) -> int:
            return numbers[name.lower()]

        def schema(name: str) -> StreamSchema:
            return plan.streams[numbers[name.lower()]]

        per_record: dict[int, Any] = {}
        for r, name in enumerate(plan.record_names):
            query = self.queries.get(name)
            if query is None:
                continue
            joins = []
            for join in query.joins:
                table = self.tables[join.table.lower()]
                # (a query reads a table once: its reader is the one of its name)
                bit = 1 << next(b for b, (q, _) in enumerate(table.readers) if q == query.name)
                refs = [(number(ref.stream), column_position(schema(ref.stream), ref.name)) for ref in join.key_refs]  # type: ignore[arg-type]
                as_of = sorted({s for s, _ in refs} | {number(_role(query, a)) for a in join.as_of_aliases})
                joins.append((table, number(join.table), refs, as_of, bit))
            residuals = [compile_condition(c, number, schema) for c in query.residuals]
            per_record[r] = (joins, residuals)
        flags = np.array([r in per_record for r in range(len(plan.record_names))], bool)
        is_table = flags[plan.slot_record] if len(flags) else np.zeros(0, bool)
        self._plan = (plan, is_table, per_record)
        return is_table, per_record

    def join_blocks(self, plan: CompiledPlan, blocks: list[ResultBlock]) -> list[ResultBlock]:
        """``blocks`` with the results of queries reading tables joined (or dropped)."""
        if not self.queries or not blocks:
            return blocks
        is_table, per_record = self._joins_of(plan)
        out: list[ResultBlock] = []
        for block in blocks:
            numbers = block.numbers()
            mine = is_table[numbers]
            if not mine.any():
                out.append(block)
                continue
            if not mine.all():
                out.append(ResultBlock(numbers[~mine], block.tuples, block.ts))
            self._join(plan, per_record, numbers[mine], block.tuples, block.ts, out)
        return out

    def join_batch(self, plan: CompiledPlan, batch: MatchBatch) -> MatchBatch:
        """:meth:`join_blocks` of a batch's blocks and single-stream results."""
        if not self.queries or not len(batch):
            return batch
        is_table, per_record = self._joins_of(plan)
        joined: list[ResultBlock] = []
        singles: list[SingleResults] = []
        for single in batch.singles:
            mine = is_table[single.slots]
            if not mine.any():
                singles.append(single)
                continue
            if not mine.all():
                singles.append(SingleResults(single.stream, single.rows, single.row_of[~mine], single.slots[~mine]))
            n = len(plan.streams)
            for row_of, slot in zip(single.row_of[mine].tolist(), single.slots[mine].tolist(), strict=True):
                members: list[StoredTuple | None] = [None] * n
                row = single.rows[row_of]
                members[single.stream] = StoredTuple(single.stream, -1, row)
                self._join(plan, per_record, np.array([slot], np.int64), members, row[0], joined)
        return MatchBatch(plan, joined + self.join_blocks(plan, batch.blocks), singles)

    def _join(
        self,
        plan: CompiledPlan,
        per_record: dict[int, Any],
        slots: np.ndarray,
        tuples: list[StoredTuple | None],
        ts: float,
        out: list[ResultBlock],
    ) -> None:
        rows = [t.row if t is not None else None for t in tuples]
        made: dict[tuple[int, ...], tuple[list[StoredTuple | None], list[int]]] = {}
        for slot in slots.tolist():
            joins, residuals = per_record[int(plan.slot_record[slot])]
            members = list(tuples)
            found: list[int] = []
            for table, place, refs, as_of, bit in joins:
                key = tuple(rows[s][p] for s, p in refs)  # type: ignore[index]
                if any(v is None or v != v for v in key):  # NULL (or NaN) joins nothing
                    break
                version = table.probe(key, max(rows[s][0] for s in as_of))  # type: ignore[index]
                if version is None or version.member is None or not table.passes(version) & bit:
                    break
                members[place] = version.member
                rows[place] = version.row  # (what the residuals read; taken out below)
                found.append(id(version))
            else:
                if all(test(rows) for test in residuals):
                    group = made.setdefault(tuple(found), (members, []))
                    group[1].append(slot)
            for _, place, _, _, _ in joins:
                rows[place] = None
        for members, group_slots in made.values():
            out.append(ResultBlock(np.array(group_slots, np.int64), members, ts))

    # ------------------------------------------------------------- snapshots

    def snapshot(self) -> list[dict[str, Any]]:
        """Each table's versions as [ts, key, row or None (deleted)], oldest first per key."""
        out = []
        for table in self.tables.values():
            versions = [
                [v.ts, list(key), None if v.row is None else list(v.row)]
                for key, vs in table.versions.items()
                for v in vs
            ]
            out.append({"name": table.name, "made": table.made, "versions": versions})
        return out

    def load(self, data: list[dict[str, Any]]) -> None:
        """Take back :meth:`snapshot`'s versions (the tables declared already)."""
        for item in data:
            table = self.table(item["name"])
            for ts, key, row in item["versions"]:
                table.apply([(tuple(key), None if row is None else tuple(row))], float(ts))
            table.made = int(item["made"])


def _role(query: TableQuery, alias: str) -> str:
    bound = query.query.context.bound
    return dict(bound.role_aliases)[alias]


def _version_ts(ts: Any, table: str) -> float:
    if ts is None:
        return -math.inf  # from the start
    if isinstance(ts, bool) or not isinstance(ts, Real) or ts != ts or ts == math.inf:
        raise TupleError(f"table {table}: ts must be a number (or None: from the start), got {ts!r}")
    return float(ts)


def _records(rows: Any) -> list[Mapping[str, Any]]:
    """A list of mappings from a list of mappings, an Arrow table or a pandas DataFrame."""
    if hasattr(rows, "to_pylist"):
        return list(rows.to_pylist())
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):
        return list(rows.to_dict("records"))
    if isinstance(rows, Mapping):
        raise TupleError("rows must be a list of rows (mappings of column -> value), not one mapping")
    return list(rows)


def table_lines(tables: list[dict[str, Any]]) -> list[str]:
    """:meth:`Tables.account` as ``explain``'s lines."""
    lines = ["Tables (joined by KEY as of each tuple's ts; a filter is decided once per row version)"]
    for t in tables:
        lines.append(f"  {t['name']} KEY ({', '.join(t['key'])}): {t['keys']} key(s), {t['versions']} version(s) held")
        for r in t["readers"]:
            lines.append(f"    {r['query']} as {r['alias']}: {' AND '.join(r['key'])}")
            if r["filter"] is not None:
                lines.append(f"      per version: {r['filter']}")
            for cond in r["on_result"]:
                lines.append(f"      per result: {cond}")
    return lines
