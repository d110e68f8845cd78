"""Core message types.

Everything that travels between actors is a :class:`Message`. The orchestrator's own
traffic (what it fans out to subscribers) is a second family, :class:`OrchestratorMessage`:
a record *about* the team (a message was sent, an event happened, a handler failed).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SerializeAsAny

from aklab.core._address import ActorAddress

__all__ = [
    "CancelMessage",
    "DispatchedMessage",
    "ErrorMessage",
    "EventMessage",
    "HandledMessage",
    "Message",
    "OrchestratorMessage",
    "SentMessage",
    "StartMessage",
    "StateChangedMessage",
    "StopMessage",
    "UnsentMessagesEvent",
    "class_flag",
]

_FLAGS: dict[tuple[type, str], bool] = {}


def class_flag(klass: type, name: str, default: bool) -> bool:
    """A record or event class's ``aklab_*`` flag (``aklab_transient``, ``aklab_kept``,
    ``aklab_stored``), cached per class: on a pydantic model class, getattr of a missing
    attribute formats an AttributeError (about 0.7 us), and these are asked of every record."""
    key = (klass, name)
    flag = _FLAGS.get(key)
    if flag is None:
        flag = _FLAGS[key] = bool(getattr(klass, name, default))
    return flag


def _new_id() -> str:
    return uuid.uuid4().hex


def _now() -> datetime:
    return datetime.now(UTC)


class Message(BaseModel):
    """Base of every actor-to-actor message. ``sender`` is stamped by ``Akgent.send``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    id: str = Field(default_factory=_new_id)
    sender: ActorAddress | None = None
    recipient: ActorAddress | None = None
    created_at: datetime = Field(default_factory=_now)
    ask_id: str | None = None
    """The human message this one descends from (see ``aklab.core._asks``); stamped by ``Akgent.send``."""


class CancelMessage(Message):
    """Programmatic request to cancel the recipient's current run; ``reason`` is shown to the human."""

    reason: str | None = None


# -- orchestrator records ------------------------------------------------------------
class OrchestratorMessage(Message):
    """A record about the team, fanned out by the orchestrator to its subscribers."""

    _within_handling: bool = PrivateAttr(default=False)
    """Made by an actor while it handled a message whose end it records (a
    ``DispatchedMessage(done=True)`` follows): an event store may commit it with that end."""

    @property
    def within_handling(self) -> bool:
        # Read from pydantic's own dict of private values: ``self._within_handling`` goes
        # through BaseModel.__getattr__, 30x slower, and a store asks this of every record.
        private = self.__pydantic_private__
        return bool(private and private.get("_within_handling"))


class SentMessage(OrchestratorMessage):
    """``sender`` sent ``message`` to ``recipient``."""

    message: SerializeAsAny[Message]
    during: str | None = None
    """Sent while its sender handled the message with this id, in a team that records the
    ends of handlings (an event store): then delivered only once that end was recorded."""


class UnsentMessagesEvent(BaseModel):
    """Messages stored as sent (``SentMessage.during``) by a handling that never finished:
    never delivered. A resume records their ids once, as it does that handling again (which
    sends afresh), so that later resumes and ``aklab.history()`` leave them out."""

    message_ids: list[str]


class EventMessage(OrchestratorMessage):
    """An actor emitted ``event`` (usage, tool call, commands announced, ...)."""

    event: Any


class ErrorMessage(OrchestratorMessage):
    """A handler raised; the actor survived and goes on with its next message."""

    exception_type: str
    exception_value: str
    current_message: SerializeAsAny[Message] | None = None


class HandledMessage(OrchestratorMessage):
    """A queued message was consumed without being dispatched (absorbed or purged)."""

    #: Bookkeeping for the event store (what a resume must not deliver again): handed to
    #: the team log's subscribers, not kept in its memory.
    aklab_kept: ClassVar[bool] = False

    message_id: str
    during: str | None = None
    """The id of the message its consumer was handling (its run read this one), or None
    (withdrawn unread before it was handled)."""


class DispatchedMessage(OrchestratorMessage):
    """A message's handler returned (``done=True``; ``done=False``, taken for handling, is
    only found in stores written by earlier versions). Recorded only when the team keeps an
    event store: a resume re-delivers every message whose handling never finished, so each
    is handled to the end once."""

    #: Bookkeeping for the event store (and its snapshot is the store's): handed to the
    #: team log's subscribers, not kept in its memory.
    aklab_kept: ClassVar[bool] = False

    message_id: str
    done: bool = False
    snapshot: Any = None
    """What the member keeps for a resume, as it was at the end (the agent layer's
    ``AgentSnapshotEvent``; None when nothing changed): one record, not two."""


class StartMessage(OrchestratorMessage):
    """An actor joined the team."""

    config: Any = None
    during: str | None = None
    """Hired by a member of a team with an event store while it handled the message with
    this id. A resume leaves it out if that handling never finished and nothing was
    delivered to it: done again, the handling hires again."""


class StopMessage(OrchestratorMessage):
    """An actor left the team."""


class StateChangedMessage(OrchestratorMessage):
    """An actor's state changed (serialized snapshot)."""

    state: dict[str, Any]
