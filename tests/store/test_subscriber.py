"""StoreSubscriber on a running team, on each kind of store."""

from __future__ import annotations

from aklab.agent import AgentBusyEvent, AgentMessage
from aklab.core import EventMessage, SentMessage
from aklab.lab import Lab
from aklab.llm import LlmUsageEvent
from aklab.store import EventStore, StoreSubscriber, new_team_id


def test_a_team_stores_every_message_and_usage_event_as_it_happens(store: EventStore) -> None:
    team_id = new_team_id()
    with Lab("dev-team") as lab:
        subscriber = StoreSubscriber(store, team_id)
        lab.orchestrator.subscribe(subscriber)
        store.save_team(team_id, name=lab.spec.name, metadata={"entry": lab.entry.name})
        result = lab.ask("Write a hello function", timeout=60)
        transcript = lab.transcript()
        lab_usage = list(lab.recorder.usage)
        busy = lab.orchestrator.team_log.events(AgentBusyEvent)
    assert result and subscriber.failed is None and subscriber.stored > 0
    rows = store.records(team_id)
    assert len(rows) == subscriber.stored and rows[-1].seq == subscriber.last_seq
    sent = [r.message() for r in rows if r.kind == "SentMessage"]
    assert all(isinstance(m, SentMessage) and isinstance(m.message, AgentMessage) for m in sent)
    assert [(m.message.id, m.message.content) for m in sent] == [(m.id, m.content) for m in transcript]  # type: ignore[attr-defined]
    assert {m.ask_id for m in sent} == {result.ask_id}
    usage = [r.message() for r in rows if r.event_type == "LlmUsageEvent"]
    assert all(isinstance(u, EventMessage) and isinstance(u.event, LlmUsageEvent) for u in usage)
    assert [u.event for u in usage] == lab_usage  # type: ignore[attr-defined]
    assert not [r for r in rows if r.event_type == "OutputStreamEvent"]  # transient: not stored
    assert not [r for r in rows if r.event_type == "AgentBusyEvent"]  # live UI state: memory only
    assert busy  # ...where the panels find it
    team = next(t for t in store.teams() if t.team_id == team_id)
    assert team.name == "dev-team" and team.metadata == {"entry": "@Manager"}
    assert team.last_activity == max(r.created_at for r in rows)
