"""``mqo serve --engine spark``: the directory contract of :mod:`runtime.local.serve` on
Structured Streaming.

* ``--input S=DIR``: a file source per stream (CSV with a header, or Parquet when the
  directory holds ``.parquet`` files when the service starts). Files need ``ts`` and
  ``id`` columns (a distributed stream has no arrival order to number tuples by) and
  ``ts >= 0``. Names starting with ``.`` or ``_`` are ignored, as by the local engine.
* ``--queries DIR``: a text source over the ``*.mqo`` files, each file one command (see
  :mod:`runtime.spark.control`): a file of ``UNREGISTER id;`` lines unregisters those
  ids, any other file registers its queries. A file takes effect at the micro-batch
  that finds it, files of one micro-batch in the order of their modification time.
  Spark's file source sees each file name once, so, unlike the local engine, a changed
  or deleted file changes nothing: remove queries with an ``UNREGISTER`` file.
* ``--output DIR``: Spark's file sink (``part-*`` files, JSON lines or Parquet, and its
  ``_spark_metadata`` log); the rows of :func:`runtime.spark.control.control_schema`:
  results, late tuples (``query`` NULL) and refused commands (``error`` set).
* Windowed aggregate queries run too, in a second streaming query over the same
  directories (:mod:`runtime.spark.aggregate_control`: one state group per stream):
  their rows go to ``DIR/aggregates`` (a file sink of its own, since its columns
  differ: :func:`runtime.spark.aggregate_control.aggregate_control_schema`), written
  once the watermark passes a window's end, with the late tuples of the streams they
  read (``query`` NULL) and the commands only that stage can refuse (a landmark window
  after the first tuple, a stream without ``--input``). A file holds queries of one
  kind; an id is taken once across both kinds. Both stages read every query file;
  each takes its kind and the match stage reports what is neither (a file that does
  not compile or mixes both kinds, an ``UNREGISTER`` of an unknown id).
* ``--checkpoint DIR``: Spark's checkpoints (the aggregate stage's in
  ``DIR/aggregates``); a restart carries on exactly once, the active queries included.
  As for the local engine, the CLI holds ``DIR/serve.lock`` for one service at a time
  (:func:`runtime.local.serve_files.checkpoint_lock`), and refuses an ``--output`` or
  ``--checkpoint`` in an input directory. (Files written in place and idle streams are
  Spark's file source's and watermark's business here; see :mod:`runtime.local.serve`.)

A malformed data row stops the service with Spark's error naming the file (the CSV
source runs in FAILFAST mode) rather than being read as NULLs; the local engine's
``--on-bad-row skip`` has no Spark counterpart here.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from mqo import Catalog
from runtime.local.serve import UNREGISTER_STATEMENT
from runtime.spark.common import SQL_TYPES
from runtime.workload import CliError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

_SINK_FORMATS = {"jsonl": "json", "parquet": "parquet"}
# a file of nothing but UNREGISTER statements (comments aside) unregisters; others register
_UNREGISTER = "(?i)" + UNREGISTER_STATEMENT


class SparkService:
    """One streaming query: the stage over the input directories, its commands from
    the query directory, results to a file sink."""

    def __init__(
        self,
        spark: SparkSession,
        schema: str,
        inputs: Mapping[str, str],
        queries: str,
        output: str,
        checkpoint: str,
        *,
        max_window: float,
        fmt: str = "jsonl",
        allowed_lateness: float = 0.0,
        order: str | None = None,
        emit: str = "arrival",
    ) -> None:
        if fmt not in _SINK_FORMATS:
            raise CliError(f"--engine spark writes jsonl or parquet (values are a map column), not {fmt}")
        catalog = Catalog.from_ddl(schema)
        for stream in inputs:
            if catalog.get(stream) is None:
                raise CliError(f"--input {stream}: no such stream in the schema")
        for folder in (queries, *inputs.values()):
            Path(folder).mkdir(parents=True, exist_ok=True)
        self.spark = spark
        self.schema = schema
        self.catalog = catalog
        self.inputs = dict(inputs)
        self.queries = queries
        self.output = output
        self.checkpoint = checkpoint
        self.max_window = max_window
        self.fmt = fmt
        self.allowed_lateness = allowed_lateness
        self.order = order
        self.emit = emit

    def stream_frame(self, stream: str, folder: str) -> DataFrame:
        schema = self.catalog.get(stream)
        assert schema is not None
        columns = ", ".join(f"`{c.name}` {SQL_TYPES[c.ctype]}" for c in schema.columns)
        ddl = f"ts double, id bigint, {columns}" if columns else "ts double, id bigint"
        reader = self.spark.readStream.schema(ddl)
        if any(p.suffix == ".parquet" for p in Path(folder).iterdir()):
            return reader.parquet(folder)
        return reader.option("header", True).option("mode", "FAILFAST").csv(folder)

    def commands(self) -> DataFrame:
        """The query directory as commands: one per ``.mqo`` file, or one unregister
        per id of a file of ``UNREGISTER`` statements."""
        files = (
            self.spark.readStream.format("text")
            .option("wholetext", True)
            .option("pathGlobFilter", "*.mqo")
            .load(self.queries)
            .selectExpr("value", "CAST(unix_micros(_metadata.file_modification_time) AS DOUBLE) / 1e6 AS ts")
        )
        # what is left without comments, UNREGISTER statements and white space
        unregister = _sql(_UNREGISTER)
        bare = f"regexp_replace(regexp_replace(value, '--[^\\n]*', ''), '{unregister}', '')"
        rest = f"regexp_replace({bare}, '\\\\s+', '')"
        return files.selectExpr(
            "ts",
            f"CASE WHEN {rest} = '' THEN 'unregister' ELSE 'register' END AS command",
            f"CASE WHEN {rest} = '' THEN regexp_extract_all(value, '{unregister}', 1) ELSE array(value) END AS texts",
        ).selectExpr("ts", "command", "explode(texts) AS query")

    def start(self, *, once: bool = False, poll: float = 1.0) -> dict[str, StreamingQuery]:
        """Start both stages: ``matches`` and ``aggregates``, by name."""
        from runtime.spark.aggregate_streaming import aggregate_stream
        from runtime.spark.streaming import match_stream

        results = match_stream(
            self.streams(),
            "",
            schema=self.schema,
            allowed_lateness=self.allowed_lateness,
            order=self.order,
            emit=self.emit,
            control=self.commands(),
            max_window=self.max_window,
            shared_control=True,
        )
        aggregates = aggregate_stream(
            self.streams(),
            "",
            schema=self.schema,
            allowed_lateness=self.allowed_lateness,
            control=self.commands(),
            shared_control=True,
            max_window=self.max_window,
        )
        started = {}
        for name, rows, path, checkpoint in (
            ("matches", results, self.output, self.checkpoint),
            (
                "aggregates",
                aggregates,
                str(Path(self.output) / "aggregates"),
                str(Path(self.checkpoint) / "aggregates"),
            ),
        ):
            writer = (
                rows.writeStream.format(_SINK_FORMATS[self.fmt])
                .queryName(f"mqo-serve-{name}-{id(self)}")
                .option("path", path)
                .option("checkpointLocation", checkpoint)
                .outputMode("append")
            )
            writer = writer.trigger(availableNow=True) if once else writer.trigger(processingTime=f"{poll} seconds")
            try:
                started[name] = writer.start()
            except Exception:
                for query in started.values():  # not one stage running without the other
                    query.stop()
                raise
        return started

    def streams(self) -> dict[str, DataFrame]:
        return {stream: self.stream_frame(stream, folder) for stream, folder in self.inputs.items()}

    def run(self, *, once: bool = False, poll: float = 1.0) -> int:
        """Run until done (``once``), Ctrl-C or a stage's failure (which stops the
        other); the number of micro-batches run by both stages."""
        queries = self.start(once=once, poll=poll)
        try:
            while any(q.isActive for q in queries.values()):
                for query in queries.values():
                    if query.isActive:
                        query.awaitTermination(timeout=0.5)
                if any(not q.isActive and q.exception() is not None for q in queries.values()):
                    break
        except KeyboardInterrupt:
            print("mqo serve: stopping the streaming queries", file=sys.stderr)
        finally:
            for query in queries.values():
                if query.isActive:
                    query.stop()
        for name, query in queries.items():
            error = query.exception()
            if error is not None:
                raise CliError(f"the streaming query of the {name} failed: {error}")
        return sum(len(q.recentProgress) for q in queries.values())


def _sql(pattern: str) -> str:
    """A regular expression as the body of a Spark SQL string literal."""
    return pattern.replace("\\", "\\\\").replace("'", "\\'")
