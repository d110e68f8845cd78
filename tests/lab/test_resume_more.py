"""Resume brings back more than the members: the team guard's counters of an ask that was
still at work (its limits hold across the restart) and the team's planning board."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.agent import AgentMessage
from aklab.core import (
    ActorAddress,
    DispatchedMessage,
    EventMessage,
    EventSubscriber,
    Message,
    SentMessage,
    StartMessage,
    TeamGuard,
)
from aklab.core._asks import AskLedger
from aklab.lab import Lab
from aklab.lab.resume import load_team
from aklab.lab.teams import TeamSpec
from aklab.llm import LlmUsageEvent
from aklab.store import SqliteStore, new_team_id
from aklab.tools import PlanningTool
from tests.hardening._team import card, incoming, reply, team

WAIT = 20.0


def _relay(developer: FunctionModel) -> TeamSpec:
    """@Manager passes the human's question to @Developer and relays the answer back."""

    def manager(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sender, text = incoming(messages)
        if sender == "@Human":
            return reply(info, [("@Developer", "request", "compute the answer")])
        return reply(info, [("@Human", "response", "relayed: " + text.rsplit("\n", 1)[-1])])

    return team(
        card("Manager", routes_to=["Developer"], model=FunctionModel(manager)),
        card("Developer", model=developer),
        entry="Manager",
    )


class _AfterStore(EventSubscriber):
    """Subscribed after the store: a record it sees is already stored."""

    def __init__(self) -> None:
        self.manager_done = threading.Event()

    def on_message(self, message: Message) -> None:
        if isinstance(message, DispatchedMessage) and message.done and message.sender is not None:
            if message.sender.name == "@Manager":
                self.manager_done.set()


def _crash_copy(path: Path, copy: Path) -> None:
    """What a kernel killed now would leave on disk: a consistent copy of the store (WAL included)."""
    src, dst = sqlite3.connect(path), sqlite3.connect(copy)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def _blocking_model() -> tuple[FunctionModel, threading.Event, threading.Event]:
    """A model whose turn says it started (``entered``) and then holds until ``release``:
    the point where the tests copy the store, as a crash would leave it."""
    entered, release = threading.Event(), threading.Event()

    def blocked(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        entered.set()
        release.wait(WAIT)
        return reply(info, [("@Manager", "response", "too late")])

    return FunctionModel(blocked), entered, release


def test_an_asks_turns_before_the_restart_count_towards_its_limit_after_resume(tmp_path: Path) -> None:
    path, copy = tmp_path / "events.sqlite3", tmp_path / "crashed.sqlite3"
    blocked, entered, release = _blocking_model()

    guard = TeamGuard(max_turns=2)
    with Lab(_relay(blocked), store=path, guard=guard) as lab:
        after = _AfterStore()
        lab.orchestrator.subscribe(after)
        lab.send("What is the answer?")
        ask_id = lab.last_ask_id
        assert ask_id is not None
        try:
            assert entered.wait(WAIT) and after.manager_done.wait(WAIT)
            # The Manager's turn is done and stored; the Developer's (turn 2) is in progress.
            state = lab.system.asks.get(ask_id)
            assert state is not None and state.turns == 2
            tokens = sum(e.total_tokens for e in lab.recorder.usage.for_ask(ask_id))
            assert tokens > 0
            _crash_copy(path, copy)
        finally:
            release.set()

    with SqliteStore(copy) as store:
        stored = load_team(store)
    assert [m.content for _, m in stored.pending] == ["compute the answer"]
    counted = stored.asks[ask_id]
    assert (counted.turns, counted.tokens, counted.cost) == (1, tokens, 0.0)  # the Developer's turn is redone
    assert counted.messages == [("@Manager", "@Developer", "compute the answer")]

    def answering(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return reply(info, [("@Manager", "response", "42")])

    with Lab.resume(store=copy, spec=_relay(FunctionModel(answering)), guard=TeamGuard(max_turns=2)) as again:
        assert again.resume_report is not None and "the guard's counters of 1 open ask" in again.resume_report
        assert again.wait(WAIT)
        replies = [m.content for m in again.replies()]
        # Turn 1 (Manager) before the restart, 2 (Developer) after it: the Manager's relay is turn 3.
        assert not any("relayed" in r for r in replies), replies
        assert any("reached 2 model turns (TeamGuard.max_turns)" in r for r in replies), replies
        state = again.system.asks.get(ask_id)
        assert state is not None and state.turns == 3 and state.cancelled is not None
        assert state.tokens > tokens  # the Developer's request after resume added to those before


def test_an_open_asks_tokens_cost_and_exchanges_are_recomputed_from_the_store(tmp_path: Path) -> None:
    team_id, ask = new_team_id(), "ask-1"
    human = ActorAddress("h" * 32, "@Human", "Human", team_id=team_id, is_user_proxy=True)
    manager = ActorAddress("m" * 32, "@Manager", "Manager", team_id=team_id)
    developer = ActorAddress("d" * 32, "@Developer", "Developer", team_id=team_id)

    def sent(sender: ActorAddress, recipient: ActorAddress, text: str, message_id: str) -> SentMessage:
        inner = AgentMessage(id=message_id, content=text, sender=sender, recipient=recipient, ask_id=ask)
        return SentMessage(sender=sender, recipient=recipient, message=inner, ask_id=ask)

    def used(agent: ActorAddress, tokens: int, cost: float | None) -> EventMessage:
        event = LlmUsageEvent(
            agent=agent.name, run_id="r", model="m", ask_id=ask, input_tokens=tokens, output_tokens=0, cost_usd=cost
        )
        return EventMessage(sender=agent, event=event, ask_id=ask)

    def done(agent: ActorAddress, message_id: str, finished: bool = True) -> DispatchedMessage:
        return DispatchedMessage(sender=agent, message_id=message_id, ask_id=ask, done=finished)

    records: list[Any] = [
        *(StartMessage(sender=a) for a in (human, manager, developer)),
        sent(human, manager, "question", "q"),
        done(manager, "q", False),
        used(manager, 100, 0.25),
        sent(manager, developer, "do it", "a"),
        done(manager, "q"),
        done(developer, "a", False),
        used(developer, 50, None),  # unpriced: counts 0, as the guard does
        sent(developer, manager, "done", "b"),
        done(developer, "a"),
        done(manager, "b", False),
        used(manager, 30, 0.5),
        sent(manager, developer, "do it", "c"),  # the kernel dies while the Manager is still on "b"
    ]
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        store.save_team(team_id, name="t")
        for record in records:
            store.append(record, team_id)
        stored = load_team(store)
    assert [m.id for _, m in stored.pending] == ["b", "c"]
    counted = stored.asks[ask]
    assert (counted.turns, counted.tokens, counted.cost) == (2, 180, 0.75)
    loop = ("@Manager", "@Developer", "do it")
    assert counted.messages == [loop, ("@Developer", "@Manager", "done"), loop]

    ledger = AskLedger(TeamGuard(max_cost=1.0, max_repeats=3))
    ledger.restore(ask, turns=counted.turns, tokens=counted.tokens, cost=counted.cost, messages=counted.messages)
    assert ledger.charge_message(ask, "@Manager", "@Developer", "do it") is not None  # the third time: a loop
    ledger = AskLedger(TeamGuard(max_cost=1.0))
    ledger.restore(ask, turns=counted.turns, tokens=counted.tokens, cost=counted.cost)
    assert ledger.charge_usage(ask, 10, 0.2) is None
    assert "over $1 (TeamGuard.max_cost)" in (ledger.charge_usage(ask, 10, 0.1) or "")


def _planner(log: list[str]) -> TeamSpec:
    """@Planner makes the tool calls the human's message lists (``tool arg=value; ...``), then answers."""

    def planner(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        parts = last.parts if isinstance(last, ModelRequest) else []
        new_turn = any(p.part_kind == "user-prompt" for p in parts)  # (with the last run's output-tool return)
        returns = [] if new_turn else [p for p in parts if p.part_kind == "tool-return"]
        for part in returns:
            log.append(str(part.content))
        if returns:
            return reply(info, [("@Human", "response", "; ".join(str(p.content) for p in returns))])
        _, text = incoming(messages)
        calls = []
        for i, step in enumerate(text.rsplit("\n", 1)[-1].split(";")):
            name, _, args = step.strip().partition(" ")
            kwargs = dict(a.split("=", 1) for a in args.split(",") if a)
            calls.append(ToolCallPart(name, kwargs, tool_call_id=f"call{i}"))
        return ModelResponse(parts=calls)

    return team(card("Planner", model=FunctionModel(planner), tools=[PlanningTool()]), entry="Planner")


def _board(lab: Lab) -> list[str]:
    host = SimpleNamespace(directory=lab.orchestrator.team_directory)
    return [t.line() for t in PlanningTool().board(host).tasks()]  # type: ignore[arg-type]


def test_a_resumed_team_has_its_planning_board_back(tmp_path: Path) -> None:
    path, log = tmp_path / "events.sqlite3", []
    spec = _planner(log)
    with Lab(spec, store=path) as lab:
        lab.ask("planning_create title=write tests,owner=@Planner; planning_create title=ship it", timeout=WAIT)
        lab.ask("planning_update task_id=T1,status=doing,note=half done", timeout=WAIT)
        before = _board(lab)
        assert before == ["- T1 [doing] @Planner: write tests", "- T2 [todo] ship it"]
    with Lab.resume(store=path, spec=_planner(log)) as again:
        assert again.resume_report is not None and "2 planning tasks" in again.resume_report
        assert _board(again) == before
        again.ask("planning_create title=celebrate; planning_get task_id=T1", timeout=WAIT)
        assert log[-2] == "created T3 [todo] celebrate"  # new ids go on after the stored ones
        assert "note: @Planner: half done" in log[-1]


@pytest.mark.parametrize("bad", ["X1", "T", "7"])
def test_a_board_refuses_to_load_a_task_without_a_proper_id(bad: str) -> None:
    from aklab.tools.planning import PlanningBoard, PlanningTask

    with pytest.raises(ValueError, match="a planning task id is T followed by a number"):
        PlanningBoard().load([PlanningTask(id=bad, title="x")])


@pytest.mark.parametrize("reader_finished", [True, False])
@pytest.mark.parametrize("written_by", ["this version", "an earlier version"])
def test_a_message_taken_unhandled_comes_back_only_if_the_run_that_read_it_never_finished(
    tmp_path: Path, reader_finished: bool, written_by: str
) -> None:
    from aklab.core import HandledMessage

    team_id = new_team_id()
    human = ActorAddress("h" * 32, "@Human", "Human", team_id=team_id, is_user_proxy=True)
    dev = ActorAddress("d" * 32, "@Developer", "Developer", team_id=team_id)

    def sent(text: str, message_id: str, ask: str) -> SentMessage:
        inner = AgentMessage(id=message_id, content=text, sender=human, recipient=dev, ask_id=ask)
        return SentMessage(sender=human, recipient=dev, message=inner, ask_id=ask)

    records: list[Any] = [
        StartMessage(sender=human),
        StartMessage(sender=dev),
        sent("stopped before it started", "w", "ask-w"),
        HandledMessage(sender=dev, message_id="w", ask_id="ask-w"),  # withdrawn: its ask was stopped
        sent("first", "x", "ask-x"),
        sent("read during the run of x", "y", "ask-y"),
    ]
    if written_by == "this version":  # the record of what was read names the message being handled
        records.append(HandledMessage(sender=dev, message_id="y", ask_id="ask-y", during="x"))
    else:  # a record of the message taken for handling, then of what its run read
        records.append(DispatchedMessage(sender=dev, message_id="x", ask_id="ask-x"))
        records.append(HandledMessage(sender=dev, message_id="y", ask_id="ask-y"))
    if reader_finished:
        records.append(DispatchedMessage(sender=dev, message_id="x", ask_id="ask-x", done=True))
    with SqliteStore(tmp_path / "events.sqlite3") as store:
        store.save_team(team_id, name="t")
        for record in records:
            store.append(record, team_id)
        stored = load_team(store)
    assert [m.id for _, m in stored.pending] == ([] if reader_finished else ["x", "y"])


def test_a_resumed_team_keeps_the_guard_limits_it_last_ran_with(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return reply(info, [("@Human", "response", "ok")])

    spec = _relay(FunctionModel(answer))
    with Lab(spec, store=path, guard=TeamGuard(max_turns=7, max_cost=0.5)) as lab:
        lab.guard.max_turns = 9  # changed later: stored with the next ask
        lab.ask("hello", timeout=WAIT)
    with Lab.resume(store=path, spec=spec) as again:
        assert (again.guard.max_turns, again.guard.max_cost) == (9, 0.5)
    with Lab.resume(store=path, spec=spec, guard=TeamGuard(max_turns=3)) as again:
        assert (again.guard.max_turns, again.guard.max_cost) == (3, 2.0)  # a guard given wins


class _CancelsStored(EventSubscriber):
    def __init__(self, count: int) -> None:
        self.count = count
        self.seen: list[str] = []
        self.done = threading.Event()
        self.queued = threading.Event()

    def on_message(self, message: Message) -> None:
        from aklab.core._asks import AskCancelledEvent

        if isinstance(message, SentMessage) and getattr(message.message, "content", "") == "and another thing":
            self.queued.set()
        if isinstance(message, EventMessage) and isinstance(message.event, AskCancelledEvent):
            self.seen.append(message.event.ask_id)
            if len(self.seen) >= self.count:
                self.done.set()


def test_messages_of_asks_stopped_before_the_restart_are_not_taken_up_again(tmp_path: Path) -> None:
    path, copy = tmp_path / "events.sqlite3", tmp_path / "crashed.sqlite3"
    blocked, entered, release = _blocking_model()

    with Lab(_relay(blocked), store=path) as lab:
        cancels = _CancelsStored(2)
        lab.orchestrator.subscribe(cancels)  # after the store: what it sees is stored
        lab.send("What is the answer?")
        first = lab.last_ask_id
        try:
            assert entered.wait(WAIT)
            lab.send("and another thing", to="Developer")  # queued behind the blocked run
            second = lab.last_ask_id
            assert cancels.queued.wait(WAIT)  # sent (the human's seat sends it on its own thread)
            lab.stop()
            assert cancels.done.wait(WAIT) and sorted(cancels.seen) == sorted([first, second])
            _crash_copy(path, copy)  # the kernel dies before the Developer gets to drop them
        finally:
            release.set()

    def answering(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return reply(info, [("@Manager", "response", "42")])

    with Lab.resume(store=copy, spec=_relay(FunctionModel(answering))) as again:
        assert again.resume_report is not None
        assert "0 messages re-delivered" in again.resume_report
        assert "2 messages of stopped asks left undone" in again.resume_report
        assert again.wait(WAIT)
        assert not any("relayed" in m.content for m in again.replies())


def test_the_ledger_announces_stops_and_trips_once_and_not_a_closing_team() -> None:
    ledger = AskLedger(TeamGuard(max_turns=1))
    heard: list[tuple[str, str]] = []
    ledger.on_cancel = lambda ask_id, reason: heard.append((ask_id, reason))
    ledger.cancel("a", "stopped by the human")
    ledger.cancel("a", "again")  # already over
    assert ledger.charge_turn("b") is None
    assert ledger.charge_turn("b") is not None  # trips
    ledger.charge_turn("b")
    ledger.begin("c")
    ledger.close()
    assert [a for a, _ in heard] == ["a", "b"]
    assert heard[1][1].startswith("the team guard stopped this ask: it reached 1 model turn")


def test_lab_usage_after_resume_totals_the_requests_before_the_restart_too(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return reply(info, [("@Manager", "response", "42")])

    spec = _relay(FunctionModel(answer))
    with Lab(spec, store=path) as lab:
        lab.ask("one", timeout=WAIT)
        lab.ask("two", timeout=WAIT)
        before = lab.usage(by="request")
        assert len(before) == 6  # Manager, Developer, Manager per ask
    with Lab.resume(store=path, spec=spec) as again:
        assert again.usage(by="request")[["agent", "total_tokens"]].equals(before[["agent", "total_tokens"]])
        again.ask("three", timeout=WAIT)
        assert len(again.usage(by="request")) == 9
        assert again.usage()["requests"].sum() == 9


def test_usage_by_ask_after_a_resume_names_the_questions_asked_before_it(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    with Lab("dev-team", store=path) as lab:
        first = lab.ask("What is 2+2?", timeout=WAIT)
    with Lab.resume(store=path) as again:
        second = again.ask("What is 3+3?", timeout=WAIT)
        frame = again.usage(by="ask")
    questions = dict(zip(frame["ask_id"], frame["question"], strict=True))
    assert questions == {first.ask_id: "What is 2+2?", second.ask_id: "What is 3+3?"}


def test_usage_by_ask_after_a_resume_still_says_which_asks_were_not_ok(tmp_path: Path) -> None:
    """A stopped ask read ok=False in %usage --by ask until the kernel restarted, then True."""
    path = tmp_path / "events.sqlite3"
    blocked, entered, release = _blocking_model()
    spec = _relay(blocked)
    with Lab(spec, store=path) as lab:
        lab.send("What is the answer?")
        stopped = lab.last_ask_id
        try:
            assert entered.wait(WAIT)
            lab.stop()
        finally:
            release.set()
        assert lab.wait(WAIT)
        answered = lab.ask("And now?", timeout=WAIT).ask_id
        frame = lab.usage(by="ask")
        before = dict(zip(frame["ask_id"], frame["ok"], strict=True))
    assert before == {stopped: False, answered: True}
    with Lab.resume(store=path, spec=spec) as again:
        frame = again.usage(by="ask")
        assert dict(zip(frame["ask_id"], frame["ok"], strict=True)) == before
