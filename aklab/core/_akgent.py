"""Akgent: a pykka actor that dispatches typed messages to ``receiveMsg_<Class>``.

A handler that raises does not kill the actor: the failure is reported to the
orchestrator as an :class:`ErrorMessage` (seen by every subscriber) and the actor goes
on with its next message.

Records about the team (sent messages, events, errors) go straight into the team's
:class:`TeamLog` on the thread that makes them; see ``aklab.core._log``.

The edges of an actor's life, where pykka alone would be silent:

- **A start that fails** (``on_start`` raises) is reported as an ``ErrorMessage``; the
  member asks the orchestrator to take it off the roster (a ``StopMessage`` follows);
  every message still queued for it goes back to its sender's :meth:`Akgent.on_undelivered`
  (an ``ErrorMessage`` by default), and a message sent later raises ``ActorGoneError``.
  ``on_stop`` still runs, so what ``on_start`` built before failing is released: write
  ``on_stop`` for a partial start. ``ActorSystem.wait_started`` raises with the reason.
- **A cancel arriving** calls :meth:`Akgent.on_cancel_arrived` at once, on the sender's
  thread, whatever the actor is doing (see ``Mailbox.on_tagged``).
- **Threads**: actors run on daemon threads, so a script that forgets to shut its system
  down still exits; ``ActorSystem`` stops what is left at exit.
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
from aklab.core._log import TeamLog
from aklab.core._mailbox import Mailbox
from aklab.core._messages import (
    DispatchedMessage,
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

__all__ = ["ACTOR_THREADS", "Akgent"]

#: The thread each running actor handles its messages on (by actor URN), so that a call
#: that would wait on the very thread it runs on is refused instead of hanging.
ACTOR_THREADS: dict[str, int] = {}

log = logging.getLogger("aklab.core")

ConfigT = TypeVar("ConfigT", bound=BaseConfig)
StateT = TypeVar("StateT", bound=BaseState)


class _TellCall:
    """A fire-and-forget method call delivered through the mailbox (see ``proxy_tell``)."""

    __slots__ = ("args", "ask_id", "kwargs", "name")

    def __init__(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.name = name
        self.args = args
        self.kwargs = kwargs
        # a call that carries a message of an ask (a person's send) is work of that ask
        self.ask_id: str | None = next((a.ask_id for a in args if isinstance(a, Message) and a.ask_id), None)

    def __repr__(self) -> str:
        return f"<call {self.name}>"


class Akgent(pykka.ThreadingActor, Generic[ConfigT, StateT]):
    """Base actor of aklab. Subclasses add ``receiveMsg_<MessageClass>`` handlers."""

    _handler_cache: ClassVar[dict[type, Callable[..., Any] | None]]
    is_user_proxy: ClassVar[bool] = False
    use_daemon_thread: ClassVar[bool] = True  # never keep the interpreter alive

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
        self._recording = False  # inside _dispatch_recorded: records made now are within_handling
        self._outbox: list[tuple[ActorAddress, Message]] | None = None  # inside _dispatch_recorded: sends held
        self.mailbox.on_tagged = self.on_cancel_arrived

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
        ACTOR_THREADS.pop(self.actor_urn, None)
        # Whatever is still queued will never be handled here: stop counting it as work. A
        # member stopped while its team runs on (fired) hands each message back to its
        # sender and records it as consumed unread, so no ask waits on it; when the whole
        # team stops, queued mail stays unhandled in the store for a resume to deliver.
        fired = self._system is not None and not self._system.closing
        for message in self.mailbox.close():
            if fired and isinstance(message, Message):
                self._drop_unread(message)
            if isinstance(message, Message | _TellCall):
                self._ended(message)

    def _drop_unread(self, message: Message) -> None:
        self._notify(HandledMessage(message_id=message.id, ask_id=message.ask_id))
        self._bounce(message, f"{self.config.name} left the team before reading it")

    def on_cancel_arrived(self) -> None:
        """A message the mailbox classifier tags (a cancel) was just queued for this actor.

        Called at once on the *sender's* thread, while this actor may be inside a handler:
        it must be thread-safe and quick (set an event, cancel a task), and must never
        wait on an actor. An exception is logged and the message stays queued. Default:
        nothing; the cancel is handled in its turn.
        """

    def on_undelivered(self, message: Message, reason: str) -> None:
        """``message``, sent by this actor, was dropped unread: ``reason`` says why (its
        recipient failed to start, or left the team first). Called on this actor's thread. Default: report it as an
        ``ErrorMessage``; override to tell a model or a person."""
        self._notify(_undelivered_error(message, reason))

    # -- a start that fails ------------------------------------------------------------
    def _actor_loop_setup(self) -> None:
        # pykka's version logs a failing on_start and stops the actor without a word to
        # anyone: its roster entry and queued mail would be left behind.
        ACTOR_THREADS[self.actor_urn] = threading.get_ident()
        try:
            self.on_start()
        except Exception as exc:
            self._start_failed(exc)

    def _start_failed(self, exc: Exception) -> None:
        name = self.config.name
        summary = f"{type(exc).__name__}: {_first_line(exc)}"
        log.error("%s failed to start: %s", name, summary, exc_info=exc)
        if self._system is not None:
            self._system.record_start_failure(self.myAddress, summary)
        pykka.ActorRegistry.unregister(self.actor_ref)
        self.actor_stopped.set()
        self._notify(ErrorMessage(exception_type=type(exc).__name__, exception_value=str(exc)))
        orchestrator = self._orchestrator
        if orchestrator is not None and orchestrator != self.myAddress:
            try:
                self._tell(orchestrator, _TellCall("stop_member", (self.myAddress,), {}))
            except ActorGoneError:
                log.debug("orchestrator gone; %s stays listed", name)
        reason = f"{name} failed to start ({summary})"
        for message in self.mailbox.close():
            if isinstance(message, Message):
                self._bounce(message, reason)
            # Counted as work when it was queued; ended after the bounce began its own.
            if isinstance(message, Message | _TellCall):
                self._ended(message)
        try:
            self.on_stop()
        except Exception:
            log.exception("%s: on_stop after a failed start", name)

    def _bounce(self, message: Message, reason: str) -> None:
        """Hand a message this actor will never read back to its sender."""
        sender = message.sender
        if sender is not None and sender != self.myAddress:
            try:
                self._tell(sender, _TellCall("on_undelivered", (message, reason), {}))
                return
            except ActorGoneError:
                pass
        self._notify(_undelivered_error(message, reason))

    def on_receive(self, message: Any) -> Any:
        try:
            if isinstance(message, _TellCall):
                getattr(self, message.name)(*message.args, **message.kwargs)
            elif isinstance(message, Message):
                if self._withdrawn(message):
                    self._notify(HandledMessage(message_id=message.id, ask_id=message.ask_id))
                    return
                if self._system is not None and self._system.persist and not self.is_user_proxy:
                    self._dispatch_recorded(message)
                else:
                    self._dispatch(message)
            else:
                log.warning("%s ignored a non-message: %r", self.config.name, message)
        except (KeyboardInterrupt, GeneratorExit):
            raise
        except BaseException as exc:  # the actor survives its handlers, even a sys.exit() in a library
            self._report_error(exc, message if isinstance(message, Message) else None)
        finally:
            self._ended(message)

    def _dispatch_recorded(self, message: Message) -> None:
        """Dispatch, then record its end, so that a resume knows what was finished. The
        records made meanwhile are marked ``within_handling``: a store commits them with the
        end, in one transaction (a person's inbox records nothing: its messages are kept
        as sent, and a resume never delivers them again).

        What the member sends meanwhile is held, and delivered once the end is recorded
        (``SentMessage.during`` names the handling): no one has a message from a handling
        that a crash can make the team do again. A resume delivers a held message again only
        if that handling's end is stored (it may have died before delivering); otherwise
        the handling is done again, and sends afresh. It also keeps a recipient from
        starting its turn while the sender is still storing its end (measured: a stored
        relay 1-1.5 % faster, bench B10)."""
        self._recording = True
        self._outbox = []
        try:
            self._dispatch(message)
        finally:  # an error is an end too: a resume must not repeat a failure
            self._recording = False
            try:
                snapshot = self._handling_snapshot()
            except Exception:  # the end is recorded all the same
                log.exception("%s: snapshot at the end of a handling failed", self.config.name)
                snapshot = None
            try:
                self._notify(
                    DispatchedMessage(message_id=message.id, ask_id=message.ask_id, done=True, snapshot=snapshot)
                )
            finally:
                self._deliver_held()

    def _holding(self) -> str | None:
        """The id of the message whose handling holds what this member sends now (a team with
        an event store, inside ``_dispatch_recorded``), else None."""
        current = self.current_message
        return current.id if self._outbox is not None and current is not None else None

    def _deliver_held(self) -> None:
        held, self._outbox = self._outbox, None
        for recipient, message in held or ():
            try:
                self._tell(recipient, message)
            except ActorGoneError:  # fired or failed since it was sent
                try:
                    self.on_undelivered(message, f"{recipient.name} stopped before the message was delivered")
                except Exception:  # no one left to tell (a team closing): the rest are still delivered
                    log.warning(
                        "%s: %s to %s was not delivered", self.config.name, type(message).__name__, recipient.name
                    )

    def _handling_snapshot(self) -> Any:
        """What a resume needs of this member after the handling that just ended, recorded
        with its end (None: nothing changed). The agent layer fills it in."""
        return None

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

    def _ended(self, message: Any) -> None:
        """A message counted as work when it was queued is handled, dropped or withdrawn."""
        system = self._system
        if system is not None:
            system.activity.end()
            ask_id = getattr(message, "ask_id", None)
            if ask_id is not None:
                system.asks.done(ask_id)

    def _report_error(self, exc: BaseException, message: Message | None) -> None:
        kind = type(message).__name__ if message is not None else "a call"
        log.error("%s failed handling %s: %s", self.config.name, kind, exc, exc_info=exc)
        self._notify(
            ErrorMessage(
                exception_type=type(exc).__name__,
                exception_value=str(exc),
                current_message=message,
                ask_id=message.ask_id if message is not None else None,
            )
        )

    def _on_mailbox_removed(self, message: Any) -> None:
        if isinstance(message, Message):
            during = self.current_message.id if self.current_message is not None else None
            self._notify(HandledMessage(message_id=message.id, ask_id=message.ask_id, during=during))
        self._ended(message)

    def _withdrawn(self, message: Message) -> bool:
        """A message of a stopped ask is not handled (a person's inbox still gets everything)."""
        system = self._system
        return (
            system is not None
            and not self.is_user_proxy
            and message.ask_id is not None
            and system.asks.is_cancelled(message.ask_id)
        )

    # -- sending --------------------------------------------------------------------
    def send(self, recipient: ActorAddress, message: Message) -> None:
        """Deliver ``message`` to ``recipient`` and record it with the orchestrator.

        The message joins the ask of the message being handled (a person's message starts
        a new ask). In an ask that was stopped, nothing is sent except to a person. In a
        team with an event store, a message sent while handling one is delivered when that
        handling ends (see ``_dispatch_recorded``).
        """
        message.sender = self.myAddress
        message.recipient = recipient
        if message.ask_id is None:
            current = self.current_message
            if current is not None and current.ask_id is not None:
                message.ask_id = current.ask_id
            elif self.is_user_proxy:
                message.ask_id = message.id
                if self._system is not None:
                    self._system.asks.begin(message.id)
        system = self._system
        if (
            system is not None
            and message.ask_id is not None
            and not recipient.is_user_proxy
            and system.asks.is_cancelled(message.ask_id)
        ):
            log.debug("%s: not sent, its ask is over: %s", self.config.name, type(message).__name__)
            return
        held = self._outbox
        self._notify(SentMessage(message=message, recipient=recipient, ask_id=message.ask_id, during=self._holding()))
        if held is not None:  # delivered when the handling's end is recorded (_dispatch_recorded)
            held.append((recipient, message))
            return
        self._tell(recipient, message)

    def _tell(self, recipient: ActorAddress, message: Any) -> None:
        system = self._system
        if system is not None:
            system.activity.begin()
            ask_id = getattr(message, "ask_id", None)
            if ask_id is not None:
                system.asks.sent(ask_id)
        try:
            recipient.tell(message)
        except ActorGoneError:
            self._ended(message)
            raise

    def _notify(self, record: OrchestratorMessage) -> None:
        """Record into the team's log on this thread (no-op for actors outside a team)."""
        if record.sender is None:
            record.sender = self.myAddress
        if record.ask_id is None:
            current = self.current_message
            if current is not None:
                record.ask_id = current.ask_id
        if self._recording:
            record._within_handling = True
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _undelivered_error(message: Message, reason: str) -> ErrorMessage:
    to = f" to {message.recipient.name}" if message.recipient is not None else ""
    return ErrorMessage(
        exception_type=ActorGoneError.__name__,
        exception_value=f"{type(message).__name__}{to} was not delivered: {reason}",
        current_message=message,
    )
