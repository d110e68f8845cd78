"""ActorSystem: creates actors and hands out typed proxies to them.

Actors run on daemon threads (see ``Akgent``), so a script that never calls
``shutdown()`` still exits; at exit every system still running is shut down (bounded by
``EXIT_TIMEOUT``), so ``on_stop`` hooks get to release what they hold.
"""

from __future__ import annotations

import atexit
import inspect
import logging
import threading
import time
import uuid
import weakref
from typing import Any, TypeVar, cast

import pykka
from pykka.messages import ProxyCall, ProxyGetAttr

from aklab.core._address import ActorAddress
from aklab.core._akgent import ACTOR_THREADS, Akgent, _TellCall
from aklab.core._asks import AskLedger, TeamGuard
from aklab.core._config import BaseConfig
from aklab.core._directory import TeamDirectory
from aklab.core._log import TeamLog, delivering_here
from aklab.core._mailbox import Activity
from aklab.errors import ActorGoneError, ConfigError

__all__ = ["ActorSystem"]

log = logging.getLogger("aklab.core")

A = TypeVar("A", bound=Akgent[Any, Any])

DEFAULT_ASK_TIMEOUT = 60.0
#: Stopped actors and start failures kept before older ones are forgotten.
_PRUNE_AT = 256
#: How long the systems still running at interpreter exit get to stop, in all.
EXIT_TIMEOUT = 5.0

_running: weakref.WeakSet[ActorSystem] = weakref.WeakSet()


@atexit.register
def shutdown_all(timeout: float = EXIT_TIMEOUT) -> None:
    """Stop every actor system still running (in ``timeout`` seconds in all); at exit, and
    by whoever must act only once the teams have stopped (an event store letting go of its
    teams' claims after their last records)."""
    deadline = time.monotonic() + timeout
    for system in list(_running):
        system.shutdown(timeout=max(0.0, deadline - time.monotonic()))


class _AskProxy:
    """Calls run on the actor's thread; the caller blocks for the result.

    Without a pykka proxy where it can (building one looks at every attribute of the
    actor, which costs more than most uses of an ask proxy: one call or one value): a
    method of the actor's class is called with one message, an instance attribute or a
    property is read with one message. What pykka would treat otherwise (a callable
    instance attribute, a traversable attribute, other class attributes) goes through the
    actor's pykka proxy, built once per address, as before.
    """

    def __init__(self, address: ActorAddress, timeout: float | None) -> None:
        ref = address.ref
        if not ref.is_alive():
            raise pykka.ActorDeadError(f"{ref} not found")
        self._address = address
        self._ref = ref
        self._timeout = timeout

    def __getattr__(self, name: str) -> Any:
        _refuse_self_ask(self._address)
        timeout = self._timeout
        address = self._address
        ref = self._ref
        static = _MISSING if name.startswith("_") else inspect.getattr_static(ref.actor_class, name, _MISSING)
        if inspect.isfunction(static):

            def method(*args: Any, **kwargs: Any) -> Any:
                return _get(ref.ask(ProxyCall((name,), args, kwargs), block=False), address, timeout)

            return method
        if (static is _MISSING and not name.startswith("_")) or isinstance(static, property):
            value = _get(ref.ask(ProxyGetAttr((name,)), block=False), address, timeout)
            if not _pykka_would_wrap(value, static):
                return value
        attr = getattr(address.pykka_proxy(), name)

        if not callable(attr):
            return _get(attr, address, timeout)

        def call(*args: Any, **kwargs: Any) -> Any:
            return _get(attr(*args, **kwargs), address, timeout)

        return call


_MISSING = object()


def _pykka_would_wrap(value: Any, static: Any) -> bool:
    """Whether a pykka proxy gives something else than ``value`` for this attribute: a call
    on the actor's thread (a callable instance attribute) or a nested proxy (traversable)."""
    if getattr(value, "pykka_traversable", False) is True or getattr(value, "_pykka_traversable", False) is True:
        return True
    return static is _MISSING and callable(value)


def _refuse_self_ask(address: ActorAddress) -> None:
    """An actor waiting for its own answer on its own thread would wait for ever."""
    if ACTOR_THREADS.get(address.ref.actor_urn) == threading.get_ident():
        raise ConfigError(
            f"{address.name} was asked to answer on its own thread and would wait for ever "
            "(e.g. an EventSubscriber calling the orchestrator from on_message): "
            "use proxy_tell, or hand the call to another thread"
        )


def _get(future: Any, address: ActorAddress, timeout: float | None) -> Any:
    try:
        return future.get(timeout=timeout)
    except pykka.ActorDeadError as exc:
        raise ActorGoneError(f"{address.name} ({address.role}) is not running") from exc


class _TellProxy:
    """Calls are queued in the actor's mailbox and return at once (result discarded).

    Errors surface as an ``ErrorMessage`` to the orchestrator, like any handler error.
    """

    def __init__(self, system: ActorSystem, address: ActorAddress) -> None:
        self._system = system
        self._address = address

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> None:
            system = self._system
            tell = _TellCall(name, args, kwargs)
            system.activity.begin()
            if tell.ask_id is not None:
                system.asks.sent(tell.ask_id)
            try:
                self._address.tell(tell)
            except ActorGoneError:
                system.activity.end()
                if tell.ask_id is not None:
                    system.asks.done(tell.ask_id)
                raise

        return call


