"""The ``mqo`` command line.

Every expected failure (a malformed query, a bad input row, a missing file, an option
out of range) prints a message that says where it is and exits with status 2, without
a traceback. Status 1 is left for genuine crashes, which do print one. A run stopped by
SIGINT or SIGTERM says so and exits with 128 + the signal's number (130, 143).

Only the standard library is imported before :func:`main` starts: the matcher's
imports (numba, Arrow) take a moment, and a Ctrl-C during them must end in the same
one-line message as one at any other time, not in a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from itertools import permutations
from typing import TYPE_CHECKING, Any

from runtime.workload import EXTRAS, CliError, load_matcher, require, warn, warnings_as_messages, workload_warnings

_LARGE_QUERY_FILE = 1 << 20  # bytes: about 5,000 queries

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from runtime.io.table_rows import TableSpec

EXIT_USAGE = 2
ORDER_CHOICES = ("adaptive", *("".join(p) for p in permutations("AJW")))


def cmd_explain(args: argparse.Namespace) -> int:
    matcher = load_matcher(args.schema, args.queries)
    for message in workload_warnings(matcher, args.queries, None):
        warn("explain", message)
    print(matcher.explain())
    return 0


def cmd_match(args: argparse.Namespace) -> int:
    from runtime.io.inputs import InputSpec
    from runtime.io.named_paths import INPUT, OUTPUT_VIEW, TABLE
    from runtime.io.table_rows import TableSpec
    from runtime.io.writers import guess_format
    from runtime.local.match import run_match

    if not args.input:
        raise CliError("give at least one --input STREAM=FILE")
    # every NAME=FILE option is read before the queries load, and its name checked after
    inputs = [InputSpec(given.name, given.path) for given in INPUT.parse(args.input)]
    tables = [TableSpec(given.name, given.path) for given in TABLE.parse(args.table or [])]
    views = OUTPUT_VIEW.parse(args.output_view or [])
    fmt = guess_format(args.output, args.format)
    # For the local engine the queries are fixed for the run, so tuples no query can
    # use need not be stored.
    store = "all" if args.engine == "spark" else "candidates"
    # a large query file takes seconds to register and compile (a million queries, half a
    # minute): say so as it happens, where the progress bar would be shown
    announce = args.progress if args.progress is not None else not args.quiet and _large_on_a_terminal(args.queries)
    started = time.perf_counter()
    if announce:
        print(f"mqo match: registering the queries of {args.queries}...", file=sys.stderr, flush=True)
    matcher = load_matcher(
        args.schema,
        args.queries,
        allowed_lateness=args.allowed_lateness,
        order=args.order,
        store=store,
        time=args.time,
        emit=args.emit,
    )
    if announce:
        registered = time.perf_counter()
        count = len(matcher.query_ids)
        print(
            f"mqo match: {count:,} queries registered in {registered - started:.1f} s; compiling the plan...",
            file=sys.stderr,
            flush=True,
        )
        matcher.ensure_plan()  # compile here, to be timed
        print(f"mqo match: plan compiled in {time.perf_counter() - registered:.1f} s", file=sys.stderr, flush=True)
    inputs = [InputSpec(INPUT.declared(spec.stream, spec.path, matcher.catalog.names()), spec.path) for spec in inputs]
    output_views = {OUTPUT_VIEW.declared(view.name, view.path, matcher.views): view.path for view in views}
    table_feed = _table_feed(tables, matcher, args.engine)
    for message in workload_warnings(matcher, args.queries, [spec.stream for spec in inputs]):
        warn("match", message)
    if args.engine == "spark":
        require(["pyspark", "pandas"], "--engine spark")
        from runtime.spark.cli import run_spark_match

        summary = run_spark_match(args, inputs, fmt, matcher, output_views)
    else:
        summary = run_match(
            matcher,
            inputs,
            args.output,
            fmt,
            on_bad_row=args.on_bad_row,
            rejects_path=args.rejects,
            late_path=args.late,
            progress=args.progress,
            aggregates_path=args.aggregates,
            output_views=output_views,
            tables=table_feed,
        )
    if not args.quiet:
        for line in summary.lines():
            print(line, file=sys.stderr)
    stopped = summary.interruption()
    if stopped is not None:
        from runtime.stopping import exit_status

        print(f"mqo match: {stopped}", file=sys.stderr)
        return exit_status(summary.interrupted)  # type: ignore[arg-type]
    return 0


def _table_feed(specs: list[TableSpec], matcher: Any, engine: str) -> Any:
    """The rows of ``--table TABLE=FILE`` (read whole, checked), or None without tables."""
    from runtime.io.named_paths import TABLE
    from runtime.local.tables import TableFeed

    if not matcher.tables and not specs:
        return None
    if engine == "spark":  # (runtime.spark.cli reads the files for the matcher its match stage runs)
        for spec in specs:  # the names checked before anything runs, as the local engine does
            TABLE.declared(spec.table, spec.path, matcher.tables)
    feed = None if engine == "spark" else TableFeed(matcher, specs)  # (which refuses an undeclared table)
    given = {spec.table.lower() for spec in specs}
    for name in matcher.tables:
        if name.lower() not in given:
            warn("match", f"table {name} has no rows (give --table {name}=FILE): its queries find nothing")
    return feed


def _large_on_a_terminal(queries_path: str) -> bool:
    """Standard error is a terminal and the query file is large (a few thousand
    queries and up, whose registering a user would otherwise wait through unseen)."""
    try:
        return sys.stderr.isatty() and os.path.getsize(queries_path) >= _LARGE_QUERY_FILE
    except OSError:
        return False  # load_matcher says what is wrong with the file


def cmd_serve(args: argparse.Namespace) -> int:
    from runtime.workload import read_text

    if args.http is not None:
        from runtime.http.server import serve_http

        return serve_http(args, read_text(args.schema, "the schema"))
    missing = [option for option in ("queries", "output", "checkpoint") if getattr(args, option) is None]
    if missing:
        raise CliError(f"give --{', --'.join(missing)} (or --http HOST:PORT for the HTTP service)")
    if not args.input:
        raise CliError("give at least one --input STREAM=DIR")
    from runtime.io.named_paths import SERVE_INPUT
    from runtime.io.writers import input_holding
    from runtime.local.serve_files import checkpoint_lock

    inputs = {given.name: given.path for given in SERVE_INPUT.parse(args.input)}
    for option in ("--output", "--checkpoint"):
        folder = getattr(args, option[2:])
        inside = input_holding(folder, inputs.values())
        if inside is not None:
            stream = next(s for s, f in inputs.items() if f == inside)
            raise CliError(
                f"{option} {folder} is in the input directory of --input {stream}={inside}: the service would read"
                " what it writes there as data; give a directory outside the inputs"
            )
    schema = read_text(args.schema, "the schema")
    with checkpoint_lock(args.checkpoint):  # one service per checkpoint, on either engine
        if args.engine == "spark":
            return _serve_on_spark(args, schema, inputs)
        return _serve_locally(args, schema, inputs)


def _serve_locally(args: argparse.Namespace, schema: str, inputs: dict[str, str]) -> int:
    if args.max_window is not None:
        raise CliError("--max-window is for --engine spark (the local engine keeps what its queries need)")
    from runtime.io.named_paths import TABLE
    from runtime.io.table_rows import TableSpec
    from runtime.local.serve import LocalService

    service = LocalService(
        schema,
        inputs,
        args.queries,
        args.output,
        args.checkpoint,
        fmt=args.format,
        allowed_lateness=args.allowed_lateness,
        time=args.time,
        order=args.order,
        on_bad_row=args.on_bad_row,
        emit=args.emit,
        settle=args.poll,  # a file is taken once it has not changed for a poll interval
        tables=[TableSpec(given.name, given.path) for given in TABLE.parse(args.table or [])],
    )
    idle = service.idle_note()
    print(
        f"mqo serve: watching {args.queries} and {len(inputs)} input folder(s); results in {args.output}"
        + ("" if args.once else " (Ctrl-C stops)")
        + (f"; idle, not holding time back until they send tuples: {idle}" if idle else ""),
        file=sys.stderr,
    )
    reports = service.run(once=args.once, poll=args.poll)
    if reports and reports[-1].interrupted:
        print("mqo serve: stopped; the last step was not committed and runs again on restart", file=sys.stderr)
    elif not args.once:
        print(f"mqo serve: stopped after step {service.state.step}; a restart carries on from there", file=sys.stderr)
    return 0


def _serve_on_spark(args: argparse.Namespace, schema: str, inputs: dict[str, str]) -> int:
    if args.table:
        raise CliError("--engine spark does not run tables yet; use --engine local")
    if args.max_window is None:
        raise CliError(
            "--engine spark needs --max-window SECONDS: the largest MAXWINDOW a query may have (the stage "
            "cuts time and keeps window for it before it knows the queries)"
        )
    require(["pyspark", "pandas"], "--engine spark")
    from runtime.spark.cli import spark_session
    from runtime.spark.serve import SparkService

    spark, owned = spark_session(args.master)
    try:
        service = SparkService(
            spark,
            schema,
            inputs,
            args.queries,
            args.output,
            args.checkpoint,
            max_window=args.max_window,
            fmt=args.format,
            allowed_lateness=args.allowed_lateness,
            order=args.order,
            emit=args.emit,
        )
        print(
            f"mqo serve: Spark streaming over {args.queries} and {len(inputs)} input folder(s); results in "
            f"{args.output}" + ("" if args.once else " (Ctrl-C stops)"),
            file=sys.stderr,
        )
        batches = service.run(once=args.once, poll=args.poll)
        print(
            f"mqo serve: stopped after {batches} micro-batch(es) of the match and aggregate stages; a restart "
            "carries on from there",
            file=sys.stderr,
        )
    finally:
        if owned:
            spark.stop()
    return 0


def cmd_experiment(args: argparse.Namespace) -> int:
    try:
        return _run_experiment(args)
    except ModuleNotFoundError as err:
        if err.name is None or err.name.partition(".")[0] not in EXTRAS:
            raise
        require([err.name.partition(".")[0]], f"mqo experiment {args.name or '--list'}")
        raise


def _run_experiment(args: argparse.Namespace) -> int:
    experiments = installed_experiments()
    if args.list or args.name is None:
        for name, entry in experiments.items():
            print(f"{name:<14} {entry.load().DESCRIPTION}")
        return 0
    if args.name not in experiments:
        from predicates import did_you_mean

        raise CliError(
            f"unknown experiment {args.name!r}" + did_you_mean(args.name, list(experiments)) + "; see --list"
        )
    module = experiments[args.name].load()
    rest = list(args.rest)
    if args.out is not None:
        rest = ["--out", args.out, *rest]
    return int(module.main(rest) or 0)


def installed_experiments() -> dict[str, EntryPoint]:
    """The experiments by name. They sit above runtime, so runtime does not import
    them: the package declares each one as an ``mqo.experiments`` entry point."""
    import importlib.metadata  # (here: 40 ms of imports that only this command needs)

    found = importlib.metadata.entry_points(group="mqo.experiments")
    if not found:
        raise CliError("no experiments are installed (pip install the mqo package with its experiments)")
    return {entry.name: entry for entry in sorted(found, key=lambda e: e.name)}


def cmd_profile(args: argparse.Namespace) -> int:
    from runtime.local.profile import run_profile

    return run_profile(args)


def order_option(text: str) -> str:
    """``--order``: adaptive or one of the six static orders (any case, ``static:`` allowed)."""
    bare = text.strip()
    if bare.lower().startswith("static:"):
        bare = bare[len("static:") :]
    for choice in ORDER_CHOICES:
        if bare.lower() == choice.lower():
            return choice
    raise argparse.ArgumentTypeError(f"{text!r} is not an order; use {', '.join(ORDER_CHOICES)}")


def lateness_option(text: str) -> float:
    """``--allowed-lateness``: a finite number of seconds >= 0, or a duration with a
    unit as the query language writes it (``500 ms``, ``2 min``)."""
    try:
        value = float(text)
    except ValueError:
        from predicates import MqoError, parse_duration

        try:
            value = float(parse_duration(text))
        except MqoError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a duration; give seconds (such as 5 or 0.5) or a number with a unit (500 ms, 2 min)"
            ) from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds >= 0")
    return value


MIN_POLL = 0.1  # seconds: looking more often only keeps a core busy


def poll_option(text: str) -> float:
    """``--poll``: seconds between looks at the directories, finite and at least ``MIN_POLL``."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < MIN_POLL:
        raise argparse.ArgumentTypeError(f"{text!r} is not a poll interval; give seconds >= {MIN_POLL} (such as 1)")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mqo",
        description="Shared matching of many continuous queries over data streams.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    workload = argparse.ArgumentParser(add_help=False)
    workload.add_argument("--schema", required=True, metavar="FILE", help="DDL file declaring the streams")
    workload.add_argument("--queries", required=True, metavar="FILE", help="query file")

    explain = sub.add_parser(
        "explain",
        parents=[workload],
        help="show the predicate lists, what each query uses, and the sharing ratio",
        description="Show the predicate lists of each type in covering order, which queries use each "
        "predicate, each query's bit positions and the sharing ratio.",
    )
    explain.set_defaults(func=cmd_explain)

    match = sub.add_parser(
        "match",
        parents=[workload],
        help="match stream files against the queries and write the results",
        description="Read stream files (CSV with a header, or Parquet), merge them in arrival order, "
        "match every tuple against every query and write one record per result.",
    )
    match.add_argument(
        "--input", action="append", metavar="STREAM=FILE", help="a stream's input file (repeat for each input)"
    )
    match.add_argument("--output", default="-", metavar="FILE", help="where to write results (default: stdout)")
    match.add_argument("--format", choices=["jsonl", "csv", "parquet"], help="output format (default: by extension)")
    match.add_argument("--engine", choices=["local", "spark"], default="local", help="where to run (default: local)")
    match.add_argument("--master", default="local[*]", help="Spark master URL with --engine spark")
    match.add_argument(
        "--order",
        type=order_option,
        default="adaptive",
        metavar="ORDER",
        help="predicate type order: adaptive (default) or a static AJW, AWJ, JAW, JWA, WAJ, WJA",
    )
    match.add_argument(
        "--allowed-lateness",
        type=lateness_option,
        default=0.0,
        metavar="SECONDS",
        help="how late a tuple may be: seconds, or a duration such as '500 ms' (default 0)",
    )
    match.add_argument(
        "--time",
        choices=["per-stream", "global"],
        default="per-stream",
        help="event time: a watermark per stream, the matcher's the slowest (default), or one global clock",
    )
    match.add_argument(
        "--emit",
        choices=["arrival", "ordered"],
        default="arrival",
        help="results as soon as found (default), or in ts order once the watermark has passed them",
    )
    match.add_argument(
        "--on-bad-row",
        choices=["error", "skip"],
        default="error",
        help="stop at the first bad input row (default), or write bad rows to the reject file and go on",
    )
    match.add_argument(
        "--table",
        action="append",
        metavar="TABLE=FILE",
        help="rows of a table (CREATE TABLE in the queries): CSV, optional ts and op (upsert/delete) columns",
    )
    match.add_argument("--rejects", metavar="FILE", help="reject file (default: OUTPUT.rejects.jsonl)")
    match.add_argument("--late", metavar="FILE", help="late-tuple file (default: OUTPUT.late.jsonl)")
    match.add_argument(
        "--aggregates",
        metavar="FILE",
        help="aggregate rows with --format csv or parquet (default: OUTPUT.aggregates.csv/.parquet; "
        "JSON lines hold them in the output)",
    )
    match.add_argument(
        "--output-view",
        action="append",
        metavar="VIEW=FILE",
        help="write a view's rows to FILE for inspection (JSON lines: view, ts, id, values; repeat for each view)",
    )
    match.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help="progress bar")
    match.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
    match.set_defaults(func=cmd_match)

    serve = sub.add_parser(
        "serve",
        help="a long-running matcher over directories: query files and data files come and go",
        description="Watch a directory of query files (new files register, deleted or UNREGISTER files remove) "
        "and a directory per stream of data files (CSV or Parquet, each read once); write each step's results "
        "to the output directory and keep a checkpoint, so a restart carries on exactly once.",
    )
    serve.add_argument("--schema", required=True, metavar="FILE", help="DDL file declaring the streams")
    serve.add_argument("--queries", metavar="DIR", help="directory of .mqo query files")
    serve.add_argument(
        "--input", action="append", metavar="STREAM=DIR", help="a stream's directory of data files (repeat)"
    )
    serve.add_argument("--output", metavar="DIR", help="directory for results and reports")
    serve.add_argument("--checkpoint", metavar="DIR", help="directory for the checkpoint")
    serve.add_argument("--engine", choices=["local", "spark"], default="local", help="where to run (default: local)")
    serve.add_argument("--once", action="store_true", help="process what is there, then stop")
    serve.add_argument(
        "--max-window",
        type=lateness_option,
        default=None,
        metavar="SECONDS",
        help="with --engine spark: the largest MAXWINDOW a query may have",
    )
    serve.add_argument("--master", default="local[*]", help="Spark master URL with --engine spark")
    serve.add_argument(
        "--poll",
        type=poll_option,
        default=1.0,
        metavar="SECONDS",
        help="how often to look (default 1, at least 0.1); a file is taken once unchanged for this long",
    )
    serve.add_argument("--format", choices=["jsonl", "csv", "parquet"], default="jsonl", help="result file format")
    serve.add_argument("--order", type=order_option, default="adaptive", metavar="ORDER", help="as for match")
    serve.add_argument("--allowed-lateness", type=lateness_option, default=0.0, metavar="SECONDS")
    serve.add_argument("--time", choices=["per-stream", "global"], default="per-stream", help="event time rule")
    serve.add_argument("--emit", choices=["arrival", "ordered"], default="arrival", help="as for match")
    serve.add_argument(
        "--on-bad-row",
        choices=["error", "skip"],
        default="skip",
        help="write bad rows and unreadable files to the output's reports and go on (default), or stop",
    )
    serve.add_argument(
        "--table",
        action="append",
        metavar="TABLE=FILE",
        help="rows of a table (CREATE TABLE in a query file), as for match; rows added to FILE are read as it grows",
    )
    from runtime.http.server import add_options  # standard library only, as this module

    add_options(serve)
    serve.set_defaults(func=cmd_serve)

    experiment = sub.add_parser(
        "experiment",
        help="run an experiment or benchmark (see --list)",
        description="Run a seeded experiment; it writes CSV, plots and a markdown summary into an output folder.",
    )
    experiment.add_argument("name", nargs="?", help="experiment name")
    experiment.add_argument("--list", action="store_true", help="describe every experiment")
    experiment.add_argument("--out", metavar="DIR", help="output folder")
    experiment.add_argument("rest", nargs=argparse.REMAINDER, help="options of the experiment (see its --help)")
    experiment.set_defaults(func=cmd_experiment)

    profile = sub.add_parser(
        "profile",
        parents=[workload],
        help="measure each predicate's and list's selectivity on sample data",
        description="Run the queries over sample input and report each predicate's and each list's observed "
        "selectivity, the sharing ratio and the best static order, with a plot.",
    )
    profile.add_argument("--input", action="append", required=True, metavar="STREAM=FILE", help="sample input")
    profile.add_argument("--out", metavar="DIR", help="folder for the CSV and plot (default: profile-<time>)")
    profile.add_argument("--allowed-lateness", type=lateness_option, default=0.0, metavar="SECONDS")
    profile.add_argument("--time", choices=["per-stream", "global"], default="per-stream", help="event time rule")
    profile.set_defaults(func=cmd_profile)
    return parser


