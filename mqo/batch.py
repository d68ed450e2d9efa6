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

import gc
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import pairwise, repeat
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa

from mqo.arrow_build import array_of, numpy_array
from mqo.memory import no_cyclic_gc
from mqo.plan import CompiledPlan, ContextCode
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
from predicates.ast import Arith, BoolLit, ColumnRef, Expr, Negate, Number, StringLit

_new = object.__new__
_first, _second = itemgetter(0), itemgetter(1)


def _run(calls: Iterable[object]) -> None:
    """Exhaust an iterator of calls (``map``) for their effect, keeping nothing."""
    deque(calls, maxlen=0)


def _shared_outputs(code: ContextCode, rows: list[Any]) -> tuple[ReadOnlyDict, ReadOnlyDict]:
    """A context's ids and SELECT values for an assignment's member rows."""
    ids = ReadOnlyDict({alias: rows[s][1] for s, alias in code.aliases.items()})
    return ids, ReadOnlyDict({name: fn(rows) for name, fn in code.outputs})


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
        """The results as :class:`~mqo.results.Match` objects, in order. O(results), and
        a join's pushed tuple can find thousands: the per-result work is ``map`` over
        C-level calls (no Python loop body per result). Making more objects than the
        cyclic collector's first threshold, it pauses the collector (the results hold no
        reference cycles; its scans of the new objects were about 40% of the time)."""
        if len(self) < gc.get_threshold()[0]:
            return self._made()
        with no_cyclic_gc():
            return self._made()

    def _made(self) -> list[Match]:
        plan = self.plan
        slot_record, slot_context, codes = plan.slot_record, plan.slot_context, plan.context_codes
        name_of = plan.record_names.__getitem__
        set_query, set_ts, set_ids, set_values = MATCH_SETTERS
        out: list[Match] = []
        for group, ts, rows in self._groups():
            k = len(group)
            contexts = slot_context[group].tolist()
            # the queries of one context share their aliases and SELECT code: an
            # assignment's ids and values are computed once per context and shared,
            # read-only, by its results
            distinct = set(contexts)
            if len(distinct) == 1:
                ids, values = _shared_outputs(codes[contexts[0]], rows)
                each_ids: Iterable[ReadOnlyDict] = repeat(ids, k)
                each_values: Iterable[ReadOnlyDict] = repeat(values, k)
            else:
                made = {c: _shared_outputs(codes[c], rows) for c in distinct}
                pairs = list(map(made.__getitem__, contexts))
                each_ids, each_values = map(_first, pairs), map(_second, pairs)
            made_now = list(map(_new, repeat(Match, k)))
            _run(map(set_query, made_now, map(name_of, slot_record[group].tolist())))
            _run(map(set_ts, made_now, repeat(ts, k)))
            _run(map(set_ids, made_now, each_ids))
            _run(map(set_values, made_now, each_values))
            out += made_now
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
        the queries of one code (:class:`SharedCode`: contexts with the same aliases and
        SELECT) is one row (ts, ids, values), computed once.

        The rows are found on arrays: each result's (assignment, code) is a number, a
        row per distinct number, a run per stretch of equal numbers. Python runs per
        row only to read its ids and SELECT values off the member rows (one list per
        code and value, not a call per result)."""
        types = dict(types if types is not None else self.plan.derived(_plan_types))
        plan = self.plan
        group_slots: list[np.ndarray] = []
        group_ts: list[float] = []
        group_rows: list[list[Any]] = []
        for slots, ts, rows in self._groups():
            group_slots.append(slots)
            group_ts.append(ts)
            group_rows.append(rows)
        sizes = np.fromiter(map(len, group_slots), np.int64, len(group_slots))
        slots = np.concatenate(group_slots).astype(np.int64, copy=False) if group_slots else np.zeros(0, np.int64)
        shared = plan.derived(SharedCode)
        code_of = shared.classes(plan, slots)
        n_codes = max(len(shared.codes), 1)
        # a result's row: its assignment (group) and code as one number, ascending within a group
        key = np.repeat(np.arange(len(group_slots), dtype=np.int64), sizes) * n_codes + code_of
        run_starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1]))) if len(key) else key
        distinct, first, back = np.unique(key, return_index=True, return_inverse=True)
        run_rows = back.reshape(-1)[run_starts]
        row_group, row_code = np.divmod(distinct, n_codes)
        # per code, its rows (ascending) and their groups' member rows
        by_code = np.argsort(row_code, kind="stable")
        bounds = np.searchsorted(row_code[by_code], np.arange(n_codes + 1))
        code_rows = {c: by_code[bounds[c] : bounds[c + 1]] for c in range(n_codes) if bounds[c + 1] > bounds[c]}
        widths = np.array([len(code.aliases) for code in shared.codes] or [0], np.int64)[row_code]
        offsets = np.zeros(len(distinct) + 1, np.int64)
        np.cumsum(widths, out=offsets[1:])
        id_items = np.empty(int(offsets[-1]), object)
        id_keys = np.empty(int(offsets[-1]), np.int64)
        alias_names: dict[str, int] = {}
        values = {name: np.full(len(distinct), None, object) for name in types}
        for c, rows_of_code in code_rows.items():
            code = shared.codes[c]
            members = [group_rows[g] for g in row_group[rows_of_code].tolist()]
            at = offsets[rows_of_code]
            for k, (s, alias) in enumerate(code.aliases.items()):
                id_keys[at + k] = alias_names.setdefault(alias, len(alias_names))
                id_items[at + k] = [rows[s][1] for rows in members]
            for name, fn in code.outputs:
                if name in values:
                    values[name][rows_of_code] = [fn(rows) for rows in members]
        names = plan.derived(_plan_names)
        columns = ResultColumns(
            pa.table({}), slots, run_starts.astype(np.int64), run_rows.astype(np.int64), names, plan.slot_record, 0
        )
        keys = array_of(list(alias_names), pa.string()).take(numpy_array(id_keys))
        ids = pa.MapArray.from_arrays(
            numpy_array(offsets.astype(np.int32)), keys, array_of(id_items.tolist(), pa.int64())
        )
        arrays = [
            names.take(numpy_array(plan.slot_record[slots[first]].astype(np.int64))),
            numpy_array(np.asarray(group_ts, np.float64)[row_group]),
            ids,
        ]
        overflowed = 0
        for name, dtype in types.items():
            column = values[name].tolist()
            if dtype == pa.string():
                column = [text_of(v) for v in column]
            elif dtype == pa.int64():
                fitted, n = within_64_bits(column)
                if n:  # a value made NULL counts once per result reading it
                    wide = [k for k, v in enumerate(column) if v is not None and fitted[k] is None]
                    overflowed += int(columns.uses(len(distinct))[wide].sum())
                    column = fitted
            arrays.append(array_of(column, dtype))
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


class SharedCode:
    """The plan's query contexts grouped by what their results carry: contexts with the
    same aliases (stream numbers and names, in order) and the same SELECT list (names
    and expressions, read without their places in the text) give one assignment of
    tuples the same ids and values, so their results share one row of
    :class:`ResultColumns` (a query file makes a context per query: a thousand variants
    of one SELECT are one code). ``codes[k]``: code ``k``'s :class:`ContextCode`.
    Contexts are looked at as their first results come (made once per plan)."""

    def __init__(self, plan: CompiledPlan) -> None:
        self.codes: list[ContextCode] = []
        self._of_context = np.full(len(plan.context_codes), -1, np.int64)
        self._by_key: dict[Any, int] = {}

    def classes(self, plan: CompiledPlan, slots: np.ndarray) -> np.ndarray:
        """The code of each slot of ``slots``."""
        contexts = plan.slot_context[slots].astype(np.int64)
        if len(contexts) and int(contexts.max()) >= len(self._of_context):  # (a plan's contexts only grow)
            grown = np.full(len(plan.context_codes), -1, np.int64)
            grown[: len(self._of_context)] = self._of_context
            self._of_context = grown
        found = self._of_context[contexts]
        new = np.flatnonzero(found < 0)
        if not len(new):
            return found
        unseen, first = np.unique(contexts[new], return_index=True)
        for c, slot in zip(unseen.tolist(), slots[new[first]].tolist(), strict=True):
            code = plan.context_codes[c]
            context = plan.records[int(plan.slot_record[slot])].context
            outputs = context.bound.outputs
            if [out.name for out in outputs] != [name for name, _ in code.outputs]:
                key: Any = ("context", c)  # (not the code it was made from: shared with none)
            else:
                key = (tuple(code.aliases.items()), tuple((out.name, _expression_key(out.expr)) for out in outputs))
            number = self._by_key.get(key)
            if number is None:
                number = self._by_key[key] = len(self.codes)
                self.codes.append(code)
            self._of_context[c] = number
        return self._of_context[contexts]


def _expression_key(expr: Expr) -> Any:
    """What :func:`mqo.expressions.compile_value` reads of a SELECT expression (not its
    place in the text): equal keys compute equal values."""
    if isinstance(expr, ColumnRef):
        return ("column", expr.stream, expr.name, expr.ctype)
    if isinstance(expr, Number):
        return ("number", type(expr.value), expr.value)
    if isinstance(expr, (StringLit, BoolLit)):
        return (type(expr).__name__, type(expr.value), expr.value)
    if isinstance(expr, Negate):
        return ("negate", _expression_key(expr.operand))
    if isinstance(expr, Arith):
        return ("arith", expr.op, _expression_key(expr.left), _expression_key(expr.right))
    return ("expression", id(expr))  # (another kind: equal to itself only)


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
