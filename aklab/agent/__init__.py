"""aklab.agent: collaborative LLM agents that route typed messages to each other."""

from aklab.agent.agent import BaseAgent
from aklab.agent.capabilities import MailboxRenderError, RunInterruptedError
from aklab.agent.config import AgentConfig, AgentState
from aklab.agent.events import (
    AgentBusyEvent,
    AgentSnapshotEvent,
    ContextUpdateEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    OperatorActionEvent,
    RoutingSkippedEvent,
    UnansweredRequestsEvent,
    UnreadableAnswersEvent,
)
from aklab.agent.human_proxy import HumanInbox, HumanProxy
from aklab.agent.messages import AgentMessage, LlmRenderable, MailboxPreviewable, Notice
from aklab.agent.output_models import REPLY_PROTOCOLS, Request, StructuredOutput
from aklab.agent.utils import resolve_recipient

__all__ = [
    "REPLY_PROTOCOLS",
    "AgentBusyEvent",
    "AgentConfig",
    "AgentMessage",
    "AgentSnapshotEvent",
    "AgentState",
    "BaseAgent",
    "ContextUpdateEvent",
    "HumanInbox",
    "HumanProxy",
    "LlmRenderable",
    "MailboxPreviewable",
    "MailboxRenderError",
    "ModelRequestEvent",
    "ModelResponseEvent",
    "Notice",
    "OperatorActionEvent",
    "Request",
    "RoutingSkippedEvent",
    "RunInterruptedError",
    "StructuredOutput",
    "UnansweredRequestsEvent",
    "UnreadableAnswersEvent",
    "resolve_recipient",
]
