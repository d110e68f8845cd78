"""The EventStore contract, run against SQLite and a real PostgreSQL server."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from aklab.agent import AgentMessage, ModelResponseEvent
from aklab.core import ActorAddress, ErrorMessage, EventMessage, HandledMessage, SentMessage, StartMessage
from aklab.llm import LlmUsageEvent
from aklab.secrets import register_secret
from aklab.store import EventStore, SqliteStore, StoreError, TeamInUseError, new_team_id

HUMAN = ActorAddress("h" * 32, "@Human", "Human", team_id="t", is_user_proxy=True)
MANAGER = ActorAddress("m" * 32, "@Manager", "Manager", team_id="t")


def sent(content: str, ask_id: str | None = None, *, sender: ActorAddress = HUMAN) -> SentMessage:
    inner = AgentMessage(content=content, sender=sender, recipient=MANAGER, ask_id=ask_id)
    return SentMessage(sender=sender, recipient=MANAGER, message=inner, ask_id=ask_id)


def usage(ask_id: str | None = None, **fields: object) -> EventMessage:
    values: dict[str, object] = {"agent": "@Manager", "role": "Manager", "run_id": "r1", "model": "demo"}
    event = LlmUsageEvent.model_validate({**values, "ask_id": ask_id, **fields})
    return EventMessage(sender=MANAGER, event=event, ask_id=ask_id)


def answer(text: str = "All done.") -> EventMessage:
    """A model's answer as a stored team records it when it arrives (``ModelResponseEvent``)."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.usage import RequestUsage

    response = ModelResponse(
        parts=[TextPart(text), ToolCallPart("final_result", {"messages": []}, tool_call_id="call-1")],
        usage=RequestUsage(input_tokens=12, output_tokens=3),
        model_name="fake",
        provider_name="openai",
        provider_response_id="resp-1",
        finish_reason="stop",
    )
    spent = LlmUsageEvent(agent="@Manager", role="Manager", run_id="r1", model="openai:fake", input_tokens=12)
    event = ModelResponseEvent(
        agent="@Manager", agent_id=MANAGER.agent_id, message_id="m1", run_id="r1", response=response, usage=spent
    )
    return EventMessage(sender=MANAGER, event=event)


@dataclasses.dataclass
class Plain:
    """An event that is no pydantic model."""

    agent: str
    count: int


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque thing>"


def raw_text(store: EventStore) -> str:
    """Everything the store holds, as the database renders it."""
    if isinstance(store, SqliteStore):
        import sqlite3

        conn = sqlite3.connect(store.path)
        try:
            rows = conn.execute("SELECT * FROM events").fetchall() + conn.execute("SELECT * FROM teams").fetchall()
        finally:
            conn.close()
        return repr(rows)
    conn2 = store._db()  # type: ignore[attr-defined]
    events = conn2.execute("SELECT events::text FROM events").fetchall()
    teams = conn2.execute("SELECT teams::text FROM teams").fetchall()
    return repr(events + teams)


def raw_execute(store: EventStore, sql: str) -> None:
    if isinstance(store, SqliteStore):
        import sqlite3

        conn = sqlite3.connect(store.path, isolation_level=None)
        try:
            conn.execute(sql)
        finally:
            conn.close()
    else:
        store._db().execute(sql)  # type: ignore[attr-defined]


def test_records_come_back_typed_in_append_order(store: EventStore) -> None:
    team = new_team_id()
    question = sent("Write a hello function", "ask1")
    question.message.id = "ask1"
    seqs = [
        store.append(question, team),
        store.append(usage("ask1", input_tokens=None, output_tokens=7, cost_usd=None, estimated=True), team),
        store.append(
            ErrorMessage(
                sender=MANAGER, exception_type="ValueError", exception_value="bad", current_message=question.message
            ),
            team,
        ),
        store.append(HandledMessage(sender=MANAGER, message_id="ask1"), team),
    ]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4
    rows = store.records(team)
    assert [r.seq for r in rows] == seqs
    assert [r.kind for r in rows] == ["SentMessage", "EventMessage", "ErrorMessage", "HandledMessage"]
    assert rows[0].sender == "@Human" and rows[0].recipient == "@Manager" and rows[0].ask_id == "ask1"
    assert [r.message_id for r in rows] == ["ask1", None, "ask1", "ask1"]
    assert rows[1].event_type == "LlmUsageEvent"

    first = rows[0].message()
    assert isinstance(first, SentMessage) and isinstance(first.message, AgentMessage)
    assert first.message.content == "Write a hello function" and first.message.type == "request"
    assert first.message.sender == HUMAN and first.message.sender.is_user_proxy
    assert not first.message.sender.is_alive()  # identity only: no live actor
    assert first.created_at == question.created_at and first.id == question.id

    event = rows[1].message()
    assert isinstance(event, EventMessage) and isinstance(event.event, LlmUsageEvent)
    assert event.event.input_tokens is None and event.event.output_tokens == 7
    assert event.event.cost_usd is None and event.event.estimated and event.event.ask_id == "ask1"

    error = rows[2].message()
    assert isinstance(error, ErrorMessage) and isinstance(error.current_message, AgentMessage)
    assert (error.exception_type, error.exception_value) == ("ValueError", "bad")


