"""``mqo serve --http HOST:PORT``: the options, the checks before anything starts,
and the server (uvicorn) around the app (:mod:`runtime.http.app`).

Only the standard library is imported at module level: the CLI builds its parser
(:func:`add_options`) before any command runs.

The service binds 127.0.0.1 unless told otherwise; any other address needs
``--token-file`` (a file holding the token), so that nobody on the network can change
its queries or post tuples. With ``--checkpoint DIR`` it holds the directory's lock
(:func:`runtime.local.serve_files.checkpoint_lock`, as the directory service does) and
keeps its log and snapshots there (:mod:`runtime.http.journal`). HTTP runs on its own:
``--input``, ``--queries``, ``--output`` and ``--table`` (the directory service) are
refused with it (a table's rows come by ``POST /tables/upsert`` and ``/tables/delete``).
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from pathlib import Path

from runtime.workload import CliError

DEFAULT_HOST = "127.0.0.1"


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds > 0")
    return value


def add_options(serve: argparse.ArgumentParser) -> None:
    """The HTTP service's options on ``mqo serve``'s parser."""
    group = serve.add_argument_group("HTTP service (mqo serve --http HOST:PORT)")
    group.add_argument("--http", metavar="HOST:PORT", help="serve an HTTP API instead of directories (127.0.0.1:8080)")
    group.add_argument(
        "--token-file", metavar="FILE", help="a file holding the Bearer token for requests that change state"
    )
    group.add_argument("--queue", type=_positive, default=64, metavar="N", help="ingest queue length (default 64)")
    group.add_argument("--max-body", type=_positive, default=16 << 20, metavar="BYTES", help="largest body (16 MiB)")
    group.add_argument("--max-rows", type=_positive, default=100_000, metavar="N", help="rows per post (100,000)")
    group.add_argument("--max-queries", type=_positive, default=10_000, metavar="N", help="queries per post (10,000)")
    group.add_argument("--max-sse", type=_positive, default=32, metavar="N", help="open result streams (32)")
    group.add_argument(
        "--keep-results", type=_positive, default=100_000, metavar="N", help="results held for readers (100,000)"
    )
    group.add_argument(
        "--keep-seconds", type=_seconds, default=3600.0, metavar="SECONDS", help="how long results are held (3600)"
    )
    group.add_argument(
        "--snapshot-every", type=_positive, default=1000, metavar="N", help="operations between snapshots (1000)"
    )


def parse_bind(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = DEFAULT_HOST, text
    host = host.strip("[]") or DEFAULT_HOST
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise CliError(f"--http takes HOST:PORT (for example 127.0.0.1:8080), got {text!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        token = Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError) as err:
        raise CliError(f"--token-file {path}: cannot read it ({getattr(err, 'strerror', None) or err})") from None
    if len(token) < 16:
        raise CliError(f"--token-file {path}: the token is {len(token)} characters; give at least 16")
    return token


def _require_extra() -> None:
    """Stop with the install line when the [http] extra is missing (the core install has no web server)."""
    import importlib.util

    missing = [name for name in ("starlette", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        raise CliError(
            f"--http needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not installed: "
            "pip install 'mqo[http]' (or, in a clone, pip install -e '.[http]')"
        )


def serve_http(args: argparse.Namespace, schema_text: str) -> int:
    _require_extra()
    for option, value in (("--input", args.input), ("--queries", args.queries), ("--output", args.output)):
        if value:
            raise CliError(
                f"--http runs on its own: {option} is for the directory service (register queries with POST "
                "/queries and post tuples to /streams/NAME, or run a second mqo serve for the directories)"
            )
    if getattr(args, "table", None):
        raise CliError(
            "--table is for the directory service: with --http, declare the table with POST /queries (CREATE TABLE)"
            ' and put its rows with POST /tables/upsert ({"table": NAME, "rows": [...], "ts": NUMBER or null})'
        )
    if args.engine != "local":
        raise CliError("--http runs the local engine (--engine spark serves directories only)")
    if args.once:
        raise CliError("--once is for the directory service; --http runs until stopped")
    host, port = parse_bind(args.http)
    token = read_token(args.token_file)
    if not is_loopback(host) and token is None:
        raise CliError(
            f"--http {host}:{port} is reachable from other machines: give --token-file FILE (a token of 16+ "
            "characters; requests that change state must send Authorization: Bearer <token>), or bind 127.0.0.1"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        # listening from here on: a client that connects once the start line is printed
        # waits in the backlog until uvicorn accepts, instead of being refused
        sock.listen(2048)
    except OSError as err:
        sock.close()
        raise CliError(f"--http {host}:{port}: cannot listen there ({err.strerror or err})") from None
    if args.checkpoint is None:
        return _run(args, schema_text, sock, token)
    from runtime.local.serve_files import checkpoint_lock

    with checkpoint_lock(args.checkpoint):
        return _run(args, schema_text, sock, token)


def _run(args: argparse.Namespace, schema_text: str, sock: socket.socket, token: str | None) -> int:
    import uvicorn

    from runtime.http.app import Limits, build_app
    from runtime.http.service import Service

    service = Service(
        schema_text,
        checkpoint=args.checkpoint,
        queue_size=args.queue,
        keep=args.keep_results,
        max_age=args.keep_seconds,
        snapshot_every=args.snapshot_every,
        allowed_lateness=args.allowed_lateness,
        order=args.order,
        time=args.time,
        emit=args.emit,
    )
    limits = Limits(max_body=args.max_body, max_rows=args.max_rows, max_queries=args.max_queries, max_sse=args.max_sse)
    app = build_app(service, limits, token)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(
        f"mqo serve: HTTP on http://{shown}:{port}/ ({len(service.queries)} queries, result cursor "
        f"{service.next_cursor - 1}"
        + (f", checkpoint {args.checkpoint}" if args.checkpoint else ", no --checkpoint: nothing survives a restart")
        + "; Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=2, lifespan="off")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass  # uvicorn stops on SIGINT/SIGTERM, then raises the signal again: a clean stop, as mqo serve's
    finally:
        service.close()
    print(f"mqo serve: stopped at result cursor {service.next_cursor - 1}", file=sys.stderr)
    return 0
