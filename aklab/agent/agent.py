"""BaseAgent: an actor that answers each AgentMessage with one LLM turn and routes it.

Choices where the reference leaves room:

- Slash commands are obeyed only from a user proxy (a human) unless
  ``AgentConfig.commands_from_agents`` is set; from anyone else, a ``/text`` is just text
  for the model. A model therefore cannot fire a member by writing ``/fire_member``.
- A slash command's result is recorded for the model as an *operator action* folded into
  its next prompt (not as a tool call of its own), and goes back to whoever sent the
  command, one line each, a teammate's mid-run ``/stop`` included
  (``aklab.agent.command_replies``).
- A model or provider failure during a turn tells the human in one line (what failed
  and what to do, e.g. ``context full: /compact or /clear``) and is reported as an
  ``ErrorMessage``; the agent keeps handling its next message.
- A plain-text answer (a model that does not follow the JSON or tool protocol) is
  delivered as a response to the sender of the message being answered.
- A request that ends with nothing delivered (an empty output, or every recipient
  unreachable) is never silent: the human is told in one line.
- The prompt of a turn (operator notes, the context-update block, the message) goes to
  the model as one string when it is all text: chat templates of local servers keep
  only string content.
- Every turn is charged to its *ask* (``aklab.core._asks``): the team guard bounds an
  ask's turns, tokens, cost, ping-pongs and repeated messages, and the agent whose turn
  trips it tells the human why and how to raise the limit. A stopped ask interrupts the
  run that holds it, wherever it is.
- An agent never messages itself; it hires at most ``TeamGuard.max_hires_per_turn``
  members per turn. Its model may fire only members it may route to, never a person or
  the team's entry agent; an operator (``/fire_member``) may fire anyone but a person or
  the entry agent.
"""

from __future__ import annotations

import logging
from collections import deque
from contextlib import AbstractContextManager, nullcontext
from datetime import date
from functools import partial
from typing import Any, TypeVar

from aklab.agent.capabilities import MailboxCapability, RunInterruptedError, cancel_reason, is_cancel
from aklab.agent.capabilities.recipients import RecipientCheckCapability
from aklab.agent.command_replies import done_line, reply_to_command, stops_from_teammates, undelivered_reply
from aklab.agent.config import AgentConfig, AgentState
from aklab.agent.digest import turn_line
from aklab.agent.events import (
    AgentBusyEvent,
    AgentSnapshotEvent,
    ContextUpdateEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    OperatorActionEvent,
    RoutingSkippedEvent,
)
from aklab.agent.messages import AgentMessage, Notice, split_leading_state
from aklab.agent.output_models import Request, StructuredOutput
from aklab.agent.usage_limits import guard_usage_limits
from aklab.agent.utils import resolve_recipient
from aklab.core import ActorAddress, AgentCard, Akgent, CancelMessage, Message, Orchestrator, TeamGuard
from aklab.errors import ActorGoneError, AklabError, ModelError, RoutingError
from aklab.llm import AgentUsageSummary, LlmUsageEvent, aggregate_usage
from aklab.llm.failures import RunCancelledError
from aklab.llm.history import modernize_unanswered
from aklab.llm.output_modes import messages_item_type
from aklab.tools import CommandDescriptor, CommandNotRecognized, CommandsAnnouncedEvent, TeamTool, ToolCard, ToolFactory
from aklab.tools.context import markers_in
from aklab.tools.mailbox import NO_RUN_TO_CANCEL, MailboxTool, run_cancelled

__all__ = ["BaseAgent"]


def _one_string(prompt: list[Any]) -> Any:
    """All-text prompt parts as one string; a single part as itself; media kept as a list."""
    if len(prompt) == 1:
        return prompt[0]
    if all(isinstance(p, str) for p in prompt):
        return "\n\n".join(prompt)
    return prompt


log = logging.getLogger("aklab.agent")

T = TypeVar("T")


