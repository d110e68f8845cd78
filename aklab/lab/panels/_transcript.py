"""TranscriptPanel: every message between agents, newest last, filterable by agent.

Rows are ``sender → recipient (intent)`` then the content, escaped. Besides agent
messages the transcript shows three kinds of notes, because a reader of the
conversation needs them to make sense of it: a ``/command`` a human ran on an agent
(``OperatorActionEvent``), a message that could not be routed (``RoutingSkippedEvent``)
and a handler error (``ErrorMessage``). The model keeps the last ``keep`` rows; the
widget renders the last ``limit`` of those that match the filter.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from aklab.agent import AgentMessage, OperatorActionEvent, RoutingSkippedEvent
from aklab.core import ErrorMessage, EventMessage, Message, SentMessage
from aklab.lab.panels._html import esc, note
from aklab.lab.panels._hub import Panel, PanelHub, PanelModel

__all__ = ["TranscriptModel", "TranscriptPanel", "TranscriptRow", "TranscriptView"]

ALL = ""  # the filter value that shows every agent

_PRE = "white-space:pre-wrap;margin:2px 0 8px 12px;font-family:inherit"


@dataclass(frozen=True)
class TranscriptRow:
    sender: str
    recipient: str
    intent: str
    content: str
    is_note: bool = False

    def involves(self, agent: str) -> bool:
        return agent in (self.sender, self.recipient)

    def html(self) -> str:
        css = "aklab-note-row" if self.is_note else "aklab-msg"
        color = "#a50" if self.is_note else "#555"
        head = f"<b>{esc(self.sender)}</b> → <b>{esc(self.recipient)}</b> "
        head += f'<span style="color:{color}">({esc(self.intent)})</span>'
        return f'<div class="{css}">{head}<pre style="{_PRE}">{esc(self.content)}</pre></div>'


@dataclass(frozen=True)
class TranscriptView:
    rows: tuple[TranscriptRow, ...]  # the rows to render: last ``limit`` matching the filter
    matching: int  # how many kept rows match the filter
    agents: tuple[str, ...]
    agent: str  # the filter; ALL for everyone

    def html(self) -> str:
        if not self.rows:
            return note("no messages yet" if self.agent == ALL else f"no messages to or from {self.agent}")
        head = (
            note(f"showing the last {len(self.rows)} of {self.matching} messages")
            if self.matching > len(self.rows)
            else ""
        )
        return head + "".join(row.html() for row in self.rows)


class TranscriptModel(PanelModel[TranscriptView]):
    def __init__(self, *, limit: int = 500, keep: int = 5000) -> None:
        super().__init__()
        self.limit = limit
        self._rows: deque[TranscriptRow] = deque(maxlen=max(keep, limit))
        self._agents: dict[str, None] = {}
        self._messages = 0
        self._notes = 0
        self._agent = ALL

    @property
    def agent(self) -> str:
        return self._agent

    def set_agent(self, agent: str | None) -> None:
        """Show only messages to or from ``agent`` (None or ``""``: everyone)."""
        with self._lock:
            agent = agent or ALL
            if agent != self._agent:
                self._agent = agent
                self._changed()

    def _feed(self, record: Message) -> bool:
        row = _row(record)
        if row is None:
            return False
        if row.is_note:
            self._notes += 1
        else:
            self._messages += 1
        for name in (row.sender, row.recipient):
            if name.startswith("@"):
                self._agents.setdefault(name, None)
        self._rows.append(row)
        return True

    def _view(self) -> TranscriptView:
        agent = self._agent
        rows = list(self._rows) if agent == ALL else [r for r in self._rows if r.involves(agent)]
        return TranscriptView(tuple(rows[-self.limit :]), len(rows), tuple(self._agents), agent)

    def _summary(self) -> str:
        text = f"{self._messages} message{'s' if self._messages != 1 else ''}"
        return f"{text}, {self._notes} note{'s' if self._notes != 1 else ''}" if self._notes else text


def _row(record: Message) -> TranscriptRow | None:
    if isinstance(record, SentMessage) and isinstance(record.message, AgentMessage):
        msg = record.message
        sender = msg.sender or record.sender
        recipient = msg.recipient or record.recipient
        return TranscriptRow(
            sender.name if sender else "?", recipient.name if recipient else "?", msg.type, msg.content
        )
    if isinstance(record, EventMessage):
        event = record.event
        if isinstance(event, OperatorActionEvent):
            text = f"/{event.command.lstrip('/')}" + (f"\n{event.result}" if event.result else "")
            return TranscriptRow(event.operator, event.agent, "command", text, is_note=True)
        if isinstance(event, RoutingSkippedEvent):
            return TranscriptRow(event.agent, event.recipient, "not delivered", event.reason, is_note=True)
    if isinstance(record, ErrorMessage):
        name = record.sender.name if record.sender else "?"
        return TranscriptRow(name, name, "error", f"{record.exception_type}: {record.exception_value}", True)
    return None


class TranscriptPanel(Panel[TranscriptView]):
    """A filter dropdown (by agent) over the rendered transcript."""

    title = "Transcript"
    model: TranscriptModel

    def __init__(self, hub: PanelHub | None = None, *, limit: int = 500, keep: int = 5000) -> None:
        super().__init__(TranscriptModel(limit=limit, keep=keep), hub)

    def _build(self) -> Any:
        import ipywidgets as widgets

        self.filter = widgets.Dropdown(options=[("all agents", ALL)], value=ALL, description="agent")
        self.filter.observe(self._on_filter, names="value")
        self.html = widgets.HTML(value=note("no messages yet"))
        return widgets.VBox([self.filter, self.html])

    def _on_filter(self, change: dict[str, Any]) -> None:
        if self.hub.applying():
            return  # our own options update, not the user's choice
        self.model.set_agent(change["new"])
        self.hub.flush()

    def _apply(self, view: TranscriptView) -> None:
        options = [("all agents", ALL), *((a, a) for a in view.agents)]
        value = view.agent if view.agent in view.agents else ALL
        with self.filter.hold_sync():
            if list(self.filter.options) != options:
                self.filter.options = options  # this selects the first option; the model's choice goes back below
            if self.filter.value != value:
                # The model is the source of truth: a user's pick reaches it through
                # _on_filter, which flushes again, so the last pick always wins.
                self.filter.value = value
        self.html.value = view.html()
