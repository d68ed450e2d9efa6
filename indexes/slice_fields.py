"""Where each partial sits in a slice store's arrays (see :mod:`indexes.slice_kernels`).

Kept apart from the kernels so that reading partials does not import numba
(``import mqo`` leaves numba for the first kernel call)."""

from __future__ import annotations

import numpy as np

SUM_HI, SUM_LO, MIN, MAX, MEAN, M2 = range(6)  # fpart[..., field]: doubles
N, ISUM, IMIN, IMAX = range(4)  # ipart[..., field]: the count, exact int64 partials
FLOAT_FIELDS, INT_FIELDS = 6, 4  # the last axis of fpart and ipart
INT_MAX = np.iinfo(np.int64).max
INT_MIN = np.iinfo(np.int64).min
