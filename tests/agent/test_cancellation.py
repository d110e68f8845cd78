"""Run cancellation and mid-run mail, driven through a team with a gated model.

The gated model blocks inside a chosen model call until the test releases it, so a
test can put messages in the agent's mailbox while a run is in flight, with no sleep.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.agent import AgentMessage, BaseAgent, HumanProxy
from aklab.core import ActorSystem, CancelMessage, EventSubscriber, HandledMessage, Message
from aklab.tools import MailboxTool, ToolCard, ToolHost
from tests.helpers import Team, card, make_team

Reply = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


class GatedModel:
    """Answers with ``replies`` in order; call ``hold(i)`` to pause inside call i."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies
        self.calls: list[list[ModelMessage]] = []
        self.entered: dict[int, threading.Event] = {}
        self.release: dict[int, threading.Event] = {}

    def hold(self, index: int) -> None:
        self.entered[index] = threading.Event()
        self.release[index] = threading.Event()

    def model(self) -> FunctionModel:
        async def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            index = len(self.calls)
            self.calls.append(list(messages))
            if index in self.entered:
                self.entered[index].set()
                assert self.release[index].wait(10), "test never released the model"
            return self.replies[min(index, len(self.replies) - 1)](messages, info)

        return FunctionModel(fn)


def send(*requests: tuple[str, str, str]) -> Reply:
    args = {"messages": [{"recipient": r, "message_type": t, "message": m} for r, t, m in requests]}
    return lambda messages, info: ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(args))])


def call_tool(name: str, **args: Any) -> Reply:
    return lambda messages, info: ModelResponse(parts=[ToolCallPart(name, args)])


class StepTool(ToolCard):
    def get_tools(self, host: ToolHost) -> list[Callable[..., Any]]:
        def step() -> str:
            """Do one step of work."""
            return "step done"

        return [step]


class Records(EventSubscriber):
    def __init__(self) -> None:
        self.records: list[Message] = []

    def on_message(self, message: Message) -> None:
        self.records.append(message)


def _team(system: ActorSystem, gated: GatedModel, **config: Any) -> tuple[Team, Any, Records]:
    tools = config.pop("tools", [StepTool()])
    team = make_team(system, [card("Worker", model=gated.model(), tools=tools, **config)])
    records = Records()
    team.orchestrator.subscribe(records)
    return team, team.start("Worker"), records


def _human_says(team: Team, to: Any, text: str) -> None:
    team.system.proxy_tell(team.human, HumanProxy).send(to, AgentMessage(content=text))


def _lands_now(team: Team, to: Any, message: Message) -> None:
    """Put a message from @Human in ``to``'s mailbox before returning (no actor hop)."""
    message.sender = team.human
    message.recipient = to
    team.system.tell(to, message)


def test_a_cancel_landing_during_a_model_call_ends_the_run_and_the_answer_is_not_routed(system: ActorSystem) -> None:
    gated = GatedModel([send(("@Human", "response", "in-flight answer"))])
    gated.hold(0)
    team, worker, records = _team(system, gated)
    _human_says(team, worker, "work")
    assert gated.entered[0].wait(10)
    _lands_now(team, worker, AgentMessage(content="/stop"))
    gated.release[0].set()
    team.settle()
    assert [m.content for m in team.inbox.messages] == ["Run interrupted. (@Worker)"]
    assert len([r for r in records.records if isinstance(r, HandledMessage)]) == 1
    assert worker.is_alive()
    # the agent survives and answers the next message normally
    gated.replies.append(send(("@Human", "response", "next answer")))
    _human_says(team, worker, "again")
    team.settle()
    assert team.inbox.messages[-1].content == "next answer"


def test_a_cancel_between_tool_steps_ends_the_run_at_the_next_step_boundary(system: ActorSystem) -> None:
    gated = GatedModel([call_tool("step"), call_tool("step"), send(("@Human", "response", "never"))])
    gated.hold(1)
    team, worker, _ = _team(system, gated)
    _human_says(team, worker, "work")
    assert gated.entered[1].wait(10)
    _lands_now(team, worker, CancelMessage())
    gated.release[1].set()
    team.settle()
    assert len(gated.calls) == 2
    assert [m.content for m in team.inbox.messages] == ["Run interrupted. (@Worker)"]


def test_two_cancels_queued_at_once_are_both_purged_and_the_human_is_told_once(system: ActorSystem) -> None:
    gated = GatedModel([send(("@Human", "response", "never"))])
    gated.hold(0)
    team, worker, records = _team(system, gated)
    _human_says(team, worker, "work")
    assert gated.entered[0].wait(10)
    _lands_now(team, worker, AgentMessage(content="/stop"))
    _lands_now(team, worker, CancelMessage())
    gated.release[0].set()
    team.settle()
    assert [m.content for m in team.inbox.messages] == ["Run interrupted. (@Worker)"]
    assert len([r for r in records.records if isinstance(r, HandledMessage)]) == 2


