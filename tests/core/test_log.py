"""The team log: members record on their own thread, in order, without waking the orchestrator."""

from __future__ import annotations

import threading
from typing import Any

from aklab.core import ActorSystem, BaseConfig, EventMessage, Message, Orchestrator, SentMessage, TeamLog, UserProxy
from aklab.core._mailbox import Mailbox
from tests.core.test_actors import Counter, Ping, Recorder


class ThreadNoting(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def on_message(self, message: Message) -> None:
        super().on_message(message)
        self.threads.append(threading.current_thread().name)


def test_records_are_taken_on_the_senders_thread_without_mail_to_the_orchestrator(
    system: ActorSystem, monkeypatch: Any
) -> None:
    orch_addr = system.createActor(Orchestrator)
    orch = system.proxy_ask(orch_addr, Orchestrator)
    rec = ThreadNoting()
    orch.subscribe(rec)
    user = orch.createActor(UserProxy, BaseConfig(name="@Human", role="Human"))
    counter = orch.createActor(Counter, BaseConfig(name="@Counter", role="Counter"))
    puts: list[Any] = []
    original = Mailbox.put

    def spy(self: Mailbox, envelope: Any, /) -> None:
        if self is orch_addr.ref.actor_inbox:
            puts.append(envelope)
        original(self, envelope)

    monkeypatch.setattr(Mailbox, "put", spy)
    system.proxy_tell(user, UserProxy).send(counter, Ping(n=1))
    assert system.wait_idle(10)
    sent = [(r, t) for r, t in zip(rec.records, rec.threads, strict=True) if isinstance(r, SentMessage)]
    # @Human sends Ping (on its thread), @Counter answers Pong (on its thread), in that order.
    assert [type(r.message).__name__ for r, _ in sent] == ["Ping", "Pong"]
    assert sent[0][1] != sent[1][1]
    assert not any("Orchestrator" in t for _, t in sent)
    assert puts == []


def test_many_threads_recording_at_once_lose_nothing_and_each_keeps_its_order() -> None:
    team_log = TeamLog()
    rec = Recorder()
    team_log.subscribe(rec)

    def write(who: int) -> None:
        for n in range(500):
            team_log.record(EventMessage(event={"who": who, "n": n}))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for who in range(4):
        mine = [r.event["n"] for r in rec.records if isinstance(r, EventMessage) and r.event["who"] == who]
        assert mine == list(range(500))
    assert len(team_log.events()) == 2000


def test_a_subscriber_that_unsubscribes_stops_receiving() -> None:
    team_log = TeamLog()
    rec = Recorder()
    team_log.subscribe(rec)
    team_log.record(EventMessage(event=1))
    team_log.unsubscribe(rec)
    team_log.record(EventMessage(event=2))
    assert [r.event for r in rec.records if isinstance(r, EventMessage)] == [1]
    assert [m.event for m in team_log.events()] == [1, 2]


def test_the_stores_bookkeeping_is_fanned_out_but_not_kept_in_memory() -> None:
    from aklab.core import DispatchedMessage, HandledMessage

    log, recorder = TeamLog(), Recorder()
    log.subscribe(recorder)
    records = [
        DispatchedMessage(message_id="m", done=True),
        HandledMessage(message_id="n"),
        SentMessage(message=Ping()),
    ]
    for record in records:
        log.record(record)
    assert recorder.records == records
    assert log.messages() == [records[2]]
