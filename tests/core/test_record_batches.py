"""Records an actor produces during one step reach the orchestrator as one batch, in order."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from aklab.core import (
    ActorAddress,
    ActorSystem,
    Akgent,
    BaseConfig,
    EventMessage,
    Message,
    Orchestrator,
    UserProxy,
    _akgent,
)
from tests.core.test_actors import Recorder


class Go(Message):
    events: int = 3
    ask_between: bool = False
    from_thread: bool = False


class Chatty(Akgent[Any, Any]):
    def receiveMsg_Go(self, message: Go, sender: ActorAddress | None) -> None:
        for i in range(message.events):
            self.notify_event({"n": i})
        if message.ask_between:
            # A blocking ask to the orchestrator: the batch so far must go out first.
            orch = self._system.proxy_ask(self.orchestrator, Orchestrator)  # type: ignore[union-attr,arg-type]
            orch.subscribe(_Marker(orch))
        if message.from_thread:
            worker = threading.Thread(target=self.notify_event, args=({"n": "worker"},))
            worker.start()
            worker.join()
        self.notify_event({"n": "last"})


class _Marker:
    """Subscribing records nothing itself; the test looks at what the orchestrator held."""

    made: ClassVar[list[_Marker]] = []

    def __init__(self, orch: Any) -> None:
        _Marker.made.append(self)
        self.seen_before = [m.event["n"] for m in orch.get_events() if isinstance(m.event, dict)]

    def on_message(self, message: Message) -> None:
        pass

    def on_stop(self) -> None:
        pass


def _setup(system: ActorSystem) -> tuple[Orchestrator, Recorder, Any, list[Any]]:
    orch_addr = system.createActor(Orchestrator)
    orch = system.proxy_ask(orch_addr, Orchestrator)
    rec = Recorder()
    orch.subscribe(rec)
    chatty = orch.createActor(Chatty, BaseConfig(name="@Chatty", role="Chatty"))
    user = system.proxy_tell(orch.createActor(UserProxy, BaseConfig(name="@Human", role="Human")), UserProxy)
    items: list[Any] = []
    orch_ref = orch_addr.ref
    original = _akgent.Akgent._tell

    def spy(self: Any, recipient: ActorAddress, item: Any) -> None:
        if recipient.ref is orch_ref and self.config.name == "@Chatty":
            items.append(item)
        original(self, recipient, item)

    _akgent.Akgent._tell = spy  # type: ignore[method-assign]
    return orch, rec, (lambda go: user.send(chatty, go)), items


def _events(rec: Recorder) -> list[Any]:
    return [m.event["n"] for m in rec.records if isinstance(m, EventMessage) and isinstance(m.event, dict)]


def test_one_step_sends_its_records_as_one_item_in_order(system: ActorSystem, monkeypatch: Any) -> None:
    monkeypatch.setattr(_akgent.Akgent, "_tell", _akgent.Akgent._tell)
    _orch, rec, send, items = _setup(system)
    send(Go(events=3))
    assert system.wait_idle(10)
    assert _events(rec) == [0, 1, 2, "last"]
    batches = [i for i in items if isinstance(i, _akgent._RecordBatch)]
    assert len(items) == 1 and len(batches) == 1 and len(batches[0].records) == 4


def test_an_ask_to_another_actor_sends_the_batch_first(system: ActorSystem, monkeypatch: Any) -> None:
    monkeypatch.setattr(_akgent.Akgent, "_tell", _akgent.Akgent._tell)
    _orch, rec, send, _items = _setup(system)
    _Marker.made.clear()
    send(Go(events=2, ask_between=True))
    assert system.wait_idle(10)
    assert [m.seen_before for m in _Marker.made] == [[0, 1]]
    assert _events(rec) == [0, 1, "last"]


def test_records_from_another_thread_go_out_at_once(system: ActorSystem, monkeypatch: Any) -> None:
    monkeypatch.setattr(_akgent.Akgent, "_tell", _akgent.Akgent._tell)
    _orch, rec, send, items = _setup(system)
    send(Go(events=1, from_thread=True))
    assert system.wait_idle(10)
    assert _events(rec) == ["worker", 0, "last"]
    assert len(items) == 2


def test_a_bad_record_in_a_batch_does_not_drop_the_others(system: ActorSystem, monkeypatch: Any) -> None:
    monkeypatch.setattr(_akgent.Akgent, "_tell", _akgent.Akgent._tell)
    orch, rec, send, _items = _setup(system)

    class Exploding(Recorder):
        def on_message(self, message: Message) -> None:
            if isinstance(message, EventMessage) and message.event == {"n": 1}:
                raise RuntimeError("subscriber broke")

    orch.subscribe(Exploding())
    send(Go(events=3))
    assert system.wait_idle(10)
    assert _events(rec) == [0, 1, 2, "last"]
