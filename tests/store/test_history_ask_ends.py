"""history(): an ask ends with its last work, not its first reply; how that is read cheaply
(a member's later handling shows it took the earlier messages); a store without handling
ends; asks with no model request yet."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from aklab.agent import AgentMessage
from aklab.core import ActorAddress, DispatchedMessage, SentMessage
from aklab.store import SqliteStore, history, new_team_id
from tests.store.test_contract import HUMAN, MANAGER, usage

DEVELOPER = ActorAddress("d" * 32, "@Developer", "Developer", team_id="t")
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class Team:
    """Writes one team's records as a lab with an event store does: each message with the
    handling it was sent in (``during``), and the end of each handling."""

    def __init__(self, store: SqliteStore, *, during: bool = True) -> None:
        self.store = store
        self.team_id = new_team_id()
        self.at = START
        self.during = during  # False: as aklab wrote before SentMessage.during

    def _append(self, record: Any) -> None:
        self.at += timedelta(seconds=1)
        record.created_at = self.at
        self.store.append(record, self.team_id)

    def send(
        self, sender: ActorAddress, recipient: ActorAddress, text: str, ask: str | None, during: str | None = None
    ) -> str:
        """The id of the message sent; a person's message with no ``ask`` begins one (its id)."""
        message = AgentMessage(content=text, sender=sender, recipient=recipient, ask_id=ask)
        if ask is None:
            message.ask_id = message.id
        during = during if self.during else None
        self._append(
            SentMessage(sender=sender, recipient=recipient, message=message, ask_id=message.ask_id, during=during)
        )
        return message.id

    def end(self, by: ActorAddress, message_id: str, ask: str) -> None:
        self._append(DispatchedMessage(sender=by, message_id=message_id, ask_id=ask, done=True))

    def relay(self, question: str) -> str:
        """A whole ask: the Manager asks the Developer and relays the answer. Its id."""
        ask = self.send(HUMAN, MANAGER, question, None)
        work = self.send(MANAGER, DEVELOPER, "do it", ask, during=ask)
        self.end(MANAGER, ask, ask)
        done = self.send(DEVELOPER, MANAGER, "done", ask, during=work)
        self.end(DEVELOPER, work, ask)
        self.send(MANAGER, HUMAN, "it is done", ask, during=done)
        self.end(MANAGER, done, ask)
        return ask

    def answered_with_work_left(self, question: str) -> tuple[str, str]:
        """The Manager replies and hands the Developer work in one handling; the Developer
        has not handled it yet. The ask's id and the Developer's message's."""
        ask = self.send(HUMAN, MANAGER, question, None)
        self.send(MANAGER, HUMAN, "on it", ask, during=ask)
        work = self.send(MANAGER, DEVELOPER, "do it", ask, during=ask)
        self.end(MANAGER, ask, ask)
        return ask, work