def test_a_cancel_with_nothing_running_says_so(system: ActorSystem) -> None:
    gated = GatedModel([send()])
    team, worker, _ = _team(system, gated)
    _human_says(team, worker, "/stop")
    team.settle()
    system.proxy_tell(team.human, HumanProxy).send(worker, CancelMessage())
    team.settle()
    system.tell(worker, CancelMessage())  # from code: logged only
    team.settle()
    assert [(m.type, m.content) for m in team.inbox.messages] == [
        ("notification", "There is no run to cancel."),
        ("acknowledgment", "There is no run to cancel."),
    ]
    assert gated.calls == []


def test_an_agent_cannot_stop_another_agents_run_by_writing_stop(system: ActorSystem) -> None:
    gated = GatedModel([send(("@Human", "response", "finished"))])
    gated.hold(0)
    team, worker, _ = _team(system, gated)
    other = team.orchestrator.createActor(BaseAgent, card("Other").get_config_copy())
    _human_says(team, worker, "work")
    assert gated.entered[0].wait(10)
    system.tell(worker, AgentMessage(content="/stop", sender=other, recipient=worker))
    gated.release[0].set()
    team.settle()
    assert team.inbox.messages[0].content == "finished"


def test_mail_arriving_mid_run_is_announced_once_and_can_be_read_by_id(system: ActorSystem) -> None:
    seen_ids: list[str] = []

    def read_first_offered(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        text = str(messages[-1])
        start = text.index("(id: ") + 5
        seen_ids.append(text[start : start + 32])
        return call_tool("read_mailbox", message_id=seen_ids[0])(messages, info)

    gated = GatedModel([call_tool("step"), read_first_offered, send(("@Human", "response", "did both"))])
    gated.hold(0)
    team, worker, records = _team(system, gated)
    _human_says(team, worker, "first task")
    assert gated.entered[0].wait(10)
    _lands_now(team, worker, AgentMessage(content="second task"))
    gated.release[0].set()
    team.settle()
    assert [m.content for m in team.inbox.messages] == ["did both"]  # no separate turn for the second
    assert len(gated.calls) == 3
    notice = str(gated.calls[1][-1])
    assert "1 new message arrived while you were working" in notice
    assert "request from @Human: second task" in notice
    assert "You received a request from @Human." in str(gated.calls[2][-1])  # the absorbed message
    assert len([r for r in records.records if isinstance(r, HandledMessage)]) == 1


def test_a_notice_still_queued_at_the_end_is_withdrawn_and_the_mail_gets_its_own_turn(system: ActorSystem) -> None:
    gated = GatedModel(
        [call_tool("step"), send(("@Human", "response", "answer one")), send(("@Human", "response", "answer two"))]
    )
    gated.hold(0)
    team, worker, _ = _team(system, gated)
    _human_says(team, worker, "first")
    assert gated.entered[0].wait(10)
    _lands_now(team, worker, AgentMessage(content="second"))
    gated.release[0].set()
    team.settle()
    assert [m.content for m in team.inbox.messages] == ["answer one", "answer two"]
    assert "arrived while you were working" in str(gated.calls[1])
    assert "arrived while you were working" not in str(gated.calls[2][-1])


def test_read_mailbox_off_means_no_notice_and_the_mail_still_arrives(system: ActorSystem) -> None:
    gated = GatedModel([call_tool("step"), send(("@Human", "response", "one")), send(("@Human", "response", "two"))])
    gated.hold(0)
    team, worker, _ = _team(system, gated, tools=[StepTool(), MailboxTool(read_mailbox=False)])
    _human_says(team, worker, "first")
    assert gated.entered[0].wait(10)
    _lands_now(team, worker, AgentMessage(content="second"))
    gated.release[0].set()
    team.settle()
    assert [m.content for m in team.inbox.messages] == ["one", "two"]
    assert not any("arrived while you were working" in str(c) for c in gated.calls)


def test_an_empty_handler_whitelist_lists_the_mail_without_ids(system: ActorSystem) -> None:
    gated = GatedModel([call_tool("step"), call_tool("read_mailbox", message_id="nope"), send(), send()])
    gated.hold(0)
    team, worker, _ = _team(system, gated, tools=[StepTool(), MailboxTool(mailbox_preview_handlers=[])])
    _human_says(team, worker, "first")
    assert gated.entered[0].wait(10)
    _lands_now(team, worker, AgentMessage(content="second"))
    gated.release[0].set()
    team.settle()
    notice = str(gated.calls[1])
    assert "- Message cannot be handled in the run" in notice and "(id: " not in notice
    assert "you will get them just after" in notice
    assert len(gated.calls) == 4  # the unknown id was a no-op; "second" got its own turn


class CountingMessage(AgentMessage):
    previews: int = 0

    def mailbox_preview(self, limit: int = 80) -> str:
        type(self).previews += 1  # type: ignore[operator]
        return super().mailbox_preview(limit)


def test_a_burst_of_queued_mail_is_looked_at_once_not_on_every_step(system: ActorSystem, monkeypatch: Any) -> None:
    from aklab.core import Mailbox

    scans = {"n": 0}
    original = Mailbox.messages

    def counting(self: Mailbox) -> Any:
        scans["n"] += 1
        return original(self)

    steps = [call_tool("step")] * 20 + [send()]
    gated = GatedModel(steps)
    gated.hold(0)
    team, worker, _ = _team(system, gated)
    _lands_now(team, worker, CountingMessage(content="start"))
    assert gated.entered[0].wait(10)
    CountingMessage.previews = 0
    monkeypatch.setattr(Mailbox, "messages", counting)
    for i in range(200):
        _lands_now(team, worker, CountingMessage(content=f"m{i}"))
    gated.release[0].set()
    team.settle()
    monkeypatch.setattr(Mailbox, "messages", original)
    assert scans["n"] == 0  # no step scanned the mailbox
    # each message was previewed exactly once (announced once), not once per step
    assert CountingMessage.previews == 200


def test_only_mail_of_exactly_the_handled_class_is_offered_and_a_cancel_never_is(system: ActorSystem) -> None:
    gated = GatedModel([call_tool("step"), send(), send(), send()])
    gated.hold(0)
    team, worker, _ = _team(system, gated)
    _human_says(team, worker, "first")  # an AgentMessage is being handled
    assert gated.entered[0].wait(10)
    _lands_now(team, worker, CountingMessage(content="a subclass"))  # same handler, different class
    _lands_now(team, worker, AgentMessage(content="same class"))
    gated.release[0].set()
    team.settle()
    notice = str(gated.calls[1])
    assert "2 new messages arrived" in notice
    assert "- Message cannot be handled in the run" in notice
    assert "request from @Human: same class (id: " in notice
    assert "a subclass" not in notice


def test_a_cancel_with_a_reason_tells_the_human_why(system: ActorSystem) -> None:
    gated = GatedModel([call_tool("step"), send(("@Human", "response", "never"))])
    gated.hold(1)
    team, worker, _ = _team(system, gated)
    _human_says(team, worker, "work")
    assert gated.entered[1].wait(10)
    _lands_now(team, worker, CancelMessage(reason="the budget review is over"))
    gated.release[1].set()
    team.settle()
    assert [m.content for m in team.inbox.messages] == ["Run interrupted: the budget review is over. (@Worker)"]


def test_a_stop_with_words_after_it_tells_the_human_them_as_the_reason(system: ActorSystem) -> None:
    gated = GatedModel([send(("@Human", "response", "never"))])
    gated.hold(0)
    team, worker, _ = _team(system, gated)
    _human_says(team, worker, "work")
    assert gated.entered[0].wait(10)
    _lands_now(team, worker, AgentMessage(content="/stop  the spec changed "))
    gated.release[0].set()
    team.settle()
    assert [m.content for m in team.inbox.messages] == ["Run interrupted: the spec changed. (@Worker)"]


class Unpreviewable(AgentMessage):
    """Mail whose preview fails (a bug in a custom message class)."""

    def mailbox_preview(self, limit: int = 80) -> str:
        raise ValueError("preview is broken")


def test_mail_that_cannot_be_previewed_is_not_offered_and_still_gets_its_own_turn(system: ActorSystem) -> None:
    gated = GatedModel(
        [call_tool("step"), send(("@Human", "response", "first done")), send(("@Human", "response", "second done"))]
    )
    gated.hold(0)
    team, worker, _ = _team(system, gated)
    team.system.proxy_tell(team.human, HumanProxy).send(worker, Unpreviewable(content="first task"))
    assert gated.entered[0].wait(10)
    _lands_now(team, worker, Unpreviewable(content="second task"))  # the same class: it could be offered
    gated.release[0].set()
    team.settle()
    notice = str(gated.calls[1][-1])
    assert "Message cannot be previewed; it will reach you after this run" in notice and "(id: " not in notice
    assert [m.content for m in team.inbox.messages] == ["first done", "second done"]
    assert "second task" in str(gated.calls[2][-1])
