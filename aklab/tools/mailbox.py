"""MailboxTool: the operator's ``/stop`` and the model's ``read_mailbox``.

The card only offers the two surfaces. What they do mid-run (purging cancels, absorbing
the message the model named) is the agent's ``MailboxCapability``, which every agent
carries whether or not it has this card, so every run can be stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aklab.tools.card import ToolCard, ToolHost, offered_when

__all__ = ["NO_RUN_TO_CANCEL", "MailboxTool", "run_cancelled"]

NO_RUN_TO_CANCEL = "There is no run to cancel."


def run_cancelled(agent: str) -> str:
    """What a teammate whose ``/stop`` cancelled ``agent``'s run is told (a person is told by
    the agent's own notice instead)."""
    return f"{agent}'s run was cancelled."


class MailboxTool(ToolCard):
    name: str = "MailboxTool"
    description: str = "Stop the current run; read a message that arrived during it."
    read_mailbox: bool = True
    """Offer the model ``read_mailbox`` and announce mail that arrives mid-run."""
    mailbox_preview_handlers: list[str] | None = None
    """Message classes (by name) whose handlers may absorb mail mid-run. None: all; []: none."""

    def get_tools(self, host: ToolHost) -> list[Callable[..., Any]]:
        if not self.read_mailbox:
            return []

        def mail_waiting() -> bool:
            waiting = getattr(host, "mail_waiting", None)
            return bool(waiting()) if callable(waiting) else True

        @offered_when(mail_waiting)
        def read_mailbox(message_id: str) -> str:
            """Take on now the waiting message with this id (from the arrival notice)."""
            return f"Acknowledged {message_id}."

        return [read_mailbox]

    def get_commands(self, host: ToolHost) -> list[Callable[..., Any]]:
        def stop(*reason: str) -> str:
            """Cancel the current run."""
            # Mid-run, a /stop is purged by the agent's cancel hook before it could be
            # dispatched; reaching this command therefore proves nothing is running. Words
            # after it ("/stop the spec changed") are taken as they are mid-run, where any
            # text starting with /stop cancels: the answer must not depend on when it lands.
            return NO_RUN_TO_CANCEL

        return [stop]
