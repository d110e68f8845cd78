"""Lab: one team in a notebook (or a script). Every magic is a method here first."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aklab.agent import AgentMessage, ContextUpdateEvent, HumanProxy
from aklab.core import ActorAddress, ActorSystem, BaseConfig, CancelMessage, Orchestrator
from aklab.errors import ActorGoneError, AklabError, ConfigError, RoutingError
from aklab.lab.frames import usage_frame
from aklab.lab.recorder import TeamRecorder
from aklab.lab.teams import BUILTIN_TEAMS, TeamSpec, builtin_team
from aklab.llm import ModelConfig

if TYPE_CHECKING:
    import pandas as pd

    from aklab.lab.panels import Dashboard, Panel

__all__ = ["DEFAULT_TIMEOUT", "AskTimeout", "Lab", "check_models", "format_message", "resolve_team"]

log = logging.getLogger("aklab.lab")

DEFAULT_TIMEOUT = 300.0
#: How long an interrupted ask waits for the cancelled runs to end.
INTERRUPT_GRACE = 30.0
#: How long ``stop()`` waits for a run that is about to start.
STOP_GRACE = 2.0


class AskTimeout(AklabError):
    """The team was still working when ``ask`` stopped waiting."""


def resolve_team(team: str | Path | TeamSpec) -> TeamSpec:
    """A built-in team name, a team file path, or a ready spec."""
    if isinstance(team, TeamSpec):
        return team
    if isinstance(team, str) and team in BUILTIN_TEAMS:
        return builtin_team(team)
    path = Path(team)
    if path.suffix in (".toml", ".yaml", ".yml") or path.exists():
        from aklab.lab.teamfile import load_team_file

        return load_team_file(path)
    return builtin_team(str(team))  # raises with the list of built-in names


class Lab:
    """A running team with a human seat, a recorder, and plain methods for everything."""

    def __init__(self, team: str | Path | TeamSpec = "dev-team", *, model: str | ModelConfig | None = None) -> None:
        """Start ``team`` (on ``model``, if given) and wait until its first members have started.

        Fails fast, with nothing left running: a model that cannot be built (no SDK, no
        key, unknown provider) raises ``ConfigError`` before any actor starts; a member
        whose start fails raises ``ActorGoneError`` saying why, and every actor started
        so far is stopped.
        """
        spec = resolve_team(team)
        if model is not None:
            spec = spec.with_model(ModelConfig.parse(model) if isinstance(model, str) else model)
        check_models(spec)
        self.spec = spec
        self._dashboard: Dashboard | None = None
        self.system = ActorSystem()
        self.recorder = TeamRecorder()
        try:
            self._start()
        except BaseException:
            self.system.shutdown()
            raise

    def _start(self) -> None:
        orchestrator = self.system.createActor(Orchestrator, BaseConfig(name="@Orchestrator", role="Orchestrator"))
        self.orchestrator = self.system.proxy_ask(orchestrator, Orchestrator)
        self.orchestrator.subscribe(self.recorder)
        self.orchestrator.register_agent_profiles(self.spec.cards)
        self.human = self.orchestrator.createActor(HumanProxy, BaseConfig(name="@Human", role="Human"))
        self.inbox = self.system.proxy_ask(self.human, HumanProxy).inbox
        self.entry = self._start_role(self.spec.entry)
        started = [self.human, self.entry]
        for role in self.spec.start:
            if role != self.spec.entry:
                started.append(self._start_role(role))
        self.system.wait_started(*started)

    def _start_role(self, role: str) -> ActorAddress:
        card = self.orchestrator.get_agent_card(role)
        if card is None:
            raise ConfigError(f"team {self.spec.name!r} has no card for role {role!r}")
        return self.orchestrator.createActor(card.get_agent_class(), card.get_config_copy())

    # -- talking to the team ----------------------------------------------------------
    def member(self, name: str) -> ActorAddress:
        name = _at(name)
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
        if not target.is_alive():
            raise ActorGoneError(f"{target.name} is not running (see lab.errors()); start the team again")
        start = len(self.inbox)
        self.system.proxy_tell(self.human, HumanProxy).send(target, AgentMessage(content=text))
        return start

    def wait(self, timeout: float | None = DEFAULT_TIMEOUT) -> bool:
        """Block until the team is quiet. False on timeout."""
        return self.system.wait_idle(timeout)

    def ask(self, text: str, *, to: str | None = None, timeout: float | None = DEFAULT_TIMEOUT) -> list[AgentMessage]:
        """Send ``text`` from @Human, wait until the team is quiet, return what reached the human.

        An interrupt while waiting (Ctrl-C, the notebook's stop button) cancels the runs
        in flight, waits for them to end, and re-raises ``KeyboardInterrupt``; what
        arrived stays in ``lab.replies()`` and the usage so far is kept.
        """
        start = self.send(text, to=to)
        try:
            done = self.wait(timeout)
        except KeyboardInterrupt:
            self.interrupt()
            raise
        if not done:
            raise AskTimeout(
                f"the team is still working after {timeout:g}s; replies keep arriving in lab.replies(), "
                "and lab.stop() cancels"
            )
        return self.inbox.messages[start:]

    def interrupt(self) -> list[str]:
        """Cancel every run in flight and wait (bounded) for the team to settle."""
        stopped = self.stop()
        self.wait(INTERRUPT_GRACE)
        return stopped

    def stop(self, agent: str | None = None) -> list[str]:
        """Cancel the run of ``agent``, or of every busy agent; returns whom it told.

        Right after a background ask, the message may still be on its way to an agent:
        if work is in flight but nobody is busy yet, wait (briefly, on the busy signal)
        for a run to start or for the team to go quiet.
        """
        if agent is None and not self.recorder.busy and self.system.activity.count:
            with self.recorder.busy_changed:
                self.recorder.busy_changed.wait_for(
                    lambda: bool(self.recorder.busy) or not self.system.activity.count, timeout=STOP_GRACE
                )
        targets = [self.member(agent)] if agent else [a for a in self.team() if a.name in self.recorder.busy]
        return self._cancel(targets)

    def _cancel(self, targets: list[ActorAddress]) -> list[str]:
        told = []
        for target in targets:
            try:
                self.system.tell(target, CancelMessage(recipient=target))
            except ActorGoneError:  # stopped since: nothing to cancel
                continue
            told.append(target.name)
        return told

    def replies(self) -> list[AgentMessage]:
        return self.inbox.messages

    # -- looking at the team ------------------------------------------------------------
    def team(self) -> list[ActorAddress]:
        return list(self.orchestrator.get_team())

    def busy(self) -> list[str]:
        return sorted(self.recorder.busy)

    def transcript(self, agent: str | None = None) -> list[AgentMessage]:
        """Every message sent in the team, or only those ``agent`` sent or received."""
        messages = [m.message for m in self.recorder.transcript if isinstance(m.message, AgentMessage)]
        if agent is None:
            return messages
        name = _at(agent)
        return [
            m for m in messages if name in (m.sender.name if m.sender else "", m.recipient.name if m.recipient else "")
        ]

    def context(self, agent: str | None = None) -> list[ContextUpdateEvent]:
        """The context-update blocks delivered (to ``agent`` only, if given)."""
        updates = list(self.recorder.context_updates)
        if agent is None:
            return updates
        name = _at(agent)
        return [u for u in updates if u.agent == name]

    def usage(self, by: str = "agent") -> pd.DataFrame:
        """Tokens and cost as a DataFrame: by agent (default), run, model or request."""
        return usage_frame(list(self.recorder.usage), by=by)

    def errors(self, since: int = 0) -> list[str]:
        """Handler failures, one line each. A usage-limit stop (``WarningError``) is left
        out: the human has already been told in a message."""
        return [
            f"{e.sender.name if e.sender else '?'}: {e.exception_type}: {e.exception_value}"
            for e in self.recorder.errors[since:]
            if e.exception_type != "WarningError"
        ]

    def status(self) -> str:
        """A few lines: team, entry agent, members (busy ones marked), models, totals."""
        members = self.team()
        busy = self.recorder.busy
        lines = [
            f"team {self.spec.name!r}, entry {self.entry.name}",
            "members: " + ", ".join(f"{a.name}{' (busy)' if a.name in busy else ''}" for a in members),
            "models: "
            + ", ".join(sorted({c.config.model_cfg.label for c in self.spec.cards if hasattr(c.config, "model_cfg")})),
        ]
        usage = self.recorder.usage
        tokens = sum(e.total_tokens for e in usage)
        unknown = sum(1 for e in usage if e.input_tokens is None or e.output_tokens is None)
        lines.append(f"usage: {len(usage)} requests, {tokens} tokens" + (f" ({unknown} unreported)" if unknown else ""))
        return "\n".join(lines)

    def dashboard(self) -> Dashboard:
        """Live panels (roster, transcript, context, usage) in tabs; one per lab, reused."""
        if self._dashboard is None:
            from aklab.lab.panels import attach_panels

            self._dashboard = attach_panels(self)
        return self._dashboard

    def panel(self, name: str) -> Panel[Any]:
        """One live panel: ``roster``, ``transcript``, ``context`` or ``usage``."""
        return self.dashboard().panel(name)

    def close(self) -> None:
        """Stop the team: runs in flight are cancelled (not waited for), then every member
        stops and releases its model's HTTP client in ``on_stop``."""
        if self._dashboard is not None:
            self._dashboard.close()
            self._dashboard = None
        busy = self.recorder.busy
        if busy:
            try:
                self._cancel([a for a in self.team() if a.name in busy])
            except ActorGoneError:  # closed already
                pass
        self.system.shutdown()

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Lab team={self.spec.name!r} entry={self.entry.name}>"


def check_models(spec: TeamSpec) -> None:
    """Build (never call) the model of every role, so that a bad spec fails here, in one
    line, rather than in a member's thread once the team is running."""
    from aklab.llm.profiles import resolve

    for card in spec.cards:
        model_cfg = getattr(card.config, "model_cfg", None)
        if isinstance(model_cfg, ModelConfig):
            resolve(model_cfg, getattr(card.config, "runtime_cfg", None)).close()


def _at(name: str) -> str:
    """Member names are ``@Name``; accept ``Name`` too."""
    return name if name.startswith("@") else f"@{name}"


def format_message(message: AgentMessage) -> str:
    """``@Manager → @Human (response)`` then the content, for plain-text display."""
    sender = message.sender.name if message.sender else "?"
    recipient = message.recipient.name if message.recipient else "?"
    return f"{sender} → {recipient} ({message.type}):\n{message.content}"
