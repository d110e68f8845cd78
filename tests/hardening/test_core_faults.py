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
