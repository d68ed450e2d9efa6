"""The routes of ``mqo serve --http`` (Starlette): every answer, errors included, is
JSON but for ``/metrics`` (Prometheus text), the event stream and the page.

A request that changes state (POST, DELETE) needs ``Authorization: Bearer <token>``
when the service has a token (compared in constant time, :func:`hmac.compare_digest`).
Bodies are read up to ``max_body`` bytes (413 past it, before the rest is read); the
work goes to the engine thread through its bounded queue (:class:`runtime.http.service.Service`):
a full queue is 429 with ``Retry-After``, a stopped engine 503.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from predicates import MqoError, did_you_mean
from runtime.http import metrics
from runtime.http.bodies import BodyError, TableBodyError, TooManyRows, format_of, parse_table_json, read_body
from runtime.http.service import Busy, Service, Stopped, TooMany, UnknownTable

PAGE = Path(__file__).parent / "page"
PAGE_FILES = {"page.js": "text/javascript", "page.css": "text/css"}
CHANGES_STATE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Limits:
    max_body: int = 16 << 20  # bytes of one request body
    max_rows: int = 100_000  # rows of one post of tuples
    max_query_bytes: int = 1 << 20  # bytes of one post of query text
    max_queries: int = 10_000  # queries in one post
    max_sse: int = 32  # open event streams
    max_results: int = 10_000  # results of one GET /results


class Refused(Exception):
    """An answer other than 2xx, as JSON: ``{"error": message, ...extra}``."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.headers, self.extra = status, message, headers, extra


def _error(status: int, message: str, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status, headers=headers)


