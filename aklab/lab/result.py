"""AskResult: what one ask brought back, as a list of replies with a summary around it.

``lab.ask(...)`` returns one (and ``%%ask`` makes it the cell's value, ``_``). It *is* the
list of messages that reached the human for that ask, so code written against a plain
list keeps working, and it adds what a notebook user looks at next: the ask's id, its
usage (requests, tokens, cost of every agent it involved), its runs, and whether it was
stopped or (a result read before the team went quiet: ``lab.result``, ``%%ask --bg --out``)
still running. In a notebook it renders once, as Markdown (each reply under its sender); as
text it is the same without markup.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from aklab._text import counted, one_line
from aklab.agent import AgentMessage, Notice
from aklab.llm import LlmUsageEvent
from aklab.llm.usage import headline

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AskResult", "intent_label"]


class AskResult(list[AgentMessage]):
    """The replies of one ask (the list), plus ``ask_id``, ``usage()``, ``run_ids``, ``stopped`` and ``ok``;
    ``answers`` and ``notices`` split the replies into the agents' and aklab's own."""

    def __init__(
        self,
        replies: Iterable[AgentMessage],
        *,
        ask_id: str | None = None,
        usage_events: Sequence[LlmUsageEvent] = (),
        stopped: bool = False,
        running: bool = False,
        conversation: Sequence[AgentMessage] = (),
        asked: dict[str, list[Any]] | None = None,
    ) -> None:
        super().__init__(replies)
        self.ask_id = ask_id
        self.usage_events = list(usage_events)
        self.stopped = stopped
        self.running = running
        """The team still had work of this ask, queued or in a run, when this was read."""
        self.conversation = list(conversation)
        """Every message of the ask, between agents too, in order."""
        self._asked = asked  # when it was sent (UsageRows.begun): its row by ask before any usage

    @property
    def run_ids(self) -> list[str]:
        """The agent runs this ask caused, in the order they reported usage."""
        return list(dict.fromkeys(e.run_id for e in self.usage_events))

    @property
    def text(self) -> str:
        """The replies' contents, one after the other."""
        return "\n\n".join(m.content for m in self)

    @property
    def answers(self) -> list[AgentMessage]:
        """The replies the agents gave, without aklab's notices (a failure, a stop, a limit)."""
        return [m for m in self if not isinstance(m, Notice)]

    @property
    def notices(self) -> list[Notice]:
        """aklab's notices among the replies: "@Manager could not answer: ...", a stop, a limit."""
        return [m for m in self if isinstance(m, Notice)]

    @property
    def ok(self) -> bool | None:
        """``lab.usage(by="ask")``'s ``ok`` for this ask: False if stopped or a notice is among
        the replies, None (not known yet) while it is still running, else True."""
        if self.stopped or self.notices:
            return False
        return None if self.running else True

    def usage(self, by: str = "agent") -> pd.DataFrame:
        """Requests, tokens and cost of this ask alone (by agent, run, model, ask or request)."""
        from aklab.lab.frames import usage_frame

        failed = [self.ask_id] if self.ok is False and self.ask_id is not None else []
        running = [self.ask_id] if self.ok is None and self.ask_id is not None else []
        return usage_frame(self.usage_events, by=by, failed_asks=failed, running_asks=running, asks_begun=self._asked)

    def totals(self) -> dict[str, Any]:
        """Requests, tokens (None when any request's count is unknown) and cost (None when unpriced)."""
        return headline(self.usage_events)

    def summary(self) -> str:
        """One line: replies, requests, tokens, cost (``estimated`` marked), stopped."""
        t = self.totals()
        tokens = "unknown tokens" if t["tokens"] is None else f"{t['tokens']:,} tokens"
        if any(e.estimated for e in self.usage_events) and t["tokens"] is not None:
            tokens += " (estimated)"
        cost = "cost unknown" if t["cost_usd"] is None else f"${t['cost_usd']:.4f}"
        line = f"{counted(len(self), 'reply', 'replies')} · {counted(t['requests'], 'request')} · {tokens} · {cost}"
        return line + (" · stopped" if self.stopped else " · still running" if self.running else "")

    def why_no_reply(self) -> str | None:
        """Why nothing reached the human for this ask (None if something did), from what is known:
        a stop, the messages the team passed, the runs it made."""
        if self:
            return None
        if self.stopped:
            return "the ask was stopped before anyone wrote to you"
        if self.running:
            return "the team is still working on it"
        later = [m for m in self.conversation if m.id != self.ask_id]
        if later:
            last = later[-1]
            return (
                f"the team went quiet without writing to you: {counted(len(later), 'message')} passed between "
                f"its members, the last from {_sender(last)} to {_recipient(last)} ({intent_label(last)}), "
                f"and {_recipient(last)} sent nothing on; ask again, or ask {_recipient(last)} what it found"
            )
        if self.usage_events:
            agents = ", ".join(dict.fromkeys(e.agent for e in self.usage_events))
            return f"{agents} made {counted(len(self.usage_events), 'model request')} and sent no message; ask again"
        return None

    def as_text(self) -> str:
        why = self.why_no_reply()
        return "\n\n".join(_plain(m) for m in self) or ("(no reply)" if why is None else f"(no reply: {why})")

    def as_markdown(self) -> str:
        """The replies, then (folded) the whole conversation of the ask: a saved notebook keeps it."""
        blocks = [f"**{_sender(m)}** *({intent_label(m)})*\n\n{m.content}" for m in self]
        why = self.why_no_reply()
        text = "\n\n---\n\n".join(blocks) or ("*(no reply)*" if why is None else f"*(no reply: {why})*")
        if len(self.conversation) > len(self):
            rows = "\n\n".join(
                f"**{_sender(m)} → {_recipient(m)}** *({intent_label(m)})*: {one_line(m.content)}"
                for m in self.conversation
            )
            text += (
                f"\n\n<details><summary>The whole conversation ({len(self.conversation)} messages)</summary>"
                f"\n\n{rows}\n\n</details>"
            )
        return text

    def as_json(self) -> list[dict[str, Any]]:
        return [
            {
                "sender": _sender(m),
                "recipient": m.recipient.name if m.recipient else None,
                "type": m.type,
                "content": m.content,
                "ask_id": m.ask_id,
            }
            for m in self
        ]

    def _repr_markdown_(self) -> str:
        return self.as_markdown()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.as_text())

    def __repr__(self) -> str:
        return f"<AskResult {self.summary()}>"


def _sender(message: AgentMessage) -> str:
    return message.sender.name if message.sender is not None else "?"


def _plain(message: AgentMessage) -> str:
    return f"{_sender(message)} ({intent_label(message)}):\n{message.content}"


def _recipient(message: AgentMessage) -> str:
    return message.recipient.name if message.recipient else "?"


def intent_label(message: AgentMessage) -> str:
    """The intent shown: "notice" for aklab's own word (a failure, a stop, a limit)."""
    return "notice" if isinstance(message, Notice) else message.type
