"""Actor mailbox and team activity tracking.

:class:`Mailbox` replaces pykka's plain ``queue.Queue`` inbox. It is still FIFO, but
code running *inside* the actor (a capability between two model steps) may look at
what is waiting and take specific messages out. Messages can be tagged on arrival by
a classifier, so asking "is a cancel waiting?" costs O(1) however long the queue is,
and ``on_tagged`` is called on the *sender's* thread as soon as a tagged message is
queued, so a cancel can reach a handler that is blocked (on an HTTP request) without
waiting for its turn in the queue.

A mailbox is closed when its actor stops: from then on a tell raises pykka's
``ActorDeadError`` (the sender learns at once that nobody will read it) and an ask gets
it in its future; ``close()`` hands over, once, what was still waiting, so the actor
can account for it.

:class:`Activity` counts messages that are queued or being handled across a whole
actor system, so callers can wait until the team is quiet without polling.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import pykka

__all__ = ["Activity", "Mailbox"]

log = logging.getLogger("aklab.core")


class Activity:
    """Counts work in flight; ``wait_idle`` returns when the count drops to zero."""

    def __init__(self) -> None:
        self._count = 0
        self._cond = threading.Condition()

    def begin(self, n: int = 1) -> None:
        with self._cond:
            self._count += n

    def end(self, n: int = 1) -> None:
        with self._cond:
            self._count -= n
            if self._count <= 0:
                self._count = 0
                self._cond.notify_all()

    @property
    def count(self) -> int:
        return self._count

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is in flight. Returns False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._count == 0, timeout=timeout)


def _refuse(envelope: Any) -> None:
    """Mail for a stopped actor: an ask gets ``ActorDeadError`` in its future, as pykka
    answers the asks left in a stopped actor's inbox; a tell raises it to the sender."""
    error = pykka.ActorDeadError("the actor stopped; its mailbox is closed")
    reply_to = getattr(envelope, "reply_to", None)
    if reply_to is None:
        raise error
    reply_to.set_exception((type(error), error, None))


class Mailbox:
    """A FIFO inbox with tagged look-ups and targeted removal (thread-safe)."""

    def __init__(self) -> None:
        self._items: deque[tuple[Any, bool, int]] = deque()
        self._cond = threading.Condition()
        self._tagged = 0
        self._seq = 0
        self._closed = False
        self.classifier: Callable[[Any], bool] | None = None
        self.on_remove: Callable[[Any], None] | None = None
        self.on_tagged: Callable[[], None] | None = None
        """Called on the putting thread, after a message the classifier tagged is queued."""

    # -- pykka's ActorInbox protocol ----------------------------------------------
    def put(self, envelope: Any, /) -> None:
        with self._cond:
            if self._closed:
                _refuse(envelope)
                return
            tag = self._classify(envelope)
            self._seq += 1
            self._items.append((envelope, tag, self._seq))
            self._tagged += tag
            self._cond.notify()
        if tag and self.on_tagged is not None:
            try:
                self.on_tagged()
            except Exception:  # the sender's delivery must not fail for the receiver's hook
                log.exception("on_tagged hook failed; the message is queued anyway")

    def get(self) -> Any:
        with self._cond:
            while not self._items:
                self._cond.wait()
            envelope, tag, _seq = self._items.popleft()
            self._tagged -= tag
            return envelope

    def empty(self) -> bool:
        return not self._items

    def close(self) -> list[Any]:
        """Refuse further mail; return the waiting messages the first time, ``[]`` after.

        The envelopes stay queued, so pykka still answers anyone waiting on an ask.
        """
        with self._cond:
            if self._closed:
                return []
            self._closed = True
            return [getattr(envelope, "message", envelope) for envelope, _tag, _seq in self._items]

    # -- look-ups from inside the actor -------------------------------------------
    def _classify(self, envelope: Any) -> bool:
        if self.classifier is None:
            return False
        try:
            return bool(self.classifier(getattr(envelope, "message", envelope)))
        except Exception:  # a classifier must never break delivery
            return False

    def has_tagged(self) -> bool:
        """O(1): is a message the classifier tagged waiting?"""
        return self._tagged > 0

    def __len__(self) -> int:
        return len(self._items)

    def tagged_count(self) -> int:
        """How many tagged messages (cancels) are waiting."""
        return self._tagged

    def messages(self) -> Iterator[Any]:
        """Snapshot of the waiting messages (not envelopes), oldest first."""
        with self._cond:
            items = list(self._items)
        for envelope, _tag, _seq in items:
            yield getattr(envelope, "message", envelope)

    @property
    def last_seq(self) -> int:
        """Sequence number of the latest arrival (0 before any)."""
        return self._seq

    def arrivals_after(self, seq: int) -> tuple[list[Any], int]:
        """Messages still waiting that arrived after ``seq``, oldest first, and the latest seq.

        Costs O(new arrivals), not O(queue length): it walks back from the newest end.
        """
        with self._cond:
            latest = self._seq
            if seq >= latest:
                return [], latest
            fresh = []
            for envelope, _tag, item_seq in reversed(self._items):
                if item_seq <= seq:
                    break
                fresh.append(getattr(envelope, "message", envelope))
        fresh.reverse()
        return fresh, latest

    def remove(self, predicate: Callable[[Any], bool], *, tagged_only: bool = False) -> list[Any]:
        """Take out every waiting message matching ``predicate``; returns them."""
        with self._cond:
            if tagged_only and self._tagged == 0:
                return []
            kept: deque[tuple[Any, bool, int]] = deque()
            removed: list[Any] = []
            for item in self._items:
                envelope, tag, _seq = item
                msg = getattr(envelope, "message", envelope)
                if (not tagged_only or tag) and predicate(msg):
                    removed.append(msg)
                    self._tagged -= tag
                else:
                    kept.append(item)
            self._items = kept
        if self.on_remove is not None:
            for msg in removed:
                self.on_remove(msg)
        return removed
