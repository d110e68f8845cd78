"""Older transcript records, read back from the event store on demand.

Memory stays flat: the recorder, the lab's feed and each transcript panel keep only their
newest records. Everything older is in the event store (when the lab has one), and this
module reads it back page by page, only when asked (a panel's "show earlier" button,
``lab.transcript(before=..., limit=...)``): nothing is read until then.

A page is found by ``seq``: the records of the team (of one ask, for a cell's
transcript) before a cursor, newest first, ``limit`` at a time, through the store's
``(team_id, seq)`` or ``ask_id`` index. The first cursor is the seq of the oldest record
the reader still holds, looked up by its record id (or, for ``lab.transcript``, by the
id of the message it names). Without a store, :attr:`OlderRecords.why_not` says why older
records cannot come back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aklab.agent import AgentMessage, ContextUpdateEvent
from aklab.core import Message, SentMessage
from aklab.errors import ConfigError
from aklab.lab.panels._feed import ask_of, is_transcript

if TYPE_CHECKING:
    from aklab.store import EventStore

__all__ = ["NOT_KEPT", "TRANSCRIPT_KINDS", "OlderPage", "OlderRecords", "context_before", "messages_before"]

#: The stored kinds a transcript shows (``is_transcript`` narrows them further).
#: How many older records a page reads at most to find the message of a ``/command`` it shows.
COMMAND_REACH = 16
TRANSCRIPT_KINDS = ("SentMessage", "ErrorMessage", "OperatorActionEvent", "RoutingSkippedEvent")

#: What a reader is told when the lab keeps nothing on disk.
NOT_KEPT = "older messages are not kept: this lab has no event store (Lab(store=False) or AKLAB_STORE=off)"


@dataclass(frozen=True)
class OlderPage:
    """Records older than the cursor, oldest first; ``cursor``: the seq of the oldest one
    (pass it back for the next page); ``done``: nothing older is stored."""

    records: list[Message]
    cursor: int | None
    done: bool
    note: str | None = None  # why nothing could be read (no store, a store error)


class OlderRecords:
    """Pages back through one team's (or one ask's) transcript records in the event store."""

    def __init__(
        self, store: EventStore | None, team_id: str, *, ask_id: str | None = None, why_not: str | None = None
    ) -> None:
        self.store = store
        self.team_id = team_id
        self.ask_id = ask_id
        self.why_not = why_not if store is None else None
        if store is None and self.why_not is None:
            self.why_not = NOT_KEPT

    @classmethod
    def of(cls, lab: Any, ask_id: str | None = None) -> OlderRecords:
        """The older records of ``lab``'s team (of ``ask_id`` only, if given)."""
        store = getattr(lab, "store", None)
        team_id = getattr(lab, "team_id", None)
        if not team_id:
            store = None
        warning = getattr(lab, "store_warning", None)
        why = None if store is not None else (f"older messages are not kept: {warning}" if warning else NOT_KEPT)
        return cls(store, team_id or "", ask_id=ask_id, why_not=why)

    def seq_of(self, *, record_id: str | None = None, message_id: str | None = None) -> int | None:
        """The seq of a record of this team (by its id, or the id of the message it sent)."""
        from aklab.store import StoreError

        if self.store is None:
            return None
        kinds = None if record_id is not None else ["SentMessage"]
        try:
            # From the newest back: what a reader holds is recent, so this stops soon.
            rows = self.store.records(
                self.team_id, record_id=record_id, message_id=message_id, kinds=kinds, limit=1, newest=True
            )
        except StoreError:  # ``page`` reports it
            return None
        return rows[0].seq if rows else None

    def page(self, cursor: int | None, limit: int, *, kinds: tuple[str, ...] = TRANSCRIPT_KINDS) -> OlderPage:
        """Up to ``limit`` transcript records before seq ``cursor`` (None: the newest stored)."""
        from aklab.store import StoreError

        if self.store is None:
            return OlderPage([], cursor, True, self.why_not)
        found: list[Message] = []
        done = False
        try:
            while len(found) < limit:
                want = limit - len(found)
                rows = self.store.records(
                    self.team_id, kinds=kinds, ask_id=self.ask_id, before=cursor, limit=want, newest=True
                )
                if rows:
                    cursor = rows[0].seq
                batch = [r for r in (row.message() for row in rows) if is_transcript(r)]
                if self.ask_id is not None:
                    batch = [r for r in batch if ask_of(r) == self.ask_id]
                found = [*batch, *found]
                if len(rows) < want:  # the oldest stored record is read
                    done = True
                    break
            if not done:
                found, cursor = self._with_commands(found, cursor, kinds)
        except StoreError as exc:
            return OlderPage(found, cursor, True, f"older messages could not be read back: {exc}")
        return OlderPage(found, cursor, done)

    def _with_commands(
        self, found: list[Message], cursor: int | None, kinds: tuple[str, ...]
    ) -> tuple[list[Message], int | None]:
        """A page that holds a ``/command``'s result but not the message that gave it: the
        message is read too (within ``COMMAND_REACH`` older records), so that the panel folds
        them into one note as it does live, instead of showing the command on the next page."""
        from aklab.agent import OperatorActionEvent
        from aklab.core import EventMessage

        actions = [r.event for r in found if isinstance(r, EventMessage) and isinstance(r.event, OperatorActionEvent)]
        missing = [a for a in actions if not any(_gave(r, a) for r in found)]
        if not missing or self.store is None:
            return found, cursor
        rows = self.store.records(
            self.team_id, kinds=kinds, ask_id=self.ask_id, before=cursor, limit=COMMAND_REACH, newest=True
        )
        records = [row.message() for row in rows]
        starts = [max((i for i, r in enumerate(records) if _gave(r, a)), default=-1) for a in missing]
        start = min((i for i in starts if i >= 0), default=-1)
        if start < 0:
            return found, cursor
        extra = [r for r in records[start:] if is_transcript(r)]
        if self.ask_id is not None:
            extra = [r for r in extra if ask_of(r) == self.ask_id]
        return [*extra, *found], rows[start].seq


