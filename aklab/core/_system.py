"""ActorSystem: creates actors and hands out typed proxies to them."""

from __future__ import annotations

import logging
import uuid
from typing import Any, TypeVar, cast

import pykka

from aklab.core._address import ActorAddress
from aklab.core._akgent import Akgent, _TellCall
from aklab.core._config import BaseConfig
from aklab.core._directory import TeamDirectory
from aklab.core._log import TeamLog
from aklab.core._mailbox import Activity
from aklab.errors import ActorGoneError, ConfigError

__all__ = ["ActorSystem"]

log = logging.getLogger("aklab.core")

A = TypeVar("A", bound=Akgent[Any, Any])

DEFAULT_ASK_TIMEOUT = 60.0


class _AskProxy:
    """Calls run on the actor's thread; the caller blocks for the result."""

    def __init__(self, address: ActorAddress, timeout: float | None) -> None:
        self._address = address
        self._proxy = address.ref.proxy()
        self._timeout = timeout

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._proxy, name)
        timeout = self._timeout
        address = self._address

        if not callable(attr):
            return _get(attr, address, timeout)

        def call(*args: Any, **kwargs: Any) -> Any:
            return _get(attr(*args, **kwargs), address, timeout)

        return call


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
            self._system.activity.begin()
            try:
                self._address.tell(_TellCall(name, args, kwargs))
            except ActorGoneError:
                self._system.activity.end()
                raise

        return call


class ActorSystem:
    """Owns every actor it creates; ``shutdown()`` stops them all."""

    def __init__(self, *, ask_timeout: float | None = DEFAULT_ASK_TIMEOUT) -> None:
        self.activity = Activity()
        self.ask_timeout = ask_timeout
        self._actors: list[ActorAddress] = []

    def createActor(
        self,
        actor_class: type[A],
        config: BaseConfig | None = None,
        *,
        orchestrator: ActorAddress | None = None,
        team_id: str = "",
        directory: TeamDirectory | None = None,
        team_log: TeamLog | None = None,
    ) -> ActorAddress:
        """Start ``actor_class`` and return its address."""
        if not (isinstance(actor_class, type) and issubclass(actor_class, Akgent)):
            raise ConfigError(f"{actor_class!r} is not an Akgent subclass")
        agent_id = uuid.uuid4().hex
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
        self._actors.append(address)
        return address

    def proxy_ask(self, address: ActorAddress, actor_class: type[A] | None = None) -> A:
        """A proxy whose method calls block and return the actor's result."""
        return cast(A, _AskProxy(address, self.ask_timeout))

    def proxy_tell(self, address: ActorAddress, actor_class: type[A] | None = None) -> A:
        """A proxy whose method calls are queued and return ``None`` at once."""
        return cast(A, _TellProxy(self, address))

    def tell(self, address: ActorAddress, message: Any) -> None:
        """Deliver a message from outside any actor (no sender)."""
        self.activity.begin()
        try:
            address.tell(message)
        except ActorGoneError:
            self.activity.end()
            raise

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no message is queued or being handled. False on timeout."""
        return self.activity.wait_idle(timeout)

    def shutdown(self, timeout: float | None = 10.0) -> None:
        """Stop every actor this system created, newest first."""
        for address in reversed(self._actors):
            if address.is_alive():
                try:
                    address.ref.stop(block=True, timeout=timeout)
                except (pykka.ActorDeadError, pykka.Timeout):
                    log.debug("%s already stopped", address.name)
        self._actors.clear()

    def __enter__(self) -> ActorSystem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
