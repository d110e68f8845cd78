"""ToolCard: one capability, offered on up to four channels.

==============  =====================================================  ====================
channel         what the card contributes                              who consumes it
==============  =====================================================  ====================
TOOL_CALL       functions the model may call                           the ReactAgent
SYSTEM_PROMPT   fixed text for the (frozen) system prompt               the ReactAgent
LLM_CONTEXT     named state providers, diffed into context updates     the ContextUpdater
COMMAND         callables reachable as ``/name`` and in code           the CommandRegistry
==============  =====================================================  ====================

A card is configuration (a pydantic model, serializable); ``ToolFactory`` binds it to
its host agent once, at start, through the :class:`ToolHost` protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:
    from aklab.core import ActorAddress, AgentCard

__all__ = ["Channel", "ToolCard", "ToolHost", "in_order", "offered_when"]

F = TypeVar("F", bound=Callable[..., Any])


def offered_when(check: Callable[[], bool]) -> Callable[[F], F]:
    """Offer a card's tool to the model only on the steps where ``check()`` is true.

    A tool the agent cannot use right now (hire with no role to hire, read_mailbox with no
    mail waiting) costs its schema on every request and invites a useless call; the
    factory leaves it out of the request instead (pydantic-ai's per-step ``prepare``).
    """

    def mark(tool: F) -> F:
        tool.__aklab_offered_when__ = check  # type: ignore[attr-defined]
        return tool

    return mark


def in_order(tool: F) -> F:
    """Run a card's tool alone when the model calls several tools in one response
    (pydantic-ai's ``sequential``): a tool that changes shared state then acts in the order
    the model wrote the calls, not in whichever order their threads run ("create A; create
    B" gives A the first task id every time)."""
    tool.__aklab_in_order__ = True  # type: ignore[attr-defined]
    return tool


class Channel(StrEnum):
    TOOL_CALL = "tool_call"
    SYSTEM_PROMPT = "system_prompt"
    LLM_CONTEXT = "llm_context"
    COMMAND = "command"


class ToolHost(Protocol):
    """What a card may use of the agent hosting it."""

    @property
    def name(self) -> str: ...
    @property
    def role(self) -> str: ...
    def team_members(self) -> list[ActorAddress]: ...
    def hireable_cards(self) -> list[AgentCard]: ...
    def hire(self, role: str, name: str | None = None) -> ActorAddress: ...
    def fire(self, name: str, *, by_operator: bool = False) -> bool: ...


class ToolCard(BaseModel):
    """Base of every tool card. Override the channels the card serves."""

    name: str = ""
    description: str = ""

    def card_name(self) -> str:
        return self.name or type(self).__name__

    def calls_tools(self) -> bool:
        """Whether the card offers the model function tools (overrides ``get_tools``)."""
        return type(self).get_tools is not ToolCard.get_tools

    def get_tools(self, host: ToolHost) -> list[Callable[..., Any]]:
        """TOOL_CALL: plain functions (or pydantic-ai ``Tool``s) for the model."""
        return []

    def get_system_prompts(self, host: ToolHost) -> list[str]:
        """SYSTEM_PROMPT: text that never changes during the agent's life."""
        return []

    def get_context_states(self, host: ToolHost) -> dict[str, Callable[[], str]]:
        """LLM_CONTEXT: section title -> function rendering the current state."""
        return {}

    def get_commands(self, host: ToolHost) -> list[Callable[..., Any]]:
        """COMMAND: callables keyed by ``__name__`` in the agent's CommandRegistry."""
        return []
