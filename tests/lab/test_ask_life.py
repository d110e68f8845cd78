"""An ask's life in ``lab.usage(by="ask")`` and ``aklab.history().asks``: a row from the
moment the person sends it (queued behind another ask, or its first request still in
flight), at work until the last work of it ends (which may come after its first reply),
and the two frames agreeing on every column they share, values and dtypes."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import aklab
from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from aklab.llm.scripted import scripted_model
from aklab.store import SqliteStore, StoreSubscriber, new_team_id
from tests.fakeserver import Behaviour, FakeOpenAI, hang, last_user_text, output
from tests.lab.test_ask_ok import HeldDeveloper
from tests.lab.test_resume_real_provider import RELAY

#: The columns both frames have.
SHARED = ["ask_id", "question", "agents", "requests", "input_tokens", "output_tokens", "total_tokens", "cost_usd", "ok"]
WAIT = 10


def agree(live: pd.DataFrame, stored: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(live[SHARED].reset_index(drop=True), stored[SHARED].reset_index(drop=True))


def _say(*messages: tuple[str, str, str]) -> dict[str, Any]:
    return {"messages": [{"recipient": r, "message_type": intent, "message": text} for r, intent, text in messages]}


class Gate:
    """A scripted turn that waits inside the model until ``release`` is set (``entered``
    says it is waiting), then answers ``turn``."""

    def __init__(self, turn: dict[str, Any]) -> None:
        self.turn = turn
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, messages: Any, info: Any) -> dict[str, Any]:
        self.entered.set()
        assert self.release.wait(WAIT), "the test never released the model"
        return self.turn


def test_an_ask_answered_while_a_member_still_works_on_it_is_at_work_in_both_frames_until_that_work_ends(
    tmp_path: Path,
) -> None:
    """The Manager answers the person and hands the Developer work in the same turn: the ask
    had its reply, but is not over while the Developer's turn runs (history() took the
    reply for its end: ok True, and False once no lab ran the team)."""
    path = tmp_path / "events.sqlite3"
    developer = Gate(_say(("@Manager", "response", "a haiku")))
    turns = [
        _say(("@Human", "response", "on it"), ("@Developer", "request", "write a haiku")),
        developer,
        _say(("@Human", "response", "here it is: a haiku")),
    ]
    with Lab("dev-team", model=ModelConfig(model=scripted_model(turns)), store=path) as lab:
        lab.send("Ask the Developer for a haiku.")
        try:
            assert developer.entered.wait(WAIT), "the Developer's turn never started"
            live = lab.usage(by="ask")
            stored = aklab.history(path)  # another store object, as another kernel reads it
            store = lab.store
            assert store is not None
            store.release(lab.team_id)  # as a dead kernel's claim ends with it
            orphaned = aklab.history(path).asks
        finally:
            developer.release.set()
        assert lab.wait(WAIT)
        live_end = lab.usage(by="ask")
        stored_end = aklab.history(path)
    replies = stored.messages[stored.messages["recipient"] == "@Human"]
    assert list(replies["content"]) == ["on it"]  # it had its reply ...
    assert live["ok"].isna().all() and stored.asks["ok"].isna().all()  # ... and was still at work
    agree(live, stored.asks)
    assert list(orphaned["ok"]) == [False]  # no lab runs it: it never finished
    assert list(live_end["ok"]) == [True] and list(live_end["agents"]) == ["@Manager, @Developer"]
    agree(live_end, stored_end.asks)
    ended = stored_end.asks.iloc[0]
    assert ended["last_at"] >= stored_end.messages["created_at"].max() > stored.asks["last_at"].iloc[0]


def test_an_ask_queued_behind_another_has_its_row_in_both_frames_from_the_moment_it_is_sent(tmp_path: Path) -> None:
    """The Manager's first turn is held in its model: neither ask has made a request the
    lab has counted, the second is queued behind the first; both are at work, with zero
    tokens, and their questions."""
    path = tmp_path / "events.sqlite3"
    first = Gate(_say(("@Human", "response", "one")))
    turns = [first, _say(("@Human", "response", "two"))]
    with Lab("dev-team", model=ModelConfig(model=scripted_model(turns)), store=path) as lab:
        lab.send("First question")
        try:
            assert first.entered.wait(WAIT), "the Manager's turn never started"
            lab.send("Second question")
            second = lab.last_ask_id
            live = lab.usage(by="ask")
            stored = aklab.history(path).asks
            queued = lab.result(second).usage(by="ask")  # the ask's own result says the same
        finally:
            first.release.set()
        assert lab.wait(WAIT)
        live_end = lab.usage(by="ask")
        stored_end = aklab.history(path).asks
        done = lab.result(second).usage(by="ask")
    asked = live.drop(columns="question")
    pd.testing.assert_frame_equal(queued, asked.iloc[[1]].reset_index(drop=True))
    pd.testing.assert_frame_equal(done, live_end.drop(columns="question").iloc[[1]].reset_index(drop=True))
    assert list(live["question"]) == ["First question", "Second question"]
    assert list(live["requests"]) == [0, 0] and list(live["total_tokens"]) == [0, 0]
    assert live["ok"].isna().all() and str(live["total_tokens"].dtype) == "int64"
    assert (live["started_at"] <= live["started_at"].iloc[1]).all() and live["agents"].eq("").all()
    agree(live, stored)
    assert list(live_end["ok"]) == [True, True] and list(live_end["requests"]) == [1, 1]
    agree(live_end, stored_end)
    assert list(live_end["started_at"]) == list(stored_end["first_at"])  # when each was sent


def test_a_store_written_without_handling_ends_says_an_unanswered_ask_is_unknown_not_failed(tmp_path: Path) -> None:
    """A ``StoreSubscriber`` attached by hand (the team does not record the ends of its
    handlings): whether work of an unanswered ask is pending cannot be told, so its ``ok``
    is <NA> (it read False: failed), and an answered one is taken as ended."""
    held = HeldDeveloper()
    team_id = new_team_id()
    with SqliteStore(tmp_path / "events.sqlite3") as store, Lab("dev-team", model=held.model(), store=False) as lab:
        lab.orchestrator.subscribe(StoreSubscriber(store, team_id))
        lab.send("Ask the Developer for a haiku.")
        try:
            assert held.entered.wait(WAIT), "the Developer's turn never started"
            unanswered = aklab.history(store).asks
        finally:
            held.release.set()
        assert lab.wait(WAIT)
        answered = aklab.history(store).asks
        assert not store.records(team_id, kinds=["DispatchedMessage"])  # no handling end stored
    assert list(unanswered["ok"].isna()) == [True] and unanswered["ok"].dtype == "boolean"
    assert list(answered["ok"]) == [True]


# -- over pydantic-ai's real OpenAI provider ----------------------------------------------------


def _relay(body: dict[str, Any]) -> Behaviour:
    """The Developer's requests hang; the Manager answers the first question and hands the
    Developer work in one turn, and its request for any other question hangs."""
    system = str(body["messages"][0].get("content") or "")
    if system.startswith("You are Developer") or "First question" not in last_user_text(body):
        return hang()
    on_it = {"message_type": "response", "recipient": "@Human", "message": "on it"}
    work = {"message_type": "request", "recipient": "@Developer", "message": "compute the answer"}
    return output({"messages": [on_it, work]})(body)


@pytest.mark.parametrize("mode", ["tool", "prompted"])
def test_on_a_real_provider_both_frames_show_an_ask_in_flight_and_one_answered_but_still_at_work(
    fake_openai: FakeOpenAI, tmp_path: Path, mode: str
) -> None:
    """The first ask is answered while the Developer's request hangs; the second's first
    request hangs at the server (no usage reported yet). Both asks have their rows in both
    frames, at work; the second with zero tokens. Stopped, both are not ok, alike."""
    fake_openai.default = _relay
    path = tmp_path / "events.sqlite3"
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, output_mode=mode)
    with Lab(team_from_dict(RELAY), model=cfg, store=path) as lab:
        try:
            lab.send("First question")
            assert fake_openai.wait_for(lambda f: f.hanging == 1, WAIT), "the Developer's request never came"
            lab.send("Second question")
            assert fake_openai.wait_for(lambda f: f.hanging == 2, WAIT), "the second ask's request never came"
            live = lab.usage(by="ask")
            stored = aklab.history(path)
            lab.stop()
            assert lab.wait(WAIT)
            live_end = lab.usage(by="ask")
            stored_end = aklab.history(path).asks
        finally:
            fake_openai.release()
    assert list(stored.messages[stored.messages["recipient"] == "@Human"]["content"]) == ["on it"]
    assert list(live["question"]) == ["First question", "Second question"] and live["ok"].isna().all()
    assert list(live["input_tokens"]) == [11, 0] and list(live["output_tokens"]) == [7, 0]  # the fake's usage
    agree(live, stored.asks)
    assert list(live_end["ok"]) == [False, False]
    agree(live_end, stored_end)


def test_after_a_resume_the_live_frame_has_the_earlier_asks_that_made_no_request(tmp_path: Path) -> None:
    """A command answered without a model begins an ask too: after a resume, the lab's frame
    still has its row (it had none: only asks with usage were restored), in the order asked."""
    path = tmp_path / "events.sqlite3"
    with Lab("dev-team", store=path) as lab:
        lab.ask("/help", timeout=WAIT)
        lab.ask("What is 2+2?", timeout=WAIT)
        lab.ask("/help", timeout=WAIT)
        before = lab.usage(by="ask")
        team_id = lab.team_id
    with Lab.resume(team_id, store=path) as again:
        after = again.usage(by="ask")
        stored = aklab.history(path).asks
    assert list(before["question"]) == ["/help", "What is 2+2?", "/help"]
    assert [n > 0 for n in before["requests"]] == [False, True, False]
    agree(after, stored)
    pd.testing.assert_frame_equal(after[SHARED], before[SHARED])
    assert list(after["started_at"]) == list(before["started_at"])
