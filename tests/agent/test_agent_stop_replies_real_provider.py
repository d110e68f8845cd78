"""A teammate's ``/stop`` and other commands get exactly one line back, on a real provider:
pydantic-ai's OpenAI model over loopback, in tool and prompted output modes. The Developer
obeys commands from agents; the Manager's (or QA's) model sends them, and the reply is on the
wire in the sender's next request. A stop that ends a run is answered "@Developer's run was
cancelled.", one that finds none "There is no run to cancel.": never both, never neither,
however close to the end of the run it lands. An agent never answers itself, and a sender
fired meanwhile is logged, not reported."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from aklab.agent import AgentBusyEvent, AgentMessage, Notice
from aklab.core import ActorAddress, EventMessage, EventSubscriber, Message, SentMessage
from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.lab.teams import TeamSpec
from aklab.llm import ModelConfig
from aklab.llm.config import OutputModeSetting
from aklab.tools import PlanningTool, ToolCard, ToolHost
from aklab.tools.mailbox import NO_RUN_TO_CANCEL, run_cancelled
from tests.agent.test_agent_commands_real_provider import _msg, _said, _who
from tests.fakeserver import Behaviour, FakeOpenAI, hang, last_user_text, output, tool_call

TEAM = {
    "name": "build",
    "entry": "Manager",
    "start": ["Manager", "Developer", "QA"],
    "roles": [
        {"role": "Manager", "prompt": "You are Manager.", "routes_to": ["Developer", "QA"]},
        {"role": "Developer", "prompt": "You are Developer.", "commands_from_agents": True},
        {"role": "QA", "prompt": "You are QA.", "routes_to": ["Developer"]},
    ],
}
MODES: list[OutputModeSetting] = ["tool", "prompted"]
CANCELLED = run_cancelled("@Developer")
Messages = list[dict[str, str]]


class SelfStopTool(ToolCard):
    """A tool whose code sends its own agent a /stop, and a command that says nothing."""

    def get_tools(self, host: ToolHost) -> list[Callable[..., Any]]:
        def stop_myself() -> str:
            """Stop your own run."""
            agent: Any = host
            agent.send(agent.myAddress, AgentMessage(content="/stop"))
            return "sent"

        return [stop_myself]

    def get_commands(self, host: ToolHost) -> list[Callable[..., Any]]:
        def noop() -> None:
            """Do nothing, say nothing."""

        return [noop]


def _team(*developer_tools: ToolCard) -> TeamSpec:
    team = team_from_dict(TEAM)
    i, card = next((i, c) for i, c in enumerate(team.cards) if c.config.role == "Developer")
    config = card.config.model_copy(update={"tools": [*card.config.tools, *developer_tools]})
    team.cards[i] = card.model_copy(update={"config": config})
    return team


def _lab(fake_openai: FakeOpenAI, mode: OutputModeSetting, *tools: ToolCard, store: Any = False) -> Lab:
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, output_mode=mode)
    return Lab(_team(*tools), model=cfg, store=store)


def _models(
    manager: Callable[[str], Messages],
    developer: Callable[[dict[str, Any]], Behaviour | Messages] | None = None,
    qa: Callable[[str], Messages] | None = None,
) -> Callable[[dict[str, Any]], Behaviour]:
    """Scripted models: ``manager(said)`` for the human's messages (what @Developer sends the
    Manager goes to the human as "Developer said: ..."); the Developer answers "I read: <said>"
    unless ``developer`` is given; QA sends nothing unless ``qa`` is."""

    def respond(body: dict[str, Any]) -> Behaviour:
        who, said = _who(body), _said(body)
        answer: Behaviour | Messages
        if who == "Developer":
            answer = developer(body) if developer else [_msg("response", "@Manager", f"I read: {said}")]
        elif who == "QA":
            answer = qa(said) if qa else []
        elif "from @Developer" in last_user_text(body):
            answer = [_msg("response", "@Human", f"Developer said: {said}")]
        else:
            answer = manager(said)
        return answer if isinstance(answer, Behaviour) else output({"messages": answer})(body)

    return respond


def _between(lab: Lab, sender: str, recipient: str) -> list[tuple[str, str]]:
    return [
        (m.type, m.content)
        for m in lab.transcript()
        if m.sender is not None and m.recipient is not None and (m.sender.name, m.recipient.name) == (sender, recipient)
    ]


def _stop_from(lab: Lab, sender: str | ActorAddress, ask_id: str | None) -> None:
    """Land a ``/stop`` from ``sender`` in @Developer's mailbox now, on this thread (as that
    member's model would have sent it, minus the record of the send)."""
    developer = lab.member("@Developer")
    stop = AgentMessage(content="/stop", ask_id=ask_id)
    stop.sender = sender if isinstance(sender, ActorAddress) else lab.member(sender)
    stop.recipient = developer
    lab.system.tell(developer, stop)


