"""The HTTP service's durable state under ``--checkpoint DIR``: a write-ahead log of
accepted operations and a snapshot of the engine, so that a post answered 200 survives
``kill -9``.

* ``http-wal.jsonl``: one JSON object per accepted operation (a registration with its
  text, a removal, a batch of tuples as plain columns, a heartbeat, a table change with
  its checked rows or keys and ts), numbered by
  ``seq``. A record is written and ``fsync``-ed before the client gets its answer.
  Plain JSON only: nothing read back is ever code or a pickle.
* ``http-snapshot.mqosnap``: the matcher (:meth:`mqo.Matcher.snapshot`) with the
  service's own state (the results still held with their cursors, the idempotency
  keys, the query texts), written by :func:`mqo.encode_snapshot` under a temporary
  name, synced and renamed over the last one; then the log is emptied.

A restart restores the snapshot and applies the log's records after its ``seq`` again:
the engine is deterministic (no processing-time idle timeout in the service), so the
replayed operations give the same results under the same cursors. A record cut short
by a crash was never acknowledged: it is dropped, and the log is cut back to its last
whole line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mqo import SnapshotError, decode_snapshot, encode_snapshot
from runtime.local.serve_files import sync_paths, write_atomically
from runtime.workload import CliError

SNAPSHOT_FILE = "http-snapshot.mqosnap"
LOG_FILE = "http-wal.jsonl"


class JournalError(OSError):
    """The log or a snapshot could not be written (a full or read-only disk)."""


class Journal:
    """The log and snapshot of one checkpoint directory (held by the caller's lock)."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)
        self.snapshot_path = self.folder / SNAPSHOT_FILE
        self.log_path = self.folder / LOG_FILE
        self._fd: int | None = None
        self.records_since_snapshot = 0

    def load(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The last snapshot (None when there is none) and the log's records after it."""
        snapshot = None
        if self.snapshot_path.exists():
            try:
                snapshot = decode_snapshot(self.snapshot_path.read_bytes(), str(self.snapshot_path))
            except SnapshotError as err:
                raise CliError(str(err)) from None
            if not isinstance(snapshot, dict) or snapshot.get("kind") != "mqo-http":
                raise CliError(f"{self.snapshot_path}: not a snapshot of mqo serve --http; use a new --checkpoint")
        done = int(snapshot["seq"]) if snapshot is not None else 0
        records = [r for r in self._read_log() if r["seq"] > done]
        for k, record in enumerate(records):
            if record["seq"] != done + k + 1:
                raise CliError(f"{self.log_path}: record {record['seq']} follows {done + k}; the log is not whole")
        self.records_since_snapshot = len(records)
        return snapshot, records

    def _read_log(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        blob = self.log_path.read_bytes()
        records = []
        good = 0  # bytes of whole, readable records
        for line in blob.split(b"\n")[:-1]:  # the part after the last newline was never acknowledged
            try:
                records.append(json.loads(line))
            except ValueError:
                if good + len(line) + 1 < len(blob):  # not the last line: the log is damaged
                    raise CliError(
                        f"{self.log_path}: byte {good}: not a log record; the checkpoint is damaged"
                    ) from None
                break
            good += len(line) + 1
        if good < len(blob):
            with open(self.log_path, "r+b") as f:  # cut the torn record away before appending
                f.truncate(good)
                os.fsync(f.fileno())
        return records

    def append(self, record: dict[str, Any]) -> None:
        """One record, on the disk when this returns."""
        try:
            line = (json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n").encode()
        except (TypeError, ValueError) as err:  # not plain data: never half-logged, the service stops
            raise JournalError(f"cannot log the operation as JSON ({err})") from None
        try:
            if self._fd is None:
                self._fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            rest = memoryview(line)
            while rest:
                rest = rest[os.write(self._fd, rest) :]
            os.fsync(self._fd)
        except OSError as err:
            raise JournalError(f"cannot write the log {self.log_path} ({err.strerror or err})") from None
        self.records_since_snapshot += 1

    def write_snapshot(self, data: dict[str, Any]) -> None:
        """``data`` as the snapshot (whole or not at all); then the log starts empty."""
        blob = encode_snapshot({"kind": "mqo-http", **data})
        try:
            write_atomically(self.snapshot_path, blob)
            sync_paths([self.folder])
            # the log's records are all in the snapshot now (a crash before this line
            # leaves them, and a restart skips them by their seq)
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.fsync(fd)
            os.close(fd)
        except OSError as err:
            raise JournalError(f"cannot write the snapshot {self.snapshot_path} ({err.strerror or err})") from None
        self.records_since_snapshot = 0

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
