"""A handler that raises anything (even SystemExit from a library) is reported, and the actor lives on."""

from __future__ import annotations

import sys
from typing import Any

from aklab.core import ActorSystem, Akgent, BaseConfig, Message


class Crashy(Akgent[BaseConfig, Any]):
    def __init__(self, config: BaseConfig | None = None, **wiring: Any) -> None:
        super().__init__(config or BaseConfig(name="@Crashy", role="Crashy"), **wiring)
        self.seen: list[str] = []

    def receiveMsg_Message(self, message: Message, sender: Any) -> None:
        self.seen.append(message.id)
        if len(self.seen) == 1:
            sys.exit(3)
        if len(self.seen) == 2:
            raise MemoryError("a library ran out")

    def count(self) -> int:
        return len(self.seen)


def test_sys_exit_in_a_handler_does_not_end_the_actor(system: ActorSystem) -> None:
    rounds = 3
    address = system.createActor(Crashy)
    for _ in range(rounds):
        system.tell(address, Message())
    assert system.wait_idle(10)
    assert address.is_alive()
    assert system.proxy_ask(address, Crashy).count() == rounds


class SelfAsker(Akgent[BaseConfig, Any]):
    """Asks itself from its own handler: what an EventSubscriber does when it calls the
    orchestrator about a record the orchestrator made on its own thread."""

    def __init__(self, config: BaseConfig | None = None, **wiring: Any) -> None:
        super().__init__(config or BaseConfig(name="@SelfAsker", role="SelfAsker"), **wiring)
        self.errors: list[str] = []

    def receiveMsg_Message(self, message: Message, sender: Any) -> None:
        from aklab.errors import ConfigError

        assert self._system is not None
        try:
            self._system.proxy_ask(self.myAddress, SelfAsker).get_errors()
        except ConfigError as exc:
            self.errors.append(str(exc))

    def get_errors(self) -> list[str]:
        return list(self.errors)


def test_a_call_that_would_wait_on_its_own_actors_thread_is_refused_at_once(system: ActorSystem) -> None:
    address = system.createActor(SelfAsker)
    system.tell(address, Message())
    assert system.wait_idle(10)  # no 60 s hang
    [error] = system.proxy_ask(address, SelfAsker).get_errors()
    assert "@SelfAsker was asked to answer on its own thread and would wait for ever" in error
    system.tell(address, Message())  # and it goes on working
    assert system.wait_idle(10)
    assert len(system.proxy_ask(address, SelfAsker).get_errors()) == 2


def test_a_hire_and_fire_loop_does_not_grow_the_systems_books(system: ActorSystem) -> None:
    for _ in range(600):
        address = system.createActor(Crashy)
        address.ref.stop(block=True, timeout=10)
    assert len(system._actors) <= 512