def counting_reads(store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ask ids of the reads of one ask ``store`` is asked for from now on."""
    asked: list[str] = []
    read = store.records

    def records(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("ask_id"):
            asked.append(kwargs["ask_id"])
        return read(*args, **kwargs)

    monkeypatch.setattr(store, "records", records)
    return asked


def ok(h: Any) -> dict[str, Any]:
    return {a: (None if pd.isna(v) else bool(v)) for a, v in zip(h.asks["ask_id"], h.asks["ok"], strict=True)}


def test_an_answered_ask_with_work_left_is_at_work_while_a_lab_runs_its_team_and_never_finished_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its reply did not end it: <NA> while the team is claimed, False once no lab runs it,
    True once the Developer's handling ends. Of 31 asks, only those whose end the messages
    do not show are read again."""
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        team = Team(store)
        ended = [team.relay(f"question {n}") for n in range(30)]
        left, work = team.answered_with_work_left("one more")
        store.claim(team.team_id)  # a lab runs the team
        reads = counting_reads(store, monkeypatch)
        running = history(store)
        # read again: the asks of the last message each member took (its handling may not be
        # over); the Developer's is the last relay's; the 29 before, they went on from
        assert sorted(reads) == sorted([ended[-1], left])
        store.release(team.team_id)
        orphaned = history(store)
        team.end(DEVELOPER, work, left)
        finished = history(store)
    assert ok(running) == {**dict.fromkeys(ended, True), left: None}
    assert ok(orphaned)[left] is False and ok(finished)[left] is True
    assert running.asks["ok"].dtype == "boolean"


def test_a_message_a_member_has_not_taken_keeps_its_ask_at_work_though_the_member_took_a_later_one_of_another(
    tmp_path: Path,
) -> None:
    """The Manager going on to later asks says nothing of the Developer's message: a message
    is shown taken only by a later one its own recipient took (a mailbox is FIFO), so the
    ask stays at work until the Developer's handling of it ends."""
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        team = Team(store)
        left, _ = team.answered_with_work_left("first")
        later = team.send(HUMAN, MANAGER, "second", None)
        team.send(MANAGER, HUMAN, "quick answer", later, during=later)  # the Manager went on
        team.end(MANAGER, later, later)
        store.claim(team.team_id)
        h = history(store)
    assert ok(h) == {left: None, later: True}


def test_ok_in_a_time_window_is_the_whole_asks_with_work_after_until_too(tmp_path: Path) -> None:
    """All of the ask the window holds had ended, but after ``until`` the Manager handed
    the Developer more work, not yet done: the ask is at work, in the window as whole."""
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        team = Team(store)
        ask = team.relay("question")
        until = team.at + timedelta(milliseconds=500)
        more = team.send(MANAGER, DEVELOPER, "and one more thing", ask)
        store.claim(team.team_id)
        window, whole = history(store, until=until), history(store)
        team.end(DEVELOPER, more, ask)
        done = history(store, until=until)
    assert ok(window) == ok(whole) == {ask: None}
    assert len(window.messages) == 4 and len(whole.messages) == 5
    assert ok(done) == {ask: True}


def test_a_store_whose_messages_do_not_say_their_handling_reads_the_teams_ends_once_not_each_ask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written before ``SentMessage.during``: nothing shows a message taken, so every ask is
    in question; past ``PER_ASK_READS`` of them, the team's records are read once."""
    import aklab.store._ask_ends as ends

    monkeypatch.setattr(ends, "PER_ASK_READS", 3)
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        team = Team(store, during=False)
        ended = [team.relay(f"question {n}") for n in range(5)]
        left, work = team.answered_with_work_left("one more")
        store.claim(team.team_id)
        reads = counting_reads(store, monkeypatch)
        running = history(store)
        team.end(DEVELOPER, work, left)
        finished = history(store)
    assert reads == []
    assert ok(running) == {**dict.fromkeys(ended, True), left: None}
    assert ok(finished) == {**dict.fromkeys(ended, True), left: True}


def test_a_store_without_handling_ends_cannot_tell_an_unanswered_ask_is_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written by a StoreSubscriber attached by hand: no ``during``, no handling end. An
    unanswered ask is <NA> (unknown), with no lab running it as well; an answered one is
    taken as ended; nothing is read again per ask."""
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        team = Team(store)
        answered = team.send(HUMAN, MANAGER, "first", None)
        team.send(MANAGER, HUMAN, "an answer", answered)
        unanswered = team.send(HUMAN, MANAGER, "second", None)
        team.send(MANAGER, DEVELOPER, "do it", unanswered)
        reads = counting_reads(store, monkeypatch)
        h = history(store)
    assert ok(h) == {answered: True, unanswered: None} and reads == []


def test_an_ask_with_no_model_request_yet_has_zero_tokens_and_cost(tmp_path: Path) -> None:
    """As ``lab.usage(by="ask")`` has it: zero, known (int64), not unknown (<NA>)."""
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        team = Team(store)
        asked = team.send(HUMAN, MANAGER, "just sent", None)
        store.claim(team.team_id)
        only = history(store).asks
        spent = team.send(HUMAN, MANAGER, "with a request", None)
        store.append(usage(spent, input_tokens=10, output_tokens=5, cost_usd=0.01), team.team_id)
        both = history(store).asks.set_index("ask_id")
    for frame in (only.set_index("ask_id"), both):
        row = frame.loc[asked]
        assert (row["requests"], row["runs"], row["total_tokens"], row["cost_usd"]) == (0, 0, 0, 0.0)
        assert pd.isna(row["ok"]) and row["agents"] == "" and row["question"] == "just sent"
        assert str(frame["total_tokens"].dtype) == "int64" and str(frame["agents"].dtype) == "str"
    assert both.loc[spent, "total_tokens"] == 15
