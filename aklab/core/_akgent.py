"""Akgent: a pykka actor that dispatches typed messages to ``receiveMsg_<Class>``.

A handler that raises does not kill the actor: the failure is reported to the
orchestrator as an :class:`ErrorMessage` (seen by every subscriber) and the actor goes
on with its next message.

Records about the team (sent messages, events, errors) go straight into the team's
:class:`TeamLog` on the thread that makes them; see ``aklab.core._log``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import pykka

from aklab.core._address import ActorAddress
from aklab.core._config import BaseConfig, BaseState
from aklab.core._directory import TeamDirectory
from aklab.core._log import TeamLog
from aklab.core._mailbox import Mailbox
from aklab.core._messages import (
    ErrorMessage,
    EventMessage,
    HandledMessage,
    Message,
    OrchestratorMessage,
    SentMessage,
    StateChangedMessage,
)
from aklab.errors import ActorGoneError

if TYPE_CHECKING:
    from aklab.core._system import ActorSystem

__all__ = ["Akgent"]

log = logging.getLogger("aklab.core")

ConfigT = TypeVar("ConfigT", bound=BaseConfig)
StateT = TypeVar("StateT", bound=BaseState)


class _TellCall:
    """A fire-and-forget method call delivered through the mailbox (see ``proxy_tell``)."""

    __slots__ = ("args", "kwargs", "name")

    def __init__(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.name = name
        self.args = args
        self.kwargs = kwargs

    def __repr__(self) -> str:
        return f"<call {self.name}>"


class Akgent(pykka.ThreadingActor, Generic[ConfigT, StateT]):
    """Base actor of aklab. Subclasses add ``receiveMsg_<MessageClass>`` handlers."""

    _handler_cache: ClassVar[dict[type, Callable[..., Any] | None]]
    is_user_proxy: ClassVar[bool] = False

    def __init__(
        self,
        config: ConfigT | None = None,
        *,
        aklab_system: ActorSystem | None = None,
        aklab_orchestrator: ActorAddress | None = None,
        aklab_team_id: str = "",
        aklab_agent_id: str | None = None,
        aklab_directory: TeamDirectory | None = None,
        aklab_log: TeamLog | None = None,
    ) -> None:
        super().__init__()
        if config is None:
            config = BaseConfig(name=f"@{type(self).__name__}", role=type(self).__name__)  # type: ignore[assignment]
        assert config is not None
        self.config: ConfigT = config
        self.state: StateT = BaseState()  # type: ignore[assignment]
        self._system = aklab_system
        self._orchestrator = aklab_orchestrator
        self.directory = aklab_directory
        self._log = aklab_log
        self.myAddress = ActorAddress(
            aklab_agent_id or uuid.uuid4().hex,
            config.name,
            config.role,
            team_id=aklab_team_id,
            is_user_proxy=type(self).is_user_proxy,
            ref=self.actor_ref,
        )
        self.current_message: Message | None = None

    # -- pykka wiring ---------------------------------------------------------------
    @staticmethod
    def _create_actor_inbox() -> Mailbox:  # type: ignore[override]
        return Mailbox()

    @property
    def mailbox(self) -> Mailbox:
        inbox = self.actor_inbox
        assert isinstance(inbox, Mailbox)
        return inbox

    @property
    def orchestrator(self) -> ActorAddress | None:
        return self._orchestrator

    def on_start(self) -> None:
        self.mailbox.on_remove = self._on_mailbox_removed

    def on_stop(self) -> None:
        # Whatever is still queued will never be handled: stop counting it as work.
        pending = sum(1 for m in self.mailbox.messages() if isinstance(m, Message | _TellCall))
        if pending and self._system is not None:
            self._system.activity.end(pending)

    def on_receive(self, message: Any) -> Any:
        try:
            if isinstance(message, _TellCall):
                getattr(self, message.name)(*message.args, **message.kwargs)
            elif isinstance(message, Message):
                self._dispatch(message)
            else:
                log.warning("%s ignored a non-message: %r", self.config.name, message)
        except Exception as exc:  # the actor survives its handlers
            self._report_error(exc, message if isinstance(message, Message) else None)
        finally:
            if self._system is not None:
                self._system.activity.end()

    def _dispatch(self, message: Message) -> None:
        handler = self._find_handler(type(message))
        if handler is None:
            log.warning("%s has no handler for %s", self.config.name, type(message).__name__)
            return
        previous, self.current_message = self.current_message, message
        try:
            handler(self, message, message.sender)
        finally:
            self.current_message = previous

    @classmethod
    def _find_handler(cls, msg_type: type) -> Callable[..., Any] | None:
        cache = cls.__dict__.get("_handler_cache")
        if cache is None:
            cache = {}
            cls._handler_cache = cache
        if msg_type not in cache:
            found = None
            for klass in msg_type.__mro__:
                found = getattr(cls, f"receiveMsg_{klass.__name__}", None)
                if found is not None:
                    break
            cache[msg_type] = found
        handler: Callable[..., Any] | None = cache[msg_type]
        return handler

    def _report_error(self, exc: Exception, message: Message | None) -> None:
        kind = type(message).__name__ if message is not None else "a call"
        log.error("%s failed handling %s: %s", self.config.name, kind, exc, exc_info=exc)
        self._notify(
            ErrorMessage(
                exception_type=type(exc).__name__,
                exception_value=str(exc),
                current_message=message,
            )
        )

    def _on_mailbox_removed(self, message: Any) -> None:
        if isinstance(message, Message):
            self._notify(HandledMessage(message_id=message.id))
        if self._system is not None:
            self._system.activity.end()

    # -- sending --------------------------------------------------------------------
    def send(self, recipient: ActorAddress, message: Message) -> None:
        """Deliver ``message`` to ``recipient`` and record it with the orchestrator."""
        message.sender = self.myAddress
        message.recipient = recipient
        self._notify(SentMessage(message=message, recipient=recipient))
        self._tell(recipient, message)

    def _tell(self, recipient: ActorAddress, message: Any) -> None:
        system = self._system
        if system is not None:
            system.activity.begin()
        try:
            recipient.tell(message)
        except ActorGoneError:
            if system is not None:
                system.activity.end()
            raise

    def _notify(self, record: OrchestratorMessage) -> None:
        """Record into the team's log on this thread (no-op for actors outside a team)."""
        if record.sender is None:
            record.sender = self.myAddress
        if self._log is not None:
            self._log.record(record)
            return
        target = self._orchestrator
        if target is None:
            return
        if target == self.myAddress:
            self._dispatch(record)
            return
        try:
            self._tell(target, record)
        except ActorGoneError:
            log.debug("orchestrator gone; dropped %s", type(record).__name__)

    def notify_event(self, event: Any) -> None:
        """Publish ``event`` to the orchestrator's subscribers."""
        self._notify(EventMessage(event=event))

    def notify_state_change(self) -> None:
        if self.state.notify_if_changed():
            self._notify(StateChangedMessage(state=self.state.model_dump(mode="json")))

    def init_state(self, state: StateT) -> None:
        self.state = state

    # -- introspection ----------------------------------------------------------------
    def get_config(self) -> ConfigT:
        return self.config

    def get_state(self) -> StateT:
        return self.state

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.config.name})"
