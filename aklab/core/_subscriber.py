"""EventSubscriber: observe everything the orchestrator records."""

from __future__ import annotations

from aklab.core._messages import Message

__all__ = ["EventSubscriber"]


class EventSubscriber:
    """Override ``on_message``. Called on the thread of the member that made the record,
    one record at a time under the team log's lock: keep it quick, never wait on an actor
    from it, and hand slow work to another thread (or a widget's thread-safe queue)."""

    def on_message(self, message: Message) -> None:  # pragma: no cover - interface
        """Receive one orchestrator record (SentMessage, EventMessage, ErrorMessage, ...)."""

    def on_stop(self) -> None:
        """The orchestrator is stopping."""
