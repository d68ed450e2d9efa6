"""The adaptive reorderer: which predicate type to evaluate first, and which list first.

The thesis re-picked the order of the three predicate types every N tuples from their
measured selectivity. Here:

* **statistics are kept per arriving stream**: a new T tuple and a new B tuple meet
  very different windows and joins, so each stream gets its own order;
* the engine reports, for every tuple, each phase's partials in and out and the
  **work** it did (comparisons, plus partial results made and index probes, which cost
  more than a comparison). Work is counted, not timed, so decisions are the same on a
  busy machine and a quiet one, and reproducible for a seed;
* from these, decayed averages give each type's **fan-out** ``f`` (partials out per
  partial in: below 1 it filters, above 1 it multiplies) and **cost** ``c`` (work per
  partial in), **per position** in the order: a type run second, after another has
  pruned candidates, behaves differently from the same type run first. An order
  ``X, Y, Z`` is estimated to cost ``c_X + f_X c_Y + f_X f_Y c_Z`` per tuple, with each
  type's figures at its position there, which weighs selectivity against cost;
* the order is re-picked when the statistics change. A **change detector** watches,
  per type and position, a fast and a slow average of the log fan-out and log cost;
  when they drift apart, the stream's figures are made quick to re-learn (the next
  measurements weigh 1, 1/2, 1/3, ...), so the estimates follow the new data: the
  positions the running order uses re-learn from every tuple, the others from the
  next exploring tuples. A few tuples later the order is re-picked. It is
  switched only when the best order is estimated cheaper than the current by more
  than a **hysteresis** margin, so it does not flap on noise;
* between changes, one tuple in ``explore_every`` runs another order: mostly the
  runner-up (the order that might take over, and cheap to try because it is close),
  every fourth time one of the others in turn, so the figures of positions the
  current order does not use stay fresh. An order whose trial cost more work than
  ``explore_every`` tuples of the running order (an aggregate view's row growing
  through a window of thousands of bids before its join) is **shunned**: neither
  tried again nor chosen on that stream until its figures drift, so exploring never
  costs more than the tuples it is spread over.

Within the attribute type, lists are tried most selective first: the engine stops at
the first list that rules out every candidate, so a tuple fails fast. The reorderer
keeps each list's decayed pass rate (the fraction of its predicates a tuple
satisfies) for that.

Reordering never changes results, only the work done (the differential tests run the
engine under ``adaptive`` against the reference).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import permutations
from typing import TYPE_CHECKING, Any

from mqo.config import order_name, parse_order
from predicates import INDEXED_KINDS, Kind

if TYPE_CHECKING:
    from indexes.stored import StoredTuple
    from mqo.engine import Engine
    from mqo.results import ResultBlock

TYPES = INDEXED_KINDS
ALL_ORDERS: tuple[tuple[Kind, Kind, Kind], ...] = tuple(permutations(TYPES))  # type: ignore[assignment]
ORDER_NAMES = [order_name(order) for order in ALL_ORDERS]  # (a tuple of Kinds hashes in Python: by index)
_A, _J = Kind.ATTRIBUTE, Kind.JOIN


def _at(kind: Kind, position: int | None) -> int:
    """Where the figures of ``kind`` at ``position`` (None: any) sit in a stream's
    :attr:`AdaptivePolicy.tables` row (a Kind's hash is a Python-level call: the hot
    paths tell the types apart by identity instead)."""
    return (0 if kind is _A else 1 if kind is _J else 2) * 4 + (3 if position is None else position)


@dataclass
class Average:
    """An exponentially decayed average (``rate`` = weight of a new value). After
    :meth:`quicken`, the next values weigh 1, 1/2, 1/3, ... until that falls to ``rate``,
    so a level can be re-learned fast without first being thrown away."""

    rate: float
    value: float | None = None
    fresh: int = 0

    def add(self, x: float) -> None:
        value = self.value
        if value is None:
            self.value = x
            return
        # (every engine tuple adds to eight of these: written without max() and
        # with each attribute read once)
        fresh = self.fresh = self.fresh + 1
        rate = self.rate
        if fresh < 1 / rate and 1.0 / fresh > rate:
            rate = 1.0 / fresh
        self.value = value + rate * (x - value)

    def quicken(self) -> None:
        self.fresh = 0


@dataclass
class TypeStats:
    """One predicate type's measurements at one position, for tuples of one stream.

    ``fanout``/``cost`` average over about 20 tuples, their ``slow_`` twins over about
    200: the change detector compares the two (per-tuple figures are too heavy-tailed
    to compare directly: most tuples make no partial result, a few make dozens)."""

    fanout: Average = field(default_factory=lambda: Average(0.05, fresh=10**9))
    cost: Average = field(default_factory=lambda: Average(0.05, fresh=10**9))
    slow_fanout: Average = field(default_factory=lambda: Average(0.005, fresh=10**9))
    slow_cost: Average = field(default_factory=lambda: Average(0.005, fresh=10**9))
    samples: int = 0

    def observe(self, entered: int, left: int, work: int) -> None:
        if not entered:
            return
        ratio = left / entered
        per = work / entered
        # Each of the four averages takes its value by Average.add's rule, written out
        # here: every phase of every engine tuple lands in two of these, and four method
        # calls a time cost more than the arithmetic (test_reorder holds the two equal)
        for avg, x in ((self.fanout, ratio), (self.cost, per), (self.slow_fanout, ratio), (self.slow_cost, per)):
            value = avg.value
            if value is None:
                avg.value = x
                continue
            fresh = avg.fresh = avg.fresh + 1
            rate = avg.rate
            if fresh < 1 / rate and 1.0 / fresh > rate:
                rate = 1.0 / fresh
            avg.value = value + rate * (x - value)
        self.samples += 1

    def drifted(self, threshold: float) -> bool:
        if self.samples < 50:
            return False
        log = math.log
        fast, slow = self.fanout.value or 0.0, self.slow_fanout.value or 0.0
        if abs(log(fast + 0.01) - log(slow + 0.01)) > threshold:
            return True
        fast, slow = self.cost.value or 0.0, self.slow_cost.value or 0.0
        return abs(log(fast + 1.0) - log(slow + 1.0)) > threshold

    def refresh(self) -> None:
        """After a change: the short averages re-learn fast, the long ones restart
        from them (so the detector does not fire again on the same change)."""
        self.fanout.quicken()
        self.cost.quicken()
        self.slow_fanout.value = self.fanout.value
        self.slow_cost.value = self.cost.value
        self.samples = 0


class TrialTooCostly(Exception):
    """A tuple trying another order passed its work budget
    (:meth:`AdaptivePolicy.trial_budget`): it is matched again in its stream's order."""


