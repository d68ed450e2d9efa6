"""The columnar step's equality key against the exact reference.

The exact workloads (tests/references/exact_workloads.py) rarely give every query over
two streams one equality, so the step's probe by key (``PairTables.key``: a row meets
only the partners of its own key) is checked here on workloads made so: each query
over two streams gets ``a.x = b.y`` ANDed to its condition (numeric columns, ``ts`` or
``id``, drawn per query; under OR and NOT the key stays in every disjunct), the
workload's data, boundaries and non-dyadic constants as they are. ``prepare`` +
``replay`` (the step's path) is compared with the reference result for result, as in
tests/differential/test_exact_differential.py, and the test counts the plans that took
the key, so that it cannot pass without it.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import mqo.pair_tables
from tests.differential.test_exact_differential import SETTINGS, matcher, record, run_replay
from tests.references.exact_ops import Register
from tests.references.exact_queries import numeric
from tests.references.exact_workloads import Workload, random_workload, workloads
from tests.references.reference import And, Cmp, Col

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
OPTIONS: dict[str, Any] = {"max_tuples": 40, "churn": False, "self_joins": 0}


def keyed(workload: Workload, pick: Any) -> Workload:
    """``workload`` with an equality of two columns ANDed to every query over two streams
    (``pick(choices)`` chooses each side's column)."""
    ops = []
    for op in workload.ops:
        if isinstance(op, Register) and len(op.query.sources) == 2 and len(set(op.query.streams)) == 2:
            (a, sa), (b, sb) = op.query.sources
            left = Col(a, pick([*numeric(workload.schema, sa), "ts", "id"]))
            right = Col(b, pick([*numeric(workload.schema, sb), "ts", "id"]))
            key = Cmp("=", left, right)
            where = key if op.query.where is None else And((key, op.query.where))
            op = replace(op, query=replace(op.query, where=where))
        ops.append(op)
    return replace(workload, ops=ops)


class KeysTaken:
    """Counts the step's plans that found an equality key (``PairTables.of`` calls it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tables = self.keyed = 0
        found = mqo.pair_tables._equality_key

        def counted(*args: Any) -> Any:
            key = found(*args)
            self.tables += 1
            self.keyed += key is not None
            return key

        monkeypatch.setattr(mqo.pair_tables, "_equality_key", counted)


@settings(max_examples=60, **SETTINGS)
@given(workload=workloads(**OPTIONS), data=st.data())
def test_equi_joins_replayed_equal_the_reference(workload: Workload, data: st.DataObject) -> None:
    workload = keyed(workload, lambda choices: data.draw(st.sampled_from(choices)))
    record(workload)
    with pytest.MonkeyPatch.context() as patch:
        keys = KeysTaken(patch)
        run_replay(workload, matcher(order="adaptive", store="candidates"))
    event("the step probed by key" if keys.keyed else "no key (or no step)")


def test_equi_joins_take_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded workloads: replays equal the reference, and most steps probe by key."""
    keys = KeysTaken(monkeypatch)
    for seed in range(40):
        rng = random.Random(seed)
        run_replay(keyed(random_workload(seed, **OPTIONS), rng.choice), matcher(order="AJW", store="candidates"))
    assert keys.keyed >= keys.tables // 2 > 0, (keys.keyed, keys.tables)
