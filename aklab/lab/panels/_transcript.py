"""TranscriptPanel: every message between agents, newest last, filterable by agent.

Rows are ``sender → recipient (intent)`` then the content, escaped. Besides agent
messages the transcript shows three kinds of notes, because a reader of the
conversation needs them to make sense of it: a ``/command`` a human ran on an agent
(``OperatorActionEvent``), a message that could not be routed (``RoutingSkippedEvent``)
and a handler error (``ErrorMessage``). The model keeps the last ``keep`` rows; the
widget renders the last ``limit`` of those that match the filter, in blocks of ``block``
rows (see ``TranscriptView.blocks``): a new message re-sends one small block, not every
row. What is shown starts at a block's first row, so it floats between ``limit`` and
``limit + block - 1`` rows, and the oldest block goes as a whole.

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
An agent whose turn is under way but has written nothing yet (a model still thinking,
a tool running) shows as a ``working…`` line there, from its ``AgentBusyEvent(busy=True)``
to the end of its turn, so a slow model's silence does not look like a stalled team.
A panel of one ask (``ask_id`` set) also hears other asks' turns: while its newest message
waits in the mailbox of an agent still in a turn of another ask, it says so (``waiting``),
so a question sent to a busy team does not look ignored.
Provisional rows, working and waiting lines are not counted in the one-line summary.
The rows and the view, and how they render, are in ``_transcript_view``.

Older rows come back on demand. The model keeps the newest ``keep`` rows; when it is
bound to a lab (``bind``: an :class:`~aklab.lab.panels._older.OlderRecords` of the lab's
team or of one ask), ``show_earlier(n)`` first shows ``n`` more of the kept rows, and
once every kept row is shown reads the ``n`` records before the oldest one back from the
event store (the widget's "show earlier" button calls it; it stays off while the model
holds every record of its team or ask, as a panel opened on a lab watched from its start
does until a row is pushed out). Rows read back are held
while the panel lives, at most ``keep_earlier`` (default ``keep``) of them: when live
rows push the oldest kept row out, it joins them, so what is shown has no gap. Without a store the view says that
older messages are not kept.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aklab._text import counted
from aklab.agent import AgentBusyEvent, AgentMessage, Notice, OperatorActionEvent, RoutingSkippedEvent
from aklab.core import ErrorMessage, EventMessage, Message, SentMessage
from aklab.lab.panels._feed import ask_of
from aklab.lab.panels._hub import PanelModel
from aklab.lab.panels._transcript_view import ALL, TranscriptRow, TranscriptView, block_rows
from aklab.lab.result import intent_label
from aklab.llm.streaming import OutputStreamEvent

if TYPE_CHECKING:
    from aklab.lab.panels._older import OlderRecords

__all__ = ["EARLIER_PAGE", "TranscriptModel", "TranscriptRow", "TranscriptView"]

_UNKNOWN = "…"  # a recipient or intent the model has not written yet
#: How many earlier rows one click on "show earlier" asks for.
EARLIER_PAGE = 100


class TranscriptModel(PanelModel[TranscriptView]):
    def __init__(self, *, limit: int = 500, keep: int = 5000) -> None:
        super().__init__()
        self.limit = limit
        self.keep = max(keep, limit)
        #: Rows in one block of the widget (what a new message re-sends at most).
        self.block = block_rows(limit)
        #: How many rows read back (or pushed out after a read) are held at most.
        self.keep_earlier = self.keep
        self.source: OlderRecords | None = None
        #: The ask this model shows (``ask_transcript``); None: every ask.
        self.ask_id: str | None = None
        self._reset()

    def _reset(self) -> None:
        self._rows: deque[TranscriptRow] = deque(maxlen=self.keep)
        # Rows older than the kept ones, read back from the store (oldest first), and the
        # seq of the oldest record read with the row that was oldest then (the cursor holds
        # while that row is still the oldest).
        self._older: deque[TranscriptRow] = deque()
        self._cursor: tuple[TranscriptRow | None, int] | None = None
        self._older_done = False
        self._older_note = ""
        self._read_back = 0
        self._extra = 0  # rows shown beyond ``limit``, one "show earlier" at a time
        self._reading = False  # a read from the store is in progress (the lock is not held meanwhile)
        self._dropped = 0  # kept rows pushed out by newer ones (or records the feed had dropped)
        # Rows gone from the front of the matching ones (less those read back before them), by
        # filter: where the first matching row stands, so a row keeps its position (its block).
        self._gone: dict[str, int] = {}
        self._agents: dict[str, None] = {}
        self._messages = 0
        self._notes = 0
        self._agent = ALL
        # Provisional rows by (agent, run_id, attempt, index), in arrival order.
        self._live: dict[tuple[str, str, int, int], TranscriptRow] = {}
        # Agents whose turn is under way (AgentBusyEvent), in the order they started.
        self._busy: dict[str, None] = {}
        # Agents in a turn of another ask (a panel of one ask only): its ask may wait for them.
        self._elsewhere: dict[str, None] = {}
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
                before = (event.agent in self._busy, event.agent in self._elsewhere)
                self._busy.pop(event.agent, None)
                self._elsewhere.pop(event.agent, None)
                if event.busy:
                    mine = self.ask_id is None or ask_of(record) == self.ask_id
                    (self._busy if mine else self._elsewhere)[event.agent] = None
                dropped = self._drop_live(event.agent, keep_sending=not event.busy)
                return dropped or before != (event.agent in self._busy, event.agent in self._elsewhere)
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
        self._keep(row)
        return True

    def _keep(self, row: TranscriptRow) -> None:
        if len(self._rows) == self.keep:
            pushed = self._rows[0]
            self._dropped += 1
            if self._older or self._reading:  # rows were (are being) read back: the pushed row joins them
                self._older.append(pushed)
                while len(self._older) > self.keep_earlier:
                    self._went(self._older.popleft(), 1)
            else:
                self._went(pushed, 1)
                if self._older_done:  # the pushed row is older than any held now: the store has it
                    self._older_done, self._older_note, self._cursor = False, "", None
        self._rows.append(row)

    def _went(self, row: TranscriptRow, n: int) -> None:
        """``row`` left the front of the rows (``n=1``), or came back before them (``-1``)."""
        for key in {ALL, row.sender, row.recipient}:
            self._gone[key] = self._gone.get(key, 0) + n

    def _first_shown(self, matching: int) -> int:
        """The index of the first row shown among the ``matching`` ones: the first of the
        block holding the ``limit + extra``-th row from the end (so the oldest block shown
        stays whole while rows arrive, until all of it is past the window)."""
        gone = self._gone.get(self._agent, 0)
        first = (gone + matching - self.limit - self._extra) // self.block * self.block
        return max(0, first - gone)

    # -- older rows ---------------------------------------------------------------------
    def bind(self, source: OlderRecords | None, *, dropped: int = 0, holds_all: bool = False) -> None:
        """Read older rows from ``source`` (None: nowhere); ``dropped``: records the feed
        had let go before this model saw them; ``holds_all``: the model was given every
        transcript record of its team (or ask) so far, so nothing older is stored and
        "show earlier" stays off until a row is pushed out."""
        with self._lock:
            self.source = source
            self._dropped += dropped
            if holds_all and not self._dropped:
                self._older_done = True
            self._changed()

    def show_earlier(self, n: int = EARLIER_PAGE) -> int:
        """Show ``n`` more earlier rows: kept ones first, then rows read back from the event
        store. Returns how many rows it added to the view (0: nothing earlier)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a number of rows >= 1, not {n!r}")
        with self._lock:
            matching = len(self._matching())
            hidden = self._first_shown(matching)
            if hidden > 0:
                # Widen the window to start n rows earlier: it then starts at that row's block.
                self._extra = max(self._extra, matching - self.limit - max(0, hidden - n))
                self._changed()
                return hidden - self._first_shown(matching)
            source = self.source
            if source is None or self._older_done:
                if self._dropped and not self._older_note:
                    self._older_note = "older messages are not kept in memory"
                    self._changed()
                return 0
            anchor = self._older[0] if self._older else self._rows[0] if self._rows else None
            cursor = self._cursor[1] if self._cursor is not None and self._cursor[0] is anchor else None
            held = {r.record_id for r in (*self._older, *self._rows)}
            self._reading = True  # live rows pushing the anchor out meanwhile must not leave a gap
        try:
            if cursor is None and anchor is not None:
                cursor = source.seq_of(record_id=anchor.record_id) if source.store is not None else None
                # Not stored (yet, or the store stopped): read the newest and skip what is held.
            page = source.page(cursor, n)
        finally:
            with self._lock:
                self._reading = False
        rows = _rows_of(page.records)
        with self._lock:
            if self.source is not source:  # rebound meanwhile
                return 0
            rows = [r for r in rows if r.record_id not in held]
            room = self.keep_earlier - len(self._older)
            rows = rows[-room:] if room > 0 else []
            self._older.extendleft(reversed(rows))
            for row in rows:
                self._went(row, -1)
            now = self._older[0] if self._older else self._rows[0] if self._rows else None
            self._cursor = (now, page.cursor) if page.cursor is not None else None
            self._older_done = page.done or room <= len(rows)
            self._read_back += len(rows)
            self._extra += len(rows)
            if page.note:
                self._older_note = page.note
            elif room <= len(rows):
                self._older_note = (
                    f"at most {self.keep_earlier:,} earlier rows are held here; lab.transcript(before=..., limit=...) "
                    "reads further back"
                )
            elif page.done:
                self._older_note = "the earliest messages are shown"
            self._changed()
            return len(rows)

    def _matching(self) -> list[TranscriptRow]:
        agent = self._agent
        rows = [*self._older, *self._rows]
        return rows if agent == ALL else [r for r in rows if r.involves(agent)]

    def _earlier(self, matching: int) -> tuple[str, bool]:
        """The note about older rows, and whether "show earlier" can show more."""
        more = self._first_shown(matching) > 0
        source = self.source
        if source is not None and source.store is None:
            why = source.why_not or "older messages are not kept"
            return (why if self._dropped else ""), more
        parts = []
        if self._read_back:
            plural = "s" if self._read_back != 1 else ""
            parts.append(f"{self._read_back} earlier row{plural} read back from the event store")
        if self._older_note:
            parts.append(self._older_note)
        return "; ".join(parts), more or (source is not None and not self._older_done)

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
        rows = self._matching()
        live = tuple(r for r in self._live.values() if agent == ALL or r.involves(agent))
        writing = {r.sender for r in self._live.values()}
        working = tuple(a for a in self._busy if a not in writing and agent in (ALL, a))
        earlier, more = self._earlier(len(rows))
        first = self._first_shown(len(rows))
        return TranscriptView(
            tuple(rows[first:]),
            len(rows),
            tuple(self._agents),
            agent,
            live,
            earlier,
            more,
            working,
            self._waiting(),
            start=self._gone.get(agent, 0) + first,
            block=self.block,
        )

    def _waiting(self) -> str:
        """The agent this ask waits for: the newest message went to it, nobody is in a turn
        of this ask, and it is in a turn of another (its mailbox holds this ask meanwhile)."""
        if self._busy or self._live or not self._rows or not self._elsewhere:
            return ""
        waits_for = self._rows[-1].recipient
        return waits_for if waits_for in self._elsewhere and self._agent in (ALL, waits_for) else ""

    def _summary(self) -> str:
        text = counted(self._messages, "message")
        return f"{text}, {counted(self._notes, 'note')}" if self._notes else text


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
            sender.name if sender else "?",
            recipient.name if recipient else "?",
            intent_label(msg),
            msg.content,
            is_note=isinstance(msg, Notice),  # aklab's own word (a failure, a stop, a limit): shown as a note
            record_id=record.id,
        )
    if isinstance(record, EventMessage):
        event = record.event
        if isinstance(event, OperatorActionEvent):
            text = f"/{event.command.lstrip('/')}" + (f"\n{event.result}" if event.result else "")
            return TranscriptRow(event.operator, event.agent, "command", text, is_note=True, record_id=record.id)
        if isinstance(event, RoutingSkippedEvent):
            return TranscriptRow(
                event.agent, event.recipient, "not delivered", event.reason, is_note=True, record_id=record.id
            )
    if isinstance(record, ErrorMessage):
        name = record.sender.name if record.sender else "?"
        text = f"{record.exception_type}: {record.exception_value}"
        return TranscriptRow(name, name, "error", text, True, record_id=record.id)
    return None


def _rows_of(records: list[Message]) -> list[TranscriptRow]:
    """The rows records read back make, commands folded as live (within the page)."""
    scratch = TranscriptModel(limit=1, keep=max(1, len(records)))
    for record in records:
        scratch._feed(record)
    return list(scratch._rows)
