"""MailboxCapability: cancellation and the mid-run arrival notice.

Every BaseAgent builds one, unconditionally (not from a card), so every run can be
stopped. Before each model request, and once more after each model response:

1. **Cancel check.** O(1): the ask being handled was stopped (``ask_over``), or a
   cancel is pending (the mailbox counts cancels as they arrive; ``is_cancel`` is its
   classifier). When one is pending, every pending cancel is purged (one
   ``HandledMessage`` each) and :class:`RunInterruptedError` is raised. Checking after
   the response too means an answer that was in flight when the cancel landed is
   dropped rather than routed (a choice beyond the reference, which only checks before
   requests; a tool-free single completion is therefore cancellable here).
2. **Arrival notice** (only when the agent's MailboxTool offers ``read_mailbox``). Mail
   that arrived since the last look, O(new arrivals), is announced once, through
   ``ctx.enqueue(..., priority="asap")``. A notice still queued when the run reaches its
   end is withdrawn, so the run's own final output is what the run returns.

``read_mailbox(id)`` absorbs exactly that message (if it was offered) and injects its
rendering; an unknown id is a no-op.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_graph import End

from aklab.core import CancelMessage, Mailbox, Message
from aklab.errors import AklabError

log = logging.getLogger("aklab.agent")

__all__ = [
    "MailboxCapability",
    "MailboxRenderError",
    "RunInterruptedError",
    "cancel_reason",
    "is_cancel",
    "render_arrival_notice",
]

STOP_COMMAND = "/stop"


class RunInterruptedError(AklabError):
    """The current run was cancelled (``/stop`` or ``CancelMessage``)."""


class MailboxRenderError(AklabError):
    """A queued message could not be shown to the model (its ``mailbox_preview`` or
    ``render_for_llm`` failed). The message is not lost: it stays queued and reaches the
    agent as its own turn; the model is told it cannot be read now."""


def is_cancel(message: Any, *, allow_agents: bool = False) -> bool:
    """The one predicate for cancel vocabulary: a CancelMessage, or ``/stop`` text.

    ``/stop`` counts only from a human (a user proxy) unless ``allow_agents``: a model
    must not be able to stop a run by writing ``/stop`` into a message.
    """
    if isinstance(message, CancelMessage):
        return True
    content = getattr(message, "content", None)
    if not isinstance(content, str) or content.strip().split(maxsplit=1)[:1] != [STOP_COMMAND]:
        return False
    sender = getattr(message, "sender", None)
    return allow_agents or (sender is not None and bool(sender.is_user_proxy))


def cancel_reason(message: Any) -> str | None:
    """Why a cancel was sent: a ``CancelMessage``'s ``reason``, or the words after ``/stop``."""
    reason = getattr(message, "reason", None)
    if reason is None and isinstance(getattr(message, "content", None), str):
        reason = message.content.strip()[len(STOP_COMMAND) :]
    if not isinstance(reason, str):
        return None
    return reason.strip() or None


def render_arrival_notice(lines: list[str], *, any_offered: bool) -> str:
    count = len(lines)
    head = f"{count} new message{'s' if count != 1 else ''} arrived while you were working:"
    if any_offered:
        tail = (
            "Finish your current work first. To take one on now, call read_mailbox with one of "
            "the ids above; the others will reach you just after."
        )
    else:
        tail = "Finish your current work first — you will get them just after."
    return "\n".join([head, *lines, tail])


