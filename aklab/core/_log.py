"""TeamLog: the team's record of what happened, written by whoever it happened on.

Every member holds the team's log and records into it on its own thread: a record is
kept and handed to the subscribers before the call returns, so nothing is queued and no
other thread is woken. (Records used to travel to the orchestrator's mailbox; bench B1
counted up to 25 thread switches per LLM turn from that, each one a hand-off of the GIL
away from the turn that was running.)

Records are taken one at a time under a lock, so subscribers see one order, and each
member's records in the order it made them. Subscribers are called on the recording
member's thread, with the lock held: they must be quick and must not wait on an actor
(``TeamRecorder`` only appends; the panels only update models). A subscriber that
raises is logged and kept.
"""

from __future__ import annotations

import logging
import threading
from collections import deque

from aklab.core._messages import ErrorMessage, EventMessage, OrchestratorMessage, SentMessage
from aklab.core._subscriber import EventSubscriber
from aklab.secrets import redact

__all__ = ["RECENT_RECORDS", "TeamLog"]

log = logging.getLogger("aklab.core")

#: How many records the log keeps in memory for late subscribers.
RECENT_RECORDS = 10_000


class TeamLog:
    """Thread-safe: keeps recent records, events by type and errors; fans records out."""

    def __init__(self, recent: int = RECENT_RECORDS) -> None:
        self._lock = threading.RLock()
        self._subscribers: tuple[EventSubscriber, ...] = ()
        self._recent: deque[OrchestratorMessage] = deque(maxlen=recent)
        self._events_by_type: dict[type, list[EventMessage]] = {}
        self._errors: list[ErrorMessage] = []

    def record(self, message: OrchestratorMessage) -> None:
        _redact(message)
        with self._lock:
            # Transient events (e.g. streamed partial text) are fanned out, not kept.
            if isinstance(message, EventMessage):
                if not getattr(type(message.event), "aklab_transient", False):
                    self._recent.append(message)
                    self._events_by_type.setdefault(type(message.event), []).append(message)
            else:
                self._recent.append(message)
                if isinstance(message, ErrorMessage):
                    self._errors.append(message)
            for subscriber in self._subscribers:
                try:
                    subscriber.on_message(message)
                except Exception:
                    log.exception("subscriber %r failed; it stays subscribed", subscriber)

    # -- subscribers ------------------------------------------------------------------
    def subscribe(self, subscriber: EventSubscriber) -> None:
        with self._lock:
            self._subscribers = (*self._subscribers, subscriber)

    def unsubscribe(self, subscriber: EventSubscriber) -> None:
        with self._lock:
            self._subscribers = tuple(s for s in self._subscribers if s is not subscriber)

    def stop(self) -> None:
        """Tell every subscriber the team stopped."""
        with self._lock:
            subscribers = self._subscribers
        for subscriber in subscribers:
            try:
                subscriber.on_stop()
            except Exception:
                log.exception("subscriber %r failed on stop", subscriber)

    # -- reading ----------------------------------------------------------------------
    def messages(self) -> list[OrchestratorMessage]:
        with self._lock:
            return list(self._recent)

    def events(self, event_type: type | None = None) -> list[EventMessage]:
        """Every kept ``EventMessage`` (of ``event_type`` and its subclasses, if given), oldest first."""
        with self._lock:
            groups = [
                list(events)
                for klass, events in self._events_by_type.items()
                if event_type is None or issubclass(klass, event_type)
            ]
        out = [m for group in groups for m in group]
        if len(groups) > 1:
            out.sort(key=lambda m: m.created_at)
        return out

    def errors(self) -> list[ErrorMessage]:
        with self._lock:
            return list(self._errors)


def _redact(record: OrchestratorMessage) -> None:
    """No secret enters the log (nor, for a sent message, reaches its recipient)."""
    if isinstance(record, ErrorMessage):
        record.exception_value = redact(record.exception_value)
    elif isinstance(record, SentMessage):
        content = getattr(record.message, "content", None)
        if isinstance(content, str):
            cleaned = redact(content)
            if cleaned is not content and cleaned != content:
                record.message.content = cleaned  # type: ignore[attr-defined]
