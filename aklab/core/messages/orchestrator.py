"""The orchestrator's records about the team (what it fans out to subscribers)."""

from aklab.core._messages import (
    DispatchedMessage,
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
    "DispatchedMessage",
    "ErrorMessage",
    "EventMessage",
    "HandledMessage",
    "OrchestratorMessage",
    "SentMessage",
    "StartMessage",
    "StateChangedMessage",
    "StopMessage",
]
