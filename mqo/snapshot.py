"""A whole matcher's snapshot (:meth:`mqo.Matcher.snapshot`, :meth:`mqo.Matcher.restore`):
its format, its parts, and the checks of a restore.

A snapshot is plain Python data: the format number and the settings (this module), the
streams and queries (:class:`~mqo.registrations.Registrations`; the aggregate queries'
state through :mod:`mqo.aggregation.persist`), and the matching state: stored tuples,
clocks, late tuples kept, held results and the adaptive order's statistics, so that a
restored matcher evaluates exactly as the first would (:class:`~mqo.pipeline.Pipeline`).
Each part is written and read by the module that owns its state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mqo.config import MatcherConfig

if TYPE_CHECKING:
    from mqo.pipeline import Pipeline
    from mqo.registrations import Registrations

# 5: per-stream clocks; 6: held results of emit='ordered'; 7: a table's rows as one entry
SNAPSHOT_FORMAT = 7
READABLE_FORMATS = (5, 6, 7)


def take_snapshot(
    config: MatcherConfig, queries: Registrations, pipeline: Pipeline, with_queries: bool
) -> dict[str, Any]:
    """The snapshot of a matcher with these parts (``with_queries=False``: without the
    match queries, for a restore ``like=`` a matcher that has them)."""
    queries.compiled_whole()  # the state exists once the plan does; list numbers as restored
    return {
        "format": SNAPSHOT_FORMAT,
        "settings": config.as_dict(),
        **queries.snapshot(with_queries),
        **pipeline.snapshot(),
    }


def restored_config(snapshot: Mapping[str, Any], shared: bool, overrides: Mapping[str, Any]) -> MatcherConfig:
    """The settings of a matcher restored from ``snapshot`` with ``overrides``, after
    checking that it can be (``shared``: the queries come from a matcher ``like=``)."""
    if snapshot.get("format") not in READABLE_FORMATS:
        raise ValueError(f"unsupported snapshot format {snapshot.get('format')!r}")
    if not shared and "queries" not in snapshot:
        raise ValueError("this snapshot has no queries (snapshot(queries=False)); restore it with like=")
    return MatcherConfig(**{**snapshot["settings"], **overrides})


def load_snapshot(
    snapshot: Mapping[str, Any], queries: Registrations, pipeline: Pipeline, like: Registrations | None
) -> None:
    """Continue a fresh matcher's ``queries`` and ``pipeline`` from ``snapshot``
    (sharing ``like``'s compiled plan when given)."""
    pipeline.load(snapshot, queries.restore(snapshot, like))
