"""CQL's relation-to-stream operators on aggregate queries: ISTREAM, DSTREAM, RSTREAM.

An aggregate query's windows are a relation over time: at each closed window the
groups that hold data and pass HAVING, each with its output values. ``RSTREAM`` (the
default) reports that whole relation at every window, as the aggregator does without
this module. The other two report how it changed since the **previous window**:

* ``ISTREAM``: a group's row when the group is new (absent from the previous window's
  relation) or any output value differs from the previous window's (values compared
  as numbers; NULL equals NULL), with this window's bounds and values;
* ``DSTREAM``: a row per group present in the previous window and absent from this
  one, with the bounds of the window it is absent from (its end is the ts at which it
  went away) and the values it had in the previous window (its last values).

What "previous" means:

* **time windows** (``[RANGE d SLIDE s]``, ``[RANGE d]``, landmarks): window ``k`` ends
  at ``k*s``; its previous window is ``k - 1``, whether or not it held data (a window
  without data, or whose groups all fail HAVING, is the empty relation). So a group
  whose data stops is reported by DSTREAM at the first window without it, once, and a
  gap in time costs one row per group, not one per empty window. At the end of input
  (``flush``) every window after the last holding data is empty, so DSTREAM reports the
  last window's groups at the next window end; a landmark window keeps all its data,
  so it loses a group only by HAVING.
* **count windows** (``[ROWS n SLIDE m]``): windows are per group (rows of that group
  only), so a group's previous window is its own window ``k - 1``; a group is absent
  only when its window fails HAVING.
* a query registered while tuples flow has an empty relation before its first window;
  windows once emitted are final (a tuple that would change one is late: in no
  window), so nothing is taken back.

The state (the last closed window and the groups present in it with their values) is
per query, kept by :class:`Relation`, and part of snapshots as plain data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mqo.aggregation.results import AggregateChunk
from mqo.aggregation.slices import plain

STREAM_OPS = ("RSTREAM", "ISTREAM", "DSTREAM")


def same_values(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two rows' output values are equal as numbers (NULL equals NULL, and so do
    two NaNs, which would otherwise make an unchanged group look changed every window)."""
    return all(x == y or (x != x and y != y) for x, y in zip(a, b, strict=True))


@dataclass
class _Rows:
    """The rows a relation step puts out, in emission order."""

    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    keys: list[tuple[Any, ...]] = field(default_factory=list)
    values: list[tuple[Any, ...]] = field(default_factory=list)

    def add(self, start: float, end: float, key: tuple[Any, ...], values: tuple[Any, ...]) -> None:
        self.starts.append(start)
        self.ends.append(end)
        self.keys.append(key)
        self.values.append(values)

    def chunk(self, like: ChunkShape) -> AggregateChunk | None:
        if not self.ends:
            return None
        distinct = list(dict.fromkeys(self.keys))
        code_of = {key: c for c, key in enumerate(distinct)}
        columns = [list(column) for column in zip(*self.values, strict=True)] if like.names else []
        return AggregateChunk(
            like.query,
            like.position,
            np.array(self.starts, np.float64),
            np.array(self.ends, np.float64),
            like.group_by,
            distinct,
            np.array([code_of[key] for key in self.keys], np.int64),
            list(like.names),
            columns,
        )


@dataclass(frozen=True)
class ChunkShape:
    """What every chunk of a query has in common."""

    query: str
    position: int
    group_by: tuple[str, ...]
    names: list[str]


