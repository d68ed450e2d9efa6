"""Plain-Python reference of indexes/slice_kernels.py: per (slice, group, column) the
list of values, aggregated from the definitions (exact Fractions for sums and
variances, no compensation tricks)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any


def windows(
    slot: list[int], group: list[int], fvals: list[list[float]], ivals: list[list[int]], lo: int, hi: int
) -> dict[int, dict[str, Any]]:
    """Per group: rows, and per column (n, exact sum, min, max, sample variance, int sum)."""
    out: dict[int, dict[str, Any]] = {}
    for s, g, fv, iv in zip(slot, group, fvals, ivals, strict=True):
        if not (lo <= s < hi):
            continue
        entry = out.setdefault(g, {"rows": 0, "values": [[] for _ in fv], "ints": [[] for _ in fv]})
        entry["rows"] += 1
        for c, (x, i) in enumerate(zip(fv, iv, strict=True)):
            if x == x:
                entry["values"][c].append(x)
                entry["ints"][c].append(i)
    for entry in out.values():
        stats = []
        for xs, ints in zip(entry["values"], entry["ints"], strict=True):
            exact = [Fraction(x) for x in xs]
            n = len(xs)
            mean = sum(exact, Fraction(0)) / n if n else None
            var = sum(((x - mean) ** 2 for x in exact), Fraction(0)) / (n - 1) if n > 1 else None
            stats.append(
                {
                    "n": n,
                    "sum": math.fsum(xs),
                    "min": min(xs) if xs else None,
                    "max": max(xs) if xs else None,
                    "var": var,
                    "isum": sum(ints),
                    "imin": min(ints) if ints else None,
                    "imax": max(ints) if ints else None,
                }
            )
        entry["stats"] = stats
    return out


def windows_holding(data: list[int], step: int, length: int, k_from: int, k_to: int) -> list[int]:
    """The windows ``k`` in ``k_from .. k_to`` (slices ``k*step - length + 1 .. k*step``,
    ``length`` 0: every slice up to ``k*step``) holding a slice of ``data``: each
    window checked against every slice."""
    return [
        k
        for k in range(k_from, k_to + 1)
        if any(j <= k * step and (length == 0 or j >= k * step - length + 1) for j in data)
    ]
