"""The engine behind ``mqo serve --http``: one :class:`mqo.Matcher`, driven by one
thread (the matcher is not thread safe), fed through a bounded queue.

Requests hand their work to the engine thread as jobs (:meth:`Service.submit`); when
the queue is full a job is refused at once (:class:`Busy`: the app answers 429 with
``Retry-After``), so memory never grows with the load. Results go into a ring that
numbers them with cursors 1, 2, 3, ...: readers (``GET /results``, the event stream)
take them from there under a lock, never touching the matcher. The ring keeps at most
``keep`` results and none older than ``max_age`` seconds; what it drops is counted.

A result's text is what ``mqo match`` writes for it: the JSON lines writer itself
(:class:`runtime.io.writers.JsonLinesInMemory`) writes matches, results released by a
heartbeat (``--emit ordered``) and aggregate rows in file order
(:func:`runtime.io.aggregate_writers.in_file_order`) through the one result encoder.

Table changes (:meth:`Service.change_table`) are operations like the others: checked
whole on the engine thread, applied all or none, logged; a tuple posted after one reads
the table as of its own ts. The match results that aggregate views' rows find when
windows are emitted are taken with the aggregate rows (:meth:`mqo.Matcher.take_results`).

With a checkpoint (:mod:`runtime.http.journal`) every accepted operation is logged and
synced before it is answered, and a snapshot is written every ``snapshot_every``
operations and at a clean stop; a restart replays the log after the snapshot.
"""

from __future__ import annotations

import hashlib
import json
import queue
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from mqo import MatchBatch, Matcher
from predicates import StreamSchema, did_you_mean
from runtime.http.bodies import Posted, TableChangeBody, table_change
from runtime.http.journal import Journal, JournalError
from runtime.http.plan_view import RecentTuples, explain_data
from runtime.io.aggregate_writers import in_file_order
from runtime.io.writers import JsonLinesInMemory

SNAPSHOT_FORMAT = 1
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
HISTORY = 600  # one sample a second: ten minutes for the page's plots
MAX_KEYS = 100_000  # idempotency keys remembered (oldest forgotten first)
# the counters a snapshot carries (a restart goes on counting from them)
PERSISTED_COUNTS = ("tuples", "results", "aggregate_rows", "rejected", "posts", "duplicates", "dropped")


class Busy(Exception):
    """The ingest queue is full: try again later."""


class Stopped(Exception):
    """The engine stopped (a log or snapshot could not be written): restart the service."""


@dataclass
class Stats:
    """What the service counts (``GET /metrics``, the page)."""

    tuples: int = 0
    results: int = 0
    aggregate_rows: int = 0
    rejected: int = 0
    posts: int = 0
    duplicates: int = 0  # posts answered from an Idempotency-Key
    dropped: int = 0  # results dropped from the ring (size or age)
    busy: int = 0  # jobs refused: queue full
    latency_counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    latency_sum: float = 0.0