class ActorSystem:
    """Owns every actor it creates; ``shutdown()`` stops them all."""

    def __init__(self, *, ask_timeout: float | None = DEFAULT_ASK_TIMEOUT, guard: TeamGuard | None = None) -> None:
        self.activity = Activity()
        self.asks = AskLedger(guard)
        #: Record what a resume needs (a record per message taken for handling, agents'
        #: history deltas); set by a lab that keeps an event store.
        self.persist = False
        self.ask_timeout = ask_timeout
        #: True once ``shutdown`` began: an actor stopping then leaves its queued mail unread
        #: for a resume to deliver, where a member fired before then hands it back.
        self.closing = False
        self._actors: list[ActorAddress] = []
        self._start_failures: dict[str, str] = {}

    def createActor(
        self,
        actor_class: type[A],
        config: BaseConfig | None = None,
        *,
        orchestrator: ActorAddress | None = None,
        team_id: str = "",
        directory: TeamDirectory | None = None,
        team_log: TeamLog | None = None,
        agent_id: str | None = None,
    ) -> ActorAddress:
        """Start ``actor_class`` and return its address (``agent_id``: keep a stored identity, on resume)."""
        if not (isinstance(actor_class, type) and issubclass(actor_class, Akgent)):
            raise ConfigError(f"{actor_class!r} is not an Akgent subclass")
        agent_id = agent_id or uuid.uuid4().hex
        ref = actor_class.start(
            config,
            aklab_system=self,
            aklab_orchestrator=orchestrator,
            aklab_team_id=team_id,
            aklab_agent_id=agent_id,
            aklab_directory=directory,
            aklab_log=team_log,
        )
        # Built here rather than asked of the actor: its on_start may itself be waiting
        # on whoever is creating it (e.g. the orchestrator), and asking would deadlock.
        name = config.name if config is not None else f"@{actor_class.__name__}"
        role = config.role if config is not None else actor_class.__name__
        address = ActorAddress(
            agent_id,
            name,
            role,
            team_id=team_id,
            is_user_proxy=actor_class.is_user_proxy,
            ref=ref,
        )
        if len(self._actors) >= 2 * _PRUNE_AT:  # a hire/fire loop must not grow this for ever
            self._actors = [a for a in self._actors if a.is_alive()]
        self._actors.append(address)
        _running.add(self)
        return address

    def record_start_failure(self, address: ActorAddress, reason: str) -> None:
        """Called by an actor whose ``on_start`` raised (``wait_started`` reports ``reason``)."""
        self._start_failures[address.agent_id] = reason
        while len(self._start_failures) > _PRUNE_AT:  # oldest first
            del self._start_failures[next(iter(self._start_failures))]

    def wait_started(self, *addresses: ActorAddress, timeout: float | None = None) -> None:
        """Block until each actor has run its ``on_start``.

        Raises ``ActorGoneError`` naming the first that failed to start, and why. Starts run
        in parallel; ``timeout`` (default ``ask_timeout``) bounds the wait for each.
        """
        timeout = self.ask_timeout if timeout is None else timeout
        probes: list[tuple[ActorAddress, Any]] = []
        for address in addresses:
            try:
                # Answered once on_start is done: an actor reads no mail before that.
                probes.append((address, address.ref.ask(ProxyCall(("get_config",), (), {}), block=False)))
            except pykka.ActorDeadError:
                probes.append((address, None))
        for address, probe in probes:
            try:
                if probe is None:
                    raise pykka.ActorDeadError(address.name)
                probe.get(timeout=timeout)
            except pykka.ActorDeadError:
                reason = self._start_failures.get(address.agent_id)
                if reason is None:
                    raise ActorGoneError(f"{address.name} ({address.role}) is not running") from None
                raise ActorGoneError(f"{address.name} failed to start: {reason}") from None
            except pykka.Timeout:
                raise ActorGoneError(f"{address.name} did not start within {timeout:g}s") from None

    def proxy_ask(self, address: ActorAddress, actor_class: type[A] | None = None) -> A:
        """A proxy whose method calls block and return the actor's result."""
        return cast(A, _AskProxy(address, self.ask_timeout))

    @staticmethod
    def may_wait_on(address: ActorAddress) -> bool:
        """Whether the calling code may block until ``address`` answers: not on that actor's
        own thread (it would wait for ever), and not inside the team log's delivery of a
        record to a subscriber, whatever the thread (the actor's own records would wait for
        that delivery to end: an ``EventSubscriber`` or lab listener must not wait on actors)."""
        return ACTOR_THREADS.get(address.ref.actor_urn) != threading.get_ident() and not delivering_here()

    def proxy_tell(self, address: ActorAddress, actor_class: type[A] | None = None) -> A:
        """A proxy whose method calls are queued and return ``None`` at once."""
        return cast(A, _TellProxy(self, address))

    def tell(self, address: ActorAddress, message: Any) -> None:
        """Deliver a message from outside any actor (no sender)."""
        self.activity.begin()
        ask_id = getattr(message, "ask_id", None)
        if ask_id is not None:
            self.asks.sent(ask_id)
        try:
            address.tell(message)
        except ActorGoneError:
            self.activity.end()
            if ask_id is not None:
                self.asks.done(ask_id)
            raise

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no message is queued or being handled. False on timeout."""
        return self.activity.wait_idle(timeout)

    def shutdown(self, timeout: float | None = 10.0) -> None:
        """Stop every actor this system created, newest first (each after its current message).

        ``timeout`` bounds the whole shutdown; an actor still busy then is told to stop and
        left to finish on its (daemon) thread.
        """
        self.closing = True
        deadline = None if timeout is None else time.monotonic() + timeout
        actors, self._actors = self._actors, []
        for address in reversed(actors):
            if not address.is_alive():
                continue
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                address.ref.stop(block=True, timeout=remaining)
            except pykka.ActorDeadError:
                log.debug("%s already stopped", address.name)
            except pykka.Timeout:
                log.warning("%s did not stop in time; it stops after its current message", address.name)
        _running.discard(self)

    def __enter__(self) -> ActorSystem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
