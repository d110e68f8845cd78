"""Akgent: a pykka actor that dispatches typed messages to ``receiveMsg_<Class>``.

A handler that raises does not kill the actor: the failure is reported to the
orchestrator as an :class:`ErrorMessage` (seen by every subscriber) and the actor goes
on with its next message.

Records for the orchestrator that a handler produces on the actor's own thread are sent
together, as one mailbox item, when the handler ends or before the actor blocks (a model
run, an ask to another actor): one wake-up of the orchestrator per step instead of one
per record, in the same order (bench B1 counted ten wake-ups per LLM turn before).
Records produced on other threads (a tool's worker, the run loop) go out at once.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import pykka

from aklab.core._address import ActorAddress
from aklab.core._config import BaseConfig, BaseState
from aklab.core._directory import TeamDirectory
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


class _RecordBatch:
    """Orchestrator records an actor produced during one step, delivered in order."""

    __slots__ = ("records",)

    def __init__(self, records: list[OrchestratorMessage]) -> None:
        self.records = records

    def __repr__(self) -> str:
        return f"<{len(self.records)} records>"


_pending = threading.local()


def flush_records() -> None:
    """Send the records the actor running on this thread has batched (no-op elsewhere)."""
    actor = getattr(_pending, "actor", None)
    if actor is not None:
        actor.flush_records()


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
        self.myAddress = ActorAddress(
            aklab_agent_id or uuid.uuid4().hex,
            config.name,
            config.role,
            team_id=aklab_team_id,
            is_user_proxy=type(self).is_user_proxy,
            ref=self.actor_ref,
        )
        self.current_message: Message | None = None
        self._batch: list[OrchestratorMessage] | None = None

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
        pending = sum(1 for m in self.mailbox.messages() if isinstance(m, Message | _TellCall | _RecordBatch))
        if pending and self._system is not None:
            self._system.activity.end(pending)

    def on_receive(self, message: Any) -> Any:
        self._batch = []
        _pending.actor = self
        try:
            if isinstance(message, _TellCall):
                getattr(self, message.name)(*message.args, **message.kwargs)
            elif isinstance(message, _RecordBatch):
                self._dispatch_each(message.records)
            elif isinstance(message, Message):
                self._dispatch(message)
            else:
                log.warning("%s ignored a non-message: %r", self.config.name, message)
        except Exception as exc:  # the actor survives its handlers
            self._report_error(exc, message if isinstance(message, Message) else None)
        finally:
            # Before the step's own activity ends, so the team never looks idle between.
            self.flush_records()
            self._batch = None
            _pending.actor = None
            if self._system is not None:
                self._system.activity.end()

    def _dispatch_each(self, records: list[OrchestratorMessage]) -> None:
        for record in records:
            try:
                self._dispatch(record)
            except Exception as exc:  # one bad record does not drop the rest
                self._report_error(exc, record)

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
        """Send a record to the orchestrator (no-op for actors outside a team).

        On the actor's own thread, during a step, the record joins the step's batch.
        """
        if record.sender is None:
            record.sender = self.myAddress
        target = self._orchestrator
        if target is None:
            return
        if target == self.myAddress:
            self._dispatch(record)
            return
        batch = self._batch
        if batch is not None and getattr(_pending, "actor", None) is self:
            batch.append(record)
            return
        self._deliver(target, record)

    def flush_records(self) -> None:
        """Send the step's batched records now (call before blocking on other work)."""
        batch = self._batch
        target = self._orchestrator
        if not batch or target is None or getattr(_pending, "actor", None) is not self:
            return
        self._batch = []
        self._deliver(target, batch[0] if len(batch) == 1 else _RecordBatch(batch))

    def _deliver(self, target: ActorAddress, item: Any) -> None:
        try:
            self._tell(target, item)
        except ActorGoneError:
            log.debug("orchestrator gone; dropped %r", item)

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
