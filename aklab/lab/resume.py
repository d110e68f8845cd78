"""Reading a stored team back: who was in it, what each agent remembered, what was left to do.

``Lab.resume(team_id)`` folds the team's records from the event store in one pass
(O(records)) into a :class:`StoredTeam`:

- **members**: every agent started and not stopped, with its stored identity (agent id,
  name, role), in start order;
- **snapshots**: each agent's model history (each ``AgentSnapshotEvent``, carried by the
  record of a handling's end or, in older stores, an event of its own, changes the history
  before it) and its last state (context-update baseline included), folded as stored and
  validated once per agent (:mod:`aklab.lab.histories`);
- **usage**: every request the team made, so each agent's lifetime budget counters come
  back and ``lab.usage()`` totals them again;
- **replies**: what reached the human (shown again in ``lab.replies()``);
- **pending**: every message sent to an agent whose handling never finished (no
  ``DispatchedMessage(done=True)``, and not consumed unread: ``HandledMessage``): queued
  when the kernel died, or being handled. The resumed team gets them again, in their
  original order, with their ids and ask ids, so each message is handled to the end
  exactly once. A message sent by a handling that never finished (``SentMessage.during``)
  was never delivered (a member holds what it sends until its handling's end is
  recorded): it is left out, as a reply to the human is, since doing that handling
  again sends afresh;
- **asks**: for every ask a pending message belongs to, what the team guard had counted
  (model turns = its messages to agents handled to the end; tokens and cost = its usage
  events; the messages members exchanged), so its limits hold across the restart: an
  ask allowed 60 turns that had taken 50 gets 10 more, not 60. A message being handled
  when the kernel died is not counted: handling it again counts it once;
- **planning**: the team's task board (``PlanningTool``), each task as last recorded by a
  ``PlanningTaskEvent``.

A message of an ask that was stopped or tripped by the guard (``AskCancelledEvent``) is
not taken up again: it would have been dropped unread had the kernel lived on.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from aklab._text import counted
from aklab.errors import ConfigError
from aklab.lab.histories import Histories

if TYPE_CHECKING:
    from aklab.agent import AgentMessage
    from aklab.core import TeamGuard
    from aklab.lab.session import Lab
    from aklab.llm import LlmUsageEvent, ModelConfig
    from aklab.store import EventStore, StoredRecord, TeamInfo
    from aklab.tools.planning import PlanningTask

__all__ = [
    "StoredAsk",
    "StoredMember",
    "StoredTeam",
    "load_team",
    "record_cancellations",
    "restore_team",
    "stored_guard",
]

log = logging.getLogger("aklab.lab")


@dataclass
class StoredMember:
    agent_id: str
    name: str
    role: str
    is_user_proxy: bool = False
    messages: list[Any] = field(default_factory=list)  # pydantic-ai messages
    state: dict[str, Any] = field(default_factory=dict)
    usage: list[LlmUsageEvent] = field(default_factory=list)
    replay: dict[str, list[Any]] = field(default_factory=dict)  # message id -> answers to handle it again with


@dataclass
class StoredAsk:
    """What the team guard had counted for an ask still at work (``AskLedger.restore``)."""

    ask_id: str
    turns: int = 0
    tokens: int = 0
    cost: float = 0.0
    messages: list[tuple[str, str, str]] = field(default_factory=list)  # (sender, recipient, text)

    def charge(self, event: LlmUsageEvent) -> None:
        """Count a request's tokens and cost (a cost that is not a finite number counts nothing)."""
        self.tokens += event.total_tokens or 0
        if event.cost_usd is not None and math.isfinite(event.cost_usd):
            self.cost += event.cost_usd