def _import_libraries() -> None:
    """What every command needs: the matcher (numba, numpy) and the runtime's readers
    and writers (Arrow)."""
    import mqo  # noqa: F401
    import runtime.local.match  # noqa: F401


def main(argv: Sequence[str] | None = None) -> int:
    status = _main(argv)
    if argv is None:
        # Run as the program (the ``mqo`` script, ``python -m runtime.cli``): the process
        # ends next. Frozen, the heap is left out of the garbage collection the
        # interpreter runs at exit, which otherwise takes about 0.2 s after a run of
        # 10,000 queries (experiments.bench_sql); the memory goes back to the system
        # all the same, and every output is closed by now.
        gc.freeze()
    return status


def _main(argv: Sequence[str] | None) -> int:
    from runtime.stopping import Terminated, deferred_stop, exit_status, raise_on_sigterm

    raise_on_sigterm()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        func: Callable[[argparse.Namespace], int] = args.func
        # A signal in the middle of an extension module's import can surface as some
        # other error (Python wraps it, numba's classes half made) or leave the
        # interpreter to end itself; so the imports finish first, then the signal counts.
        with deferred_stop() as stop:
            _import_libraries()
        if stop.signum is not None:
            print(f"mqo: interrupted ({signal.Signals(stop.signum).name}) while starting", file=sys.stderr)
            return exit_status(stop.signum)
        from predicates import MqoError

        try:
            with warnings_as_messages(args.command):
                return func(args)
        except CliError as err:
            print(f"mqo {args.command}: error: {err}", file=sys.stderr)
            return EXIT_USAGE
        except MqoError as err:
            print(str(err), file=sys.stderr)
            if isinstance(err.__context__, BrokenPipeError):
                _quiet_stdout()
            return EXIT_USAGE
    except KeyboardInterrupt as err:
        signum = signal.SIGTERM if isinstance(err, Terminated) else signal.SIGINT
        print(f"mqo: interrupted ({signum.name})", file=sys.stderr)
        return exit_status(signum)


def _quiet_stdout() -> None:
    """Standard output was closed by its reader (``mqo match | head``): point it at
    /dev/null so that Python's last flush at exit does not complain again."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    raise SystemExit(main())