def test_records_filter_by_team_seq_time_kind_and_ask(store: EventStore) -> None:
    a, b = new_team_id(), new_team_id()
    t0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
    for i in range(6):
        record = sent(f"m{i}", f"ask{i % 2}") if i % 3 else usage(f"ask{i % 2}")
        record.created_at = t0 + timedelta(hours=i)
        store.append(record, a if i < 4 else b)
    all_a = store.records(a)
    assert len(all_a) == 4 and len(store.records(b)) == 2 and len(store.records()) == 6
    assert [r.seq for r in store.records(a, since=all_a[1].seq)] == [r.seq for r in all_a[2:]]
    assert len(store.records(since=t0 + timedelta(hours=2), until=t0 + timedelta(hours=5))) == 3
    assert len(store.records(since="2026-01-02")) == 0
    assert {r.kind for r in store.records(kinds=["SentMessage"])} == {"SentMessage"}
    assert {r.event_type for r in store.records(kinds=["LlmUsageEvent"])} == {"LlmUsageEvent"}
    assert len(store.records(kinds=[])) == 0
    assert {r.ask_id for r in store.records(a, ask_id="ask1")} == {"ask1"}
    third = all_a[2]
    assert [r.seq for r in store.records(a, record_id=third.record_id, limit=1)] == [third.seq]
    assert [r.seq for r in store.records(a, message_id=third.message_id)] == [third.seq]
    assert store.records(b, record_id=third.record_id) == []  # another team's record
    older = store.records(a, kinds=["SentMessage"], before=third.seq, limit=5, newest=True)
    assert [r.seq for r in older] == [r.seq for r in all_a[:2] if r.kind == "SentMessage"]


def test_teams_have_name_metadata_and_last_activity(store: EventStore) -> None:
    old, new = new_team_id(), new_team_id()
    store.save_team(old, name="dev-team", metadata={"entry": "@Manager", "models": ["demo"]})
    now = datetime.now(UTC)
    early = sent("hi")
    early.created_at = now + timedelta(hours=1)
    store.append(early, old)
    later = sent("hi again")
    later.created_at = now + timedelta(hours=2)
    store.append(later, new)
    store.append(early, new)  # an older record does not move last_activity back
    teams = store.teams()
    assert [t.team_id for t in teams] == [new, old]
    assert teams[0].last_activity == later.created_at and teams[1].last_activity == early.created_at
    assert teams[1].name == "dev-team" and teams[1].metadata == {"entry": "@Manager", "models": ["demo"]}
    assert teams[0].name == ""
    store.save_team(new, name="renamed")
    assert store.teams()[0].name == "renamed"


def test_a_team_never_asked_anything_says_so(store: EventStore) -> None:
    team = new_team_id()
    store.append(StartMessage(sender=HUMAN, config={}), team)
    store.append(sent("said unasked"), team)  # no ask id: not a question to the team
    [info] = [t for t in store.teams() if t.team_id == team]
    assert not info.asked
    store.append(sent("a question", "ask1"), team)
    [info] = [t for t in store.teams() if t.team_id == team]
    assert info.asked


def test_an_append_is_visible_to_another_connection_when_it_returns(make_store: Callable[[], EventStore]) -> None:
    writer, reader = make_store(), make_store()
    team = new_team_id()
    seq = writer.append(sent("durable"), team)
    assert [r.seq for r in reader.records(team)] == [seq]


def test_addresses_are_stored_as_identity_never_as_the_live_actor(store: EventStore) -> None:
    live = ActorAddress("a" * 32, "@Dev", "Developer", team_id="t", ref=Opaque())  # type: ignore[arg-type]
    team = new_team_id()
    store.append(sent("x", sender=live), team)
    store.append(StartMessage(sender=live, config={"who": live, "thing": Opaque()}), team)
    payload = store.records(team)[0].payload
    assert payload["fields"]["sender"] == {
        "agent_id": "a" * 32,
        "name": "@Dev",
        "role": "Developer",
        "team_id": "t",
        "is_user_proxy": False,
    }
    text = raw_text(store)
    assert "ref" not in str(payload["fields"]["sender"]) and "pykka" not in text
    start = store.records(team, kinds=["StartMessage"])[0].message()
    assert start.config["who"]["name"] == "@Dev"  # type: ignore[attr-defined]
    assert start.config["thing"] == "<tests.store.test_contract.Opaque: <Opaque thing>>"  # type: ignore[attr-defined]


