"""Aggregate state in Matcher.snapshot/restore: a matcher restored at any point goes
on with exactly the rows of the uninterrupted run."""

from __future__ import annotations

import json
import pickle
import warnings
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqo
from tests.differential import test_aggregation, test_count_windows
from tests.differential.test_aggregation import DDL
from tests.references.agg_reference import RefQuery


def _array_as_list(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not plain data: {type(value).__name__}")


def through_json(snapshot: dict[str, Any]) -> dict[str, Any]:
    """``snapshot`` with its aggregate part through a JSON round trip (arrays as lists,
    tuples become lists): what a data codec gives back."""
    out = dict(snapshot)
    if "aggregates" in out:
        out["aggregates"] = json.loads(json.dumps(out["aggregates"], default=_array_as_list))
    return out


def _is_plain(value: Any) -> bool:
    """The snapshot contract: str-keyed dicts, lists, str, int, float, bool, None and
    numpy arrays of numbers or bools."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_is_plain(v) for v in value)
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biuf"
    return value is None or type(value) in (str, int, float, bool)


def run(queries: list[RefQuery], tuples: list, lateness: float, cuts: set[int], batch: bool) -> list[dict[str, Any]]:
    """Rows in emission order; before tuple ``i`` in ``cuts`` the matcher is replaced
    by one restored from its snapshot (its aggregate part through JSON, the rest through
    pickle, as checkpoints are)."""
    m = mqo.Matcher(DDL, allowed_lateness=lateness, late_sink=lambda t: None, missing="null")
    out: list[dict[str, Any]] = []
    events: dict[int, list[tuple[str, RefQuery]]] = {}
    for q in queries:
        events.setdefault(q.registered_at, []).append(("add", q))
        if q.removed_at is not None:
            events.setdefault(q.removed_at, []).append(("remove", q))
    for i in range(len(tuples) + 1):
        if i in cuts:
            data = m.snapshot()
            assert _is_plain(data.get("aggregates", {}))
            m = mqo.Matcher.restore(through_json(pickle.loads(pickle.dumps(data))), late_sink=lambda t: None)
        for what, q in sorted(events.get(i, []), key=lambda e: e[0]):
            if what == "add":
                m.register_query(q.text())
            else:
                m.unregister_query(q.name)
        if i == len(tuples):
            break
        ts, values = tuples[i]
        if batch:
            m.push_batch("H", {"ts": [ts], **{k: [v] for k, v in values.items()}})
        else:
            m.push("H", ts=ts, values=values)
        if i % 4 == 0:  # some rows wait in the matcher across a snapshot
            out += m.poll_aggregates().to_pylist()
    return out + m.flush().to_pylist()


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    assert [json.dumps(r, default=str) for r in a] == [json.dumps(r, default=str) for r in b]


@st.composite
def cases(draw: Any) -> tuple:
    source = draw(st.sampled_from([test_aggregation.workloads(), test_count_windows.workloads()]))
    queries, tuples, lateness = draw(source)
    cuts = set(draw(st.lists(st.integers(1, len(tuples)), min_size=1, max_size=3)))
    return queries, tuples, lateness, cuts, draw(st.booleans())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_restored_matcher_goes_on_identically(case: tuple) -> None:
    queries, tuples, lateness, cuts, batch = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same(run(queries, tuples, lateness, cuts, batch), run(queries, tuples, lateness, set(), batch))


def test_snapshot_holds_slices_and_pending_count_rows() -> None:
    m = mqo.Matcher(DDL, allowed_lateness=10.0, missing="null")
    m.register_queries(
        "Query ID: r SELECT H.patient, AVG(H.vib) FROM H [ROWS 4 SLIDE 2] GROUP BY H.patient;"
        "Query ID: t SELECT MAX(H.vib) FROM H [RANGE 5 sec SLIDE 1 sec];"
    )
    for i in range(30):
        m.push("H", ts=float(i), values={"patient": i % 3, "vib": float(i * i % 7)})
    data = m.snapshot()
    assert {q["name"] for q in data["aggregates"]["queries"]} == {"r", "t"}
    restored = mqo.Matcher.restore(through_json(data))
    assert restored.aggregator is not None and m.aggregator is not None
    (store,) = restored.aggregator.count_stores.values()
    assert store.rows_held == 10  # within the lateness: not final yet
    for mm in (m, restored):
        mm.push("H", ts=25.5, values={"patient": 0, "vib": 100.0})  # late by less than the lateness
    _same(restored.flush().to_pylist(), m.flush().to_pylist())


def test_aggregate_state_is_data_not_pickle() -> None:
    """Every store kind, group keys of every type, slice numbers past int64 and rows
    not yet taken survive a JSON round trip; persist.py no longer imports pickle."""
    import ast
    from pathlib import Path

    import mqo.aggregation.persist as persist

    tree = ast.parse(Path(persist.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "pickle" not in imported

    ddl = "REGISTER STREAM S (sensor INTEGER, temp FLOAT, name STRING, ok BOOLEAN);"
    texts = (
        "Query ID: g SELECT S.name, S.ok, S.sensor, SUM(S.temp), COUNT(*) FROM S [RANGE 10 SLIDE 5]"
        " GROUP BY S.name, S.ok, S.sensor;"
        "Query ID: f SELECT S.temp, MAX(S.sensor) FROM S [RANGE 0.3 SLIDE 0.1] WHERE S.temp > 0 GROUP BY S.temp;"
        "Query ID: r SELECT S.name, MIN(S.temp) FROM S [ROWS 3 SLIDE 2] GROUP BY S.name;"
    )

    def fed(m: mqo.Matcher, points: list[tuple[float, dict[str, Any]]]) -> list[str]:
        for ts, values in points:
            m.push("S", ts, values)
        return [json.dumps(r, default=str) for r in m.poll_aggregates().to_pylist()]

    first = [
        (float(i), {"sensor": i % 3, "temp": i / 4, "name": [None, "a", "b"][i % 3], "ok": [None, True, False][i % 3]})
        for i in range(12)
    ] + [(1e300, {"sensor": -(2**63), "temp": 1e300, "name": "far", "ok": True})]
    after = [(1e300 + 1e290, {"sensor": 2**63 - 1, "temp": -0.0, "name": "far", "ok": None})]
    m = mqo.Matcher(ddl, allowed_lateness=3.0, missing="null")
    m.register_queries(texts)
    for ts, values in first:
        m.push("S", ts, values)
    data = m.snapshot()
    assert _is_plain(data["aggregates"])
    restored = mqo.Matcher.restore(through_json(data))
    assert fed(restored, after) == fed(m, after)
    flushed = [[json.dumps(r, default=str) for r in x.flush().to_pylist()] for x in (restored, m)]
    assert flushed[0] == flushed[1] and flushed[0]
