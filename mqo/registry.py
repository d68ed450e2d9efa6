"""The query registry: which queries are registered and which predicates they use.

Each registered query is a :class:`~predicates.records.CompiledQuery` (its name, its
context, its disjuncts as list keys and constants) plus when it was registered. Its
predicates are also appended to flat, typed columns (query, disjunct, list, constant),
so a million queries cost a few hundred bytes each and the plan compiler groups all
predicates of a list with one sort (:mod:`mqo.plan`). A table's rows (``register_table``,
and texts read from one template) are kept as their block of constants and, under each
name, the query's order number: no object per row (:mod:`mqo.registered`).

Identical predicates are stored once in the compiled lists (one entry per distinct
constant, with the queries using it), and a list exists exactly while some query uses
it: the registry counts uses per list key, and unregistering the last user of a list
drops it. Lists keep the order in which they were first needed, which is the list
numbering ``explain`` shows (the thesis numbers lists the same way).

``version`` changes with every registration change so a plan knows when it is stale.

Queries reading a stream under several aliases read it in **roles** (``B#2``, the second
alias of B; :func:`predicates.catalog.role_name`); the engine keeps each role as a stream
of its own. ``roles`` lists the roles ever needed, in the order first needed: a role
keeps its stream number for the matcher's life (its stored tuples are numbered by it),
so a role is never dropped, only left without queries.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from fractions import Fraction
from itertools import chain, repeat
from typing import Any

import numpy as np

import predicates
from indexes.lexer_kernels import cut_tokens, lex_bytes, read_one
from mqo.registered import (
    BlockRows,
    RecordList,
    RegisteredCompiled,
    RegisteredQueries,
    RegisteredQuery,
    RegisteredRow,
    Run,
)
from predicates import Catalog, Kind, ListKey, QueryError
from predicates.catalog import ROLE_MARK
from predicates.normalize import DEFAULT_MAX_DISJUNCTS
from predicates.numbers import to_float
from predicates.records import CompiledQuery, RowQueries
from predicates.table import first_repeated
from predicates.template_scan import ScanArrays
from predicates.token_cache import TokenCache

_COMPACT_WHEN_DEAD = 0.5
_RECORD_KINDS = {"AggregateQuery": "an aggregate query", "ViewDefinition": "a view", "TableDefinition": "a table",
                 "TableQuery": "a query reading a table"}  # fmt: skip
# an add of at most this many predicate rows extends the columns in Python (numpy's
# fixed cost per call is more than the rows' own below it)
_FEW_ROWS = 256


def scan_bytes(*arrays: np.ndarray) -> ScanArrays:
    """:func:`predicates.template_scan.scan_bytes` compiled (the kernel is imported on
    first use: ``import mqo`` does not import numba)."""
    from indexes.template_kernels import scan_bytes as kernel

    return kernel(*arrays)


class QueryRegistry:
    def __init__(self, catalog: Catalog, max_disjuncts: int = DEFAULT_MAX_DISJUNCTS) -> None:
        self.catalog = catalog
        self.max_disjuncts = max_disjuncts
        self.compiler = TokenCache(catalog, max_disjuncts)  # (the property: with the kernels)
        # by name: an object per query of its own, a table row's order (mqo.registered)
        self.queries = RegisteredQueries(self._row_record)
        self._keys: list[ListKey | None] = []
        self._key_id: dict[ListKey, int] = {}
        self._key_uses: list[int] = []
        # each live list's id by id() of its key object: a query's keys are mostly those
        # objects (a compiler hands out one per list key), found without hashing one
        self._kid_by_id: dict[int, int] = {}
        self._object_keys: set[int] = set()  # lists whose constants are not numbers
        self._row_query = array("q")
        self._row_disjunct = array("h")
        self._row_key = array("i")
        self._row_value = array("d")
        self._row_objects: dict[int, Any] = {}
        # a table's rows are not copied into the columns above: their rows are made
        # from the block when the plan is compiled (22 bytes a predicate fewer to keep)
        self._blocks: list[BlockRows] = []
        self._block_rows = 0  # rows held by the blocks
        self._dead: set[int] = set()
        self._dead_rows = 0
        self._order = 0
        self.version = 0
        # orders of removed queries, for plans updated in place (mqo.plan_update);
        # entry k of the log is removal number ``_removals_before + k``
        self._removals: list[int] = []
        self._removals_before = 0
        self.roles: list[str] = []  # role streams (``B#2``) in the order first needed
        self._no_roles: object = None  # a context known to read no stream twice (no roles to number)

    @property
    def compiler(self) -> TokenCache:
        """The compile entry's caches for this catalog (:func:`predicates.compile_many`);
        they scan and cut with the numba kernels."""
        return self._compiler

    @compiler.setter
    def compiler(self, compiler: TokenCache) -> None:
        compiler.templates.scanner = scan_bytes
        compiler.lexer, compiler.cutter, compiler.one = lex_bytes, cut_tokens, read_one
        self._compiler = compiler

    def compile_one(self, text: str, position: int = 1, source_name: str = "<query>") -> CompiledQuery:
        """The one match query of ``text`` (named ``position`` without a header),
        through the compile entry and these caches."""
        records = predicates.compile(
            text, self.catalog, source_name=source_name, first_position=position,
            max_disjuncts=self.max_disjuncts, compiler=self._compiler,
        )  # fmt: skip
        if len(records) != 1:
            raise QueryError(f"expected one query, found {len(records)}", None, None)
        if not isinstance(records[0], CompiledQuery):
            found = _RECORD_KINDS.get(type(records[0]).__name__, type(records[0]).__name__)
            raise QueryError(f"expected a match query, found {found}", None, None)
        return records[0]

    def compile_rows(self, texts: list[str], rows: list[int], position: int, source_name: str) -> list[CompiledQuery]:
        """A table's rows' written-out texts (rows ``rows``, numbered from ``position``),
        one match query each, in one call of the compile entry (its bulk reader); an
        error names its row, ``source_name[row N]``."""
        try:
            records = predicates.compile_many(
                texts, self.catalog, source_name=source_name, first_position=position,
                max_disjuncts=self.max_disjuncts, compiler=self._compiler,
            )  # fmt: skip
            if len(records) == len(texts) and all(isinstance(r, CompiledQuery) for r in records):
                return list(records)  # type: ignore[arg-type]
        except QueryError:
            pass  # (the row to blame is found below)
        return [self.compile_one(t, position + r, f"{source_name}[row {r}]") for t, r in zip(texts, rows, strict=True)]

    def need_roles(self, roles: Iterable[str]) -> None:
        """Number the roles of ``roles`` not numbered yet (names with ``#``)."""
        for role in roles:
            if ROLE_MARK in role and role.lower() not in (r.lower() for r in self.roles):
                self.roles.append(role)

    def __len__(self) -> int:
        return len(self.queries)

    def __iter__(self) -> Iterator[RegisteredQuery]:
        return iter(self.queries.values())

    def __contains__(self, name: object) -> bool:
        return name in self.queries

    def add(self, queries: Iterable[CompiledQuery], since_ts: float | Fraction | Iterable[float | Fraction]) -> None:
        """Register compiled queries, all or nothing. Their names are checked to be free
        and different beforehand, except a table block's (:class:`~predicates.records.RowQueries`),
        which are checked here."""
        since = None if isinstance(since_ts, (int, float, Fraction)) else iter(since_ts)
        if since is None and type(queries) is list and len(queries) == 1 and self._add_one(queries[0], since_ts):
            return
        if type(queries) is RowQueries:
            if since is None and self._add_rows(queries, since_ts):  # type: ignore[arg-type]
                return
            repeated = first_repeated(queries.names)  # (one by one below: checked first)
            if repeated is not None:
                raise QueryError(f"query id {repeated} is given twice")
        if since is None and isinstance(queries, list) and self._add_uniform(queries, since_ts):  # type: ignore[arg-type]
            return
        first_row = len(self._row_key)
        # the new rows, column by column, as chunks joined once at the end: a million
        # queries cost a million appends, not four million array extensions
        chunk_orders: list[int] = []
        chunk_disjuncts: list[int] = []
        chunk_keys: list[tuple[ListKey, ...]] = []
        value_chunks: list[Any] = []
        last_context = None
        queries_by_name = self.queries.entries
        for compiled in queries:
            if compiled.name in queries_by_name:
                raise ValueError(f"query id {compiled.name} is already registered")
            order = self._order
            self._order += 1
            queries_by_name[compiled.name] = RegisteredCompiled(
                compiled, next(since) if since is not None else since_ts, order
            )  # type: ignore[arg-type]
            if compiled.context is not last_context:
                last_context = compiled.context
                if last_context.bound.self_join:
                    self.need_roles(last_context.bound.roles)
            for d, (preds, _) in enumerate(compiled.disjuncts):
                if preds.keys:
                    chunk_orders.append(order)
                    chunk_disjuncts.append(d)
                    chunk_keys.append(preds.keys)
                    value_chunks.append(preds.values)
        # list ids for all rows at once, by the identity of their key objects (a
        # compiler hands out one object per list key): a key hashed once per object
        keys = list(chain.from_iterable(chunk_keys))
        kid_list: list[int] = []
        kid_of, unread = self._kid_by_id, iter(keys)
        while True:
            try:  # (list.extend keeps what it took before a key not known: then its list is found)
                kid_list.extend(map(kid_of.__getitem__, map(id, unread)))
                break
            except KeyError:
                key = keys[len(kid_list)]
                kid_list.append(self._key_number(key))
                if kid_of.get(id(key)) != kid_list[-1]:  # (an equal key's list: its object known to this call)
                    kid_of = kid_of if kid_of is not self._kid_by_id else dict(kid_of)
                    kid_of[id(key)] = kid_list[-1]
        kids = array("i", kid_list)
        sizes = list(map(len, chunk_keys))
        if (self._object_keys and not self._object_keys.isdisjoint(kid_list)) or any(
            type(v) is not array for v in value_chunks
        ):
            row = first_row
            for c, (n, values) in enumerate(zip(sizes, value_chunks, strict=True)):
                at = row - first_row
                if not (self._object_keys.isdisjoint(kids[at : at + n]) and type(values) is array):
                    value_chunks[c] = array("d", [0.0] * n)  # (the constants that are no doubles kept apart)
                    for k, (key, value) in enumerate(zip(chunk_keys[c], values, strict=True)):
                        if key.family == "number" and value is not None:
                            value_chunks[c][k] = to_float(value)
                            if type(value) is not float:
                                self._row_objects[row + k] = value  # exact: 1/3
                        else:
                            self._row_objects[row + k] = value
                row += n
        self._row_key.extend(kids)
        self._row_value.frombytes(b"".join(value_chunks))
        if len(kids) <= _FEW_ROWS:
            # a few queries (a registration one at a time): the columns extended and the
            # uses counted in Python, without numpy's fixed cost per call
            for order, d, n in zip(chunk_orders, chunk_disjuncts, sizes, strict=True):
                self._row_query.extend(repeat(order, n))
                self._row_disjunct.extend(repeat(d, n))
            for kid in kids:
                self._key_uses[kid] += 1
        elif sizes:
            counts = np.array(sizes, np.int64)
            self._row_query.frombytes(np.repeat(np.array(chunk_orders, np.int64), counts).tobytes())
            self._row_disjunct.frombytes(np.repeat(np.array(chunk_disjuncts, np.int16), counts).tobytes())
            # list use counts, for all new rows at once
            counts = np.bincount(np.frombuffer(kids, np.int32))
            uses = self._key_uses
            for kid in np.flatnonzero(counts).tolist():
                uses[kid] += int(counts[kid])
        self.version += 1

    def _add_one(self, compiled: CompiledQuery, since_ts: float | Fraction) -> bool:
        """One query whose constants are all numbers (``register_query``), its lists
        found by their keys' identity; False (nothing done) for any other query."""
        entries = self.queries.entries
        if compiled.name in entries:
            raise ValueError(f"query id {compiled.name} is already registered")
        by_id = self._kid_by_id
        parts = []
        for d, (preds, _) in enumerate(compiled.disjuncts):
            keys, values = preds.keys, preds.values
            if type(values) is not array:
                return False
            kids = list(map(by_id.get, map(id, keys)))
            if None in kids:
                kids = [self._key_number(key) for key in keys]  # (the lists made stay: the query is added)
            if not self._object_keys.isdisjoint(kids):
                return False
            if kids:
                parts.append((d, kids, values))
        order = self._order
        self._order += 1
        entries[compiled.name] = RegisteredCompiled(compiled, since_ts, order)
        context = compiled.context
        if context is not self._no_roles and context.bound.self_join:
            self.need_roles(context.bound.roles)
        elif context is not self._no_roles:
            self._no_roles = context
        uses = self._key_uses
        for d, kids, values in parts:
            self._row_query.extend(array("q", (order,)) * len(kids))
            self._row_disjunct.extend(array("h", (d,)) * len(kids))
            self._row_key.fromlist(kids)
            self._row_value.extend(values)
            for kid in kids:
                uses[kid] += 1
        self.version += 1
        return True

    def _add_rows(self, rows: RowQueries, since_ts: float | Fraction) -> bool:
        """A table's rows registered as their block: one record per row, no predicate
        rows copied; False (nothing done) when a list's constants are not all numbers.
        O(rows), about a microsecond each."""
        names, block = rows.names, rows.block
        if not names or any(key.family != "number" for key in block.keys):
            return False
        queries = self.queries.entries
        if not queries.keys().isdisjoint(names):
            taken = next(name for name in names if name in queries)
            raise ValueError(f"query id {taken} is already registered")
        m, start, before = len(names), self._order, len(queries)
        # the names kept as the block's (the list handed over, which its makers keep
        # to themselves: the ids a registration returns are a copy), each name's entry
        # the block: no object per row, not even its order (mqo.registered)
        rows_of = BlockRows(len(self._row_key), block, start, np.zeros(0, np.int32), since_ts, names)
        queries.update(zip(names, repeat(rows_of)))
        if len(queries) != before + m:  # a name given twice: every name added is new, so take them all back
            for name in names:
                queries.pop(name, None)
            raise QueryError(f"query id {first_repeated(names)} is given twice")
        if block.context.bound.self_join:
            self.need_roles(block.context.bound.roles)
        rows_of.kids = np.array([self._key_number(key) for key in block.keys], np.int32)
        kids = rows_of.kids.tolist()
        self._order += m
        self._blocks.append(rows_of)
        self._block_rows += rows_of.n_rows
        for kid in kids:
            self._key_uses[kid] += m
        self.version += 1
        return True

    def _add_uniform(self, queries: list[CompiledQuery], since_ts: float | Fraction) -> bool:
        """Queries of one template (one context, one conjunction of the same list keys,
        numeric constants: a pattern's instances) registered column-wise; False (nothing
        done) for any other list."""
        if len(queries) < 2:
            return False
        first = queries[0]
        if len(first.disjuncts) != 1 or first.disjuncts[0][1] or not first.disjuncts[0][0].keys:
            return False
        context, keys = first.context, first.disjuncts[0][0].keys
        for q in queries:
            d = q.disjuncts
            if q.context is not context or len(d) != 1 or d[0][0].keys is not keys or type(d[0][0].values) is not array:
                return False
        names = [q.name for q in queries]
        if not self.queries.keys().isdisjoint(names) or len(set(names)) != len(names):
            return False  # the usual loop names the duplicate
        kids = [self._key_number(key) for key in keys]
        if not self._object_keys.isdisjoint(kids):
            return False
        if context.bound.self_join:
            self.need_roles(context.bound.roles)
        m, width = len(queries), len(keys)
        start = self._order
        self._order += m
        self.queries.entries.update(
            zip(names, map(RegisteredCompiled, queries, repeat(since_ts), range(start, start + m)), strict=False)
        )
        self._row_query.frombytes(np.repeat(np.arange(start, start + m, dtype=np.int64), width).tobytes())
        self._row_disjunct.frombytes(np.zeros(m * width, np.int16).tobytes())
        self._row_key.frombytes(np.tile(np.array(kids, np.int32), m).tobytes())
        self._row_value.frombytes(b"".join([q.disjuncts[0][0].values for q in queries]))
        for kid in kids:
            self._key_uses[kid] += m
        self.version += 1
        return True

    def _key_number(self, key: ListKey) -> int:
        kid = self._key_id.get(key)
        if kid is None:
            kid = self._key_id[key] = self._kid_by_id[id(key)] = len(self._keys)
            self._keys.append(key)
            self._key_uses.append(0)
            if key.family != "number":
                self._object_keys.add(kid)
        return kid

    def remove(self, name: str) -> RegisteredQuery:
        """Unregister a query; drops the lists nobody else uses. Its rows stay in the
        columns, marked dead by its order, until a compaction (amortized O(1))."""
        rq = self.queries.pop(name)
        self._dead.add(rq.order)
        self._removals.append(rq.order)
        uses, by_id = self._key_uses, self._kid_by_id
        for preds, _ in rq.compiled.disjuncts:
            kids = list(map(by_id.get, map(id, preds.keys)))
            if None in kids:  # (a key object other than the list's own: by its hash)
                kids = list(map(self._key_id.__getitem__, preds.keys))
            self._dead_rows += len(kids)
            for kid in kids:
                uses[kid] -= 1
                if not uses[kid]:
                    key = self._keys[kid]
                    del self._key_id[key], by_id[id(key)]
                    self._keys[kid] = None
        if self._dead_rows > _COMPACT_WHEN_DEAD * max(len(self._row_key) + self._block_rows, 1):
            self._compact()
        self.version += 1
        return rq

    @property
    def removal_mark(self) -> int:
        """How many queries were removed so far."""
        return self._removals_before + len(self._removals)

    def removed_since(self, mark: int) -> list[int]:
        """Orders of the queries removed after ``mark`` (a :attr:`removal_mark`)."""
        if mark < self._removals_before:
            raise ValueError("the removals before this mark are forgotten")
        return self._removals[mark - self._removals_before :]

    def forget_removals(self, mark: int) -> None:
        """No plan reads the removals before ``mark`` any more."""
        drop = mark - self._removals_before
        if drop > 0:
            del self._removals[:drop]
            self._removals_before = mark

    def newest(self, after_order: int) -> list[RegisteredQuery]:
        """The queries registered after the one numbered ``after_order``, in order."""
        return self.queries.newest(after_order)

    @staticmethod
    def _row_record(name: str, b: BlockRows) -> RegisteredRow:
        """The record of block ``b``'s row named ``name``, made now (its order is the
        block's first plus its row: removals drop a block's orders and rows alike)."""
        row = b.row_of(name)
        return RegisteredRow(name, b.block, row, b.since_ts, b.first_order + row)

    def records(self) -> RecordList:
        """The registered queries in registration order, a table's rows as runs of
        their block (no object made per row: what a plan keeps)."""
        runs: list[Run] = []
        blocks = [(b, self._live(b.orders)) for b in self._blocks]
        entries = self.queries.entries
        if len(blocks) == 1 and len(entries) == len(blocks[0][0].names) and blocks[0][1].all():
            # one table's rows and nothing else: named by the block's own list (the
            # plan keeps it, not a copy of a million names)
            b, live = blocks[0]
            return RecordList([b.run(live, b.names, 0)], b.names)
        names = list(entries)
        if sum(int(live.sum()) for _, live in blocks) == len(names):  # only tables' rows
            at = 0
            for b, live in blocks:
                run = b.run(live, names, at)
                runs.append(run)
                at += len(run)
            return RecordList(runs, names)
        # objects and blocks interleaved: one pass over the entries, a block's rows skipped
        live_of = {id(b): live for b, live in blocks}
        objects: list[RegisteredQuery] = []
        values = list(entries.values())
        i = 0
        while i < len(values):
            entry = values[i]
            if type(entry) is not BlockRows:
                objects.append(entry)  # type: ignore[arg-type]
                i += 1
                continue
            if objects:
                runs.append(objects)
                objects = []
            run = entry.run(live_of[id(entry)], names, i)
            runs.append(run)
            i += len(run)
        if objects:
            runs.append(objects)
        return RecordList(runs, names)

    def _compact(self) -> None:
        """Drop the rows of unregistered queries (amortized O(1) per removal)."""
        dead = np.fromiter(self._dead, np.int64, len(self._dead))
        keep = ~np.isin(np.frombuffer(self._row_query, np.int64), dead) if len(self._row_query) else np.ones(0, bool)
        objects = {}
        new_index = np.cumsum(keep) - 1
        for row, value in self._row_objects.items():
            if keep[row]:
                objects[int(new_index[row])] = value
        for name in ("_row_query", "_row_disjunct", "_row_key", "_row_value"):
            column = getattr(self, name)
            kept = np.frombuffer(column, dtype=column.typecode if column.typecode != "h" else "int16")[keep]
            setattr(self, name, array(column.typecode, kept.tobytes()))
        before = np.concatenate(([0], np.cumsum(keep)))  # kept columns' rows before each row
        blocks = []
        for b in self._blocks:
            b.at = int(before[b.at])
            b.drop(dead)
            if b.n_queries:
                blocks.append(b)
        self._blocks = blocks
        self._block_rows = sum(b.n_rows for b in blocks)
        self._row_objects = objects
        self._dead = set()
        self._dead_rows = 0

    def column_rows(self) -> dict[str, Any]:
        """The live predicate rows of queries registered one by one, as arrays: ``order``
        (query), ``disjunct``, ``key`` (list key id), ``value`` (numeric constant),
        ``objects`` (other constants by row number) and ``live``, in registration order;
        the tables' rows are :meth:`block_parts`."""
        order, disjunct, key, value = self._columns()
        live = self._live(order)
        return {
            "order": order,
            "disjunct": disjunct,
            "key": key,
            "value": value,
            "objects": self._row_objects,
            "live": live,
        }

    def block_parts(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The tables' live rows, per block as it is kept: (its live queries' orders,
        its list ids, its constants as a [queries, list ids] array). A list's constants
        are a column of it, so the compiler takes them without making a row each
        (20 million rows at a million queries of 20 predicates)."""
        parts = []
        for b in self._blocks:
            table = np.frombuffer(b.block.values, np.float64).reshape(-1, len(b.kids))
            values = table if b.block_rows is None else table[b.block_rows]
            live = self._live(b.orders)
            if live.all():  # (the orders as kept: no copy of a million of them)
                parts.append((b.orders, b.kids, values))
                continue
            parts.append((b.orders[live], b.kids, values[live]))
        return parts

    def _columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        order = np.frombuffer(self._row_query, np.int64) if len(self._row_query) else np.zeros(0, np.int64)
        disjunct = np.frombuffer(self._row_disjunct, np.int16) if len(self._row_disjunct) else np.zeros(0, np.int16)
        key = np.frombuffer(self._row_key, np.int32) if len(self._row_key) else np.zeros(0, np.int32)
        value = np.frombuffer(self._row_value, np.float64) if len(self._row_value) else np.zeros(0, np.float64)
        return order, disjunct, key, value

    def _live(self, orders: np.ndarray) -> np.ndarray:
        """Which of the rows or queries numbered ``orders`` are still registered."""
        if not self._dead:
            return np.ones(len(orders), bool)
        return ~np.isin(orders, np.fromiter(self._dead, np.int64, len(self._dead)))

    @property
    def key_ids(self) -> int:
        """How many list ids were handed out (ids of dropped lists are not reused)."""
        return len(self._keys)

    def key_id(self, key: ListKey) -> int:
        return self._key_id[key]

    def lists(self, kind: Kind | None = None) -> list[ListKey]:
        """Live list keys in the order they were first needed."""
        return [k for k in self._keys if k is not None and (kind is None or k.kind is kind)]

    def max_window(self) -> float:
        """The largest MAXWINDOW of the registered multi-stream queries (0 if none)."""
        return max((rq.maxwindow for rq in self.queries.values() if rq.is_multi_stream), default=0.0)

    def distinct_predicates(self) -> int:
        return len({(key, value) for rq in self for _, key, value in rq.predicates()})

    def predicate_occurrences(self) -> int:
        return sum(self._key_uses)

    def sharing_ratio(self) -> float:
        """Predicate occurrences over distinct predicates (1.0 = nothing shared)."""
        distinct = self.distinct_predicates()
        return self.predicate_occurrences() / distinct if distinct else 1.0

    def _check(self) -> None:
        counts: dict[ListKey, int] = {}
        for rq in self:
            for _, key, _ in rq.predicates():
                counts[key] = counts.get(key, 0) + 1
        live = {k: self._key_uses[i] for k, i in self._key_id.items()}
        assert counts == live, "list use counts out of step with the queries"
        assert self._kid_by_id == {id(k): i for i, k in enumerate(self._keys) if k is not None}, (
            "the lists' ids by key identity out of step with the lists"
        )
        assert all(live.values()), "an unused list is kept"
        # the live rows (the registry's columns and its tables' blocks, as the compiler
        # reads them) are the queries' predicates, in registration order
        columns, keys = self.column_rows(), self._keys
        objects, value = columns["objects"], columns["value"]
        got = [
            (
                int(columns["order"][r]),
                int(columns["disjunct"][r]),
                keys[columns["key"][r]],
                objects.get(r, float(value[r])),
            )
            for r in np.flatnonzero(columns["live"]).tolist()
        ]
        for orders, kids, values in self.block_parts():
            assert values.shape == (len(orders), len(kids)), "a block's constants of the wrong shape"
            got += [
                (order, 0, keys[kid], constant)
                for order, row in zip(orders.tolist(), values.tolist(), strict=True)
                for kid, constant in zip(kids.tolist(), row, strict=True)
            ]
        got.sort(key=lambda row: row[0])  # (stable: a query's predicates keep their order)
        assert len(got) == sum(counts.values()), "predicate rows out of step with the queries"
        want = [(rq.order, d, key, value) for rq in self for d, key, value in rq.predicates()]
        assert got == want, "predicate rows differ from the queries' predicates"
