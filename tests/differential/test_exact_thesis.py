"""The thesis' workloads (experiments/workloads) on random data whose values are the
queries' own constants and their neighbours, against the exact reference.

The reference reads the files with its own small reader (tests/references/thesis_queries.py);
the first test holds that what it read is what the engine reads: each query printed
from the structure compiles to the same normalized form as the file's text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predicates import Catalog
from predicates.frontend import compile_queries
from tests.conftest import WORKLOADS, workload_schema
from tests.differential.test_exact_differential import ORDERS, SETTINGS, matcher, record, run_push
from tests.references.thesis_queries import read_workload, thesis_workloads
from tests.unit.test_golden import render

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")  # late tuples are expected

FILES = sorted(WORKLOADS.glob("*.mqo"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_reference_reads_what_the_engine_reads(path: Path) -> None:
    schema, queries = read_workload(path, workload_schema(path))
    catalog = Catalog.from_ddl(workload_schema(path).read_text())
    assert schema.ddl() and len(schema.streams) == len(list(catalog))
    from_file = render(compile_queries(path.read_text(), catalog, source_name=path.name))
    printed = "\n\n".join(q.to_text() for q in queries)
    assert render(compile_queries(printed, catalog, source_name="printed")) == from_file


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
@settings(max_examples=30, **SETTINGS)
@given(data=st.data())
def test_thesis_workloads(path: Path, data: Any) -> None:
    schema, queries = read_workload(path, workload_schema(path))
    workload = data.draw(thesis_workloads(schema, queries), label="workload")
    record(workload)
    run_push(workload, matcher(order=data.draw(st.sampled_from((*ORDERS, "adaptive")), label="order")))
