"""``aklab.core.messages``: every core message type under the module path the reference uses.

``Message`` and ``CancelMessage`` travel between actors; the orchestrator's records about
the team (``SentMessage``, ``EventMessage``, ...) are also in :mod:`aklab.core.messages.orchestrator`.
The types are defined once, in ``aklab.core._messages``; this package only names them.
"""

from aklab.core._messages import (
    CancelMessage,
    DispatchedMessage,
    ErrorMessage,
    EventMessage,
    HandledMessage,
    Message,
    OrchestratorMessage,
    SentMessage,
    StartMessage,
    StateChangedMessage,
    StopMessage,
)

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
]
