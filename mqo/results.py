"""What the matcher hands back: matches, and tuples it could not match because they
came too late."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from indexes.kill_bitsets import slots_of
from indexes.stored import StoredTuple
from predicates import MqoError


class ReadOnlyDict(dict):  # type: ignore[type-arg]
    """A dict that refuses changes. The results of one assignment of tuples share
    their ids and values: one read-only dict each, not a copy per result (a tuple
    that matches many queries would otherwise copy its values once per query).
    ``dict(d)`` is a copy to change."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a Match's ids and values are read-only (shared by the results of one assignment); "
                        "copy them with dict(...) to change them")  # fmt: skip

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type, tuple[dict[Any, Any]]]:
        # pickle and copy rebuild a dict subclass item by item through __setitem__
        return (type(self), (dict(self),))


@dataclass(frozen=True, slots=True)
class Match:
    """One result of one query (docs/ARCHITECTURE.md, Semantics).

    ``ts`` is the largest timestamp among the result's tuples, ``ids`` maps each alias
    of the query's FROM clause to the id of its tuple, ``values`` holds the SELECT
    values by name (``alias.col`` for ``SELECT *``). Like the match, both are read-only
    (:class:`ReadOnlyDict`).
    """

    query: str
    ts: float
    ids: dict[str, int]
    values: dict[str, Any] = field(default_factory=ReadOnlyDict)

    def __post_init__(self) -> None:
        # a match made by hand gets read-only copies, as the matcher's own do
        if type(self.ids) is not ReadOnlyDict:
            object.__setattr__(self, "ids", ReadOnlyDict(self.ids))
        if type(self.values) is not ReadOnlyDict:
            object.__setattr__(self, "values", ReadOnlyDict(self.values))

    def as_dict(self) -> dict[str, Any]:
        return {"query": self.query, "ts": self.ts, "ids": dict(self.ids), "values": dict(self.values)}


# A frozen dataclass's __init__ sets each field through object.__setattr__ (and copies
# the dicts, __post_init__); setting the slots directly makes the same object in a
# fraction of the time, which counts where every
# result of a pushed tuple becomes a Match (mqo.batch.MatchBatch.matches): the setters
# of query, ts, ids and values, in that order.
MATCH_SETTERS = (Match.query.__set__, Match.ts.__set__, Match.ids.__set__, Match.values.__set__)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class LateTuple:
    """A tuple that arrived after the allowed lateness: reported, never matched."""

    stream: str
    ts: float
    id: int
    values: dict[str, Any]
    watermark: float
    allowed_lateness: float

    @property
    def reason(self) -> str:
        return (
            f"ts {self.ts:g} is older than the watermark: the newest ts ({self.watermark:g}) of the "
            f"stream furthest behind, minus its allowed lateness ({self.allowed_lateness:g})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {"stream": self.stream, "ts": self.ts, "id": self.id, "values": dict(self.values), "reason": self.reason}

    @classmethod
    def of_row(cls, schema: Any, row: tuple[Any, ...], watermark: float, allowed_lateness: float) -> LateTuple:
        """The late tuple of a stored row ``(ts, id, *values)`` of the stream ``schema``."""
        values = {c.name: v for c, v in zip(schema.columns, row[2:], strict=True)}
        return cls(schema.name, row[0], row[1], values, watermark, allowed_lateness)

    def warning(self) -> str:
        """What the first late tuple warns of when no late sink takes them."""
        return (
            f"late tuple on stream {self.stream}: {self.reason}; it is not matched. "
            "Late tuples are counted in Matcher.late_count and kept in Matcher.late_tuples; "
            "pass late_sink= to handle them, or raise allowed_lateness."
        )


class TupleError(MqoError):
    """A tuple that cannot be matched as given (unknown stream or column, wrong type)."""


class ResultBlock:
    """Results sharing one assignment of tuples: every slot of ``slots`` is satisfied by
    ``tuples`` (one per stream, None where the stream is not in it). ``slots`` is a
    mask (an int), or the slot numbers ascending (an int64 array): what a pushed
    tuple's single-stream results are read off its candidate words as, with no wide
    int made and taken apart again. :meth:`numbers` gives them either way."""

    __slots__ = ("slots", "ts", "tuples")

    def __init__(self, slots: int | np.ndarray, tuples: list[StoredTuple | None], ts: float) -> None:
        self.slots = slots
        self.tuples = tuples
        self.ts = ts

    def numbers(self) -> np.ndarray:
        """The slot numbers, ascending."""
        slots = self.slots
        return slots if isinstance(slots, np.ndarray) else slots_of(slots)

    def __len__(self) -> int:
        slots = self.slots
        return len(slots) if isinstance(slots, np.ndarray) else slots.bit_count()