@dataclass
class MailboxCapability(AbstractCapability[Any]):
    mailbox: Callable[[], Mailbox]
    current_message: Callable[[], Message | None]
    on_purged: Callable[[list[Any]], None] = lambda removed: None
    read_enabled: bool = False
    preview_handlers: list[str] | None = None
    allow_agent_cancel: bool = False
    ask_over: Callable[[], bool] = lambda: False
    """True once the ask being handled was stopped (by a person, the team guard, or close)."""
    _announced: set[str] = field(default_factory=set)
    _offered: dict[str, type] = field(default_factory=dict)
    _enqueued: list[str] = field(default_factory=list)
    _seen_seq: int = 0

    async def before_run(self, ctx: RunContext[Any]) -> None:
        self._announced = set()
        self._offered = {}
        self._enqueued = []
        self._seen_seq = self.mailbox().last_seq

    def check_cancel(self) -> None:
        if self.ask_over():
            raise RunInterruptedError("run interrupted: its ask was stopped")
        box = self.mailbox()
        if not box.has_tagged():
            return
        removed = box.remove(lambda m: is_cancel(m, allow_agents=self.allow_agent_cancel), tagged_only=True)
        if removed:
            self.on_purged(removed)
            raise RunInterruptedError("run interrupted")

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        self.check_cancel()
        if self.read_enabled:
            self._announce(ctx)
        return request_context

    async def after_model_request(self, ctx: RunContext[Any], *, request_context: Any, response: Any) -> Any:
        self.check_cancel()
        return response

    async def after_node_run(self, ctx: RunContext[Any], *, node: Any, result: Any) -> Any:
        if isinstance(result, End) and self._enqueued:
            for enqueue_id in self._enqueued:
                ctx.dequeue(enqueue_id)
            self._enqueued = []
        return result

    async def after_tool_execute(
        self, ctx: RunContext[Any], *, call: Any, tool_def: Any, args: Any, result: Any
    ) -> Any:
        if call.tool_name != "read_mailbox":
            return result
        message_id = str(args.get("message_id", "")) if isinstance(args, dict) else ""
        wanted = self._offered.pop(message_id, None)
        if wanted is None:
            return result
        box = self.mailbox()
        queued = [m for m in box.messages() if getattr(m, "id", None) == message_id and type(m) is wanted]
        try:
            rendered = [m.render_for_llm() for m in queued]  # type: ignore[attr-defined]
        except Exception as exc:
            error = MailboxRenderError(f"message {message_id} could not be rendered for the model: {exc}")
            log.warning("%s", error)
            return f"That message cannot be read now ({type(exc).__name__}); it will reach you after this run."
        taken = box.remove(lambda m: getattr(m, "id", None) == message_id and type(m) is wanted)
        for text in rendered[: len(taken)]:
            ctx.enqueue(text, priority="asap")
        return result

    # -- the notice ----------------------------------------------------------------------
    def _announce(self, ctx: RunContext[Any]) -> None:
        fresh, self._seen_seq = self.mailbox().arrivals_after(self._seen_seq)
        fresh = [m for m in fresh if isinstance(m, Message) and m.id not in self._announced]
        if not fresh:
            return
        current = self.current_message()
        lines = []
        for message in fresh:
            self._announced.add(message.id)
            if self._can_offer(message, current):
                try:
                    preview = message.mailbox_preview()  # type: ignore[attr-defined]
                except Exception as exc:  # shown as unreadable; it still arrives as its own turn
                    log.warning("%s", MailboxRenderError(f"message {message.id} has no preview: {exc}"))
                    lines.append("- Message cannot be previewed; it will reach you after this run")
                    continue
                self._offered[message.id] = type(message)
                lines.append(f"- {preview} (id: {message.id})")
            else:
                lines.append("- Message cannot be handled in the run")
        notice = render_arrival_notice(lines, any_offered=any("(id: " in line for line in lines))
        enqueue_id = ctx.enqueue(notice, priority="asap")
        if enqueue_id is not None:
            self._enqueued.append(enqueue_id)

    def _can_offer(self, message: Message, current: Message | None) -> bool:
        if current is None or not callable(getattr(message, "mailbox_preview", None)):
            return False
        handlers = self.preview_handlers
        if handlers is not None and type(current).__name__ not in handlers:
            return False
        if type(message) is not type(current):
            return False
        return not is_cancel(message, allow_agents=self.allow_agent_cancel)
