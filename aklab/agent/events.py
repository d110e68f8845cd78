"""Events the agent layer publishes (besides usage and tool calls)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field

__all__ = ["AgentBusyEvent", "AgentSnapshotEvent", "ContextUpdateEvent", "OperatorActionEvent", "RoutingSkippedEvent"]


class RoutingSkippedEvent(BaseModel):
    """An outbound message named a recipient that could not be reached."""

    agent: str
    recipient: str
    reason: str


class ContextUpdateEvent(BaseModel):
    """A context-update block was delivered to an agent's model."""

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


class AgentSnapshotEvent(BaseModel):
    """What a resume needs of an agent after a turn (recorded only when the team keeps an
    event store): its model history from position ``start`` on (the history is the previous
    snapshot's first ``start`` messages followed by ``messages``; 0 after a compaction or
    ``/clear``) and its state (the context-update baseline among it)."""

    aklab_log_limit: ClassVar[int] = 1  # the store keeps them all; memory only the last

    agent: str
    agent_id: str
    start: int = 0
    messages: list[dict[str, Any]] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict)
