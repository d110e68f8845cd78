"""StoreSubscriber groups a handling's records into one commit; everything else commits at once."""

from __future__ import annotations

from typing import Any

import pytest

from aklab.core import DispatchedMessage, OrchestratorMessage
from aklab.store import EventStore, StoreSubscriber, new_team_id
from aklab.store import _subscriber as subscriber_module
from tests.store.test_contract import MANAGER, sent, usage


class CountingStore(EventStore):
    """Records which calls wrote what: ``commits`` lists the records of each commit."""

    def __init__(self) -> None:
        self.queue: list[OrchestratorMessage] = []
        self.commits: list[list[str]] = []

    def append(self, record: OrchestratorMessage, team_id: str) -> int:
        self.commits.append([_name(r) for r in [*self.queue, record]])
        self.queue.clear()
        return sum(len(c) for c in self.commits)

    def append_later(self, record: OrchestratorMessage, team_id: str) -> None:
        self.queue.append(record)

    def flush(self) -> None:
        if self.queue:
            self.commits.append([_name(r) for r in self.queue])
            self.queue.clear()

    def records(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []

    def save_team(self, team_id: str, *, name: str, metadata: dict[str, Any] | None = None) -> None:
        pass

    def teams(self) -> list[Any]:
        return []

    def close(self) -> None:
        self.flush()


def _name(record: OrchestratorMessage) -> str:
    return getattr(getattr(record, "message", None), "content", None) or type(record).__name__


def within(record: OrchestratorMessage) -> OrchestratorMessage:
    record._within_handling = True
    return record


def done() -> DispatchedMessage:
    return DispatchedMessage(sender=MANAGER, message_id="m1", done=True)


def test_a_handling_is_committed_once_with_its_end_and_other_records_at_once() -> None:
    store = CountingStore()
    subscriber = StoreSubscriber(store, new_team_id())
    subscriber.on_message(sent("question"))  # a person's message: no handling in progress
    assert store.commits == [["question"]]
    subscriber.on_message(within(usage()))
    subscriber.on_message(within(sent("to the developer", sender=MANAGER)))
    assert store.commits == [["question"]] and len(store.queue) == 2  # waiting for the end
    subscriber.on_message(done())
    assert store.commits == [["question"], ["EventMessage", "to the developer", "DispatchedMessage"]]
    assert subscriber.stored == 4 and subscriber.last_seq == 4


def test_a_record_long_after_the_first_queued_one_commits_the_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(subscriber_module.time, "monotonic", lambda: now[0])
    store = CountingStore()
    subscriber = StoreSubscriber(store, new_team_id())
    subscriber.on_message(within(usage()))  # queued
    now[0] += subscriber_module.GROUP_WINDOW / 2
    subscriber.on_message(within(sent("quick", sender=MANAGER)))  # still within the window: queued
    assert store.commits == []
    now[0] += subscriber_module.GROUP_WINDOW  # a model call later
    subscriber.on_message(within(usage()))
    assert store.commits == [["EventMessage", "quick", "EventMessage"]]  # the usage is stored as it comes


def test_a_failed_queue_write_fails_the_subscriber_once_and_the_team_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(CountingStore):
        def append(self, record: OrchestratorMessage, team_id: str) -> int:
            raise OSError("disk full")

    subscriber = StoreSubscriber(Broken(), new_team_id())
    subscriber.on_message(within(usage()))
    subscriber.on_message(done())
    subscriber.on_message(sent("later"))
    assert subscriber.failed == "disk full" and subscriber.dropped == 2
    assert sum("disk full" in r.getMessage() for r in caplog.records if r.name == "aklab.store") == 1


def test_a_model_answer_is_committed_the_moment_it_arrives_with_what_was_queued_before_it() -> None:
    from tests.store.test_contract import answer

    store = CountingStore()
    subscriber = StoreSubscriber(store, new_team_id())
    subscriber.on_message(within(sent("context", sender=MANAGER)))  # queued
    subscriber.on_message(within(answer()))  # a crash from here on must not lose it
    assert store.commits == [["context", "EventMessage"]] and store.queue == []
    subscriber.on_message(within(usage()))
    subscriber.on_message(done())
    assert store.commits[-1] == ["EventMessage", "DispatchedMessage"]