def test_events_of_any_class_keep_their_class(store: EventStore) -> None:
    team = new_team_id()
    store.append(EventMessage(sender=MANAGER, event=Plain("@Manager", 3)), team)
    store.append(EventMessage(sender=MANAGER, event={"free": "form"}), team)
    plain, free = (r.message() for r in store.records(team))
    assert isinstance(plain, EventMessage) and plain.event == Plain("@Manager", 3)
    assert isinstance(free, EventMessage) and free.event == {"free": "form"}
    assert store.records(team)[0].event_type == "Plain"


def test_a_model_answer_comes_back_as_the_response_pydantic_ai_gave(store: EventStore) -> None:
    team = new_team_id()
    record = answer()
    store.append(record, team)
    [row] = store.records(team, kinds=["ModelResponseEvent"])
    back = row.message()
    assert isinstance(back, EventMessage) and isinstance(back.event, ModelResponseEvent)
    assert back.event.response == record.event.response  # parts, usage, ids, finish reason: all of it
    assert back.event.usage == record.event.usage


def test_no_secret_enters_the_store(store: EventStore) -> None:
    key = "sk-contract-" + new_team_id()
    register_secret(key)
    team = new_team_id()
    store.save_team(team, name="t", metadata={"note": f"key {key}", "api_key": "unregistered-value-123"})
    store.append(sent(f"my key is {key}"), team)
    store.append(ErrorMessage(sender=MANAGER, exception_type="HTTPError", exception_value=f"401 for {key}"), team)
    store.append(
        EventMessage(sender=MANAGER, event={"headers": {"Authorization": "Bearer abcdefghijklmnop"}, "k": key}), team
    )
    text = raw_text(store)
    assert key not in text and "abcdefghijklmnop" not in text and "unregistered-value-123" not in text
    assert "[redacted]" in text


def test_events_are_append_only(store: EventStore) -> None:
    store.append(sent("x"), new_team_id())
    for sql in ("UPDATE events SET kind = 'forged'", "DELETE FROM events"):
        with pytest.raises(Exception, match="append-only"):
            raw_execute(store, sql)
    assert [r.kind for r in store.records()] == ["SentMessage"]


def _contents(store: EventStore, team: str) -> list[str]:
    return [m.message.content for m in (r.message() for r in store.records(team)) if isinstance(m, SentMessage)]


def test_a_team_is_forgotten_whole_and_the_others_stay(store: EventStore) -> None:
    gone, kept = new_team_id(), new_team_id()
    store.save_team(gone, name="gone")
    store.save_team(kept, name="kept")
    for i in range(3):
        store.append(sent(f"gone {i}"), gone)
    store.append(sent("kept 0"), kept)
    store.append_later(sent("kept 1"), kept)  # queued when the forget starts: written, not lost
    assert store.forget(gone) == 3
    assert store.records(gone) == []
    assert [t.team_id for t in store.teams()] == [kept]
    assert _contents(store, kept) == ["kept 0", "kept 1"]
    assert store.forget(gone) == 0  # nothing left: forgetting again changes nothing
    for sql in ("UPDATE events SET kind = 'forged'", "DELETE FROM events"):  # append-only again
        with pytest.raises(Exception, match="append-only"):
            raw_execute(store, sql)
    assert _contents(store, kept) == ["kept 0", "kept 1"]


def test_a_team_a_lab_runs_is_not_forgotten(make_store: Callable[[], EventStore]) -> None:
    running, other = make_store(), make_store()
    team = new_team_id()
    running.append(sent("in use"), team)
    running.claim(team)
    with pytest.raises(TeamInUseError, match="running in") as refused:
        other.forget(team)
    assert str(refused.value).endswith("close it (lab.close()) before you forget it")  # not "resuming"
    with pytest.raises(TeamInUseError):
        running.forget(team)  # its own lab's team too
    assert _contents(other, team) == ["in use"]
    running.release(team)
    assert other.forget(team) == 1
    assert other.teams() == []


def test_appends_from_many_threads_are_all_kept_in_each_threads_order(store: EventStore) -> None:
    team = new_team_id()
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(40):
                store.append(sent(f"{t}:{i}"), team)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not errors
    contents = [r.payload["fields"]["message"]["$data"]["content"] for r in store.records(team)]
    assert len(contents) == 160
    for t in range(4):
        assert [c for c in contents if c.startswith(f"{t}:")] == [f"{t}:{i}" for i in range(40)]


def test_a_closed_store_says_so(store: EventStore) -> None:
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.append(sent("x"), new_team_id())
    with pytest.raises(StoreError, match="closed"):
        store.records()


