"""The adaptive reorderer: which predicate type to evaluate first, and which list first.

The thesis re-picked the order of the three predicate types every N tuples from their
measured selectivity. Here:

* **statistics are kept per arriving stream**: a new T tuple and a new B tuple meet
  very different windows and joins, so each stream gets its own order;
* per stream and type the engine reports, for every tuple, how many partial results
  entered and left the type's phase, and for a sample of tuples how long the phase
  took. Decayed averages give the type's **fan-out** ``f`` (partials out per partial
  in: below 1 it filters, above 1 it multiplies) and **cost** ``c`` (ns per partial in);
* an order ``X, Y, Z`` is estimated to cost ``c_X + f_X c_Y + f_X f_Y c_Z`` per tuple,
  which weighs selectivity against cost: a join phase that creates many partials costs
  more than an attribute test, even when it filters as well;
* the order is re-picked when a **change detector** fires (a fast and a slow average
  of a type's log fan-out or log cost drift apart), not on a fixed schedule, and only
  switched when the best order is estimated cheaper by more than a **hysteresis**
  margin, so it does not flap on noise;
* now and then one tuple runs a different order (**exploration**), so the averages of
  types that rarely run (behind a selective first phase) do not go stale.

Within the attribute type, lists are tried most selective first: the engine stops at
the first list that rules out every candidate, so a tuple fails fast. The reorderer
keeps each list's decayed pass rate (the fraction of its predicates a tuple
satisfies) for that.

Reordering never changes results, only the work done (the differential tests run the
engine under ``adaptive`` against the reference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import permutations

from predicates import Kind

TYPES = (Kind.ATTRIBUTE, Kind.JOIN, Kind.WINDOW)
ALL_ORDERS: tuple[tuple[Kind, Kind, Kind], ...] = tuple(permutations(TYPES))  # type: ignore[assignment]
LETTERS = {Kind.ATTRIBUTE: "A", Kind.JOIN: "J", Kind.WINDOW: "W"}


def order_name(order: tuple[Kind, ...]) -> str:
    return "".join(LETTERS[k] for k in order)


@dataclass
class Average:
    """An exponentially decayed average (``rate`` = weight of a new value)."""

    rate: float
    value: float | None = None

    def add(self, x: float) -> None:
        self.value = x if self.value is None else self.value + self.rate * (x - self.value)


@dataclass
class TypeStats:
    """One predicate type's measurements for tuples of one stream."""

    fanout: Average = field(default_factory=lambda: Average(0.05))
    cost: Average = field(default_factory=lambda: Average(0.05))
    fast: Average = field(default_factory=lambda: Average(0.3))
    slow: Average = field(default_factory=lambda: Average(0.03))
    fast_cost: Average = field(default_factory=lambda: Average(0.3))
    slow_cost: Average = field(default_factory=lambda: Average(0.03))
    samples: int = 0

    def observe_counts(self, entered: int, left: int) -> None:
        if not entered:
            return
        ratio = left / entered
        self.fanout.add(ratio)
        log = math.log(ratio + 1e-3)
        self.fast.add(log)
        self.slow.add(log)
        self.samples += 1

    def observe_time(self, entered: int, ns: int) -> None:
        if not entered:
            return
        per = ns / entered
        self.cost.add(per)
        log = math.log(per + 1.0)
        self.fast_cost.add(log)
        self.slow_cost.add(log)

    def drifted(self, threshold: float) -> bool:
        pairs = ((self.fast, self.slow), (self.fast_cost, self.slow_cost))
        return any(f.value is not None and s.value is not None and abs(f.value - s.value) > threshold for f, s in pairs)

    def settle(self) -> None:
        """After a re-pick: the slow averages take up the current level."""
        self.slow.value = self.fast.value
        self.slow_cost.value = self.fast_cost.value


@dataclass
class Switch:
    """A change of order, for the record (``explain`` and the reordering experiment)."""

    tuple_number: int
    stream: str
    old: str
    new: str
    estimates: dict[str, float]


