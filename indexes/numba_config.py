"""numba settings, in one place.

``cache=True`` writes compiled kernels next to their module so Spark workers and later
runs load them instead of compiling again (that is also why kernels live in an
importable module and take every array as an argument). ``fastmath`` stays off:
kernels compare with NaN and must get IEEE answers. Setting ``NUMBA_DISABLE_JIT=1``
runs every kernel as plain Python, which is how the tests measure kernel coverage.

numba looks for a writable cache directory (``NUMBA_CACHE_DIR``, ``__pycache__``
beside the kernels, the user's cache directory) when a cached kernel is *defined*, and
raises if it finds none, which would make ``import mqo`` fail on a read-only install
with an unwritable home. So the search is made here first: if it fails, the kernels
are cached in a per-user directory under the system's temporary directory, and if
that cannot be written either, they are compiled without a cache (slower start-up,
same answers); either way with a one-line warning on stderr.

Writing kernels: inside a loop that runs per row (per tuple, per pair), an array that
changes hands costs a reference count each time, and that can cost more than the row's
work. Three things do it: a view (``table[r]`` of a 2-D array, ``part[s, g, c]``), an
array assigned to a local (``tab = table`` under a branch), and a call with array
arguments to a kernel too big for LLVM to inline (small ones, a binary search or a
loop over a range of words, are inlined and cost nothing). So per-row loops index the
arrays in place (``table[r, w]``), keep the big helpers out of the loop (a helper
that takes and returns scalars is free; one that needs the arrays is called once per
block of rows, or only on a rare path), and say so in a comment where the loop is
flatter than the logic suggests. numba's ``inline="always"`` beats a call but is no
cure: it inlines at numba's level, where the helper's parameters become array-valued
locals. (Measured: :func:`indexes.join_kernels.join_rows`, its lists decided in its
loop, takes 13-21% less per row than with a helper per list; :func:`indexes.slice_kernels.update`,
its partials indexed in place, half the time of a view per tuple and column.)
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any, TypeVar, cast

KernelT = TypeVar("KernelT", bound=Callable[..., Any])

JIT_DISABLED = os.environ.get("NUMBA_DISABLE_JIT", "0") == "1"


def _probe() -> None:
    """Stands for a kernel: it lives in the kernels' directory, so numba looks for
    the same cache directories for it."""


def _cache_found() -> bool:
    """Whether numba finds a writable cache directory for the kernels: the cache numba
    would make for a kernel, made for ``_probe`` (if numba's internals are not as
    expected, the choice is left to numba, as before)."""
    try:
        from numba.core.caching import FunctionCache
    except ImportError:
        return True
    try:
        FunctionCache(_probe)  # type: ignore[no-untyped-call]
    except RuntimeError:
        return False
    return True


def fallback_cache_dir() -> str:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"mqo-numba-cache-{uid}")


def _writable_dir(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _choose_cache() -> bool:
    """Whether kernels are cached; points numba at a fallback directory if needed."""
    if JIT_DISABLED or _cache_found():
        return True
    from numba.core import config

    fallback = fallback_cache_dir()
    configured: str = getattr(config, "CACHE_DIR", "")  # numba's settings are module attributes, untyped
    places = [configured] if configured else []
    tried = ", ".join([*places, os.path.join(os.path.dirname(__file__), "__pycache__"), "the user cache"])
    if _writable_dir(fallback):
        setattr(config, "CACHE_DIR", fallback)  # noqa: B010
        if _cache_found():
            sys.stderr.write(f"mqo: warning: numba cannot cache in {tried}; kernels are cached in {fallback}\n")
            return True
    sys.stderr.write(
        f"mqo: warning: numba cannot cache in {tried} or {fallback}; kernels are compiled without a cache"
        " at every start\n"
    )
    return False


CACHE: bool = _choose_cache()


def kernel(function: KernelT) -> KernelT:
    """``function`` compiled by numba with the project's settings (cached where
    :data:`CACHE` allows; no fastmath, so NaN compares as IEEE says), typed as the
    plain function: callers see the signature they wrote, not numba's dispatcher."""
    from numba import njit

    return cast(KernelT, njit(cache=CACHE, nogil=True, fastmath=False, error_model="numpy")(function))
