"""Checkpoints off the appending threads: a SQLite store's write-ahead log copied back into
its file by a short-lived thread of its own.

SQLite checkpoints a WAL by default in the commit that makes it pass 1,000 pages: that commit
then syncs the log, copies every page into the file and syncs the file, 10-30 ms on this
machine kind, on the thread of the member whose handling ended. Amortised, that was a third of
what a commit cost in a stored relay (bench B10: write and commit 1.06-1.14 ms per human
message with the checkpoint in the commit, 0.65-0.70 ms with it here).

So the store's writer checkpoints itself only past ``BACKSTOP_PAGES`` (should this thread fall
behind), and :meth:`Checkpointer.wrote` starts a thread once ``EVERY_PAGES`` pages are estimated
written. The thread opens its own connection and runs PASSIVE checkpoints (they never block
a writer: commits go on appending while pages are copied) until one finds nothing new, so the
log is wholly copied and the next commit starts it over from the beginning instead of growing
it; then it closes its connection and ends. Nothing about durability changes: a commit is in
the log before ``append`` returns, and a checkpoint syncs as ``synchronous`` says.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

__all__ = ["BACKSTOP_PAGES", "EVERY_PAGES", "Checkpointer"]

log = logging.getLogger("aklab.store")

#: Estimated log pages written between two checkpoints (SQLite's own default threshold).
EVERY_PAGES = 1_000
#: The writer connection's ``wal_autocheckpoint``: it checkpoints in its commit only if the
#: log grew this long anyway (commits so frequent that no pass of the thread ever catches up).
BACKSTOP_PAGES = 4_000
#: Passes per round at most: each copies what the commits made during the one before.
MAX_PASSES = 8


class Checkpointer:
    """Checkpoints the WAL of the database at ``path`` on a thread of its own, every
    ``every_pages`` pages the writer reports (:meth:`wrote`)."""

    def __init__(self, path: Path, *, every_pages: int = EVERY_PAGES, timeout: float = 1.0) -> None:
        self.path = path
        self.every_pages = every_pages
        self.timeout = timeout
        self.rounds = 0
        """Rounds ended with the whole log copied (a later commit starts it over)."""
        self.failed: str | None = None
        """The last round's failure, if it failed (the writer's backstop checkpoints then)."""
        self._pages = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()

    def wrote(self, pages: int) -> None:
        """The writer committed about ``pages`` pages (called under the store's lock)."""
        self._pages += pages
        if self._pages < self.every_pages:
            return
        self._pages = 0
        with self._cond:
            if self._closed:
                return
            if self._thread is not None:  # a round in progress: its next pass sees these pages too
                return
            self._thread = threading.Thread(target=self._round, name="aklab-store-checkpoint", daemon=True)
            self._thread.start()

    def _round(self) -> None:
        try:
            caught_up = self._passes()
        except Exception as exc:  # never out of the thread: the writer's backstop checkpoints
            caught_up = False
            self.failed = f"{type(exc).__name__}: {exc}"
            log.debug("event store %s: checkpoint failed: %s", self.path, self.failed)
        with self._cond:
            self._thread = None
            if caught_up:
                self.rounds += 1
                self.failed = None
            self._cond.notify_all()

    def _passes(self) -> bool:
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        try:
            previous = -1
            for _ in range(MAX_PASSES):
                if self._closed:
                    return False
                _busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()[0]
                # A pass reports the log as it was when the pass began: "copied >= frames" alone
                # holds after nearly every pass, while commits made during it are still in the
                # log only, and the next commit appends after them instead of starting it over
                # (tried: with a store appending all along, no round ever saw it start over).
                if copied >= frames and frames == previous:
                    return True  # nothing committed since the last pass: the log is wholly copied
                previous = frames
            return False
        finally:
            conn.close()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no round is in progress; whether none is."""
        with self._cond:
            return self._cond.wait_for(lambda: self._thread is None, timeout)

    def close(self) -> None:
        """Start no more rounds and wait for the one in progress (it stops after its pass)."""
        with self._cond:
            self._closed = True
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
