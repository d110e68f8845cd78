"""An actor's life at its edges: a start that fails, a cancel that arrives mid-handler,
shutdown, and threads that never keep the interpreter alive."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest

from aklab.core import (
    ActorAddress,
    ActorSystem,
    Akgent,
    BaseConfig,
    CancelMessage,
    ErrorMessage,
    Orchestrator,
    StopMessage,
    UserProxy,
)
from aklab.errors import ActorGoneError
from tests.core.test_actors import Counter, Ping, Recorder


class FailsToStart(Akgent[Any, Any]):
    """Starts, optionally waits for ``gate``, then raises from ``on_start``."""

    gate: threading.Event | None = None
    stopped: list[str] = []  # noqa: RUF012 - shared on purpose: the instance is gone after the failure

    def on_start(self) -> None:
        super().on_start()
        if self.gate is not None:
            self.gate.wait(10)
        raise ValueError("no model for you")

    def on_stop(self) -> None:
        super().on_stop()
        FailsToStart.stopped.append(self.config.name)


def _team(system: ActorSystem) -> tuple[Orchestrator, Recorder, ActorAddress]:
    orch = system.proxy_ask(system.createActor(Orchestrator), Orchestrator)
    rec = Recorder()
    orch.subscribe(rec)
    human = orch.createActor(UserProxy, BaseConfig(name="@Human", role="Human"))
    return orch, rec, human


def test_a_member_whose_start_fails_leaves_the_roster_and_is_reported(system: ActorSystem) -> None:
    orch, rec, _ = _team(system)
    broken = orch.createActor(FailsToStart, BaseConfig(name="@Broken", role="Broken"))
    with pytest.raises(ActorGoneError, match=r"@Broken failed to start: ValueError: no model for you"):
        system.wait_started(broken)
    assert system.wait_idle(10)
    assert [m.name for m in orch.get_team()] == ["@Human"]
    errors = [r for r in rec.records if isinstance(r, ErrorMessage)]
    assert [(e.sender.name, e.exception_type, e.exception_value) for e in errors] == [  # type: ignore[union-attr]
        ("@Broken", "ValueError", "no model for you")
    ]
    assert [r.sender.name for r in rec.records if isinstance(r, StopMessage)] == ["@Broken"]  # type: ignore[union-attr]


def test_a_message_queued_for_a_member_that_fails_to_start_comes_back_to_its_sender(system: ActorSystem) -> None:
    orch, rec, human = _team(system)
    gate = threading.Event()
    FailsToStart.gate = gate
    try:
        broken = orch.createActor(FailsToStart, BaseConfig(name="@Broken", role="Broken"))
        system.proxy_ask(human, UserProxy).send(broken, Ping(n=1))  # queued when this returns
        system.tell(broken, Ping(n=2))  # from outside any actor: no sender to tell
        assert not system.wait_idle(0.05)  # both are queued behind the start
        gate.set()
        assert system.wait_idle(10), "messages lost with the failed member are never counted as done"
    finally:
        FailsToStart.gate = None
    lost = [r for r in rec.records if isinstance(r, ErrorMessage) and r.current_message is not None]
    assert sorted((e.sender.name, e.current_message.n) for e in lost) == [  # type: ignore[union-attr]
        ("@Broken", 2),
        ("@Human", 1),
    ]
    assert all(e.exception_type == "ActorGoneError" for e in lost)
    assert all("@Broken failed to start (ValueError: no model for you)" in e.exception_value for e in lost)


def test_a_message_sent_after_a_failed_start_is_refused_at_once(system: ActorSystem) -> None:
    orch, _, _ = _team(system)
    broken = orch.createActor(FailsToStart, BaseConfig(name="@Broken", role="Broken"))
    with pytest.raises(ActorGoneError):
        system.wait_started(broken)
    with pytest.raises(ActorGoneError, match="@Broken"):
        system.tell(broken, Ping())
    assert system.wait_idle(5)


def test_a_failed_start_still_runs_on_stop_so_what_was_built_is_released(system: ActorSystem) -> None:
    released = threading.Event()

    class Releases(FailsToStart):
        """Its own class: actors of the other tests may still be stopping (actor_stopped is set
        before on_stop runs, so waiting on it would race)."""

        def on_stop(self) -> None:
            super().on_stop()
            released.set()

    orch, _, _ = _team(system)
    broken = orch.createActor(Releases, BaseConfig(name="@Broken", role="Broken"))
    with pytest.raises(ActorGoneError):
        system.wait_started(broken)
    assert released.wait(10)


def test_wait_started_returns_once_every_start_ran(system: ActorSystem) -> None:
    orch, _, human = _team(system)
    counter = orch.createActor(Counter, BaseConfig(name="@Counter", role="Counter"))
    system.wait_started(human, counter)
    assert system.proxy_ask(counter, Counter).seen == []


class Blocking(Akgent[Any, Any]):
    """A handler that waits on an event only ``on_cancel_arrived`` sets (a stand-in for an HTTP request)."""

    def __init__(self, config: Any = None, **wiring: Any) -> None:
        super().__init__(config, **wiring)
        self.request = threading.Event()
        self.entered = threading.Event()
        self.released_by_cancel = False
        self.hook_threads: list[str] = []

    def on_start(self) -> None:
        super().on_start()
        self.mailbox.classifier = lambda m: isinstance(m, CancelMessage)

    def on_cancel_arrived(self) -> None:
        self.hook_threads.append(threading.current_thread().name)
        self.request.set()

    def receiveMsg_Ping(self, message: Ping, sender: ActorAddress | None) -> None:
        self.entered.set()
        self.released_by_cancel = self.request.wait(10)

    def receiveMsg_CancelMessage(self, message: CancelMessage, sender: ActorAddress | None) -> None:
        pass


def test_a_cancel_arriving_calls_on_cancel_arrived_at_once_on_the_senders_thread(system: ActorSystem) -> None:
    orch, _, _ = _team(system)
    blocking = orch.createActor(Blocking, BaseConfig(name="@Blocking", role="Blocking"))
    proxy = system.proxy_ask(blocking, Blocking)
    entered, request = proxy.entered, proxy.request  # asked now: the handler will block the actor
    system.tell(blocking, Ping())
    assert entered.wait(10)
    system.tell(blocking, Ping())  # not a cancel: the handler stays blocked
    assert not request.is_set()
    system.tell(blocking, CancelMessage())
    assert system.wait_idle(10)
    assert proxy.released_by_cancel
    assert proxy.hook_threads == [threading.current_thread().name]


def test_a_failing_on_cancel_arrived_never_breaks_delivery(system: ActorSystem) -> None:
    class Broken(Blocking):
        def on_cancel_arrived(self) -> None:
            raise RuntimeError("hook bug")

    orch, _, _ = _team(system)
    broken = orch.createActor(Broken, BaseConfig(name="@Broken", role="Broken"))
    system.wait_started(broken)
    system.tell(broken, CancelMessage())
    assert system.wait_idle(10)


def test_shutdown_runs_on_stop_of_every_actor_newest_first(system: ActorSystem) -> None:
    stopped: list[str] = []

    class Noting(Counter):
        def on_stop(self) -> None:
            super().on_stop()
            stopped.append(self.config.name)

    orch, _, _ = _team(system)
    for name in ("@A", "@B"):
        orch.createActor(Noting, BaseConfig(name=name, role="N"))
    system.shutdown()
    assert stopped == ["@B", "@A"]


def test_actor_threads_never_keep_the_interpreter_alive(system: ActorSystem) -> None:
    _, _, human = _team(system)
    system.wait_started(human)
    actor_threads = [t for t in threading.enumerate() if t.name.startswith(("Orchestrator-", "UserProxy-"))]
    assert len(actor_threads) >= 2 and all(t.daemon for t in actor_threads)


def test_a_script_that_never_shuts_down_exits_and_its_actors_stop_first() -> None:
    script = textwrap.dedent(
        """
        from aklab.core import ActorSystem, BaseConfig, Orchestrator, EventSubscriber

        class Said(EventSubscriber):
            def on_stop(self):
                print("team stopped", flush=True)

        system = ActorSystem()
        orch = system.proxy_ask(system.createActor(Orchestrator), Orchestrator)
        orch.subscribe(Said())
        print("started", flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=False)
    assert (done.returncode, done.stdout) == (0, "started\nteam stopped\n"), done.stderr
