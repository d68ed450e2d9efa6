"""Reproducible experiments and benchmarks, run with ``mqo experiment <name>`` or
``python -m experiments.<name>``.

Every public module of this package (a name not starting with ``_``) that defines
``DESCRIPTION`` (one line) and ``main(argv) -> int`` is an experiment; shared code
lives in ``_``-prefixed modules.
"""

from __future__ import annotations

import importlib
import pkgutil


def _discover() -> tuple[str, ...]:
    names = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.ispkg:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "DESCRIPTION") and hasattr(module, "main"):
            names.append(info.name)
    return tuple(sorted(names))


def __getattr__(name: str) -> object:
    if name == "EXPERIMENTS":
        return _discover()
    raise AttributeError(name)
