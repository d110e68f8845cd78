"""Capabilities the agent wires into every run itself (not contributed by cards)."""

from aklab.agent.capabilities.mailbox import (
    MailboxCapability,
    MailboxRenderError,
    RunInterruptedError,
    cancel_reason,
    is_cancel,
    render_arrival_notice,
)

__all__ = [
    "MailboxCapability",
    "MailboxRenderError",
    "RunInterruptedError",
    "cancel_reason",
    "is_cancel",
    "render_arrival_notice",
]
