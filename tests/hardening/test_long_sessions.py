"""Long sessions stay bounded (issue 11): every in-memory collection has a cap, readers
still find what they read, usage totals cover the whole session, and a subscriber that
calls the orchestrator from its callback neither deadlocks the team nor goes unnoticed."""

from __future__ import annotations

import logging
import threading
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, ClassVar

import pandas as pd
import pytest
from pydantic import BaseModel

from aklab.agent import AgentBusyEvent, AgentMessage, ContextUpdateEvent
from aklab.agent.human_proxy import HumanInbox
from aklab.core import (
    ActorAddress,
    ErrorMessage,
    EventMessage,
    EventSubscriber,
    Message,
    SentMessage,
    StartMessage,
    TeamLog,
)
from aklab.core import _log as team_log_module
from aklab.core._directory import TeamDirectory
from aklab.core._recent import Recent
from aklab.lab import Lab
from aklab.lab._usage_rows import TAIL, UsageRows
from aklab.lab.frames import usage_frame
from aklab.lab.recorder import CONTEXT_UPDATES_LIMIT, ERRORS_LIMIT, TRANSCRIPT_LIMIT, TeamRecorder
from aklab.llm import AgentUsageLimits, LlmUsageEvent
from aklab.llm.limits import RECENT_RUN_IDS, AgentBudget

ASK_TIMEOUT = 30.0


def busy(n: int) -> EventMessage:
    return EventMessage(event=AgentBusyEvent(agent=f"@A{n % 3}", role="Dev", busy=n % 2 == 0))


def usage_event(n: int, **fields: Any) -> LlmUsageEvent:
    values: dict[str, Any] = {
        "agent": f"@A{n % 3}",
        "role": "Dev",
        "run_id": f"{n:032x}",
        "model": "demo",
        "input_tokens": 100 + n,
        "output_tokens": 20,
        "cost_usd": 0.001,
        "cost_source": "genai-prices",
        "duration_s": 0.5,
    }
    values.update(fields)
    return LlmUsageEvent(**values)


# -- the team log -------------------------------------------------------------------------


class Counting(EventSubscriber):
    def __init__(self) -> None:
        self.count = 0

    def on_message(self, message: Message) -> None:
        self.count += 1


def test_a_team_log_keeps_at_most_its_caps_of_50000_busy_events_and_subscribers_see_all() -> None:
    team_log = TeamLog()
    counting = Counting()
    team_log.subscribe(counting)
    for n in range(50_000):
        team_log.record(busy(n))
    assert counting.count == 50_000
    assert len(team_log.messages()) == team_log_module.RECENT_RECORDS
    kept = team_log.events(AgentBusyEvent)
    assert len(kept) == team_log_module.EVENTS_PER_TYPE
    # The newest are kept, oldest first.
    assert [m.event.agent for m in kept[-3:]] == ["@A2", "@A0", "@A1"]
    assert len(team_log._events_by_type[AgentBusyEvent]) == team_log_module.EVENTS_PER_TYPE
    team_log.record(EventMessage(event=1))
    assert [m.event for m in team_log.events(int)] == [1]  # other types still readable


def test_an_event_class_may_choose_its_own_cap_in_the_team_log() -> None:
    class Rare(BaseModel):
        aklab_log_limit: ClassVar[int | None] = None
        n: int

    team_log = TeamLog(per_type=10)
    for n in range(100):
        team_log.record(EventMessage(event=Rare(n=n)))
        team_log.record(busy(n))
    assert len(team_log.events(Rare)) == 100
    assert len(team_log.events(AgentBusyEvent)) == 10


def test_the_team_log_keeps_as_many_context_updates_as_the_recorder_so_they_fill_early() -> None:
    # One context update per ~6 model turns: under the default cap per type (2,000) the
    # log's deque was still filling after 12,000 turns, and B9's RSS slope missed its budget.
    assert ContextUpdateEvent.aklab_log_limit == CONTEXT_UPDATES_LIMIT < team_log_module.EVENTS_PER_TYPE
    team_log = TeamLog()
    for n in range(CONTEXT_UPDATES_LIMIT + 100):
        team_log.record(EventMessage(event=ContextUpdateEvent(agent="@A", number=n, block="x")))
    kept = team_log.events(ContextUpdateEvent)
    assert len(kept) == CONTEXT_UPDATES_LIMIT
    assert kept[-1].event.number == CONTEXT_UPDATES_LIMIT + 99


