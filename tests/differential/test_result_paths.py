"""The batch writers' shared path against the table path, byte for byte.

``write_batch`` formats what the results of one assignment share once per query
context and puts it after each result's query (CSV as JSON lines do), and makes
non-finite values NULL on those shared rows, counted once per result reading them.
``write_table`` of the batch's table of one row per result (:meth:`MatchBatch.to_arrow`)
formats every row by itself. Both must write the same bytes (CSV) or the same table
(Parquet) and count the same values made NULL, on random result sets with overflows,
unicode, quoting, shared rows and several query contexts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from hypothesis import HealthCheck, example, given, settings

import mqo
from runtime.io.writers import open_writer
from tests.differential.test_result_formats import DDL, QUERIES, batches

# more queries of the join's context (one row per assignment, shared by them), and a
# query name CSV must quote
MORE = """
Query ID: "j,2"
SELECT A.s, B.t, B.y - A.y AS dy FROM A, B WINDOW A.ts <= B.ts MAXWINDOW 3 WHERE A.x = B.x;
Query ID: j3
SELECT A.s, B.t, B.y - A.y AS dy FROM A, B WINDOW A.ts <= B.ts MAXWINDOW 3 WHERE A.x <= B.x;
"""


def _write(path: Path, fmt: str, types: Any, write: Any) -> int:
    with open_writer(str(path), fmt, types) as writer:
        write(writer)
    return writer.nonfinite


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches())
@example(
    data=({"ts": [0.0], "x": [2**62], "y": [0.1], "s": [None], "b": [None]}, {"ts": [], "x": [], "y": [], "t": []})
)
def test_batch_and_table_paths_write_the_same_files(tmp_path: Path, data: Any) -> None:
    a, b = data
    matcher = mqo.Matcher(DDL)
    matcher.register_queries(QUERIES + MORE)
    types = matcher.value_types()
    found = [matcher.push_batch("A", a), matcher.push_batch("B", b)]
    for fmt in ("csv", "parquet"):
        shared, whole = tmp_path / f"shared.{fmt}", tmp_path / f"whole.{fmt}"
        counted = _write(shared, fmt, types, lambda w: [w.write_batch(batch) for batch in found])
        expected = _write(
            whole, fmt, types, lambda w: [w.write_table(batch.to_arrow(types), batch.layouts()) for batch in found]
        )
        # integers past 64 bits are NULL in the table already: its result columns count them
        expected += sum(batch.result_columns(types).overflowed for batch in found)
        assert counted == expected, fmt
        if fmt == "csv":
            assert shared.read_bytes() == whole.read_bytes()
        else:
            assert pq.read_table(shared).equals(pq.read_table(whole))
            assert pq.read_table(shared).num_rows == sum(len(batch) for batch in found)