@dataclass
class Relation:
    """One ISTREAM or DSTREAM query's relation at its last closed window.

    ``last``: time windows, the number of the last closed window (None: none yet);
    ``present``: the groups in that relation (for count windows: the groups whose own
    last window passed HAVING) and their output values."""

    op: str
    last: int | None = None
    present: dict[tuple[Any, ...], tuple[Any, ...]] = field(default_factory=dict)

    def time_windows(
        self,
        rows: AggregateChunk | None,
        windows: np.ndarray,
        passed: np.ndarray,
        closed: int | None,
        bounds: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
        shape: ChunkShape,
    ) -> AggregateChunk | None:
        """The ISTREAM/DSTREAM rows of a query's newly closed time windows: ``rows`` every
        (window, group) holding data, ``windows`` their window numbers (ascending),
        ``passed`` whether each passes HAVING; ``closed`` the last window now closed
        (None: every later window is closed and empty, the end of input); ``bounds``
        the (start, end) of window numbers."""
        out = _Rows()
        if rows is not None and len(rows):
            keys, values = _keys_and_values(rows)
            cut = np.flatnonzero(np.diff(windows)) + 1
            for run in np.split(np.arange(len(windows)), cut):
                k = int(windows[run[0]])
                self._gap_before(k, bounds, out)
                current = {keys[r]: values[r] for r in run.tolist() if passed[r]}
                start, end = float(rows.starts[run[0]]), float(rows.ends[run[0]])
                self._step(start, end, current, out)
                self.last = k
        if closed is None or (self.last is not None and self.last < closed):
            self._gap_before(None, bounds, out)
        if closed is not None and (self.last is None or self.last < closed):
            self.last = closed
        return out.chunk(shape)

    def _gap_before(
        self, k: int | None, bounds: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], out: _Rows
    ) -> None:
        """Window ``last + 1`` is empty when the next window with data is later (``k``;
        None: none is coming): the groups present are gone there."""
        if not self.present or self.last is None or (k is not None and k <= self.last + 1):
            return
        starts, ends = bounds(np.array([self.last + 1], np.int64))
        self._step(float(starts[0]), float(ends[0]), {}, out)

    def _step(self, start: float, end: float, current: dict[tuple, tuple], out: _Rows) -> None:
        """From the relation ``present`` to ``current`` at window ``(start, end]``."""
        if self.op == "ISTREAM":
            for key, values in current.items():
                before = self.present.get(key)
                if before is None or not same_values(before, values):
                    out.add(start, end, key, values)
        else:
            for key, values in self.present.items():
                if key not in current:
                    out.add(start, end, key, values)
        self.present = current

    def count_windows(self, rows: AggregateChunk, passed: np.ndarray, shape: ChunkShape) -> AggregateChunk | None:
        """The ISTREAM/DSTREAM rows of complete count windows (``rows`` by end, each
        group's windows in order; ``passed``: whether each passes HAVING); a group's
        previous window is its own last one."""
        out = _Rows()
        keys, values = _keys_and_values(rows)
        starts, ends = rows.starts.tolist(), rows.ends.tolist()
        for r, ok in enumerate(passed.tolist()):
            key = keys[r]
            before = self.present.get(key)
            if ok:
                if self.op == "ISTREAM" and (before is None or not same_values(before, values[r])):
                    out.add(starts[r], ends[r], key, values[r])
                self.present[key] = values[r]
            elif before is not None:
                if self.op == "DSTREAM":
                    out.add(starts[r], ends[r], key, before)
                del self.present[key]
        return out.chunk(shape)

    # ------------------------------------------------------------- snapshots

    def state(self) -> dict[str, Any]:
        """Plain data (:mod:`mqo.aggregation.persist`)."""
        return {
            "op": self.op,
            "last": self.last,
            "present": [[[plain(v) for v in key], [plain(v) for v in values]] for key, values in self.present.items()],
        }

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> Relation:
        last = data["last"]
        return cls(
            str(data["op"]),
            None if last is None else int(last),
            {tuple(key): tuple(values) for key, values in data["present"]},
        )


def relation_of(op: str) -> Relation | None:
    """The relation state an aggregate query with operator ``op`` keeps (RSTREAM: none)."""
    if op not in STREAM_OPS:
        raise ValueError(f"unknown relation-to-stream operator {op!r}; the operators are {', '.join(STREAM_OPS)}")
    return None if op == "RSTREAM" else Relation(op)


def _keys_and_values(rows: AggregateChunk) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Each row's group key and output values, as tuples."""
    keys = [rows.keys[c] for c in rows.codes.tolist()]
    values = list(zip(*rows.values, strict=True)) if rows.values else [() for _ in range(len(rows))]
    return keys, values


__all__ = ["STREAM_OPS", "ChunkShape", "Relation", "relation_of", "same_values"]