def _not_delivered(log: pytest.LogCaptureFixture, to: str) -> list[str]:
    return [m for m in log.messages if m.startswith(f"@Developer: reply to {to}") and "not delivered" in m]


@pytest.fixture
def agent_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.INFO, logger="aklab.agent"):
        yield caplog


# -- a stop that ends a run ---------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_a_stop_from_a_model_that_ends_a_teammates_run_is_answered_on_its_next_request(
    fake_openai: FakeOpenAI, mode: OutputModeSetting
) -> None:
    def manager(said: str) -> Messages:
        return [_msg("request", "@Developer", "/stop" if said == "Stop the Developer." else "Write the parser.")]

    fake_openai.default = _models(manager, developer=lambda body: hang())  # only the stop ends its run
    with _lab(fake_openai, mode) as lab:
        lab.send("Get a parser written.")
        assert fake_openai.wait_hanging()
        stopped = lab.ask("Stop the Developer.", timeout=20)
        assert [(m.type, m.content) for m in stopped] == [("response", f"Developer said: {CANCELLED}")]
        assert [m.content for m in lab.replies()].count("Run interrupted. (@Developer)") == 1  # the human, as before
        assert _between(lab, "@Developer", "@Manager") == [("notification", CANCELLED)]
        assert lab.errors() == []
    assert [_who(b) for b in fake_openai.bodies] == ["Manager", "Developer", "Manager", "Manager"]
    told = last_user_text(fake_openai.bodies[-1])
    assert (
        told.startswith("You received a notification from @Developer.") and _said(fake_openai.bodies[-1]) == CANCELLED
    )


