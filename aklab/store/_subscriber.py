"""StoreSubscriber: the team log's records, appended to an event store as they happen."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from aklab.core import EventMessage, EventSubscriber, Message, OrchestratorMessage, class_flag
from aklab.store._base import EventStore, check_team_id

__all__ = ["StoreSubscriber"]

log = logging.getLogger("aklab.store")

#: A member's records made while it handles a message are committed together when it is
#: done, unless the first of them waited this long (a model call in between): then at once.
GROUP_WINDOW = 0.05


class StoreSubscriber(EventSubscriber):
    """Appends every record of one team to ``store``, on the thread that made it.

    The team log calls ``on_message`` synchronously, on the thread that made the record.
    Records a member makes while it handles a message (``within_handling``) are queued and
    committed in one transaction with the record of its end (``DispatchedMessage``), so
    they are durable before it takes its next message; any other record is committed at
    once, with everything queued before it. A
    record that arrives ``GROUP_WINDOW`` seconds or more after the oldest queued one (a model
    call in between, a slow tool) commits the queue at once too: on a real model each
    call's usage is stored as it comes. An event whose class sets ``aklab_commit_now`` (a
    model's answer, ``ModelResponseEvent``) is committed at once, whenever it comes. A crash
    loses at most the records of turns in progress, whose messages a resume delivers again
    (their handling never finished), and
    the store always holds a prefix of the team's records. What such a turn sent was held
    by its member, never delivered (``SentMessage.during``): a resume does not deliver it
    either, since the turn, done again, sends afresh. Transient events (streamed
    partial text: the full text arrives in the ``SentMessage``) are not stored.

    A store failure (read-only or full disk, a lock held too long, a lost connection)
    never reaches the actor: the subscriber logs ONE warning on the ``aklab.store`` logger,
    sets ``failed`` to the reason, calls ``on_failure(reason)`` if given, and stores
    nothing more (a store with a gap in the middle would resume wrongly); the team goes
    on in memory. ``dropped`` counts the records not stored since.
    """

    def __init__(
        self,
        store: EventStore,
        team_id: str,
        *,
        on_failure: Callable[[str], Any] | None = None,
    ) -> None:
        self.store = store
        self.team_id = check_team_id(team_id)
        self.on_failure = on_failure
        self.failed: str | None = None
        """Why records are no longer stored (None while they are)."""
        self.stored = 0
        self.dropped = 0
        self.last_seq: int | None = None
        self._lock = threading.Lock()
        self._queued_since: float | None = None  # when the oldest queued record was queued
        read_only = getattr(store, "read_only", None)
        if read_only:
            self._fail(f"the store is read-only ({read_only})", None)

    def on_message(self, message: Message) -> None:
        if not isinstance(message, OrchestratorMessage):
            return
        if isinstance(message, EventMessage) and _unstored(type(message.event)):
            return
        if self.failed is not None:
            self.dropped += 1
            return
        later = self._later(message)
        try:
            if later:
                self.store.append_later(message, self.team_id)
            else:
                seq = self.store.append(message, self.team_id)
        except Exception as exc:  # never into the actor: the team goes on in memory
            self.dropped += 1
            self._fail(str(exc), message)
            return
        self.stored += 1
        if not later:
            self.last_seq = seq

    def _later(self, message: OrchestratorMessage) -> bool:
        """Whether ``message`` may wait in the store's queue (see the class docstring)."""
        if not message.within_handling or (
            isinstance(message, EventMessage) and class_flag(type(message.event), "aklab_commit_now", False)
        ):
            self._queued_since = None
            return False
        now = time.monotonic()
        with self._lock:
            if self._queued_since is None:
                self._queued_since = now
            elif now - self._queued_since >= GROUP_WINDOW:
                self._queued_since = None
                return False
            return True

    def _fail(self, reason: str, record: OrchestratorMessage | None) -> None:
        with self._lock:
            if self.failed is not None:
                return
            self.failed = reason
        what = f" while storing a {type(record).__name__}" if record is not None else ""
        log.warning(
            "event store %s failed%s: %s. The team keeps working in memory, but its records are no "
            "longer stored (history and resume will stop here); fix the store (free space, file "
            "permissions, another store path) and start the team again to store it",
            self.store.location,
            what,
            reason,
        )
        if self.on_failure is not None:
            try:
                self.on_failure(reason)
            except Exception:
                log.exception("on_failure callback of %r failed", self)

    def __repr__(self) -> str:
        state = f"failed: {self.failed}" if self.failed else f"{self.stored} stored"
        return f"<StoreSubscriber team={self.team_id} {self.store.location} ({state})>"


def _unstored(klass: type) -> bool:
    """Events fanned out only (``aklab_transient``) or kept in memory only (``aklab_stored = False``)."""
    return class_flag(klass, "aklab_transient", False) or not class_flag(klass, "aklab_stored", True)
