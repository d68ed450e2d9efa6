"""What ``GET /explain`` and the page show of the shared plan, as JSON.

The plan's structure is read from :meth:`mqo.Matcher.explain`, the engine's own account
of what is shared (its text is returned as well): each predicate list in covering order
with its predicates, their bits and the queries that read them; each query's bits; the
evaluation order and the adaptive order's observed fan-outs per stream. Selectivities
are measured as ``mqo profile`` measures them (:func:`runtime.local.profile.list_selectivity`,
every predicate evaluated by itself) on the most recent tuples of each stream, kept by
:class:`RecentTuples`: the share of tuples (or, for join and window lists, of tuple
pairs within the list's window) that satisfy some predicate of the list.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from mqo import Matcher
from runtime.local.profile import Event, list_selectivity

SAMPLE = 256  # recent tuples per stream that selectivities are measured on
_SECTION = re.compile(r"^(Attribute|Join|Window) predicate lists \(")
_LIST = re.compile(r"^  list (\d+): (.*?)\s{4}\[(.*)\]$")
_PREDICATE = re.compile(r"^    (\d+):(\d+)\s+bit (\d+)\s+(.*?)\s+queries (.*)$")
_QUERY = re.compile(r"^  (\S+): FROM (.*?)(?:  MAXWINDOW (.*))?$")
_STREAM_ORDER = re.compile(r"^  (\S+) tuples \(([\d,]+) seen\): order (\w+)$")
_FANOUT = re.compile(r"([AJW]) fan-out (\S+), work (\S+)/partial")
_SHARING = re.compile(r"sharing ratio ([\d.]+) \((\d+) predicate occurrences / (\d+) distinct\)")


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
    text = matcher.explain()
    data = parse_explain(text)
    selectivity = selectivities(matcher, recent)
    for lst in data["lists"]:
        lst["selectivity"] = selectivity.get((lst["kind"], lst["key"]))
    data["text"] = text
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


def parse_explain(text: str) -> dict[str, Any]:
    lists: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    order: dict[str, Any] = {"mode": None, "streams": []}
    kind = None
    section = None
    for line in text.splitlines():
        if line.startswith("Queries:"):
            found = _SHARING.search(line)
            if found:
                order["sharing_ratio"] = float(found.group(1))
                order["occurrences"], order["distinct"] = int(found.group(2)), int(found.group(3))
            continue
        if line.startswith("Evaluation order:"):
            order["mode"] = line.partition(":")[2].strip()
            section = "order"
            continue
        heading = _SECTION.match(line)
        if heading:
            kind, section = heading.group(1)[0], "lists"
            continue
        if line.startswith("Queries and their bits"):
            section = "queries"
            continue
        if line.startswith("Residual predicates") or not line.strip():
            section = None if section != "lists" else section
            continue
        if section == "order":
            stream = _STREAM_ORDER.match(line)
            if stream:
                order["streams"].append(
                    {"stream": stream.group(1), "seen": int(stream.group(2).replace(",", "")), "order": stream.group(3)}
                )
            elif order["streams"] and "fan-out" in line:
                order["streams"][-1]["fanout"] = {letter: _float(f) for letter, f, _ in _FANOUT.findall(line)}
        elif section == "lists":
            found = _LIST.match(line)
            if found:
                lists.append(
                    {
                        "kind": kind,
                        "index": int(found.group(1)),
                        "key": found.group(2),
                        "note": found.group(3),
                        "predicates": [],
                    }
                )
                continue
            pred = _PREDICATE.match(line)
            if pred and lists:
                lists[-1]["predicates"].append(
                    {
                        "position": f"{pred.group(1)}:{pred.group(2)}",
                        "bit": int(pred.group(3)),
                        "text": pred.group(4),
                        "queries": [q.strip() for q in pred.group(5).split(",") if q.strip()],
                    }
                )
        elif section == "queries":
            found = _QUERY.match(line)
            if found:
                queries.append({"id": found.group(1), "from": found.group(2), "maxwindow": found.group(3)})
            elif queries and line.startswith("    "):
                queries[-1]["bits"] = line.strip()
    for lst in lists:
        lst["readers"] = sorted({q for p in lst["predicates"] for q in p["queries"]})
    return {"lists": lists, "queries": queries, "order": order}


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # "-": not measured yet
