"""How each ask of a store ended, for ``history()``: not ok, still at work, or over.

An ask is *at work* while a message of it sent to a member is not handled to its end: no
``DispatchedMessage(done=True)`` for it, and not taken out of its mailbox unread
(``HandledMessage``). A reply to the person does not end it: the team may go on working
after it (a member still asked, agents notifying each other), and its ``ok`` is the whole
ask's.

Reading every handling's end would cost a store's largest records (each carries its
member's snapshot, about 5 KB), so the messages already read say most of it: a member
takes its messages in the order they were sent (its mailbox is FIFO), and a message it
sent while handling one (``SentMessage.during``) shows that it had taken that one, so every
message sent to it before that one was handled to its end, or dropped, already. Only the
asks with a message that nothing shows taken (the last ones each member received, as a
rule) are read again, whole, one indexed read each.

A team whose store holds no handling end at all was written without them (a
``StoreSubscriber`` attached by hand to a bare system, not through a ``Lab``), or its lab
died before its first handling ended: the records cannot tell whether work is pending,
so an ask without a reply is unknown (None), and one with a reply is taken as ended there.
"""

from __future__ import annotations

from typing import Any

from aklab.store._base import EventStore, StoredRecord

__all__ = ["at_work", "failed_outside", "fields", "message_row"]

#: The records that end a message's handling (or drop it unread).
_ENDS = ["DispatchedMessage", "HandledMessage"]
#: Up to this many asks of a team are read again one by one (an indexed read each); more
#: (a store written before ``SentMessage.during``, a member that never sends), and the
#: team's messages and handling ends are read once, from the first in question on.
PER_ASK_READS = 64
#: Records per read of ``_pending_from`` (handling ends carry snapshots: about 5 KB each).
_PAGE = 2_000


def fields(payload: dict[str, Any], name: str) -> dict[str, Any]:
    """The dict a payload's field ``name`` holds (unwrapped from its ``$type``), else {}."""
    value = (payload.get("fields") or {}).get(name) or {}
    data = value.get("$data") if isinstance(value, dict) and "$type" in value else value
    return data if isinstance(data, dict) else {}


def message_row(record: StoredRecord) -> dict[str, Any]:
    """A ``SentMessage`` as ``history().messages``' columns, with what deciding its ask's
    end needs besides (``to_person``, ``during``, ``sender_id``, ``recipient_id``)."""
    top = record.payload.get("fields") or {}
    inner = top.get("message") or {}
    data = fields(record.payload, "message")
    klass = str(inner.get("$type", "")) if isinstance(inner, dict) else ""
    return {
        "seq": record.seq,
        "team_id": record.team_id,
        "ask_id": record.ask_id,
        "created_at": record.created_at,
        "sender": record.sender,
        "recipient": record.recipient,
        "type": data.get("type"),
        "content": data.get("content"),
        "message_id": record.message_id,
        "message_class": klass.rpartition(".")[2],
        # not columns:
        "to_person": bool(fields(record.payload, "recipient").get("is_user_proxy")),
        "during": top.get("during"),
        "sender_id": record.sender_id,
        "recipient_id": record.recipient_id,
    }


def failed_outside(
    store: EventStore,
    usage_rows: list[dict[str, Any]],
    message_rows: list[dict[str, Any]],
    failed: set[str],
    unsent: set[str],
) -> tuple[set[str], list[dict[str, Any]]]:
    """For a time window's asks, read whole (one indexed read per ask): those not ok by a
    notice or a stop recorded outside the window (an ask that straddles ``until`` may be
    stopped or told of a failure after it: ``ok`` is the whole ask's, as with the agent and
    model filters), and the messages of the others, for ``at_work``."""
    asks = {(row["team_id"], row["ask_id"]) for row in (*usage_rows, *message_rows) if row["ask_id"]}
    found: set[str] = set()
    whole: list[dict[str, Any]] = []
    for team_id, ask_id in asks:
        if ask_id in failed:
            continue
        rows: list[dict[str, Any]] = []
        for r in store.records(team_id, ask_id=ask_id, kinds=["SentMessage", "AskCancelledEvent"]):
            if r.event_type == "AskCancelledEvent":
                found.add(ask_id)
            elif r.kind == "SentMessage" and r.message_id not in unsent:
                row = message_row(r)
                if row["message_class"] == "Notice":
                    found.add(ask_id)
                rows.append(row)
        if ask_id not in found:
            whole.extend(rows)
    return found, whole


