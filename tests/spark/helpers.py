"""What several Spark test modules build alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Row = tuple[str, float, int, Mapping[str, Any]]  # (stream, ts, id, values)


def stream_frames(spark: Any, rows: Iterable[Row], schemas: Mapping[str, str]) -> dict[str, Any]:
    """Each stream's rows as a DataFrame of its Spark schema in ``schemas`` (``"ts double,
    id long, x long, y double"``): ``ts`` and ``id`` from the row, every other column
    from its values by name, in the rows' order."""
    rows = list(rows)
    frames = {}
    for stream, schema in schemas.items():
        names = [field.split()[0] for field in schema.split(",")]
        assert names[:2] == ["ts", "id"], f"the schema of {stream} must start with ts and id: {schema}"
        data = [(ts, ident, *(values[c] for c in names[2:])) for s, ts, ident, values in rows if s == stream]
        frames[stream] = spark.createDataFrame(data, schema)
    return frames


XY = "ts double, id long, x long, y double"  # the streams B and H of the view tests (x INTEGER, y FLOAT)
