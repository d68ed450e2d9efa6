"""Tables in the Spark match stages: reference data shipped to every task.

A query reading a table (``CREATE TABLE``, :mod:`mqo.tables`) joins each result with
the version of its key that is newest at or before the result's ts. The stage gets a
table's rows as a DataFrame (``tables={"patients": df}``: the table's columns, an
optional ``ts``, the event time from which the row's version holds, NULL or absent:
from the start, and an optional ``op``, ``upsert`` (or NULL, empty: the default) or
``delete``, as in a table file of ``mqo match --table``), from a :class:`mqo.Matcher`
that holds rows already (``upsert_rows``), or, for ``mqo match --engine spark``, from
the table files (:func:`put_file_rows`).

**Reference data.** Every version is collected once on the driver and goes with the
stage's spec to every task, whose matcher holds them all before its first tuple
(:func:`runtime.spark.worker.spawn`). That assumes a table that fits in the driver's
and each Python worker's memory several times over (dimension data: patients,
products, accounts; thousands to a hundred thousand rows): a DataFrame of more than
``max_table_rows`` rows (default :data:`DEFAULT_MAX_TABLE_ROWS`) is refused with an
error saying so, before it is collected. A task loads the versions again each time it
starts a matcher (a batch task once; a streaming state group in every micro-batch).

**Why the results are the local engine's.** A version is read only by results whose
key-giving tuples have a ts at or after its own, and a result is joined when it is
found; so a table holding every version before any tuple gives each result what a
local run gives it, where a version goes in just before the first tuple at or after
its ts (:mod:`runtime.local.tables`). Every task holds the whole table, so how the
stage partitions the tuples (by key or by time bucket) does not matter: a result is
joined where it is found. Versions are made in the order a table file's rows are put
(rows without ``ts`` first, then by ``ts``, ties in row order: the last one wins), so
their implicit ids are the local engine's too.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import groupby
from typing import TYPE_CHECKING, Any

from mqo import Matcher, TupleError
from predicates import ColumnType, StreamSchema, did_you_mean
from runtime.spark.common import typed_column
from runtime.spark.spec import SparkStageError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from runtime.local.tables import TableFeed

DEFAULT_MAX_TABLE_ROWS = 100_000

# (DataFrame row number, ts or None: from the start, whether it deletes, the values)
Change = tuple[int, float | None, bool, dict[str, Any]]


def stage_tables(
    matcher: Matcher,
    frames: Mapping[str, DataFrame] | None,
    max_rows: int,
    streams: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The tables' texts and every version (``reference_tables`` of a snapshot: what
    the spec ships), from the matcher's own rows and the DataFrames ``frames`` (by
    table name); None when the matcher declares no table. ``streams``: the stage's
    stream DataFrames, none of which may be a table. Nothing of ``matcher`` changes."""
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
        raise SparkStageError(f"max_table_rows must be a whole number >= 1, got {max_rows!r}")
    declared = {name.lower(): name for name in matcher.tables}
    listed = ", ".join(matcher.tables) if declared else "none is declared: CREATE TABLE in the queries declares one"
    for name in streams or ():
        if str(name).lower() in declared:
            raise SparkStageError(
                f"{name} is a table: give its rows as tables={{{name!r}: DataFrame}} (columns, optional ts and op)"
            )
    given: dict[str, DataFrame] = {}
    for name, df in (frames or {}).items():
        table = declared.get(str(name).lower())
        if table is None:
            raise SparkStageError(
                f"tables: no table {name!r} among the queries" + did_you_mean(str(name), list(declared.values()))
                + f" (tables: {listed})"
            )  # fmt: skip
        if table in given:
            raise SparkStageError(f"tables: table {table} is given twice")
        if df.isStreaming:
            raise SparkStageError(
                f"table {table}: a streaming DataFrame; a table's rows are a batch DataFrame, collected once"
            )
        given[table] = df
    if not declared:
        return None
    held = matcher.snapshot(queries=False)["reference_tables"]
    versions = {entry["name"]: entry for entry in held["versions"]}
    if given:
        scratch = Matcher(matcher.catalog.ddl())  # (no plan: no version is ever dropped)
        scratch.register_queries(list(held["texts"]), "<tables>")
        for table, df in given.items():
            if versions[table]["versions"]:
                raise SparkStageError(
                    f"table {table}: the matcher holds rows of it already, and tables= gives it a DataFrame; "
                    "give its rows one way"
                )
            put_changes(scratch, table, collect_changes(table, df, matcher.catalog.require(table), max_rows))
        for entry in scratch.snapshot(queries=False)["reference_tables"]["versions"]:
            if entry["name"] in given:
                versions[entry["name"]] = entry
    return {"texts": list(held["texts"]), "versions": [versions[entry["name"]] for entry in held["versions"]]}