@dataclass
class StoredTeam:
    info: TeamInfo
    members: list[StoredMember]
    replies: list[AgentMessage]
    pending: list[tuple[str, AgentMessage]]  # (recipient agent id, message), in send order
    records: int
    asks: dict[str, StoredAsk] = field(default_factory=dict)
    planning: list[PlanningTask] = field(default_factory=list)
    dropped: int = 0  # unfinished messages of stopped asks, left alone
    usage: list[LlmUsageEvent] = field(default_factory=list)  # every request of the team, in order
    unsent: list[str] = field(default_factory=list)
    """Ids of messages held by a handling that never finished: never delivered, sent afresh when it
    is done again. The resume records them (``UnsentMessagesEvent``); a later resume leaves them out
    without counting them again."""
    unhired: list[StoredMember] = field(default_factory=list)
    """Hired by a handling that never finished, and never given a message: left out (done again, the
    handling hires afresh); the resume records them as stopped, so a later resume leaves them out too."""
    recovered: list[LlmUsageEvent] = field(default_factory=list)
    """Usage of requests answered in a handling that never finished, whose run never got to record
    it (``ModelResponseEvent.usage``): the resume records it, so each paid request counts once."""
    unanswered: list[str] = field(default_factory=list)
    """Requests to a model outside the kernel (ids of their ``ModelRequestEvent`` records) sent by
    a handling that never finished, with no answer stored: perhaps paid for, their usage unknown.
    The resume records them (``UnansweredRequestsEvent``); a later resume leaves them out."""
    unanswered_usage: list[LlmUsageEvent] = field(default_factory=list)
    """One failed request of unknown size for each of ``unanswered`` (its cost unknown too,
    unless the model is local): the resume records them, so that usage, the members' budgets
    and the open asks' counters count every request sent, and none twice."""
    unreadable: list[str] = field(default_factory=list)
    """Answers stored in a handling that never finished that no longer read back (written by
    another pydantic-ai version, say; the ids of their records): paid for, their usage unknown;
    the handling asks again. The resume records them (``UnreadableAnswersEvent``); a later
    resume leaves them out."""
    failed_asks: set[str] = field(default_factory=set)
    """The asks that were not ok (stopped, tripped, or a ``Notice`` reached the human), so
    that ``lab.usage(by="ask")`` says so after the resume as it did before."""
    asks_begun: list[tuple[str, datetime, int]] = field(default_factory=list)
    """Every ask a person began (ask id, when it was sent, how many usage rows came before
    it), in order: ``lab.usage(by="ask")`` has a row for one that never made a request."""

    @property
    def replayed(self) -> int:
        """Stored answers the handlings done again give instead of asking their model twice."""
        return sum(len(answers) for m in self.members for answers in m.replay.values())

    @property
    def team_id(self) -> str:
        return self.info.team_id

    def summary(self) -> str:
        agents = [m.name for m in self.members if not m.is_user_proxy]
        more = ""
        if self.asks:
            more += f", the guard's counters of {counted(len(self.asks), 'open ask')}"
        if self.planning:
            more += f", {counted(len(self.planning), 'planning task')}"
        if self.dropped:
            more += f", {counted(self.dropped, 'message')} of stopped asks left undone"
        if self.unsent:
            more += f", {counted(len(self.unsent), 'message')} an unfinished handling never sent (it runs again)"
        if self.unhired:
            more += f", {counted(len(self.unhired), 'member')} it hired left out (hired again if it does)"
        if self.replayed:
            more += f", {counted(self.replayed, 'model answer')} given again rather than paid twice"
        if self.recovered:
            more += f", the usage of {counted(len(self.recovered), 'request')} a crash cut short recorded"
        if self.unreadable:
            more += (
                f", {counted(len(self.unreadable), 'stored model answer')} that no longer read back "
                "(paid for, asked again: what they cost is unknown and not counted)"
            )
        if self.unanswered:
            more += (
                f", {counted(len(self.unanswered), 'model request')} in flight when the kernel stopped "
                "(sent, perhaps paid for, never answered: in usage as failed requests of unknown size)"
            )
        replies = counted(len(self.replies), "earlier reply", "earlier replies")
        return (
            f"resumed team {self.info.name!r} ({self.team_id[:8]}): {counted(len(agents), 'agent')} "
            f"({', '.join(agents)}), {counted(len(self.pending), 'message')} re-delivered, {replies} to @Human"
            f"{more}, from {counted(self.records, 'stored record')}"
        )


