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


def test_a_subscriber_asking_the_orchestrator_on_its_own_thread_gets_a_clear_error_at_once() -> None:
    import threading

    from aklab.core import EventSubscriber, StartMessage
    from aklab.errors import ConfigError
    from aklab.lab import Lab

    errors: list[str] = []
    done = threading.Event()

    with Lab("dev-team") as lab:

        class AsksBack(EventSubscriber):
            def on_message(self, message: Message) -> None:
                if isinstance(message, StartMessage) and not done.is_set():
                    try:
                        lab.orchestrator.get_team()
                    except ConfigError as exc:
                        errors.append(str(exc))
                    finally:
                        done.set()

        lab.orchestrator.subscribe(AsksBack())
        lab.ask("What is 2+2?", timeout=10)  # hires the Developer: a StartMessage made on the orchestrator's thread
        assert done.wait(10)
        assert errors and "@Orchestrator was asked to answer on its own thread" in errors[0]
        assert len(lab.ask("What is 2+2?", timeout=10)) >= 1


def test_a_hire_and_fire_loop_does_not_grow_the_systems_books(system: ActorSystem) -> None:
    for _ in range(600):
        address = system.createActor(Crashy)
        address.ref.stop(block=True, timeout=10)
    assert len(system._actors) <= 512
