"""mqo inside Spark: stages that take stream DataFrames and give result DataFrames.

* match queries: :func:`match_batch` (:mod:`.batch`) in batch jobs, :func:`match_stream`
  (:mod:`.streaming`) in Structured Streaming, with :func:`write_files`;
* aggregate queries: :func:`aggregate_batch` (:mod:`.aggregate`) and
  :func:`aggregate_stream` (:mod:`.aggregate_streaming`);
* queries that come and go while a streaming stage runs: a control stream of commands,
  :mod:`.control` (match) and :mod:`.aggregate_control` (aggregate).

Behind them: :mod:`.spec` (what every task needs to rebuild the plan), :mod:`.tables`
(the rows of the queries' tables, shipped to every task), :mod:`.worker` (what runs on
the workers), :mod:`.cli` and :mod:`.serve` (``mqo match`` and ``mqo
serve`` with ``--engine spark``). The stages are imported on first use, so importing
one module does not load them all.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOME = {
    "match_batch": "batch",
    "match_stream": "streaming",
    "write_files": "streaming",
    "aggregate_batch": "aggregate",
    "aggregate_stream": "aggregate_streaming",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
