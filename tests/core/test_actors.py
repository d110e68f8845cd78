from __future__ import annotations

import threading
from typing import Any, ClassVar

import pykka
import pytest

from aklab.core import (
    ActorAddress,
    ActorSystem,
    AgentCard,
    Akgent,
    BaseConfig,
    ErrorMessage,
    EventSubscriber,
    HandledMessage,
    Message,
    Orchestrator,
    SentMessage,
    UserProxy,
)
from aklab.errors import ActorGoneError, ConfigError, RoutingError


class Ping(Message):
    n: int = 0


class Pong(Message):
    n: int = 0


class Counter(Akgent[Any, Any]):
    def on_start(self) -> None:
        super().on_start()
        self.seen: list[int] = []

    def receiveMsg_Ping(self, message: Ping, sender: ActorAddress | None) -> None:
        if message.n == 2:
            raise ValueError("two is not allowed")
        self.seen.append(message.n)
        if sender is not None:
            self.send(sender, Pong(n=message.n))

    def receiveMsg_Message(self, message: Message, sender: ActorAddress | None) -> None:
        self.seen.append(-1)


class Recorder(EventSubscriber):
    def __init__(self) -> None:
        self.records: list[Message] = []

    def on_message(self, message: Message) -> None:
        self.records.append(message)


def _team(system: ActorSystem) -> tuple[Orchestrator, Recorder]:
    orch = system.proxy_ask(system.createActor(Orchestrator), Orchestrator)
    rec = Recorder()
    orch.subscribe(rec)
    return orch, rec


def test_a_handler_error_becomes_an_error_message_and_the_actor_keeps_going(system: ActorSystem) -> None:
    orch, rec = _team(system)
    user = orch.createActor(UserProxy, BaseConfig(name="@Human", role="Human"))
    counter = orch.createActor(Counter, BaseConfig(name="@Counter", role="Counter"))
    tell = system.proxy_tell(user, UserProxy)
    for n in range(4):
        tell.send(counter, Ping(n=n))
    assert system.wait_idle(10)
    assert system.proxy_ask(counter, Counter).seen == [0, 1, 3]
    errors = [r for r in rec.records if isinstance(r, ErrorMessage)]
    assert len(errors) == 1
    assert errors[0].exception_type == "ValueError"
    assert isinstance(errors[0].current_message, Ping) and errors[0].current_message.n == 2
    assert counter.is_alive()


def test_dispatch_falls_back_along_the_message_class_hierarchy(system: ActorSystem) -> None:
    orch, _ = _team(system)
    counter = orch.createActor(Counter, BaseConfig(name="@Counter", role="Counter"))
    system.tell(counter, Pong())
    assert system.wait_idle(10)
    assert system.proxy_ask(counter, Counter).seen == [-1]


def test_every_send_is_recorded_with_sender_and_recipient(system: ActorSystem) -> None:
    orch, rec = _team(system)
    user = orch.createActor(UserProxy, BaseConfig(name="@Human", role="Human"))
    counter = orch.createActor(Counter, BaseConfig(name="@Counter", role="Counter"))
    system.proxy_tell(user, UserProxy).send(counter, Ping(n=7))
    assert system.wait_idle(10)
    sent = [r for r in rec.records if isinstance(r, SentMessage)]
    assert [(s.message.sender.name, s.recipient.name, type(s.message).__name__) for s in sent] == [  # type: ignore[union-attr]
        ("@Human", "@Counter", "Ping"),
        ("@Counter", "@Human", "Pong"),
    ]
    assert user.is_user_proxy and not counter.is_user_proxy


def test_names_are_made_unique_within_a_team(system: ActorSystem) -> None:
    orch, _ = _team(system)
    a = orch.createActor(Counter, BaseConfig(name="@Dev", role="Dev"))
    b = orch.createActor(Counter, BaseConfig(name="@Dev", role="Dev"))
    assert (a.name, b.name) == ("@Dev", "@Dev2")
    assert orch.get_team_member("@Dev2") == b


def test_hiring_needs_a_registered_card(system: ActorSystem) -> None:
    orch, _ = _team(system)
    orch.register_agent_profiles(
        [AgentCard(agent_class="tests.core.test_actors.Counter", config=BaseConfig(name="@Dev", role="Dev"))]
    )
    dev = orch.hire("Dev")
    assert dev.role == "Dev" and dev.is_alive()
    with pytest.raises(RoutingError, match="known roles: Dev"):
        orch.hire("Designer")


def test_a_bad_agent_class_path_is_a_clear_config_error() -> None:
    card = AgentCard(agent_class="nowhere.Nothing", config=BaseConfig(name="@X", role="X"))
    with pytest.raises(ConfigError, match="cannot import agent_class"):
        card.get_agent_class()