class BaseAgent(Akgent[AgentConfig, AgentState]):
    """The collaborative LLM agent."""

    def __init__(self, config: AgentConfig | None = None, **wiring: Any) -> None:
        super().__init__(config or AgentConfig(name="@Agent", role="Agent"), **wiring)
        self.state = AgentState()
        self._pending_notes: list[str] = []
        self._skipped: list[str] = []  # routing skips, newest last ("@X: why")
        self._told_human = False  # this turn already told the human something (no second notice)
        self._marker_scan: tuple[int, int, set[int]] = (0, 0, set())
        self._hired_this_turn = 0
        self._cancel_reason: str | None = None
        self._snapshotted: list[Any] = []  # the history messages the last snapshot covered
        self._snapshotted_state: dict[str, Any] | None = None  # the state it recorded
        self._snapshot_due = False  # a snapshot waits for the end of the handling in progress
        self._replay: dict[str, list[Any]] = {}  # message id -> stored answers to do its handling again with

    # -- assembly -------------------------------------------------------------------
    def on_start(self) -> None:
        super().on_start()
        from aklab.llm.react import ReactAgent

        self.state.backstory = self.config.prompt.render()
        cards = self._assemble_cards()
        mailbox_card = next((c for c in cards if isinstance(c, MailboxTool)), None)
        allow_agents = self.config.commands_from_agents
        self.mailbox.classifier = lambda m: is_cancel(m, allow_agents=allow_agents)
        self._mailbox_capability = MailboxCapability(
            mailbox=lambda: self.mailbox,
            current_message=lambda: self.current_message,
            read_enabled=mailbox_card is not None and mailbox_card.read_mailbox,
            preview_handlers=mailbox_card.mailbox_preview_handlers if mailbox_card is not None else None,
            allow_agent_cancel=allow_agents,
            ask_over=self._ask_over,
            on_purged=self._cancels_purged,
        )
        factory = ToolFactory(cards, host=self)
        self._command_registry = factory.get_command_registry(extra_commands=[self.compact, self.clear])
        self._context_updater = factory.get_context_updater(lambda: self.state.tool_state)
        system_prompt = "\n\n".join(
            [self.state.backstory, *factory.get_system_prompts(), f"Today is {date.today().isoformat()}."]
        )
        self._react_agent = ReactAgent(
            name=self.config.name,
            role=self.config.role,
            model_cfg=self.config.model_cfg,
            system_prompt=system_prompt,
            tools=factory.get_tools(),
            capabilities=self._assemble_capabilities(),
            runtime_cfg=self.config.runtime_cfg,
            run_usage_limits=self.config.run_usage_limits,
            agent_usage_limits=self.config.agent_usage_limits,
            compaction_cfg=self.config.compaction_cfg,
            on_usage=self._on_usage,
            on_tool_call=self.notify_event,
            on_stream=self.notify_event,
            on_response=self._on_response,
            on_request=self._on_request,
            run_line=partial(turn_line, width=self.config.compaction_cfg.digest_line_chars),
            split_state=split_leading_state,
        )
        self.notify_event(CommandsAnnouncedEvent(agent=self.config.name, commands=self._command_registry.descriptors()))

    def _assemble_cards(self) -> list[ToolCard]:
        """Framework cards first, unless the config supplies its own of the same class."""
        supplied = list(self.config.tools)  # never mutate config.tools
        defaults: list[ToolCard] = [TeamTool(), MailboxTool()]
        missing = [d for d in defaults if not any(isinstance(c, type(d)) for c in supplied)]
        return [*missing, *supplied]

    def _assemble_capabilities(self) -> list[Any]:
        # The mailbox capability comes first and is never the hook's to return: every
        # run must stay cancellable, and a run about to be cancelled should not first
        # pay for a custom capability's work.
        return [self._mailbox_capability, RecipientCheckCapability(self), *self.extra_capabilities()]

    def extra_capabilities(self) -> list[Any]:
        """Override to add pydantic-ai capabilities around every model request.

        Called during ``on_start`` before the ReactAgent exists: read ``self.config``,
        touch nothing built later.
        """
        return []

    # -- ToolHost -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.config.name

    @property
    def role(self) -> str:
        return self.config.role

    def mail_waiting(self) -> bool:
        """A message other than a cancel is queued (``read_mailbox`` is offered only then)."""
        return len(self.mailbox) > self.mailbox.tagged_count()

    def team_members(self) -> list[ActorAddress]:
        return self.directory.members() if self.directory is not None else []

    def own_card(self) -> AgentCard | None:
        return self.directory.card(self.config.role) if self.directory is not None else None

    def hireable_cards(self) -> list[AgentCard]:
        card = self.own_card()
        if card is None or self.directory is None:
            return []
        cards = (self.directory.card(role) for role in card.routes_to)
        return [c for c in cards if c is not None]

    def hireable_roles(self) -> list[str]:
        return [c.role for c in self.hireable_cards()]

    def hire(self, role: str, name: str | None = None) -> ActorAddress:
        if role not in self.hireable_roles():
            allowed = ", ".join(self.hireable_roles()) or "none"
            raise RoutingError(f"{self.config.name} may not hire {role!r} (may hire: {allowed})")
        cap = self._guard().max_hires_per_turn if self._system is not None else None
        if cap is not None and self._hired_this_turn >= cap:
            raise RoutingError(
                f"{self.config.name} may hire at most {cap} members per turn (TeamGuard.max_hires_per_turn); "
                "address the members you have as @Name"
            )
        address: ActorAddress = self._orchestrator_proxy().hire(role, name, during=self._holding())
        self._hired_this_turn += 1
        return address

    def fire(self, name: str, *, by_operator: bool = False) -> bool:
        """Fire ``name``. The model may fire only members of roles it routes to; an operator
        (a person's ``/fire_member``) anyone but a person or the entry agent."""
        member = self.get_team_member(name)
        if member is None and not name.startswith("@"):
            member = self.get_team_member(f"@{name}")  # "/fire_member Developer", as /hire_member is spelled
        if member is None:
            return False
        if member.is_user_proxy:
            raise RoutingError(f"{member.name} is a person and cannot be fired")
        if member == self.myAddress and not by_operator:
            raise RoutingError(f"{member.name} cannot fire itself")
        if not by_operator and member.role not in self.hireable_roles():
            may = ", ".join(self.hireable_roles()) or "none"
            raise RoutingError(f"{self.config.name} may fire only members of the roles it routes to ({may})")
        return bool(self._orchestrator_proxy().stop_member(member))

    def _guard(self) -> TeamGuard:
        assert self._system is not None
        return self._system.asks.guard

    # -- asks -------------------------------------------------------------------------------
    @property
    def ask_id(self) -> str | None:
        """The ask of the message being handled."""
        current = self.current_message
        return current.ask_id if current is not None else None

    def _ask_over(self) -> bool:
        return self._system is not None and self._system.asks.is_cancelled(self.ask_id)

    def _on_usage(self, event: LlmUsageEvent) -> None:
        ask_id = self.ask_id
        if ask_id is not None:
            event.ask_id = ask_id
        self.notify_event(event)
        if self._system is not None:
            reason = self._system.asks.charge_usage(ask_id, event.total_tokens, event.cost_usd)
            if reason is not None:
                self._tell_guard_tripped(reason)

    def _tell_guard_tripped(self, reason: str) -> None:
        self.notify_human(
            f"{self.config.name}: {reason}. Raise the limit (lab.guard.<name> = N, or Lab(..., guard=TeamGuard(...))) "
            "or ask again more narrowly."
        )

    def _orchestrator_proxy(self) -> Orchestrator:
        if self._system is None or self._orchestrator is None:
            raise RoutingError(f"{self.config.name} is not part of a team (no orchestrator)")
        return self._system.proxy_ask(self._orchestrator, Orchestrator)

    # -- TeamResolver ------------------------------------------------------------------
    def get_team_member(self, name: str) -> ActorAddress | None:
        """The live member named ``name``, or the one it names but for case (models write
        "@manager" for @Manager: a retry to fix that costs a request, and the intent is clear)."""
        if self.directory is None:
            return None
        return self.directory.member(name) or self.directory.member_ignoring_case(name)

    def hire_member(self, role: str, name: str | None = None) -> ActorAddress:
        """Hire through the registry's typed ``hire_member`` command (TeamTool)."""
        if not self._command_registry.has("hire_member"):
            raise RuntimeError("hire_member command not available: TeamTool not configured")
        address: ActorAddress = self._command_registry.callable("hire_member")(role, name)
        return address

    def report_unroutable(self, recipient: str, reason: str) -> None:
        self._skipped = [*self._skipped[-15:], f"{recipient}: {reason}"]
        self.notify_event(RoutingSkippedEvent(agent=self.config.name, recipient=recipient, reason=reason))

    # -- the turn -------------------------------------------------------------------------
    def receiveMsg_AgentMessage(self, message: AgentMessage, sender: ActorAddress | None) -> None:
        if message.content.startswith("/") and self._may_command(sender):
            if self._dispatch_command(message, sender):
                return
        self._told_human = False
        self._hired_this_turn = 0
        if self._system is not None:
            reason = self._system.asks.charge_turn(message.ask_id)
            if reason is not None:
                self._tell_guard_tripped(reason)
                return
        try:
            output = self.act(message, StructuredOutput)
        except ModelError as exc:
            self._tell_requester_of_failure(message, sender, exc)
            raise
        skipped = len(self._skipped)
        delivered = self._route_output(output)
        if (
            not delivered
            and message.type == "request"
            and sender is not None
            and not self._told_human
            and not self._ask_over()
        ):
            why = "; ".join(self._skipped[skipped:]) or "it sent nothing"
            self.notify_human(f"{self.config.name} did not reply to {sender.name}: {why}. Ask again or rephrase.")

    def _tell_requester_of_failure(self, message: AgentMessage, sender: ActorAddress | None, exc: ModelError) -> None:
        """A teammate's request this agent's model could not answer: the teammate is told, so
        it can work on without it (the human has been told by ``act``). Not for the human's
        own requests, nor for an ask that is over."""
        if message.type != "request" or sender is None or sender.is_user_proxy or self._ask_over():
            return
        cause = exc.__cause__
        why = self._react_agent.describe(cause) if isinstance(cause, Exception) else str(exc)
        self.send(
            sender,
            AgentMessage(content=f"{self.config.name} could not answer your request: {why}", type="response"),
        )

    def on_undelivered(self, message: Message, reason: str) -> None:
        """A message this agent sent was dropped (its recipient failed to start, or was fired
        before reading it): say so, once.
        A reply to a teammate's command is only logged: its sender left, no one is waiting."""
        if undelivered_reply(self, message, reason):
            return
        super().on_undelivered(message, reason)
        if isinstance(message, AgentMessage):
            self.notify_human(f"{self.config.name}'s message was not delivered: {reason}. Ask again or check the team.")

    def on_cancel_arrived(self) -> None:
        """A cancel reached the mailbox (sender's thread): abandon the model request in flight."""
        react = getattr(self, "_react_agent", None)
        if react is not None:
            react.interrupt()

    def receiveMsg_CancelMessage(self, message: CancelMessage, sender: ActorAddress | None) -> None:
        # Mid-run, a cancel is purged by the hook and never dispatched: reaching this
        # handler proves no run was in flight.
        log.info("%s: cancel from %s with no run in flight", self.config.name, sender.name if sender else "code")
        if sender is not None and sender.is_user_proxy:
            self.send(sender, AgentMessage(content=NO_RUN_TO_CANCEL, type="acknowledgment"))

    @guard_usage_limits()
    def act(self, message: Message, output_type: type[T]) -> T:
        """One LLM turn on ``message``, answering in ``output_type``.

        A cancelled run ends here: the human is told once, and a default ``output_type()``
        is returned (or the interruption re-raised if the type has required fields).
        """
        current = self.current_message
        self._cancel_reason = None  # a stop's reason left by a command it interrupted (/compact) is not this run's
        if self._replay or self._react_agent.replay:  # answers stored for this handling; none left from the last
            self._react_agent.replay = deque(self._replay.pop(current.id, ()) if current is not None else ())
        # Only the summarize strategy sends a request while compacting: stopped like a run. The
        # sliding window sends none, and every turn need not register with the ask for nothing.
        summarizes = self._react_agent.compaction_cfg.strategy == "summarize"
        try:
            with self._asks_running() if summarizes else nullcontext():
                self._react_agent.maybe_compact(deps=self)
        except RunCancelledError:
            self._purge_cancels()
            return self._interrupted(output_type)
        if self._react_agent.summary_failed:
            self.notify_human(
                f"{self.config.name} could not summarize its older turns ({self._react_agent.summary_failed}); "
                "they were dropped to make room, and its answer follows."
            )
        prompt: list[Any] = [*self._pending_notes]
        self._pending_notes.clear()
        block = self._deliver_context_update()
        if block is not None:
            prompt.append(block)
        rendered: Any = message.render_for_llm()  # type: ignore[attr-defined]
        if self._command_registry.has("_expand_media_refs"):
            rendered = self._command_registry.callable("_expand_media_refs")(rendered)
        prompt.extend(rendered if isinstance(rendered, list) else [rendered])
        sender = getattr(message, "sender", None)
        self.notify_event(AgentBusyEvent(agent=self.config.name, role=self.config.role, busy=True))
        try:
            with self._asks_running():
                output = self._react_agent.run_sync(
                    _one_string(prompt),
                    deps=self,
                    output_type=output_type,
                    fallback=self._text_fallback(output_type, sender),
                    recipients=self._reachable(sender),
                )
            if self._react_agent.last_cut:
                self.notify_human(
                    f"{self.config.name}'s answer was cut off at the model's max_tokens limit; what it wrote is "
                    "delivered as it stands. Raise the limit (%aklab model ... --max-tokens N, or "
                    "ModelConfig(max_tokens=N)) or ask for less."
                )
            elif self._react_agent.last_unfinished:
                self.notify_human(
                    f"{self.config.name}'s answer ended without the server saying it was finished (no finish "
                    "reason): it may be cut short, and is delivered as it stands. Ask again if it looks incomplete."
                )
            return output
        except RunCancelledError:
            self._purge_cancels()
            return self._interrupted(output_type)
        except RunInterruptedError:
            return self._interrupted(output_type)
        except AklabError:
            raise
        except Exception as exc:
            line = self._react_agent.describe(exc)
            self.notify_human(f"{self.config.name} could not answer: {line}")
            raise ModelError(f"{self.config.name}: model call failed: {line}") from exc
        finally:
            self.notify_event(AgentBusyEvent(agent=self.config.name, role=self.config.role, busy=False))
            self._snapshot()

    def _asks_running(self) -> AbstractContextManager[None]:
        """While the run is in flight, stopping its ask interrupts it."""
        if self._system is None:
            return nullcontext()
        return self._system.asks.running(self.ask_id, self._react_agent.interrupt, self.config.name)

    def _cancels_purged(self, removed: list[Any]) -> None:
        reasons = [r for r in map(cancel_reason, removed) if r is not None]
        self._cancel_reason = reasons[-1] if reasons else None
        for stop in stops_from_teammates(removed):  # a person hears of it from _interrupted
            reply_to_command(self, stop, run_cancelled(self.config.name))

    # -- what a resume needs (only when the team keeps an event store) --------------------------
    def _snapshot(self) -> None:
        """A run or command changed what a resume needs: inside a handling, the record of its
        end carries the snapshot (``_handling_snapshot``); outside one, it is recorded now."""
        if self._system is None or not self._system.persist:
            return
        if self._recording:
            self._snapshot_due = True
            return
        self.notify_event(self._take_snapshot())

    def _handling_snapshot(self) -> AgentSnapshotEvent | None:
        if not self._snapshot_due:
            return None
        self._snapshot_due = False
        return self._take_snapshot()

    def _take_snapshot(self) -> AgentSnapshotEvent:
        history = self._react_agent.messages
        start, refs, new = _history_change(self._snapshotted, history)
        self._snapshotted = list(history)
        state = self.state.model_dump(mode="json")
        unchanged = state == self._snapshotted_state
        self._snapshotted_state = state
        return AgentSnapshotEvent(
            agent=self.config.name,
            agent_id=self.myAddress.agent_id,
            start=start,
            refs=refs,
            messages=new,
            state=None if unchanged else state,
        )

    def _stored_handling(self) -> str | None:
        """The id of the message this member handles now, in a team with an event store."""
        handling = self._holding()
        if handling is None or self._system is None or not self._system.persist:
            return None
        return handling

    def _on_response(self, response: Any, usage: LlmUsageEvent) -> None:
        """A model outside this process answered: in a stored team's handling, store the answer
        at once (a handling done again after a crash gives it again instead of asking twice)."""
        handling = self._stored_handling()
        if handling is None:
            return
        usage.ask_id = self.ask_id
        self.notify_event(
            ModelResponseEvent(
                agent=self.config.name,
                agent_id=self.myAddress.agent_id,
                message_id=handling,
                run_id=usage.run_id,
                response=response,
                usage=usage,
            )
        )

    def _on_request(self, run_id: str) -> None:
        """A request is about to go to a model outside this process: in a stored team's
        handling, store that first (a resume can then tell a request the crash cut short)."""
        handling = self._stored_handling()
        if handling is None:
            return
        profile = self._react_agent.profile
        self.notify_event(
            ModelRequestEvent(
                agent=self.config.name,
                agent_id=self.myAddress.agent_id,
                message_id=handling,
                run_id=run_id,
                model=profile.label,
                local=profile.local,
            )
        )

    def history(self) -> list[Any]:
        """A copy of this agent's model history (pydantic-ai messages)."""
        return list(self._react_agent.messages)

    def restore(
        self,
        messages: list[Any],
        state: dict[str, Any],
        usage: list[LlmUsageEvent],
        replay: dict[str, list[Any]] | None = None,
    ) -> None:
        """Take back a stored history (pydantic-ai messages, or their JSON dicts), state and lifetime usage
        (``Lab.resume``), before any mail; ``replay``: for a message whose handling a crash cut short,
        the answers its model gave by then (``ModelResponseEvent``), given again when it is handled."""
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        from aklab.llm.react import FAILED, INTERRUPTED

        stored = list(ModelMessagesTypeAdapter.validate_python(messages))
        # A history stored before failed runs took today's form is read in today's form; the
        # next snapshot records the change against what is stored (the same objects elsewhere).
        self._react_agent.messages = modernize_unanswered(stored, FAILED, INTERRUPTED)
        self._snapshotted = stored
        self._snapshotted_state = None  # the first snapshot after a resume records it whole
        if state:
            self.state = type(self.state).model_validate(state)
        self._react_agent.budget.rebuild(usage)
        self._replay = dict(replay or {})

    def _interrupted(self, output_type: type[T]) -> T:
        reason, self._cancel_reason = self._cancel_reason, None
        self.notify_human(
            f"Run interrupted: {reason}. ({self.config.name})" if reason else f"Run interrupted. ({self.config.name})"
        )
        try:
            return output_type()
        except Exception:
            raise RunInterruptedError(f"{self.config.name}: run interrupted") from None

    def _purge_cancels(self) -> None:
        """The cancel that interrupted the request is still queued: consume it now."""
        try:
            self._mailbox_capability.check_cancel()
        except RunInterruptedError:
            pass

    def _text_fallback(self, output_type: type[T], sender: ActorAddress | None) -> Any:
        """Plain text from the model becomes a response to whoever sent the message."""
        item = messages_item_type(output_type)
        if item is None or sender is None or "message_type" not in item.model_fields:
            return None
        to = sender.name

        def deliver(text: str) -> Any:
            return output_type(messages=[item(recipient=to, message_type="response", message=text)])  # type: ignore[call-arg]

        return deliver

    def _reachable(self, sender: ActorAddress | None) -> list[str]:
        """Who this turn's output may address: the sender first, the human, own routes."""
        names: list[str] = []
        if sender is not None and sender != self.myAddress:
            names.append(sender.name)
        roles = self.hireable_roles()
        for member in self.team_members():
            if member == self.myAddress or member.name in names:
                continue
            if member.is_user_proxy or member.role in roles:
                names.append(member.name)
        hired = {m.role for m in self.team_members()}
        names.extend(r for r in roles if r not in hired)
        return names

    def _deliver_context_update(self) -> str | None:
        block = self._context_updater.compose(self._visible_markers())
        if block is not None:
            number = self.state.tool_state.counter
            self.notify_event(ContextUpdateEvent(agent=self.config.name, number=number, block=block))
        return block

    def _visible_markers(self) -> set[int]:
        """Markers in the history, scanning only what was appended since the last look."""
        history = self._react_agent.messages
        first = id(history[0]) if history else 0
        seen_first, scanned, markers = self._marker_scan
        if first != seen_first or scanned > len(history):
            scanned, markers = 0, set()
        # pydantic-ai may merge the next prompt into the last request: look at it again.
        scanned = max(0, scanned - 1)
        texts = []
        for msg in history[scanned:]:
            for part in msg.parts:
                content = getattr(part, "content", None)
                if part.part_kind == "user-prompt":
                    texts.extend([content] if isinstance(content, str) else [c for c in content if isinstance(c, str)])  # type: ignore[union-attr]
        markers = markers | markers_in(texts)
        self._marker_scan = (first, len(history), markers)
        return markers

    def _route_output(self, output: StructuredOutput) -> bool:
        """Deliver each request raw; returns whether anything was delivered."""
        delivered = False
        asks = self._system.asks if self._system is not None else None
        for request in output.messages:
            member = self._recipient_of(request)
            if member is None:
                continue
            if member == self.myAddress:
                self.report_unroutable(request.recipient, "that is you; answer the sender or address another member")
                continue
            if asks is not None and not member.is_user_proxy:
                reason = asks.charge_message(self.ask_id, self.config.name, member.name, request.message)
                if reason is not None:
                    self._tell_guard_tripped(reason)
                if asks.is_cancelled(self.ask_id):
                    continue
            try:
                self.send(member, AgentMessage(content=self._within_cap(request.message), type=request.message_type))
            except ActorGoneError:  # fired or failed between lookup and delivery
                self.report_unroutable(request.recipient, f"{member.name} stopped before the message was delivered")
                continue
            delivered = True
        return delivered

    def _recipient_of(self, request: Request) -> ActorAddress | None:
        """Who gets ``request``: its recipient, or for a response that names no one it can
        reach (the recipient check's retries spent), whoever sent the message being answered:
        a response is for the asker, and skipping it lost the answer. Reported either way."""
        asker = None
        if request.message_type == "response" and self.current_message is not None:
            sender = self.current_message.sender
            asker = sender if sender is not None and sender != self.myAddress else None
        return resolve_recipient(self, request.recipient, otherwise=asker)

    def _within_cap(self, text: str) -> str:
        cap = self._guard().max_message_chars if self._system is not None else None
        if cap is None or len(text) <= cap:
            return text
        return (
            f"{text[:cap]}\n[… cut: the message was {len(text):,} characters; TeamGuard.max_message_chars is {cap:,}]"
        )

    # -- commands ---------------------------------------------------------------------------
    def _may_command(self, sender: ActorAddress | None) -> bool:
        return sender is not None and (sender.is_user_proxy or self.config.commands_from_agents)

    def _dispatch_command(self, message: AgentMessage, sender: ActorAddress | None) -> bool:
        """Run a ``/command``; False if it is not one (the text then goes to the model)."""
        if self._command_registry.asks_for_help(message.content):  # nothing changes: not told to the model
            reply_to_command(self, message, self._command_registry.help_text(self.config.name))
            return True
        try:
            result = self._command_registry.dispatch(message.content)
        except CommandNotRecognized:
            return False
        if result is None:
            if sender is not None and not sender.is_user_proxy:
                reply_to_command(self, message, done_line(message.content))
            return True
        operator = sender.name if sender is not None else "@Operator"
        reply_to_command(self, message, result)
        self._pending_notes.append(f"Operator action by {operator}: {message.content}\nResult: {result}")
        self.notify_event(
            OperatorActionEvent(agent=self.config.name, operator=operator, command=message.content, result=result)
        )
        self._snapshot()
        return True

    def run_command(self, text: str) -> str | None:
        """The registry's text surface, for code holding a proxy: ``"/team_members"``."""
        return self._command_registry.dispatch(text)

    def call_command(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The registry's typed surface: the command's native return value."""
        return self._command_registry.callable(name)(*args, **kwargs)

    def commands(self) -> list[CommandDescriptor]:
        return self._command_registry.descriptors()

    def clear(self) -> str:
        """Forget the conversation; the next context update is a full snapshot (block 1)."""
        self._react_agent.clear()
        self._context_updater.reset()
        self._pending_notes.clear()
        return "Context cleared."

    @guard_usage_limits()
    def compact(self) -> str:
        """Shorten the conversation, keeping the most recent turns."""
        cfg = self.config.compaction_cfg
        try:
            with self._asks_running():  # its summary request is stopped as a run is
                removed = self._react_agent.compact(deps=self)
        except RunCancelledError:
            self._purge_cancels()  # the /stop that did it is answered here, not run as a command after
            self._cancel_reason = None
            raise ModelError("stopped before the summary came back. Nothing was compacted.") from None
        except AklabError:
            raise
        except Exception as exc:  # the summary request: a provider's raw error is no line for a human
            failed = self._react_agent.describe(exc)
            raise ModelError(f"the summary request failed: {failed}. Nothing was compacted.") from exc
        return f"Compacted ({cfg.strategy}): {removed} messages removed, last {cfg.keep_last} turns kept."

    def on_stop(self) -> None:
        super().on_stop()
        react = getattr(self, "_react_agent", None)
        if react is not None:
            react.close()

    # -- people and usage -------------------------------------------------------------------
    def notify_human(self, text: str) -> None:
        """Tell the team's human (its user proxy), or log if there is none."""
        self._told_human = True
        human = next((m for m in self.team_members() if m.is_user_proxy), None)
        if human is None:
            log.warning("%s: no human to tell: %s", self.config.name, text)
            return
        self.send(human, Notice(content=text))

    def get_usage_summary(self, by_run: bool = False) -> AgentUsageSummary:
        """Everything this agent used since it started, in total and by model (running sums:
        the same cost after a million requests). ``by_run`` adds a row per run, from the
        team log's recent usage events (the newest few thousand of the team)."""
        if not by_run:
            return self._react_agent.budget.summary(self.config.name)
        events = [m.event for m in self._orchestrator_proxy().get_events(LlmUsageEvent)]
        return aggregate_usage(events, agent=self.config.name, by_run=by_run)


def _history_change(before: list[Any], history: list[Any]) -> tuple[int, list[int], list[Any]]:
    """How ``history`` differs from ``before`` (see ``AgentSnapshotEvent``): ``(start, [], new)``
    when it only appends after a common prefix, else ``(0, refs, new)``.

    Equal prefixes compare cheaply (the same objects, or equal values). After them, a
    message of ``before`` is found again by identity: a turn merges the previous run's
    closing request into its first one (shifting what follows), and a digest fold replaces
    the first message and drops old turns, keeping the rest as they were."""
    start, limit = 0, min(len(history), len(before))
    while start < limit and (history[start] is before[start] or history[start] == before[start]):
        start += 1
    if start == len(history) or start == len(before):
        return start, [], list(history[start:])
    where = {id(m): i for i, m in enumerate(before) if i >= start}
    refs = list(range(start))
    new: list[Any] = []
    for message in history[start:]:
        i = where.get(id(message), -1)
        if i < 0:
            new.append(message)
        refs.append(i)
    if len(new) == len(history) - start:  # nothing found again: the plain form is shorter
        return start, [], new
    return 0, refs, new
