"""An ask's ``ok`` and ``agents``: the same meaning in ``lab.usage(by="ask")``, in
``AskResult`` and in ``aklab.history().asks``."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pandas as pd

import aklab
from aklab.agent import AgentMessage, Notice
from aklab.core import EventMessage, SentMessage
from aklab.core._asks import AskCancelledEvent
from aklab.lab import Lab
from aklab.lab.frames import usage_frame
from aklab.lab.recorder import TeamRecorder
from aklab.llm import LlmUsageEvent, ModelConfig
from aklab.llm.scripted import scripted_model


def test_an_ask_the_guard_tripped_is_not_ok_in_the_lab_the_result_and_the_history(tmp_path: Path) -> None:
    store = tmp_path / "events.sqlite3"
    with Lab("dev-team", store=store) as lab:
        fine = lab.ask("Ask the Developer for a haiku about tests.", timeout=10)
        lab.guard.max_turns = 1  # the Manager's turn, then the Developer's trips the guard
        tripped = lab.ask("Ask the Developer for another one.", timeout=10)
        in_lab = lab.usage(by="ask")
    assert fine.ok and not tripped.ok and tripped.notices
    assert list(in_lab["ok"]) == [True, False] and in_lab["ok"].dtype == "boolean"
    assert list(in_lab["agents"]) == ["@Manager, @Developer", "@Manager"]
    assert list(tripped.usage(by="ask")["ok"]) == [False]
    stored = aklab.history(store).asks
    columns = ["ask_id", "agents", "input_tokens", "output_tokens", "total_tokens", "ok"]  # values and dtypes
    pd.testing.assert_frame_equal(stored[columns], in_lab[columns])


def test_a_notice_or_a_cancellation_makes_an_ask_not_ok_and_nothing_else_does() -> None:
    recorder = TeamRecorder()
    for ask in ("fine", "noticed", "stopped"):
        recorder.on_message(EventMessage(event=LlmUsageEvent(agent="@A", run_id=ask, model="demo", ask_id=ask)))
        recorder.on_message(SentMessage(message=AgentMessage(content="an answer", ask_id=ask), ask_id=ask))
    recorder.on_message(SentMessage(message=Notice(content="@A could not answer", ask_id="noticed"), ask_id="noticed"))
    recorder.on_message(EventMessage(event=AskCancelledEvent(ask_id="stopped", reason="stopped"), ask_id="stopped"))
    assert recorder.failed_asks == {"noticed", "stopped"}
    frame = usage_frame(recorder.usage, by="ask", failed_asks=recorder.failed_asks)
    assert dict(zip(frame["ask_id"], frame["ok"], strict=True)) == {"fine": True, "noticed": False, "stopped": False}
    unknown = usage_frame(recorder.usage, by="ask")  # the events alone do not say
    assert unknown["ok"].isna().all()


def test_a_stopped_ask_is_not_ok_without_an_event_store_too() -> None:
    with Lab("dev-team", store=False) as lab:
        result = lab.ask("What is 2+2?", timeout=10)
        lab.system.asks.cancel(result.ask_id, "stopped by the human")  # as lab.stop() does, while it runs
        assert list(lab.usage(by="ask")["ok"]) == [False]


class HeldDeveloper:
    """The demo's relay, scripted: @Manager asks @Developer, whose turn waits inside the model
    until ``release`` is set (``entered`` says it is waiting), then @Manager answers @Human."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def _held(self, messages: Any, info: Any) -> dict[str, Any]:
        self.entered.set()
        assert self.release.wait(10), "the test never released the model"
        return _send("@Manager", "response", "a haiku")

    def model(self) -> ModelConfig:
        turns = [_send("@Developer", "request", "write a haiku"), self._held, _send("@Human", "response", "here")]
        return ModelConfig(model=scripted_model(turns))


def _send(recipient: str, intent: str, text: str) -> dict[str, Any]:
    return {"messages": [{"recipient": recipient, "message_type": intent, "message": text}]}


def test_an_ask_still_running_is_neither_ok_nor_failed_in_the_lab_until_it_ends() -> None:
    held = HeldDeveloper()
    with Lab("dev-team", model=held.model(), store=False) as lab:
        lab.send("Ask the Developer for a haiku.")
        try:
            assert held.entered.wait(10), "the Developer's turn never started"
            running = lab.usage(by="ask")  # the Manager's request is in; the Developer's is held
        finally:
            held.release.set()
        assert lab.wait(10)
        ended = lab.usage(by="ask")
    assert list(running["agents"]) == ["@Manager"] and running["ok"].isna().all()
    assert running["ok"].dtype == "boolean" and ended["ok"].dtype == "boolean"
    assert list(ended["ok"]) == [True]


def test_a_result_read_while_its_ask_runs_says_ok_is_not_known_yet() -> None:
    held = HeldDeveloper()
    with Lab("dev-team", model=held.model(), store=False) as lab:
        lab.send("Ask the Developer for a haiku.")
        try:
            assert held.entered.wait(10), "the Developer's turn never started"
            early = lab.result(lab.last_ask_id or "")
        finally:
            held.release.set()
        assert lab.wait(10)
        late = lab.result(lab.last_ask_id or "")
    assert early.ok is None and early.running and list(early.usage(by="ask")["ok"].isna()) == [True]
    assert early.as_text() == "(no reply: the team is still working on it)"
    assert early.summary().endswith(" · still running")
    assert late.ok is True and not late.running and list(late.usage(by="ask")["ok"]) == [True]


def test_history_says_an_ask_at_work_is_not_known_yet_while_a_lab_runs_it_and_not_ok_once_none_does(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.sqlite3"
    held = HeldDeveloper()
    with Lab("dev-team", model=held.model(), store=path) as lab:
        lab.send("Ask the Developer for a haiku.")
        try:
            assert held.entered.wait(10), "the Developer's turn never started"
            running = aklab.history(path).asks  # another store object, as another kernel reads it
            store = lab.store
            assert store is not None
            own = aklab.history(store).asks  # the store object that holds the lab's claim
            store.release(lab.team_id)  # as a dead kernel's claim ends with it
            orphaned = aklab.history(path).asks
        finally:
            held.release.set()
        assert lab.wait(10)
        ended = aklab.history(path).asks
    assert list(running["ok"].isna()) == [True] and running["ok"].dtype == "boolean"
    assert list(own["ok"].isna()) == [True]
    assert list(orphaned["ok"]) == [False]
    assert list(ended["ok"]) == [True] and ended["ok"].dtype == "boolean"
