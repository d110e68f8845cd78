"""LabFeed: one recorder listener per lab, which panels follow instead of the recorder.

Two things the recorder does not give the panels. It keeps messages and errors but not
the transcript's notes (a ``/command``, an unrouted message), so a panel opened late
could not replay them; and it does not sort records by ask, which a cell's transcript
(one ask: everything one human message caused) needs. The feed keeps the newest
transcript records (messages, notes and errors, in the order they were recorded) and
hands each live record to its followers: a follower of one ask gets only that ask's
records, a follower of ``None`` gets everything. What it lets go (``dropped``) is still in
the event store, which a transcript panel reads back on demand (``_older``).

Following is exactly-once: ``follow`` takes the history and adds the follower under the
feed's lock, and the feed appends and picks followers under the same lock, so each
record is either replayed or delivered live, never both, never neither. A feed made
after the lab had already recorded messages has not seen them: it replays them from
the recorder instead (without notes, which the recorder never kept), ordered by time,
and skips them if they reach it afterwards.

Besides the transcript the feed keeps who is in a turn now: each agent's last
``AgentBusyEvent`` while it says busy. A follower gets them after the replay, so a panel
opened while a model thinks (``%%ask`` opens its cell's transcript just after sending)
shows the agent working, as one open all along would. A follower of one ask gets the
busy records of every ask, live too: its panel says when its ask waits for an agent
still in a turn of another.

The feed subscribes to the recorder while it has followers and unsubscribes with the
last one, or when ``detach_panels(lab)`` closes it. ``watch_lab(lab)`` keeps a feed
from the lab's start even while no panel follows it.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

from aklab.agent import AgentBusyEvent, AgentMessage, OperatorActionEvent, RoutingSkippedEvent
from aklab.core import ErrorMessage, EventMessage, Message, SentMessage

__all__ = ["LabFeed", "ask_of", "follow_lab", "is_transcript", "lab_feed", "watch_lab"]

T = TypeVar("T")

#: How many of the newest transcript records (messages, notes, errors) a feed keeps.
HISTORY = 3_000

Sink = Callable[[Message], Any]


def ask_of(record: Message) -> str | None:
    """The ask a record belongs to: its own ``ask_id``, else that of the message it is about."""
    if record.ask_id is not None:
        return record.ask_id
    if isinstance(record, SentMessage):
        return record.message.ask_id
    if isinstance(record, ErrorMessage) and record.current_message is not None:
        return record.current_message.ask_id
    return None


def is_transcript(record: Message) -> bool:
    """A record the transcript shows: an agent message, a note, an error."""
    if isinstance(record, SentMessage):
        return isinstance(record.message, AgentMessage)
    if isinstance(record, EventMessage):
        return isinstance(record.event, OperatorActionEvent | RoutingSkippedEvent)
    return isinstance(record, ErrorMessage)


class _Follower:
    __slots__ = ("ask_id", "seen", "sink")

    def __init__(self, sink: Sink, ask_id: str | None) -> None:
        self.sink = sink
        self.ask_id = ask_id
        self.seen: set[int] = set()  # replayed from the recorder: skip when they arrive live


class LabFeed:
    """The transcript history of one recorder, and its records fanned out to followers."""

    def __init__(self, recorder: Any, *, keep: int | None = None) -> None:
        self.recorder = recorder
        self._lock = threading.Lock()
        self._history: deque[Message] = deque(maxlen=HISTORY if keep is None else keep)
        #: Transcript records let go (the oldest, past ``keep``): the event store still has them.
        self.dropped = 0
        self._followers: tuple[_Follower, ...] = ()
        self._busy: dict[str, Message] = {}  # agent -> its AgentBusyEvent record, while it is busy
        self.complete = False
        recorder.listeners.append(self)
        # Checked after subscribing: a message recorded before the feed existed is not in its history.
        self.complete = not recorder.transcript and not recorder.errors

    def __call__(self, record: Message) -> None:
        ask = ask_of(record)
        busy = isinstance(record, EventMessage) and isinstance(record.event, AgentBusyEvent)
        with self._lock:
            if is_transcript(record):
                if len(self._history) == self._history.maxlen:
                    self.dropped += 1
                self._history.append(record)
            elif busy:
                event = cast(AgentBusyEvent, cast(EventMessage, record).event)
                if event.busy:
                    self._busy[event.agent] = record
                else:
                    self._busy.pop(event.agent, None)
            followers = [f for f in self._followers if f.ask_id is None or f.ask_id == ask or busy]
        for follower in followers:
            if follower.seen and id(record) in follower.seen:
                follower.seen.discard(id(record))
                continue
            follower.sink(record)

    def follow(
        self,
        sink: Sink,
        ask_id: str | None = None,
        *,
        replay: Callable[[list[Message]], Any] | None = None,
    ) -> Callable[[], None]:
        """Follow the records of ``ask_id`` (None: all); returns the function that stops it.

        ``replay`` (default: ``sink`` record by record) gets the transcript records kept so
        far, oldest first, then the busy records of the agents in a turn now (of any ask),
        before any live one reaches ``sink``.
        """
        follower = _Follower(sink, ask_id)
        with self._lock:
            history = [r for r in self._history if ask_id is None or ask_of(r) == ask_id]
            if not self.complete:
                history, follower.seen = self._with_recorded(history, ask_id)
            history += self._busy.values()
            self._followers = (*self._followers, follower)
            # Under the lock: a live record for this follower waits until the replay is done.
            if replay is not None:
                replay(history)
            else:
                for record in history:
                    sink(record)
        return lambda: self._unfollow(follower)

    def _with_recorded(self, history: list[Message], ask_id: str | None) -> tuple[list[Message], set[int]]:
        known = {id(r) for r in history}
        recorded: list[Message] = [*_copy(self.recorder.transcript), *_copy(self.recorder.errors)]
        more = [r for r in recorded if id(r) not in known and (ask_id is None or ask_of(r) == ask_id)]
        if not more:
            return history, set()
        merged = sorted([*history, *more], key=lambda r: r.created_at)  # stable: equal times keep order
        return merged, {id(r) for r in more}

    def _unfollow(self, follower: _Follower) -> None:
        with _FEEDS_LOCK, self._lock:
            self._followers = tuple(f for f in self._followers if f is not follower)
            if not self._followers:  # nobody follows: let go (a later follower starts a new feed)
                self._unsubscribe()

    def close(self) -> None:
        """Drop every follower and unsubscribe (the lab is closing)."""
        with _FEEDS_LOCK, self._lock:
            self._followers = ()
            self._unsubscribe()

    def _unsubscribe(self) -> None:
        # Under both locks.
        if _FEEDS.get(self.recorder) is self:
            del _FEEDS[self.recorder]
        if self in self.recorder.listeners:
            self.recorder.listeners.remove(self)

    @property
    def followers(self) -> int:
        return len(self._followers)

    def __repr__(self) -> str:
        return f"<LabFeed: {len(self._history)} records, {len(self._followers)} followers>"


_FEEDS: weakref.WeakKeyDictionary[Any, LabFeed] = weakref.WeakKeyDictionary()
_FEEDS_LOCK = threading.Lock()


def follow_lab(
    lab: Any,
    sink: Sink,
    ask_id: str | None = None,
    *,
    replay: Callable[[list[Message]], Any] | None = None,
) -> Callable[[], None]:
    """``LabFeed.follow`` on the feed of ``lab``'s recorder (made on first use)."""
    recorder = lab.recorder
    with _FEEDS_LOCK:  # held until followed: the last follower of a feed cannot close it meanwhile
        feed = _FEEDS.get(recorder)
        if feed is None:
            feed = _FEEDS[recorder] = LabFeed(recorder)
        return feed.follow(sink, ask_id, replay=replay)


def watch_lab(lab: Any) -> Callable[[], None]:
    """Keep ``lab``'s transcript history (notes included) from now on, even while no panel
    follows it; returns the function that stops it (``detach_panels(lab)`` stops it too).

    A panel opened later then replays everything, notes and the first moments of an ask
    included: ``%%ask`` opens a cell's transcript just after its message was sent. Call
    it when the lab starts, before anything is recorded.
    """
    return follow_lab(lab, _ignore)


def _ignore(record: Message) -> None:
    return None


def lab_feed(lab: Any) -> LabFeed | None:
    """The feed of ``lab``'s recorder, if anything follows it."""
    with _FEEDS_LOCK:
        return _FEEDS.get(lab.recorder)


def _copy(items: Iterable[T]) -> list[T]:
    # The recorder appends from another thread; retry if a copy races with an append.
    while True:
        try:
            return list(items)
        except RuntimeError:
            continue
