"""A whole matcher's snapshot (:meth:`mqo.Matcher.snapshot`, :meth:`mqo.Matcher.restore`):
its format, its parts, and the checks of a restore.

A snapshot is plain data (docs/SNAPSHOTS.md; :mod:`mqo.snapshot_codec` writes it as
bytes and reads it back, without pickle): the format number, the settings and the
fingerprint of the match queries (this module), the streams and queries
(:class:`~mqo.registrations.Registrations`; the aggregate queries' state through
:mod:`mqo.aggregation.persist`), and the matching state: stored tuples, clocks, late
tuples kept, held results and the adaptive order's statistics, so that a restored
matcher evaluates exactly as the first would (:class:`~mqo.pipeline.Pipeline`). Each
part is written and read by the module that owns its state.

The fingerprint (``queries``: each match query's id with a digest of its text, and
``sha256`` over them all) lets a restore ``like=`` another matcher check that it has
the queries the snapshot was taken with, and name the ids that differ.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mqo.config import MatcherConfig
from mqo.registry import QueryRegistry, RegisteredQuery, RegisteredRow
from mqo.snapshot_codec import SnapshotError
from predicates.table import block_template

if TYPE_CHECKING:
    from mqo.pipeline import Pipeline
    from mqo.registrations import Registrations

# 5: per-stream clocks; 6: held results of emit='ordered'; 7: a table's rows as one entry;
# 8: plain data only (the adaptive order's statistics no longer pickled), the queries' fingerprint
SNAPSHOT_FORMAT = 8
READABLE_FORMATS = (8,)


def take_snapshot(
    config: MatcherConfig, registrations: Registrations, pipeline: Pipeline, with_queries: bool
) -> dict[str, Any]:
    """The snapshot of a matcher with these parts (``with_queries=False``: without the
    match queries, for a restore ``like=`` a matcher that has them)."""
    registrations.compiled_whole()  # the state exists once the plan does; list numbers as restored
    return {
        "format": SNAPSHOT_FORMAT,
        "settings": config.as_dict(),
        "query_fingerprint": query_fingerprint(registrations.registry),
        **registrations.snapshot(with_queries),
        **pipeline.snapshot(),
    }


def restored_config(snapshot: Mapping[str, Any], shared: bool, overrides: Mapping[str, Any]) -> MatcherConfig:
    """The settings of a matcher restored from ``snapshot`` with ``overrides``, after
    checking that it can be (``shared``: the queries come from a matcher ``like=``)."""
    check_format(snapshot.get("format"))
    if not shared and "queries" not in snapshot:
        raise SnapshotError("this snapshot has no queries (snapshot(queries=False)); restore it with like=")
    return MatcherConfig(**{**snapshot["settings"], **overrides})


def load_snapshot(
    snapshot: Mapping[str, Any], registrations: Registrations, pipeline: Pipeline, like: Registrations | None
) -> None:
    """Continue a fresh matcher's ``registrations`` and ``pipeline`` from ``snapshot``
    (sharing ``like``'s compiled plan when given: it must have the snapshot's queries)."""
    if like is not None and "query_fingerprint" in snapshot:
        check_same_queries(snapshot["query_fingerprint"], query_fingerprint(like.registry))
    pipeline.load(snapshot, registrations.restore(snapshot, like))


def check_format(found: Any) -> None:
    """A snapshot's format number must be this version's (older ones held pickles)."""
    if found in READABLE_FORMATS:
        return
    if isinstance(found, int) and not isinstance(found, bool) and found > SNAPSHOT_FORMAT:
        raise SnapshotError(
            f"the snapshot was made by a newer version of mqo (format {found}; this version reads {SNAPSHOT_FORMAT})"
        )
    if isinstance(found, int) and not isinstance(found, bool):
        raise SnapshotError(
            f"the snapshot was made by an older version of mqo (format {found}; this version reads "
            f"{SNAPSHOT_FORMAT}); take a new snapshot, or start over"
        )
    raise SnapshotError(f"not a matcher snapshot (its format is {found!r})")


# per registry: (its version when computed, the fingerprint); a Spark worker's matchers
# all share one template's registry, and snapshot it in every micro-batch
_FINGERPRINTS: weakref.WeakKeyDictionary[QueryRegistry, tuple[int, dict[str, Any]]] = weakref.WeakKeyDictionary()


def query_fingerprint(registry: QueryRegistry) -> dict[str, Any]:
    """The match queries' fingerprint: ``queries`` maps each id to a digest of its text
    (:func:`_query_digest`), ``sha256`` digests the sorted (id, digest) pairs."""
    cached = _FINGERPRINTS.get(registry)
    if cached is None or cached[0] != registry.version:
        templates: dict[int, bytes] = {}
        by_id = {rq.name: _query_digest(rq, templates) for rq in registry}
        whole = hashlib.sha256()
        for name in sorted(by_id):
            whole.update(f"{len(name)}:{name}:{by_id[name]};".encode())
        cached = (registry.version, {"sha256": whole.hexdigest(), "queries": by_id})
        _FINGERPRINTS[registry] = cached
    fingerprint = cached[1]
    return {"sha256": fingerprint["sha256"], "queries": dict(fingerprint["queries"])}


def _query_digest(rq: RegisteredQuery, templates: dict[int, bytes]) -> str:
    """The first 16 hex digits of the sha256 of a query's text; a table row's (as a
    snapshot keeps it: its block's template and its constants) is digested from those,
    since printing a million rows' texts would take a minute."""
    if type(rq) is RegisteredRow and not rq.context.bound.self_join:
        block = rq.block
        template = templates.get(id(block))
        if template is None:
            template = templates[id(block)] = block_template(block).encode() + b"\0"
        width = block.width
        return hashlib.sha256(template + block.values[rq.row * width : (rq.row + 1) * width].tobytes()).hexdigest()[:16]
    return hashlib.sha256(rq.text.encode()).hexdigest()[:16]


def check_same_queries(taken: Mapping[str, Any], here: Mapping[str, Any]) -> None:
    """Refuse to restore a snapshot ``like=`` a matcher with other match queries than
    the snapshot's (its stored tuples and aggregate rows would meet other queries)."""
    if taken.get("sha256") == here["sha256"]:
        return
    old, new = dict(taken.get("queries") or {}), here["queries"]
    parts = []
    for what, ids in (
        ("missing (in the snapshot, not in like=)", [q for q in old if q not in new]),
        ("extra (in like=, not in the snapshot)", [q for q in new if q not in old]),
        ("changed (another text)", [q for q in old if q in new and old[q] != new[q]]),
    ):
        if ids:
            shown = ", ".join(map(str, ids[:10])) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
            parts.append(f"{what}: {shown}")
    raise SnapshotError(
        "the snapshot was taken with other match queries than the matcher given as like= has; "
        + ("; ".join(parts) if parts else "their fingerprints differ")
    )
