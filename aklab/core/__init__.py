"""aklab.core: the actor runtime on pykka (no LLM, no Jupyter)."""

from aklab.core._address import ActorAddress
from aklab.core._akgent import Akgent
from aklab.core._asks import AskLedger, TeamGuard
from aklab.core._card import AgentCard
from aklab.core._config import BaseConfig, BaseState
from aklab.core._directory import TeamDirectory
from aklab.core._log import TeamLog
from aklab.core._mailbox import Activity, Mailbox
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
    UnsentMessagesEvent,
    class_flag,
)
from aklab.core._orchestrator import Orchestrator
from aklab.core._subscriber import EventSubscriber
from aklab.core._system import ActorSystem, shutdown_all
from aklab.core._user_proxy import UserProxy

__all__ = [
    "Activity",
    "ActorAddress",
    "ActorSystem",
    "AgentCard",
    "Akgent",
    "AskLedger",
    "BaseConfig",
    "BaseState",
    "CancelMessage",
    "DispatchedMessage",
    "ErrorMessage",
    "EventMessage",
    "EventSubscriber",
    "HandledMessage",
    "Mailbox",
    "Message",
    "Orchestrator",
    "OrchestratorMessage",
    "SentMessage",
    "StartMessage",
    "StateChangedMessage",
    "StopMessage",
    "TeamDirectory",
    "TeamGuard",
    "TeamLog",
    "UnsentMessagesEvent",
    "UserProxy",
    "class_flag",
    "shutdown_all",
]
