"""EventSubscriber: observe everything the orchestrator records."""

from __future__ import annotations

from aklab.core._messages import Message

__all__ = ["EventSubscriber"]


class EventSubscriber:
    """Override ``on_message``. Called on the orchestrator's thread: keep it quick,
    and hand work to another thread (or a widget's thread-safe queue) if it is not."""

    def on_message(self, message: Message) -> None:  # pragma: no cover - interface
        """Receive one orchestrator record (SentMessage, EventMessage, ErrorMessage, ...)."""

    def on_stop(self) -> None:
        """The orchestrator is stopping."""
