"""The Spark aggregate stages' output columns (``runtime.spark.aggregate.output_batch``,
built from the aggregate batch's columns) hold, row for row, what each emitted
aggregate row prints as: the query, the window (a landmark's start NULL), and the
group and values as maps of texts (``mqo.text_of``), in emission order."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from mqo import Matcher, text_of
from runtime.spark.aggregate import output_batch, output_rows

SCHEMA = "CREATE STREAM H (beatrate FLOAT, vib FLOAT, alert INTEGER, name STRING);"
QUERIES = """
Query ID: grouped
SELECT H.alert, COUNT(*) AS n, AVG(H.beatrate) AS rate, MIN(H.vib), SUM(H.alert) FROM H [RANGE 60 SLIDE 10]
GROUP BY H.alert;
Query ID: plain
SELECT COUNT(*), MAX(H.beatrate) FROM H [RANGE 30 SLIDE 30];
Query ID: named
SELECT H.name, COUNT(*), AVG(H.alert) * 2 AS twice FROM H [RANGE 45 SLIDE 15] GROUP BY H.name;
Query ID: rows
SELECT COUNT(*), SUM(H.beatrate) FROM H [ROWS 7];
Query ID: since
SELECT H.name, MAX(H.vib) AS top FROM H [RANGE UNBOUNDED SLIDE 50] GROUP BY H.name;
"""
# doubles whose texts differ between printers: exponents, -0.0, thirds, huge and tiny
ODD = [None, 1.5, 1e16, 1e-7, -0.0, 3.0, 1 / 3, 2.5e-5, 123456789012345680.0]


def emitted(seed: int) -> Any:
    m = Matcher(SCHEMA)
    m.register_queries(QUERIES)
    rnd = random.Random(seed)
    for i in range(400):
        values = {
            "beatrate": rnd.choice(ODD),
            "vib": rnd.random(),
            "alert": rnd.choice([0, 1, 7, None]),
            "name": rnd.choice(["x", "y", "", None]),
        }
        m.push("H", i * 0.7, values)
    return m.flush()


def printed(rows: Any) -> list[tuple[Any, ...]]:
    """Each row as it prints, one row object at a time."""
    return [
        (
            r.query,
            None if r.window_start == -math.inf else r.window_start,
            r.window_end,
            [(k, text_of(v)) for k, v in r.group.items()],
            [(k, text_of(v)) for k, v in r.values.items()],
        )
        for r in rows.rows
    ]


@pytest.mark.parametrize("seed", range(3))
def test_output_rows_print_every_emitted_row_in_order(seed: int) -> None:
    rows = emitted(seed)
    want = printed(rows)
    assert len(want) > 100
    assert any(w[1] is None for w in want)  # a landmark window
    assert output_rows(rows) == (want, 0)


def test_kept_rows_are_the_windows_asked_for_and_none_makes_an_empty_batch() -> None:
    rows = emitted(0)
    want = [w for w in printed(rows) if w[2] > 100]
    batch, _ = output_batch(rows, lambda ends: ends > 100)
    assert list(zip(*(c.to_pylist() for c in batch.columns), strict=True)) == want
    empty, _ = output_batch(rows, lambda ends: ends > 1e9)
    assert empty.num_rows == 0 and empty.schema == batch.schema


def test_an_integer_past_64_bits_is_null_and_counted_in_the_rows_kept() -> None:
    """As the local engine writes it (its result columns count it): ``-MIN(x)`` of the
    smallest INTEGER is 2**63, one past the largest."""
    m = Matcher("CREATE STREAM B (x INTEGER);")
    m.register_queries("Query ID: neg\nSELECT -MIN(B.x) AS v, MAX(B.x) AS top FROM B [RANGE 10 SLIDE 10];")
    for i, x in enumerate([-(2**63), 5, -(2**63), 7, 3]):
        m.push("B", i * 5.0 + 1, {"x": x})
    rows = m.flush()
    assert rows.result_columns()[2] == 2  # the local engine's count
    made, wide = output_rows(rows)
    assert [dict(r[4]) for r in made] == [{"v": None, "top": "5"}, {"v": None, "top": "7"}, {"v": "-3", "top": "3"}]
    assert wide == 2
    assert output_batch(rows, lambda ends: ends > 10)[1] == 1  # a window another task reports is its count
