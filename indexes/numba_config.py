"""numba settings, in one place.

``cache=True`` writes compiled kernels next to their module so Spark workers and later
runs load them instead of compiling again (that is also why kernels live in an
importable module and take every array as an argument). ``fastmath`` stays off:
kernels compare with NaN and must get IEEE answers. Setting ``NUMBA_DISABLE_JIT=1``
runs every kernel as plain Python, which is how the tests measure kernel coverage.
"""

from __future__ import annotations

import os

JIT_OPTIONS: dict[str, bool] = {"cache": True, "nogil": True, "fastmath": False, "error_model": "numpy"}
JIT_DISABLED = os.environ.get("NUMBA_DISABLE_JIT", "0") == "1"
