"""AgentMessage: the one message type agents exchange, carrying the sender's intent."""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from pydantic import PrivateAttr

from aklab._text import one_line
from aklab.agent.output_models import REPLY_PROTOCOLS, Intent
from aklab.core import Message
from aklab.tools.context import SUFFIX_FULL

__all__ = ["AgentMessage", "LlmRenderable", "MailboxPreviewable", "Notice", "split_leading_state"]

#: A prompt that opens with a full context-update block, then a received message.
_LEADING_STATE = re.compile(
    rf"\A(\*\*Context update \d+\*\* — {re.escape(SUFFIX_FULL)}\n\n.*?)\n\n(?=You received an? \w+ from )", re.S
)


def split_leading_state(prompt: str) -> tuple[str, str] | None:
    """The full context-update block a prompt opens with, and the received message after it
    (``AgentMessage.render_for_llm``); None for any other prompt. What
    ``aklab.llm.system_state`` sends in the system message for open models."""
    found = _LEADING_STATE.match(prompt)
    return None if found is None else (found.group(1), prompt[found.end() :])


@runtime_checkable
class LlmRenderable(Protocol):
    def render_for_llm(self) -> str: ...


@runtime_checkable
class MailboxPreviewable(Protocol):
    def mailbox_preview(self) -> str: ...


class AgentMessage(Message):
    """Content plus intent. The receiver frames it for its model with ``render_for_llm``."""

    type: Intent = "request"
    content: str
    _command_reply: bool = PrivateAttr(default=False)
    """A member's answer to a ``/command`` a teammate sent it (``aklab.agent.command_replies``)."""

    def sender_name(self) -> str:
        return self.sender.name if self.sender is not None else "@Unknown"

    def render_for_llm(self) -> str:
        """One line saying what arrived and whether a reply is expected, then the content."""
        sender = self.sender_name()
        article = "an" if self.type[0] in "aeiou" else "a"
        protocol = REPLY_PROTOCOLS.get(self.type, "").format(sender=sender)
        return f"You received {article} {self.type} from {sender}. {protocol}\n\n{self.content}"

    def mailbox_preview(self, limit: int = 80) -> str:
        return f"{self.type} from {self.sender_name()}: {one_line(self.content, limit)}"


class Notice(AgentMessage):
    """aklab's own word to the human about an ask, not an agent's answer: a failure ("could
    not answer: cannot reach the model server"), a stop, a limit hit, a message not delivered.
    Sent by ``BaseAgent.notify_human``. A batch counts an ask answered only by notices as
    failed (``AskResult.answers`` leaves them out)."""

    type: Intent = "notification"
