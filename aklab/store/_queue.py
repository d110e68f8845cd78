"""The write queue the SQL stores share: ``append_later`` queues, the next write takes it.

A queued record is encoded when it is written, with the rest of the queue, one after the
other (a handling's records at its end): encoding records back to back, rather than each
between two model turns, finds the encoder's code and data in the CPU caches, which made
a stored relay ~1 % faster (bench B10). The values written are the record's at that time;
a record is not changed after it is made (the in-memory log and panels share it too).

A store mixes :class:`QueuedWrites` in before :class:`EventStore`, sets ``self._lock`` (the
lock its connection is used under) and calls ``_init_queue()``, and implements
``_write_rows(rows)``: write them in one transaction, return the seq of the last, raise
:class:`StoreError` if that failed.
"""

from __future__ import annotations

import threading

from aklab.core import OrchestratorMessage
from aklab.store._base import StoreError, check_team_id
from aklab.store._codec import Row, encode

__all__ = ["MAX_PENDING", "QueuedWrites"]

#: ``append_later`` writes the queue itself once it holds this many records.
MAX_PENDING = 512


class QueuedWrites:
    _lock: threading.Lock
    location: str
    read_only: str | None

    def _init_queue(self) -> None:
        self._pending: list[Row | tuple[OrchestratorMessage, str]] = []  # append_later's, under _queue_lock
        self._queue_lock = threading.Lock()

    def _write_rows(self, rows: list[Row]) -> int:
        raise NotImplementedError

    def _connected(self) -> bool:
        raise NotImplementedError

    def _writable(self) -> None:
        if self.read_only is not None:
            raise StoreError(f"event store {self.location} is read-only ({self.read_only}): records are not stored")

    def append(self, record: OrchestratorMessage, team_id: str) -> int:
        row = encode(record, check_team_id(team_id))
        self._writable()
        with self._lock:
            seq = self._write(row)
        assert seq is not None
        return seq

    def append_later(self, record: OrchestratorMessage, team_id: str) -> None:
        item = (record, check_team_id(team_id))
        self._writable()
        with self._queue_lock:  # not self._lock: queueing never waits for a commit in progress
            self._pending.append(item)
            full = len(self._pending) >= MAX_PENDING
        if full:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            self._write(None)

    def _write(self, row: Row | None) -> int | None:
        """Write the queued rows and ``row`` (under ``self._lock``, which orders the batches:
        each is taken from the queue and written before the next is taken); the seq of ``row``."""
        with self._queue_lock:
            items, self._pending = self._pending, []
        rows, unencoded = _encoded(items)
        if unencoded is None and row is not None:
            rows.append(row)
        if not rows and unencoded is None:
            return None
        try:
            seq = self._write_rows(rows) if rows else None
        except StoreError:
            if row is not None and unencoded is None:
                rows.pop()  # the caller is told: not stored
            with self._queue_lock:  # kept (encoded): written by the next try, before anything newer
                self._pending[:0] = rows
            raise
        if unencoded is not None:  # what came before it is stored; it and the rest are not
            record, exc = unencoded
            after = len(items) - len(rows) - 1
            raise StoreError(
                f"a {type(record).__name__} could not be written as JSON ({type(exc).__name__}: {exc}); "
                f"it is not stored, nor the {after} record{'' if after == 1 else 's'} queued after it"
            ) from exc
        return seq if row is not None else None

    def _flush_for_reading(self) -> None:
        """Before a read (under ``self._lock``): what this process appended is readable. A
        write that fails here is reported to the writer by its next append, not to the reader."""
        if self._pending and self._connected():
            try:
                self._write(None)
            except StoreError:
                pass


def _encoded(
    items: list[Row | tuple[OrchestratorMessage, str]],
) -> tuple[list[Row], tuple[OrchestratorMessage, Exception] | None]:
    """The rows for queued ``items``, in order, up to the first record that cannot be
    encoded (then also that record and why: nothing after it may be stored, or the store
    would not be a prefix of what was appended)."""
    rows: list[Row] = []
    for item in items:
        if isinstance(item, Row):  # encoded by a write that failed
            rows.append(item)
            continue
        try:
            rows.append(encode(*item))
        except Exception as exc:
            return rows, (item[0], exc)
    return rows, None