def collect_changes(table: str, df: DataFrame, schema: StreamSchema, max_rows: int) -> list[Change]:
    """A table DataFrame's rows, typed and checked, in the DataFrame's row order (as
    ``collect`` gives them); more than ``max_rows`` rows is an error."""
    fields = df.schema.fields
    own_op = schema.index_of("op") is not None
    optional = ["ts", *([] if own_op else ["op"])]
    known = [*schema.column_names, *optional]
    for f in fields:
        if schema.index_of(f.name) is None and f.name.lower() not in optional:
            raise SparkStageError(
                f"table {table}: the DataFrame has a column {f.name!r}, which is not a column of the table"
                + did_you_mean(f.name, known)
                + f" (columns: {', '.join(schema.column_names)}; optional: {', '.join(optional)})"
            )
    exprs = [f"{typed_column(fields, table, c.name, c.ctype, 'table')} AS _t{i}" for i, c in enumerate(schema.columns)]
    present = {f.name.lower() for f in fields}
    if "ts" in present:
        exprs.append(f"{typed_column(fields, table, 'ts', 'ts', 'table')} AS _ts")
    if "op" in optional and "op" in present:
        exprs.append(f"{typed_column(fields, table, 'op', ColumnType.STRING, 'table')} AS _op")
    collected = df.selectExpr(*exprs).limit(max_rows + 1).toArrow()
    if collected.num_rows > max_rows:
        raise SparkStageError(
            f"table {table}: the DataFrame has more than {max_rows:,} rows. A table is reference data, collected "
            "on the driver and shipped to every task; raise max_table_rows if the driver and every Python worker "
            "can hold it several times over, or filter it to the rows the queries need"
        )
    names = [c.name for c in schema.columns]
    key = {name.lower() for name in schema.table_key}
    out: list[Change] = []
    for i, row in enumerate(collected.to_pylist()):
        values = {name: row[f"_t{k}"] for k, name in enumerate(names)}
        delete = _deletes(row.get("_op"), table, i)
        if delete:  # (only the key's fields count)
            values = {name: values[name] for name in names if name.lower() in key}
        out.append((i, row.get("_ts"), delete, values))
    return out


def _deletes(op: str | None, table: str, row: int) -> bool:
    """Whether an ``op`` value says delete (NULL, empty or ``upsert``: no)."""
    word = "" if op is None else op.strip().lower()
    if word in ("", "upsert"):
        return False
    if word == "delete":
        return True
    raise SparkStageError(f"table {table}, DataFrame row {row}: op {op!r} is not upsert or delete")


def put_changes(matcher: Matcher, table: str, changes: list[Change]) -> None:
    """Put a table's changes into ``matcher`` in the order a table file's rows are put:
    those without ts first, then by ts (ties in row order); a bad row is an error
    naming its DataFrame row."""
    ordered = [c for c in changes if c[1] is None] + sorted((c for c in changes if c[1] is not None), key=_ts_of)
    for (ts, delete), run in groupby(ordered, key=lambda c: (c[1], c[2])):
        batch = list(run)
        try:
            _put(matcher, table, ts, delete, [c[3] for c in batch])
        except TupleError:
            for row, _, _, values in batch:  # (the failed call put nothing) which row it was
                try:
                    _put(matcher, table, ts, delete, [values])
                except TupleError as err:
                    raise SparkStageError(f"table {table}, DataFrame row {row}{_reason(str(err), table)}") from None
            raise


def _reason(message: str, table: str) -> str:
    """A one-row call's message without what names the table and its row 0 (the
    DataFrame row is named instead)."""
    for prefix in (f"table {table}, row 0", f"table {table}, key 0", f"table {table}"):
        if message.startswith(prefix):
            message = message[len(prefix) :]
            break
    return message if message.startswith((":", ",")) else ": " + message


def _ts_of(change: Change) -> float:
    return change[1]  # type: ignore[return-value]  # (only changes with a ts are sorted)


def _put(matcher: Matcher, table: str, ts: float | None, delete: bool, rows: list[dict[str, Any]]) -> None:
    if delete:
        matcher.delete_rows(table, rows, ts)
    else:
        matcher.upsert_rows(table, rows, ts)


def put_file_rows(feed: TableFeed) -> None:
    """Put every row of a run's table files into the feed's matcher now, in the order
    and with the ts a local run puts them (with no tuple to wait for, the feed's
    replay puts them all)."""
    feed.start()
    feed.finish()


def table_texts(matcher: Matcher) -> list[str]:
    """The ``CREATE TABLE`` texts of the matcher's tables, in declaration order."""
    if not matcher.tables:
        return []
    return list(matcher.snapshot(queries=False)["reference_tables"]["texts"])


__all__ = ["DEFAULT_MAX_TABLE_ROWS", "put_file_rows", "stage_tables", "table_texts"]