def pick_team(store: EventStore, team: str | None, *, skip_running: bool = False) -> TeamInfo:
    """The stored team with this id or name (the most recently active if None; a team that was
    asked something before one that never was, by name too). With
    ``skip_running``, None skips the teams that labs in other processes run (another
    notebook's kernel) and refuses one a lab in this process runs (``TeamInUseError``):
    re-running a resume cell must not walk back to older teams."""
    from aklab.store import StoreError, TeamInUseError, matching_teams

    # Teams someone asked something first, each group latest first: a team closed before its
    # first question (a model switched at once) has nothing to resume, and must not shadow one that has.
    teams = sorted(store.teams(), key=lambda t: not t.asked)
    if not teams:
        from aklab.store import per_folder_hint

        # the usual surprise: a kernel started in another folder
        where = f" ({per_folder_hint()})" if store.location.startswith("sqlite:") else ""
        raise ConfigError(f"no team is stored in {store.location}: start one with Lab(...) first{where}")
    if team is None:
        if not skip_running:
            return teams[0]
        for info in teams:
            try:
                store.claim(info.team_id)
            except TeamInUseError as exc:
                if exc.here:
                    raise TeamInUseError(
                        f"{exc} (it is the latest team not running elsewhere; to resume another, name it: "
                        "%aklab teams or aklab.store.open_store().teams() lists them)",
                        here=True,
                    ) from None
                continue
            except StoreError:  # a store that cannot claim: it cannot tell either
                return info
            store.release(info.team_id)
            return info
        raise ConfigError(
            f"every team stored in {store.location} is running in a lab in another process now ({len(teams)}): "
            "close one there first, or name one to see where it runs"
        )
    return matching_teams(teams, team, store.location)[0]


def find_team(store: EventStore, team: str) -> TeamInfo:
    """The one stored team ``team`` names: its id, an id prefix or its name. Unlike
    :func:`pick_team`, a prefix or name several teams share is refused, naming them (for
    deletion, where taking the latest would be a guess)."""
    from aklab.store import matching_teams

    found = matching_teams(store.teams(), team, store.location)
    if len(found) > 1:
        listed = ", ".join(f"{t.team_id} (last active {t.last_activity:%Y-%m-%d %H:%M} UTC)" for t in found[:10])
        raise ConfigError(f"{len(found)} stored teams match {team!r}: {listed}; name one by its id")
    return found[0]


def forget_team(store: EventStore, team: str) -> str:
    """Delete the stored team ``team`` names (see :func:`find_team`) and say what went."""
    info = find_team(store, team)
    gone = store.forget(info.team_id)
    return (
        f"forgot team {info.name!r} ({info.team_id[:8]}): {counted(gone, 'record')} deleted from {store.location}; "
        "its usage has left aklab.history() too"
    )