def test_a_team_log_keeps_the_newest_errors_and_says_how_many_it_dropped() -> None:
    team_log = TeamLog()
    total = team_log_module.ERRORS_KEPT + 250
    for n in range(total):
        team_log.record(ErrorMessage(exception_type="ValueError", exception_value=f"bad {n}"))
    errors = team_log.errors()
    assert len(errors) == team_log_module.ERRORS_KEPT
    assert errors[-1].exception_value == f"bad {total - 1}"
    assert team_log.dropped_errors == 250


def test_recent_keeps_positions_from_the_start_after_dropping_the_oldest() -> None:
    recent: Recent[int] = Recent(100, "reply")
    for n in range(1_000):
        recent.append(n)
    assert len(recent) == 1_000 and recent.dropped == 900
    assert recent[950] == 950 and recent[-1] == 999
    assert recent[990:] == list(range(990, 1_000))
    assert recent.since(0) == list(range(900, 1_000))  # what is still kept
    assert recent[1_000:] == []
    assert list(recent) == list(range(900, 1_000))
    with pytest.raises(IndexError, match=r"reply #5 was dropped: only the newest 100 are kept"):
        recent[5]
    with pytest.raises(IndexError, match="out of range"):
        recent[1_000]


# -- the lab's recorder ---------------------------------------------------------------------


