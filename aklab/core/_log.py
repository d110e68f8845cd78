"""TeamLog: the team's record of what happened, written by whoever it happened on.

Every member holds the team's log and records into it on its own thread: a record is
kept and handed to the subscribers before the call returns, and no other thread is woken
to do it. (Records used to travel to the orchestrator's mailbox; bench B1
counted up to 25 thread switches per LLM turn from that, each one a hand-off of the GIL
away from the turn that was running.)

Records are kept under a short lock and handed to subscribers *outside* it, one at a
time, in one order (each member's records in the order it made them). The thread that
finds nobody delivering delivers, draining what other threads queued meanwhile; a thread
that finds a delivery in progress queues its record and waits (at most
``DELIVERY_WAIT`` seconds) until it has been delivered, so a reader who waited for the
team to go quiet sees every record. A record made from inside a subscriber's callback
(on the delivering thread) is queued and delivered right after the callback returns.

So a subscriber that calls an actor (the orchestrator, say) from ``on_message`` no longer
holds every other member's records hostage: the actor answers, and a record that actor
makes meanwhile waits in the queue (a start or stop record, which the orchestrator
makes, is queued without waiting at all). A subscriber must still never wait on the
member whose record it is handling (for a start or stop record: the orchestrator), since
that member's thread is the one calling it: ``delivering_here()`` lets the ask path
refuse such a call with a clear error. A subscriber that keeps the delivery for longer than
``DELIVERY_WAIT`` is named in one logged error, and records are not held up behind it
after that. Subscribers should still be quick (``TeamRecorder`` only appends; the panels
only update models). A subscriber that raises is logged and kept.

A record class may set ``aklab_kept = False`` (the event store's bookkeeping:
``DispatchedMessage``, ``HandledMessage``): it is fanned out, not kept.

Memory is bounded: the recent records (``RECENT_RECORDS``), events of each type
(``EVENTS_PER_TYPE``, unless the event class sets ``aklab_log_limit``) and errors
(``ERRORS_KEPT``) keep only their newest entries.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from aklab.core._messages import (
    ErrorMessage,
    EventMessage,
    OrchestratorMessage,
    SentMessage,
    StartMessage,
    StopMessage,
    class_flag,
)
from aklab.core._recent import Recent
from aklab.core._subscriber import EventSubscriber
from aklab.secrets import redact

__all__ = [
    "DELIVERY_WAIT",
    "ERRORS_KEPT",
    "EVENTS_PER_TYPE",
    "RECENT_RECORDS",
    "TeamLog",
    "delivering_here",
]

log = logging.getLogger("aklab.core")

#: How many records the log keeps in memory for late subscribers.
RECENT_RECORDS = 5_000
#: How many events of one type (e.g. ``AgentBusyEvent``) the log keeps; an event class
#: may set ``aklab_log_limit`` (an int, or None for all) to choose otherwise.
EVENTS_PER_TYPE = 2_000
#: How many errors the log keeps.
ERRORS_KEPT = 1_000
#: How long a recording thread waits for a delivery in progress on another thread.
DELIVERY_WAIT = 2.0


_local = threading.local()


def delivering_here() -> bool:
    """True while this thread is inside a subscriber's callback (for re-entry checks)."""
    return bool(getattr(_local, "depth", 0))