@dataclass
class Switch:
    """A change of order, for the record (``explain`` and the reordering experiment)."""

    tuple_number: int
    stream: str
    old: str
    new: str
    estimates: dict[str, float]


class AdaptivePolicy:
    """Per-stream evaluation orders driven by measured selectivity and work."""

    def __init__(
        self,
        stream_names: list[str],
        initial: tuple[Kind, Kind, Kind] = (Kind.ATTRIBUTE, Kind.JOIN, Kind.WINDOW),
        *,
        hysteresis: float = 0.1,
        drift: float = 1.0,
        explore_every: int = 20,
        settle: int = 16,
        warmup: int = 32,
    ) -> None:
        self.streams = list(stream_names)
        n = len(stream_names)
        self.orders: list[tuple[Kind, Kind, Kind]] = [initial] * n
        # stats[stream][(type, position)]; position None: any position
        self.stats: list[dict[tuple[Kind, int | None], TypeStats]] = [
            {(k, p): TypeStats() for k in TYPES for p in (0, 1, 2, None)} for _ in range(n)
        ]
        self.tables = self._tables()
        self.list_pass: dict[int, Average] = {}
        self.hysteresis = hysteresis
        self.drift = drift
        self.explore_every = explore_every
        self.settle = settle
        self.warmup = warmup
        self.seen = [0] * n
        self.explored = [0] * n
        self.reset_at = [-1] * n
        self.running: list[tuple[Kind, Kind, Kind]] = [initial] * n
        # per stream: the work of a tuple run in its chosen order, and the orders whose
        # trial cost more than explore_every such tuples (not tried again until a drift)
        self.typical = [Average(0.05) for _ in range(n)]
        self.shunned: list[set[tuple[Kind, Kind, Kind]]] = [set() for _ in range(n)]
        # per stream, the (drift, warmup) its figures were all last tested with
        self._looked_with: list[tuple[float, int] | None] = [None] * n
        # the estimates of every order an exploring tuple was picked by, for its stream,
        # until that tuple is observed (None: none, or its figures changed since)
        self._costs: tuple[int, list[float]] | None = None
        self.total = 0
        self.changes = 0
        self.switches: list[Switch] = []

    # ------------------------------------------------------------ snapshots

    def state(self) -> dict[str, Any]:
        """The statistics and orders as plain data (a matcher snapshot's part), exact:
        :meth:`from_state` gives a policy that decides as this one would."""
        return {
            "streams": list(self.streams),
            "orders": [order_name(o) for o in self.orders],
            "running": [order_name(o) for o in self.running],
            "typical": [_average_data(avg) for avg in self.typical],
            "shunned": [sorted(order_name(o) for o in orders) for orders in self.shunned],
            # per stream, each (type, position) in the order of _STAT_KEYS
            "stats": [[_type_stats_data(per[key]) for key in _STAT_KEYS] for per in self.stats],
            "list_pass": [[index, *_average_data(avg)] for index, avg in self.list_pass.items()],
            "settings": {name: getattr(self, name) for name in _SETTINGS},
            "seen": list(self.seen),
            "explored": list(self.explored),
            "reset_at": list(self.reset_at),
            "looked_with": [None if looked is None else list(looked) for looked in self._looked_with],
            "total": self.total,
            "changes": self.changes,
            "switches": [dataclasses.asdict(switch) for switch in self.switches],
        }

    @classmethod
    def from_state(cls, data: Mapping[str, Any]) -> AdaptivePolicy:
        """The policy of :meth:`state` data (lists where tuples were are fine)."""
        policy = cls(list(data["streams"]), **data["settings"])
        n = len(policy.streams)
        policy.orders = [_order(name) for name in data["orders"]]
        policy.running = [_order(name) for name in data["running"]]
        if "typical" in data:  # (absent from snapshots of earlier versions: nothing shunned yet)
            policy.typical = [_average(avg) for avg in data["typical"]]
            policy.shunned = [{_order(name) for name in orders} for orders in data["shunned"]]
        stats = data["stats"]
        if not len(policy.orders) == len(policy.running) == len(stats) == len(policy.typical) == n:
            raise ValueError("the adaptive order's statistics do not cover its streams")
        policy.stats = [{key: _type_stats(item) for key, item in zip(_STAT_KEYS, per, strict=True)} for per in stats]
        policy.tables = policy._tables()
        policy.list_pass = {int(index): _average(rest) for index, *rest in data["list_pass"]}
        policy.seen = [int(x) for x in data["seen"]]
        policy.explored = [int(x) for x in data["explored"]]
        policy.reset_at = [int(x) for x in data["reset_at"]]
        policy._looked_with = [
            None if looked is None else (float(looked[0]), int(looked[1])) for looked in data["looked_with"]
        ]
        policy.total = int(data["total"])
        policy.changes = int(data["changes"])
        policy.switches = [Switch(**switch) for switch in data["switches"]]
        return policy

    def _tables(self) -> list[list[TypeStats]]:
        """Per stream, the same figures as :attr:`stats` in a list, at :func:`_at`."""
        tables = []
        for per in self.stats:
            row: list[TypeStats] = [TypeStats()] * 12
            for (kind, position), ts in per.items():
                row[_at(kind, position)] = ts
            tables.append(row)
        return tables

    # ------------------------------------------------------------ the engine side

    def order_for(self, stream: int) -> tuple[Kind, Kind, Kind]:
        """The order for the next tuple of ``stream`` (one in ``explore_every`` explores)."""
        order = self.orders[stream]
        if self.seen[stream] % self.explore_every == self.explore_every - 1:
            shunned = self.shunned[stream]
            others = [o for o in ALL_ORDERS if o != order and o not in shunned]
            turn = self.explored[stream]
            if not others:
                self.explored[stream] += 1
                self.running[stream] = order
                return order
            if turn % 4 == 3:
                order = others[(turn // 4) % len(others)]
            else:
                costs = [self.estimate(stream, o) for o in ALL_ORDERS]
                # (the repick after this tuple takes them again if its figures stay)
                self._costs = (stream, costs)
                order = min(others, key=lambda o: costs[ALL_ORDERS.index(o)])
            self.explored[stream] += 1
        self.running[stream] = order
        return order

    def process(self, engine: Engine, t: StoredTuple, cand: int | None, skip: int = 0) -> list[ResultBlock]:
        """Match ``t`` in its stream's next order, measured: a trial of another order
        that passes its budget (:meth:`trial_budget`) stops, and the tuple is matched
        in the stream's own order (the engine changes no state before it returns)."""
        s = t.stream
        every = self.explore_every
        if self.seen[s] % every != every - 1:
            # what order_for and trial_budget give off an exploring turn, written out:
            # every tuple the engine visits comes here
            order = self.running[s] = self.orders[s]
            engine.budget = None
            blocks = engine.process(t, order, cand, measure=True, skip=skip)
        else:
            order = self.order_for(s)
            engine.budget = self.trial_budget(s)
            try:
                blocks = engine.process(t, order, cand, measure=True, skip=skip)
            except TrialTooCostly:
                self.abandon_trial(s, engine.phases, engine.work())
                engine.budget = None
                blocks = engine.process(t, self.orders[s], cand, measure=True, skip=skip)
        self.observe(s, engine.phases)
        if self.seen[s] % 256 == 1:
            engine.attr_lists[s] = self.list_order(engine.attr_lists[s], engine.attr_lists[s])
        return blocks

    def observe(self, stream: int, phases: list[tuple[Kind, int, int, int]]) -> None:
        """One tuple's phases, in the order they ran: (type, partials in, partials
        out, work). Its work is typical of the running order, or, for a trial of
        another, too much to try that again (more than ``explore_every`` typical tuples)."""
        # (once per tuple the engine visits, most of which run no phase or one:
        # written without helper calls)
        work_done = 0
        changed: list[TypeStats] = []
        picked_by, self._costs = self._costs, None
        if phases:
            table = self.tables[stream]
            for position, (kind, entered, left, work) in enumerate(phases):
                work_done += work
                if entered:  # (no partial in: nothing measured)
                    row = 0 if kind is _A else 4 if kind is _J else 8  # (as _at)
                    at = table[row + position]
                    at.observe(entered, left, work)
                    table[row + 3].observe(entered, left, work)
                    changed.append(at)
        measured = bool(changed)
        running, order = self.running[stream], self.orders[stream]
        exploring = running is not order and running != order
        if not exploring:
            self.typical[stream].add(work_done)
        elif work_done > self._budget(stream):
            self.shunned[stream].add(running)
        seen = self.seen[stream] = self.seen[stream] + 1
        self.total += 1
        if seen < self.warmup:
            return
        looked, drift = self._looked_with[stream], self.drift
        if looked is None or looked[0] != drift or looked[1] != self.warmup:
            # the first look (or new settings): all
            self._looked_with[stream] = (drift, self.warmup)
            changed = [ts for key, ts in self.stats[stream].items() if key[1] is not None]
        # the figures that did not change were looked at when they last did (a drift
        # then refreshed them all): only the changed ones can have drifted since
        for ts in changed:
            if ts.drifted(drift):
                self.refresh(stream)
                return
        if exploring or seen == self.warmup or seen == self.reset_at[stream] + self.settle:
            # (no figure changed since the order was picked: the same estimates)
            costs = picked_by[1] if picked_by is not None and picked_by[0] == stream and not measured else None
            self._repick(stream, costs)

    def trial_budget(self, stream: int) -> int | None:
        """While the next tuple of ``stream`` tries another order: the work past which
        the engine stops the trial (:class:`TrialTooCostly`), what ``explore_every``
        typical tuples cost; None when it runs the stream's own order."""
        return None if self.running[stream] == self.orders[stream] else int(self._budget(stream))

    def abandon_trial(self, stream: int, phases: list[tuple[Kind, int, int, int]], work: int) -> None:
        """The trial passed its budget after ``phases`` and ``work`` in all: its figures
        so far are kept (the phase it stopped in at the work done: a lower bound, so the
        estimates know the order is dear), the order is shunned, and the tuple runs in
        the stream's own order."""
        running = self.running[stream]
        self._costs = None  # (the figures change)
        trial = list(phases)
        rest = work - sum(phase[3] for phase in trial)
        if len(trial) < len(running):
            entered = trial[-1][2] if trial else 1
            trial.append((running[len(trial)], entered, entered, rest))
        else:  # (stopped in the completion, which counts toward the last phase)
            kind, entered, left, done = trial[-1]
            trial[-1] = (kind, entered, left, done + rest)
        table = self.tables[stream]
        for position, (kind, entered, left, done) in enumerate(trial):
            if entered:
                table[_at(kind, position)].observe(entered, left, done)
                table[_at(kind, None)].observe(entered, left, done)
        self.shunned[stream].add(running)
        self.running[stream] = self.orders[stream]

    def _budget(self, stream: int) -> float:
        return self.explore_every * max(self.typical[stream].value or 0.0, 1.0)

    def refresh(self, stream: int) -> None:
        """The stream's figures drifted: re-learn them, and try every order again."""
        for ts in self.stats[stream].values():
            ts.refresh()
        self.shunned[stream].clear()
        self.reset_at[stream] = self.seen[stream]
        self.changes += 1

    def observe_list(self, index: int, passed: float) -> None:
        avg = self.list_pass.get(index)
        if avg is None:
            avg = self.list_pass[index] = Average(0.05)
        avg.add(passed)

    def list_order(self, lists: list, default: list) -> list:
        """Attribute lists, most selective (lowest pass rate) first."""
        if not self.list_pass:
            return default
        return sorted(lists, key=lambda lst: self.list_pass.get(lst.index, Average(0, 0.5)).value or 0.5)

    # ---------------------------------------------------------------- the policy

    def estimate(self, stream: int, order: tuple[Kind, ...]) -> float:
        """Estimated work per tuple of ``order`` for tuples of ``stream``."""
        table = self.tables[stream]
        total = 0.0
        carried = 1.0
        for position, kind in enumerate(order):
            row = 0 if kind is _A else 4 if kind is _J else 8  # (as _at)
            ts = table[row + position]
            if ts.samples < 3:
                ts = table[row + 3]
            cost = ts.cost.value if ts.cost.value is not None else 10.0
            fanout = ts.fanout.value if ts.fanout.value is not None else 1.0
            total += carried * cost
            carried *= fanout
        return total

    def _repick(self, stream: int, costs: list[float] | None = None) -> None:
        """Switch the stream's order to the best estimated (``costs``: the estimates of
        every order, if made) if it is cheaper by more than the hysteresis."""
        current = ALL_ORDERS.index(self.orders[stream])
        if costs is None:
            costs = [self.estimate(stream, o) for o in ALL_ORDERS]
        # (a shunned order's trial cost more than the tuples it was spread over: its
        # estimate, from one sample, is not trusted to run every tuple)
        shunned = self.shunned[stream]
        allowed = [i for i, o in enumerate(ALL_ORDERS) if i == current or not shunned or o not in shunned]
        best = min(allowed, key=costs.__getitem__)
        if best != current and costs[best] < costs[current] * (1 - self.hysteresis):
            self.orders[stream] = ALL_ORDERS[best]
            estimates = dict(zip(ORDER_NAMES, costs, strict=True))
            self.switches.append(
                Switch(self.total, self.streams[stream], ORDER_NAMES[current], ORDER_NAMES[best], estimates)
            )

    # ------------------------------------------------------------------ display


# ---------------------------------------------------------------- snapshot data

_STAT_KEYS: tuple[tuple[Kind, int | None], ...] = tuple((k, p) for k in TYPES for p in (0, 1, 2, None))
_SETTINGS = ("hysteresis", "drift", "explore_every", "settle", "warmup")


def _average_data(avg: Average) -> list[Any]:
    return [avg.rate, avg.value, avg.fresh]


def _average(data: Sequence[Any]) -> Average:
    rate, value, fresh = data
    return Average(float(rate), None if value is None else float(value), int(fresh))


def _type_stats_data(ts: TypeStats) -> list[Any]:
    return [*map(_average_data, (ts.fanout, ts.cost, ts.slow_fanout, ts.slow_cost)), ts.samples]


def _type_stats(data: Sequence[Any]) -> TypeStats:
    fanout, cost, slow_fanout, slow_cost, samples = data
    return TypeStats(_average(fanout), _average(cost), _average(slow_fanout), _average(slow_cost), int(samples))


def _order(name: str) -> tuple[Kind, Kind, Kind]:
    order = parse_order(name)
    if order is None:
        raise ValueError(f"the adaptive order's statistics name the order {name!r}")
    return order
