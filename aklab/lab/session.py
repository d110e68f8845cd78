"""Lab: one team in a notebook (or a script). Every magic is a method here first."""

from __future__ import annotations

import difflib
import logging
import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aklab.agent import AgentMessage, ContextUpdateEvent, HumanProxy
from aklab.core import ActorAddress, ActorSystem, BaseConfig, CancelMessage, Orchestrator, TeamGuard
from aklab.errors import ActorGoneError, AklabError, ConfigError, RoutingError
from aklab.lab.frames import usage_frame
from aklab.lab.persist import open_link, subscribe
from aklab.lab.recorder import TeamRecorder, begins_ask
from aklab.lab.result import AskResult
from aklab.lab.teams import BUILTIN_TEAMS, TeamSpec, builtin_team
from aklab.llm import ModelConfig
from aklab.llm.local_auto import describe as describe_local_server
from aklab.llm.local_auto import serve_if_needed
from aklab.llm.usage import totals_line

if TYPE_CHECKING:
    import pandas as pd

    from aklab.lab.panels import Dashboard, Panel
    from aklab.lab.resume import StoredTeam
    from aklab.store import EventStore

__all__ = ["DEFAULT_TIMEOUT", "AskTimeout", "Lab", "Stopped", "check_models", "format_message", "resolve_team"]

log = logging.getLogger("aklab.lab")

DEFAULT_TIMEOUT = 300.0
#: How long an interrupted ask waits for the cancelled runs to end.
INTERRUPT_GRACE = 30.0
#: How long ``close()`` waits for every member to stop.
CLOSE_TIMEOUT = 10.0


class Stopped(list[str]):
    """What a stop did: the agents whose runs it interrupted (the list), how many asks it
    withdrew before any agent had started on them (``withdrawn``), and the agents named that
    had no run to stop (``idle``)."""

    def __init__(self, interrupted: list[str], *, withdrawn: int = 0, idle: list[str] | None = None) -> None:
        super().__init__(interrupted)
        self.withdrawn = withdrawn
        self.idle = idle or []

    def summary(self) -> str:
        parts = []
        if self:
            parts.append(f"interrupted the run{'s' if len(self) > 1 else ''} of {', '.join(self)}")
        if self.withdrawn:
            parts.append(f"withdrew {self.withdrawn} ask{'s' if self.withdrawn > 1 else ''} not started yet")
        if parts:
            return "Stopped: " + "; ".join(parts) + "."
        if self.idle:
            return f"Nothing was stopped: {', '.join(self.idle)} had no run in flight."
        return "Nothing was running."


class AskTimeout(AklabError):
    """The team was still working when ``ask`` stopped waiting."""


def resolve_team(team: str | Path | TeamSpec, *, trust: Iterable[str] = ()) -> TeamSpec:
    """A built-in team name, a team file path, or a ready spec. ``trust``: packages besides
    ``aklab`` whose tools and agent classes a team file may name (importing them runs their code)."""
    if isinstance(team, TeamSpec):
        return team
    if isinstance(team, str) and team in BUILTIN_TEAMS:
        return builtin_team(team)
    path = Path(team)
    if path.suffix in (".toml", ".yaml", ".yml") or path.exists():
        from aklab.lab.teamfile import load_team_file

        return load_team_file(path, trust=trust)
    return builtin_team(str(team))  # raises with the list of built-in names


def _stored_spec(info: Any, trust: Iterable[str]) -> TeamSpec:
    """The team a stored team was started with, found again from its metadata: a built-in
    name or a team file. A team built in code (a ``TeamSpec``) was stored by name only, and
    a file may have moved since: both raise a ``ConfigError`` saying to pass ``spec``."""
    origin = info.metadata.get("team")
    which = f"team {info.name!r} ({info.team_id[:8]})"
    again = f"pass it again: Lab.resume({info.team_id[:8]!r}, spec=<the TeamSpec or team file>)"
    if origin is None:
        if info.name in BUILTIN_TEAMS:  # a built-in spec object, started as Lab(builtin_team(...))
            return builtin_team(info.name)
        raise ConfigError(f"{which} was built in code, so the store cannot rebuild it: {again}")
    try:
        return resolve_team(str(origin), trust=trust)
    except ConfigError as exc:
        raise ConfigError(f"{which} was started from {origin}, which cannot be loaded now ({exc}): {again}") from exc


