"""A query file registered by its path and read in parts (``Matcher.register_query_file``,
what ``mqo match --queries`` does) against the exact reference
(tests/references/reference.py): the queries of a seeded workload that the template
cache reads (their constants taken from the data: ties, non-dyadic decimals), each
written into one file forty times under other names, registered with parts forced a
few hundred bytes long (and compiled from the parts, never read whole), then the
workload's tuples pushed and every result checked."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import mqo.matcher
from indexes.template_kernels import scan_bytes
from predicates import Catalog
from predicates.token_cache import TokenCache
from tests.differential.test_exact_differential import apply_reference, compare, engine_op, matcher
from tests.references.exact_workloads import Push, Register, Workload, many_queries
from tests.references.reference import engine_results

pytestmark = pytest.mark.filterwarnings("ignore:late tuple:UserWarning")


@pytest.mark.parametrize("seed", range(4))
def test_a_query_file_read_in_parts_matches_as_the_reference(seed: int, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    full = many_queries(seed, n_queries=150, run=300)
    # the queries the template cache reads (a file of them is compiled part by part,
    # without the parser); the others would send the file to the whole read
    texts = [op.query.to_text() for op in full.ops if isinstance(op, Register)]
    compiler = TokenCache(Catalog.from_ddl(full.schema.ddl()))
    compiler.templates.scanner = scan_bytes
    reading = compiler.templates.read(texts)
    read = [op for k, op in enumerate(full.ops[: len(texts)]) if reading.read(k) is not None]
    assert read
    # each read query many times under other names (its constants, taken from the data,
    # the same): a file of hundreds of queries of its shapes
    copies = [Register(replace(op.query, name=f"{op.query.name}_{j}")) for j in range(40) for op in read]
    workload = Workload(full.schema, full.lateness, [*copies, *(op for op in full.ops if not isinstance(op, Register))])
    registers = [op for op in workload.ops if isinstance(op, Register)]
    path = tmp_path / "queries.mqo"
    path.write_text("".join(op.query.to_text() + "\n" for op in registers), encoding="utf-8")
    monkeypatch.setattr(mqo.matcher, "CHUNK_CHARS", 800)
    read_in_parts: list[bool] = []
    eng, ref = matcher()(workload), workload.reference()
    register_read = eng.registrations.register_read

    def spied(texts):  # type: ignore[no-untyped-def]
        ids = register_read(texts)
        read_in_parts.append(ids is not None)
        return ids

    monkeypatch.setattr(eng.registrations, "register_read", spied)
    assert eng.register_query_file(path) == [op.query.name for op in registers]
    for op in registers:
        apply_reference(ref, op)
    assert read_in_parts == [True]  # (cut into parts and compiled from them, never read whole)
    for step, op in enumerate(workload.ops[len(registers) :]):
        where = f"seed {seed}, step {step} ({op!r}), read in parts: {read_in_parts}"
        if isinstance(op, Push):
            got = engine_results(eng.push(op.stream, op.ts, dict(op.values), id=op.id))
            compare(where, got, apply_reference(ref, op))
        else:
            engine_op(eng, ref, op, where)
