"""TeamDirectory: the roster and role cards, readable from any thread without asking.

The orchestrator is the only writer. Writers replace whole dicts (copy on write), so a
reader always sees a consistent snapshot, and ``version`` tells readers cheaply whether
anything changed since they last looked.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aklab.core._address import ActorAddress
    from aklab.core._card import AgentCard

__all__ = ["TeamDirectory"]


class TeamDirectory:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._members: dict[str, ActorAddress] = {}
        self._cards: dict[str, AgentCard] = {}
        self.version = 0

    # -- writes (orchestrator only) ---------------------------------------------------
    def add_member(self, address: ActorAddress) -> None:
        with self._lock:
            self._members = {**self._members, address.agent_id: address}
            self.version += 1

    def remove_member(self, address: ActorAddress) -> ActorAddress | None:
        with self._lock:
            if address.agent_id not in self._members:
                return None
            members = dict(self._members)
            removed = members.pop(address.agent_id)
            self._members = members
            self.version += 1
            return removed

    def set_card(self, card: AgentCard) -> None:
        with self._lock:
            self._cards = {**self._cards, card.role: card}
            self.version += 1

    # -- reads (any thread) -------------------------------------------------------------
    def members(self) -> list[ActorAddress]:
        return [a for a in self._members.values() if a.is_alive()]

    def member(self, name: str) -> ActorAddress | None:
        for address in self._members.values():
            if address.name == name and address.is_alive():
                return address
        return None

    def member_ignoring_case(self, name: str) -> ActorAddress | None:
        """The one live member whose name is ``name`` but for case ("@manager" for @Manager);
        None when none or several are."""
        folded = name.casefold()
        found = [a for a in self.members() if a.name.casefold() == folded]
        return found[0] if len(found) == 1 else None

    def names(self) -> set[str]:
        return {a.name for a in self._members.values()}

    def card(self, role: str) -> AgentCard | None:
        return self._cards.get(role)

    def cards(self) -> list[AgentCard]:
        return list(self._cards.values())
