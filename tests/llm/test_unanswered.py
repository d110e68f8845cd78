"""A run that got no answer (failed, or stopped) leaves its prompt and a note on the user's
side, and the next prompt joins that request: the model gets one user turn, and never a
line of aklab's standing in for an answer of its own (SmolLM2 copied such a line as its
answer to the next question). Retries of the next run keep the earlier prompt."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.agent.capabilities.mailbox import RunInterruptedError
from aklab.llm import ModelConfig
from aklab.llm.failures import RunCancelledError
from aklab.llm.react import FAILED, INTERRUPTED, ReactAgent

FIRST, SECOND = "What is 2+2?", "And 3+3?"


def agent_on(fn: Any, **kwargs: Any) -> ReactAgent:
    return ReactAgent(name="@A", role="A", model_cfg=ModelConfig(model=FunctionModel(fn)), **kwargs)


def user_texts(messages: list[ModelMessage]) -> list[Any]:
    return [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]


def texts(messages: list[ModelMessage]) -> list[str]:
    return [p.content for m in messages for p in m.parts if isinstance(p, TextPart)]


class Script:
    """A model that answers each request with the next of ``steps`` (an exception is raised),
    then "6"; it keeps the messages of every request."""

    def __init__(self, *steps: BaseException | str) -> None:
        self.steps = list(steps)
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        step = self.steps.pop(0) if self.steps else "6"
        if isinstance(step, BaseException):
            raise step
        return ModelResponse(parts=[TextPart(step)])


def http_500() -> ModelHTTPError:
    return ModelHTTPError(500, "m", body={"error": "boom"})


def test_a_failed_run_leaves_its_prompt_and_a_note_and_no_answer_of_the_models() -> None:
    agent = agent_on(Script(http_500()))
    with pytest.raises(ModelHTTPError):
        agent.run_sync(FIRST, output_type=str)
    [request] = agent.messages
    assert isinstance(request, ModelRequest)
    assert user_texts([request]) == [f"{FIRST}\n\n{FAILED}"]
    assert "boom" not in FAILED and not texts(agent.messages)


def test_the_next_prompt_joins_the_failed_request_as_one_user_turn() -> None:
    model = Script(http_500())
    agent = agent_on(model)
    with pytest.raises(ModelHTTPError):
        agent.run_sync(FIRST, output_type=str)
    assert agent.run_sync(SECOND, output_type=str) == "6"
    sent = model.seen[-1]
    assert user_texts(sent) == [f"{FIRST}\n\n{FAILED}\n\n{SECOND}"]
    assert [m.kind for m in sent] == ["request"]  # no answer stands in for the failed run
    assert [m.kind for m in agent.messages] == ["request", "response"]
    assert user_texts(agent.messages) == user_texts(sent) and texts(agent.messages) == ["6"]


def test_after_an_answered_run_a_failed_one_and_the_next_are_one_turn() -> None:
    model = Script("4", http_500())
    agent = agent_on(model)
    assert agent.run_sync("warm-up", output_type=str) == "4"
    with pytest.raises(ModelHTTPError):
        agent.run_sync(FIRST, output_type=str)
    agent.run_sync(SECOND, output_type=str)
    assert user_texts(model.seen[-1]) == ["warm-up", f"{FIRST}\n\n{FAILED}\n\n{SECOND}"]
    assert [m.kind for m in agent.messages] == ["request", "response", "request", "response"]


def test_two_failed_runs_in_a_row_leave_both_prompts_and_notes_in_one_request() -> None:
    model = Script(http_500(), http_500())
    agent = agent_on(model)
    for prompt in (FIRST, SECOND):
        with pytest.raises(ModelHTTPError):
            agent.run_sync(prompt, output_type=str)
    assert user_texts(agent.messages) == [f"{FIRST}\n\n{FAILED}\n\n{SECOND}\n\n{FAILED}"]
    agent.run_sync("Third?", output_type=str)
    assert user_texts(model.seen[-1]) == [f"{FIRST}\n\n{FAILED}\n\n{SECOND}\n\n{FAILED}\n\nThird?"]


def test_a_stopped_run_leaves_its_prompt_and_the_stop_note_for_the_next_prompt() -> None:
    started = threading.Event()
    never = asyncio.Event()
    seen: list[list[ModelMessage]] = []

    async def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if len(seen) == 1:
            started.set()
            await never.wait()  # a server that hangs
        return ModelResponse(parts=[TextPart("6")])

    agent = agent_on(fn)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            agent.run_sync(FIRST, output_type=str)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert started.wait(5)
    assert agent.interrupt()
    worker.join(5)
    assert isinstance(errors[0], RunCancelledError)
    assert user_texts(agent.messages) == [f"{FIRST}\n\n{INTERRUPTED}"] and not texts(agent.messages)
    assert agent.run_sync(SECOND, output_type=str) == "6"
    assert user_texts(seen[-1]) == [f"{FIRST}\n\n{INTERRUPTED}\n\n{SECOND}"]


def test_a_cut_response_asked_again_after_a_failed_run_keeps_the_earlier_prompt() -> None:
    cut = ConnectionError("peer closed connection without sending complete message body")
    model = Script(http_500(), cut)
    agent = agent_on(model)
    with pytest.raises(ModelHTTPError):
        agent.run_sync(FIRST, output_type=str)
    assert agent.run_sync(SECOND, output_type=str) == "6"
    assert len(model.seen) == 3  # failed, cut, asked again
    joined = f"{FIRST}\n\n{FAILED}\n\n{SECOND}"
    assert user_texts(model.seen[-1]) == [joined]
    assert user_texts(agent.messages) == [joined] and texts(agent.messages) == ["6"]


def test_a_full_context_asked_again_after_a_failed_run_keeps_the_earlier_prompt() -> None:
    full = ModelHTTPError(
        400, "m", body={"error": {"message": "Requested tokens (5000) exceed context window of 4096"}}
    )
    model = Script("4", http_500(), full)
    agent = agent_on(model)
    agent.run_sync("warm-up", output_type=str)
    with pytest.raises(ModelHTTPError):
        agent.run_sync(FIRST, output_type=str)
    assert agent.run_sync(SECOND, output_type=str) == "6"
    # the digest of the warm-up rides in the same user text (one user message per turn)
    sent = user_texts(model.seen[-1])[-1]
    assert sent.startswith("Earlier in this conversation") and sent.endswith(f"\n\n{FIRST}\n\n{FAILED}\n\n{SECOND}")


@dataclass
class StopsItsAsk(AbstractCapability[Any]):
    """What the mailbox does when the ask being handled was stopped."""

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        raise RunInterruptedError("run interrupted: its ask was stopped")


def test_a_run_aklab_stops_from_inside_leaves_the_stop_note_not_a_failed_call() -> None:
    agent = agent_on(Script(), capabilities=[StopsItsAsk()])
    with pytest.raises(RunInterruptedError):
        agent.run_sync(FIRST, output_type=str)
    assert user_texts(agent.messages) == [f"{FIRST}\n\n{INTERRUPTED}"]


@dataclass
class FailsBeforeSending(AbstractCapability[Any]):
    """Fails the next run before its first request is built."""

    armed: bool = False

    async def before_run(self, ctx: Any) -> None:
        if self.armed:
            self.armed = False
            raise RuntimeError("broken before the request")


def test_a_run_that_failed_before_its_request_went_out_keeps_the_unanswered_prompt() -> None:
    model = Script(http_500())
    guard = FailsBeforeSending()
    agent = agent_on(model, capabilities=[guard])
    with pytest.raises(ModelHTTPError):
        agent.run_sync(FIRST, output_type=str)
    guard.armed = True
    with pytest.raises(RuntimeError):
        agent.run_sync(SECOND, output_type=str)
    assert len(model.seen) == 1  # the second run never asked
    # neither prompt got an answer: both stay, each with its note
    assert user_texts(agent.messages) == [f"{FIRST}\n\n{FAILED}\n\n{SECOND}\n\n{FAILED}"]


def test_a_failed_run_left_first_by_a_fold_keeps_the_digest_apart_and_joins_the_next_prompt() -> None:
    model = Script("4", "5", http_500())
    agent = agent_on(model, system_prompt="You are A.")
    agent.run_sync("one", output_type=str)
    agent.run_sync("two", output_type=str)
    with pytest.raises(ModelHTTPError):
        agent.run_sync(FIRST, output_type=str)
    agent.fold(keep_runs=1)  # what compaction does before the next turn
    [request] = agent.messages
    assert [p.part_kind for p in request.parts] == ["system-prompt", "user-prompt", "user-prompt"]
    agent.run_sync(SECOND, output_type=str)
    digest, joined = user_texts(agent.messages)  # the history keeps the digest a part of its own
    assert "one ⇒ 4" in digest and "two ⇒ 5" in digest
    assert joined == f"{FIRST}\n\n{FAILED}\n\n{SECOND}"
    assert user_texts(model.seen[-1]) == [f"{digest}\n\n{joined}"]  # the wire: one user message


def test_an_earlier_versions_failed_line_between_two_prompts_becomes_one_unanswered_turn() -> None:
    """The old line goes, its note and the next prompt join the unanswered one; an answer
    after them, and anything that is not the old line, stays as it was (the same objects)."""
    from aklab.llm.history import modernize_unanswered

    first = ModelRequest(parts=[UserPromptPart("warm-up")])
    answer = ModelResponse(parts=[TextPart("4")])
    history = [
        first,
        answer,
        ModelRequest(parts=[UserPromptPart(FIRST)]),
        ModelResponse(parts=[TextPart("[failed: the model server failed (HTTP 500: boom); ask again]")]),
        ModelRequest(parts=[UserPromptPart(SECOND)]),
        ModelResponse(parts=[TextPart("6")]),
    ]
    modern = modernize_unanswered(history, FAILED, INTERRUPTED)
    assert user_texts(modern) == ["warm-up", f"{FIRST}\n\n{FAILED}\n\n{SECOND}"] and texts(modern) == ["4", "6"]
    assert modern[0] is first and modern[1] is answer
    untouched = [first, answer, ModelRequest(parts=[UserPromptPart(FIRST)]), ModelResponse(parts=[TextPart("[ok]")])]
    assert modernize_unanswered(untouched, FAILED, INTERRUPTED) is untouched