class TeamLog:
    """Thread-safe: keeps recent records, events by type and errors; fans records out."""

    def __init__(self, recent: int = RECENT_RECORDS, *, per_type: int = EVENTS_PER_TYPE) -> None:
        self._lock = threading.Lock()
        self._delivered = threading.Condition(self._lock)
        self._subscribers: tuple[EventSubscriber, ...] = ()
        self._recent: deque[OrchestratorMessage] = deque(maxlen=recent)
        self._per_type = per_type
        self._events_by_type: dict[type, deque[EventMessage]] = {}
        self._errors: Recent[ErrorMessage] = Recent(ERRORS_KEPT, "error")
        self._queue: deque[tuple[int, OrchestratorMessage]] = deque()
        self._seq = 0  # records queued so far
        self._done = 0  # records delivered so far
        self._deliverer: int | None = None  # thread id delivering, if any
        self._current: EventSubscriber | None = None  # the subscriber being called
        self._stuck: EventSubscriber | None = None  # named once in the log

    def record(self, message: OrchestratorMessage) -> None:
        _redact(message)
        me = threading.get_ident()
        with self._lock:
            self._keep(message)
            if not self._subscribers:
                return
            self._seq += 1
            seq = self._seq
            if self._deliverer is not None or self._queue:
                self._queue.append((seq, message))
                if self._deliverer == me:
                    return  # recorded from inside a callback: delivered after it returns
                if self._deliverer is not None:
                    if isinstance(message, StartMessage | StopMessage):
                        # Made by the orchestrator, whom the delivering subscriber may
                        # be waiting on: never wait (delivered in its turn).
                        return
                    if not self._wait_for(seq) or self._done >= seq:
                        return
                # Records left queued by a deliverer that failed: take over, oldest first.
                seq, message = self._queue.popleft()
            self._deliverer = me
        self._deliver(seq, message)

    def _keep(self, message: OrchestratorMessage) -> None:
        # Transient events (e.g. streamed partial text) are fanned out, not kept.
        if isinstance(message, EventMessage):
            klass = type(message.event)
            if class_flag(klass, "aklab_transient", False):
                return
            self._recent.append(message)
            kept = self._events_by_type.get(klass)
            if kept is None:
                kept = self._events_by_type[klass] = deque(maxlen=getattr(klass, "aklab_log_limit", self._per_type))
            kept.append(message)
        elif class_flag(type(message), "aklab_kept", True):  # store bookkeeping is only fanned out
            self._recent.append(message)
            if isinstance(message, ErrorMessage):
                self._errors.append(message)

    def _wait_for(self, seq: int) -> bool:
        """Under the lock: wait until ``seq`` is delivered or nobody delivers. False if the
        delivery in progress is stuck (its record will be delivered when it comes back)."""
        if self._stuck is not None:
            return False
        deadline = time.monotonic() + DELIVERY_WAIT
        while self._deliverer is not None and self._done < seq:
            left = deadline - time.monotonic()
            if left <= 0:
                self._stuck = self._current
                log.error(
                    "subscriber %r has been inside on_message for over %g s, holding up the team's records "
                    "(does it wait on an actor?): "
                    "an EventSubscriber must not wait on an actor from its callback (hand slow work to another "
                    "thread); records go on without waiting for it",
                    self._current,
                    DELIVERY_WAIT,
                )
                return False
            self._delivered.wait(left)
        return True

    def _deliver(self, seq: int, message: OrchestratorMessage) -> None:
        """Deliver ``message``, then whatever was queued meanwhile, in order (this thread
        owns the delivery until the queue is empty)."""
        _local.depth = getattr(_local, "depth", 0) + 1
        try:
            while True:
                for subscriber in self._subscribers:
                    self._current = subscriber
                    try:
                        subscriber.on_message(message)
                    except Exception:
                        log.exception("subscriber %r failed; it stays subscribed", subscriber)
                with self._lock:
                    self._done = seq
                    if not self._queue:
                        self._deliverer = self._current = self._stuck = None
                        self._delivered.notify_all()
                        return
                    self._delivered.notify_all()
                    seq, message = self._queue.popleft()
        except BaseException:
            with self._lock:
                self._deliverer = None
                self._delivered.notify_all()
            raise
        finally:
            _local.depth -= 1

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
        """The newest records (at most ``RECENT_RECORDS``), oldest first."""
        with self._lock:
            return list(self._recent)

    def events(self, event_type: type | None = None) -> list[EventMessage]:
        """The kept ``EventMessage``s (of ``event_type`` and its subclasses, if given), oldest
        first: the newest ``EVENTS_PER_TYPE`` of each type."""
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
        """The newest ``ERRORS_KEPT`` errors (``dropped_errors`` says how many older ones)."""
        return list(self._errors)

    @property
    def dropped_errors(self) -> int:
        return self._errors.dropped


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
