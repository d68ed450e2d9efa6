"""What ``GET /explain`` and the page show of the shared plan, as JSON.

The plan's structure is :meth:`mqo.Matcher.explain_data`, the engine's own account of
what is shared (``text`` is ``mqo explain``'s, which the engine writes from that
account): each predicate list in covering order with its predicates, their bits and
the queries that read them; each query's bits; the sharing ratio; the evaluation order
and the adaptive order's observed fan-outs per stream; aggregate stores and views.
Selectivities are measured as ``mqo profile`` measures them
(:func:`runtime.local.profile.list_selectivity`, every predicate evaluated by itself)
on the most recent tuples of each stream, kept by :class:`RecentTuples`: the share of
tuples (or, for join and window lists, of tuple pairs within the list's window) that
satisfy some predicate of the list.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from mqo import Matcher
from runtime.local.profile import Event, list_selectivity

SAMPLE = 256  # recent tuples per stream that selectivities are measured on


class RecentTuples:
    """The last :data:`SAMPLE` tuples of every stream, as posted (engine thread only)."""

    def __init__(self) -> None:
        self.by_stream: dict[str, deque[Event]] = {}

    def add(self, stream: str, batch: dict[str, list[Any]]) -> None:
        kept = self.by_stream.setdefault(stream, deque(maxlen=SAMPLE))
        n = len(batch["ts"])
        ids = batch.get("id")
        names = [k for k in batch if k not in ("ts", "id")]
        for i in range(max(0, n - SAMPLE), n):
            kept.append(Event(stream, batch["ts"][i], None if ids is None else ids[i], {k: batch[k][i] for k in names}))

    def events(self) -> list[Event]:
        return sorted((e for kept in self.by_stream.values() for e in kept), key=lambda e: e.ts)


def explain_data(matcher: Matcher, recent: RecentTuples | None = None) -> dict[str, Any]:
    """The plan as JSON (see the module docstring); ``text`` is ``mqo explain``'s."""
    data = matcher.explain_data()
    data["text"] = matcher.explain()  # from the same account, on the same (engine) thread
    selectivity = selectivities(matcher, recent)
    for lst in data["lists"]:
        lst["selectivity"] = selectivity.get((lst["kind"], lst["key"]))
    data["sample"] = sum(len(k) for k in recent.by_stream.values()) if recent is not None else 0
    return data


def selectivities(matcher: Matcher, recent: RecentTuples | None) -> dict[tuple[str, str], float | None]:
    """(kind letter, list pattern) -> the share of recent tuples (pairs) that satisfy
    some predicate of the list; empty without recent tuples."""
    events = recent.events() if recent is not None else []
    if not events or not matcher.query_ids:
        return {}
    _, lists = list_selectivity(matcher, events)
    return {(s.kind, s.pattern): s.any for s in lists}
