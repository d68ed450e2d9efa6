"""``keep_window``: a matcher keeps that much window whatever its queries' MAXWINDOW,
so a query registered later sees the earlier tuples it could use."""

from __future__ import annotations

import pytest

import mqo

DDL = "CREATE STREAM B (pressure FLOAT); CREATE STREAM H (vib FLOAT);"
NARROW = "Query ID: narrow\nSELECT * FROM B, H MAXWINDOW 1 sec WHERE B.pressure < H.vib;"
WIDE = "Query ID: wide\nSELECT * FROM B, H MAXWINDOW 10 sec WHERE B.pressure < H.vib;"


def late_registration(**options: float) -> list[tuple[str, float, dict[str, int]]]:
    m = mqo.Matcher(DDL, time="global", **options)
    m.register_queries(NARROW)
    m.push("B", 0.0, {"pressure": 1.0}, id=0)
    m.push("H", 5.0, {"vib": 2.0}, id=0)  # the watermark passes 0 + MAXWINDOW 1: B@0 may go
    m.register_queries(WIDE)
    return [(x.query, x.ts, dict(x.ids)) for x in m.push("H", 6.0, {"vib": 3.0}, id=1)]


def test_a_later_query_sees_what_keep_window_kept() -> None:
    assert late_registration(keep_window=10.0) == [("wide", 6.0, {"B": 0, "H": 1})]


def test_without_keep_window_the_narrow_queries_decide_what_is_kept() -> None:
    assert late_registration() == []


def test_keep_window_is_checked() -> None:
    with pytest.raises(ValueError, match="keep_window"):
        mqo.Matcher(DDL, keep_window=-1.0)