class Service:
    def __init__(
        self,
        schema_text: str,
        *,
        checkpoint: str | None = None,
        queue_size: int = 64,
        keep: int = 100_000,
        max_age: float = 3600.0,
        snapshot_every: int = 1000,
        **settings: Any,
    ) -> None:
        """``settings``: the matcher's (allowed_lateness, order, time, emit)."""
        self.schema_digest = hashlib.sha256(schema_text.encode()).hexdigest()
        self.keep, self.max_age, self.snapshot_every = keep, max_age, snapshot_every
        self.stats = Stats()
        self.lock = threading.Lock()  # the ring, the query list and the summaries below
        self.ring: deque[tuple[int, str, str, float]] = deque()  # (cursor, query, JSON text, wall time)
        self.next_cursor = 1
        self.queries: dict[str, tuple[str, str]] = {}  # id -> (kind, text), in registration order
        self.keys: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.history: deque[dict[str, Any]] = deque(maxlen=HISTORY)
        self.summary: dict[str, Any] = {}
        self.recent = RecentTuples()
        self._lines = JsonLinesInMemory()  # the results' text, as mqo match writes it
        self.selectivity: dict[tuple[str, str], float | None] = {}
        self.seq = 0  # operations applied
        self.failed: str | None = None
        self._late: list[Any] = []
        self._window: list[float] = []  # this second's push latencies
        self._jobs: queue.Queue[tuple[Callable[[], Any], Future[Any]] | None] = queue.Queue(queue_size)
        self.journal = Journal(checkpoint) if checkpoint is not None else None
        snapshot, records = self.journal.load() if self.journal is not None else (None, [])
        if snapshot is not None:
            self._restore(snapshot, schema_text)
        else:
            # no idle timeout in processing time: replaying the log must decide as the first run did
            self.matcher = Matcher(schema_text, idle_timeout=None, **settings)
            for name in self.matcher.catalog.names():
                # a stream that has sent nothing does not hold time back (as in mqo serve)
                self.matcher.set_idle(name)
        self.matcher.late_sink = self._late.append
        for record in records:
            self._apply(record)
        self._sample(time.monotonic())
        self._thread = threading.Thread(target=self._run, name="mqo-engine", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ the engine thread

    def submit(self, work: Callable[[], Any]) -> Future[Any]:
        """Run ``work`` on the engine thread; its result or error comes in the future.
        Busy when the queue is full, Stopped when the engine has stopped."""
        if self.failed is not None:
            raise Stopped(self.failed)
        done: Future[Any] = Future()
        try:
            self._jobs.put_nowait((work, done))
        except queue.Full:
            self.stats.busy += 1
            raise Busy from None
        return done

    @property
    def queued(self) -> int:
        return self._jobs.qsize()

    def _run(self) -> None:
        last = time.monotonic()
        while True:
            try:
                job = self._jobs.get(timeout=0.25)
            except queue.Empty:
                job = ()  # type: ignore[assignment]
            if job is None:
                return
            if job:
                work, done = job
                if done.set_running_or_notify_cancel():
                    try:
                        done.set_result(work())
                    except BaseException as err:
                        done.set_exception(err)
            now = time.monotonic()
            if now - last >= 1.0:
                last = now
                self._sample(now)

    def close(self) -> None:
        """Stop the engine thread after the queued jobs; a last snapshot with a checkpoint."""
        self._jobs.put(None)
        self._thread.join()
        if self.journal is not None:
            if self.failed is None and self.journal.records_since_snapshot:
                self.journal.write_snapshot(self._snapshot_data())
            self.journal.close()

    # ------------------------------------------------------------ operations (engine thread)

    def register(self, text: str, max_count: int) -> list[str]:
        """Register the queries of ``text``, all or nothing (MqoError with the position);
        ValueError('count') when there are more than ``max_count`` of them."""
        ids = self.matcher.register_queries(text, source_name="<post>")
        if len(ids) > max_count:
            for q in ids:
                self.matcher.unregister_query(q)
            raise TooMany(len(ids))
        self._commit({"op": "register", "text": text})
        self._list_queries(ids)
        self._settle()
        return ids

    def unregister(self, query_id: str) -> bool:
        if query_id not in self.queries:
            return False
        self.matcher.unregister_query(query_id)
        self._commit({"op": "unregister", "id": query_id})
        with self.lock:
            del self.queries[query_id]
        self._settle()
        return True

    def push(self, stream: str, posted: Posted, key: str | None) -> dict[str, Any]:
        """Match a post's good rows; the answer (``accepted``, ``late``, ``rejected``,
        ``results``). A key seen before gets the first answer again, nothing matched."""
        if key is not None and key in self.keys:
            self.stats.duplicates += 1
            return {**self.keys[key], "duplicate": True}
        started = time.perf_counter()
        late_before = len(self._late)
        rows = len(posted.batch["ts"])
        lines = self._match(stream, posted.batch) if rows else []
        reply = {
            "accepted": rows - (len(self._late) - late_before),
            "late": len(self._late) - late_before,
            "rejected": [r.as_dict() for r in posted.rejected],
            "results": len(lines),
        }
        self._commit({"op": "push", "stream": stream, "batch": posted.batch, "key": key, "reply": reply})
        self.stats.rejected += len(posted.rejected)
        self.stats.posts += 1
        self._observe(time.perf_counter() - started)
        self._publish(lines)
        self._remember(key, reply)
        self._settle()
        return reply

    def heartbeat(self, stream: str | None, ts: float) -> dict[str, Any]:
        released = self.matcher.heartbeat(ts) if stream is None else self.matcher.heartbeat(stream, ts)
        self._lines.write(released)
        lines = self._lines.take() + self._aggregate_lines()
        self._commit({"op": "heartbeat", "stream": stream, "ts": ts})
        self._publish(lines)
        self._settle()
        return {"results": len(lines), "watermark": _number(self.matcher.watermark)}

    def change_table(self, delete: bool, data: Any) -> dict[str, Any]:
        """Upsert rows into a table, or delete keys, each a version from the change's
        ts on (:mod:`mqo.tables`): checked whole first (:func:`runtime.http.bodies.table_change`,
        a TableBodyError naming the row and column), then applied all or nothing."""
        change = table_change(data, delete, self._table_schema)
        self._change_table(change)
        self._commit({"op": "table", "table": change.table, "delete": delete, "items": change.items, "ts": change.ts})
        self._settle()
        return {"table": change.table, "deleted" if delete else "upserted": len(change.items), "ts": change.ts}

    def _change_table(self, change: TableChangeBody) -> None:
        if change.delete:
            self.matcher.delete_rows(change.table, change.items, change.ts)
        else:
            self.matcher.upsert_rows(change.table, change.items, change.ts)

    def _table_schema(self, name: str) -> StreamSchema:
        known = {t.lower(): t for t in self.matcher.tables}
        found = known.get(name.lower())
        if found is None:
            listed = ", ".join(known.values()) or "none is declared (POST a CREATE TABLE to /queries)"
            raise UnknownTable(f"no table {name!r}{did_you_mean(name, list(known.values()))} (tables: {listed})")
        return self.matcher.catalog.require(found)

    def table_list(self) -> list[dict[str, Any]]:
        """The declared tables: columns, KEY, keys and versions held, readers."""
        account = {t["name"]: t for t in self.matcher.registrations.tables.account()}
        out = []
        for name in self.matcher.tables:
            schema = self.matcher.catalog.require(name)
            columns = [{"name": c.name, "type": c.ctype.name} for c in schema.columns]
            t = account[name]
            readers = sorted({r["query"] for r in t["readers"]})
            out.append(
                {"name": name, "columns": columns, **{k: t[k] for k in ("key", "keys", "versions")}, "readers": readers}
            )
        return out

    def explain(self) -> dict[str, Any]:
        data = explain_data(self.matcher, self.recent)
        with self.lock:  # /metrics shows the selectivities last measured
            self.selectivity = {(lst["kind"], lst["key"]): lst["selectivity"] for lst in data["lists"]}
        return data

    def _match(self, stream: str, batch: dict[str, list[Any]]) -> list[str]:
        out: MatchBatch = self.matcher.push_batch(stream, batch)
        self.recent.add(stream, batch)
        self._lines.write_batch(out)
        lines = self._lines.take()
        self.stats.tuples += len(batch["ts"])
        self.stats.results += len(lines)
        return lines + self._aggregate_lines()

    def _aggregate_lines(self) -> list[str]:
        if self.matcher.aggregator is None or not len(self.matcher.aggregator):
            return []
        rows = self.matcher.poll_aggregates()
        # what the rows of aggregate views emitted just now found (their own rows are no output)
        self._lines.write_batch(self.matcher.take_results())
        found = self._lines.take()
        self.stats.results += len(found)
        self._lines.write_aggregates(in_file_order(rows))
        lines = self._lines.take()
        self.stats.aggregate_rows += len(lines)
        return found + lines

    def _commit(self, record: dict[str, Any]) -> None:
        """The operation just applied, into the log (synced) when there is one."""
        self.seq += 1
        if self.journal is None:
            return
        try:
            self.journal.append({"seq": self.seq, **record})
        except JournalError as err:
            self._fail(err)

    def _settle(self) -> None:
        """After an operation's results are published: a snapshot every
        ``snapshot_every`` operations (it holds the results with their cursors, so it
        is taken once they are in the ring)."""
        if self.journal is None or self.journal.records_since_snapshot < self.snapshot_every:
            return
        try:
            self.journal.write_snapshot(self._snapshot_data())
        except JournalError as err:
            self._fail(err)

    def _fail(self, err: JournalError) -> None:
        # the matcher is ahead of the disk now: take nothing more, a restart recovers
        self.failed = f"{err}; the service takes nothing more: restart it (the log holds every answered post)"
        raise Stopped(self.failed) from None

    def _publish(self, lines: list[str]) -> None:
        now = time.time()
        with self.lock:
            for line in lines:
                # every result line starts {"query":"<id>", (both encoders write the id first)
                self.ring.append((self.next_cursor, scanstring(line, 10)[0], line, now))
                self.next_cursor += 1
            self._trim(now)

    def _trim(self, now: float) -> None:
        ring = self.ring
        while ring and (len(ring) > self.keep or ring[0][3] < now - self.max_age):
            ring.popleft()
            self.stats.dropped += 1

    def _remember(self, key: str | None, reply: dict[str, Any]) -> None:
        if key is None:
            return
        self.keys[key] = reply
        while len(self.keys) > MAX_KEYS:
            self.keys.popitem(last=False)

    def _observe(self, seconds: float) -> None:
        self.stats.latency_sum += seconds
        k = next((i for i, bound in enumerate(LATENCY_BUCKETS) if seconds <= bound), len(LATENCY_BUCKETS))
        self.stats.latency_counts[k] += 1
        self._window.append(seconds)

    def _list_queries(self, ids: list[str]) -> None:
        # (an aggregate query over an aggregate view runs at a deeper level: every aggregator's)
        aggregates = {q: r.query.text for a in self.matcher.registrations.aggregators() for q, r in a.queries.items()}
        views = set(self.matcher.views)
        found = {}
        for q in ids:
            view = " view" if q in views else ""
            if q in aggregates:
                found[q] = (f"aggregate{view}", aggregates[q])
            else:
                found[q] = ("view" if view else "match", self.matcher.registry.queries[q].text)
        with self.lock:
            self.queries.update(found)

    def _sample(self, now: float) -> None:
        """A point of the page's plots and the summary /health and /metrics read."""
        window, self._window = sorted(self._window), []
        stats = self.stats
        point = {
            "t": time.time(),
            "tuples": stats.tuples,
            "results": stats.results + stats.aggregate_rows,
            "p50": window[len(window) // 2] if window else None,
            "p99": window[min(len(window) - 1, int(len(window) * 0.99))] if window else None,
        }
        summary = {
            "watermark": _number(self.matcher.watermark),
            "held": self.matcher.held_results,
            "late": self.matcher.late_count,
        }
        with self.lock:
            self._trim(time.time())
            self.history.append(point)
            self.summary = summary

    # ------------------------------------------------------------ results (any thread)

    def results_after(self, after: int, query: str | None, limit: int) -> tuple[list[tuple[int, str]], int, int]:
        """Up to ``limit`` results with cursors after ``after`` (of ``query`` only, when
        given): (cursor, text) pairs, the cursor to resume from, and how many results
        after ``after`` were dropped before they were read."""
        with self.lock:
            ring = self.ring
            first = ring[0][0] if ring else self.next_cursor
            start = max(after + 1, first)
            missed = max(0, first - (after + 1))
            out: list[tuple[int, str]] = []
            cursor = max(after, first - 1)
            for k in range(start - first, len(ring)):
                c, q, line, _ = ring[k]
                cursor = c
                if query is None or q == query:
                    out.append((c, line))
                    if len(out) >= limit:
                        break
            return out, cursor, missed

    def query_list(self) -> list[dict[str, str]]:
        with self.lock:
            return [{"id": q, "kind": kind, "text": text} for q, (kind, text) in self.queries.items()]

    # ------------------------------------------------------------ snapshots and replay

    def _snapshot_data(self) -> dict[str, Any]:
        with self.lock:
            ring = list(self.ring)
            return {
                "format": SNAPSHOT_FORMAT,
                "schema": self.schema_digest,
                "seq": self.seq,
                "matcher": self.matcher.snapshot(),
                "next_cursor": self.next_cursor,
                "ring": {
                    "cursor": [r[0] for r in ring],
                    "query": [r[1] for r in ring],
                    "line": [r[2] for r in ring],
                    "at": [r[3] for r in ring],
                },
                "queries": [[q, kind, text] for q, (kind, text) in self.queries.items()],
                "keys": [[k, json.dumps(v)] for k, v in self.keys.items()],
                "stats": {name: getattr(self.stats, name) for name in PERSISTED_COUNTS},
            }

    def _restore(self, data: dict[str, Any], schema_text: str) -> None:
        from runtime.workload import CliError

        where = self.journal.snapshot_path if self.journal is not None else "snapshot"
        if data.get("format") != SNAPSHOT_FORMAT:
            raise CliError(f"{where}: written by another version of mqo serve --http; use a new --checkpoint")
        if data.get("schema") != self.schema_digest:
            raise CliError(f"{where}: written for another --schema; use a new --checkpoint")
        self.matcher = Matcher.restore(data["matcher"])
        self.seq = int(data["seq"])
        self.next_cursor = int(data["next_cursor"])
        ring = data["ring"]
        self.ring.extend(zip(ring["cursor"], ring["query"], ring["line"], ring["at"], strict=True))
        self.queries = {q: (kind, text) for q, kind, text in data["queries"]}
        self.keys = OrderedDict((k, json.loads(v)) for k, v in data["keys"])
        for name, value in data["stats"].items():
            setattr(self.stats, name, value)

    def _apply(self, record: dict[str, Any]) -> None:
        """A logged operation, again (at start-up, before the log is opened for appends)."""
        journal, self.journal = self.journal, None  # replayed records are in the log already
        try:
            op = record["op"]
            if op == "register":
                ids = self.matcher.register_queries(record["text"], source_name="<post>")
                self.seq += 1
                self._list_queries(ids)
            elif op == "unregister":
                self.unregister(record["id"])
            elif op == "push":
                self.seq += 1
                lines = self._match(record["stream"], record["batch"])
                self.stats.posts += 1
                self.stats.rejected += len(record["reply"]["rejected"])
                self._publish(lines)
                self._remember(record["key"], record["reply"])
            elif op == "heartbeat":
                self.heartbeat(record["stream"], record["ts"])
            elif op == "table":
                self.seq += 1
                self._change_table(TableChangeBody(record["table"], record["delete"], record["items"], record["ts"]))
        finally:
            self.journal = journal
        if self.seq != record["seq"]:
            raise RuntimeError(f"log record {record['seq']} replayed as operation {self.seq}")


class UnknownTable(LookupError):
    """A table change names no declared table (the app answers 404)."""


class TooMany(ValueError):
    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.count = count


def _number(value: float) -> float | None:
    """A watermark for JSON: None while it is -inf (no stream has spoken)."""
    return value if value - value == 0.0 else None
