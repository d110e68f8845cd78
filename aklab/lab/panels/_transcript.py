"""TranscriptPanel: every message between agents, newest last, filterable by agent.

Rows are ``sender → recipient (intent)`` then the content, escaped. Besides agent
messages the transcript shows three kinds of notes, because a reader of the
conversation needs them to make sense of it: a ``/command`` a human ran on an agent
(``OperatorActionEvent``), a message that could not be routed (``RoutingSkippedEvent``)
and a handler error (``ErrorMessage``). The model keeps the last ``keep`` rows; the
widget renders the last ``limit`` of those that match the filter.

A ``/command`` is recorded three times: the human's message carrying it, the agent's
``notification`` back with the result, and the operator-action note. The note says both
(the command and its result), so it stands for all three: when it arrives, the message
and the reply it matches are taken out of the transcript (or, if the reply is not
recorded yet, it is left out when it comes).

While a model writes its output, the messages it is writing show below the transcript
as provisional rows, marked as in progress (``OutputStreamEvent``, one row per
``(agent, run, attempt, index)``). A provisional row goes away when the real message is
recorded (a ``SentMessage`` from the same sender with the same text and/or the same
recipient and intent; the real row is appended as usual), when routing skips its
recipient (``RoutingSkippedEvent``), when the stream drops it (``dropped``), or when
its agent's turn ends (``AgentBusyEvent(busy=False)``) before it was complete: a
complete one survives that event because the agent routes its output just after it.
Whatever is left of an agent's provisional rows goes when its next turn starts.
Provisional rows are not counted in the text/plain summary.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aklab.agent import AgentBusyEvent, AgentMessage, OperatorActionEvent, RoutingSkippedEvent
from aklab.core import ErrorMessage, EventMessage, Message, SentMessage
from aklab.lab.panels._html import esc, note
from aklab.lab.panels._hub import Panel, PanelHub, PanelModel
from aklab.llm.streaming import OutputStreamEvent

__all__ = ["TranscriptModel", "TranscriptPanel", "TranscriptRow", "TranscriptView"]

ALL = ""  # the filter value that shows every agent

_PRE = "white-space:pre-wrap;margin:2px 0 8px 12px;font-family:inherit"
_LIVE = "opacity:0.7;border-left:2px dashed #999;padding-left:4px"
_UNKNOWN = "…"  # a recipient or intent the model has not written yet


@dataclass(frozen=True)
class TranscriptRow:
    sender: str
    recipient: str
    intent: str
    content: str
    is_note: bool = False
    live: str = ""  # a provisional row: "writing" or "sending"; "" for a recorded one

    def involves(self, agent: str) -> bool:
        return agent in (self.sender, self.recipient)

    def html(self) -> str:
        css = "aklab-note-row" if self.is_note else "aklab-live" if self.live else "aklab-msg"
        color = "#a50" if self.is_note else "#555"
        head = f"<b>{esc(self.sender)}</b> → <b>{esc(self.recipient)}</b> "
        head += f'<span style="color:{color}">({esc(self.intent)})</span>'
        if self.live:
            head += f' <span style="color:#07a;font-style:italic">{esc(self.live)}…</span>'
            return f'<div class="{css}" style="{_LIVE}">{head}<pre style="{_PRE}">{esc(self.content)}▍</pre></div>'
        return f'<div class="{css}">{head}<pre style="{_PRE}">{esc(self.content)}</pre></div>'


@dataclass(frozen=True)
class TranscriptView:
    rows: tuple[TranscriptRow, ...]  # the rows to render: last ``limit`` matching the filter
    matching: int  # how many kept rows match the filter
    agents: tuple[str, ...]
    agent: str  # the filter; ALL for everyone
    live: tuple[TranscriptRow, ...] = ()  # provisional rows (messages being written) matching the filter

    def html(self) -> str:
        if not self.rows and not self.live:
            return note("no messages yet" if self.agent == ALL else f"no messages to or from {self.agent}")
        head = (
            note(f"showing the last {len(self.rows)} of {self.matching} messages")
            if self.matching > len(self.rows)
            else ""
        )
        return head + "".join(row.html() for row in (*self.rows, *self.live))


class TranscriptModel(PanelModel[TranscriptView]):
    def __init__(self, *, limit: int = 500, keep: int = 5000) -> None:
        super().__init__()
        self.limit = limit
        self.keep = max(keep, limit)
        self._reset()

    def _reset(self) -> None:
        self._rows: deque[TranscriptRow] = deque(maxlen=self.keep)
        self._agents: dict[str, None] = {}
        self._messages = 0
        self._notes = 0
        self._agent = ALL
        # Provisional rows by (agent, run_id, attempt, index), in arrival order.
        self._live: dict[tuple[str, str, int, int], TranscriptRow] = {}
        # Command results still to come as a notification: (agent, operator, result).
        self._replies_due: deque[tuple[str, str, str]] = deque(maxlen=16)

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
        if isinstance(record, EventMessage):
            event = record.event
            if isinstance(event, OutputStreamEvent):
                return self._stream(event)
            if isinstance(event, AgentBusyEvent):
                # A turn ending keeps complete rows (routing follows); a turn starting clears leftovers.
                return self._drop_live(event.agent, keep_sending=not event.busy)
        row = _row(record)
        if row is None:
            return False
        if not row.is_note and self._reply_due(row):
            return False
        self._settle_live(record, row)
        if isinstance(record, EventMessage) and isinstance(record.event, OperatorActionEvent):
            self._fold_command(record.event)
        if row.is_note:
            self._notes += 1
        else:
            self._messages += 1
        for name in (row.sender, row.recipient):
            if name.startswith("@"):
                self._agents.setdefault(name, None)
        self._rows.append(row)
        return True

    def _fold_command(self, event: OperatorActionEvent) -> None:
        """Take out the message carrying the command and the reply with its result."""
        command = _Row(event.operator, event.agent, None, event.command)
        reply = _Row(event.agent, event.operator, "notification", event.result) if event.result else None
        if not self._remove_recent(command):
            return  # not a message we showed (a command run from code): nothing to fold
        if reply is not None and not self._remove_recent(reply):
            self._replies_due.append((event.agent, event.operator, reply.content or ""))

    def _remove_recent(self, match: _Row, within: int = 32) -> bool:
        for back in range(1, min(within, len(self._rows)) + 1):
            if match.matches(self._rows[-back]):
                del self._rows[-back]
                self._messages -= 1
                return True
        return False

    def _reply_due(self, row: TranscriptRow) -> bool:
        """True if ``row`` is a command's result reply that a note already shows (then forget it)."""
        for due in self._replies_due:
            if _Row(due[0], due[1], "notification", due[2]).matches(row):
                self._replies_due.remove(due)
                return True
        return False

    def _stream(self, event: OutputStreamEvent) -> bool:
        key = (event.agent, event.run_id, event.attempt, event.index)
        if event.dropped:
            return self._live.pop(key, None) is not None
        if event.agent.startswith("@"):
            self._agents.setdefault(event.agent, None)
        self._live[key] = TranscriptRow(
            event.agent,
            event.recipient or _UNKNOWN,
            event.message_type or _UNKNOWN,
            event.text,
            live="sending" if event.done else "writing",
        )
        return True

    def _drop_live(self, agent: str, *, keep_sending: bool) -> bool:
        gone = [k for k, r in self._live.items() if r.sender == agent and not (keep_sending and r.live == "sending")]
        for key in gone:
            del self._live[key]
        return bool(gone)

    def _settle_live(self, record: Message, row: TranscriptRow) -> None:
        """Remove the provisional row that ``record`` (a real message or an unrouted note) settles."""
        if not self._live:
            return
        if isinstance(record, SentMessage):
            tests: tuple[Callable[[TranscriptRow, TranscriptRow], bool], ...] = (_same_both, _same_text, _same_address)
        elif isinstance(record, EventMessage) and isinstance(record.event, RoutingSkippedEvent):
            tests = (_same_recipient,)
        else:
            return
        for test in tests:  # the strongest evidence first
            match = next((k for k, r in self._live.items() if r.sender == row.sender and test(r, row)), None)
            if match is not None:
                del self._live[match]
                return

    def _view(self) -> TranscriptView:
        agent = self._agent
        rows = list(self._rows) if agent == ALL else [r for r in self._rows if r.involves(agent)]
        live = tuple(r for r in self._live.values() if agent == ALL or r.involves(agent))
        return TranscriptView(tuple(rows[-self.limit :]), len(rows), tuple(self._agents), agent, live)

    def _summary(self) -> str:
        text = f"{self._messages} message{'s' if self._messages != 1 else ''}"
        return f"{text}, {self._notes} note{'s' if self._notes != 1 else ''}" if self._notes else text


@dataclass(frozen=True)
class _Row:
    """What a row folded into a command note looks like (intent None: any)."""

    sender: str
    recipient: str
    intent: str | None
    content: str | None

    def matches(self, row: TranscriptRow) -> bool:
        return (
            not row.is_note
            and not row.live
            and (row.sender, row.recipient, row.content) == (self.sender, self.recipient, self.content)
            and self.intent in (None, row.intent)
        )


# Does a recorded row settle a provisional one from the same sender?
def _same_both(live: TranscriptRow, real: TranscriptRow) -> bool:
    return _same_text(live, real) and _same_address(live, real)


def _same_text(live: TranscriptRow, real: TranscriptRow) -> bool:
    return live.content == real.content


def _same_address(live: TranscriptRow, real: TranscriptRow) -> bool:
    return _name(live.recipient) == _name(real.recipient) and live.intent == real.intent


def _same_recipient(live: TranscriptRow, skipped: TranscriptRow) -> bool:
    return live.recipient.strip() == skipped.recipient  # skipped: the "not delivered" note


def _name(recipient: str) -> str:
    # The model may write a role ("Developer") where the member is "@Developer".
    return recipient.strip().lstrip("@").casefold()


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
