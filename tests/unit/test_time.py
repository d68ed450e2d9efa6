"""Per-stream event time from a user's side: a lagging stream is matched, not late; a
silent stream stops holding time back after ``idle_timeout`` (processing time, injected
here), when declared idle, or when a heartbeat moves it; stored state stays bounded;
``time='global'`` keeps the first version's rule; the CLI reads a lagging file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import mqo
from runtime.cli import main

DDL = "REGISTER STREAM A (x FLOAT); REGISTER STREAM B (y FLOAT);"
JOIN = "SELECT * FROM A, B MAXWINDOW 2 sec WHERE A.x = B.y"


class FakeTime:
    """Processing time that moves only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def lagging_matcher(**options) -> mqo.Matcher:
    m = mqo.Matcher(DDL, allowed_lateness=5, late_sink=lambda late: None, **options)
    m.register_query(JOIN)
    return m


def test_a_stream_lagging_60_s_is_matched_not_late() -> None:
    """B's tuples arrive 60 s behind A's (its gateway uploads every minute): each stream
    keeps its own watermark, so none is late and every pair matches."""
    m = lagging_matcher(idle_timeout=None)
    results = []
    for i in range(200):
        results += m.push("A", 1000.0 + i, {"x": float(i)})
        if i >= 60:  # B, a minute behind in arrival
            results += m.push("B", 1000.0 + i - 60, {"y": float(i - 60)})
    assert m.late_count == 0
    assert sorted(r.ids["A"] for r in results) == list(range(140))
    # the watermark is B's (the slowest): its newest ts minus the lateness
    assert m.watermark == 1000.0 + 139 - 5
    # state stays bounded by the window and the lag, not by the run
    assert len(m.state) < 2 * (60 + 5 + 2) + 10


def test_global_time_calls_the_lagging_stream_late() -> None:
    m = lagging_matcher(time="global")
    for i in range(100):
        m.push("A", 1000.0 + i, {"x": float(i)})
    assert m.push("B", 1000.0, {"y": 0.0}) == []
    assert m.late_count == 1


def test_a_late_tuple_is_older_than_the_slowest_streams_watermark() -> None:
    m = lagging_matcher(idle_timeout=None)
    m.push("A", 100.0, {"x": 1.0})
    m.push("B", 50.0, {"y": 1.0})
    assert m.watermark == 45.0
    m.push("B", 44.0, {"y": 1.0})  # older than B's 50 - 5
    m.push("A", 45.0, {"x": 1.0})  # not late: the watermark is B's
    assert m.late_count == 1
    late = m.late_tuples[0]
    assert (late.stream, late.ts, late.watermark, late.allowed_lateness) == ("B", 44.0, 50.0, 5.0)


def test_a_stream_that_sent_nothing_holds_time_back_until_idle_timeout() -> None:
    now = FakeTime()
    m = lagging_matcher(idle_timeout=30, now=now)
    for i in range(50):
        m.push("A", 100.0 + i, {"x": float(i)})
    assert m.watermark == float("-inf") and len(m.state) == 50  # B may still come
    assert m.push("A", 10.0, {"x": 0.0}) is not None and m.late_count == 0
    now.now = 31.0  # B silent for longer than idle_timeout: A's time alone counts
    m.push("A", 150.0, {"x": 1.0})
    assert m.watermark == 145.0
    assert len(m.state) < 10  # purged by A's watermark
    # B speaks again: it rejoins; its tuple older than the watermark is late
    m.push("B", 100.0, {"y": 1.0})
    assert m.late_count == 1
    assert [r.ids for r in m.push("B", 149.0, {"y": 1.0})] == [{"A": 51, "B": 1}]  # not late
    assert m.late_count == 1


def test_declared_idle_and_per_stream_heartbeats() -> None:
    m = lagging_matcher(idle_timeout=None)
    m.push("A", 100.0, {"x": 1.0})
    assert m.watermark == float("-inf")
    m.set_idle("B")
    assert m.watermark == 95.0
    m.heartbeat("B", 200.0)  # B rejoins: nothing of B before 200; A holds time now
    assert m.watermark == 95.0
    m.push("A", 300.0, {"x": 1.0})
    assert m.watermark == 195.0
    m.heartbeat(400.0)  # every stream
    assert m.watermark == 395.0
    with pytest.raises(mqo.TupleError, match="unknown stream"):
        m.heartbeat("Z", 1.0)


def test_per_stream_lateness() -> None:
    m = mqo.Matcher(DDL, allowed_lateness=0, stream_lateness={"B": 60}, idle_timeout=None)
    m.register_query(JOIN)
    m.push("A", 100.0, {"x": 1.0})
    m.push("B", 100.0, {"y": 1.0})
    assert m.watermark == 40.0
    assert len(m.push("B", 41.0, {"y": 2.0})) == 0 and m.late_count == 0
    m.push("A", 39.0, {"x": 1.0})
    assert m.late_count == 1
    with pytest.raises(ValueError, match="undeclared stream"):
        mqo.Matcher(DDL, stream_lateness={"Q": 1}).push("A", 1.0, {"x": 1.0})
    with pytest.raises(ValueError, match="per-stream"):
        mqo.Matcher(DDL, time="global", stream_lateness={"B": 1})
    with pytest.raises(ValueError, match="time must be"):
        mqo.Matcher(DDL, time="local")


def test_snapshot_carries_per_stream_time() -> None:
    m = lagging_matcher(idle_timeout=None)
    m.push("A", 100.0, {"x": 1.0})
    m.push("B", 50.0, {"y": 1.0})
    m.set_idle("B")
    r = mqo.Matcher.restore(m.snapshot(), late_sink=lambda late: None)
    assert r.watermark == m.watermark == 95.0
    assert r.stream_watermarks() == {"A": 100.0, "B": 50.0}
    r.push("A", 94.0, {"x": 1.0})
    assert r.late_count == 1


def test_cli_reads_a_file_lagging_minutes_behind(tmp_path: Path) -> None:
    (tmp_path / "s.ddl").write_text(DDL)
    (tmp_path / "q.mqo").write_text(JOIN + ";\n")
    (tmp_path / "a.csv").write_text("ts,x\n" + "".join(f"{1000 + i},{i}\n" for i in range(300)))
    # B's file: the same readings, three minutes later in its arrival (a slow upload)
    (tmp_path / "b.csv").write_text("ts,y\n" + "".join(f"{1000 + i},{i}\n" for i in range(300)))
    out, late = tmp_path / "out.jsonl", tmp_path / "late.jsonl"
    args = ["match", "--schema", str(tmp_path / "s.ddl"), "--queries", str(tmp_path / "q.mqo")]
    args += ["--input", f"A={tmp_path / 'a.csv'}", "--input", f"B={tmp_path / 'b.csv'}"]
    args += ["--allowed-lateness", "5", "--output", str(out), "--late", str(late), "--quiet"]
    assert main(args) == 0
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["ids"]["A"] for r in results) == list(range(300))
    assert not late.exists() or late.read_text() == ""