def load_team(store: EventStore, team: str | None = None, *, skip_running: bool = False) -> StoredTeam:
    """Fold the stored records of ``team`` (an id, an id prefix or a name; None: the latest,
    chosen as :func:`pick_team` says with ``skip_running``). Raises ``TeamInUseError`` for a
    team a lab runs now (before reading it)."""
    from aklab.agent import AgentMessage, Notice
    from aklab.agent.events import ModelResponseEvent, UnansweredRequestsEvent, UnreadableAnswersEvent
    from aklab.core import (
        EventMessage,
        HandledMessage,
        SentMessage,
        StartMessage,
        UnsentMessagesEvent,
    )
    from aklab.lab.recorder import begins_ask
    from aklab.llm import LlmUsageEvent
    from aklab.store import StoreError, TeamInUseError
    from aklab.tools.planning import PlanningTaskEvent

    info = pick_team(store, team, skip_running=skip_running)
    try:
        store.claim(info.team_id)  # a running team is refused before it is read, naming its lab
    except TeamInUseError:
        raise
    except StoreError:  # a store that cannot claim (the resumed Lab warns about it)
        pass
    else:
        store.release(info.team_id)  # the resumed Lab claims it for good
    members: dict[str, StoredMember] = {}
    stopped: set[str] = set()
    sent: dict[str, tuple[str, AgentMessage]] = {}  # message id -> (recipient id, message), in order
    delivered: set[str] = set()  # agents a message handled to the end was sent to (dropped from sent)
    finished: set[str] = set()
    replies: list[AgentMessage] = []
    by_name: dict[str, StoredMember] = {}
    tasks: dict[str, PlanningTask] = {}
    cancelled: set[str] = set()  # asks stopped or tripped
    usage: list[LlmUsageEvent] = []
    asks_begun: list[tuple[str, datetime, int]] = []
    # A message taken out of a mailbox unhandled (HandledMessage) was either withdrawn (its
    # ask was stopped) or read by the run in progress of its recipient: then it is done
    # when that run is.
    handling: dict[str, str] = {}  # agent id -> id of the message it is handling
    held: dict[str, str] = {}  # message id -> the message whose handling sent it (delivered at its end)
    hired_during: dict[str, str] = {}  # agent id -> the message whose handling hired it
    consumed: dict[str, str | None] = {}  # message id -> the message whose run read it (None: withdrawn)
    known_unsent: set[str] = set()  # found by an earlier resume (UnsentMessagesEvent)
    answer_rows: list[tuple[Any, Any, str]] = []  # (handled message id, run id, record id): read if unfinished
    request_rows: list[tuple[Any, Any, str]] = []  # (handled message id, run id, record id) of ModelRequestEvents
    known_unanswered: set[str] = set()  # reported by an earlier resume (UnansweredRequestsEvent)
    known_unreadable: set[str] = set()  # reported by an earlier resume (UnreadableAnswersEvent)
    counted_runs: set[str] = set()  # runs whose usage is stored
    histories = Histories(members)
    count = 0
    for row in _read(store, info):
        count += 1
        kind = row.kind
        if kind == "StartMessage" and row.sender_id:
            stopped.discard(row.sender_id)
            if row.sender_id in members:  # started again by an earlier resume: same member
                continue
            record = row.message()
            assert isinstance(record, StartMessage) and record.sender is not None
            member = StoredMember(
                row.sender_id, record.sender.name, record.sender.role, is_user_proxy=record.sender.is_user_proxy
            )
            members[row.sender_id] = by_name[member.name] = member
            if record.during is not None:
                hired_during[row.sender_id] = record.during
        elif kind == "StopMessage" and row.sender_id:
            stopped.add(row.sender_id)
        elif kind == "SentMessage":
            record = row.message()
            assert isinstance(record, SentMessage)
            message = record.message
            if not isinstance(message, AgentMessage) or record.recipient is None:
                continue
            if record.during is not None:
                held[message.id] = record.during
            if begins_ask(message):
                asks_begun.append((message.id, record.created_at, len(usage)))
            if record.recipient.is_user_proxy:
                replies.append(message)
            else:
                sent[message.id] = (record.recipient.agent_id, message)
        elif kind == "DispatchedMessage" and row.message_id:
            fields = row.payload.get("fields") or {}  # read as stored: its snapshot is folded as JSON
            if fields.get("done") is True:
                finished.add(row.message_id)
                done = sent.pop(row.message_id, None)  # only what is still to do is kept
                if done is not None:
                    delivered.add(done[0])
                if row.sender_id:
                    handling.pop(row.sender_id, None)
                histories.take(fields.get("snapshot"))
            elif row.sender_id:  # taken for handling: recorded by earlier versions only
                handling[row.sender_id] = row.message_id
        elif kind == "HandledMessage" and row.message_id:
            record = row.message()
            during = record.during if isinstance(record, HandledMessage) else None
            consumed[row.message_id] = during or handling.get(row.sender_id or "")
        elif kind == "EventMessage" and row.event_type == "AskCancelledEvent" and row.ask_id:
            cancelled.add(row.ask_id)
        elif kind == "EventMessage" and row.event_type == "ModelResponseEvent":
            answer_rows.append((_event_field(row, "message_id"), _event_field(row, "run_id"), row.record_id))
        elif kind == "EventMessage" and row.event_type == "ModelRequestEvent":
            request_rows.append((_event_field(row, "message_id"), _event_field(row, "run_id"), row.record_id))
        elif kind == "EventMessage" and row.event_type == "UnansweredRequestsEvent":
            record = row.message()
            if isinstance(record, EventMessage) and isinstance(record.event, UnansweredRequestsEvent):
                known_unanswered.update(record.event.record_ids)
        elif kind == "EventMessage" and row.event_type == "UnreadableAnswersEvent":
            record = row.message()
            if isinstance(record, EventMessage) and isinstance(record.event, UnreadableAnswersEvent):
                known_unreadable.update(record.event.record_ids)
        elif kind == "EventMessage" and row.event_type == "UnsentMessagesEvent":
            record = row.message()
            if isinstance(record, EventMessage) and isinstance(record.event, UnsentMessagesEvent):
                known_unsent.update(record.event.message_ids)
        elif kind == "EventMessage" and row.event_type == "AgentSnapshotEvent":
            histories.take((row.payload.get("fields") or {}).get("event"))
        elif kind == "EventMessage" and row.event_type in ("LlmUsageEvent", "PlanningTaskEvent"):
            record = row.message()
            assert isinstance(record, EventMessage)
            event = record.event
            if isinstance(event, LlmUsageEvent):
                counted_runs.add(event.run_id)
                usage.append(event)
                if event.agent in by_name:
                    by_name[event.agent].usage.append(event)
            elif isinstance(event, PlanningTaskEvent):
                tasks[event.task.id] = event.task
    histories.finish(lambda: _snapshots(store, info))
    for mid, reader in consumed.items():
        if reader is None or reader in finished:
            finished.add(mid)
    answers: dict[tuple[str, str], list[ModelResponseEvent]] = {}  # (agent id, message id) -> in order
    answered: Counter[Any] = Counter()  # run id -> answers stored in unfinished handlings, read back or not
    unreadable: list[str] = []
    for handling_id, run_id, record_id in answer_rows:
        if handling_id in finished:  # most of them: not read back (a long team has one per request)
            continue
        answered[run_id] += 1
        if record_id in known_unreadable:  # an earlier resume reported it: it still came back
            continue
        [row] = store.records(info.team_id, record_id=record_id)
        record = row.message()
        if isinstance(record, EventMessage) and isinstance(record.event, ModelResponseEvent):
            answers.setdefault((record.event.agent_id, record.event.message_id), []).append(record.event)
        else:  # written by another aklab or pydantic-ai version: that request is asked again
            unreadable.append(record_id)
            log.warning("a stored model answer could not be read back and is skipped: %s", str(record)[:200])
    # never delivered: held by a handling that never finished, or by one an earlier resume found
    # unfinished (done again since, it sent afresh: what it held the first time stays unsent)
    unsent = {mid for mid, during in held.items() if during not in finished} | (known_unsent & held.keys())
    if unsent:
        sent = {mid: item for mid, item in sent.items() if mid not in unsent}
        replies = [m for m in replies if m.id not in unsent]
    # hired by a handling that never finished, and never given anything: done again, it hires again
    reached = delivered | {to for to, _ in sent.values()}
    unhired = {a for a, d in hired_during.items() if d not in finished and a not in reached and a not in stopped}
    live = [m for agent_id, m in members.items() if agent_id not in stopped and agent_id not in unhired]
    live_ids = {m.agent_id for m in live}
    unfinished = [(to, m) for mid, (to, m) in sent.items() if mid not in finished and to in live_ids]
    pending = [(to, m) for to, m in unfinished if m.ask_id not in cancelled]
    handled = finished - consumed.keys()  # handled to the end by their own turn
    asks = _open_asks(store, info.team_id, {m.ask_id for _, m in pending if m.ask_id is not None}, handled, unsent)
    recovered = _replays(answers, counted_runs, members, pending, asks)
    unanswered = _unanswered(request_rows, finished, answered, known_unanswered, counted_runs)
    unanswered_usage = _unanswered_usage(store, info, unanswered, members, asks)
    planning = sorted(tasks.values(), key=lambda t: int(t.id[1:]) if t.id[1:].isdigit() else 0)
    dropped = len(unfinished) - len(pending)
    return StoredTeam(
        info,
        live,
        replies,
        pending,
        count,
        asks,
        planning,
        dropped,
        usage,
        [mid for mid in held if mid in unsent and mid not in known_unsent],  # found now, in send order
        [members[a] for a in unhired],
        recovered,
        unanswered,
        unanswered_usage,
        unreadable,
        failed_asks=cancelled | {m.ask_id for m in replies if isinstance(m, Notice) and m.ask_id is not None},
        asks_begun=asks_begun,
    )


