"""TeamRecorder: the lab's subscriber. Keeps the transcript, usage, errors, and which asks
were not ok (a ``Notice`` reached the human, or the ask was stopped: ``lab.usage(by="ask")``'s
``ok``, as ``aklab.lab.frames`` defines it).

It is called by the team log, one record at a time, and only appends; readers copy what
they need. Listeners (console printer, widgets) are called with each record and must
not block.

A long session must not grow without bound (issue 11): usage is kept in full but packed
(:class:`UsageRows`, about 100 bytes a request, so ``lab.usage()`` totals the whole
session), and so are the ids of the asks that were not ok (one string each); the
transcript, errors and context updates keep their newest entries
(:class:`~aklab.core._recent.Recent`: positions such as ``len(recorder.errors)`` still
count from the start, and ``dropped`` says how many of the oldest are gone; the event
store keeps everything on disk).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeGuard

from aklab.agent import AgentBusyEvent, AgentMessage, ContextUpdateEvent, Notice
from aklab.core import ErrorMessage, EventMessage, EventSubscriber, Message, SentMessage
from aklab.core._asks import AskCancelledEvent
from aklab.core._recent import Recent
from aklab.lab._usage_rows import UsageRows
from aklab.llm import LlmUsageEvent
from aklab.tools import CommandsAnnouncedEvent

__all__ = ["TeamRecorder", "begins_ask"]

log = logging.getLogger("aklab.lab")

#: How many of the newest messages, errors and context updates are kept in memory.
TRANSCRIPT_LIMIT = 2_000
ERRORS_LIMIT = 1_000
#: As many as the team log keeps (``ContextUpdateEvent.aklab_log_limit``).
CONTEXT_UPDATES_LIMIT = ContextUpdateEvent.aklab_log_limit


def begins_ask(message: Any) -> TypeGuard[AgentMessage]:
    """Is ``message`` a person's message that began an ask (its id is the ask's)?"""
    return (
        isinstance(message, AgentMessage)
        and message.ask_id is not None
        and message.ask_id == message.id
        and message.sender is not None
        and message.sender.is_user_proxy
    )


class TeamRecorder(EventSubscriber):
    def __init__(self) -> None:
        self.transcript: Recent[SentMessage] = Recent(TRANSCRIPT_LIMIT, "message")
        self.usage = UsageRows()
        self.errors: Recent[ErrorMessage] = Recent(ERRORS_LIMIT, "error")
        self.context_updates: Recent[ContextUpdateEvent] = Recent(CONTEXT_UPDATES_LIMIT, "context update")
        self.failed_asks: set[str] = set()
        """The asks in which aklab sent the human a ``Notice``, or that were stopped or tripped."""
        self.listeners: list[Callable[[Message], Any]] = []
        self.busy: set[str] = set()
        self.busy_changed = threading.Condition()
        self.commands: dict[str, frozenset[str]] = {}
        """Each agent's ``/commands``, as it announced them when it started."""

    def on_message(self, message: Message) -> None:
        if isinstance(message, SentMessage):
            if isinstance(message.message, AgentMessage):
                self.transcript.append(message)
                sent = message.message
                if begins_ask(sent):  # a person's message begins an ask: lab.usage(by="ask") has it now
                    self.usage.begin(sent.id, message.created_at)
                if isinstance(message.message, Notice) and message.message.ask_id is not None:
                    self.failed_asks.add(message.message.ask_id)
        elif isinstance(message, EventMessage):
            event = message.event
            if isinstance(event, LlmUsageEvent):
                self.usage.append(event)
            elif isinstance(event, AskCancelledEvent):
                self.failed_asks.add(event.ask_id)
            elif isinstance(event, ContextUpdateEvent):
                self.context_updates.append(event)
            elif isinstance(event, CommandsAnnouncedEvent):
                self.commands[event.agent] = frozenset(c.name for c in event.commands)
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
