"""Event time of a matcher: what is late, and how far back tuples are kept.

One object owns the rules (docs/ARCHITECTURE.md, Time), so every way in (``push``,
``push_batch``, a prepared replay, the Spark stages) decides them alike:

* ``newest`` is the largest timestamp accepted so far (tuples and heartbeats);
* a tuple is **late** when ``ts < newest - allowed_lateness``, decided exactly on
  what the numbers mean (:mod:`indexes.exact`);
* the **retention horizon** is the largest ``newest - allowed_lateness - W`` so far,
  ``W`` being the largest MAXWINDOW of the registered multi-stream queries when it
  was reached. A tuple older than it cannot be in a result of a registered query
  (any result with it spans more than ``W``), so stored tuples before it are purged,
  and a query registered later sees only tuples from it on (its ``since``).

The horizon is kept exactly, as the pair (``newest``, ``W``) it was reached with;
the purge uses a double a little below it, which only ever keeps a tuple longer.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from indexes.exact import ABSOLUTE_BAND, RELATIVE_BAND, decimal_of, faithful, linear_sign, to_float

ONE = Fraction(1)
NEVER = -math.inf


class Clock:
    __slots__ = ("_horizon", "_late_exact", "_late_float", "allowed_lateness", "newest")

    def __init__(self, allowed_lateness: float = 0.0) -> None:
        if isinstance(allowed_lateness, bool) or not isinstance(allowed_lateness, (int, float)):
            raise ValueError(f"allowed_lateness must be a number of seconds, not {allowed_lateness!r}")
        if not (allowed_lateness >= 0 and math.isfinite(allowed_lateness)):
            raise ValueError(f"allowed_lateness must be a finite number >= 0, not {allowed_lateness!r}")
        self.allowed_lateness = float(allowed_lateness)
        self._late_exact = decimal_of(allowed_lateness)
        self._late_float = self.allowed_lateness
        self.newest = NEVER
        # (newest, window) that gave the horizon, or None before the first tuple
        self._horizon: tuple[float, Fraction] | None = None

    # ------------------------------------------------------------- lateness

    def is_late(self, ts: float) -> bool:
        """Whether a tuple at ``ts`` is late now."""
        newest = self.newest
        if ts >= newest or newest == NEVER:
            return False
        # ts - (newest - L) < 0
        return linear_sign(ts, ONE, 1.0, newest, -self._late_exact, -self._late_float) < 0

    def late_mask(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For tuples arriving in the order of ``ts`` (none of them held back):
        whether each is late, and the newest timestamp each one meets. Nothing
        changes; :meth:`advance` moves the clock."""
        ts = np.asarray(ts, np.float64)
        before = np.maximum.accumulate(np.concatenate(([self.newest], ts)))[:-1]
        late = np.zeros(len(ts), bool)
        behind = (ts < before) & (before != NEVER)
        if behind.any():
            with np.errstate(invalid="ignore"):
                d = ts - before + self._late_float
                band = RELATIVE_BAND * (np.abs(ts) + np.abs(before) + self._late_float) + ABSOLUTE_BAND
            late = behind & (d < -band)
            for i in np.flatnonzero(behind & ~(np.abs(d) > band)).tolist():
                late[i] = (
                    linear_sign(float(ts[i]), ONE, 1.0, float(before[i]), -self._late_exact, -self._late_float) < 0
                )
        return late, before

    # -------------------------------------------------------------- horizon

    def advance(self, ts: float, window: Fraction) -> bool:
        """Time reached ``ts`` while the largest MAXWINDOW is ``window``. True when the
        horizon moved (so stored tuples may be purged)."""
        if ts > self.newest:
            self.newest = ts
        if self.newest == NEVER:
            return False
        current = self._horizon
        candidate = (self.newest, window)
        if current is None:
            self._horizon = candidate
            return True
        if current == candidate:
            return False
        newest, w = current
        if w == window:
            moved = self.newest > newest
        else:  # the window changed since: compare newest - W exactly (rare)
            moved = decimal_of(self.newest) - window > decimal_of(newest) - w
        if moved:
            self._horizon = candidate
        return moved

    @property
    def horizon(self) -> float | Fraction:
        """The retention horizon, exactly (a float that means it, or a Fraction);
        -inf before any tuple."""
        if self._horizon is None:
            return NEVER
        newest, window = self._horizon
        return faithful(decimal_of(newest) - self._late_exact - window)

    def purge_horizon(self) -> float:
        """A double at or below the horizon: stored tuples before it can go."""
        if self._horizon is None:
            return NEVER
        newest, window = self._horizon
        h = newest - self._late_float - to_float(window)
        return h - (RELATIVE_BAND * (abs(newest) + self._late_float + to_float(window)) + ABSOLUTE_BAND)

    # ------------------------------------------------------------ snapshots

    def snapshot(self) -> dict[str, Any]:
        horizon = None
        if self._horizon is not None:
            horizon = [self._horizon[0], str(self._horizon[1])]
        return {"newest": self.newest, "horizon": horizon}

    def load(self, data: dict[str, Any]) -> None:
        self.newest = data["newest"]
        horizon = data["horizon"]
        self._horizon = None if horizon is None else (horizon[0], Fraction(horizon[1]))
