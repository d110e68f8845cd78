"""Orchestrator: the team's registry of members and roles, and its event hub.

It never blocks on another agent (so agents may ask it things from their own threads
without risking a deadlock). It owns the team's :class:`TeamLog`, which every member
records into on its own thread; the orchestrator's record methods read that log.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import pykka

from aklab.core._address import ActorAddress
from aklab.core._akgent import Akgent
from aklab.core._card import AgentCard
from aklab.core._config import BaseConfig
from aklab.core._directory import TeamDirectory
from aklab.core._log import TeamLog
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


class Orchestrator(Akgent[BaseConfig, Any]):
    """Knows the roster and the role cards; records and fans out everything."""

    def __init__(self, config: BaseConfig | None = None, **wiring: Any) -> None:
        if config is None:
            config = BaseConfig(name="@Orchestrator", role="Orchestrator")
        super().__init__(config, **wiring)
        self._orchestrator = self.myAddress
        self.team_directory = TeamDirectory()
        self.directory = self.team_directory
        self.team_log = TeamLog()
        self._log = self.team_log
        self.entry: ActorAddress | None = None

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
    def createActor(
        self,
        actor_class: type[Akgent[Any, Any]],
        config: BaseConfig | None = None,
        *,
        agent_id: str | None = None,
        during: str | None = None,
    ) -> ActorAddress:
        """Start a team member; its name is made unique within the team (``agent_id``: on
        resume; ``during``: the handling that hires it, see ``StartMessage.during``)."""
        assert self._system is not None, "an Orchestrator must be created by an ActorSystem"
        cap = self._system.asks.guard.max_members
        if cap is not None and len(self.team_directory.members()) >= cap:
            raise RoutingError(
                f"the team is full: {cap} members (TeamGuard.max_members); fire a member or raise the limit"
            )
        if config is not None:
            config = config.model_copy(update={"name": self._unique_name(config.name)})
        address = self._system.createActor(
            actor_class,
            config,
            orchestrator=self.myAddress,
            team_id=self.myAddress.team_id,
            directory=self.team_directory,
            team_log=self.team_log,
            agent_id=agent_id,
        )
        self.team_directory.add_member(address)
        self._record(StartMessage(sender=address, config=config, during=during))
        return address

    def hire(self, role: str, name: str | None = None, *, during: str | None = None) -> ActorAddress:
        """Create a member from the registered card for ``role`` (``during``: see ``createActor``)."""
        card = self.team_directory.card(role)
        if card is None:
            known = ", ".join(sorted(c.role for c in self.team_directory.cards())) or "none registered"
            raise RoutingError(f"no AgentCard for role {role!r} (known roles: {known})")
        config = card.get_config_copy()
        if name:
            name = name if name.startswith("@") else f"@{name}"
            taken = self.team_directory.member(name)
            if taken is not None:  # an asked-for name is kept or refused, never quietly renamed
                raise RoutingError(
                    f"{name} is already on the team ({taken.role}); "
                    "give another name, or leave the name out and one is picked"
                )
            config = config.model_copy(update={"name": name})
        return self.createActor(card.get_agent_class(), config, during=during)

    def set_entry(self, address: ActorAddress) -> None:
        """The member a person talks to: it cannot be fired (``stop_member(force=True)`` can stop it)."""
        self.entry = address

    def stop_member(self, address: ActorAddress, *, force: bool = False) -> bool:
        """Stop a member and take it off the roster. False if it was not a member.

        A member whose start failed calls this itself (through its mailbox), so the
        roster never lists a member that cannot answer. The entry agent is refused
        unless ``force``: without it the team cannot be asked anything.
        """
        if not force and self.entry is not None and address == self.entry and address.is_alive():
            raise RoutingError(
                f"{address.name} is the team's entry agent and cannot be fired; "
                "to change the team, start a new one (%aklab team ... or Lab(...))"
            )
        member = self.team_directory.remove_member(address)
        if member is None:
            return False
        if member.is_alive():
            try:
                member.ref.stop(block=False)
            except pykka.ActorDeadError:
                log.debug("%s stopped on its own", member.name)
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
        self.team_log.subscribe(subscriber)

    def unsubscribe(self, subscriber: EventSubscriber) -> None:
        self.team_log.unsubscribe(subscriber)

    def receiveMsg_OrchestratorMessage(self, message: OrchestratorMessage, sender: ActorAddress | None) -> None:
        # Records told rather than logged (from an actor created outside the team's wiring).
        self._record(message)

    def _record(self, message: OrchestratorMessage) -> None:
        self.team_log.record(message)

    def get_messages(self) -> list[OrchestratorMessage]:
        """The most recent records (bounded)."""
        return self.team_log.messages()

    def get_events(self, event_type: type | None = None) -> list[EventMessage]:
        """Every ``EventMessage`` (of ``event_type`` and its subclasses, if given)."""
        return self.team_log.events(event_type)

    def get_errors(self) -> list[ErrorMessage]:
        return self.team_log.errors()

    def on_stop(self) -> None:
        super().on_stop()
        self.team_log.stop()