#: Records a resume reads per query: the team's records are folded page by page, never held
#: all at once (a stored record takes ~9 KB of memory once read; a long team has 100,000s).
PAGE = 2_000
#: A resume that reads for longer than this says on stderr how far it has got.
PROGRESS_AFTER_S = 2.0


def _read(store: EventStore, info: TeamInfo, kinds: list[str] | None = None) -> Iterator[StoredRecord]:
    """The records of team ``info`` (of ``kinds``: all by default), oldest first, a page at a time."""
    from aklab.store import ReadProgress

    progress = ReadProgress(f"aklab: team {info.name!r}", PROGRESS_AFTER_S)
    count = 0
    after: int | None = None
    while True:
        page = store.records(info.team_id, since=after, kinds=kinds, limit=PAGE)
        yield from page
        count += len(page)
        if len(page) < PAGE:
            break
        after = page[-1].seq
        del page  # not held while the next one is read
        progress.update(count)
    progress.done(count)


def _snapshots(store: EventStore, info: TeamInfo) -> Iterator[Any]:
    """Every agent snapshot of team ``info`` as stored, in order (as ``load_team`` takes them)."""
    for row in _read(store, info, ["DispatchedMessage", "AgentSnapshotEvent"]):
        fields = row.payload.get("fields") or {}
        if row.kind == "DispatchedMessage" and fields.get("done") is True:
            yield fields.get("snapshot")
        elif row.event_type == "AgentSnapshotEvent":
            yield fields.get("event")


