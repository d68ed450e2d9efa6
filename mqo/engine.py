"""The shared multi-way join: one new tuple against every registered query at once.

This is the thesis' algorithm (Figures 3.19-3.22), generalized to any number of
streams and made exact for any order of the three predicate types:

1. A new tuple ``t`` of stream S starts one **partial result** holding just ``t``;
   its candidates are every slot (query disjunct) that reads S, but none that also
   reads a stream storing no tuple now (no result of theirs can end with ``t``).
2. Each predicate type runs as a phase, in the chosen order (AJW ... WJA):

   * **attribute**: each member's attribute lists are decided by one binary search
     per list (cached on stored tuples, so never twice) and the failed predicates'
     users are removed from the candidates;
   * **join** / **window**: first the lists of that type between members already in
     the partial are evaluated; then the partial **grows**: for a stream Y it lacks,
     the candidates that have a predicate of this type between a member and Y
     retrieve Y's tuples through the exploitation structure (the value index for
     joins, the time buckets for windows) using the most covering predicate relevant
     to them, and each retrieved tuple makes a new partial. Those candidates move to
     the new partials; the rest stay with the old one.

   Whenever a tuple joins a partial after a type's phase has run, that type's lists
   between it and the members are evaluated at once, so every partial has always
   been tested against every predicate of the types already run.
3. **Completion**: partials still missing streams grow through any predicate list,
   and, for streams no predicate connects, through the time buckets alone (the
   MAXWINDOW range). Each candidate whose streams are all present is checked once
   more against its QED (thesis Figure 3.20), its own MAXWINDOW, the time it was
   registered, and its residual predicates, and is reported.

After the tuple is processed it is stored and stale buckets are purged (by the
matcher). Pruning after each list evaluation uses kill tables (the QED subset test
over all candidates at once, see :mod:`indexes.kill_table`); the final QED check is
the thesis' own and decides what is output.

A query's result is found along exactly one path: at each partial a candidate either
moves to the one child holding its result's tuple of the chosen stream or stays.
So no result is produced twice, whatever the order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from indexes.exact import ABSOLUTE_BAND, RELATIVE_BAND, at_least, span_sign, to_float
from indexes.stored import StoredTuple
from mqo.feeds import Feeds
from mqo.partial import Partial
from mqo.plan import CompiledList, CompiledPlan
from mqo.probe_bounds import EMPTY, FULL, probe_bounds
from mqo.reorder import TrialTooCostly
from mqo.results import ResultBlock
from mqo.state import WindowState
from mqo.stats import Counters
from predicates import Kind

A, J, W = Kind.ATTRIBUTE, Kind.JOIN, Kind.WINDOW
# the types a partial grows through: per type, its pair lists and connected slots
Growth = tuple[tuple[list[list[list[CompiledList]]], list[list[int]]], ...]
_A_NAME, _J_NAME, _W_NAME = A.value, J.value, W.value  # (an Enum's .value is a Python-level property)
_TIME_ONLY, _COMPLETION = 0, 3  # the growths' keys (1: joins, 2: windows)


class Engine:
    """Processes one tuple at a time against a compiled plan and the window state."""

    def __init__(self, plan: CompiledPlan, state: WindowState, counters: Counters, check_qed: bool = False) -> None:
        self.plan = plan
        self.state = state
        self.counters = counters
        self.check_qed = check_qed
        # attribute lists per stream in the order they are tried (the reorderer may
        # put the most selective first)
        self.attr_lists = [list(lists) for lists in plan.attr_lists]
        self.list_observer: Callable[[int, float], None] | None = None
        self.budget: int | None = None  # an exploring order's work past which it stops (TrialTooCostly)
        self.phases: list[tuple[Kind, int, int, int]] = []
        self.n_streams = len(plan.streams)
        # which types' phases have run for the current tuple (attributes, joins,
        # windows); and each type's pair lists and connected slots, looked up once (the
        # hot loops below would otherwise hash the type, a Python-level call, each time)
        self._on_a = self._on_j = self._on_w = False
        self._pairs_j, self._pairs_w = plan.pair_lists[J], plan.pair_lists[W]
        connected = plan.connected
        self._growth = {
            J: ((self._pairs_j, connected[J]),),
            W: ((self._pairs_w, connected[W]),),
        }
        self._completion = (*self._growth[J], *self._growth[W])
        self._emitted: set[tuple[Any, ...]] = set()
        # What the loops below would find by walking every pair of streams, per partial's
        # stream mask, made on first use (a plan's tables do not change while it runs):
        # a partial then visits only the streams and lists that can act on it.
        self._links: dict[tuple[int, int], list[tuple[int, int]]] = {}
        self._probes: dict[tuple[int, int, int], list[tuple[int, CompiledList]]] = {}
        self._member_pairs: dict[tuple[bool, int], list[tuple[int, int, list[CompiledList]]]] = {}
        self._join_lists: dict[tuple[int, int], list[tuple[int, list[CompiledList], list[CompiledList]]]] = {}
        self._open: dict[int, list[tuple[int, int]]] = {}
        self.feeds = Feeds(plan, state)
        self._tables_of = plan.version  # (a plan changed in place would make them again)
        self._reset_counts()

    def work(self) -> int:
        """Work done for the current tuple so far: comparisons and tuples fetched from
        the indexes, and partial results made and index probes, which cost about as
        much as a few comparisons each."""
        return self.comparisons + self.retrieved + 3 * self.intermediate + 3 * self.probes

    def _reset_counts(self) -> None:
        self.comparisons = 0
        self.bitset_ops = 0
        self.probes = 0
        self.retrieved = 0
        self.intermediate = 0

    # ----------------------------------------------------------------- driver

    def process(
        self,
        t: StoredTuple,
        order: tuple[Kind, Kind, Kind],
        given: int | None = None,
        measure: bool = False,
        skip: int = 0,
    ) -> list[ResultBlock]:
        """All results whose last tuple is ``t`` (``t`` is not stored yet).

        ``given``, when given, is ``t``'s candidates after its attribute predicates,
        decided beforehand (by the batch kernels); the attribute phase then costs
        nothing for ``t``. ``skip``: slots decided elsewhere (the columnar join step's,
        single-stream disjuncts decided alone), left out of the work but not out of the
        attribute outcome ``t`` keeps, which a later tuple meeting ``t`` reads for every
        slot. With ``measure``, :attr:`phases` receives each phase's (type, partials in,
        partials out, work)."""
        plan = self.plan
        results: list[ResultBlock] = []
        if self._tables_of != plan.version:
            self._clear_tables()
        s = t.stream
        if given is not None:
            t.attr_version, t.attr_done, slots = self._outcome(s)
            t.attr_kill = slots & ~given
        phases = self.phases
        if measure:
            phases.clear()  # (before any return: the policy reads them after every tuple)
        cand = self.feeds.slots_at(s, t.row[0]) & ~skip  # (what the other streams store lets it end)
        if not cand:
            return results
        counters = self.counters
        # The attribute phase comes first and what it leaves of ``t``'s candidates is
        # given: a tuple it leaves nothing stops here, counted and measured as that
        # phase would be (one partial in, none out, no work), without running it (under
        # check_qed the phase decides the lists again, and runs). An order that runs
        # joins or windows first forms partials before attributes prune them: the
        # thesis' orders, and the cost model, count those.
        if given is not None and order[0] is A and not self.check_qed and not cand & given:
            counters.phase_in[_A_NAME] += 1
            if measure and cand & plan.paired_slots:
                phases.append((A, 1, 0, 0))
            return results
        if not cand & plan.paired_slots:  # join and window phases would grow nothing: any order is one
            order, measure = (A,), False
        self._on_a = self._on_j = self._on_w = False
        self._emitted.clear()
        self._reset_counts()
        tuples: list[StoredTuple | None] = [None] * self.n_streams
        tuples[t.stream] = t
        ts = t.row[0]
        frontier = [Partial(tuples, 1 << t.stream, cand, 0, 0, 0, 0, ts, ts)]
        for kind in order:
            entered = len(frontier)
            name = _J_NAME if kind is J else _W_NAME if kind is W else _A_NAME
            counters.phase_in[name] += entered
            before = self.work() if measure else 0
            if kind is A:
                self._on_a = True
                frontier = [p for p in frontier if self._apply_attributes(p)]
            else:
                if kind is J:
                    self._on_j = True
                else:
                    self._on_w = True
                frontier = self._expand(
                    [p for p in frontier if self._evaluate_members(p, kind)], 1 if kind is J else 2, None
                )
            counters.phase_out[name] += len(frontier)
            if measure:
                phases.append((kind, entered, len(frontier), self.work() - before))
            if not frontier:
                break
        if frontier:
            before = self.work() if measure else 0
            self._expand(frontier, _COMPLETION, results)
            if measure and phases:
                # completion work counts toward the last phase (it depends on the order)
                kind, entered, left, work = phases[-1]
                phases[-1] = (kind, entered, left, work + self.work() - before)
        counters.comparisons += self.comparisons
        counters.bitset_ops += self.bitset_ops
        counters.index_probes += self.probes
        counters.retrieved += self.retrieved
        counters.intermediate += self.intermediate
        counters.results += sum(len(block) for block in results)
        return results

    def _clear_tables(self) -> None:
        """Forget the per-mask tables (made again from the plan as partials need them)."""
        for table in (self._links, self._probes, self._member_pairs, self._join_lists, self._open):
            table.clear()
        self.feeds.clear()
        self._tables_of = self.plan.version

    def ends_nothing(self, s: int, ts: np.ndarray, slots: int) -> int:
        """How many of tuples of stream ``s`` at ``ts``, arriving in turn, :meth:`process`
        would return at once for, given candidates among ``slots`` only
        (:meth:`mqo.feeds.Feeds.ends_nothing`): they need only be stored, with their
        attribute outcome (:meth:`keep_outcomes`)."""
        if self._tables_of != self.plan.version:
            self._clear_tables()
        return self.feeds.ends_nothing(s, ts, slots)

    def keep_outcomes(self, tuples: list[StoredTuple], given: list[int]) -> None:
        """The attribute outcome of tuples of one stream stored without :meth:`process`,
        from their candidates ``given`` after the batch kernels, as process keeps it."""
        if tuples:
            version, done, slots = self._outcome(tuples[0].stream)
            for t, cand in zip(tuples, given, strict=True):
                t.attr_version, t.attr_done, t.attr_kill = version, done, slots & ~cand

    def _outcome(self, s: int) -> tuple[int, int, int]:
        """What a tuple of stream ``s`` whose attribute lists the kernels decided keeps:
        the plan's version, the lists done, the slots it may rule out."""
        plan = self.plan
        # (the QED test needs the lists' satisfied bits: they are decided again)
        return plan.version, 0 if self.check_qed else plan.attr_list_mask[s], plan.stream_slots[s]

    # ------------------------------------------------------ predicate evaluation

    def attribute_kill(self, t: StoredTuple, cand: int) -> int:
        """Slots ruled out by ``t``'s attribute predicates, deciding the lists relevant
        to ``cand`` that ``t`` was not tested against yet."""
        plan = self.plan
        if t.attr_version != plan.version:
            t.attr_version = plan.version
            t.attr_done = t.attr_sat = t.attr_kill = 0
        s = t.stream
        if t.attr_done != plan.attr_list_mask[s]:
            row = t.row
            live = cand & ~t.attr_kill
            observe = self.list_observer
            for lst in self.attr_lists[s]:
                bit = 1 << lst.index
                if t.attr_done & bit or not lst.kill.any_user & live:
                    continue
                sat = lst.evaluate_row(row)
                self.comparisons += lst.covering.comparisons()
                self.bitset_ops += 2
                t.attr_done |= bit
                t.attr_sat |= lst.sat_bits(sat)
                t.attr_kill |= lst.kill.killed(*sat)
                if observe is not None:
                    lo, hi, negated = sat
                    passed = (hi - lo) / lst.n
                    observe(lst.index, 1.0 - passed if negated else passed)
                live = cand & ~t.attr_kill
                if not live:
                    break  # the tuple failed every candidate: the rest can wait
        return t.attr_kill

    def _apply_attributes(self, p: Partial) -> bool:
        cand = p.cand
        for member in p.tuples:
            if member is not None:
                cand &= ~self.attribute_kill(member, cand)
                self.bitset_ops += 1
                if not cand:
                    return False
        p.cand = cand
        return True

    def _evaluate_members(self, p: Partial, kind: Kind) -> bool:
        """Evaluate ``kind``'s lists between the members a partial already has."""
        key = (kind is J, p.mask)  # (a Kind's hash is a Python-level call: keyed by a bool)
        pairs = self._member_pairs.get(key)
        if pairs is None:
            pairs = self._member_pairs[key] = self._pairs_within(p.mask, kind)
        cand = p.cand
        sat = rel = 0
        tuples = p.tuples
        for x, y, lists in pairs:
            xt, yt = tuples[x], tuples[y]
            for lst in lists:
                if not lst.kill.any_user & cand:
                    continue
                cand, sat, rel = self._evaluate_pair(lst, x, xt, yt, cand, sat, rel)  # type: ignore[arg-type]
                if not cand:
                    return False
        p.cand = cand
        if kind is J:
            p.sat_j |= sat
            p.rel_j |= rel
        else:
            p.sat_w |= sat
            p.rel_w |= rel
        return True

    def _pairs_within(self, mask: int, kind: Kind) -> list[tuple[int, int, list[CompiledList]]]:
        """The pairs x < y of streams in ``mask`` with lists of ``kind``, and the lists."""
        lists_by_pair = self._pairs_j if kind is J else self._pairs_w
        n = self.n_streams
        return [
            (x, y, lists_by_pair[x][y])
            for x in range(n)
            if mask >> x & 1
            for y in range(x + 1, n)
            if mask >> y & 1 and lists_by_pair[x][y]
        ]

    def _evaluate_pair(
        self, lst: CompiledList, x: int, xt: StoredTuple, yt: StoredTuple, cand: int, sat: int, rel: int
    ) -> tuple[int, int, int]:
        if lst.left_stream == x:
            outcome = lst.evaluate_pair(xt.row, yt.row)
        else:
            outcome = lst.evaluate_pair(yt.row, xt.row)
        self.comparisons += lst.covering.comparisons()
        self.bitset_ops += 3
        if not self.check_qed:
            # SatPBS/RelPBS are read only by the QED check (check_qed): as wide as the
            # lists, they would cost two big ints per pair otherwise
            return cand & ~lst.kill.killed(*outcome), sat, rel
        return cand & ~lst.kill.killed(*outcome), sat | lst.sat_bits(outcome), rel | lst.block

    # ------------------------------------------------------------------ growth

    def _expand(self, frontier: list[Partial], key: int, results: list[ResultBlock] | None) -> list[Partial]:
        """Grow partials through the lists of the growth ``key`` (joins, windows, or,
        at completion, both). With ``results`` (completion) also grow through time
        alone and report complete candidates; else return the partials that keep
        candidates without growing further."""
        plan = self.plan
        kept: list[Partial] = []
        stack = list(frontier)
        links, grow = self._links, self._grow
        while stack:
            p = stack.pop()
            cand = p.cand
            mask = p.mask
            linked = links.get((key, mask))
            if linked is None:
                linked = links[(key, mask)] = self._linked(key, mask)
            for y, conn in linked:
                cy = cand & conn
                if not cy:
                    continue
                stack.extend(grow(p, y, cy, key))
                cand &= ~cy
                self.bitset_ops += 2
                if not cand:
                    break
            if not cand:
                continue
            if results is None:
                p.cand = cand
                kept.append(p)
                continue
            done = cand & plan.covered_slots(mask)
            if done:
                self._emit(p, done, results)
                cand &= ~done
            if not cand:
                continue
            missing = self._open.get(mask)
            if missing is None:
                reads = plan.stream_slots
                missing = self._open[mask] = [(y, reads[y]) for y in range(self.n_streams) if not mask >> y & 1]
            for y, reads_y in missing:
                if not cand:
                    break
                cy = cand & reads_y
                if cy:
                    stack.extend(grow(p, y, cy, _TIME_ONLY))
                    cand &= ~cy
        return kept

    def _kinds(self, key: int) -> Growth:
        if key == _TIME_ONLY:
            return ()
        return self._completion if key == _COMPLETION else self._growth[J if key == 1 else W]

    def _linked(self, key: int, mask: int) -> list[tuple[int, int]]:
        """The streams a partial of ``mask`` lacks, each with the slots that a list of
        the growth ``key`` connects to it from a member (those with none left out)."""
        kinds = self._kinds(key)
        n = self.n_streams
        out = []
        for y in range(n):
            if mask >> y & 1:
                continue
            conn = 0
            for x in range(n):
                if mask >> x & 1:
                    for _, connected in kinds:
                        conn |= connected[x][y]
            if conn:
                out.append((y, conn))
        return out

    def _grow(self, p: Partial, y: int, cy: int, key: int) -> list[Partial]:
        """New partials: ``p`` plus each tuple of stream ``y`` that may satisfy a slot
        of ``cy``, retrieved through the lists of the growth ``key`` (or by time alone
        if none)."""
        plan = self.plan
        store = self.state.streams[y]
        window = plan.window_of(cy)
        # a little wider than the window: the exact test in _join decides the edge
        slack = RELATIVE_BAND * (abs(p.hi) + abs(p.lo) + window[0]) + ABSOLUTE_BAND
        t_lo = p.hi - window[0] - slack
        t_hi = p.lo + window[0] + slack
        found: dict[int, StoredTuple] = {}
        tuples = p.tuples
        probes = self._probes.get((key, p.mask, y))
        if probes is None:
            kinds = self._kinds(key)
            probes = self._probes[(key, p.mask, y)] = [
                (x, lst) for x in range(self.n_streams) if p.mask >> x & 1 for pairs, _ in kinds for lst in pairs[x][y]
            ]
        for x, lst in probes:
            if not lst.kill.any_user & cy:
                continue
            self.probes += 1
            known_left = lst.left_stream == x
            bounds = probe_bounds(lst, known_left, tuples[x].row, cy)  # type: ignore[union-attr]
            if bounds is EMPTY:
                continue
            target = lst.right_pos if known_left else lst.left_pos
            if bounds is FULL or target == 0:
                lo, hi = t_lo, t_hi
                if bounds is not FULL:
                    if bounds[0] is not None and bounds[0] > lo:
                        lo = bounds[0]
                    if bounds[1] is not None and bounds[1] < hi:
                        hi = bounds[1]
                self.retrieved += store.buckets.gather(lo, hi, found, self._room(found))
            else:
                scanned = 0
                for r in store.values[target].range(bounds[0], bounds[1]):  # type: ignore[index]
                    scanned += 1
                    ts = r.row[0]
                    if t_lo <= ts <= t_hi:
                        found[r.seq] = r
                self.comparisons += scanned  # each fetched tuple's time is checked
                self.retrieved += scanned
        if key == _TIME_ONLY:
            self.probes += 1
            self.retrieved += store.buckets.gather(t_lo, t_hi, found, self._room(found))
        if self.budget is not None and self.work() + len(found) > self.budget:
            raise TrialTooCostly
        children = []
        join = self._join
        if self._on_a:
            # first: a fetched tuple's attribute outcome is decided already (by the batch
            # kernels, or once per tuple, kept on it), and it turns most of them away
            # (on (b'), 4 in 5) before any pair test
            version, decided = plan.version, plan.attr_list_mask[y]
            for r in found.values():
                if r.attr_version == version and r.attr_done == decided:
                    cr = cy & ~r.attr_kill
                else:
                    cr = cy & ~self.attribute_kill(r, cy)
                if cr:
                    child = join(p, y, r, cr, window)
                    if child is not None:
                        children.append(child)
            self.bitset_ops += len(found)
            return children
        for r in found.values():
            child = join(p, y, r, cy, window)
            if child is not None:
                children.append(child)
        return children

    def _room(self, found: dict[int, StoredTuple]) -> int | None:
        """How many more tuples a trial may fetch before it passes its budget (None: no budget)."""
        return None if self.budget is None else self.budget - self.work() - len(found)

    def _join(
        self, p: Partial, y: int, r: StoredTuple, cand: int, window: tuple[float, float | Fraction]
    ) -> Partial | None:
        """``p`` plus tuple ``r`` of stream ``y``, tested against every list of the
        types already run but attributes (which :meth:`_grow` tested); None when no
        candidate survives."""
        ts = r.row[0]
        lo = p.lo if p.lo < ts else ts
        hi = p.hi if p.hi > ts else ts
        self.comparisons += 1
        if span_sign(lo, hi, window[1], window[0]) > 0:
            return None
        sat_j, sat_w, rel_j, rel_w = p.sat_j, p.sat_w, p.rel_j, p.rel_w
        tuples = p.tuples
        members = self._join_lists.get((p.mask, y))
        if members is None:
            members = self._join_lists[(p.mask, y)] = [
                (x, self._pairs_j[x][y], self._pairs_w[x][y])
                for x in range(self.n_streams)
                if p.mask >> x & 1 and (self._pairs_j[x][y] or self._pairs_w[x][y])
            ]
        on_j, on_w = self._on_j, self._on_w
        for x, joins, windows in members:
            xt = tuples[x]
            if on_j:
                for lst in joins:
                    if lst.kill.any_user & cand:
                        cand, sat_j, rel_j = self._evaluate_pair(lst, x, xt, r, cand, sat_j, rel_j)  # type: ignore[arg-type]
                        if not cand:
                            return None
            if on_w:
                for lst in windows:
                    if lst.kill.any_user & cand:
                        cand, sat_w, rel_w = self._evaluate_pair(lst, x, xt, r, cand, sat_w, rel_w)  # type: ignore[arg-type]
                        if not cand:
                            return None
        grown = list(tuples)
        grown[y] = r
        self.intermediate += 1
        return Partial(grown, p.mask | (1 << y), cand, sat_j, sat_w, rel_j, rel_w, lo, hi)

    # ------------------------------------------------------------------ output

    def _emit(self, p: Partial, done: int, results: list[ResultBlock]) -> None:
        """Report the slots of ``done`` that ``p`` satisfies (thesis Figure 3.20).

        Every predicate of a candidate that survived pruning has been tested and held,
        so what is left is each slot's own MAXWINDOW and registration time, decided
        for all slots at once with the plan's masks, and, for the few slots that
        need it, residual predicates and reporting once per query."""
        plan = self.plan
        if self.check_qed:
            self._check_qed(p, done)
        special = done & plan.special_slots
        plain = done & ~special
        if plain:
            plain &= plan.slots_within(p.lo, p.hi) & plan.slots_since(p.lo)
            self.bitset_ops += 3
            if plain:
                results.append(ResultBlock(plain, p.tuples, p.hi))
        if not special:
            return
        rows: list[Any] = [m.row if m is not None else None for m in p.tuples]
        found: tuple[Any, ...] | None = None  # which tuples p holds, for reporting once per query
        reported = 0  # (one block for them all: results in slot order, as block by block)
        while special:
            low = special & -special
            special ^= low
            slot = plan.slots[low.bit_length() - 1]
            self.comparisons += 2
            if span_sign(p.lo, p.hi, slot.window_value, slot.window) > 0 or not _registered_by(slot, p.lo):
                continue
            if slot.residuals:
                self.comparisons += len(slot.residuals)
                if not all(test(rows) for test in slot.residuals):
                    continue
            if slot.multi_disjunct:
                if found is None:  # (the streams p holds and their tuples' arrival numbers)
                    found = (p.mask, *(m.seq for m in p.tuples if m is not None))
                key = (slot.query.name, *found)
                if key in self._emitted:
                    continue
                self._emitted.add(key)
            reported |= low
        if reported:
            results.append(ResultBlock(reported, p.tuples, p.hi))

    def _check_qed(self, p: Partial, done: int) -> None:
        """The thesis' subset test, slot by slot: a debugging aid for the tests."""
        plan = self.plan
        sat_a = 0
        for member in p.tuples:
            if member is not None:
                self.attribute_kill(member, done)
                sat_a |= member.attr_sat
        while done:
            low = done & -done
            done ^= low
            qed = plan.slot_qed(low.bit_length() - 1)
            assert not qed[A] & ~sat_a, "a candidate failed an attribute predicate"
            assert not qed[J] & ~p.sat_j, "a candidate failed a join predicate"
            assert not qed[W] & ~p.sat_w, "a candidate failed a window predicate"


def _registered_by(slot: Any, ts: float) -> bool:
    """Whether ``slot``'s query was registered early enough to see a tuple at ``ts``."""
    since = slot.since_ts
    return since == -math.inf or at_least(ts, since, to_float(since))
