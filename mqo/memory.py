"""Memory around large builds: the C heap's freed pages handed back to the operating
system, and the cyclic collector paused while many objects are made (:class:`no_cyclic_gc`).

Compiling a plan of a million subscriptions, or building its kernel tables, makes
numpy temporaries of a few MB each, list after list. Once glibc has seen such blocks
freed it serves the next ones from its heap rather than from fresh mappings, and free
blocks between live ones stay resident: about 100 MiB at a million subscriptions,
gone from no measure but the process's resident size. ``malloc_trim(0)`` returns the
free pages inside the heap as well as at its top (a few ms at that size), so the
builds whose temporaries reach that scale call :func:`release_freed_memory` when they
are done. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
from collections.abc import Callable

# builds with fewer rows than this leave too little behind to be worth a call
LARGE_BUILD = 100_000

_trim: Callable[[int], int] | None = None
_looked = False


def release_freed_memory(size: int) -> bool:
    """After a build over ``size`` rows (queries, slots): hand the C heap's free pages
    back to the OS when the build was large; whether it was done."""
    global _trim, _looked
    if size < LARGE_BUILD:
        return False
    if not _looked:
        _looked = True
        if sys.platform.startswith("linux"):
            try:
                _trim = ctypes.CDLL(None).malloc_trim
            except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
                _trim = None
    if _trim is None:
        return False
    _trim(0)
    return True


class no_cyclic_gc:
    """The cyclic garbage collector paused for a block that allocates many objects and
    makes no reference cycles: compiling queries (the collector would otherwise scan
    the growing registry again and again, half the time of a million registrations),
    turning a pushed tuple's thousands of results into Match objects (about 40% of
    their cost), or matching a batch or a round of rows: the window's stored rows are
    objects that live for seconds of stream time, and full collections over them, which
    find nothing, took a fifth of ``mqo match``'s time on NEXMark's Q7 variants.
    Reference counting frees everything as usual; the collector looks at what the block
    left once it is running again (garbage in cycles waits at most until the block's
    end). A class: a generator's context cost more.

    Pauses nest and may overlap across threads, in any order: the collector runs again
    when the last one ends, if it was running when the first began (one lock and a
    count: the collector's switch is process-wide)."""

    def __enter__(self) -> None:
        global _paused, _was_collecting
        with _pause_lock:
            if not _paused:
                _was_collecting = gc.isenabled()
                gc.disable()
            _paused += 1

    def __exit__(self, *exc: object) -> None:
        global _paused
        with _pause_lock:
            _paused -= 1
            if not _paused and _was_collecting:
                gc.enable()


_pause_lock = threading.Lock()
_paused = 0  # pauses begun and not ended, in every thread
_was_collecting = False  # whether the collector ran when the first of them began
