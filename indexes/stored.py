"""A tuple kept in the window: stored once, referenced by every index.

The thesis copied each tuple into every exploitation structure and removed copies by
comparing values. Here there is one object per tuple; the time buckets and the value
indexes hold references to it, and removal is by identity (``seq`` breaks ties
between equal values in O(log n)).

``row`` is ``(ts, id, col_0, col_1, ...)`` in schema order, so every column, ``ts``
and ``id`` included, is addressed by one position.

The tuple also carries the outcome of its attribute predicates (thesis A.12.1): which
lists were evaluated, which predicates held and which query slots they rule out, for
one compiled plan (``attr_version``). A tuple is never evaluated against the same list
twice while the plan stands.
"""

from __future__ import annotations

from typing import Any, cast

TS = 0
ID = 1
FIRST_COLUMN = 2


class StoredTuple:
    __slots__ = ("attr_done", "attr_kill", "attr_sat", "attr_version", "row", "seq", "stream")

    def __init__(self, stream: int, seq: int, row: tuple[Any, ...]) -> None:
        self.stream = stream
        self.seq = seq
        self.row = row
        self.attr_version = -1
        self.attr_done = 0
        self.attr_sat = 0
        self.attr_kill = 0

    @property
    def ts(self) -> float:
        return cast(float, self.row[TS])  # as stored: no conversion on the hot path

    @property
    def id(self) -> int:
        return cast(int, self.row[ID])

    def __repr__(self) -> str:
        return f"StoredTuple(stream={self.stream}, seq={self.seq}, row={self.row!r})"
