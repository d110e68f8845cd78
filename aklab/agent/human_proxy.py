"""HumanProxy: the human's seat in the team, and a sink code can wait on."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from aklab.agent.messages import AgentMessage
from aklab.core import ActorAddress, UserProxy

__all__ = ["HumanInbox", "HumanProxy"]


class HumanInbox:
    """Thread-safe record of what reached the human; ``wait_for`` blocks on a condition."""

    def __init__(self) -> None:
        self._messages: list[AgentMessage] = []
        self._cond = threading.Condition()

    def append(self, message: AgentMessage) -> None:
        with self._cond:
            self._messages.append(message)
            self._cond.notify_all()

    @property
    def messages(self) -> list[AgentMessage]:
        with self._cond:
            return list(self._messages)

    def wait_for(
        self, predicate: Callable[[list[AgentMessage]], bool] | None = None, timeout: float | None = None
    ) -> bool:
        """Block until ``predicate(messages)`` holds (default: any message). False on timeout."""
        check = predicate or bool
        with self._cond:
            return self._cond.wait_for(lambda: check(self._messages), timeout=timeout)

    def __len__(self) -> int:
        return len(self._messages)


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
