"""A matcher's settings, validated in one place and carried whole by snapshots."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from predicates import DEFAULT_MAX_DISJUNCTS, INDEXED_KINDS, Kind

ORDERS = ("AJW", "AWJ", "JAW", "JWA", "WAJ", "WJA")  # the six evaluation orders of the three types
KIND_OF_LETTER = {kind.letter: kind for kind in INDEXED_KINDS}
STORE_MODES = ("all", "candidates")
MISSING_MODES = ("error", "null")


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

    ``allowed_lateness``: seconds a tuple may arrive behind the newest (see
    :mod:`mqo.clock`). ``order``: ``'adaptive'`` (re-picked per stream from measured
    selectivity and cost, :mod:`mqo.reorder`) or a static order such as ``'AJW'``.
    ``bucket_width``: seconds per time bucket (default: a quarter of the retention).
    ``max_disjuncts``: the bound on a query's OR expansion. ``store='candidates'``
    keeps only tuples a registered multi-stream query can still use (faster; a query
    registered later does not see tuples no query wanted). ``check``: every index
    structure checks its invariants after every change (slow; for debugging).
    ``missing='null'``: a pushed tuple may leave out columns (NULL); by default that is
    an error, since a misspelled or forgotten column would silently never match.
    """

    allowed_lateness: float = 0.0
    order: str = "adaptive"
    bucket_width: float | None = None
    max_disjuncts: int = DEFAULT_MAX_DISJUNCTS
    store: str = "all"
    check: bool = False
    missing: str = "error"

    def __post_init__(self) -> None:
        lateness = self.allowed_lateness
        if isinstance(lateness, bool) or not isinstance(lateness, (int, float)):
            raise ValueError(f"allowed_lateness must be a number of seconds, not {lateness!r}")
        if not (lateness >= 0 and math.isfinite(lateness)):
            raise ValueError(f"allowed_lateness must be a finite number >= 0, not {lateness!r}")
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
        return asdict(self)

    def with_changes(self, **changes: Any) -> MatcherConfig:
        return replace(self, **changes)