def _unanswered(
    request_rows: list[tuple[Any, Any, str]],
    finished: set[str],
    answered: Counter[Any],
    known: set[str],
    ended_runs: set[str],
) -> list[str]:
    """The ids of the ``ModelRequestEvent`` records of handlings that never finished whose
    request got no stored answer (each run asks one request at a time: its starts beyond its
    ``answered`` count, answers that no longer read back included: those came back), leaving
    out those an earlier resume reported. A run in ``ended_runs`` (its usage
    is stored) has nothing in flight: a run records the usage of every request it made as it
    ends, answered or failed, so a request that failed (an HTTP error, a context that did not
    fit: then asked again by a run of its own) is not reported as in flight."""
    starts: dict[Any, list[str]] = {}
    for handling_id, run_id, record_id in request_rows:
        if handling_id not in finished and run_id not in ended_runs:
            starts.setdefault(run_id, []).append(record_id)
    return [r for run_id, ids in starts.items() for r in ids[answered[run_id] :] if r not in known]


def _unanswered_usage(
    store: EventStore,
    info: TeamInfo,
    record_ids: list[str],
    members: dict[str, StoredMember],
    asks: dict[str, StoredAsk],
) -> list[LlmUsageEvent]:
    """A failed request of unknown size for each request in flight when the kernel stopped
    (``record_ids``: their ``ModelRequestEvent`` records), charged like any request: to its
    member's budget and its open ask's counters. Its model is the one the record names (older
    records name none: the member's last, else ``unknown``)."""
    from aklab.agent.events import ModelRequestEvent
    from aklab.core import EventMessage
    from aklab.llm import LlmUsageEvent

    events: list[LlmUsageEvent] = []
    for record_id in record_ids:
        for row in store.records(info.team_id, record_id=record_id):
            record = row.message()
            if not (isinstance(record, EventMessage) and isinstance(record.event, ModelRequestEvent)):
                continue
            request = record.event
            member = members.get(request.agent_id)
            last = member.usage[-1].model if member is not None and member.usage else "unknown"
            event = LlmUsageEvent(
                agent=request.agent,
                role=member.role if member is not None else "",
                run_id=request.run_id,
                model=request.model or last,
                ask_id=record.ask_id,
                input_tokens=None,
                output_tokens=None,
                ok=False,
                cost_usd=0.0 if request.local else None,
                cost_source="local" if request.local else None,
                started_at=row.created_at,
            )
            events.append(event)
            if member is not None:
                member.usage.append(event)
            ask = asks.get(event.ask_id) if event.ask_id is not None else None
            if ask is not None:
                ask.charge(event)
    return events


def _replays(
    answers: dict[tuple[str, str], list[Any]],
    counted_runs: set[str],
    members: dict[str, StoredMember],
    pending: list[tuple[str, Any]],
    asks: dict[str, StoredAsk],
) -> list[LlmUsageEvent]:
    """Give each member the answers stored for the handlings it does again (``pending``), and
    return the usage of answers in unfinished handlings whose run never recorded it (paid,
    counted nowhere yet: in the members' budgets and the open asks' counters from now on)."""
    for to, message in pending:
        stored = answers.get((to, message.id))
        if stored and to in members:
            members[to].replay[message.id] = [a.response for a in stored]
    recovered: list[LlmUsageEvent] = []
    for (agent_id, _), stored in answers.items():  # only unfinished handlings' answers are read back
        for answer in stored:
            if answer.run_id in counted_runs:
                continue
            event = answer.usage
            recovered.append(event)
            if agent_id in members:
                members[agent_id].usage.append(event)
            ask = asks.get(event.ask_id) if event.ask_id is not None else None
            if ask is not None:
                ask.charge(event)
    return recovered


