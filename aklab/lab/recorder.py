"""TeamRecorder: the lab's subscriber. Keeps the transcript, usage and errors.

It is called on the recording member's thread, one record at a time (the team log's
lock), and only appends to lists (atomic in CPython);
readers copy what they need. Listeners (console printer, widgets) are called with
each record and must not block.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from aklab.agent import AgentBusyEvent, AgentMessage, ContextUpdateEvent
from aklab.core import ErrorMessage, EventMessage, EventSubscriber, Message, SentMessage
from aklab.llm import LlmUsageEvent

__all__ = ["TeamRecorder"]

log = logging.getLogger("aklab.lab")

TRANSCRIPT_LIMIT = 50_000


class TeamRecorder(EventSubscriber):
    def __init__(self) -> None:
        self.transcript: deque[SentMessage] = deque(maxlen=TRANSCRIPT_LIMIT)
        self.usage: list[LlmUsageEvent] = []
        self.errors: list[ErrorMessage] = []
        self.context_updates: list[ContextUpdateEvent] = []
        self.listeners: list[Callable[[Message], Any]] = []
        self.busy: set[str] = set()
        self.busy_changed = threading.Condition()

    def on_message(self, message: Message) -> None:
        if isinstance(message, SentMessage):
            if isinstance(message.message, AgentMessage):
                self.transcript.append(message)
        elif isinstance(message, EventMessage):
            event = message.event
            if isinstance(event, LlmUsageEvent):
                self.usage.append(event)
            elif isinstance(event, ContextUpdateEvent):
                self.context_updates.append(event)
            elif isinstance(event, AgentBusyEvent):
                with self.busy_changed:
                    if event.busy:
                        self.busy.add(event.agent)
                    else:
                        self.busy.discard(event.agent)
                    self.busy_changed.notify_all()
        elif isinstance(message, ErrorMessage):
            self.errors.append(message)
        for listener in tuple(self.listeners):
            try:
                listener(message)
            except Exception:
                log.exception("lab listener failed")
