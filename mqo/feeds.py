"""What a tuple may end results with, given what the other streams store.

A result is found when its newest tuple arrives (:mod:`mqo.engine`): a tuple of stream
``s`` can end a result of a slot only if every other stream the slot reads stores a
tuple, and one at or after the tuple's ts where the slot's window predicates want its
partner later (``CompiledPlan.later_partner``). :class:`Feeds` keeps, per stream, what
the other streams store and looks again only when one of them changed (the window
state counts changes per stream): a run of bids between two rows of the views they
join costs a binary search each in :meth:`Feeds.slots_at`, and a comparison each in
:meth:`Feeds.ends_nothing`, which lets a replay store such a run without visiting it.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mqo.plan import CompiledPlan
    from mqo.state import WindowState


class Feeds:
    """Per stream, the slots its tuples may end a result of now (made on first use,
    kept while the other streams do not change)."""

    __slots__ = ("_fed", "plan", "state")

    def __init__(self, plan: CompiledPlan, state: WindowState) -> None:
        self.plan = plan
        self.state = state
        # per stream: (the other streams' changes seen, the slots, their newest ts ascending, the dead slots)
        self._fed: dict[int, tuple[int, int, list[float], list[int]]] = {}

    def clear(self) -> None:
        self._fed.clear()

    def _of(self, s: int) -> tuple[int, int, list[float], list[int]]:
        """Stream ``s``'s entry, made again if another stream changed since
        (:meth:`mqo.state.WindowState.feeding`)."""
        state = self.state
        seen = state.changes - state.changed[s]
        fed = self._fed.get(s)
        if fed is None or fed[0] != seen:
            plan = self.plan
            fed = self._fed[s] = (seen, *state.feeding(s, plan.stream_slots, plan.later_partner[s]))
        return fed

    def slots_at(self, s: int, ts: float) -> int:
        """The slots reading ``s`` that a tuple of ``s`` at ``ts`` may end a result of now.
        O(log streams) while the other streams do not change."""
        fed = self._of(s)
        return fed[1] & ~fed[3][bisect_left(fed[2], ts)]

    def ends_nothing(self, s: int, ts: np.ndarray, wanted: int) -> int:
        """How many of tuples of stream ``s`` at ``ts`` (in arrival order, no other
        stream's tuple stored or purged in between) have none of the slots ``wanted``
        left by :meth:`slots_at`: each ends no result now and need only be stored. One
        pass over the streams, then a comparison per tuple."""
        _, slots, newest, dead = self._of(s)
        slots &= wanted
        if not slots:
            return len(ts)
        # (dead grows with the ts: past the k-th newest ts, dead[k] rules out every slot)
        k = next((k for k, d in enumerate(dead) if not slots & ~d), 0)
        if not k:
            return 0
        reached = np.flatnonzero(ts <= newest[k - 1])
        return int(reached[0]) if len(reached) else len(ts)
