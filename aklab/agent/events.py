"""Events the agent layer publishes (besides usage and tool calls)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer
from pydantic_ai.messages import ModelMessage, ModelResponse

from aklab.llm import LlmUsageEvent

__all__ = [
    "AgentBusyEvent",
    "AgentSnapshotEvent",
    "ContextUpdateEvent",
    "ModelRequestEvent",
    "ModelResponseEvent",
    "OperatorActionEvent",
    "RoutingSkippedEvent",
    "UnansweredRequestsEvent",
    "UnreadableAnswersEvent",
]


class RoutingSkippedEvent(BaseModel):
    """An outbound message named a recipient that could not be reached."""

    agent: str
    recipient: str
    reason: str


class ContextUpdateEvent(BaseModel):
    """A context-update block was delivered to an agent's model."""

    #: The team log keeps the newest 500, as many as the lab's recorder does
    #: (``CONTEXT_UPDATES_LIMIT``); the event store keeps them all. About one in six
    #: model turns makes one, so the default cap per type (2,000) would still be filling
    #: after 12,000 turns (a long session's memory grew by ~2 KB a block until then: B9).
    aklab_log_limit: ClassVar[int] = 500

    agent: str
    number: int
    block: str


class OperatorActionEvent(BaseModel):
    """A human drove an agent with a ``/command``."""

    agent: str
    operator: str
    command: str
    result: str | None


class AgentBusyEvent(BaseModel):
    """An agent started (``busy=True``) or finished (``busy=False``) an LLM turn."""

    #: Live UI state: kept in memory for the panels, not written to the event store (a
    #: quarter of a team's records; neither resume nor history reads it).
    aklab_stored: ClassVar[bool] = False

    agent: str
    role: str
    busy: bool


def _as_is(value: Any) -> Any:
    return value


class AgentSnapshotEvent(BaseModel):
    """What a resume needs of an agent after a turn (recorded only when the team keeps an
    event store): its model history as a change to the previous snapshot's, and its state
    (the context-update baseline among it) when it changed.

    The history is ``refs`` read in order, each the position of a message of the previous
    snapshot's history, or -1 for the next of ``messages`` (the messages it did not have).
    Without ``refs``: the previous history's first ``start`` messages, then ``messages``.
    Only new messages are serialized: a turn adds a few, and a compaction that folds old
    turns into a digest replaces the first message and drops some, but keeps the rest.

    ``messages`` holds pydantic-ai's own message objects, so a store writes them straight
    to JSON, once: by their fields (twice as fast as through pydantic-ai's serializers, the
    same JSON as its ``ModelMessagesTypeAdapter`` writes, bytes as base64 included).
    Inside a handling the snapshot travels with the record of its end
    (``DispatchedMessage.snapshot``): one record, taken when the handling is over."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    aklab_log_limit: ClassVar[int] = 1  # the store keeps them all; memory only the last

    agent: str
    agent_id: str
    start: int = 0
    messages: Annotated[list[ModelMessage], PlainSerializer(_as_is, return_type=Any, when_used="json")] = Field(
        default_factory=list
    )
    refs: list[int] = Field(default_factory=list)
    state: dict[str, Any] | None = Field(default_factory=dict)
    """The agent's state (``AgentState.model_dump(mode="json")``); None: the same as in the
    previous snapshot (most turns change none of it, and a long role prompt is part of it)."""

    def history(self, previous: list[Any]) -> list[Any]:
        """The history this snapshot describes, given the previous one's (items of any kind)."""
        if not self.refs:
            return [*previous[: self.start], *self.messages]
        new = iter(self.messages)
        try:
            return [next(new) if ref < 0 else previous[ref] for ref in self.refs]
        except (StopIteration, IndexError):
            raise ValueError(
                f"snapshot of {self.agent} refers to messages it does not have "
                f"({len(self.refs)} refs, {len(self.messages)} messages, {len(previous)} before)"
            ) from None


class _ModelCallEvent(BaseModel):
    """A request to a model outside this process, or its answer, in a stored team's handling:
    ``message_id`` is the handled message, ``run_id`` the run (``LlmUsageEvent.run_id``)."""

    aklab_log_limit: ClassVar[int] = 1  # the store keeps them all; memory only the last
    aklab_commit_now: ClassVar[bool] = True  # durable before anything else happens

    agent: str
    agent_id: str
    message_id: str
    run_id: str


class ModelRequestEvent(_ModelCallEvent):
    """A request about to go to a model outside this process (a team with an event store),
    stored before it is sent. One that has no answer (``ModelResponseEvent``) in a handling
    the kernel never finished went out (or was about to) and never came back: it may have
    been paid for, and what it cost is unknown. A resume reports such requests once
    (``UnansweredRequestsEvent``) and counts each in usage as a failed request of unknown
    size (its cost unknown too, unless ``local``); the handling, done again, asks afresh."""

    model: str = ""
    """The model label its usage row would carry (``local:smollm2``); empty in older records."""
    local: bool = False
    """The model is a server on this machine: the request cost nothing."""


class UnansweredRequestsEvent(BaseModel):
    """Model requests (the ids of their ``ModelRequestEvent`` records) a resume found sent by
    handlings the kernel never finished, with no answer stored: reported by that resume, and
    left out by later ones."""

    record_ids: list[str]


class UnreadableAnswersEvent(BaseModel):
    """Stored model answers (the ids of their ``ModelResponseEvent`` records) a resume found in
    handlings the kernel never finished that no longer read back (written by another
    pydantic-ai version, say): reported by that resume, and left out by later ones (the same
    handling cut short again)."""

    record_ids: list[str]


class ModelResponseEvent(_ModelCallEvent):
    """A model's answer to one request, stored the moment it arrives (a team with an event
    store, a model outside this process): if the kernel dies before the handling that asked
    ends, the resume does that handling again with these answers instead of asking the model
    again (it was paid for once), and records ``usage`` if the run never got to."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    response: Annotated[ModelResponse, PlainSerializer(_as_is, return_type=Any, when_used="json")]
    usage: LlmUsageEvent
