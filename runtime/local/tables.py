"""Table files in a run of ``mqo match`` (``--table patients=patients.csv``), and the
rows a table file gained in a step of ``mqo serve`` (:mod:`runtime.local.serve_tables`).

The rows without a ``ts`` hold from the start: they are put before the first tuple.
A row version with a ``ts`` is put just before the first tuple (in arrival order)
whose ts is at or after it, so every tuple meets the table as of its own ts exactly
as if the versions and the tuples came in ts order (a tuple arriving later with an
older ts still reads the older version: the table keeps its versions, mqo.tables).
With the input read a chunk at a time, this goes on across the rounds of chunks
(:meth:`TableFeed.replay_round`).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import groupby
from typing import Any

import numpy as np

from mqo import Matcher, TupleError
from runtime.io.named_paths import TABLE
from runtime.io.stream_rows import InputError
from runtime.io.table_rows import TableChange, TableSpec, read_table_file


class TableFeed:
    """The rows of the table files of a run, put into the matcher at their time."""

    def __init__(
        self,
        matcher: Matcher,
        specs: list[TableSpec],
        read: list[tuple[TableSpec, list[TableChange]]] | None = None,
    ) -> None:
        """``specs``: the table files, read whole now; ``read``: rows read already, with
        their files (``mqo serve``: the rows a table file gained since it was last read)."""
        self.matcher = matcher
        names = [TABLE.declared(spec.table, spec.path, matcher.tables) for spec in specs]  # all before a file is read
        read = list(read or [])
        for spec, name in zip(specs, names, strict=True):
            read.append((spec, read_table_file(spec, matcher.catalog.require(name))))
        self.timed: list[tuple[float, int, TableSpec, list[TableChange]]] = []
        self.start_rows: list[tuple[TableSpec, list[TableChange]]] = []
        for order, (spec, changes) in enumerate(read):
            self.start_rows.append((spec, [c for c in changes if c.ts is None]))
            timed = sorted((c for c in changes if c.ts is not None), key=lambda c: c.ts)  # type: ignore[arg-type,return-value]
            for ts, group in groupby(timed, key=lambda c: c.ts):
                self.timed.append((float(ts), order, spec, list(group)))  # type: ignore[arg-type]
        self.timed.sort(key=lambda item: (item[0], item[1]))
        self._next = 0  # the first timed version not put yet
        self._reached = -np.inf  # the largest ts of the tuples so far
        self._open = 0  # tuples of the replay not ended yet (since the last version put)

    def start(self) -> None:
        """Put the rows that hold from the start (before the first tuple)."""
        for spec, changes in self.start_rows:
            self._put(spec, changes)
        self._next = 0
        self._reached = -np.inf
        self._open = 0

    def replay_round(
        self, prepared: list[Any], which: np.ndarray, rows: np.ndarray, ts: np.ndarray
    ) -> Iterator[tuple[int, list[Any]]]:
        """:meth:`mqo.Matcher.replay` of the tuples of a round (in arrival order, at
        ``ts``) with the table versions their time reaches put in between; the run's
        rounds follow :meth:`start` one after the other, and :meth:`finish` ends them.
        The tuples between two versions are one replay, across rounds too (its end
        emits aggregate views' windows: :meth:`mqo.Matcher.end_replay`)."""
        # the first tuple at or after t: the first place where the running largest ts reaches t
        reached = np.maximum.accumulate(np.maximum(ts, self._reached)) if len(ts) else ts
        done = 0
        while self._next < len(self.timed):
            t, _, spec, changes = self.timed[self._next]
            cut = int(np.searchsorted(reached, t, side="left"))
            if cut == len(ts):
                break  # not reached in this round
            if cut > done:
                yield from self._part(prepared, which[done:cut], rows[done:cut], done, True)
                done = cut
            elif self._open:  # the replay that ends here began in a round before
                last = self.matcher.end_replay()
                if last:
                    yield done - 1, last
                self._open = 0
            self._put(spec, changes)
            self._next += 1
        if done < len(which):
            yield from self._part(prepared, which[done:], rows[done:], done, False)
        if len(ts):
            self._reached = float(reached[-1])

    def _part(
        self, prepared: list[Any], which: np.ndarray, rows: np.ndarray, at: int, last: bool
    ) -> Iterator[tuple[int, list[Any]]]:
        for j, blocks in self.matcher.replay(prepared, which, rows, last=last):
            yield at + j, blocks
        self._open = 0 if last else self._open + len(which)

    def finish(self) -> list[Any]:
        """End the replay (what its end emits, returned) and put the versions no tuple
        reached (after the last tuple)."""
        last = self.matcher.end_replay() if self._open else []
        self._open = 0
        for _, _, spec, changes in self.timed[self._next :]:
            self._put(spec, changes)
        self._next = len(self.timed)
        return last

    def _put(self, spec: TableSpec, changes: list[TableChange]) -> None:
        """Put a file's rows (of one ts) in file order: runs of upserts and of deletes."""
        for delete, run in groupby(changes, key=lambda c: c.delete):
            batch = list(run)
            ts = batch[0].ts
            try:
                if delete:
                    self.matcher.delete_rows(spec.table, [c.values for c in batch], ts)
                else:
                    self.matcher.upsert_rows(spec.table, [c.values for c in batch], ts)
            except TupleError as err:  # (fields are checked as read: what is left names the row)
                raise InputError(f"{spec.path}:{batch[0].line}: {err}") from None
