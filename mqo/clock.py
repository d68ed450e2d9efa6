"""Event time of a matcher: what is late, and how far back tuples are kept.

One object owns the rules (docs/ARCHITECTURE.md, Time), so every way in (``push``,
``push_batch``, a prepared replay, the Spark stages) decides them alike.

**Per-stream time** (the default, ``time='per-stream'``), as Flink, Spark and Beam
keep it: each declared stream has its own watermark, its newest ``ts`` (tuples and
heartbeats) minus its allowed lateness: its own from ``stream_lateness`` (the API),
else from its declaration (``CREATE STREAM ... ALLOWED LATENESS 5 sec``), else the
global ``allowed_lateness`` (the most specific wins, see :func:`clock_for`). The
**matcher's watermark** is the minimum over the *active* streams, and it never goes
back. Every declared stream is active, also one that has sent nothing yet (it holds
the watermark at -inf), until it is idle: silent for
``idle_timeout`` seconds of processing time (``now``, injectable for tests), or
declared idle (:meth:`Clock.set_idle`). An idle stream stops holding the others back
and is active again as soon as it speaks (a tuple or a heartbeat). With no stream
active the watermark stays where it is. **Global time** (``time='global'``, the first
version's rule) is the same with one stream that every tuple belongs to. **External
time** (``time='external'``): the watermark is a host engine's (Spark's), set by
heartbeats alone; tuples do not move it and no lateness applies (the host decided it).

* a tuple is **late** when ``ts`` is older than the matcher's watermark, decided
  exactly on what the numbers mean (:mod:`indexes.exact`);
* the **retention horizon** is the largest ``watermark - W`` so far, ``W`` being the
  largest MAXWINDOW of the registered multi-stream queries when it was reached. Every
  tuple still to be matched is at or after the watermark, so a stored tuple older than
  the horizon cannot be in a new result: it is purged, and a query registered later
  sees only tuples from the horizon on (its ``since``). An idle stream does not hold
  the horizon back, so memory stays bounded.

A watermark is kept exactly as a *mark*: the pair (``base``, lateness number) meaning
``base - lateness[number]``; the horizon as a mark and the window it was reached with.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from indexes.exact import ABSOLUTE_BAND, RELATIVE_BAND, decimal_of, faithful, linear_sign, to_float
from mqo.config import TIME_MODES, MatcherConfig, check_seconds
from mqo.results import TupleError

if TYPE_CHECKING:
    from predicates import StreamSchema

ONE = Fraction(1)
NEVER = -math.inf
Mark = tuple[float, int]  # (base, lateness number): the watermark base - lateness


class Marks:
    """The watermark each tuple of a batch met (``(base, k)``, None before there is
    one), made when read: a batch's callers read the marks of the few rows some query
    wants, and a tuple per row of a million-row batch costs a tenth of a second.
    ``append`` adds marks after the batch's own."""

    __slots__ = ("_at", "_k", "_more")

    def __init__(self, at: np.ndarray, k: int) -> None:
        self._at = at
        self._k = k
        self._more: list[Mark | None] = []

    def __len__(self) -> int:
        return len(self._at) + len(self._more)

    def __getitem__(self, j: int) -> Mark | None:
        n = len(self._at)
        if j < 0:
            j += len(self)
        if j >= n:
            return self._more[j - n]
        base = float(self._at[j])
        return None if base == NEVER else (base, self._k)

    def append(self, mark: Mark | None) -> None:
        self._more.append(mark)

    def pick(self, js: np.ndarray) -> list[Mark | None]:
        """``self[j]`` for each of ``js`` (not negative), made a column at a time."""
        n, k, more = len(self._at), self._k, self._more
        bases = self._at[np.minimum(js, n - 1)].tolist() if n else [NEVER] * len(js)
        picked = zip(js.tolist(), bases, strict=True)
        return [more[j - n] if j >= n else None if b == NEVER else (b, k) for j, b in picked]


MarkList = list[Mark | None] | Marks


def marks_at(marks: MarkList, js: np.ndarray) -> list[Mark | None]:
    """``marks[j]`` for each of ``js`` (not negative): a replay reads those of a chunk of
    the rows it visits at once."""
    if isinstance(marks, Marks):
        return marks.pick(js)
    return [marks[j] for j in js.tolist()]


