"""``explain``: what is shared, in words a user can check against their queries.

:func:`plan_account` gathers the engine's one account of its plan as plain data
(dicts and lists of str, int, float, bool and None: JSON as it is), and
:func:`render_explain` writes ``mqo explain``'s text from that data alone, so the text
and what ``Matcher.explain_data()`` (and the HTTP service's ``GET /explain``) return
cannot say different things.

For each predicate type it lists the predicate lists with their predicates in covering
order (ascending constant; the note says which end covers most), the bit position of
each predicate in the thesis' ``list:pred`` notation and as a bit number, and which
queries use it. Then each query's bits (its QED), its residual predicates, and the
sharing ratio: predicate occurrences over distinct predicates; the evaluation order
with the adaptive order's statistics, the aggregate queries' filters and slice stores,
and the view graph.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from mqo.config import order_name
from mqo.plan import TYPES, CompiledList, CompiledPlan, Slot
from mqo.registry import QueryRegistry
from mqo.reorder import ALL_ORDERS
from mqo.tables import table_lines
from predicates import Kind, format_constant, most_covering_first
from predicates.numbers import exact

if TYPE_CHECKING:
    from mqo.aggregation import Aggregator
    from mqo.reorder import AdaptivePolicy
    from mqo.views import ViewGraph

_TITLES = {
    Kind.ATTRIBUTE: "Attribute predicate lists",
    Kind.JOIN: "Join predicate lists",
    Kind.WINDOW: "Window predicate lists",
}
_NO_TUPLES_YET = "no tuples seen yet; starting with AJW for every stream"


def slot_label(slot: Slot) -> str:
    if slot.multi_disjunct:
        return f"{slot.name}[{slot.disjunct + 1}]"
    return slot.name


def _covering_note(lst: CompiledList) -> str:
    op = lst.key.op
    if op in ("=", "!="):
        return "equality: one search" if lst.right_pos is None else "equality"
    return "most covering last" if most_covering_first(op) else "most covering first"


def _optional_float(value: float | Fraction | None) -> float | None:
    return None if value is None else float(value)


# ---------------------------------------------------------------- the account


def plan_account(
    registry: QueryRegistry,
    plan: CompiledPlan,
    order: tuple[Kind, ...],
    policy: AdaptivePolicy | None,
    aggregator: Aggregator | None,
    views: ViewGraph,
    readers: Callable[[str], list[str]],
) -> dict[str, Any]:
    """The plan as plain data: streams, the sharing ratio, the evaluation order (``policy``:
    the adaptive order's statistics, None under a static ``order``), the predicate lists
    in covering order, residuals, each query's streams and bits, the aggregate queries'
    filters and stores, and the view graph (``readers``: the ids reading a view)."""
    real = plan.streams[: plan.n_real]
    return {
        "streams": [
            {"name": s.name, "columns": [{"name": c.name, "type": c.ctype.value} for c in s.columns]} for s in real
        ],
        # self-joins: the k-th alias of a stream in FROM reads its role k (B#2, ...)
        "roles": [s.name for s in plan.streams[plan.n_real :]],
        "registered": len(registry),
        "slots": len(plan.slots),
        "sharing": {
            "ratio": float(registry.sharing_ratio()),
            "occurrences": int(registry.predicate_occurrences()),
            "distinct": int(registry.distinct_predicates()),
        },
        "order": _order_account(order, policy),
        "bits": {kind.letter: int(plan.bits[kind]) for kind in TYPES},
        "lists": [_list_account(lst, plan) for kind in TYPES for lst in plan.lists[kind]],
        "residuals": [
            {"slot": slot_label(slot), "id": slot.name, "text": text}
            for slot in plan.slots
            for text in slot.residual_texts
        ],
        "queries": [_query_account(slot, plan) for slot in plan.slots],
        "never_match": [rq.name for rq in registry if not rq.disjuncts],
        "aggregates": _aggregate_account(aggregator) if aggregator is not None and len(aggregator) else None,
        "views": _view_account(views, readers),
    }


def _order_account(order: tuple[Kind, ...], policy: AdaptivePolicy | None) -> dict[str, Any]:
    if policy is None:
        return {"mode": f"static {''.join(k.name[0] for k in order)}", "streams": [], "switches": None}
    streams = []
    for s, name in enumerate(policy.streams):
        if not policy.seen[s]:
            continue
        stats = [policy.stats[s][(kind, None)] for kind in TYPES]
        streams.append(
            {
                "stream": name,
                "seen": int(policy.seen[s]),
                "order": order_name(policy.orders[s]),
                # per type: partial results out per partial in, and work per partial (None: not measured yet)
                "fanout": {k.letter: _optional_float(st.fanout.value) for k, st in zip(TYPES, stats, strict=True)},
                "work": {k.letter: _optional_float(st.cost.value) for k, st in zip(TYPES, stats, strict=True)},
                "estimated_work": {order_name(o): float(policy.estimate(s, o)) for o in ALL_ORDERS},
            }
        )
    switches = None
    if policy.switches:
        last = policy.switches[-1]
        switches = {
            "count": len(policy.switches),
            "last": {"tuple": int(last.tuple_number), "stream": last.stream, "from": last.old, "to": last.new},
        }
    return {"mode": "adaptive", "streams": streams, "switches": switches}


def _list_account(lst: CompiledList, plan: CompiledPlan) -> dict[str, Any]:
    key = lst.key
    predicates: list[dict[str, Any]] = []
    for i, constant in enumerate(lst.values):
        slots = [plan.slots[int(q)] for q in sorted(lst.users_of(i).tolist())]
        predicates.append(
            {
                "position": f"{lst.index}:{i}",
                "bit": int(lst.base + i),
                "text": f"{key.left} {key.op} {key.rhs_text(constant)}",
                "slots": [slot_label(slot) for slot in slots],
                "queries": list(dict.fromkeys(slot.name for slot in slots)),  # registered ids, once each
            }
        )
    return {
        "kind": lst.kind.letter,
        "index": int(lst.index),
        "key": key.describe(),
        "note": _covering_note(lst),
        "predicates": predicates,
        "readers": sorted({q for p in predicates for q in p["queries"]}),
    }


def _query_account(slot: Slot, plan: CompiledPlan) -> dict[str, Any]:
    rq = slot.query
    maxwindow = rq.compiled.maxwindow
    bits = []
    for kind in TYPES:
        base = {lst.index: lst.base for lst in plan.lists[kind]}
        mine = sorted((li, pi) for k, li, pi in plan.slot_positions(slot.index) if k is kind)
        bits += [{"kind": kind.letter, "position": f"{li}:{pi}", "bit": int(base[li] + pi)} for li, pi in mine]
    return {
        "id": slot.name,
        "slot": slot_label(slot),
        "from": [
            {"alias": alias, "stream": stream, "role": role}
            for (alias, stream), role in zip(rq.aliases, rq.compiled.context.bound.roles, strict=True)
        ],
        "maxwindow": None if maxwindow is None else format_constant(exact(maxwindow)),  # seconds, exactly
        "maxwindow_seconds": _optional_float(maxwindow),
        "bits": bits,
    }


def _aggregate_account(aggregator: Aggregator) -> dict[str, Any]:
    stores = []
    for key, store in aggregator.stores.items():
        stream, fid, group, grid = key[:4]
        readers = [r.query for r in aggregator.queries.values() if r.store_key == key]
        stores.append(
            {
                "stream": stream,
                "filter": fid,
                "group_by": list(group),
                "slice_seconds": float(grid),  # slice edges every this many seconds from ts 0
                "landmark": bool(store.landmark),
                "slices_kept": int(store.slices_kept),
                "groups": len(store.group_keys),
                "partials": [
                    {"column": c, "integer": bool(i)} for c, i in zip(store.columns, store.integer, strict=True)
                ],
                "readers": [
                    {
                        "query": aq.name,
                        "size_seconds": _optional_float(aq.window.size),  # None: UNBOUNDED
                        "slide_seconds": float(aq.window.slide),
                        "calls": [c.text() for c in aq.calls],
                        "stream_op": aq.stream_op,
                    }
                    for aq in readers
                ],
            }
        )
    count_stores = []
    for key, cs in aggregator.count_stores.items():
        stream, fid, group = key[:3]
        count_stores.append(
            {
                "stream": stream,
                "filter": fid,
                "group_by": list(group),
                "grain": int(cs.grain),
                "groups": len(cs.group_keys),
                "slices_kept": int(cs.slices_kept),
                "rows_held": int(cs.rows_held),
                "readers": [
                    {
                        "query": name,
                        "rows": int(n),
                        "slide_rows": int(m),
                        "calls": [c.text() for c in aggregator.queries[name].query.calls],
                        "stream_op": aggregator.queries[name].query.stream_op,
                    }
                    for name, (n, m) in cs.readers.items()
                ],
            }
        )
    return {
        "queries": list(aggregator.queries),
        "filters": [
            {"id": fid, "text": aggregator.filter_texts[fid], "readers": sorted(users)}
            for fid, users in aggregator.filter_users.items()
        ],
        "stores": stores,
        "count_stores": count_stores,
    }


def _view_account(views: ViewGraph, readers: Callable[[str], list[str]]) -> list[dict[str, Any]]:
    level = views.levels()
    return [
        {
            "name": view.name,
            "level": level[view.name.lower()],
            "columns": [{"name": c.name, "type": c.ctype.value} for c in view.schema.columns],
            "inputs": list(view.reads),
            "readers": readers(view.name),
        }
        for view in views
    ]


# ---------------------------------------------------------------- the text


def render_explain(data: dict[str, Any]) -> str:
    """``mqo explain``'s text, written from :func:`plan_account`'s data only."""
    text = "\n".join(_plan_lines(data))
    if data["aggregates"] is not None:
        text += "\n\n" + "\n".join(_aggregate_lines(data["aggregates"])) + "\n"
    if data["views"]:
        text += "\n\n" + "\n".join(_view_lines(data["views"])) + "\n"
    if data.get("tables"):
        text += "\n\n" + "\n".join(table_lines(data["tables"])) + "\n"
    return text


def _columns(columns: list[dict[str, str]]) -> str:
    return ", ".join(f"{c['name']} {c['type']}" for c in columns)


def _plan_lines(data: dict[str, Any]) -> list[str]:
    streams = ", ".join(f"{s['name']}({_columns(s['columns'])})" for s in data["streams"])
    out = [f"Streams: {streams}"]
    if data["roles"]:
        out.append(f"Roles (a stream's k-th alias in FROM reads role #k): {', '.join(data['roles'])}")
    sharing = data["sharing"]
    out.append(
        f"Queries: {data['registered']} registered as {data['slots']} slot(s); "
        f"sharing ratio {sharing['ratio']:.2f} "
        f"({sharing['occurrences']} predicate occurrences / {sharing['distinct']} distinct)"
    )
    order = data["order"]
    out.append(f"Evaluation order: {order['mode']}")
    if order["mode"] == "adaptive":
        out.extend(f"  {line}" for line in _adaptive_lines(order) or [_NO_TUPLES_YET])
    for kind in TYPES:
        lists = [lst for lst in data["lists"] if lst["kind"] == kind.letter]
        out.append("")
        out.append(f"{_TITLES[kind]} ({len(lists)} list(s), {data['bits'][kind.letter]} bit(s))")
        if not lists:
            out.append("  (none)")
        for lst in lists:
            out.append(f"  list {lst['index']}: {lst['key']}    [{lst['note']}]")
            width = max(len(p["text"]) for p in lst["predicates"])
            for p in lst["predicates"]:
                i = p["position"].partition(":")[2]
                users = ", ".join(p["slots"])
                out.append(f"    {lst['index']}:{i:<3} bit {p['bit']:<4} {p['text']:<{width}}   queries {users}")
    out.append("")
    out.append("Residual predicates (evaluated last, not shared)")
    out.extend([f"  query {r['slot']}: {r['text']}" for r in data["residuals"]] or ["  (none)"])
    out.append("")
    out.append("Queries and their bits (QED)")
    for q in data["queries"]:
        streams = ", ".join(
            f["alias"]
            if f["alias"] == f["stream"]
            else f"{f['stream']} AS {f['alias']}" + (f" (role {f['role']})" if f["role"] != f["stream"] else "")
            for f in q["from"]
        )
        window = f"  MAXWINDOW {q['maxwindow']} s" if q["maxwindow"] is not None else ""
        out.append(f"  {q['slot']}: FROM {streams}{window}")
        parts = []
        for kind in TYPES:
            mine = [b for b in q["bits"] if b["kind"] == kind.letter]
            if mine:
                parts.append(f"{kind.letter} " + ", ".join(f"{b['position']} (bit {b['bit']})" for b in mine))
        out.append("    " + ("; ".join(parts) if parts else "no indexed predicates"))
    if data["never_match"]:
        out.append("")
        out.append(f"Never match (their condition is always false): {', '.join(data['never_match'])}")
    return out


def _measured(value: float | None) -> str:
    return f"{value:.3g}" if value is not None else "-"


def _adaptive_lines(order: dict[str, Any]) -> list[str]:
    lines = []
    for s in order["streams"]:
        parts = [
            f"{k} fan-out {_measured(s['fanout'][k])}, work {_measured(s['work'][k])}/partial" for k in s["fanout"]
        ]
        work = ", ".join(f"{name} {value:.3g}" for name, value in s["estimated_work"].items())
        lines.append(f"{s['stream']} tuples ({s['seen']:,} seen): order {s['order']}")
        lines.append(f"  {'; '.join(parts)}")
        lines.append(f"  estimated work per tuple: {work}")
    switches = order["switches"]
    if switches is not None:
        last = switches["last"]
        lines.append(
            f"{switches['count']} switch(es); last at tuple {last['tuple']:,}: "
            f"{last['stream']} {last['from']} -> {last['to']}"
        )
    return lines


def _group(group_by: list[str]) -> str:
    return ", ".join(group_by) or "-"


def _aggregate_lines(agg: dict[str, Any]) -> list[str]:
    lines = [
        f"aggregate queries: {len(agg['queries'])}, slice stores: {len(agg['stores'])}"
        + (f", count stores: {len(agg['count_stores'])}" if agg["count_stores"] else "")
    ]
    for f in agg["filters"]:
        lines.append(f"  filter {f['id']}: {f['text']}  <- read by {', '.join(f['readers'])}")
    for store in agg["stores"]:
        partials = ", ".join(f"{p['column']} ({'INTEGER' if p['integer'] else 'FLOAT'})" for p in store["partials"])
        lines.append(
            f"  store {store['stream']} / filter {store['filter']} / group by ({_group(store['group_by'])}):"
            f" slice edges every {store['slice_seconds']:g} s from ts 0{' (landmark)' if store['landmark'] else ''};"
            f" {store['slices_kept']} slices x {store['groups']} groups kept"
        )
        lines.append(f"    shared partials: COUNT(*); per column count, sum, min, max, mean/M2: {partials or '-'}")
        for r in store["readers"]:
            size = "UNBOUNDED" if r["size_seconds"] is None else f"{r['size_seconds']:g} s"
            op = "" if r["stream_op"] == "RSTREAM" else f" ({r['stream_op']}: changes since the previous window)"
            calls = ", ".join(r["calls"])
            lines.append(f"    {r['query']}: RANGE {size} SLIDE {r['slide_seconds']:g} s reads {calls}{op}")
    for cs in agg["count_stores"]:
        lines.append(
            f"  count store {cs['stream']} / filter {cs['filter']} / group by ({_group(cs['group_by'])}):"
            f" count slices of {cs['grain']} rows per group; {cs['groups']} groups,"
            f" {cs['slices_kept']} slices and {cs['rows_held']} rows not final yet kept"
        )
        for r in cs["readers"]:
            op = f" ({r['stream_op']}: changes since the group's previous window)"
            op = "" if r["stream_op"] == "RSTREAM" else op
            calls = ", ".join(r["calls"])
            lines.append(f"    {r['query']}: ROWS {r['rows']} SLIDE {r['slide_rows']} reads {calls}{op}")
    return lines


def _view_lines(views: list[dict[str, Any]]) -> list[str]:
    lines = ["Views (each computed once; its rows are a stream the queries reading it match):"]
    for v in views:
        read_by = ", ".join(v["readers"]) if v["readers"] else "no query"
        lines.append(
            f"  {v['name']} (level {v['level']}; ts, id, {_columns(v['columns'])}) <- {', '.join(v['inputs'])};"
            f" read by {read_by}"
        )
    return lines
