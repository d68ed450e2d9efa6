"""A matcher's settings, validated in one place and carried whole by snapshots."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from predicates import DEFAULT_MAX_DISJUNCTS, INDEXED_KINDS, Kind

TIME_MODES = ("per-stream", "global", "external")
EMIT_MODES = ("arrival", "ordered")

ORDERS = ("AJW", "AWJ", "JAW", "JWA", "WAJ", "WJA")  # the six evaluation orders of the three types
KIND_OF_LETTER = {kind.letter: kind for kind in INDEXED_KINDS}
STORE_MODES = ("all", "candidates")
MISSING_MODES = ("error", "null")


def check_seconds(name: str, value: Any) -> float:
    """A finite number of seconds >= 0, or a clear error naming the setting."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number of seconds, not {value!r}")
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")
    return float(value)


def order_name(order: tuple[Kind, ...]) -> str:
    return "".join(kind.letter for kind in order)


def parse_order(order: str) -> tuple[Kind, Kind, Kind] | None:
    """``'AJW'`` or ``'static:AJW'`` as the three predicate types in evaluation order;
    None for ``'adaptive'``."""
    if order.lower() == "adaptive":
        return None
    text = order.upper()
    if text.startswith("STATIC:"):
        text = text[len("STATIC:") :]
    if text not in ORDERS:
        raise ValueError(
            f"unknown evaluation order {order!r}; use adaptive or one of {', '.join(ORDERS)} (or static:XYZ)"
        )
    return tuple(KIND_OF_LETTER[ch] for ch in text)  # type: ignore[return-value]


@dataclass(frozen=True)
class MatcherConfig:
    """How a :class:`~mqo.Matcher` runs.

    ``allowed_lateness``: seconds a tuple may arrive behind its stream's newest
    (``stream_lateness``: per stream, by name). ``time``: ``'per-stream'`` (each
    stream keeps its own watermark, the matcher's is the minimum over active streams)
    or ``'global'`` (one clock: the newest ts of any stream) or ``'external'`` (the
    watermark is the host engine's, given by ``heartbeat(ts)``; tuples do not move it,
    and no lateness applies: how the Spark streaming stage runs). ``idle_timeout``: seconds
    of processing time after which a silent stream stops holding the others back
    (None: only when declared idle). See :mod:`mqo.clock`. ``emit``: ``'arrival'``
    (a result as soon as its last tuple arrives) or ``'ordered'`` (results held until
    the watermark has passed them, then released in ``ts`` order; :mod:`mqo.emit`).
    ``order``: ``'adaptive'`` (re-picked per stream from measured selectivity and
    cost, :mod:`mqo.reorder`) or a static order such as ``'AJW'``.
    ``bucket_width``: seconds per time bucket (default: a quarter of the retention).
    ``max_disjuncts``: the bound on a query's OR expansion. ``store='candidates'``
    keeps only tuples a registered multi-stream query can still use (faster; a query
    registered later does not see tuples no query wanted). ``check``: every index
    structure checks its invariants after every change (slow; for debugging).
    ``missing='null'``: a pushed tuple may leave out columns (NULL); by default that is
    an error, since a misspelled or forgotten column would silently never match.
    ``keep_window``: seconds of window stored at least, whatever the registered
    queries' MAXWINDOW: a query registered later with a MAXWINDOW up to it then sees
    every earlier tuple it could still use (a service whose queries come and go).
    """

    allowed_lateness: float = 0.0
    time: str = "per-stream"
    stream_lateness: Mapping[str, float] = field(default_factory=dict)
    idle_timeout: float | None = 60.0
    emit: str = "arrival"
    order: str = "adaptive"
    bucket_width: float | None = None
    max_disjuncts: int = DEFAULT_MAX_DISJUNCTS
    store: str = "all"
    check: bool = False
    missing: str = "error"
    keep_window: float = 0.0

    def __post_init__(self) -> None:
        check_seconds("allowed_lateness", self.allowed_lateness)
        if self.time not in TIME_MODES:
            raise ValueError(f"time must be one of {', '.join(TIME_MODES)}, not {self.time!r}")
        if self.stream_lateness and self.time != "per-stream":
            raise ValueError("stream_lateness needs time='per-stream' (one global clock has one lateness)")
        for name, value in dict(self.stream_lateness).items():
            check_seconds(f"stream_lateness[{name!r}]", value)
        if self.idle_timeout is not None:
            check_seconds("idle_timeout", self.idle_timeout)
        check_seconds("keep_window", self.keep_window)
        if self.emit not in EMIT_MODES:
            raise ValueError(f"emit must be one of {', '.join(EMIT_MODES)}, not {self.emit!r}")
        parse_order(self.order)
        width = self.bucket_width
        if width is not None and not (width > 0 and math.isfinite(width)):
            raise ValueError(f"bucket_width must be a positive number of seconds, not {width!r}")
        if self.store not in STORE_MODES:
            raise ValueError(f"store must be one of {', '.join(STORE_MODES)}, not {self.store!r}")
        if self.missing not in MISSING_MODES:
            raise ValueError(f"missing must be one of {', '.join(MISSING_MODES)}, not {self.missing!r}")
        if self.max_disjuncts < 1:
            raise ValueError(f"max_disjuncts must be at least 1, not {self.max_disjuncts!r}")

    @property
    def static_order(self) -> tuple[Kind, Kind, Kind] | None:
        """The fixed evaluation order, or None when it is adaptive."""
        return parse_order(self.order)

    def as_dict(self) -> dict[str, Any]:
        """The settings as plain data (a snapshot's part)."""
        return {**asdict(self), "stream_lateness": dict(self.stream_lateness)}

    def with_changes(self, **changes: Any) -> MatcherConfig:
        return replace(self, **changes)
