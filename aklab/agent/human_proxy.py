"""HumanProxy: the human's seat in the team, and a sink code can wait on."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, SupportsIndex, overload

from aklab.agent.messages import AgentMessage
from aklab.core import ActorAddress, UserProxy

__all__ = ["INBOX_LIMIT", "HumanInbox", "HumanProxy", "Replies"]


#: How many of the newest messages the human's inbox keeps in memory.
INBOX_LIMIT = 1_000


class Replies(list[AgentMessage]):
    """The messages an inbox keeps, oldest first: a plain list, except that a slice with a
    non-negative start (``messages[start:]`` with ``start = len(inbox)`` taken before an
    ask) counts positions from the start of the session, as ``len(inbox)`` does, so it
    still finds the right messages after the oldest were dropped (``offset`` of them)."""

    offset: int = 0

    @overload
    def __getitem__(self, index: SupportsIndex) -> AgentMessage: ...
    @overload
    def __getitem__(self, index: slice) -> list[AgentMessage]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> AgentMessage | list[AgentMessage]:
        if isinstance(index, slice) and self.offset and index.start is not None and index.start >= 0:
            stop = index.stop if index.stop is None or index.stop < 0 else max(0, index.stop - self.offset)
            return list.__getitem__(self, slice(max(0, index.start - self.offset), stop, index.step))
        return list.__getitem__(self, index)


class HumanInbox:
    """Thread-safe record of what reached the human; ``wait_for`` blocks on a condition.

    Keeps the newest ``INBOX_LIMIT`` messages. ``len(inbox)`` counts every message that
    ever arrived (the position the next one will have); ``since(position)`` returns the
    kept messages from there on; ``dropped`` says how many of the oldest are gone.
    """

    def __init__(self, limit: int = INBOX_LIMIT) -> None:
        self._messages: deque[AgentMessage] = deque(maxlen=limit)
        self._total = 0
        self._cond = threading.Condition()

    def append(self, message: AgentMessage) -> None:
        with self._cond:
            self._messages.append(message)
            self._total += 1
            self._cond.notify_all()

    @property
    def messages(self) -> Replies:
        with self._cond:
            replies = Replies(self._messages)
            replies.offset = self._total - len(self._messages)
            return replies

    @property
    def dropped(self) -> int:
        with self._cond:
            return self._total - len(self._messages)

    def since(self, position: int) -> list[AgentMessage]:
        """The kept messages that arrived at ``position`` (a past ``len(inbox)``) or later."""
        with self._cond:
            first = self._total - len(self._messages)
            return list(self._messages)[max(0, position - first) :]

    def wait_for(
        self, predicate: Callable[[list[AgentMessage]], bool] | None = None, timeout: float | None = None
    ) -> bool:
        """Block until ``predicate(messages)`` holds (default: any message). False on timeout.

        ``predicate`` gets the kept messages (a list that may be copied per wake-up)."""
        check = predicate or bool
        with self._cond:
            return self._cond.wait_for(lambda: check(list(self._messages)), timeout=timeout)

    def __len__(self) -> int:
        return self._total


class HumanProxy(UserProxy):
    """Keeps every AgentMessage that reaches the human in ``inbox``."""

    def __init__(self, config: Any = None, **wiring: Any) -> None:
        super().__init__(config, **wiring)
        self.inbox = HumanInbox()

    def receiveMsg_AgentMessage(self, message: AgentMessage, sender: ActorAddress | None) -> None:
        self.inbox.append(message)

    def process_human_input(self, content: str, message: AgentMessage) -> None:
        """Answer ``message`` (something an agent asked the human) with a response."""
        if message.sender is None:
            raise ValueError("the message being answered has no sender to reply to")
        self.send(message.sender, AgentMessage(content=content, type="response"))
