"""``explain``: what is shared, in words a user can check against their queries.

For each predicate type it lists the predicate lists with their predicates in covering
order (ascending constant; the header says which end covers most), the bit position of
each predicate in the thesis' ``list:pred`` notation and as a bit number, and which
queries use it. Then each query's bits (its QED), its residual predicates, and the
sharing ratio: predicate occurrences over distinct predicates.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from mqo.plan import TYPES, CompiledList, CompiledPlan, Slot
from mqo.registry import QueryRegistry
from predicates import Kind, format_constant, most_covering_first
from predicates.numbers import exact

if TYPE_CHECKING:
    from mqo.aggregation import Aggregator
    from mqo.reorder import AdaptivePolicy

_TITLES = {
    Kind.ATTRIBUTE: "Attribute predicate lists",
    Kind.JOIN: "Join predicate lists",
    Kind.WINDOW: "Window predicate lists",
}


def slot_label(slot: Slot) -> str:
    if slot.multi_disjunct:
        return f"{slot.name}[{slot.disjunct + 1}]"
    return slot.name


def _users(lst: CompiledList, position: int, plan: CompiledPlan) -> str:
    return ", ".join(slot_label(plan.slots[int(q)]) for q in sorted(lst.users_of(position).tolist()))


def _predicate_text(lst: CompiledList, constant: object) -> str:
    key = lst.key
    return f"{key.left} {key.op} {key.rhs_text(constant)}"


def _covering_note(lst: CompiledList) -> str:
    op = lst.key.op
    if op in ("=", "!="):
        return "equality: one search" if lst.right_pos is None else "equality"
    return "most covering last" if most_covering_first(op) else "most covering first"


def explain_matcher(
    registry: QueryRegistry,
    plan: CompiledPlan,
    order: tuple[Kind, ...],
    policy: AdaptivePolicy | None,
    aggregator: Aggregator | None,
) -> str:
    """A matcher's explanation: :func:`explain_text` under its order (``policy``: the
    adaptive order's statistics, None under a static ``order``), then its aggregate
    queries'."""
    if policy is None:
        text = explain_text(registry, plan, order=f"static {''.join(k.name[0] for k in order)}")
    else:
        notes = policy.describe() or ["no tuples seen yet; starting with AJW for every stream"]
        text = explain_text(registry, plan, order="adaptive", order_note=notes)
    if aggregator is not None and len(aggregator):
        text += "\n\n" + "\n".join(aggregator.explain()) + "\n"
    return text


def explain_text(
    registry: QueryRegistry,
    plan: CompiledPlan,
    *,
    order: str | None = None,
    order_note: Iterable[str] = (),
) -> str:
    out: list[str] = []
    real = plan.streams[: plan.n_real]
    streams = ", ".join(f"{s.name}({', '.join(f'{c.name} {c.ctype.value}' for c in s.columns)})" for s in real)
    out.append(f"Streams: {streams}")
    if plan.n_real < len(plan.streams):
        # self-joins: the k-th alias of a stream in FROM reads its role k (B#2, ...)
        roles = ", ".join(s.name for s in plan.streams[plan.n_real :])
        out.append(f"Roles (a stream's k-th alias in FROM reads role #k): {roles}")
    n_queries = len(registry)
    out.append(
        f"Queries: {n_queries} registered as {len(plan.slots)} slot(s); "
        f"sharing ratio {registry.sharing_ratio():.2f} "
        f"({registry.predicate_occurrences()} predicate occurrences / {registry.distinct_predicates()} distinct)"
    )
    if order is not None:
        out.append(f"Evaluation order: {order}")
        out.extend(f"  {line}" for line in order_note)
    for kind in TYPES:
        lists = plan.lists[kind]
        out.append("")
        out.append(f"{_TITLES[kind]} ({len(lists)} list(s), {plan.bits[kind]} bit(s))")
        if not lists:
            out.append("  (none)")
        for lst in lists:
            out.append(f"  list {lst.index}: {lst.key.describe()}    [{_covering_note(lst)}]")
            constants = lst.values
            width = max(len(_predicate_text(lst, c)) for c in constants)
            for i, c in enumerate(constants):
                text = _predicate_text(lst, c)
                out.append(
                    f"    {lst.index}:{i:<3} bit {lst.base + i:<4} {text:<{width}}   queries {_users(lst, i, plan)}"
                )
    residual_lines = [f"  query {slot_label(slot)}: {text}" for slot in plan.slots for text in slot.residual_texts]
    out.append("")
    out.append("Residual predicates (evaluated last, not shared)")
    out.extend(residual_lines or ["  (none)"])
    out.append("")
    out.append("Queries and their bits (QED)")
    for slot in plan.slots:
        rq = slot.query
        streams = ", ".join(
            alias if alias == stream else f"{stream} AS {alias}" + (f" (role {role})" if role != stream else "")
            for (alias, stream), role in zip(rq.aliases, rq.compiled.context.bound.roles, strict=True)
        )
        window = (
            f"  MAXWINDOW {format_constant(exact(rq.compiled.maxwindow))} s"
            if rq.compiled.maxwindow is not None
            else ""
        )
        out.append(f"  {slot_label(slot)}: FROM {streams}{window}")
        parts = []
        positions = plan.slot_positions(slot.index)
        for kind in TYPES:
            mine = sorted((li, pi) for k, li, pi in positions if k is kind)
            if mine:
                base = {lst.index: lst.base for lst in plan.lists[kind]}
                bits = ", ".join(f"{li}:{pi} (bit {base[li] + pi})" for li, pi in mine)
                parts.append(f"{kind.letter} {bits}")
        out.append("    " + ("; ".join(parts) if parts else "no indexed predicates"))
    never = [rq.name for rq in registry if not rq.disjuncts]
    if never:
        out.append("")
        out.append(f"Never match (their condition is always false): {', '.join(never)}")
    return "\n".join(out)
