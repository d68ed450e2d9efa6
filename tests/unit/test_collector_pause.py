"""The cyclic garbage collector waits while a batch or a round of rows is matched
(``mqo.memory.no_cyclic_gc`` around ``Matcher.push_batch`` and ``mqo match``'s rounds):
no collection runs in the middle of one, the collector runs again after it (also when
it raised, and not when the caller had turned it off), and the results are the same.
"""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

from mqo import Matcher
from runtime.cli import main
from runtime.local import match as local_match

DDL = "REGISTER STREAM A (x FLOAT, k INTEGER); REGISTER STREAM B (y FLOAT, k INTEGER);"
QUERIES = """
Query ID: pairs
SELECT A.x, B.y FROM A, B MAXWINDOW 50 sec WHERE A.k = B.k AND A.x > B.y;

Query ID: sums
SELECT A.k, SUM(A.x), COUNT(*) FROM A [RANGE 20 sec SLIDE 10 sec] GROUP BY A.k;
"""


def batch(n: int, seed: int, key: str = "x") -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"ts": np.arange(n, dtype=np.float64) / 4, key: rng.integers(0, 50, n) / 7, "k": rng.integers(0, 6, n)}


def matcher() -> Matcher:
    m = Matcher()
    m.register_streams(DDL)
    m.register_queries(QUERIES)
    return m


def test_no_collection_runs_while_a_batch_is_matched() -> None:
    m = matcher()
    inside: list[bool] = []
    m.pipeline.push_batch = _spying(m.pipeline.push_batch, inside)  # type: ignore[method-assign]
    m.push_batch("B", batch(400, 1, "y"))
    out = m.push_batch("A", batch(400, 2))
    assert len(out.matches()) > 0  # (the batch stored and matched rows: it allocated)
    assert inside and not any(inside), "the collector ran inside push_batch"
    assert gc.isenabled(), "push_batch left the collector off"


def test_the_collector_runs_again_when_a_batch_fails() -> None:
    m = matcher()
    with pytest.raises(Exception, match="y"):  # B's batch without its column y
        m.push_batch("B", {"ts": np.arange(3.0), "k": np.arange(3)})
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off() -> None:
    m = matcher()
    gc.disable()
    try:
        m.push_batch("A", batch(50, 3))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_results_are_the_same_with_the_collector_running_as_without() -> None:
    """The pause changes when garbage is found, never what is matched (the row by row
    pushes run with the collector as the caller has it)."""
    a, b = batch(300, 4), batch(300, 5, "y")
    paused = matcher()
    found = [*paused.push_batch("B", b).matches(), *paused.push_batch("A", a).matches()]
    pushed = matcher()
    one_by_one = []
    for name, cols in (("B", b), ("A", a)):
        value = "y" if name == "B" else "x"
        for i in range(len(cols["ts"])):
            row = {value: float(cols[value][i]), "k": int(cols["k"][i])}
            one_by_one += pushed.push(name, float(cols["ts"][i]), row)
    key = lambda m: (m.query, m.ts, sorted(m.ids.items()))  # noqa: E731
    assert sorted(map(key, found)) == sorted(map(key, one_by_one))
    assert sorted(paused.flush().json_lines()) == sorted(pushed.flush().json_lines())


def test_mqo_match_rounds_run_without_the_collector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "s.ddl").write_text(DDL)
    (tmp_path / "q.mqo").write_text(QUERIES)
    for name, column, seed in (("A", "x", 6), ("B", "y", 7)):
        cols = batch(200, seed, column)
        lines = [f"{t},{v},{k}" for t, v, k in zip(cols["ts"], cols[column], cols["k"], strict=True)]
        (tmp_path / f"{name}.csv").write_text("\n".join([f"ts,{column},k", *lines]) + "\n")
    inside: list[bool] = []
    monkeypatch.setattr(local_match.Matching, "_round", _spying(local_match.Matching._round, inside))
    args = ["match", f"--schema={tmp_path / 's.ddl'}", f"--queries={tmp_path / 'q.mqo'}"]
    args += [f"--input={s}={tmp_path / f'{s}.csv'}" for s in "AB"]
    assert main([*args, f"--output={tmp_path / 'out.jsonl'}", "-q"]) == 0
    assert inside and not any(inside), "a round ran with the collector on"
    assert gc.isenabled()
    assert (tmp_path / "out.jsonl").read_text().count("\n") > 0


def _spying(method, seen: list[bool]):  # type: ignore[no-untyped-def]
    """``method`` noting whether the collector is on as it starts and as it ends."""

    def spied(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        try:
            return method(*args, **kwargs)
        finally:
            seen.append(gc.isenabled())

    return spied


def test_a_spark_tasks_replay_runs_without_the_collector() -> None:
    """The Spark stages' task replay (``runtime.spark.worker``): paused while it runs,
    running again once it ends or once the task leaves it part way."""
    from runtime.spark.worker import _Task

    def task() -> _Task:
        m = matcher()
        prepared = [m.prepare("B", batch(200, 8, "y")), m.prepare("A", batch(200, 9))]
        which = np.repeat([0, 1], 200)
        rows = np.tile(np.arange(200), 2)
        return _Task(m, prepared, which, rows, np.ones(400, bool), which.astype(np.int32), rows)

    seen = [gc.isenabled() for _ in task().replayed()]
    assert seen and not any(seen)
    assert gc.isenabled()
    left = task().replayed()
    next(left)
    assert not gc.isenabled()
    left.close()  # (a task stopped part way)
    assert gc.isenabled()


def test_pauses_in_several_threads_leave_the_collector_as_it_was() -> None:
    """Pauses overlapping across threads, in any order: the collector runs again when
    the last ends (a per-pause 'was it on?' would let a late starter see another
    thread's pause and leave the collector off for good)."""
    import sys
    import threading

    from mqo import no_cyclic_gc

    def pause_often() -> None:
        for _ in range(20_000):
            with no_cyclic_gc():
                pass

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(3):
            threads = [threading.Thread(target=pause_often) for _ in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert gc.isenabled()
    finally:
        sys.setswitchinterval(interval)
