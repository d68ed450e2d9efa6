"""The numba kernels of the comparison cache: the lexer over many texts' bytes and the
cut of their tokens into prefixes and comparisons (what they compute:
:mod:`predicates.token_scan`, whose plain functions these are, compiled; the language
package stays pure Python and runs them uncompiled where no kernel is handed to it).

Importing this module does not import numba: the kernels are compiled (or loaded from
numba's cache) on their first call, so that registering a few queries before the first
tuple costs no numba import. The plain functions call small helpers of their module;
numba calls only compiled functions, so each function is compiled against a copy of
the module's names in which the helpers are compiled too. Arrays and scalars only, so
the kernels cache (``cache=True``; they live in :mod:`predicates.token_scan`'s file,
whose change invalidates them all).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from predicates import token_scan

_HELPERS = ("_is_digit", "_is_word_start", "_is_word", "_quoted_end", "_word_of", "_is_and", "_is_id", "_grown",
            "_group")  # fmt: skip
# the bodies the kernels share (called, not inlined: each is long)
_SHARED = ("_lex_into", "_cut_into")
_compiled: dict[str, Callable[..., Any]] = {}


def _kernel(name: str) -> Callable[..., Any]:
    """``token_scan.<name>`` compiled, its helpers compiled with it (once)."""
    if not _compiled:
        from numba import njit

        from indexes.numba_config import kernel

        names: dict[str, Any] = dict(vars(token_scan))

        def compiled(plain: Any, inline: bool = False) -> Callable[..., Any]:
            rebound = types.FunctionType(plain.__code__, names, plain.__name__, plain.__defaults__)
            rebound.__qualname__ = plain.__qualname__
            rebound.__module__ = plain.__module__
            if inline:  # (a helper called per token: no call, no reference counts of its arrays)
                return cast(Callable[..., Any], njit(inline="always")(rebound))
            return cast(Callable[..., Any], kernel(rebound))

        for helper in _HELPERS:
            names[helper] = compiled(getattr(token_scan, helper), inline=True)
        for shared in _SHARED:
            names[shared] = compiled(getattr(token_scan, shared))
        for kernel_name in ("lex_bytes", "cut_tokens", "read_one"):
            _compiled[kernel_name] = compiled(getattr(token_scan, kernel_name))
    return _compiled[name]


def lex_bytes(data: np.ndarray, text_ends: np.ndarray, blank: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`predicates.token_scan.lex_bytes`, compiled."""
    return cast(tuple[np.ndarray, ...], _kernel("lex_bytes")(data, text_ends, blank))


def cut_tokens(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`predicates.token_scan.cut_tokens`, compiled."""
    return cast(tuple[np.ndarray, ...], _kernel("cut_tokens")(*arrays))


def read_one(*arrays: np.ndarray) -> tuple[int, ...]:
    """:func:`predicates.token_scan.read_one`, compiled."""
    return cast(tuple[int, ...], _kernel("read_one")(*arrays))


__all__ = ["cut_tokens", "lex_bytes", "read_one"]