class AdaptivePolicy:
    """Per-stream evaluation orders driven by measured selectivity and cost."""

    def __init__(
        self,
        stream_names: list[str],
        initial: tuple[Kind, Kind, Kind] = (Kind.ATTRIBUTE, Kind.JOIN, Kind.WINDOW),
        *,
        hysteresis: float = 0.15,
        drift: float = 0.5,
        time_every: int = 4,
        explore_every: int = 97,
        warmup: int = 16,
    ) -> None:
        self.streams = list(stream_names)
        n = len(stream_names)
        self.orders: list[tuple[Kind, Kind, Kind]] = [initial] * n
        self.stats = [{k: TypeStats() for k in TYPES} for _ in range(n)]
        self.list_pass: dict[int, Average] = {}
        self.hysteresis = hysteresis
        self.drift = drift
        self.time_every = time_every
        self.explore_every = explore_every
        self.warmup = warmup
        self.seen = [0] * n
        self.total = 0
        self.switches: list[Switch] = []
        self.history: list[tuple[int, str, str]] = []

    # ------------------------------------------------------------ the engine side

    def order_for(self, stream: int) -> tuple[Kind, Kind, Kind]:
        """The order for the next tuple of ``stream`` (sometimes an exploring one)."""
        seen = self.seen[stream]
        if seen and seen % self.explore_every == 0:
            current = self.orders[stream]
            return ALL_ORDERS[(ALL_ORDERS.index(current) + 1 + seen // self.explore_every) % len(ALL_ORDERS)]
        return self.orders[stream]

    def timed(self, stream: int) -> bool:
        """Whether to time the phases of this tuple (a sample keeps timing cheap)."""
        return self.seen[stream] % self.time_every == 0

    def observe(self, stream: int, phases: list[tuple[Kind, int, int, int]]) -> None:
        """One tuple's phases: (type, partials in, partials out, ns or -1 if not timed)."""
        stats = self.stats[stream]
        for kind, entered, left, ns in phases:
            ts = stats[kind]
            ts.observe_counts(entered, left)
            if ns >= 0:
                ts.observe_time(entered, ns)
        self.seen[stream] += 1
        self.total += 1
        seen = self.seen[stream]
        if seen == self.warmup or (seen > self.warmup and any(s.drifted(self.drift) for s in stats.values())):
            self._repick(stream)

    def observe_list(self, index: int, passed: float) -> None:
        avg = self.list_pass.get(index)
        if avg is None:
            avg = self.list_pass[index] = Average(0.05)
        avg.add(passed)

    def list_order(self, lists: list, default: list) -> list:  # noqa: ANN001
        """Attribute lists, most selective (lowest pass rate) first."""
        if not self.list_pass:
            return default
        return sorted(lists, key=lambda lst: (self.list_pass.get(lst.index, Average(0, 0.5)).value or 0.5))

    # ---------------------------------------------------------------- the policy

    def estimate(self, stream: int, order: tuple[Kind, ...]) -> float:
        """Estimated ns per tuple of ``order`` for tuples of ``stream``."""
        stats = self.stats[stream]
        total = 0.0
        carried = 1.0
        for kind in order:
            ts = stats[kind]
            cost = ts.cost.value if ts.cost.value is not None else 1000.0
            fanout = ts.fanout.value if ts.fanout.value is not None else 1.0
            total += carried * cost
            carried *= fanout
        return total

    def _repick(self, stream: int) -> None:
        current = self.orders[stream]
        estimates = {order_name(o): self.estimate(stream, o) for o in ALL_ORDERS}
        best = min(ALL_ORDERS, key=lambda o: estimates[order_name(o)])
        for ts in self.stats[stream].values():
            ts.settle()
        if best != current and estimates[order_name(best)] < estimates[order_name(current)] * (1 - self.hysteresis):
            self.orders[stream] = best
            self.switches.append(Switch(self.total, self.streams[stream], order_name(current), order_name(best), estimates))
            self.history.append((self.total, self.streams[stream], order_name(best)))

    # ------------------------------------------------------------------ display

    def describe(self) -> list[str]:
        lines = []
        for s, name in enumerate(self.streams):
            if not self.seen[s]:
                continue
            parts = []
            for kind in TYPES:
                ts = self.stats[s][kind]
                f = f"{ts.fanout.value:.3g}" if ts.fanout.value is not None else "-"
                c = f"{ts.cost.value / 1000:.3g} us" if ts.cost.value is not None else "-"
                parts.append(f"{LETTERS[kind]}: fan-out {f}, cost {c}/partial")
            lines.append(f"{name} tuples ({self.seen[s]:,} seen): order {order_name(self.orders[s])}; " + "; ".join(parts))
        if self.switches:
            last = self.switches[-1]
            lines.append(
                f"{len(self.switches)} switch(es); last at tuple {last.tuple_number:,}: {last.stream} {last.old} -> {last.new}"
            )
        return lines