def test_role_is_read_from_the_config_and_not_a_constructor_keyword() -> None:
    card = AgentCard(agent_class=Counter, config=BaseConfig(name="@X", role="Writer"))
    assert card.role == "Writer"
    with pytest.raises(ValueError):
        AgentCard(agent_class=Counter, config=BaseConfig(name="@X", role="Writer"), role="Other")  # type: ignore[call-arg]


def test_telling_a_stopped_actor_raises_actor_gone(system: ActorSystem) -> None:
    orch, _ = _team(system)
    counter = orch.createActor(Counter, BaseConfig(name="@Counter", role="Counter"))
    assert orch.stop_member(counter)
    counter.ref.actor_stopped.wait(10)
    with pytest.raises(ActorGoneError, match="@Counter"):
        system.tell(counter, Ping())
    assert system.wait_idle(5)


def test_a_failing_subscriber_does_not_stop_the_others(system: ActorSystem) -> None:
    orch, rec = _team(system)

    class Broken(EventSubscriber):
        def on_message(self, message: Message) -> None:
            raise RuntimeError("subscriber bug")

    orch.subscribe(Broken())
    orch.subscribe(second := Recorder())
    orch.createActor(Counter, BaseConfig(name="@Counter", role="Counter"))
    assert system.wait_idle(10)
    assert len(second.records) == len(rec.records) == 1


def test_wait_idle_waits_for_a_chain_of_messages(system: ActorSystem) -> None:
    release = threading.Event()

    class Slow(Akgent[Any, Any]):
        def receiveMsg_Ping(self, message: Ping, sender: ActorAddress | None) -> None:
            release.wait(10)

    orch, _ = _team(system)
    slow = orch.createActor(Slow, BaseConfig(name="@Slow", role="Slow"))
    system.tell(slow, Ping())
    assert not system.wait_idle(0.05)
    release.set()
    assert system.wait_idle(10)


class Threaded(Counter):
    """An actor with a callable instance attribute: pykka calls it on the actor's thread."""

    def on_start(self) -> None:
        super().on_start()
        self.whose_thread = threading.get_ident


def test_an_ask_proxy_calls_methods_and_reads_values_in_one_message_each(system: ActorSystem) -> None:
    orch, _ = _team(system)
    counter = orch.createActor(Threaded, BaseConfig(name="@Counter", role="Counter"))
    system.wait_started(counter)
    asked = system.proxy_ask(counter, Threaded)
    assert asked.get_config().name == "@Counter"  # a method
    assert asked.seen == []  # an instance attribute's value
    assert counter._proxy is None  # neither needed a pykka proxy (it looks at every attribute)
    assert asked.whose_thread() != threading.get_ident()  # a callable attribute: called on the actor's thread
    built = counter._proxy
    assert built is not None  # ... through the actor's pykka proxy, built once per address
    assert system.proxy_ask(counter, Threaded).whose_thread() and counter._proxy is built
    with pytest.raises(AttributeError):
        asked.no_such_thing  # noqa: B018
    assert orch.stop_member(counter)
    counter.ref.actor_stopped.wait(10)
    with pytest.raises(pykka.ActorDeadError):
        system.proxy_ask(counter, Threaded)


def test_mail_that_reaches_a_fired_member_after_its_stop_goes_back_to_the_sender_and_is_recorded_consumed(
    system: ActorSystem,
) -> None:
    """Mail queued behind a member's stop (its sender still held the address) is neither
    read nor lost: the sender is told, and the store is told no resume should deliver it."""
    entered, release, forwarded = threading.Event(), threading.Event(), threading.Event()
    undelivered: list[tuple[int, str]] = []

    class Slow(Counter):
        def receiveMsg_Ping(self, message: Ping, sender: ActorAddress | None) -> None:
            entered.set()
            release.wait(10)
            super().receiveMsg_Ping(message, sender)

    class Sender(Akgent[Any, Any]):
        target: ClassVar[ActorAddress]
        late: ClassVar[Ping]

        def receiveMsg_Pong(self, message: Pong, sender: ActorAddress | None) -> None:
            self.send(self.target, self.late)
            forwarded.set()

        def on_undelivered(self, message: Message, reason: str) -> None:
            undelivered.append((getattr(message, "n", -1), reason))

    orch, rec = _team(system)
    slow = orch.createActor(Slow, BaseConfig(name="@Slow", role="Slow"))
    Sender.target, Sender.late = slow, Ping(n=7)
    sender = orch.createActor(Sender, BaseConfig(name="@Sender", role="Sender"))
    system.tell(slow, Ping(n=1))
    assert entered.wait(10)
    assert orch.stop_member(slow)  # its stop waits behind the Ping being handled
    system.tell(sender, Pong())
    assert forwarded.wait(10)  # queued behind the stop
    release.set()
    assert slow.ref.actor_stopped.wait(10)
    assert system.wait_idle(10)
    assert undelivered == [(7, "@Slow left the team before reading it")]
    consumed = [r for r in rec.records if isinstance(r, HandledMessage)]
    assert [r.message_id for r in consumed] == [Sender.late.id]