def _gave(record: Message, action: Any) -> bool:
    """Whether ``record`` is the message that gave the ``/command`` of ``action``."""
    if not isinstance(record, SentMessage) or not isinstance(record.message, AgentMessage):
        return False
    sender, recipient = record.sender, record.recipient
    return (
        sender is not None
        and recipient is not None
        and (sender.name, recipient.name, record.message.content) == (action.operator, action.agent, action.command)
    )


def messages_before(
    lab: Any,
    kept: list[AgentMessage],
    agent: str | None,
    before: AgentMessage | str | None,
    limit: int | None,
    *,
    memory_complete: bool,
) -> list[AgentMessage]:
    """``lab.transcript(agent, before=..., limit=...)``: from memory (``kept``, the messages
    memory holds) when it holds the whole page, else from the store."""
    from aklab.store import StoreError

    limit = _check_limit(limit)
    before_id = _message_id(before)
    end = len(kept) if before_id is None else next((i for i, m in enumerate(kept) if m.id == before_id), -1)
    kept = [m for m in kept[: max(end, 0)] if agent is None or _involves(m, agent)]
    end = len(kept) if end >= 0 else -1
    if end >= 0 and (end >= limit or memory_complete):
        return kept[max(0, end - limit) : end]
    older = OlderRecords.of(lab)
    if older.store is None:
        if end > 0:
            return kept[:end]
        raise ConfigError(older.why_not or "older messages are not kept")
    cursor = older.seq_of(message_id=before_id) if before_id is not None else None
    if before_id is not None and cursor is None:
        raise ConfigError(
            f"before={before_id!r}: no message with this id is stored for this team; pass a message from "
            "lab.transcript() (or its id)"
        )
    found: list[AgentMessage] = []
    while len(found) < limit:
        page = older.page(cursor, limit - len(found), kinds=("SentMessage",))
        if page.note is not None:
            raise StoreError(page.note)
        sent = [r.message for r in page.records if isinstance(r, SentMessage)]
        found = [m for m in sent if isinstance(m, AgentMessage) and (agent is None or _involves(m, agent))] + found
        cursor = page.cursor
        if page.done:
            break
    return found


def context_before(
    lab: Any, kept: list[ContextUpdateEvent], agent: str | None, limit: int | None, *, memory_complete: bool
) -> list[ContextUpdateEvent]:
    """``lab.context(agent, limit=...)``: the newest ``limit`` context updates (``agent``'s
    only, if given), oldest first; from memory (``kept``) when it holds them, else read back
    from the store (which has memory's too). Without a store, what memory holds."""
    from aklab.core import EventMessage

    limit = _check_limit(limit)
    kept = [u for u in kept if agent is None or u.agent == agent]
    older = OlderRecords.of(lab)
    if len(kept) >= limit or memory_complete or older.store is None:
        return kept[-limit:]
    found: list[ContextUpdateEvent] = []
    cursor: int | None = None
    while len(found) < limit:
        want = limit - len(found)
        rows = older.store.records(older.team_id, kinds=["ContextUpdateEvent"], before=cursor, limit=want, newest=True)
        if rows:
            cursor = rows[0].seq
        records = (row.message() for row in rows)
        events = [r.event for r in records if isinstance(r, EventMessage) and isinstance(r.event, ContextUpdateEvent)]
        found = [u for u in events if agent is None or u.agent == agent] + found
        if len(rows) < want:
            break
    # a store that failed to write (a full disk) holds fewer than memory: memory answers
    return found[-limit:] if len(found) >= len(kept) else kept[-limit:]


def _involves(message: AgentMessage, name: str) -> bool:
    return name in (message.sender.name if message.sender else "", message.recipient.name if message.recipient else "")


def _check_limit(limit: int | None) -> int:
    if limit is None:
        return 100
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"limit must be a number of messages >= 1, not {limit!r}")
    return limit


def _message_id(before: AgentMessage | str | None) -> str | None:
    if before is None or isinstance(before, str):
        return before
    if isinstance(before, AgentMessage):
        return before.id
    raise ConfigError(f"before must be a message from lab.transcript() or its id, not {type(before).__name__}")
