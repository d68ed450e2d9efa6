"""Tables in ``mqo serve`` (the directory service): their declarations in query files
and their rows in table files that grow (``--table patients=patients.csv``).

**Declarations.** A table is declared by ``CREATE TABLE`` in a query file, as for
``mqo match``. It stays for the life of the service's checkpoint (a table has no
removal): deleting or changing the file that declared it leaves the table and its
rows. The same ``CREATE TABLE`` again (the file changed, or another file repeats it)
is taken as it is (:func:`without_declared_tables`); one with other columns, types
or KEY is an error of that file, at the statement.

**Rows.** A table file (CSV: the table's columns, optional ``ts`` and ``op``,
:mod:`runtime.io.table_rows`) is read like an input that grows: once its table is
declared, each step takes the rows appended since the step that read it last (after
the file has stood still for the poll interval, as data files), and puts them in
among the step's tuples as ``mqo match`` does (:class:`runtime.local.tables.TableFeed`):
rows without ``ts`` first, a version at ``t`` just before the first of the step's
tuples at which the largest ts reaches ``t`` (after them all when none does). A tuple
reads the table as of its own ts; a version older than tuples matched already (a
late upsert) is read by the tuples matched after it (the results found before stay).

The new rows of a file are taken all or none: a bad row (named by file, line and
column) is reported in the step's ``input-errors`` file and on the log, none of them
is put, and the file is read again once it changes (mend the row in place); with
``--on-bad-row error`` the service stops. A file that changed other than by growing
(shorter, or its first bytes not those read) is reported once and read no more: its
rows taken stay in the table (append upserts and deletes to change them).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from mqo import Matcher
from predicates import QueryError, Source, split_tables
from runtime.io.stream_rows import InputError
from runtime.io.table_rows import TableChange, TableSpec, read_table_file
from runtime.io.writers import input_holding
from runtime.local.serve_files import Settling, signature
from runtime.workload import CliError

# what a checkpoint keeps of a table file, per "table=path" (JSON-ready)
TableFileState = dict[str, Any]


def without_declared_tables(matcher: Matcher, text: str, source_name: str) -> str:
    """``text`` with its ``CREATE TABLE`` statements of tables declared already, with
    the same columns and KEY, blanked (positions kept); a QueryError at a statement
    that declares a known table otherwise. A text that does not parse is given back
    as it is: registering it reports the error with its position."""
    try:
        _, tables = split_tables(text, source_name)
    except QueryError:
        return text
    kept = list(text)
    for table in tables:
        known = matcher.catalog.get(table.name)
        if known is None or not known.table_key:
            continue  # a new table (or the name of a stream or view: registering says so)
        assert table.span is not None
        if dataclasses.replace(table.schema, name=known.name) != known:
            columns = ", ".join(f"{c.name} {c.ctype.name}" for c in known.columns)
            raise QueryError(
                f"table {known.name} is declared already as ({columns}) KEY ({', '.join(known.table_key)}); a table"
                " cannot change while the service runs (its rows stay): declare a table of another name, or start"
                " over with a new --checkpoint",
                Source(text, source_name),
                table.span,
            )
        start, end = table.span.start, table.span.end
        kept[start:end] = [c if c == "\n" else " " for c in text[start:end]]
    return "".join(kept)


class TableFiles:
    """The ``--table`` files of a service and what was read of each (``state``, kept
    in the checkpoint: per ``table=path``, the size, modification time and digest of
    what was read, the rows taken and the step that took them)."""

    def __init__(
        self, specs: list[TableSpec], state: dict[str, TableFileState], settling: Settling, log: IO[str]
    ) -> None:
        self.specs = specs
        self.state = state
        self.settling = settling
        self.log = log

    @staticmethod
    def key(spec: TableSpec) -> str:
        return f"{spec.table.lower()}={os.path.abspath(spec.path)}"

    def waiting_for_declaration(self, matcher: Matcher) -> list[str]:
        """The ``--table`` tables no query has declared yet (their files wait)."""
        declared = {name.lower() for name in matcher.tables}
        return [spec.table for spec in self.specs if spec.table.lower() not in declared]

    def take(
        self, matcher: Matcher, step: int, on_bad_row: str
    ) -> tuple[list[tuple[TableSpec, list[TableChange]]], list[dict[str, Any]]]:
        """The rows each declared table's file gained, read and checked; the records of
        files that could not be taken (a bad row, a file rewritten)."""
        declared = {name.lower(): name for name in matcher.tables}
        taken: list[tuple[TableSpec, list[TableChange]]] = []
        errors: list[dict[str, Any]] = []
        for spec in self.specs:
            entry = self.state.get(self.key(spec), _fresh())
            path = Path(spec.path)
            sig = signature(path)
            if entry["stopped"] or sig is None or [*sig] in (entry["read_as"], entry["failed"]):
                continue
            # (looked at before its table is declared too: it settles meanwhile)
            if not self.settling.ready(path, sig):
                continue
            name = declared.get(spec.table.lower())
            if name is None:
                continue  # read once a query file declares it
            self.state[self.key(spec)] = entry
            try:
                blob = path.read_bytes()
                changes, failure = read_table_file(spec, matcher.catalog.require(name)), None
            except (InputError, OSError) as err:
                changes, failure = [], err
            now = signature(path)
            if now != sig:  # written to while it was read: read again once it stands still
                self.settling.changed(path, now)
                continue
            self.settling.forget(path)
            done = entry["read_as"][0] if entry["read_as"] else 0
            if len(blob) < done or _digest(blob[:done]) != entry["digest"]:
                entry["stopped"] = True
                errors.append(self._report(spec, _rewritten(spec, entry), step))
                continue
            if failure is not None:
                if on_bad_row != "skip":
                    raise InputError(str(failure)) from None
                entry["failed"] = [*sig]
                message = f"{failure}; none of the rows {spec.path} gained is taken (it is read again once it changes)"
                errors.append(self._report(spec, message, step))
                continue
            new = changes[entry["rows"] :]
            entry.update(read_as=[*sig], digest=_digest(blob), rows=len(changes), step=step, failed=None)
            if new:
                taken.append((spec, new))
        return taken, errors

    def _report(self, spec: TableSpec, message: str, step: int) -> dict[str, Any]:
        print(f"mqo serve: warning: step {step}: {message}", file=self.log)
        return {"table": spec.table, "file": spec.path, "error": message}


def _fresh() -> TableFileState:
    # read_as: [size, mtime ns] when last read; digest: of those bytes; failed: the
    # signature of a read with a bad row (not read again until it changes)
    return {"read_as": None, "digest": _digest(b""), "rows": 0, "step": 0, "failed": None, "stopped": False}


def _rewritten(spec: TableSpec, entry: TableFileState) -> str:
    return (
        f"{spec.path}: changed other than by adding rows at its end since step {entry['step']} read it"
        f" ({entry['read_as'][0]:,} bytes then); a table file only grows, so it is read no more (its rows taken"
        " stay in the table: append upserts and deletes, or give a new file on a new --checkpoint)"
    )


def _digest(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


def check_table_options(specs: list[TableSpec], inputs: Mapping[str, str], matcher: Matcher) -> None:
    """No table given twice, none a declared stream, none a file in an input directory
    (it would be read as data)."""
    seen: set[str] = set()
    for spec in specs:
        if spec.table.lower() in seen:
            raise CliError(f"--table {spec.table} is given twice (one file per table)")
        seen.add(spec.table.lower())
        known = matcher.catalog.get(spec.table)
        if known is not None and not known.table_key:
            raise CliError(f"--table {spec.table}: {spec.table} is a stream (give its files with --input)")
        inside = input_holding(spec.path, inputs.values())
        if inside is not None:
            stream = next(s for s, f in inputs.items() if f == inside)
            raise CliError(
                f"--table {spec.table}={spec.path} is in the input directory of --input {stream}={inside}: the"
                " service would read it as data; keep table files outside the inputs"
            )
