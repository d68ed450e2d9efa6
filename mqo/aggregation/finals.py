"""Aggregates finished from the partials a window folds (:mod:`indexes.slice_fields`):
one array per aggregate over every (window, group) row of an emission."""

from __future__ import annotations

import warnings
from fractions import Fraction
from typing import Any

import numpy as np

from indexes import slice_fields as K
from mqo.aggregation.having import Column


def finals(func: str, integer: bool, f: np.ndarray, p: np.ndarray, what: str) -> Column:
    """``func`` finished from the partials of many groups (``f``: [G, 6], ``p``: [G, 5]):
    the values (int64 for COUNT and SUM/MIN/MAX of INTEGER, else float64) and where they
    are NULL (the group has too few values); ``what`` names the query and the aggregate
    in a warning."""
    n = p[:, K.N]
    if func == "COUNT":
        return n.astype(np.int64), np.zeros(len(n), bool)
    if integer and func in ("SUM", "AVG") and len(p) and (p[:, K.ICARRY].any() or np.abs(p[:, K.ISUM]).max() >= 2**53):
        # a sum that wrapped around int64, or an AVG whose int64 sum is no exact double
        sums = integer_sums(func, p, what)
        null = np.array([v is None for v in sums], bool)
        dtype = np.float64 if func == "AVG" else np.int64
        return np.array([0 if v is None else v for v in sums], dtype), null
    with np.errstate(divide="ignore", invalid="ignore"):
        if func == "SUM":
            values = p[:, K.ISUM] if integer else f[:, K.SUM_HI] + f[:, K.SUM_LO]
        elif func == "AVG":
            # both exact doubles (|ISUM| < 2**53), so one division rounds correctly
            values = p[:, K.ISUM] / n if integer else (f[:, K.SUM_HI] + f[:, K.SUM_LO]) / n
        elif func == "MIN":
            values = p[:, K.IMIN] if integer else f[:, K.MIN]
        elif func == "MAX":
            values = p[:, K.IMAX] if integer else f[:, K.MAX]
        else:
            variance = np.maximum(f[:, K.M2], 0.0) / (n - 1)
            values = variance if func == "VARIANCE" else np.sqrt(variance)
    return values, n < (2 if func in ("STDDEV", "VARIANCE") else 1)


def integer_sums(func: str, p: np.ndarray, what: str) -> list[Any]:
    """SUM or AVG of INTEGER partials from their exact sums: AVG correctly rounded; a
    SUM past 64 bits (the INTEGER it is) is NULL, with a warning, as a FLOAT that
    overflows is written as NULL: one window's overflow loses no other row."""
    out: list[Any] = []
    passed = 0
    for total, count in zip(K.exact_sums(p), p[:, K.N].tolist(), strict=True):
        if not count:
            out.append(None)
        elif func == "AVG":
            out.append(float(Fraction(total, count)))
        elif K.INT_MIN <= total <= K.INT_MAX:
            out.append(total)
        else:
            out.append(None)
            passed += 1
    if passed:
        warnings.warn(
            f"{what}: the sum passes 64 bits in {passed} row(s) (an INTEGER is 64-bit); written as NULL", stacklevel=6
        )
    return out
