"""Where each partial sits in a slice store's arrays (see :mod:`indexes.slice_kernels`).

Kept apart from the kernels so that reading partials does not import numba
(``import mqo`` leaves numba for the first kernel call)."""

from __future__ import annotations

import numpy as np

SUM_HI, SUM_LO, MIN, MAX, MEAN, M2 = range(6)  # fpart[..., field]: doubles
# ipart[..., field]: the count, the exact INTEGER partials: the sum is ICARRY * 2**64 +
# ISUM (ISUM wraps around in int64, ICARRY counts the wraps), so a sum of INTEGERs is
# exact whatever it passes on the way
N, ISUM, IMIN, IMAX, ICARRY = range(5)
FLOAT_FIELDS, INT_FIELDS = 6, 5  # the last axis of fpart and ipart


def exact_sums(ipart: np.ndarray) -> list[int]:
    """The exact INTEGER sums of partials ``ipart[..., INT_FIELDS]`` (flattened), as
    Python ints."""
    lo = ipart[..., ISUM].reshape(-1).tolist()
    carry = ipart[..., ICARRY].reshape(-1).tolist()
    return [c * 2**64 + v for c, v in zip(carry, lo, strict=True)]


INT_MAX = np.iinfo(np.int64).max
INT_MIN = np.iinfo(np.int64).min
