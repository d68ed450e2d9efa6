"""The results of a batch, as the engine found them, and as result columns.

A :class:`MatchBatch` holds blocks (one assignment of tuples and the set of queries
it satisfies) from the join engine, and arrays of (row, slot) pairs from the
single-stream kernels. So a million matches need not become a million Python objects:
``len`` counts them, :meth:`MatchBatch.to_arrow` builds the result columns (the one
schema of :func:`mqo.result_encoding.result_schema`), the JSON methods format those
columns (:mod:`mqo.result_encoding`), and ``matches()`` gives
:class:`~mqo.results.Match` objects when wanted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa

from mqo.arrow_build import array_of, numpy_array
from mqo.plan import CompiledPlan
from mqo.result_encoding import (
    Layout,
    csv_heads,
    csv_lines,
    finite_columns,
    json_lines,
    query_heads,
    query_layouts,
    result_schema,
    shared_lines,
    value_types,
    within_64_bits,
)
from mqo.results import MATCH_SETTERS, Match, ReadOnlyDict, ResultBlock


@dataclass
class SingleResults:
    """Single-stream results of one batch: ``slots[k]`` matched row ``rows[k]``."""

    stream: int
    rows: list[tuple[Any, ...]]
    row_of: np.ndarray
    slots: np.ndarray

    def __len__(self) -> int:
        return len(self.slots)


@dataclass
class MatchBatch:
    """Results of a batch (see the module docstring)."""

    plan: CompiledPlan
    blocks: list[ResultBlock] = field(default_factory=list)
    singles: list[SingleResults] = field(default_factory=list)

    def __len__(self) -> int:
        return sum(len(b) for b in self.blocks) + sum(len(s) for s in self.singles)

    def __iter__(self) -> Iterator[Match]:
        return iter(self.matches())

    def _groups(self) -> Iterator[tuple[np.ndarray, float, list[Any]]]:
        """(slots, ts, member rows by stream): results sharing one assignment."""
        n = len(self.plan.streams)
        for single in self.singles:
            bounds = np.flatnonzero(np.diff(single.row_of, prepend=-1, append=-1) != 0)
            for a, b in pairwise(bounds.tolist()):
                row = single.rows[int(single.row_of[a])]
                rows: list[Any] = [None] * n
                rows[single.stream] = row
                yield single.slots[a:b], row[0], rows
        for block in self.blocks:
            rows = [m.row if m is not None else None for m in block.tuples]
            yield block.numbers(), block.ts, rows

    def _entries(self) -> Iterator[tuple[int, float, list[Any]]]:
        """(slot, ts, member rows by stream) of every result."""
        for slots, ts, rows in self._groups():
            for q in slots.tolist():
                yield q, ts, rows

    def matches(self) -> list[Match]:
        plan = self.plan
        codes = plan.context_codes
        slot_record, slot_context = plan.slot_record, plan.slot_context
        out: list[Match] = []
        # the loop below runs once per result: kept lean (Match objects made by setting
        # their slots, see mqo.results.MATCH_SETTERS)
        append, new = out.append, object.__new__
        set_query, set_ts, set_ids, set_values = MATCH_SETTERS
        names = plan.record_names
        for group, ts, rows in self._groups():
            # the queries of one context share their aliases and SELECT code: an
            # assignment's ids and values are computed once per context and shared,
            # read-only, by its results
            made: dict[int, tuple[dict[str, int], dict[str, Any]]] = {}
            for r, c in zip(slot_record[group].tolist(), slot_context[group].tolist(), strict=True):
                shared = made.get(c)
                if shared is None:
                    code = codes[c]
                    ids = ReadOnlyDict({alias: rows[s][1] for s, alias in code.aliases.items()})
                    shared = made[c] = (ids, ReadOnlyDict({name: fn(rows) for name, fn in code.outputs}))
                match = new(Match)
                set_query(match, names[r])
                set_ts(match, ts)
                set_ids(match, shared[0])
                set_values(match, shared[1])
                append(match)
        return out

    def to_pylist(self) -> list[dict[str, Any]]:
        return [m.as_dict() for m in self.matches()]

    def json_lines(self) -> Iterator[str]:
        """One newline-terminated JSON object per result, in the order of :meth:`matches`
        (non-finite values as :meth:`json_text` writes them)."""
        for chunk in self._json_chunks(literal=True)[0]:
            # JSON escapes newlines inside strings, so every "\n" ends a result
            for line in chunk[:-1].decode().split("\n"):
                yield line + "\n"

    def json_text(self) -> str:
        """All of :meth:`json_lines` as one string (non-finite values as ``Infinity``
        and ``NaN``, as Python's json module writes them)."""
        return b"".join(self._json_chunks(literal=True)[0]).decode()

    def write_json(self, write: Callable[[bytes], object]) -> int:
        """:meth:`json_lines` as strict JSON, what a JSONL file gets (every non-finite
        value written as null), encoded as UTF-8 and given to ``write`` in runs of whole
        lines (a file's ``write``): no string of the whole batch is made. Returns how
        many non-finite values were written as null."""
        chunks, replaced = self._json_chunks(literal=False)
        for chunk in chunks:
            write(chunk)
        return replaced

    def _json_chunks(self, *, literal: bool) -> tuple[Iterator[bytes], int]:
        """Runs of whole JSON lines, UTF-8 encoded, and how many non-finite values
        became null (none with ``literal``: they are written as ``Infinity``/``NaN``).
        What the results of one assignment share (ts, ids, values) is formatted once
        per query context (:class:`ResultColumns`), then put after each query's id."""
        types = self.plan.derived(_plan_types)
        columns = self.result_columns(types)
        distinct, replaced = columns.distinct, columns.overflowed
        layouts = self.layouts()
        if not literal:
            distinct, nonfinite = finite_columns(distinct, layouts, uses=columns.uses())
            replaced += nonfinite
        tails = json_lines(distinct, layouts, ("ts", "ids"), literal=literal, heads=False)
        heads = self.plan.derived(_plan_heads)
        return shared_lines(tails, columns.slots, columns.run_starts, columns.run_rows, heads), replaced

    def write_csv(self, write: Callable[[bytes], object], types: Mapping[str, pa.DataType]) -> tuple[int, int]:
        """The results as CSV lines (no header: columns ``query``, ``ts``, ``ids`` and
        the value columns of ``types``), what :func:`mqo.result_encoding.csv_lines`
        writes for :meth:`to_arrow` with every non-finite value NULL, given to
        ``write`` in runs of whole lines. What the results of one assignment share is
        formatted once per query context, then put after each query's name (as JSON
        lines are). Returns (results, values made NULL: non-finite numbers and
        integers past 64 bits)."""
        columns = self.result_columns(types)
        distinct, nonfinite = finite_columns(columns.distinct, self.layouts(), uses=columns.uses())
        tails = csv_lines(distinct, distinct.schema.names[1:], lead=",")
        heads = self.plan.derived(_plan_csv_heads)
        for chunk in shared_lines(tails, columns.slots, columns.run_starts, columns.run_rows, heads):
            write(chunk)
        return len(columns.slots), columns.overflowed + nonfinite

    def to_arrow(self, types: Mapping[str, pa.DataType] | None = None) -> pa.Table:
        """The result columns: query string, ts double, ids map<string,int64>, then the
        SELECT values, one row per result in the order of :meth:`matches`.

        The value columns are those of ``types`` (name -> Arrow type), by default
        every SELECT name of the plan's queries as :func:`value_types` types them.
        Columns are built with numpy over all results at once; only the SELECT
        functions run per assignment (once per query context it satisfies), so the
        cost per result is a few array elements, not Python objects. An integer
        value past 64 bits (INTEGER arithmetic that overflows) is NULL.
        """
        return self.result_columns(types).table

    def layouts(self) -> dict[str, Layout]:
        """Each query's :class:`~mqo.result_encoding.Layout` (what its JSON object holds)."""
        return self.plan.derived(_plan_layouts)

    def result_columns(self, types: Mapping[str, pa.DataType] | None = None) -> ResultColumns:
        """The results as :class:`ResultColumns`: what one assignment of tuples gives
        the queries of one context (ts, ids, values) is one row, computed once."""
        types = dict(types if types is not None else self.plan.derived(_plan_types))
        plan = self.plan
        slot_context, slot_record = plan.slot_context, plan.slot_record
        codes = plan.context_codes
        one_context = len(codes) == 1
        slot_runs: list[np.ndarray] = []
        run_starts: list[int] = []
        run_rows: list[int] = []
        done = 0  # results so far
        stamps: list[float] = []
        firsts: list[int] = []  # a record of each entry's context (which layout its values follow)
        id_keys: list[str] = []
        id_items: list[int] = []
        widths: list[int] = []
        # per value name: the entries that have it, and their values
        entries: dict[str, list[int]] = {name: [] for name in types}
        values: dict[str, list[Any]] = {name: [] for name in types}
        # per assignment of tuples (a group of results), one entry per query context it
        # satisfies: the loop runs per entry, the results are arrays
        for slots, ts, rows in self._groups():
            contexts = slot_context[slots]
            if one_context or (contexts == contexts[0]).all():
                found, back = [int(contexts[0])], None
            else:
                unique, back = np.unique(contexts, return_inverse=True)
                found = unique.tolist()
            # runs of results reading one row: the group, or its pieces of one context
            if back is None:
                run_starts.append(done)
                run_rows.append(len(stamps))
            else:
                back = back.reshape(-1)
                cut = np.flatnonzero(np.concatenate(([True], back[1:] != back[:-1])))
                run_starts.extend((done + cut).tolist())
                run_rows.extend((len(stamps) + back[cut]).tolist())
            done += len(slots)
            slot_runs.append(slots)
            for k, ctx in enumerate(found):
                code = codes[ctx]
                first = 0 if back is None else int(np.argmax(back == k))
                firsts.append(int(slot_record[slots[first]]))
                stamps.append(ts)
                widths.append(len(code.aliases))
                for s, alias in code.aliases.items():
                    id_keys.append(alias)
                    id_items.append(rows[s][1])
                for name, fn in code.outputs:
                    if name in values:
                        entries[name].append(len(stamps) - 1)
                        values[name].append(fn(rows))
        slots = np.concatenate(slot_runs) if slot_runs else np.zeros(0, np.int64)
        offsets = np.zeros(len(widths) + 1, np.int32)
        np.cumsum(widths, out=offsets[1:])
        ids = pa.MapArray.from_arrays(
            numpy_array(offsets), array_of(id_keys, pa.string()), array_of(id_items, pa.int64())
        )
        names = plan.derived(_plan_names)
        columns = ResultColumns(
            pa.table({}), slots, np.array(run_starts, np.int64), np.array(run_rows, np.int64), names, slot_record, 0
        )
        arrays = [names.take(array_of(firsts, pa.int64())), array_of(stamps, pa.float64()), ids]
        overflowed = 0
        for name, dtype in types.items():
            column = np.full(len(stamps), None, object)
            column[entries[name]] = values[name]
            if dtype == pa.string():
                column[:] = [text_of(v) for v in column.tolist()]
            elif dtype == pa.int64():
                fitted, n = within_64_bits(column.tolist())
                if n:  # a value made NULL counts once per result reading it
                    wide = [k for k, v in enumerate(column.tolist()) if v is not None and fitted[k] is None]
                    overflowed += int(columns.uses(len(stamps))[wide].sum())
                    column[:] = fitted
            arrays.append(array_of(column.tolist(), dtype))
        columns.distinct = pa.Table.from_arrays(arrays, schema=result_schema(types))
        columns.overflowed = overflowed
        return columns


@dataclass
class ResultColumns:
    """A batch's result columns, held shared: ``distinct`` has the result columns'
    schema with one row per (assignment of tuples, query context) (its ``query`` is
    one of that context's); result ``k`` is of slot ``slots[k]`` (its query named
    ``names[slot_record[slots[k]]]``) and reads row ``shared[k]``; the results read
    their rows in runs: run ``j`` starts at result ``run_starts[j]`` and reads row
    ``run_rows[j]``. ``overflowed``: results' integer values past 64 bits made NULL."""

    distinct: pa.Table
    slots: np.ndarray
    run_starts: np.ndarray
    run_rows: np.ndarray
    names: pa.Array
    slot_record: np.ndarray
    overflowed: int

    @property
    def shared(self) -> np.ndarray:
        """Each result's row of ``distinct``."""
        return np.repeat(self.run_rows, np.diff(self.run_starts, append=len(self.slots)))

    @property
    def records(self) -> np.ndarray:
        """Each result's query, as a record number of the plan."""
        return self.slot_record[self.slots]

    @property
    def table(self) -> pa.Table:
        """One row per result (what a Parquet file holds)."""
        return self.expand(self.distinct)

    def expand(self, distinct: pa.Table) -> pa.Table:
        """One row per result of ``distinct`` (:attr:`distinct`, or it with values made
        NULL): each result's query, then its shared row's columns."""
        rows = numpy_array(self.shared)
        columns = [self.names.take(numpy_array(self.records)), *(c.take(rows) for c in distinct.columns[1:])]
        return pa.Table.from_arrays(columns, schema=distinct.schema)

    def uses(self, rows: int | None = None) -> np.ndarray:
        """How many results read each row of ``distinct`` (``rows`` of them)."""
        lengths = np.diff(self.run_starts, append=len(self.slots))
        n = self.distinct.num_rows if rows is None else rows
        return np.bincount(self.run_rows, weights=lengths, minlength=n).astype(np.int64)


def _plan_names(plan: CompiledPlan) -> pa.Array:
    return array_of(plan.record_names, pa.string())


def _plan_heads(plan: CompiledPlan) -> np.ndarray:
    """Each slot's ``{"query":<name>``, UTF-8 (taken by slot numbers at once)."""
    return query_heads(plan.record_names)[plan.slot_record]


def _plan_csv_heads(plan: CompiledPlan) -> np.ndarray:
    """Each slot's query name as a CSV field, UTF-8 (taken by slot numbers at once)."""
    return csv_heads(plan.record_names)[plan.slot_record]


def _plan_types(plan: CompiledPlan) -> dict[str, pa.DataType]:
    return value_types(plan.records)


def _plan_layouts(plan: CompiledPlan) -> dict[str, Layout]:
    return query_layouts(plan.records)


def text_of(value: Any) -> str | None:
    """A value in a string column that queries give different types to: what the
    value prints as (``repr`` of a float is its shortest decimal, so nothing rounds)."""
    return None if value is None else str(value)
