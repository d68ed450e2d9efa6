"""Turning user values into stored rows, with clear errors for what cannot be matched.

A row is ``(ts, id, col_0, col_1, ...)``. Every declared column must be given (None
or NaN for NULL, SQL's unknown: it satisfies no comparison); a missing column is an
error unless the matcher was made with ``missing="null"``. A value that cannot mean
what its column says is an error naming the stream and column rather than something
that silently never matches or changes: a fraction or a number past 64 bits in an
INTEGER column, an infinity in a FLOAT column, text in a number column.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any

import numpy as np

from mqo.results import TupleError
from predicates import ColumnType, StreamSchema
from predicates.ast import NUMERIC_TYPES
from predicates.errors import did_you_mean

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INF = math.inf
FLOAT = ColumnType.FLOAT
INTEGER = ColumnType.INTEGER


class RowBuilder:
    __slots__ = ("_next_id", "_positions", "_types", "_width", "missing_null", "schema")

    def __init__(self, schema: StreamSchema, missing_null: bool = False) -> None:
        self.schema = schema
        self.missing_null = missing_null
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
        """A row for ``values`` at ``ts``; consumes one automatic id when the row is
        good (a refused tuple leaves the numbering as it was)."""
        auto_id = self._next_id
        name = self.schema.name
        if values is not None and not isinstance(values, Mapping):
            # a list in column order is the usual slip (and a pandas row, a Series, is no mapping)
            columns = ", ".join(f"'{c}': ..." for c in self.schema.column_names)
            raise TupleError(
                f"stream {name}: values must be a mapping of column -> value such as {{{columns}}}, "
                f"got {type(values).__name__}{_shown(values)}"
            )
        if isinstance(ts, bool) or not isinstance(ts, Real) or not math.isfinite(ts):
            raise TupleError(f"stream {name}: ts must be a finite number, got {ts!r}")
        if id is None:
            id = auto_id
        elif isinstance(id, bool) or not isinstance(id, Integral) or not INT64_MIN <= id <= INT64_MAX:
            raise TupleError(f"stream {name}: id must be a 64-bit integer, got {id!r}")
        row: list[Any] = [None] * self._width
        row[0] = float(ts)
        row[1] = int(id)
        if values:
            positions, types = self._positions, self._types
            for key, value in values.items():
                pos = positions.get(key)
                # a finite float in a FLOAT column, the common case, is taken as it is
                # here (a method call per value is most of a pushed tuple's row)
                if pos is not None and type(value) is float and types[pos - 2] is FLOAT and -_INF < value < _INF:
                    row[pos] = value
                    continue
                if (
                    pos is not None
                    and type(value) is int
                    and types[pos - 2] is INTEGER
                    and INT64_MIN <= value <= INT64_MAX
                ):
                    row[pos] = value  # and an int in an INTEGER column
                    continue
                if pos is None:
                    pos = positions.get(key.lower()) if isinstance(key, str) else None
                    if pos is None:
                        if isinstance(key, str) and key.lower() in ("ts", "id"):
                            raise TupleError(f"stream {name}: pass {key} as its own argument, not as a column value")
                        raise TupleError(
                            f"stream {name} has no column {key!r}" + did_you_mean(str(key), self.schema.column_names)
                        )
                row[pos] = self._coerce(value, pos)
        if not self.missing_null and (not values or len(values) < self._width - 2):
            given = {self._positions.get(k, self._positions.get(str(k).lower())) for k in values or ()}
            missing = [c.name for i, c in enumerate(self.schema.columns) if i + 2 not in given]
            if missing:
                raise TupleError(
                    f"stream {name}: no value for column(s) {', '.join(missing)} "
                    "(give None for NULL, or make the Matcher with missing='null')"
                )
        self._next_id += 1
        return tuple(row)

    def _coerce(self, value: Any, pos: int) -> Any:
        if value is None:
            return None
        ctype = self._types[pos - 2]
        if ctype in NUMERIC_TYPES:
            if isinstance(value, bool) or not isinstance(value, Real):
                raise self._type_error(value, pos, "a number")
            if value != value:
                return None
            if ctype is ColumnType.FLOAT:
                value = float(value)
                if not math.isfinite(value):
                    raise self._type_error(value, pos, "a finite number")
                return value
            if not isinstance(value, Integral):
                if not float(value).is_integer():
                    raise self._type_error(value, pos, "an integer")
                value = int(value)
            if not INT64_MIN <= value <= INT64_MAX:
                raise self._type_error(value, pos, "a 64-bit integer")
            return int(value)
        if ctype is ColumnType.STRING:
            if not isinstance(value, str):
                raise self._type_error(value, pos, "a string")
            return value
        if not isinstance(value, (bool, np.bool_)):
            raise self._type_error(value, pos, "a boolean")
        return bool(value)

    def _type_error(self, value: Any, pos: int, expected: str) -> TupleError:
        col = self.schema.columns[pos - 2]
        return TupleError(
            f"stream {self.schema.name}, column {col.name} ({col.ctype.value}): expected {expected}, got {value!r}"
        )


def _shown(value: Any, limit: int = 60) -> str:
    """`` value`` as it prints, for an error message, when it prints on one short line
    (a pushed value may be huge, or a pandas object over many lines)."""
    text = repr(value)
    if "\n" in text:
        return ""
    return " " + (text if len(text) <= limit else text[: limit - 3] + "...")