def test_usage_rows_keep_every_request_in_about_a_hundred_bytes_and_give_the_same_events() -> None:
    rows = UsageRows()
    events = [usage_event(n) for n in range(2_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for event in events:
            rows.append(event)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(rows) == 2_000
    assert grown / 2_000 < 250, f"{grown / 2_000:.0f} bytes per usage row"
    assert [e.model_dump() for e in rows] == [e.model_dump() for e in events]
    assert rows[-1] is events[-1] and rows[-TAIL] is events[-TAIL]  # the newest are the recorded objects
    assert rows[5].model_dump() == events[5].model_dump() and rows[5] is not events[5]


def test_usage_rows_keep_unknown_tokens_unpriced_requests_odd_run_ids_and_naive_times() -> None:
    odd = [
        usage_event(0, input_tokens=None, output_tokens=None, ok=False),
        usage_event(1, cost_usd=None, cost_source=None, estimated=True),
        usage_event(2, run_id="run-7"),
        usage_event(3, run_id="ABCDEF" * 5 + "AB", started_at=datetime(2026, 1, 2, 3, 4, 5, 678901)),
        usage_event(4, started_at=datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), cache_read_tokens=7),
    ]
    rows = UsageRows()
    for event in odd:
        rows.append(event)
    for _ in range(TAIL):  # push the odd ones out of the tail of kept objects
        rows.append(usage_event(9))
    assert [rows[i].model_dump() for i in range(len(odd))] == [e.model_dump() for e in odd]


@pytest.mark.parametrize("by", ["agent", "run", "model", "ask", "request"])
def test_usage_frames_read_the_packed_columns_and_equal_the_frames_of_the_events(by: str) -> None:
    """lab.usage() reads UsageRows column by column (no event rebuilt per row): same frame."""

    class Tagged(LlmUsageEvent):
        tag: str = "x"

    odd = [
        usage_event(0, input_tokens=None, output_tokens=None, ok=False),
        usage_event(1, cost_usd=None, cost_source=None, estimated=True),
        usage_event(2, run_id="run-7", output_tokens=None),
        usage_event(3, cache_read_tokens=7),
        Tagged(**usage_event(4).model_dump()),
    ]
    rows = UsageRows()
    events = [*odd, *(usage_event(n % 7) for n in range(TAIL + 50))]  # past the tail of kept objects
    for event in events:
        rows.append(event)
    pd.testing.assert_frame_equal(usage_frame(rows, by=by), usage_frame(events, by=by))


def test_usage_rows_find_one_asks_requests_without_rebuilding_the_session() -> None:
    rows = UsageRows()
    for n in range(3_000):
        rows.append(usage_event(n, ask_id=f"ask{n // 3}"))
    assert [e.input_tokens for e in rows.for_ask("ask999")] == [100 + 2_997, 100 + 2_998, 100 + 2_999]
    assert [e.input_tokens for e in rows.for_ask("ask1")] == [103, 104, 105]  # an old ask: a column scan
    assert rows.for_ask("nobody") == []


def test_lab_usage_totals_the_whole_session_after_50000_requests() -> None:
    recorder = TeamRecorder()
    for n in range(50_000):
        recorder.on_message(EventMessage(event=usage_event(n)))
    assert len(recorder.usage) == 50_000
    frame = usage_frame(recorder.usage, by="agent")
    assert int(frame["requests"].sum()) == 50_000
    assert int(frame["input_tokens"].sum()) == sum(100 + n for n in range(50_000))
    assert frame["cost_usd"].sum() == pytest.approx(50.0)


def test_the_recorder_keeps_the_newest_messages_errors_and_context_updates_with_positions() -> None:
    recorder = TeamRecorder()
    sender = ActorAddress("a", "@A", "Dev")
    for n in range(TRANSCRIPT_LIMIT + 10):
        recorder.on_message(SentMessage(message=AgentMessage(content=f"m{n}", sender=sender, recipient=sender)))
    for n in range(ERRORS_LIMIT + 10):
        recorder.on_message(ErrorMessage(exception_type="ValueError", exception_value=f"e{n}"))
    for n in range(CONTEXT_UPDATES_LIMIT + 10):
        recorder.on_message(EventMessage(event=ContextUpdateEvent(agent="@A", number=n, block="x")))
    assert len(list(recorder.transcript)) == TRANSCRIPT_LIMIT and recorder.transcript.dropped == 10
    assert len(list(recorder.errors)) == ERRORS_LIMIT and recorder.errors.dropped == 10
    assert len(list(recorder.context_updates)) == CONTEXT_UPDATES_LIMIT
    # ``len`` is a position: "the errors since I looked" still works after the oldest went.
    seen = len(recorder.errors)
    recorder.on_message(ErrorMessage(exception_type="KeyError", exception_value="new"))
    assert [e.exception_value for e in recorder.errors[seen:]] == ["new"]


# -- the human's inbox ----------------------------------------------------------------------


def test_the_human_inbox_keeps_the_newest_messages_and_positions_still_find_new_replies() -> None:
    inbox = HumanInbox(limit=100)
    for n in range(1_000):
        inbox.append(AgentMessage(content=f"r{n}"))
    start = len(inbox)
    assert start == 1_000 and inbox.dropped == 900
    inbox.append(AgentMessage(content="answer"))
    # The reading lab.ask does (``inbox.messages[start:]``) and the explicit one agree.
    assert [m.content for m in inbox.messages[start:]] == ["answer"]
    assert [m.content for m in inbox.since(start)] == ["answer"]
    assert len(inbox.messages) == 100 and inbox.messages[-1].content == "answer"
    assert inbox.messages == [m for m in inbox.messages]  # still a list
    assert inbox.wait_for(lambda messages: messages[-1].content == "answer", timeout=1)


def test_a_lab_ask_still_returns_its_reply_once_the_inbox_dropped_old_ones() -> None:
    with Lab() as lab:
        lab.inbox._messages = type(lab.inbox._messages)(maxlen=2)  # a tiny cap, as after a long session
        for n in range(4):
            [reply] = lab.ask(f"Task {n}: add a field", timeout=ASK_TIMEOUT)
            assert f"Task {n}" in reply.content
        assert len(lab.inbox) == 4 and lab.inbox.dropped == 2


# -- budgets and the roster ---------------------------------------------------------------


def test_an_agent_budget_counts_every_run_once_but_remembers_only_recent_run_ids() -> None:
    budget = AgentBudget(AgentUsageLimits())
    for n in range(5_000):
        run_id = f"{n:032x}"
        budget.start_run(run_id)
        budget.record(usage_event(n, run_id=run_id))
        budget.record(usage_event(n, run_id=run_id))  # a second request of the same run
    assert budget.runs == 5_000
    assert len(budget._seen_runs) <= RECENT_RUN_IDS
    budget.rebuild(usage_event(n) for n in range(3_000))
    assert budget.runs == 3_000


def test_an_agent_budget_sums_its_whole_life_usage_in_constant_memory() -> None:
    budget = AgentBudget(AgentUsageLimits())
    for n in range(5_000):
        budget.record(usage_event(n, model="a" if n % 2 else "b"))
    summary = budget.summary("@A0")
    assert summary.agent == "@A0" and summary.total.requests == 5_000
    assert summary.total.input_tokens == sum(100 + n for n in range(5_000))
    assert {m: t.requests for m, t in summary.by_model.items()} == {"a": 2_500, "b": 2_500}
    assert summary.total.cost_usd == pytest.approx(5.0)


def test_fired_members_leave_nothing_behind_in_the_directory() -> None:
    directory = TeamDirectory()
    keep = ActorAddress("keep", "@Keep", "Lead")
    directory.add_member(keep)
    for n in range(1_000):
        address = ActorAddress(f"id{n}", f"@Dev{n}", "Dev")
        directory.add_member(address)
        assert directory.remove_member(address) is address
    assert list(directory._members) == ["keep"]
    assert directory.names() == {"@Keep"}


# -- a subscriber that calls the orchestrator -------------------------------------------------


class CallsTheOrchestrator(EventSubscriber):
    """Hires through the orchestrator about a member's first message, and asks it for the
    roster about every member's record (the orchestrator records the hire meanwhile)."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.hired: list[str] = []
        self.rosters: list[int] = []

    def on_message(self, message: Message) -> None:
        if isinstance(message, SentMessage) and not self.hired:
            self.hired.append(self.lab.orchestrator.hire("Developer").name)
        if isinstance(message, SentMessage | EventMessage):
            self.rosters.append(len(self.lab.orchestrator.get_team()))


@pytest.fixture
def lab() -> Iterator[Lab]:
    with Lab() as lab:
        yield lab


def test_a_subscriber_that_calls_the_orchestrator_does_not_hold_up_the_team(lab: Lab) -> None:
    subscriber = CallsTheOrchestrator(lab)
    lab.orchestrator.subscribe(subscriber)
    [reply] = lab.ask("Plan the login page", timeout=ASK_TIMEOUT)
    assert "login page" in reply.content
    assert subscriber.hired == ["@Developer"]
    assert max(subscriber.rosters) == 3  # Human, Manager, Developer (the Manager used the one hired here)
    lab.orchestrator.unsubscribe(subscriber)
    [again] = lab.ask("And the signup page", timeout=ASK_TIMEOUT)
    assert "signup page" in again.content


def test_a_start_record_made_while_a_subscriber_waits_on_its_maker_does_not_deadlock() -> None:
    # Thread "member" is delivering; its subscriber waits for "orchestrator", which records a
    # start (the old log held its lock through the callback: both threads waited forever).
    team_log = TeamLog()
    recorded = threading.Event()
    seen: list[str] = []

    class WaitsForTheOrchestrator(EventSubscriber):
        def on_message(self, message: Message) -> None:
            seen.append(type(message).__name__)
            if isinstance(message, EventMessage) and message.event == "member's record":
                orchestrator = threading.Thread(target=lambda: (team_log.record(StartMessage()), recorded.set()))
                orchestrator.start()
                assert recorded.wait(5), "the orchestrator's record waited on this callback"
                orchestrator.join(5)

    team_log.subscribe(WaitsForTheOrchestrator())
    team_log.record(EventMessage(event="member's record"))
    assert seen == ["EventMessage", "StartMessage"]  # delivered after the callback, in order


def test_a_subscriber_that_blocks_delivery_is_named_once_and_records_go_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(team_log_module, "DELIVERY_WAIT", 0.2)
    team_log = TeamLog()
    release = threading.Event()
    seen: list[Any] = []

    def other_member() -> None:
        for n in range(3):
            team_log.record(EventMessage(event=n))  # the first waits 0.2 s, the rest not at all
        release.set()

    class Blocks(EventSubscriber):
        def on_message(self, message: Message) -> None:
            assert isinstance(message, EventMessage)
            seen.append(message.event)
            if message.event == "first":
                threading.Thread(target=other_member).start()
                assert release.wait(10), "another member's records waited on this callback for good"

    team_log.subscribe(Blocks())
    with caplog.at_level(logging.ERROR, logger="aklab.core"):
        team_log.record(EventMessage(event="first"))
    assert seen == ["first", 0, 1, 2]  # delivered after the callback, in order
    stuck = [r for r in caplog.records if "inside on_message for over" in r.getMessage()]
    assert len(stuck) == 1 and "must not wait on an actor" in stuck[0].getMessage()
    team_log.record(EventMessage(event="later"))  # the log still delivers
    assert seen[-1] == "later"


def test_a_record_made_inside_a_callback_is_delivered_after_it_in_order() -> None:
    team_log = TeamLog()
    seen: list[Any] = []

    class Echo(EventSubscriber):
        def on_message(self, message: Message) -> None:
            assert isinstance(message, EventMessage)
            seen.append(message.event)
            if isinstance(message.event, int) and message.event < 3:
                team_log.record(EventMessage(event=message.event + 1))
                seen.append(f"after {message.event}")

    team_log.subscribe(Echo())
    team_log.record(EventMessage(event=0))
    assert seen == [0, "after 0", 1, "after 1", 2, "after 2", 3]