def _event_field(row: StoredRecord, name: str) -> Any:
    """A field of an ``EventMessage`` row's event, read from its payload without decoding the record."""
    event = (row.payload.get("fields") or {}).get("event")
    data = event.get("$data") if isinstance(event, dict) else None
    return data.get(name) if isinstance(data, dict) else None


def _open_asks(
    store: EventStore, team_id: str, open_ids: set[str], finished: set[str], unsent: set[str]
) -> dict[str, StoredAsk]:
    """The guard's counters of the asks in ``open_ids``, from their records (read again, ask
    by ask); ``finished``: the messages handled to the end (each was one model turn);
    ``unsent``: messages of handlings that never finished (not exchanged: sent again when redone)."""

    from aklab.agent import AgentMessage
    from aklab.core import EventMessage, SentMessage
    from aklab.llm import LlmUsageEvent

    asks = {ask_id: StoredAsk(ask_id) for ask_id in open_ids}
    rows = (
        (ask, row)
        for ask_id, ask in asks.items()
        for row in store.records(team_id, ask_id=ask_id, kinds=["SentMessage", "LlmUsageEvent"])
    )
    for ask, row in rows:
        if row.kind == "SentMessage":
            record = row.message()
            assert isinstance(record, SentMessage)
            message = record.message
            sender, recipient = record.sender, record.recipient
            if not isinstance(message, AgentMessage) or sender is None or recipient is None:
                continue
            if recipient.is_user_proxy or message.id in unsent:
                continue
            if sender.is_user_proxy:
                # a person's message is a turn of its recipient (a /command is not)
                if message.id in finished and not message.content.startswith("/"):
                    ask.turns += 1
                continue
            ask.messages.append((sender.name, recipient.name, message.content))
            if message.id in finished:
                ask.turns += 1
        elif row.kind == "EventMessage" and row.event_type == "LlmUsageEvent":
            record = row.message()
            assert isinstance(record, EventMessage)
            if isinstance(record.event, LlmUsageEvent):
                ask.charge(record.event)
    return asks