def build_app(service: Service, limits: Limits, token: str | None = None) -> Starlette:
    state = {"sse": 0}
    streams = {name.lower(): name for name in service.matcher.catalog.names()}

    async def run(work: Callable[[], Any]) -> Any:
        try:
            future = service.submit(work)
        except Busy:
            raise Refused(429, "the ingest queue is full; retry later", {"Retry-After": "1"}) from None
        except Stopped as err:
            raise Refused(503, str(err), {"Retry-After": "5"}) from None
        try:
            return await asyncio.wrap_future(future)
        except Stopped as err:
            raise Refused(503, str(err), {"Retry-After": "5"}) from None

    async def body_of(request: Request, limit: int, what: str) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise Refused(413, f"{what} is {int(declared):,} bytes; the limit is {limit:,}", limit=limit)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise Refused(413, f"{what} is over the limit of {limit:,} bytes", limit=limit)
            chunks.append(chunk)
        return b"".join(chunks)

    def stream_name(name: str) -> str:
        found = streams.get(name.lower())
        if found is None:
            known = list(streams.values())
            raise Refused(
                404,
                f"unknown stream {name!r}{did_you_mean(name, known)}; the schema declares {', '.join(known)}",
                streams=known,
            )
        return found

    async def health(request: Request) -> Response:
        with service.lock:
            summary, queries, cursor = dict(service.summary), len(service.queries), service.next_cursor - 1
        status = "ok" if service.failed is None else "failed"
        body = {"status": status, "queries": queries, "watermark": summary.get("watermark"), "cursor": cursor}
        if service.failed is not None:
            body["error"] = service.failed
        return JSONResponse(body, status_code=200 if service.failed is None else 503)

    async def post_queries(request: Request) -> Response:
        body = await body_of(request, limits.max_query_bytes, "the query text")
        try:
            text = body.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise Refused(400, f"the query text is not UTF-8 ({err.reason} at byte {err.start})") from None
        try:
            ids = await run(lambda: service.register(text, limits.max_queries))
        except TooMany as err:
            raise Refused(413, f"{err.count:,} queries in one post; the limit is {limits.max_queries:,}") from None
        except MqoError as err:
            raise Refused(400, str(err), line=getattr(err, "line", None), column=getattr(err, "column", None)) from None
        return JSONResponse({"ids": ids}, status_code=201)

    async def get_queries(request: Request) -> Response:
        return JSONResponse({"queries": service.query_list()})

    async def delete_query(request: Request) -> Response:
        query_id = request.path_params["query_id"]
        if not await run(lambda: service.unregister(query_id)):
            raise Refused(404, f"no query with id {query_id!r} is registered")
        return Response(status_code=204)

    async def post_stream(request: Request) -> Response:
        stream = stream_name(request.path_params["name"])
        try:
            fmt = format_of(request.headers.get("content-type"))
        except BodyError as err:
            raise Refused(415, str(err)) from None
        key = request.headers.get("idempotency-key")
        if key is not None and not 0 < len(key) <= 200:
            raise Refused(400, "an Idempotency-Key is 1 to 200 characters")
        body = await body_of(request, limits.max_body, "the body")
        schema = service.matcher.catalog.get(stream)
        try:
            posted = await run_in_threadpool(read_body, body, fmt, schema, limits.max_rows)
        except BodyError as err:
            raise Refused(400, str(err)) from None
        except TooManyRows as err:
            raise Refused(413, f"{err.rows:,} rows in one post; the limit is {limits.max_rows:,}") from None
        try:
            reply = await run(lambda: service.push(stream, posted, key))
        except MqoError as err:  # what the matcher refuses of the rows as a whole
            raise Refused(400, str(err)) from None
        return JSONResponse(reply)

    async def change_table(request: Request) -> Response:
        change = request.path_params["change"]
        if change not in ("upsert", "delete"):
            raise Refused(404, f"no table change {change!r}: POST /tables/upsert (rows) or /tables/delete (keys)")
        delete = change == "delete"
        body = await body_of(request, limits.max_body, "the body")
        try:
            data = parse_table_json(body)
            return JSONResponse(await run(lambda: service.change_table(delete, data)))
        except UnknownTable as err:
            raise Refused(404, str(err)) from None
        except TableBodyError as err:
            raise Refused(400, err.message, row=err.row, column=err.column) from None
        except MqoError as err:  # what the matcher refuses of the change as a whole (nothing applied)
            raise Refused(400, str(err)) from None

    async def get_tables(request: Request) -> Response:
        return JSONResponse({"tables": await run(service.table_list)})

    async def heartbeat(request: Request) -> Response:
        body = await body_of(request, 4096, "the heartbeat")
        try:
            data = json.loads(body)
        except ValueError:
            raise Refused(400, 'a heartbeat is JSON: {"stream": "B", "ts": 120} (no "stream": every stream)') from None
        if not isinstance(data, dict) or set(data) - {"stream", "ts"}:
            raise Refused(400, 'a heartbeat is {"stream": NAME, "ts": NUMBER}')
        ts = data.get("ts")
        if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
            raise Refused(400, f'"ts" must be a finite number, got {json.dumps(ts)}')
        stream = data.get("stream")
        name = None if stream is None else stream_name(str(stream))
        return JSONResponse(await run(lambda: service.heartbeat(name, float(ts))))

    def cursor_of(text: str | None, what: str) -> int:
        if text is None or text == "":
            return 0
        if not text.isdigit():
            raise Refused(400, f"{what} is a result cursor (a whole number >= 0), got {text!r}")
        return int(text)

    async def results(request: Request) -> Response:
        after = cursor_of(request.query_params.get("after"), "after")
        limit_text = request.query_params.get("limit", "1000")
        if not limit_text.isdigit() or not 0 < int(limit_text) <= limits.max_results:
            raise Refused(400, f"limit is a whole number from 1 to {limits.max_results:,}, got {limit_text!r}")
        found, cursor, missed = service.results_after(after, request.query_params.get("query"), int(limit_text))
        # the results' texts as the engine wrote them, put in the answer unchanged
        body = '{"results":[' + ",".join(line for _, line in found) + f'],"cursor":{cursor},"missed":{missed}}}'
        return Response(body, media_type="application/json")

    async def results_stream(request: Request) -> Response:
        after = cursor_of(
            request.headers.get("last-event-id") or request.query_params.get("after"), "Last-Event-ID or after"
        )
        query = request.query_params.get("query")
        if state["sse"] >= limits.max_sse:
            raise Refused(503, f"{limits.max_sse} result streams are open; the limit is reached", {"Retry-After": "5"})
        state["sse"] += 1

        async def events() -> AsyncIterator[str]:
            cursor, idle = after, 0
            try:
                yield "retry: 1000\n\n"
                while True:
                    found, cursor_now, missed = service.results_after(cursor, query, 1000)
                    if missed:
                        yield f"event: missed\ndata: {json.dumps({'missed': missed, 'after': cursor})}\n\n"
                    for c, line in found:
                        yield f"id: {c}\ndata: {line}\n\n"
                    cursor = cursor_now
                    if not found:
                        idle += 1
                        if idle % 150 == 0:
                            yield ": keep-alive\n\n"
                        await asyncio.sleep(0.1)
            finally:
                state["sse"] -= 1

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    async def explain(request: Request) -> Response:
        return JSONResponse(await run(service.explain))

    async def get_metrics(request: Request) -> Response:
        return Response(metrics.render(service, state["sse"]), media_type=metrics.CONTENT_TYPE)

    async def stats(request: Request) -> Response:
        with service.lock:
            history = list(service.history)
            recent = [json.loads(line) for _, _, line, _ in list(service.ring)[-20:]]
            summary = dict(service.summary)
            queries = len(service.queries)
        s = service.stats
        counters = {"tuples": s.tuples, "results": s.results, "aggregate_rows": s.aggregate_rows, "posts": s.posts}
        counters.update({"rejected": s.rejected, "dropped": s.dropped, "late": summary.get("late", 0)})
        return JSONResponse({"history": history, "recent": recent, "counters": counters, "queries": queries, **summary})

    async def page(request: Request) -> Response:
        return FileResponse(PAGE / "index.html", media_type="text/html")

    async def page_file(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in PAGE_FILES:
            raise Refused(404, f"no page file {name!r}")
        return FileResponse(PAGE / name, media_type=PAGE_FILES[name])

    routes = [
        Route("/", page),
        Route("/page/{name}", page_file),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Route("/health", health),
        Route("/queries", post_queries, methods=["POST"]),
        Route("/queries", get_queries, methods=["GET"]),
        Route("/queries/{query_id:path}", delete_query, methods=["DELETE"]),
        Route("/streams/{name}", post_stream, methods=["POST"]),
        Route("/heartbeat", heartbeat, methods=["POST"]),
        Route("/tables", get_tables, methods=["GET"]),
        Route("/tables/{change:str}", change_table, methods=["POST"]),
        Route("/results", results),
        Route("/results/stream", results_stream),
        Route("/explain", explain),
        Route("/metrics", get_metrics),
        Route("/stats", stats),
    ]

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Refused)
        return _error(exc.status, exc.message, exc.headers, **exc.extra)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return _error(exc.status_code, exc.detail, exc.headers)

    middleware = [Middleware(TokenGuard, token=token)] if token is not None else []
    return Starlette(
        routes=routes, middleware=middleware, exception_handlers={Refused: refused, HTTPException: http_error}
    )


class TokenGuard:
    """Requests that change state need the token (ASGI middleware); reads do not."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.expected = app, token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] in CHANGES_STATE:
            given = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, secret = given.partition(b" ")
            # compare_digest: the time taken does not tell how much of a guess was right
            if scheme.lower() != b"bearer" or not hmac.compare_digest(secret.strip(), self.expected):
                message = "this request changes state: send Authorization: Bearer <token>"
                await _error(401, message, {"WWW-Authenticate": "Bearer"})(scope, receive, send)
                return
        await self.app(scope, receive, send)
