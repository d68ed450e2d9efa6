"""Registered queries as a user sees them, kept as columns where a table made them.

A query registered from its own text is a :class:`RegisteredCompiled` object. The rows
of a table's block (``register_table``, or many texts of one template) are not: the
registry keeps each row's name pointing at its block's :class:`BlockRows`
(:class:`RegisteredQueries`), and the block's rows as arrays (which orders, which rows
of the block, one horizon) beside its names in row order, so a million rows cost a
dict entry each and no object (not even an int: a row's order is its block's first
plus the row's place among the block's names, found by a name-to-place dict the block
makes when first asked, which a registration and a match never do). A
:class:`RegisteredRow` is made when one is asked for (``registry.queries[name]``,
iterating the registry), and gives the same answers a kept object did.

A compiled plan keeps its queries as a :class:`RecordList`: runs of objects and runs of
a block's rows, in registration order; a record is made on first look and kept for
the plan's life (a slot's query is one object while the plan runs).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from itertools import accumulate
from typing import Any, overload

import numpy as np

from predicates import ListKey
from predicates.numbers import to_float
from predicates.records import CompiledQuery, Context, Disjunct, RowBlock, RowQuery


class RegisteredQuery:
    """A registered query and when it joined: a :class:`RegisteredCompiled` (a compiled
    query of its own) or a :class:`RegisteredRow` (a row of a table's block).

    ``since_ts`` is the matcher's retention horizon at registration: tuples older than
    it may already have been purged, so results of this query never include them
    (docs/ARCHITECTURE.md, Semantics).
    """

    __slots__ = ("order", "since_ts")

    # each kind gives these (an attribute or a property)
    name: str
    compiled: CompiledQuery
    context: Context
    exact_maxwindow: float | Fraction | None  # MAXWINDOW as written (None without one)

    @property
    def streams(self) -> tuple[str, ...]:
        return self.context.streams

    @property
    def aliases(self) -> tuple[tuple[str, str], ...]:
        return self.context.aliases

    @property
    def maxwindow(self) -> float:
        """MAXWINDOW in seconds (the nearest double; 0 without one)."""
        return to_float(self.exact_maxwindow or 0.0)

    @property
    def is_multi_stream(self) -> bool:
        return self.context.multi_stream

    @property
    def disjuncts(self) -> tuple[Disjunct, ...]:
        return self.compiled.disjuncts

    @property
    def text(self) -> str:
        """A query text naming and reproducing this query (a ``Query ID:`` header first)."""
        return self.compiled.text

    def predicates(self) -> Iterator[tuple[int, ListKey, Any]]:
        """(disjunct, list key, constant) of every indexed predicate."""
        for d, (preds, _) in enumerate(self.compiled.disjuncts):
            for key, value in preds:
                yield d, key, value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, since_ts={self.since_ts})"


class RegisteredCompiled(RegisteredQuery):
    """A query registered as its compiled record (from a text, or a table row that is
    not part of a block)."""

    __slots__ = ("compiled",)

    def __init__(self, compiled: CompiledQuery, since_ts: float | Fraction, order: int) -> None:
        self.compiled = compiled
        self.since_ts = since_ts
        self.order = order

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.compiled.name

    @property
    def context(self) -> Context:  # type: ignore[override]
        return self.compiled.context

    @property
    def exact_maxwindow(self) -> float | Fraction | None:  # type: ignore[override]
        return self.compiled.maxwindow


class RegisteredRow(RegisteredQuery):
    """A table row's registration (:class:`~predicates.records.RowQueries`): its
    constants are row ``row`` of ``block``. Made when asked for, from the registry's
    columns; the :class:`~predicates.records.RowQuery` is made when asked for too."""

    __slots__ = ("block", "name", "row")

    def __init__(self, name: str, block: RowBlock, row: int, since_ts: float | Fraction, order: int) -> None:
        self.name = name
        self.block = block
        self.row = row
        self.since_ts = since_ts
        self.order = order

    @property
    def compiled(self) -> RowQuery:  # type: ignore[override]
        return RowQuery(self.name, self.block, self.row)

    @property
    def context(self) -> Context:  # type: ignore[override]
        return self.block.context

    @property
    def exact_maxwindow(self) -> float | Fraction | None:  # type: ignore[override]
        return self.block.maxwindow


class BlockRun:
    """Live rows of one table block registered together, as arrays: query ``k`` of the
    run is number ``orders[k]``, reads block row ``rows[k]`` (``k`` itself while
    ``rows`` is None) and is named ``names[names_at + k]``."""

    __slots__ = ("block", "names", "names_at", "orders", "rows", "since_ts")

    def __init__(
        self,
        block: RowBlock,
        orders: np.ndarray,
        rows: np.ndarray | None,
        since_ts: float | Fraction,
        names: Sequence[str],
        names_at: int,
    ) -> None:
        self.block, self.orders, self.rows, self.since_ts = block, orders, rows, since_ts
        self.names, self.names_at = names, names_at

    def __len__(self) -> int:
        return len(self.orders)

    def block_rows(self) -> np.ndarray:
        return np.arange(len(self.orders), dtype=np.int64) if self.rows is None else self.rows

    def record(self, k: int) -> RegisteredRow:
        row = k if self.rows is None else int(self.rows[k])
        return RegisteredRow(self.names[self.names_at + k], self.block, row, self.since_ts, int(self.orders[k]))


class BlockRows:
    """The predicate rows of table queries registered together, kept as their block:
    live query ``k`` is number ``orders[k]`` and block row ``block_rows[k]`` (all the
    block's rows in order while None: none removed yet); ``at``: how many column rows
    precede them. ``names``: every row's name as registered, row after row, so that
    block row ``r`` is named ``names[r]`` and numbered ``first_order + r`` (removals
    drop orders and rows alike, never a name)."""

    __slots__ = ("_place", "at", "block", "block_rows", "first_order", "kids", "names", "orders", "since_ts")

    def __init__(
        self,
        at: int,
        block: RowBlock,
        first_order: int,
        kids: np.ndarray,
        since_ts: float | Fraction,
        names: list[str],
    ) -> None:
        self.at = at
        self.block = block
        self.block_rows: np.ndarray | None = None
        self.kids = kids
        self.first_order = first_order
        self.since_ts = since_ts
        m = len(block.values) // block.width
        if len(names) != m:
            raise ValueError(f"{len(names)} names for {m} rows")
        self.names = names
        self.orders = np.arange(first_order, first_order + m, dtype=np.int64)
        self._place: dict[str, int] | None = None

    @property
    def last_order(self) -> int:
        """The number of the block's last row as registered (removed or not)."""
        return self.first_order + len(self.names) - 1

    def row_of(self, name: str) -> int:
        """The block row named ``name`` (one of the block's names)."""
        if self._place is None:  # (made on the first look up by name: a dict of every row)
            self._place = dict(zip(self.names, range(len(self.names)), strict=True))
        return self._place[name]

    @property
    def n_queries(self) -> int:
        return len(self.orders)

    @property
    def n_rows(self) -> int:
        return len(self.orders) * len(self.kids)

    def block_rows_all(self) -> np.ndarray:
        """The block row of each query."""
        return self.block_rows if self.block_rows is not None else np.arange(len(self.orders), dtype=np.int64)

    def drop(self, dead: np.ndarray) -> None:
        """Forget the queries numbered in ``dead``."""
        keep = ~np.isin(self.orders, dead)
        if keep.all():
            return
        self.block_rows = self.block_rows_all()[keep]
        self.orders = self.orders[keep]

    def run(self, live: np.ndarray, names: list[str], at: int) -> BlockRun:
        """The live rows (``live``: of each query) as a run whose first query is named ``names[at]``."""
        if live.all():
            return BlockRun(self.block, self.orders, self.block_rows, self.since_ts, names, at)
        return BlockRun(self.block, self.orders[live], self.block_rows_all()[live], self.since_ts, names, at)


Run = list[RegisteredQuery] | BlockRun


class RecordList(Sequence[RegisteredQuery]):
    """The registered queries in registration order, as runs (a list of query objects,
    or a :class:`BlockRun`); a block row's record is made on first look and kept."""

    def __init__(self, runs: list[Run], names: list[str] | None = None) -> None:
        self.runs = [run for run in runs if len(run)]
        self.starts = [0, *accumulate(len(run) for run in self.runs)]
        self._made: dict[int, RegisteredQuery] = {}
        # the records' names in order where the registry listed them (its block runs
        # read theirs from it): the plan keeps this list, not a second one
        self.names = names

    def __len__(self) -> int:
        return self.starts[-1]

    @overload
    def __getitem__(self, i: int) -> RegisteredQuery: ...
    @overload
    def __getitem__(self, i: slice) -> list[RegisteredQuery]: ...
    def __getitem__(self, i: int | slice) -> RegisteredQuery | list[RegisteredQuery]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        made = self._made.get(i)
        if made is None:
            r = bisect_right(self.starts, i) - 1
            run = self.runs[r]
            if isinstance(run, BlockRun):
                made = self._made[i] = run.record(i - self.starts[r])
            else:
                made = run[i - self.starts[r]]
        return made

    def __iter__(self) -> Iterator[RegisteredQuery]:
        for r, run in enumerate(self.runs):
            if isinstance(run, BlockRun):
                start = self.starts[r]
                yield from (self[start + k] if start + k in self._made else run.record(k) for k in range(len(run)))
            else:
                yield from run

    def named_contexts(self) -> Iterator[tuple[Context, Sequence[str]]]:
        """The records' contexts in order, each with the names of a stretch of records
        of that context: a block run's names at once (no record made), one name per
        query object. O(runs + objects)."""
        for run in self.runs:
            if isinstance(run, BlockRun):
                yield run.block.context, run.names[run.names_at : run.names_at + len(run)]
            else:
                yield from ((rq.context, (rq.name,)) for rq in run)

    def __add__(self, other: Iterable[RegisteredQuery]) -> RecordList:  # type: ignore[override]
        """These records and ``other``'s after them (the runs are shared, not copied)."""
        out = RecordList([*self.runs, list(other)])
        out._made = self._made  # (the same records keep the same objects)
        return out

    def disjuncts_of(self, i: int) -> tuple[Disjunct, ...]:
        """Record ``i``'s disjuncts; a block row's without making its record (only the
        residuals are read where a block has them: its constants are the block's)."""
        r = bisect_right(self.starts, i) - 1
        run = self.runs[r]
        if isinstance(run, BlockRun):
            return self[i].disjuncts
        return run[i - self.starts[r]].disjuncts


class RegisteredQueries(Mapping[str, RegisteredQuery]):
    """The registry's queries by name, in registration order: an object per query
    registered on its own, and its block's :class:`BlockRows` for a table's row, made
    into a :class:`RegisteredRow` by ``make(name, block rows)`` when looked up."""

    __slots__ = ("entries", "make")

    def __init__(self, make: Callable[[str, BlockRows], RegisteredRow]) -> None:
        self.entries: dict[str, RegisteredQuery | BlockRows] = {}
        self.make = make

    def __getitem__(self, name: str) -> RegisteredQuery:
        entry = self.entries[name]
        return self.make(name, entry) if type(entry) is BlockRows else entry  # type: ignore[return-value]

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __reversed__(self) -> Iterator[str]:
        return reversed(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def keys(self) -> Any:
        return self.entries.keys()  # (a dict's view: isdisjoint over a million names in C)

    def values(self) -> Any:
        make = self.make
        return (make(name, e) if type(e) is BlockRows else e for name, e in self.entries.items())  # type: ignore[arg-type]

    def items(self) -> Any:
        return ((name, self[name]) for name in self.entries)

    def __setitem__(self, name: str, query: RegisteredQuery) -> None:
        self.entries[name] = query

    def pop(self, name: str) -> RegisteredQuery:
        entry = self.entries[name]
        query = self.make(name, entry) if type(entry) is BlockRows else entry
        del self.entries[name]
        return query  # type: ignore[return-value]

    def newest(self, after_order: int) -> list[RegisteredQuery]:
        """The queries numbered after ``after_order``, in order (a block all of whose
        rows are numbered up to it ends the walk without a look up by name)."""
        found: list[RegisteredQuery] = []
        for name, entry in reversed(self.entries.items()):
            if type(entry) is BlockRows:
                if entry.last_order <= after_order:
                    break
                query: RegisteredQuery = self.make(name, entry)
            else:
                query = entry  # type: ignore[assignment]
            if query.order <= after_order:
                break
            found.append(query)
        found.reverse()
        return found
