"""The orchestrator's records about the team (what it fans out to subscribers)."""

from aklab.core._messages import (
    ErrorMessage,
    EventMessage,
    HandledMessage,
    OrchestratorMessage,
    SentMessage,
    StartMessage,
    StateChangedMessage,
    StopMessage,
)

__all__ = [
    "ErrorMessage",
    "EventMessage",
    "HandledMessage",
    "OrchestratorMessage",
    "SentMessage",
    "StartMessage",
    "StateChangedMessage",
    "StopMessage",
]