def at_work(
    store: EventStore,
    message_rows: list[dict[str, Any]],
    settled: set[str],
    unsent: set[str],
) -> dict[str, bool | None]:
    """The asks still at work (see the module docstring), each with whether a lab runs its
    team now: None if one does, or if the store cannot tell (then the ask may yet end well),
    False if none does (it never will: its kernel died, or its lab closed, before it ended,
    and only a resume takes it up again). ``message_rows``: every message read, in seq
    order (whole asks); ``settled``: the asks already known not ok."""
    to_members = {m["message_id"]: m for m in message_rows if not m["to_person"] and m["message_id"]}
    taken: dict[tuple[str, str], int] = {}  # (team, member id) -> seq of the latest message seen taken
    for m in message_rows:
        handled = to_members.get(m["during"]) if m["during"] else None
        if handled is not None and m["sender_id"] and handled["recipient_id"] == m["sender_id"]:
            key = (m["team_id"], m["sender_id"])
            taken[key] = max(taken.get(key, -1), handled["seq"])
    unsure: dict[str, dict[str, int]] = {}  # team -> ask -> seq of its first message nothing shows taken
    for m in to_members.values():  # in seq order
        ask_id, team_id = m["ask_id"], m["team_id"]
        if not ask_id or ask_id in settled or ask_id in unsure.get(team_id, ()):
            continue
        member = m["recipient_id"]
        if not member or m["seq"] >= taken.get((team_id, member), -1):
            unsure.setdefault(team_id, {})[ask_id] = m["seq"]
    found: dict[str, bool | None] = {}
    for team_id, asks in unsure.items():
        running = store.is_running(team_id)
        if running is not True and not store.records(team_id, kinds=["DispatchedMessage"], limit=1):
            # no handling end stored: whether work is pending is unknown, unless it was answered
            answered = {m["ask_id"] for m in message_rows if m["to_person"] and m["team_id"] == team_id}
            found.update((ask_id, None) for ask_id in asks if ask_id not in answered)
            continue
        if len(asks) <= PER_ASK_READS:
            pending = {ask_id for ask_id in asks if _pending(store, team_id, ask_id, unsent)}
        else:  # too many to read one by one: the team's records from the first, once
            pending = _pending_from(store, team_id, min(asks.values()), set(asks), unsent)
        found.update((ask_id, None if running is not False else False) for ask_id in pending)
    return found


def _pending(store: EventStore, team_id: str, ask_id: str, unsent: set[str]) -> bool:
    """Whether a message of ``ask_id`` sent to a member is not handled to its end (the whole
    ask read again: it may go on after a time window's ``until``)."""
    sent: set[str] = set()
    ended: set[str] = set()
    for r in store.records(team_id, ask_id=ask_id, kinds=["SentMessage", *_ENDS]):
        if r.kind == "SentMessage":
            if r.message_id and r.message_id not in unsent and not message_row(r)["to_person"]:
                sent.add(r.message_id)
        elif r.message_id and (r.kind == "HandledMessage" or (r.payload.get("fields") or {}).get("done") is True):
            ended.add(r.message_id)
    return bool(sent - ended)


def _pending_from(store: EventStore, team_id: str, first: int, asks: set[str], unsent: set[str]) -> set[str]:
    """Which of ``asks`` have a message to a member not handled to its end, from the team's
    records from seq ``first`` on (their earlier messages are shown taken), a page at a time."""
    sent: dict[str, str] = {}  # message id -> its ask
    ended: set[str] = set()
    since = first - 1
    while True:
        page = store.records(team_id, since=since, kinds=["SentMessage", *_ENDS], limit=_PAGE)
        for r in page:
            if not r.message_id:
                continue
            if r.kind == "SentMessage":
                if r.ask_id in asks and r.message_id not in unsent and not message_row(r)["to_person"]:
                    sent[r.message_id] = r.ask_id
            elif r.kind == "HandledMessage" or (r.payload.get("fields") or {}).get("done") is True:
                ended.add(r.message_id)
        if len(page) < _PAGE:
            break
        since = page[-1].seq
    return {ask_id for message_id, ask_id in sent.items() if message_id not in ended}
