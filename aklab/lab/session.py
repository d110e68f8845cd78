"""Lab: one team in a notebook (or a script). Every magic is a method here first."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from aklab.agent import AgentMessage, HumanProxy
from aklab.core import ActorAddress, ActorSystem, BaseConfig, Orchestrator
from aklab.errors import AklabError, ConfigError, RoutingError
from aklab.lab.frames import usage_frame
from aklab.lab.recorder import TeamRecorder
from aklab.lab.teams import TeamSpec, builtin_team

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AskTimeout", "Lab"]

log = logging.getLogger("aklab.lab")

DEFAULT_TIMEOUT = 300.0


class AskTimeout(AklabError):
    """The team was still working when ``ask`` stopped waiting."""


class Lab:
    """A running team with a human seat, a recorder, and plain methods for everything."""

    def __init__(self, team: str | TeamSpec = "dev-team") -> None:
        self.spec = builtin_team(team) if isinstance(team, str) else team
        self.system = ActorSystem()
        self.recorder = TeamRecorder()
        orchestrator = self.system.createActor(Orchestrator, BaseConfig(name="@Orchestrator", role="Orchestrator"))
        self.orchestrator = self.system.proxy_ask(orchestrator, Orchestrator)
        self.orchestrator.subscribe(self.recorder)
        self.orchestrator.register_agent_profiles(self.spec.cards)
        self.human = self.orchestrator.createActor(HumanProxy, BaseConfig(name="@Human", role="Human"))
        self.inbox = self.system.proxy_ask(self.human, HumanProxy).inbox
        self.entry = self._start_role(self.spec.entry)
        for role in self.spec.start:
            if role != self.spec.entry:
                self._start_role(role)

    def _start_role(self, role: str) -> ActorAddress:
        card = self.orchestrator.get_agent_card(role)
        if card is None:
            raise ConfigError(f"team {self.spec.name!r} has no card for role {role!r}")
        return self.orchestrator.createActor(card.get_agent_class(), card.get_config_copy())

    # -- talking to the team ----------------------------------------------------------
    def member(self, name: str) -> ActorAddress:
        name = name if name.startswith("@") else f"@{name}"
        member = self.orchestrator.get_team_member(name)
        if member is None:
            names = ", ".join(a.name for a in self.orchestrator.get_team())
            raise RoutingError(f"no team member {name}; members: {names}")
        return member

    def send(self, text: str, *, to: str | None = None) -> int:
        """Send ``text`` from @Human without waiting; returns the inbox position to read from."""
        if not text.strip():
            raise ConfigError("nothing to ask: the message is empty")
        target = self.member(to) if to else self.entry
        start = len(self.inbox)
        self.system.proxy_tell(self.human, HumanProxy).send(target, AgentMessage(content=text))
        return start

    def wait(self, timeout: float | None = DEFAULT_TIMEOUT) -> bool:
        """Block until the team is quiet. False on timeout."""
        return self.system.wait_idle(timeout)

    def ask(self, text: str, *, to: str | None = None, timeout: float | None = DEFAULT_TIMEOUT) -> list[AgentMessage]:
        """Send ``text`` from @Human, wait until the team is quiet, return what reached the human."""
        start = self.send(text, to=to)
        if not self.wait(timeout):
            raise AskTimeout(
                f"the team is still working after {timeout:g}s; its replies keep arriving in lab.replies()"
            )
        return self.inbox.messages[start:]

    def replies(self) -> list[AgentMessage]:
        return self.inbox.messages

    # -- looking at the team ------------------------------------------------------------
    def team(self) -> list[ActorAddress]:
        return list(self.orchestrator.get_team())

    def transcript(self) -> list[AgentMessage]:
        return [m.message for m in self.recorder.transcript if isinstance(m.message, AgentMessage)]

    def usage(self, by: str = "agent") -> pd.DataFrame:
        """Tokens and cost as a DataFrame: by agent (default), run, model or request."""
        return usage_frame(list(self.recorder.usage), by=by)

    def errors(self) -> list[str]:
        return [
            f"{e.sender.name if e.sender else '?'}: {e.exception_type}: {e.exception_value}"
            for e in self.recorder.errors
        ]

    def close(self) -> None:
        self.system.shutdown()

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Lab team={self.spec.name!r} entry={self.entry.name}>"


def format_message(message: AgentMessage) -> str:
    """``@Manager → @Human (response)`` then the content, for plain-text display."""
    sender = message.sender.name if message.sender else "?"
    recipient = message.recipient.name if message.recipient else "?"
    return f"{sender} → {recipient} ({message.type}):\n{message.content}"