# -- the race with the end of the run: exactly one of the two lines -----------------------
class _StopWhenRunEnds(EventSubscriber):
    """Lands the Manager's /stop the moment @Developer's run has ended (its busy=False event,
    recorded on its own thread before it routes the run's answer)."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.landed = threading.Event()

    def on_message(self, message: Message) -> None:
        event = message.event if isinstance(message, EventMessage) else None
        if isinstance(event, AgentBusyEvent) and event.agent == "@Developer" and not event.busy:
            if not self.landed.is_set():
                self.landed.set()
                _stop_from(self.lab, "@Manager", message.ask_id)


@pytest.mark.parametrize("mode", MODES)
def test_a_stop_landing_just_after_the_run_ended_is_answered_only_that_there_is_no_run(
    fake_openai: FakeOpenAI, mode: OutputModeSetting
) -> None:
    fake_openai.default = _models(lambda said: [_msg("request", "@Developer", "Write the parser.")])
    with _lab(fake_openai, mode) as lab:
        lands = _StopWhenRunEnds(lab)
        lab.orchestrator.subscribe(lands)
        replies = lab.ask("Get a parser written.", timeout=20)
        assert lands.landed.is_set()
        assert [(m.type, m.content) for m in replies] == [
            ("response", "Developer said: I read: Write the parser."),
            ("response", f"Developer said: {NO_RUN_TO_CANCEL}"),
        ]
        assert _between(lab, "@Developer", "@Manager") == [
            ("response", "I read: Write the parser."),
            ("notification", NO_RUN_TO_CANCEL),
        ]
        assert lab.errors() == []
    assert _said(fake_openai.bodies[-1]) == NO_RUN_TO_CANCEL


@pytest.mark.parametrize("mode", MODES)
def test_a_stop_landing_while_the_runs_last_answer_is_on_its_way_is_answered_only_that_it_was_cancelled(
    fake_openai: FakeOpenAI, mode: OutputModeSetting
) -> None:
    def developer(body: dict[str, Any]) -> Messages:
        _stop_from(lab, "@Manager", lab.last_ask_id)  # before the answer is written back
        return [_msg("response", "@Manager", "the parser")]

    fake_openai.default = _models(lambda said: [_msg("request", "@Developer", "Write the parser.")], developer)
    with _lab(fake_openai, mode) as lab:
        replies = lab.ask("Get a parser written.", timeout=20)
        assert [(m.type, m.content) for m in replies] == [
            ("notification", "Run interrupted. (@Developer)"),
            ("response", f"Developer said: {CANCELLED}"),
        ]
        assert _between(lab, "@Developer", "@Manager") == [("notification", CANCELLED)]  # not "the parser"
        assert lab.errors() == []


def test_a_stop_racing_the_end_of_a_run_gets_exactly_one_answer_every_time(fake_openai: FakeOpenAI) -> None:
    """The stop lands from another thread as soon as the run's last answer has been written
    back, while the client reads it and the run ends: which line comes back depends on the
    interleaving, but never both and never neither."""
    landing: list[threading.Thread] = []

    def land_once_served(served: int, ask_id: str | None) -> None:
        # the fake server counts a response as served once it is written (no public counter)
        assert fake_openai.wait_for(lambda f: f._state.served >= served, timeout=10)
        _stop_from(lab, "@Manager", ask_id)

    def developer(body: dict[str, Any]) -> Messages:
        thread = threading.Thread(target=land_once_served, args=(fake_openai._state.served + 1, lab.last_ask_id))
        landing.append(thread)
        thread.start()
        return [_msg("response", "@Manager", "done")]

    fake_openai.default = _models(lambda said: [_msg("request", "@Developer", said)], developer)
    seen: list[str] = []
    with _lab(fake_openai, "tool") as lab:
        for n in range(20):
            before = len(_between(lab, "@Developer", "@Manager"))
            lab.ask(f"Round {n}.", timeout=20)
            landing[-1].join()
            assert lab.wait(20)
            answers = [c for t, c in _between(lab, "@Developer", "@Manager")[before:] if t == "notification"]
            assert len(answers) == 1 and answers[0] in (CANCELLED, NO_RUN_TO_CANCEL), (n, answers)
            seen.append(answers[0])
        assert lab.errors() == []
    assert len(landing) == 20 and len(seen) == 20


# -- an agent stopping itself ---------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_a_model_cannot_address_a_stop_to_itself_and_is_told_to_answer_instead(
    fake_openai: FakeOpenAI, mode: OutputModeSetting
) -> None:
    def developer(body: dict[str, Any]) -> Messages:
        if "is you" in json.dumps(body):
            return [_msg("response", "@Manager", "I stopped.")]
        return [_msg("request", "@Developer", "/stop")]

    fake_openai.default = _models(lambda said: [_msg("request", "@Developer", "Stop when you like.")], developer)
    with _lab(fake_openai, mode) as lab:
        replies = lab.ask("Go.", timeout=20)
        assert [(m.type, m.content) for m in replies] == [("response", "Developer said: I stopped.")]
        assert _between(lab, "@Developer", "@Developer") == []
        assert lab.errors() == []
    retried = [b for b in fake_openai.bodies if _who(b) == "Developer"][-1]
    assert "@Developer is you; answer the sender or address another member" in json.dumps(retried)


@pytest.mark.parametrize("mode", MODES)
def test_an_agent_whose_code_stops_its_own_run_ends_it_without_answering_itself(
    fake_openai: FakeOpenAI, mode: OutputModeSetting, agent_log: pytest.LogCaptureFixture
) -> None:
    fake_openai.default = _models(
        lambda said: [_msg("request", "@Developer", "Write the parser.")],
        developer=lambda body: tool_call("stop_myself", {}),
    )
    with _lab(fake_openai, mode, SelfStopTool()) as lab:
        replies = lab.ask("Go.", timeout=20)
        assert [(m.type, m.content) for m in replies] == [("notification", "Run interrupted. (@Developer)")]
        assert _between(lab, "@Developer", "@Developer") == [("request", "/stop")]  # no answer to itself
        assert _between(lab, "@Developer", "@Manager") == []
        assert lab.errors() == []
    assert [_who(b) for b in fake_openai.bodies] == ["Manager", "Developer"]  # no turn on its own reply
    assert f"@Developer: no reply to its own /stop: {CANCELLED}" in agent_log.messages


def test_an_idle_agent_sent_its_own_stop_does_not_answer_itself(
    fake_openai: FakeOpenAI, agent_log: pytest.LogCaptureFixture
) -> None:
    fake_openai.default = _models(lambda said: [])
    with _lab(fake_openai, "tool") as lab:
        _stop_from(lab, "@Developer", None)
        assert lab.wait(20)
        assert lab.errors() == []
    assert fake_openai.bodies == []  # before: "There is no run to cancel." to itself, and a turn on it
    assert f"@Developer: no reply to its own /stop: {NO_RUN_TO_CANCEL}" in agent_log.messages


# -- a sender fired meanwhile -----------------------------------------------------------------
@pytest.mark.parametrize("store", [False, None], ids=["no-store", "store"])
@pytest.mark.parametrize("mode", MODES)
def test_a_sender_that_fires_itself_through_a_teammate_is_not_answered_and_it_is_logged(
    fake_openai: FakeOpenAI, mode: OutputModeSetting, store: Any, agent_log: pytest.LogCaptureFixture
) -> None:
    fake_openai.default = _models(
        lambda said: [_msg("request", "@QA", "Leave the team.")],
        qa=lambda said: [_msg("request", "@Developer", "/fire_member @QA")],
    )
    with _lab(fake_openai, mode, store=store) as lab:
        replies = lab.ask("Go.", timeout=20)
        assert list(replies) == []  # no notice of an undelivered reply to the human
        assert sorted(a.name for a in lab.team()) == ["@Developer", "@Human", "@Manager"]
        assert lab.errors() == []  # before: ActorGoneError sending "@QA fired" to @QA
    assert [_who(b) for b in fake_openai.bodies] == ["Manager", "QA"]
    assert len(_not_delivered(agent_log, "@QA")) == 1


@pytest.mark.parametrize("store", [False, None], ids=["no-store", "store"])
@pytest.mark.parametrize("mode", MODES)
def test_a_stop_whose_sender_was_fired_meanwhile_still_ends_the_run_and_is_logged(
    fake_openai: FakeOpenAI, mode: OutputModeSetting, store: Any, agent_log: pytest.LogCaptureFixture
) -> None:
    fake_openai.default = _models(
        lambda said: [_msg("request", "@Developer", "Write the parser.")], developer=lambda body: hang()
    )
    with _lab(fake_openai, mode, store=store) as lab:
        lab.send("Go.")
        assert fake_openai.wait_hanging()
        qa = lab.member("@QA")
        assert lab.orchestrator.stop_member(qa)
        assert qa.ref.actor_stopped.wait(10)
        _stop_from(lab, qa, lab.last_ask_id)  # QA's stop, landing after QA was fired
        assert lab.wait(20)
        assert [m.content for m in lab.replies()] == ["Run interrupted. (@Developer)"]
        assert lab.errors() == []
    assert len(_not_delivered(agent_log, "@QA")) == 1


# -- every command a teammate sends: exactly one line back -----------------------------------
ROSTER = "- @Developer (Developer)\n- @Human (Human)\n- @Manager (Manager)\n- @QA (QA)"
ANSWERS: list[tuple[str, Callable[[str], bool]]] = [
    ("/help", lambda r: r.startswith("Commands @Developer obeys") and "/stop [reason ...] — Cancel" in r),
    ("/?", lambda r: r.startswith("Commands @Developer obeys")),
    ("/team_members", lambda r: r == ROSTER),
    ("/team_roles", lambda r: r == "(no roles to hire)"),
    ("/hire_member QA", lambda r: r == "Error in /hire_member: @Developer may not hire 'QA' (may hire: none)"),
    ("/fire_member @Nobody", lambda r: r.startswith("Error in /fire_member: @Nobody is not a member of the team")),
    ("/fire_member @Manager", lambda r: r.startswith("Error in /fire_member: @Manager is the team's entry agent")),
    ("/fire_member @Human", lambda r: r == "Error in /fire_member: @Human is a person and cannot be fired"),
    ("/compact", lambda r: r.startswith("Compacted (sliding_window): 0 messages removed")),
    ("/clear", lambda r: r == "Context cleared."),
    ("/stop", lambda r: r == NO_RUN_TO_CANCEL),
    ("/stop the spec changed", lambda r: r == NO_RUN_TO_CANCEL),  # before: an error, though mid-run it stops
    ("/planning_summary", lambda r: r == "(no tasks)"),
    ("/search_planning parser", lambda r: r == "(no tasks match 'parser')"),
    ("/get_planning_task T9", lambda r: r == "Error in /get_planning_task: unknown task id 'T9'; valid ids: none yet"),
    ("/noop", lambda r: r == "/noop: done."),  # before: nothing at all
    ("/clear now", lambda r: r.startswith("Error in /clear: too many positional arguments; usage: /clear")),
    ("/no_such_command", lambda r: r == "I read: /no_such_command"),  # not a command: the model's answer
]


@pytest.mark.parametrize(("command", "expected"), ANSWERS, ids=[c for c, _ in ANSWERS])
@pytest.mark.parametrize("mode", MODES)
def test_every_command_a_teammates_model_sends_gets_exactly_one_line_back_on_its_next_request(
    fake_openai: FakeOpenAI, mode: OutputModeSetting, command: str, expected: Callable[[str], bool]
) -> None:
    fake_openai.default = _models(lambda said: [_msg("request", "@Developer", command)])
    with _lab(fake_openai, mode, PlanningTool(), SelfStopTool()) as lab:
        replies = lab.ask("Go.", timeout=20)
        [(kind, answer)] = _between(lab, "@Developer", "@Manager")
        assert expected(answer), answer
        assert kind == ("response" if command == "/no_such_command" else "notification")
        assert [(m.type, m.content) for m in replies] == [("response", f"Developer said: {answer}")]
        assert lab.errors() == []
    manager = [b for b in fake_openai.bodies if _who(b) == "Manager"]
    assert len(manager) == 2 and last_user_text(manager[-1]).endswith(f"\n\n{answer}")


class _StopsQaOnTheNotice(EventSubscriber):
    """Stops @QA when @Developer tells the human its run was interrupted: in a team with an
    event store that is inside the handling, after the reply to QA was sent and held."""

    def __init__(self, qa: ActorAddress) -> None:
        self.qa = qa
        self.stopped = threading.Event()

    def on_message(self, message: Message) -> None:
        sent = message.message if isinstance(message, SentMessage) else None
        if isinstance(sent, Notice) and sent.content.startswith("Run interrupted") and not self.stopped.is_set():
            self.qa.ref.stop(block=True)  # QA is idle and records nothing as it stops
            self.stopped.set()


@pytest.mark.parametrize("mode", MODES)
def test_a_reply_held_to_the_end_of_a_stored_handling_whose_sender_stops_meanwhile_is_only_logged(
    fake_openai: FakeOpenAI, mode: OutputModeSetting, agent_log: pytest.LogCaptureFixture
) -> None:
    fake_openai.default = _models(
        lambda said: [_msg("request", "@Developer", "Write the parser.")], developer=lambda body: hang()
    )
    with _lab(fake_openai, mode, store=None) as lab:
        qa = lab.member("@QA")
        stops = _StopsQaOnTheNotice(qa)
        lab.orchestrator.subscribe(stops)
        lab.send("Go.")
        assert fake_openai.wait_hanging()
        _stop_from(lab, qa, lab.last_ask_id)
        assert lab.wait(20)
        assert stops.stopped.is_set()
        assert [m.content for m in lab.replies()] == ["Run interrupted. (@Developer)"]  # before: a second notice
        assert lab.errors() == []
    assert _not_delivered(agent_log, "@QA") == [
        "@Developer: reply to @QA not delivered: @QA stopped before the message was delivered"
    ]
