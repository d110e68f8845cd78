"""Events the agent layer publishes (besides usage and tool calls)."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["AgentBusyEvent", "ContextUpdateEvent", "OperatorActionEvent", "RoutingSkippedEvent"]


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

    agent: str
    role: str
    busy: bool