class Lab:
    """A running team with a human seat, a recorder, and plain methods for everything."""

    def __init__(
        self,
        team: str | Path | TeamSpec = "dev-team",
        *,
        model: str | ModelConfig | None = None,
        guard: TeamGuard | None = None,
        trust: Iterable[str] = (),
        store: Any = None,
        _stored: StoredTeam | None = None,
    ) -> None:
        """Start ``team`` (on ``model``, if given) and wait until its first members have started.

        ``trust`` names the packages a team file may import tools or agent classes from
        (besides ``aklab``; see ``aklab.lab.teamfile``). ``guard`` bounds every ask (turns,
        tokens, cost, ping-pongs, team size; see :class:`aklab.core.TeamGuard` for the
        defaults); ``lab.guard`` changes it later (the store keeps the limits, so a resume
        has them back). ``store`` is where every record of the
        team is appended as it happens (see ``aklab.lab.persist``): by default
        ``./.aklab/events.sqlite3`` (or ``$AKLAB_STORE``); ``False`` keeps nothing on disk.

        Fails fast, with nothing left running: a model that cannot be built (no SDK, no
        key, unknown provider) raises ``ConfigError`` before any actor starts; a member
        whose start fails raises ``ActorGoneError`` saying why, and every actor started
        so far is stopped.
        """
        spec = resolve_team(team, trust=trust)
        # how to find this team again on resume: a built-in name or a file, and a model spec
        self._origin: dict[str, Any] = {}
        if isinstance(team, str | Path) and not isinstance(team, TeamSpec):
            self._origin["team"] = str(Path(team).resolve()) if Path(team).suffix else str(team)
        if isinstance(model, str):
            self._origin["model"] = model
        elif isinstance(model, ModelConfig) and isinstance(model.model, str):
            from aklab.lab.resume import model_to_store

            self._origin["model_config"] = model_to_store(model)
        if model is not None:
            spec = spec.with_model(ModelConfig.parse(model) if isinstance(model, str) else model)
        spec = spec.map_models(serve_if_needed)  # local:smollm2 and nothing serving it: aklab's own server
        check_models(spec)
        self.spec = spec
        self._dashboard: Dashboard | None = None
        self.last_ask_id: str | None = None
        self.system = ActorSystem(guard=guard)
        self.recorder = TeamRecorder()
        self._closed = False
        self._store = open_link(store)
        self.resume_report: str | None = None
        self._resumed = _stored is not None  # the messages before the restart are in the store only
        if _stored is not None:
            self._store.team_id = _stored.team_id  # the resumed team appends to its own log
        try:
            self._store.claim()  # a team runs in one lab at a time
        except BaseException:
            self._store.close()
            raise
        self.system.persist = self._store.store is not None
        from aklab.lab.panels import watch_lab

        watch_lab(self)  # a cell's panel, opened just after its ask was sent, replays it all
        try:
            self._start(_stored)
        except BaseException:
            self.system.shutdown()
            self._store.close()
            raise

    def _start(self, stored: StoredTeam | None = None) -> None:
        orchestrator = self.system.createActor(Orchestrator, BaseConfig(name="@Orchestrator", role="Orchestrator"))
        self.orchestrator = self.system.proxy_ask(orchestrator, Orchestrator)
        self.orchestrator.subscribe(self.recorder)
        subscribe(self._store, self.orchestrator, name=self.spec.name, metadata=self._metadata())
        # Recorded with or without a store: a resume leaves a stopped ask alone, and the
        # recorder counts it as not ok (lab.usage(by="ask")).
        from aklab.lab.resume import record_cancellations

        self.system.asks.on_cancel = record_cancellations(self.orchestrator.team_log)
        self.orchestrator.register_agent_profiles(self.spec.cards)
        if stored is not None:
            from aklab.lab.resume import restore_team

            restore_team(self, stored)
            return
        self.human = self.orchestrator.createActor(HumanProxy, BaseConfig(name="@Human", role="Human"))
        self.inbox = self.system.proxy_ask(self.human, HumanProxy).inbox
        self.entry = self._start_role(self.spec.entry)
        self.orchestrator.set_entry(self.entry)
        started = [self.human, self.entry]
        for role in self.spec.start:
            if role != self.spec.entry:
                started.append(self._start_role(role))
        self.system.wait_started(*started)

    @classmethod
    def resume(
        cls,
        team: str | None = None,
        *,
        store: Any = None,
        spec: str | Path | TeamSpec | None = None,
        model: str | ModelConfig | None = None,
        guard: TeamGuard | None = None,
        trust: Iterable[str] = (),
    ) -> Lab:
        """Bring a stored team back (``team``: its id, an id prefix or its name; None: the latest
        that no other process runs). A team a lab runs now, here or in another kernel, is
        refused with ``TeamInUseError`` naming where (see ``EventStore.claim``).

        Every member that was running comes back under its own id with its model history,
        state (context-update baseline included) and lifetime usage; what reached the human
        is in ``lab.replies()`` again; and every message whose handling never finished is
        delivered again, once; an ask that was still at work keeps its guard counters, the
        team its planning board and (unless ``guard`` is given) its guard's limits. ``spec``
        is the team it was started with when that cannot be found again by name (a team
        built in code); ``model`` as for ``Lab``.
        ``lab.resume_report`` says what was brought back.
        """
        from aklab.lab.resume import load_team

        link = open_link(store)
        if link.store is None:
            raise ConfigError(
                "no event store to resume from" + (f": {link.warning}" if link.warning else " (it is switched off)")
            )
        try:
            stored = load_team(link.store, team, skip_running=team is None)
        finally:
            link.close()
        if spec is None:
            spec = _stored_spec(stored.info, trust)
        if model is None:
            from aklab.lab.resume import stored_model

            model = stored_model(stored.info.metadata)
            if model is not None:
                _check_stored_model(model, stored.info.team_id)
        if guard is None:
            from aklab.lab.resume import stored_guard

            guard = stored_guard(stored.info.metadata.get("guard"))
        return cls(spec, model=model, guard=guard, trust=trust, store=store, _stored=stored)

    def _metadata(self) -> dict[str, Any]:
        models = {c.config.role: c.config.model_cfg.label for c in self.spec.cards if hasattr(c.config, "model_cfg")}
        meta: dict[str, Any] = {"entry": self.spec.entry, "roles": [c.config.role for c in self.spec.cards]}
        meta["models"] = models
        meta["guard"] = self.guard.model_dump(mode="json")
        meta.update(self._origin)
        self._saved_meta = meta
        return meta

    def _save_guard(self) -> None:
        """Keep the stored guard limits those of ``lab.guard`` (a resume takes them back):
        one small write when they were changed since, none otherwise."""
        store, meta = self._store.store, getattr(self, "_saved_meta", None)
        if store is None or meta is None or self._store.warning is not None:
            return
        guard = self.guard.model_dump(mode="json")
        if guard == meta.get("guard"):
            return
        meta = {**meta, "guard": guard}
        try:
            store.save_team(self.team_id, name=self.spec.name, metadata=meta)
        except AklabError as exc:  # the store's own failure is reported by its subscriber
            log.warning("the event store could not record the guard's limits: %s", exc)
            return
        self._saved_meta = meta

    # -- the event store ------------------------------------------------------------------
    @property
    def team_id(self) -> str:
        """This team session's id in the event store."""
        return self._store.team_id

    @property
    def store(self) -> EventStore | None:
        """The event store this lab appends to (None when it keeps nothing on disk)."""
        return self._store.store

    @property
    def store_warning(self) -> str | None:
        """Why the store is not recording, if it is not (the team then runs in memory only)."""
        return self._store.warning

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
            card = self.orchestrator.get_agent_card(name[1:])
            if card is not None and not getattr(card.config, "is_user_proxy", False):  # a role, nobody hired yet
                role = card.config.role
                entry = self.entry.name
                raise RoutingError(
                    f"no team member {name} yet: {role} is a role this team hires on demand. Ask {entry}, which "
                    f"hires one to delegate, or hire one now by sending {entry} '/hire_member {role}' (a %%ask "
                    f"cell holding that line); members: {names}"
                )
            raise RoutingError(f"no team member {name}; members: {names}")
        return member

    @property
    def guard(self) -> TeamGuard:
        """The team guard's limits, per ask (assign a field to change it: ``lab.guard.max_turns = 200``)."""
        return self.system.asks.guard

    def send(self, text: str, *, to: str | None = None) -> int:
        """Send ``text`` from @Human without waiting; returns the inbox position to read from
        (``lab.last_ask_id`` is the ask it started)."""
        return self._send(text, to=to)[0]

    def _send(self, text: str, *, to: str | None = None) -> tuple[int, str]:
        if self._closed:
            raise ConfigError(
                "this lab is closed (lab.close()): start a new one with Lab(...), %aklab team NAME, "
                "or Lab.resume() to go on with this team"
            )
        if not isinstance(text, str) or not text.strip():
            raise ConfigError("nothing to ask: the message is empty")
        cap = self.guard.max_message_chars
        if cap is not None and len(text) > cap:
            raise ConfigError(
                f"the message is {len(text):,} characters, over the limit of {cap:,} (TeamGuard.max_message_chars): "
                "put the text in a file the team's workspace can read, or raise lab.guard.max_message_chars"
            )
        target = self.member(to) if to else self.entry
        if target.is_user_proxy:
            raise ConfigError(f"{target.name} is you: ask an agent (members: {self._agent_names()})")
        self._check_command(text, target.name)
        if not target.is_alive():
            raise ActorGoneError(
                f"{target.name} is not running (see lab.errors()); start the team again with Lab(...) "
                "or %aklab team NAME"
            )
        self._save_guard()
        start = len(self.inbox)
        message = AgentMessage(content=text)
        message.ask_id = message.id
        self.last_ask_id = message.id
        # Asked, not told: the human's actor stores the message as it sends it, so what send()
        # returned for survives a crash right after. From a listener (fed while a record is
        # delivered, on any team thread) it can only be queued: waiting there would stall the team.
        system = self.system
        if system.may_wait_on(self.human):
            system.proxy_ask(self.human, HumanProxy).send(target, message)
        else:
            system.proxy_tell(self.human, HumanProxy).send(target, message)
        return start, message.id

    def _check_command(self, text: str, agent: str) -> None:
        """A ``/word`` close to one of ``agent``'s commands but none of them is a typo: say so
        here, rather than let the agent send it to its model as text (which answers it at
        length, or goes on with an earlier question). Any other ``/text`` goes as it is."""
        if not text.startswith("/"):
            return
        known = self.recorder.commands.get(agent)
        head = text[1:].split(maxsplit=1)
        name = head[0] if head else ""
        if not known or not name or name in known or name in ("help", "?"):
            return
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        if close:
            raise ConfigError(
                f"{agent} has no command /{name}: did you mean /{close[0]}? (/help sent to {agent} lists its commands)"
            )

    def _agent_names(self) -> str:
        return ", ".join(a.name for a in self.team() if not a.is_user_proxy) or "none"

    def wait(self, timeout: float | None = DEFAULT_TIMEOUT) -> bool:
        """Block until the team is quiet. False on timeout."""
        return self.system.wait_idle(_check_timeout(timeout))

    def ask(self, text: str, *, to: str | None = None, timeout: float | None = DEFAULT_TIMEOUT) -> AskResult:
        """Send ``text`` from @Human, wait until the team is quiet, return what reached the human
        for this ask (an :class:`AskResult`: the list of replies, with its usage and runs).

        An interrupt while waiting (Ctrl-C, the notebook's stop button) cancels the runs
        in flight, waits for them to end, and re-raises ``KeyboardInterrupt``; what
        arrived stays in ``lab.replies()`` and the usage so far is kept.
        """
        timeout = _check_timeout(timeout)
        start, ask_id = self._send(text, to=to)
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
        return self.result(ask_id, start)

    def result(self, ask_id: str, start: int = 0) -> AskResult:
        """What ask ``ask_id`` brought back so far: its replies (from inbox position ``start``) and usage,
        and whether it is still running (then its ``ok`` is None)."""
        running = ask_id in self._running_asks()  # first: replies read after it are never fewer
        replies = [m for m in self.inbox.since(start) if m.ask_id in (ask_id, None)]
        usage = self.recorder.usage.for_ask(ask_id)  # one ask's rows, not a scan of the session
        state = self.system.asks.get(ask_id)
        stopped = state is not None and state.cancelled is not None
        conversation = self._conversation(ask_id)
        return AskResult(
            replies,
            ask_id=ask_id,
            usage_events=usage,
            stopped=stopped,
            running=running,
            conversation=conversation,
            asked=self.recorder.usage.begun(ask_id),
        )

    def _conversation(self, ask_id: str) -> list[AgentMessage]:
        """The messages of ask ``ask_id`` that memory holds, oldest first.

        Read from the newest back to the person's message that started the ask (its id is
        the ask id), so an ask costs what it sent, not the whole transcript kept (2,000
        messages once a session is long: a scan of them all made every ask of a long
        session slower than a fresh one's). Without that message in memory, every kept
        message is looked at, as before.
        """
        found = []
        for sent in reversed(self.recorder.transcript.snapshot()[1]):
            message = sent.message
            if isinstance(message, AgentMessage) and message.ask_id == ask_id:
                found.append(message)
                if message.id == ask_id:
                    break
        found.reverse()
        return found

    def interrupt(self) -> Stopped:
        """Cancel every run in flight and wait (bounded) for the team to settle."""
        stopped = self.stop()
        self.wait(INTERRUPT_GRACE)
        return stopped

    def stop(self, agent: str | None = None) -> Stopped:
        """Stop: end every ask in progress, wherever its work is; returns the agents that were busy.

        Every run an ask caused is interrupted, and its messages still queued (a queued
        ask too) are dropped unread, so the team goes quiet. With ``agent``, only that
        agent's current run is cancelled (a ``CancelMessage``); the ask goes on. An agent with
        no run in flight is left alone and named in ``idle``.
        """
        if agent is not None:
            target = self.member(agent)
            if target.name not in self._busy_now():
                return Stopped([], idle=[target.name])
            return Stopped(self._cancel([target]))
        asks = self.system.asks
        active = asks.active()
        waiting = sum(1 for a in active if a.turns == 0 and not a.runs)
        busy = self._busy_now()
        asks.cancel_many([state.ask_id for state in active], "stopped by the human")
        return Stopped(busy, withdrawn=waiting)

    def _busy_now(self) -> list[str]:
        # The ledger knows a run the moment it starts; the recorder hears of it through the
        # team log a moment later (and of turns outside any ask).
        return sorted(set(self.recorder.busy).union(self.system.asks.runners()))

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

    @property
    def resumed(self) -> bool:
        """Whether this lab resumed a stored team: what it did before the restart is in the
        event store only (memory holds what happened since)."""
        return self._resumed

    def transcript(
        self, agent: str | None = None, *, before: AgentMessage | str | None = None, limit: int | None = None
    ) -> list[AgentMessage]:
        """The messages sent in the team that memory holds (the newest 2,000), or only those
        ``agent`` sent or received.

        ``before`` (a message, or its id) and ``limit`` page back past memory: up to
        ``limit`` (default 100) messages sent before ``before`` (without it: the newest),
        oldest first, read back from the event store when memory has let them go (or, in
        a resumed lab, never saw them: the conversation before the restart). Page on
        with ``before=page[0]``; an empty page means the first message is reached. Without
        a store only memory answers, and a page past it raises ``ConfigError`` saying that
        older messages are not kept.
        """
        name = _at(agent) if agent is not None else None
        kept = [m.message for m in self.recorder.transcript if isinstance(m.message, AgentMessage)]
        if before is None and limit is None:
            return kept if name is None else [m for m in kept if _involves(m, name)]
        from aklab.lab.panels._older import messages_before

        # memory may not hold everything: it let messages go, or the team was resumed
        complete = self.recorder.transcript.dropped == 0 and not self._resumed
        return messages_before(self, kept, name, before, limit, memory_complete=complete)

    def context(self, agent: str | None = None, *, limit: int | None = None) -> list[ContextUpdateEvent]:
        """The context-update blocks delivered that memory holds (to ``agent`` only, if given).

        With ``limit``: the newest ``limit`` blocks, oldest first, read back from the event
        store when memory does not hold them (it let them go, or the team was resumed)."""
        updates = list(self.recorder.context_updates)
        name = _at(agent) if agent is not None else None
        if limit is None:
            return updates if name is None else [u for u in updates if u.agent == name]
        from aklab.lab.panels._older import context_before

        complete = self.recorder.context_updates.dropped == 0 and not self._resumed
        return context_before(self, updates, name, limit, memory_complete=complete)

    def usage(self, by: str = "agent") -> pd.DataFrame:
        """Tokens and cost as a DataFrame: by agent (default), run, model, ask (each human
        message with everything it caused, its question, the agents it involved and whether
        it was ``ok``: see ``aklab.lab.frames``) or request."""
        # Running first: an ask that ends between the two reads has had its notices recorded
        # by then (each before the human's actor takes it), so it never reads as ok too early.
        running = self._running_asks() if by == "ask" else set()
        failed = self.recorder.failed_asks.copy() if by == "ask" else None  # a copy: the team adds to it
        frame = usage_frame(self.recorder.usage, by=by, failed_asks=failed, running_asks=running)
        if by == "ask":  # what was asked, when the transcript still holds it
            asked = {m.ask_id: m.content for m in (r.message for r in self.recorder.transcript) if begins_ask(m)}
            missing = {a for a in frame["ask_id"] if isinstance(a, str) and a not in asked}
            if missing:  # asked before a resume, or let go by memory: the store has it
                asked.update(self._stored_questions(missing))
            frame.insert(1, "question", [asked.get(a) for a in frame["ask_id"]])
        return frame

    def _running_asks(self) -> set[str]:
        """The asks the team still has work of, queued or in a run (not stopped)."""
        return {state.ask_id for state in self.system.asks.active() if state.cancelled is None}

    def _stored_questions(self, ask_ids: set[str]) -> dict[str, str]:
        """The questions that started ``ask_ids``, read back from the event store (one read)."""
        store = self._store.store
        if store is None:
            return {}
        from aklab.store import StoreError

        try:
            rows = store.records(self._store.team_id, kinds=["SentMessage"])
        except StoreError as exc:
            log.warning("could not read the questions of earlier asks from the event store: %s", exc)
            return {}
        found: dict[str, str] = {}
        for row in rows:
            if row.message_id in ask_ids and row.message_id == row.ask_id:
                message = getattr(row.message(), "message", None)
                if isinstance(message, AgentMessage):
                    found[row.message_id] = message.content
        return found

    def errors(self, since: int = 0, *, told: bool = True) -> list[str]:
        """Handler failures, one line each. A usage-limit stop (``WarningError``) is left
        out: the human has already been told in a message. ``told=False`` also leaves out a
        failed model call (``ModelError``), which the agent tells the human of in a notice
        ("@Manager could not answer: ...") before it raises."""
        left_out = ("WarningError",) if told else ("WarningError", "ModelError")
        return [
            f"{e.sender.name if e.sender else '?'}: {e.exception_type}: {e.exception_value}"
            for e in self.recorder.errors[since:]
            if e.exception_type not in left_out
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
        lines += self._server_lines()
        lines.append(f"usage: {totals_line(self.recorder.usage)}")
        size = self._store.size_text()
        lines.append(
            f"store: {self._store.location}"
            + (f" ({size})" if size else "")
            + (f" — {self.store_warning}" if self.store_warning else "")
        )
        return "\n".join(lines)

    def _server_lines(self) -> list[str]:
        """Where the team's models are asked: aklab's own server as ``local_auto`` describes it,
        else each server a spec names (a ``base_url``, Ollama's or llama.cpp's default), with the
        models asked there; a provider's own API gets no line."""
        from aklab.llm.profiles import family
        from aklab.secrets import shown_url

        own: set[str] = set()
        toolless: list[str] = []  # members on aklab's own server whose tool calls it cannot offer
        elsewhere: dict[str, set[str]] = {}
        for card in self.spec.cards:
            cfg = getattr(card.config, "model_cfg", None)
            if cfg is None:
                continue
            line = describe_local_server(cfg.base_url)
            if line is not None:
                own.add(line)
                tools = [t.card_name() for t in getattr(card.config, "tools", ()) if t.calls_tools()]
                if tools:
                    toolless.append(f"{card.config.name}: {', '.join(tools)}")
                continue
            try:
                endpoint = family(cfg.provider).endpoint(cfg)
            except AklabError:  # an unknown provider or a bad $OLLAMA_HOST: the team's start said so
                continue
            if endpoint:
                elsewhere.setdefault(shown_url(endpoint), set()).add(cfg.label)
        lines = sorted(own)
        if toolless:
            lines.append(
                f"tools not offered to the model ({'; '.join(toolless)}): aklab's own server (chat format chatml) "
                "leaves tool definitions out of the prompt; give a server with tool calling (llama.cpp's "
                "llama-server --jinja, Ollama, vLLM) with --base-url"
            )
        return lines + [f"model server: {url} ({', '.join(sorted(labels))})" for url, labels in elsewhere.items()]

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
        from aklab.lab.panels import detach_panels

        self._closed = True
        detach_panels(self)  # every panel following this lab keeps what it shows
        if self._dashboard is not None:
            self._dashboard.close()
            self._dashboard = None
        # No ask runs from here on: runs in flight are interrupted, queued work is dropped,
        # and no model request starts (the mailbox capability checks before each one).
        self.system.asks.close()
        self.system.shutdown(timeout=CLOSE_TIMEOUT)
        self._store.close()

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


def _check_stored_model(model: str | ModelConfig, team_id: str) -> None:
    """The model a stored team ran on must still build here (its SDK installed, its key set);
    if not, the one line says how to resume the team on another model."""
    from aklab.llm.profiles import resolve

    cfg = ModelConfig.parse(model) if isinstance(model, str) else model
    try:
        resolve(cfg).close()
    except ConfigError as exc:
        raise ConfigError(
            f"{exc}; or resume the team on another model: %aklab resume {team_id[:8]} --model SPEC "
            "(Lab.resume(..., model=...))"
        ) from exc


def _check_timeout(timeout: float | None) -> float | None:
    """``None`` waits for ever; otherwise a finite number of seconds, at least 0."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout < 0:
        raise ConfigError(f"timeout must be a number of seconds >= 0 (or None to wait for ever), not {timeout!r}")
    return float(timeout)


def _involves(message: AgentMessage, name: str) -> bool:
    return name in (message.sender.name if message.sender else "", message.recipient.name if message.recipient else "")


def _at(name: str) -> str:
    """Member names are ``@Name``; accept ``Name`` too."""
    return name if name.startswith("@") else f"@{name}"


def format_message(message: AgentMessage) -> str:
    """``@Manager → @Human (response)`` then the content, for plain-text display."""
    sender = message.sender.name if message.sender else "?"
    recipient = message.recipient.name if message.recipient else "?"
    return f"{sender} → {recipient} ({message.type}):\n{message.content}"
