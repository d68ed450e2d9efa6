"""The match queries as snapshot data, and back (the registrations' part of
:meth:`mqo.Matcher.snapshot`, :mod:`mqo.registrations`).

Queries registered as texts are kept as their texts; a run of one block's rows (a
table given to ``register_table``, or 64 or more texts read from one template) is kept
as the block's template with the rows' names and constants, so a million rows print
and compile again in seconds, not minutes. Registration horizons are exact (a
``Fraction`` as its text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from mqo.registered import BlockRun
from mqo.registry import QueryRegistry
from predicates.records import CompiledQuery
from predicates.table import block_template, compile_table, parse_template

if TYPE_CHECKING:
    from mqo.views import ViewGraph


def since_text(since: float | Fraction) -> float | str:
    """A registration horizon as snapshot data (exact: a Fraction as its text)."""
    return since if isinstance(since, float) else str(since)


def since_value(data: float | str) -> float | Fraction:
    """:func:`since_text` read back."""
    return Fraction(data) if isinstance(data, str) else float(data)


def query_entries(
    registry: QueryRegistry, views: ViewGraph
) -> tuple[list[tuple[str, str, float | str]], list[dict[str, Any]]]:
    """The match queries as snapshot data: texts ``(name, text, since)``, and each
    run of a block's rows (one block, one horizon) as its block's template with the
    rows' names and constants, to be registered after the ``at`` first texts."""
    texts: list[tuple[str, str, float | str]] = []
    tables: list[dict[str, Any]] = []
    for run in registry.records().runs:
        if isinstance(run, BlockRun) and not run.block.context.bound.self_join:
            # (a self-join's rows are kept as texts)
            block = run.block
            constants = np.frombuffer(block.values, np.float64).reshape(-1, block.width)
            if run.rows is not None:
                constants = constants[run.rows]
            tables.append(
                {
                    "at": len(texts),
                    "template": block_template(block),
                    "names": list(run.names[run.names_at : run.names_at + len(run)]),
                    "constants": np.ascontiguousarray(constants.reshape(-1)),  # row after row
                    "since": since_text(run.since_ts),
                }
            )
            continue
        for rq in run if not isinstance(run, BlockRun) else map(run.record, range(len(run))):
            view = views.get(rq.name)
            texts.append((rq.name, rq.text if view is None else view.text, since_text(rq.since_ts)))
    return texts, tables


def table_rows(registry: QueryRegistry, next_position: int, table: Mapping[str, Any]) -> Sequence[CompiledQuery]:
    """The queries of one run of block rows written by :func:`query_entries`."""
    names = list(table["names"])
    template = parse_template(table["template"], "<snapshot>")
    constants = np.asarray(table["constants"], np.float64).reshape(len(names), -1)

    def compile_texts(texts: list[str], rows: list[int]) -> Sequence[CompiledQuery]:
        return registry.compile_rows(texts, rows, next_position, "<snapshot>")

    columns = {f"c{j}": constants[:, j] for j in range(constants.shape[1])}
    return compile_table(registry.compiler, template, columns, names, compile_texts)