def restore_team(lab: Lab, stored: StoredTeam) -> None:
    """Start the stored members of ``stored`` in ``lab`` under their own ids, give each its
    history, state and budget back, the team its planning board and its open asks their
    guard counters, then re-deliver what was never finished (``Lab.resume``)."""
    from aklab.agent import BaseAgent, HumanProxy, UnansweredRequestsEvent, UnreadableAnswersEvent
    from aklab.core import ActorAddress, BaseConfig, EventMessage, StopMessage, UnsentMessagesEvent

    human = next((m for m in stored.members if m.is_user_proxy), None)
    lab.human = lab.orchestrator.createActor(
        HumanProxy, BaseConfig(name="@Human", role="Human"), agent_id=human.agent_id if human else None
    )
    lab.inbox = lab.system.proxy_ask(lab.human, HumanProxy).inbox
    for reply in stored.replies:
        lab.inbox.append(reply)
    # lab.usage() totals the team, the requests before the restart too, and has a row by ask
    # for every ask begun, with or without a request (each begun where it was among them)
    begun = iter(stored.asks_begun)
    sent = next(begun, None)
    for row, event in enumerate(stored.usage):
        while sent is not None and sent[2] <= row:
            lab.recorder.usage.begin(sent[0], sent[1])
            sent = next(begun, None)
        lab.recorder.usage.append(event)
    while sent is not None:
        lab.recorder.usage.begin(sent[0], sent[1])
        sent = next(begun, None)
    lab.recorder.failed_asks.update(stored.failed_asks)
    started = [lab.human]
    live: dict[str, ActorAddress] = {}
    agents = [m for m in stored.members if not m.is_user_proxy]
    for member in agents:
        card = lab.orchestrator.get_agent_card(member.role)
        if card is None:
            raise ConfigError(
                f"the stored team has a {member.role!r} ({member.name}) that this team spec has no card for: "
                "resume with the team it was started with (Lab.resume(..., team=...))"
            )
        config = card.get_config_copy().model_copy(update={"name": member.name})
        address = lab.orchestrator.createActor(card.get_agent_class(), config, agent_id=member.agent_id)
        live[member.agent_id] = address
        started.append(address)
    lab.system.wait_started(*started)
    team_id = lab.human.team_id
    for ghost in stored.unhired:
        address = ActorAddress(ghost.agent_id, ghost.name, ghost.role, team_id=team_id)
        lab.orchestrator.team_log.record(StopMessage(sender=address))
    if stored.unsent:  # before the handling that held them is done again
        lab.orchestrator.team_log.record(EventMessage(event=UnsentMessagesEvent(message_ids=stored.unsent)))
    if stored.unanswered:
        lab.orchestrator.team_log.record(EventMessage(event=UnansweredRequestsEvent(record_ids=stored.unanswered)))
    if stored.unreadable:
        lab.orchestrator.team_log.record(EventMessage(event=UnreadableAnswersEvent(record_ids=stored.unreadable)))
    for event in [*stored.recovered, *stored.unanswered_usage]:  # stored, and in lab.usage(), like any request's
        lab.orchestrator.team_log.record(EventMessage(event=event, ask_id=event.ask_id))
    for member in agents:
        agent = lab.system.proxy_ask(live[member.agent_id], BaseAgent)
        agent.restore(member.messages, member.state, member.usage, member.replay)
    entry = [a for a in live.values() if a.role == lab.spec.entry]
    lab.entry = entry[0] if entry else lab._start_role(lab.spec.entry)
    lab.orchestrator.set_entry(lab.entry)
    if stored.planning:
        from aklab.tools.planning import restore_board

        restore_board(lab.orchestrator.team_directory, stored.planning)
    for ask in stored.asks.values():  # before its messages come back, so the guard counts on
        lab.system.asks.restore(ask.ask_id, turns=ask.turns, tokens=ask.tokens, cost=ask.cost, messages=ask.messages)
    for recipient_id, message in stored.pending:
        lab.system.tell(live[recipient_id], message)
    lab.resume_report = stored.summary()


def record_cancellations(team_log: Any) -> Any:
    """The ledger's ``on_cancel``: record each stopped or tripped ask, so that a resume
    leaves its messages alone."""
    from aklab.core import EventMessage
    from aklab.core._asks import AskCancelledEvent

    def record(ask_id: str, reason: str) -> None:
        team_log.record(EventMessage(event=AskCancelledEvent(ask_id=ask_id, reason=reason), ask_id=ask_id))

    return record


def model_to_store(cfg: ModelConfig) -> dict[str, Any]:
    """A lab's model as the event store keeps it for a resume: the fields given (a key's
    variable name at most, never a key), a ``base_url`` without the credentials a URL may hold."""
    from aklab.secrets import shown_url

    given = cfg.model_dump(mode="json", exclude_defaults=True)
    given.update(provider=cfg.provider, model=cfg.model)
    if cfg.base_url is not None:
        given["base_url"] = shown_url(cfg.base_url)
    return given


def stored_model(metadata: dict[str, Any]) -> str | ModelConfig | None:
    """The model a stored team ran on (given to its lab as a spec or a ``ModelConfig``), or
    None when it ran on its team's own models."""
    from aklab.llm import ModelConfig

    if metadata.get("model"):
        return str(metadata["model"])
    given = metadata.get("model_config")
    if not isinstance(given, dict):
        return None
    try:
        return ModelConfig(**given)
    except ConfigError as exc:
        label = f"{given.get('provider')}:{given.get('model')}"
        raise ConfigError(
            f"the stored team ran on {label}, which this aklab cannot read back ({exc}); "
            "resume it with Lab.resume(..., model=...)"
        ) from None


def stored_guard(data: Any) -> TeamGuard | None:
    """The guard limits a stored team ran with (None if absent or unreadable: the defaults)."""
    from aklab.core import TeamGuard

    if not isinstance(data, dict):
        return None
    try:
        return TeamGuard.model_validate(data)
    except ValueError as exc:  # written by another aklab version
        log.warning("the stored team's guard limits are not readable (%s); resuming with the defaults", exc)
        return None