def test_a_team_id_is_required(store: EventStore) -> None:
    from aklab.errors import ConfigError

    with pytest.raises(ConfigError, match="team_id"):
        store.append(sent("x"), "")


def test_records_page_forwards_and_backwards(store: EventStore) -> None:
    team = new_team_id()
    seqs = [store.append(sent(f"m{i}"), team) for i in range(10)]
    assert [r.seq for r in store.records(team, limit=3)] == seqs[:3]
    assert [r.seq for r in store.records(team, since=seqs[2], limit=3)] == seqs[3:6]
    assert [r.seq for r in store.records(team, limit=3, newest=True)] == seqs[-3:]  # oldest first
    assert [r.seq for r in store.records(team, before=seqs[7], limit=3, newest=True)] == seqs[4:7]
    assert [r.seq for r in store.records(team, before=seqs[2])] == seqs[:2]
    assert store.records(team, limit=0) == []


def test_queued_records_are_written_in_order_with_the_next_append_and_one_transaction(
    make_store: Callable[[], EventStore],
) -> None:
    store, other = make_store(), make_store()
    team = new_team_id()
    store.append_later(sent("first"), team)
    store.append_later(usage(input_tokens=3), team)
    assert other.records(team) == []  # queued: not in the database yet
    seq = store.append(sent("third"), team)  # ...written with this one, before it
    rows = other.records(team)
    assert [r.kind for r in rows] == ["SentMessage", "EventMessage", "SentMessage"]
    assert rows[-1].seq == seq and [r.seq for r in rows] == sorted(r.seq for r in rows)
    store.append_later(sent("fourth"), team)
    store.flush()
    assert [r.message().message.content for r in other.records(team, kinds=["SentMessage"])] == [  # type: ignore[attr-defined]
        "first",
        "third",
        "fourth",
    ]


def test_a_reader_of_the_same_store_sees_its_queued_records(store: EventStore) -> None:
    team = new_team_id()
    store.append_later(sent("queued"), team)
    assert [r.kind for r in store.records(team)] == ["SentMessage"]
    assert [t.team_id for t in store.teams()] == [team]


def test_closing_writes_the_queue(make_store: Callable[[], EventStore]) -> None:
    store, team = make_store(), new_team_id()
    store.append_later(sent("queued"), team)
    store.close()
    assert len(make_store().records(team)) == 1


def test_a_queued_record_that_cannot_be_encoded_stores_what_came_before_it_and_says_so(
    make_store: Callable[[], EventStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Queued records are encoded when they are written: one that cannot be ends the prefix
    (it and the records after it are not stored, the caller gets a StoreError naming it)."""
    import aklab.store._queue as queue

    real = queue.encode

    def encode(record: object, team_id: str) -> object:
        if getattr(getattr(record, "message", None), "content", None) == "broken":
            raise ValueError("cannot write this one")
        return real(record, team_id)  # type: ignore[arg-type]

    monkeypatch.setattr(queue, "encode", encode)
    store, other = make_store(), make_store()
    team = new_team_id()
    store.append_later(sent("before"), team)
    store.append_later(sent("broken"), team)
    store.append_later(sent("after"), team)
    broken = r"a SentMessage could not be written as JSON .*cannot write this one.*nor the 1 record queued after it"
    with pytest.raises(StoreError, match=broken):
        store.append(sent("end"), team)
    contents = [r.message().message.content for r in other.records(team)]  # type: ignore[attr-defined]
    assert contents == ["before"]
    store.append(sent("next"), team)  # the store itself goes on
    assert [r.message().message.content for r in other.records(team)] == ["before", "next"]  # type: ignore[attr-defined]


def test_team_totals_count_asks_and_say_what_is_unknown(store: EventStore) -> None:
    """``%aklab teams``' line per team, from the stored usage and the person's messages."""
    from aklab.store._totals import team_totals

    team, other, empty = new_team_id(), new_team_id(), new_team_id()
    question = sent("What is 2+2?")
    question.message.ask_id = question.ask_id = question.message.id
    store.append(question, team)
    store.append(sent("working on it", question.ask_id, sender=MANAGER), team)  # not an ask
    store.append(usage(question.ask_id, input_tokens=100, output_tokens=20, cost_usd=0.25), team)
    store.append(usage(question.ask_id, input_tokens=None, output_tokens=None, cost_usd=None, ok=False), team)
    store.append(usage(None, input_tokens=5, output_tokens=5, cost_usd=0.5, requests=2), other)
    totals = team_totals(store, [team, other, empty])
    assert totals[team].text() == (
        "1 ask, 2 requests, at least 120 tokens (1 request unreported), at least $0.2500 (1 request unpriced)"
    )
    assert totals[other].text() == "0 asks, 2 requests, 10 tokens, $0.5000"
    assert totals[empty].text() == "0 asks, 0 requests, 0 tokens, $0.0000"
