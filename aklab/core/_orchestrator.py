"""Orchestrator: the team's registry of members and roles, and its event hub.

It never blocks on another agent (so agents may ask it things from their own threads
without risking a deadlock) and it fans every record out to the subscribers. A
subscriber that raises is logged and kept; it cannot take the orchestrator down.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from typing import Any

from aklab.core._address import ActorAddress
from aklab.core._akgent import Akgent
from aklab.core._card import AgentCard
from aklab.core._config import BaseConfig
from aklab.core._directory import TeamDirectory
from aklab.core._messages import (
    ErrorMessage,
    EventMessage,
    OrchestratorMessage,
    StartMessage,
    StopMessage,
)
from aklab.core._subscriber import EventSubscriber
from aklab.errors import ConfigError, RoutingError

__all__ = ["Orchestrator"]

log = logging.getLogger("aklab.core")

#: How many records the orchestrator keeps in memory for late subscribers.
RECENT_RECORDS = 10_000


class Orchestrator(Akgent[BaseConfig, Any]):
    """Knows the roster and the role cards; records and fans out everything."""

    def __init__(self, config: BaseConfig | None = None, **wiring: Any) -> None:
        if config is None:
            config = BaseConfig(name="@Orchestrator", role="Orchestrator")
        super().__init__(config, **wiring)
        self._orchestrator = self.myAddress
        self.team_directory = TeamDirectory()
        self.directory = self.team_directory
        self._subscribers: list[EventSubscriber] = []
        self._recent: deque[OrchestratorMessage] = deque(maxlen=RECENT_RECORDS)
        self._events_by_type: dict[type, list[EventMessage]] = {}
        self._errors: list[ErrorMessage] = []

    # -- roles ------------------------------------------------------------------------
    def register_agent_profiles(self, cards: list[AgentCard]) -> None:
        """Store role blueprints; a card for an already registered role replaces it."""
        for card in cards:
            if not card.role:
                raise ConfigError("an AgentCard needs config.role to be set")
            self.team_directory.set_card(card)

    def get_agent_profiles(self) -> list[AgentCard]:
        return self.team_directory.cards()

    def get_agent_card(self, role: str) -> AgentCard | None:
        return self.team_directory.card(role)

    # -- members ----------------------------------------------------------------------
    def createActor(self, actor_class: type[Akgent[Any, Any]], config: BaseConfig | None = None) -> ActorAddress:
        """Start a team member; its name is made unique within the team."""
        assert self._system is not None, "an Orchestrator must be created by an ActorSystem"
        if config is not None:
            config = config.model_copy(update={"name": self._unique_name(config.name)})
        address = self._system.createActor(
            actor_class,
            config,
            orchestrator=self.myAddress,
            team_id=self.myAddress.team_id,
            directory=self.team_directory,
        )
        self.team_directory.add_member(address)
        self._record(StartMessage(sender=address, config=config))
        return address

    def hire(self, role: str, name: str | None = None) -> ActorAddress:
        """Create a member from the registered card for ``role``."""
        card = self.team_directory.card(role)
        if card is None:
            known = ", ".join(sorted(c.role for c in self.team_directory.cards())) or "none registered"
            raise RoutingError(f"no AgentCard for role {role!r} (known roles: {known})")
        config = card.get_config_copy()
        if name:
            config = config.model_copy(update={"name": name if name.startswith("@") else f"@{name}"})
        return self.createActor(card.get_agent_class(), config)

    def stop_member(self, address: ActorAddress) -> bool:
        """Stop a member and take it off the roster. False if it was not a member."""
        member = self.team_directory.remove_member(address)
        if member is None:
            return False
        if member.is_alive():
            member.ref.stop(block=False)
        self._record(StopMessage(sender=member))
        return True

    def get_team(self) -> list[ActorAddress]:
        return self.team_directory.members()

    def get_team_member(self, name: str) -> ActorAddress | None:
        return self.team_directory.member(name)

    def _unique_name(self, name: str) -> str:
        taken = self.team_directory.names()
        if name not in taken:
            return name
        stem = re.sub(r"\d+$", "", name)
        n = 2
        while f"{stem}{n}" in taken:
            n += 1
        return f"{stem}{n}"

    # -- records and subscribers -------------------------------------------------------
    def subscribe(self, subscriber: EventSubscriber) -> None:
        self._subscribers.append(subscriber)

    def unsubscribe(self, subscriber: EventSubscriber) -> None:
        if subscriber in self._subscribers:
            self._subscribers.remove(subscriber)

    def receiveMsg_OrchestratorMessage(self, message: OrchestratorMessage, sender: ActorAddress | None) -> None:
        self._record(message)

    def _record(self, message: OrchestratorMessage) -> None:
        # Transient events (e.g. streamed partial text) are fanned out, not kept.
        if isinstance(message, EventMessage):
            if not getattr(type(message.event), "aklab_transient", False):
                self._recent.append(message)
                self._events_by_type.setdefault(type(message.event), []).append(message)
        else:
            self._recent.append(message)
            if isinstance(message, ErrorMessage):
                self._errors.append(message)
        for subscriber in tuple(self._subscribers):
            try:
                subscriber.on_message(message)
            except Exception:
                log.exception("subscriber %r failed; it stays subscribed", subscriber)

    def get_messages(self) -> list[OrchestratorMessage]:
        """The most recent records (bounded)."""
        return list(self._recent)

    def get_events(self, event_type: type | None = None) -> list[EventMessage]:
        """Every ``EventMessage`` (of ``event_type`` and its subclasses, if given)."""
        out: list[EventMessage] = []
        for klass, events in self._events_by_type.items():
            if event_type is None or issubclass(klass, event_type):
                out.extend(events)
        if event_type is None or len(self._events_by_type) > 1:
            out.sort(key=lambda m: m.created_at)
        return out

    def get_errors(self) -> list[ErrorMessage]:
        return list(self._errors)

    def on_stop(self) -> None:
        super().on_stop()
        for subscriber in tuple(self._subscribers):
            try:
                subscriber.on_stop()
            except Exception:
                log.exception("subscriber %r failed on stop", subscriber)
