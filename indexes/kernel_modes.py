"""The constants the numba kernels (:mod:`indexes.kernels`) and their callers share.

Kept apart from the kernels so that importing the matcher does not import numba:
the kernels are imported (and compiled, or loaded from numba's cache) on first use.
"""

from __future__ import annotations

# list modes: which positions a tuple fails
MODE_LESS = 0  # < <= : satisfied [lo, n), fails the prefix [0, lo)
MODE_GREATER = 1  # > >= : satisfied [0, hi), fails the suffix [hi, n)
MODE_EQUAL = 2  # =    : satisfied [lo, hi), fails both sides
MODE_NOT_EQUAL = 3  # != : fails the run [lo, hi)
NULL = -1  # lo of a tuple whose value is NULL: it fails every predicate of the list
