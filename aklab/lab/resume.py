"""Reading a stored team back: who was in it, what each agent remembered, what was left to do.

``Lab.resume(team_id)`` folds the team's records from the event store in one pass
(O(records)) into a :class:`StoredTeam`:

- **members**: every agent started and not stopped, with its stored identity (agent id,
  name, role), in start order;
- **snapshots**: each agent's model history (each ``AgentSnapshotEvent`` replaces the
  history from its ``start`` on) and its last state (context-update baseline included);
- **usage**: each agent's usage events, so its lifetime budget counters come back;
- **replies**: what reached the human (shown again in ``lab.replies()``);
- **pending**: every message sent to an agent whose handling never finished (no
  ``DispatchedMessage(done=True)``): queued when the kernel died, or being handled. The
  resumed team gets them again, in their original order, with their ids and ask ids, so
  each message is handled to the end exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aklab.errors import ConfigError

if TYPE_CHECKING:
    from aklab.agent import AgentMessage
    from aklab.llm import LlmUsageEvent
    from aklab.store import EventStore, TeamInfo

__all__ = ["StoredMember", "StoredTeam", "load_team"]


@dataclass
class StoredMember:
    agent_id: str
    name: str
    role: str
    is_user_proxy: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    usage: list[LlmUsageEvent] = field(default_factory=list)


@dataclass
class StoredTeam:
    info: TeamInfo
    members: list[StoredMember]
    replies: list[AgentMessage]
    pending: list[tuple[str, AgentMessage]]  # (recipient agent id, message), in send order
    records: int

    @property
    def team_id(self) -> str:
        return self.info.team_id

    def summary(self) -> str:
        agents = [m.name for m in self.members if not m.is_user_proxy]
        return (
            f"resumed team {self.info.name!r} ({self.team_id[:8]}): {len(agents)} agents ({', '.join(agents)}), "
            f"{len(self.pending)} message(s) re-delivered, {len(self.replies)} earlier repl(ies) to @Human, "
            f"from {self.records} stored records"
        )


def pick_team(store: EventStore, team: str | None) -> TeamInfo:
    """The stored team with this id or name (the most recently active if None)."""
    teams = store.teams()
    if not teams:
        raise ConfigError(f"no team is stored in {store.location}: start one with Lab(...) first")
    if team is None:
        return teams[0]
    found = [t for t in teams if t.team_id == team or t.team_id.startswith(team)] or [
        t for t in teams if t.name == team
    ]
    if not found:
        known = ", ".join(f"{t.name} ({t.team_id[:8]})" for t in teams[:10])
        raise ConfigError(f"no stored team {team!r} in {store.location}; stored: {known}")
    return found[0]


def load_team(store: EventStore, team: str | None = None) -> StoredTeam:
    """Fold the stored records of ``team`` (an id, an id prefix or a name; None: the latest)."""
    from aklab.agent import AgentMessage, AgentSnapshotEvent
    from aklab.core import DispatchedMessage, EventMessage, SentMessage, StartMessage
    from aklab.llm import LlmUsageEvent

    info = pick_team(store, team)
    rows = store.records(info.team_id)
    members: dict[str, StoredMember] = {}
    stopped: set[str] = set()
    sent: dict[str, tuple[str, AgentMessage]] = {}  # message id -> (recipient id, message), in order
    finished: set[str] = set()
    replies: list[AgentMessage] = []
    by_name: dict[str, StoredMember] = {}
    for row in rows:
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
        elif kind == "StopMessage" and row.sender_id:
            stopped.add(row.sender_id)
        elif kind == "SentMessage":
            record = row.message()
            assert isinstance(record, SentMessage)
            message = record.message
            if not isinstance(message, AgentMessage) or record.recipient is None:
                continue
            if record.recipient.is_user_proxy:
                replies.append(message)
            else:
                sent[message.id] = (record.recipient.agent_id, message)
        elif kind == "DispatchedMessage" and row.message_id:
            record = row.message()
            if isinstance(record, DispatchedMessage) and record.done:
                finished.add(row.message_id)
        elif kind == "EventMessage" and row.event_type in ("AgentSnapshotEvent", "LlmUsageEvent"):
            record = row.message()
            assert isinstance(record, EventMessage)
            event = record.event
            if isinstance(event, AgentSnapshotEvent) and event.agent_id in members:
                snap = members[event.agent_id]
                snap.messages = [*snap.messages[: event.start], *event.messages]
                snap.state = event.state
            elif isinstance(event, LlmUsageEvent) and event.agent in by_name:
                by_name[event.agent].usage.append(event)
    live = [m for agent_id, m in members.items() if agent_id not in stopped]
    live_ids = {m.agent_id for m in live}
    pending = [(to, m) for mid, (to, m) in sent.items() if mid not in finished and to in live_ids]
    return StoredTeam(info, live, replies, pending, len(rows))
