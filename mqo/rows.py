"""Turning user values into stored rows, with clear errors for what cannot be matched.

A row is ``(ts, id, col_0, col_1, ...)``. Missing columns are NULL, NaN becomes NULL
(SQL's unknown: it satisfies no comparison), and a value of the wrong type is an
error naming the stream and column rather than something that silently never matches.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any

from mqo.results import TupleError
from predicates import ColumnType, StreamSchema
from predicates.errors import did_you_mean


class RowBuilder:
    __slots__ = ("_next_id", "_positions", "_types", "_width", "schema")

    def __init__(self, schema: StreamSchema) -> None:
        self.schema = schema
        self._positions = {c.name: i + 2 for i, c in enumerate(schema.columns)}
        self._positions.update({c.name.lower(): i + 2 for i, c in enumerate(schema.columns)})
        self._types = [c.ctype for c in schema.columns]
        self._width = len(schema.columns) + 2
        self._next_id = 0

    @property
    def next_id(self) -> int:
        return self._next_id

    def restart_ids(self, next_id: int) -> None:
        self._next_id = next_id

    def build(self, ts: Any, values: Mapping[str, Any] | None, id: Any = None) -> tuple[Any, ...]:
        """A row for ``values`` at ``ts``; consumes one automatic id either way."""
        auto_id = self._next_id
        self._next_id += 1
        name = self.schema.name
        if isinstance(ts, bool) or not isinstance(ts, Real) or not math.isfinite(ts):
            raise TupleError(f"stream {name}: ts must be a finite number, got {ts!r}")
        if id is None:
            id = auto_id
        elif isinstance(id, bool) or not isinstance(id, Integral):
            raise TupleError(f"stream {name}: id must be an integer, got {id!r}")
        row: list[Any] = [None] * self._width
        row[0] = float(ts)
        row[1] = int(id)
        if values:
            positions = self._positions
            for key, value in values.items():
                pos = positions.get(key)
                if pos is None:
                    pos = positions.get(key.lower()) if isinstance(key, str) else None
                    if pos is None:
                        if isinstance(key, str) and key.lower() in ("ts", "id"):
                            raise TupleError(f"stream {name}: pass {key} as its own argument, not as a column value")
                        raise TupleError(
                            f"stream {name} has no column {key!r}" + did_you_mean(str(key), self.schema.column_names)
                        )
                row[pos] = self._coerce(value, pos)
        return tuple(row)

    def _coerce(self, value: Any, pos: int) -> Any:
        if value is None:
            return None
        ctype = self._types[pos - 2]
        if ctype.is_numeric:
            if isinstance(value, bool) or not isinstance(value, Real):
                raise self._type_error(value, pos, "a number")
            if value != value:
                return None
            if ctype is ColumnType.FLOAT or not isinstance(value, Integral):
                return float(value)
            return int(value)
        if ctype is ColumnType.STRING:
            if not isinstance(value, str):
                raise self._type_error(value, pos, "a string")
            return value
        if not isinstance(value, bool):
            raise self._type_error(value, pos, "a boolean")
        return value

    def _type_error(self, value: Any, pos: int, expected: str) -> TupleError:
        col = self.schema.columns[pos - 2]
        return TupleError(
            f"stream {self.schema.name}, column {col.name} ({col.ctype.value}): expected {expected}, got {value!r}"
        )