class Clock:
    """Event time of one matcher (see the module docstring)."""

    def __init__(
        self,
        allowed_lateness: float = 0.0,
        streams: Sequence[str] = (),
        *,
        stream_lateness: Mapping[str, float] | None = None,
        idle_timeout: float | None = None,
        mode: str = "per-stream",
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        if mode not in TIME_MODES:
            raise ValueError(f"time must be one of {', '.join(TIME_MODES)}, not {mode!r}")
        self.allowed_lateness = check_seconds("allowed_lateness", allowed_lateness)
        self.mode = mode
        self.idle_timeout = None if idle_timeout is None else check_seconds("idle_timeout", idle_timeout)
        self.now = now
        own = dict(stream_lateness or {})
        if own and mode != "per-stream":
            raise ValueError("stream_lateness needs time='per-stream' (one global clock has one lateness)")
        self.names = list(streams) if mode == "per-stream" else ["*"]
        self.declared = bool(streams)  # made for the declared streams (not the placeholder before them)
        unknown = sorted(set(own) - set(self.names))
        if unknown and streams:
            raise ValueError(f"stream_lateness names undeclared stream(s) {', '.join(unknown)}")
        # the distinct lateness values, exact and as doubles; each stream's number in them
        self.lateness: list[float] = [self.allowed_lateness]
        self._late_exact: list[Fraction] = [decimal_of(self.allowed_lateness)]
        self.lateness_of: list[int] = []
        for name in self.names:
            value = check_seconds(f"stream_lateness[{name!r}]", own.get(name, self.allowed_lateness))
            if value not in self.lateness:
                self.lateness.append(value)
                self._late_exact.append(decimal_of(value))
            self.lateness_of.append(self.lateness.index(value))
        n = len(self.names)
        self.newest = [NEVER] * n  # per stream: its newest ts (tuples and heartbeats)
        started = now()
        self.heard = [started] * n  # per stream: processing time it last spoke (or the start)
        self.idle = [False] * n  # declared idle, until it speaks
        self.mark: Mark | None = None  # the matcher's watermark; None is -inf
        self._horizon: tuple[Mark, Fraction] | None = None
        # (the horizon's exact value, made once per horizon: every registration reads it)
        self._horizon_value: tuple[tuple[Mark, Fraction] | None, float | Fraction] = (None, NEVER)
        self._checked: tuple[list[float], Mark | None, float | Fraction] | None = None  # what _check saw last

    def slot(self, s: int) -> int:
        """The clock's number for stream ``s`` (every stream is one under global time)."""
        return s if self.mode == "per-stream" else 0

    # ------------------------------------------------------------ watermarks

    def value(self, mark: Mark | None) -> float | Fraction:
        """A mark's watermark exactly (a float that means it, or a Fraction)."""
        if mark is None:
            return NEVER
        base, k = mark
        return faithful(decimal_of(base) - self._late_exact[k])

    @property
    def watermark(self) -> float:
        """The matcher's watermark as a double (-inf before every active stream spoke)."""
        return NEVER if self.mark is None else to_float(self.value(self.mark))

    def lower(self, a: Mark, b: Mark, higher: bool = False) -> Mark:
        """The lower of two watermarks (``higher``: the higher), exactly."""
        return (b if self._below(a, b) else a) if higher else (a if self._below(a, b) else b)

    def _below(self, a: Mark, b: Mark) -> bool:
        """Whether watermark ``a`` is below ``b``, exactly."""
        if a[1] == b[1]:
            return a[0] < b[0]
        la, lb = self._late_exact[a[1]], self._late_exact[b[1]]
        # a.base - la - (b.base - lb) < 0
        c = la - lb
        return linear_sign(a[0], ONE, 1.0, b[0], c, float(c)) < 0

    def active(self) -> list[int]:
        """The streams that hold the watermark back now."""
        timeout, now = self.idle_timeout, None
        out = []
        for s in range(len(self.names)):
            if self.idle[s]:
                continue
            if timeout is not None and self.mode == "per-stream":
                now = self.now() if now is None else now
                if now - self.heard[s] >= timeout:
                    continue
            out.append(s)
        return out

    def _lowest(self, streams: list[int]) -> Mark | None:
        """The smallest watermark of ``streams``; None when one of them is at -inf or
        there are none (the watermark does not move then)."""
        low: Mark | None = None
        for s in streams:
            if self.newest[s] == NEVER:
                return None
            mark = (self.newest[s], self.lateness_of[s])
            if low is None or self._below(mark, low):
                low = mark
        return low

    def _recompute(self) -> None:
        low = self._lowest(self.active())
        if low is not None and (self.mark is None or self._below(self.mark, low)):
            self.mark = low

    def current(self) -> Mark | None:
        """The matcher's watermark now (a stream may have gone idle since it last moved)."""
        self._recompute()
        return self.mark

    def watermark_now(self) -> float:
        """:attr:`watermark` as it is now (a stream may have gone idle since it last moved)."""
        self._recompute()
        return self.watermark

    def exact(self, mark: Mark) -> tuple[float, Fraction]:
        """A mark as (newest ts, lateness): the watermark is exactly the one minus the other."""
        return mark[0], self._late_exact[mark[1]]

    def is_late(self, s: int, ts: float) -> bool:
        """Whether a tuple of stream ``s`` at ``ts`` is late now."""
        self._recompute()  # a stream may have gone idle since the last tuple
        return self._late_against(ts, self.mark)

    def is_late_value(self, s: int, ts: Any) -> bool:
        """:meth:`is_late` of a ``ts`` as pushed (one that is not a number is not late: the
        tuple is rejected as invalid)."""
        return isinstance(ts, (int, float)) and self.is_late(s, float(ts))

    def passed(self, ts: float, mark: Mark | None) -> bool:
        """Whether the watermark ``mark`` has passed ``ts`` (``ts`` is older than it,
        exactly): a tuple at ``ts`` would be late, and no result still to come can
        have a ``ts`` this small (:mod:`mqo.emit`)."""
        return self._late_against(ts, mark)

    def _late_against(self, ts: float, mark: Mark | None) -> bool:
        if mark is None or ts >= mark[0]:
            return False
        k = mark[1]
        # ts - (base - L) < 0
        return linear_sign(ts, ONE, 1.0, mark[0], -self._late_exact[k], -self.lateness[k]) < 0

    def observe(self, s: int, ts: float) -> None:
        """Stream ``s`` spoke at ``ts`` (a tuple, late or not, or a heartbeat)."""
        c = self.slot(s)
        if ts > self.newest[c] and self.mode != "external":
            self.newest[c] = ts
        self.heard[c] = self.now()
        self.idle[c] = False
        self._recompute()

    def heartbeat(self, s: int | None, ts: float) -> None:
        """Stream ``s`` (every stream when None) has nothing before ``ts``."""
        for c in range(len(self.names)) if s is None else [self.slot(s)]:
            self.newest[c] = max(self.newest[c], ts)
            self.heard[c] = self.now()
            self.idle[c] = False
        self._recompute()

    def set_idle(self, s: int) -> None:
        """Stream ``s`` stops holding the watermark back until it speaks again."""
        self.idle[self.slot(s)] = True
        self._recompute()

    def late_mask(self, streams: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, MarkList]:
        """For tuples arriving in this order (stream numbers and ts): whether each is
        late, and the watermark each one meets. Leaves the clock as after the last one.

        The streams idle at the start stay idle until they speak in the batch (one
        reading of processing time per batch). When the streams involved share one
        lateness (the usual case) the watermarks are worked out over whole columns;
        otherwise tuple by tuple."""
        ts = np.asarray(ts, np.float64)
        n = len(ts)
        streams = np.asarray(streams, np.int64) if self.mode == "per-stream" else np.zeros(n, np.int64)
        self._recompute()
        if self.mode == "external":  # tuples do not move the watermark; no lateness: ts < base
            late = ts < self.mark[0] if self.mark is not None else np.zeros(n, bool)
            return late, [self.mark] * n
        active = set(self.active())
        present = set(np.unique(streams).tolist())
        involved = sorted(active | present)
        kinds = {self.lateness_of[c] for c in involved}
        if n == 0:
            return np.zeros(0, bool), []
        if len(kinds) > 1 or (self.mark is not None and self.mark[1] not in kinds):
            return self._late_one_by_one(streams, ts)
        (k,) = kinds
        low = np.full(n, np.inf)
        for c in involved:
            mine = streams == c
            col = np.where(mine, ts, NEVER)
            col[0] = max(col[0], self.newest[c])
            col = np.maximum.accumulate(col)
            if c not in active:  # idle until it speaks
                first = int(np.argmax(mine))
                col[:first] = np.inf
            self.newest[c] = float(col[-1])
            low = np.minimum(low, col)
        low[np.isinf(low) & (low > 0)] = NEVER  # no stream active: the watermark stays
        start = NEVER if self.mark is None else self.mark[0]
        before = np.maximum.accumulate(np.concatenate(([start], low)))
        lf, lx = self.lateness[k], self._late_exact[k]
        late = np.zeros(n, bool)
        at = before[:-1]
        behind = (ts < at) & (at != NEVER)
        if behind.any():
            with np.errstate(invalid="ignore"):
                d = ts - at + lf
                band = RELATIVE_BAND * (np.abs(ts) + np.abs(at) + lf) + ABSOLUTE_BAND
            late = behind & (d < -band)
            for i in np.flatnonzero(behind & ~(np.abs(d) > band)).tolist():
                late[i] = linear_sign(float(ts[i]), ONE, 1.0, float(at[i]), -lx, -lf) < 0
        stamp = self.now()
        for c in present:
            self.heard[c] = stamp
            self.idle[c] = False
        if before[-1] != NEVER:
            self.mark = (float(before[-1]), k)
        return late, Marks(at, k)

    def _late_one_by_one(self, streams: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, list[Mark | None]]:
        late = np.zeros(len(ts), bool)
        marks: list[Mark | None] = []
        for i, (s, t) in enumerate(zip(streams.tolist(), ts.tolist(), strict=True)):
            marks.append(self.mark)
            late[i] = self._late_against(t, self.mark)
            self.observe(s, t)
        return late, marks

    def probe(self, streams: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Which of these tuples (stream numbers and ts, in arrival order) would be late
        from here, decided on a copy: this clock does not move."""
        return copy.deepcopy(self).late_mask(streams, ts)[0]

    # -------------------------------------------------------------- horizon

    def advance(self, window: Fraction, mark: Mark | None) -> bool:
        """The watermark reached ``mark`` while the largest MAXWINDOW is ``window``.
        True when the horizon moved (stored tuples may be purged)."""
        if mark is None:
            return False
        current = self._horizon
        candidate = (mark, window)
        if current is None:
            self._horizon = candidate
            return True
        if current == candidate:
            return False
        (base, k), w = current
        # the window is one Fraction object while the plan stands: identity first (a
        # Fraction's == is Python code, run once per tuple here)
        if k == mark[1] and (w is window or w == window):
            moved = mark[0] > base
        else:  # the window or the lateness changed: compare watermark - W exactly (rare)
            moved = decimal_of(mark[0]) - self._late_exact[mark[1]] - window > (
                decimal_of(base) - self._late_exact[k] - w
            )
        if moved:
            self._horizon = candidate
        return moved

    @property
    def horizon(self) -> float | Fraction:
        """The retention horizon, exactly (a float that means it, or a Fraction);
        -inf before the watermark is."""
        current = self._horizon
        if current is None:
            return NEVER
        made, value = self._horizon_value
        if made is not current:
            (base, k), window = current
            if type(base) is float and not self.lateness[k] and not window:
                value = base + 0.0  # (what the exact sum gives: the float means itself; no -0.0)
            else:
                value = faithful(decimal_of(base) - self._late_exact[k] - window)
            self._horizon_value = (current, value)
        return value

    def purge_horizon(self) -> float:
        """A double at or below the horizon: stored tuples before it can go."""
        if self._horizon is None:
            return NEVER
        (base, k), window = self._horizon
        lf, wf = self.lateness[k], to_float(window)
        return base - lf - wf - (RELATIVE_BAND * (abs(base) + lf + wf) + ABSOLUTE_BAND)

    # ------------------------------------------------------------ invariants

    def _check(self) -> None:
        """Assert the clock's invariants (``check=True``, after every change of time).

        Processing time is not read (an injected ``now`` is the caller's): the streams
        that hold the watermark back are taken as those not declared idle, a superset
        of the active ones, so the watermark is at least their lowest."""
        n = len(self.names)
        assert self.mode == "per-stream" or self.names == ["*"], "one clock slot under global or external time"
        assert len(self.newest) == len(self.heard) == len(self.idle) == len(self.lateness_of) == n, (
            "per-stream lists of different lengths"
        )
        assert all(isinstance(flag, bool) for flag in self.idle), "an idle flag that is not a bool"
        assert len(self.lateness) == len(self._late_exact) == len(set(self.lateness)), "lateness values not distinct"
        for value, exact in zip(self.lateness, self._late_exact, strict=True):
            assert value >= 0 and exact == decimal_of(value), "a lateness and its exact value differ"
        assert all(0 <= k < len(self.lateness) for k in self.lateness_of), "a stream's lateness number out of range"
        mark = self.mark
        if mark is not None:
            assert 0 <= mark[1] < len(self.lateness), "the watermark's lateness number out of range"
            # it was a stream's watermark when reached, and a stream's newest ts never goes back
            assert any(self.lateness_of[s] == mark[1] and self.newest[s] >= mark[0] for s in range(n)), (
                "the watermark is ahead of every stream's"
            )
        low = self._lowest([s for s in range(n) if not self.idle[s]])
        assert low is None or (mark is not None and not self._below(mark, low)), (
            "the watermark is behind the lowest of the streams that hold it back"
        )
        if self._horizon is not None:
            (base, k), window = self._horizon
            assert mark is not None and 0 <= k < len(self.lateness) and window >= 0, "a horizon without a watermark"
            assert not self._below(mark, (base, k)), "the horizon's watermark is ahead of the matcher's"
            horizon = self.horizon
            assert self.purge_horizon() <= horizon <= self.value(mark), "the purge horizon is ahead of the watermark"
        seen = (list(self.newest), mark, self.horizon)
        if self._checked is not None:
            newest, last_mark, last_horizon = self._checked
            assert all(a >= b for a, b in zip(self.newest, newest, strict=True)), "a stream's newest ts went back"
            went_back = last_mark is not None and (mark is None or self._below(mark, last_mark))
            assert not went_back, "the watermark went back"
            assert seen[2] >= last_horizon, "the horizon went back"
        self._checked = seen

    # ------------------------------------------------------------ snapshots

    @contextmanager
    def one_reading(self) -> Iterator[None]:
        """Processing time read once for the block: a replay made in pieces decides
        which streams are idle as one replay of all its rows would (one reading per
        batch), not again at every piece."""
        now = self.now
        stamp = now()
        self.now = lambda: stamp
        try:
            yield
        finally:
            self.now = now

    def snapshot(self) -> dict[str, Any]:
        # processing times do not travel: a restored clock counts idleness from its start
        horizon = None
        if self._horizon is not None:
            (base, k), window = self._horizon
            horizon = [base, k, str(window)]
        return {
            "newest": list(self.newest),
            "idle": list(self.idle),
            "mark": None if self.mark is None else list(self.mark),
            "horizon": horizon,
        }

    def load(self, data: dict[str, Any]) -> None:
        if len(data["newest"]) != len(self.newest):
            raise ValueError("the snapshot's clock has other streams than this matcher")
        self.newest = [float(x) for x in data["newest"]]
        self.idle = list(data["idle"])
        self.mark = None if data["mark"] is None else (float(data["mark"][0]), int(data["mark"][1]))
        horizon = data["horizon"]
        self._horizon = None if horizon is None else ((float(horizon[0]), int(horizon[1])), Fraction(horizon[2]))
        self._checked = None  # time continues from the snapshot's, not from this clock's


def heartbeat_args(stream_or_ts: str | float, ts: float | None) -> tuple[str | None, float]:
    """(stream name or None for every stream, ts) of ``heartbeat('B', 100)`` or
    ``heartbeat(100)``; a ts that is not a finite number is the caller's error."""
    stream = stream_or_ts if isinstance(stream_or_ts, str) else None
    if stream is None and ts is not None:
        raise TupleError(f"heartbeat takes (ts) or (stream, ts), got ({stream_or_ts!r}, {ts!r})")
    value = stream_or_ts if stream is None else ts
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) == math.inf:
        raise TupleError(f"heartbeat ts must be a finite number, got {value!r}")
    return stream, float(value)


def clock_for(
    config: MatcherConfig, streams: Sequence[StreamSchema], now: Callable[[], float] = time.monotonic
) -> Clock:
    """The clock a matcher with ``config`` keeps over the declared ``streams``.

    A stream's lateness is the most specific one given: ``config.stream_lateness``
    (the API) over the stream's ``ALLOWED LATENESS`` clause (the DDL) over
    ``config.allowed_lateness``. A DDL clause needs ``time='per-stream'``: one global
    clock has one lateness, and ignoring the clause would call tuples late that the
    DDL allows."""
    external = config.time == "external"
    # under external time the host engine decided lateness, DDL clauses included
    declared = {s.name: s.lateness for s in streams if s.lateness is not None and not external}
    if declared and config.time == "global":
        named = ", ".join(sorted(declared))
        raise ValueError(
            f"stream(s) {named} declare ALLOWED LATENESS in the DDL, which needs time='per-stream' "
            "(one global clock has one lateness)"
        )
    return Clock(
        0.0 if external else config.allowed_lateness,
        [s.name for s in streams],
        stream_lateness={**declared, **config.stream_lateness},
        idle_timeout=config.idle_timeout,
        mode=config.time,
        now=now,
    )
