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

from mqo.engine import ResultBlock
from mqo.plan import CompiledPlan
from mqo.result_encoding import (
    Layout,
    buffer_of,
    finite_columns,
    json_lines,
    query_layouts,
    result_schema,
    value_types,
    within_64_bits,
)
from mqo.results import MATCH_SETTERS, Match, ReadOnlyDict


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
        yield from self._lines(literal=True)[0].to_pylist()

    def json_text(self) -> str:
        """All of :meth:`json_lines` as one string (non-finite values as ``Infinity``
        and ``NaN``, as Python's json module writes them)."""
        return bytes(buffer_of(self._lines(literal=True)[0])).decode()

    def write_json(self, write: Callable[[bytes], object]) -> int:
        """:meth:`json_lines` as strict JSON, what a JSONL file gets (every non-finite
        value written as null), encoded as UTF-8 and given to ``write`` in runs of whole
        lines (a file's ``write``): no string of the whole batch is made. Returns how
        many non-finite values were written as null."""
        lines, replaced = self._lines(literal=False)
        if len(lines):
            write(buffer_of(lines))
        return replaced

    def _lines(self, *, literal: bool) -> tuple[pa.Array, int]:
        """The JSON lines of the result columns and how many non-finite values became
        null (none with ``literal``: they are written as ``Infinity``/``NaN``)."""
        types = self.plan.per_stream(-1, _plan_types)
        table, replaced = self.result_columns(types)
        layouts = self.layouts()
        if not literal:
            table, nonfinite = finite_columns(table, layouts)
            replaced += nonfinite
        return json_lines(table, layouts, ("ts", "ids"), literal=literal), replaced

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
        return self.result_columns(types)[0]

    def layouts(self) -> dict[str, Layout]:
        """Each query's :class:`~mqo.result_encoding.Layout` (what its JSON object holds)."""
        return self.plan.per_stream(-1, _plan_layouts)

    def result_columns(self, types: Mapping[str, pa.DataType] | None = None) -> tuple[pa.Table, int]:
        """:meth:`to_arrow`, and how many integer values past 64 bits were made NULL."""
        types = dict(types if types is not None else self.plan.per_stream(-1, _plan_types))
        plan = self.plan
        groups = list(self._groups())
        counts = np.fromiter((len(g[0]) for g in groups), np.int64, len(groups))
        slots = np.concatenate([g[0] for g in groups]) if groups else np.zeros(0, np.int64)
        group_of = np.repeat(np.arange(len(groups)), counts)
        stamps = np.repeat(np.fromiter((g[1] for g in groups), np.float64, len(groups)), counts)
        records = plan.slot_record[slots]
        named, which = np.unique(records, return_inverse=True)
        names = pa.array([plan.record_names[r] for r in named.tolist()], pa.string()).take(pa.array(which))

        contexts = plan.slot_context[slots]
        codes = plan.context_codes
        width = np.array([len(code.aliases) for code in codes], np.int64)
        offsets = np.zeros(len(slots) + 1, np.int64)
        np.cumsum(width[contexts], out=offsets[1:])
        n_streams = len(plan.streams)
        members = np.array([[-1 if r is None else r[1] for r in rows] for _, _, rows in groups], np.int64).reshape(
            len(groups), n_streams
        )
        key_code = np.zeros(int(offsets[-1]), np.int32)
        items = np.zeros(int(offsets[-1]), np.int64)
        aliases: list[str] = []
        columns = {name: np.full(len(slots), None, object) for name in types}
        for ctx in np.unique(contexts).tolist():
            code = codes[ctx]
            chosen = np.flatnonzero(contexts == ctx)
            for j, (s, alias) in enumerate(code.aliases.items()):
                at = offsets[chosen] + j
                key_code[at] = len(aliases)
                aliases.append(alias)
                items[at] = members[group_of[chosen], s]
            wanted = [(name, fn) for name, fn in code.outputs if name in columns]
            if not wanted:
                continue
            # one value per assignment, shared by every query of the context it satisfies
            assigned, back = np.unique(group_of[chosen], return_inverse=True)
            member_rows = [groups[g][2] for g in assigned.tolist()]
            for name, fn in wanted:
                values = np.empty(len(member_rows), object)
                values[:] = [fn(rows) for rows in member_rows]
                if types[name] == pa.string():
                    values[:] = [text_of(v) for v in values.tolist()]
                columns[name][chosen] = values[back]
        keys = pa.array(aliases, pa.string()).take(pa.array(key_code))
        ids = pa.MapArray.from_arrays(pa.array(offsets.astype(np.int32)), keys, pa.array(items))
        arrays = [names, pa.array(stamps, pa.float64()), ids]
        overflowed = 0
        for name, dtype in types.items():
            column = columns[name]
            if dtype == pa.int64():
                fitted, n = within_64_bits(column.tolist())
                overflowed += n
                column = np.array(fitted, object) if n else column
            arrays.append(pa.array(column, dtype))
        return pa.Table.from_arrays(arrays, schema=result_schema(types)), overflowed


def _plan_types(plan: CompiledPlan, _: int) -> dict[str, pa.DataType]:
    return value_types(plan.records)


def _plan_layouts(plan: CompiledPlan, _: int) -> dict[str, Layout]:
    return query_layouts(plan.records)


def text_of(value: Any) -> str | None:
    """A value in a string column that queries give different types to: what the
    value prints as (``repr`` of a float is its shortest decimal, so nothing rounds)."""
    return None if value is None else str(value)
