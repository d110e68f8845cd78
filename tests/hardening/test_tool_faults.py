"""Tool faults: a tool failing in any way is a retry prompt for the model, never the team's end.

A tool that raises ``SystemExit`` (a library calling ``sys.exit()``) used to end the actor's
thread, and pykka then stopped every actor of the process. Each case runs a scripted model
(FunctionModel) that calls the faulty tool once, reads what came back, and answers; then
the same team answers the next question.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.lab.session import Lab
from aklab.lab.teams import TeamSpec
from aklab.llm import ModelConfig
from aklab.llm.react import ReactAgent
from aklab.tools import ToolCard
from aklab.tools.card import ToolHost
from tests.helpers import card


class _Unsendable:
    """A value no JSON encoder knows."""

    def __repr__(self) -> str:
        return "<Unsendable thing>"


class _CustomBase(BaseException):
    """A BaseException that is neither an Exception nor a control exception."""


def _raise(exc: BaseException) -> Callable[[], Any]:
    def fault() -> Any:
        raise exc

    return fault


FAULTS: list[tuple[str, Callable[[], Any], str]] = [
    ("sys-exit-3", _raise(SystemExit(3)), "tool explode failed: SystemExit: 3"),
    ("sys-exit-text", _raise(SystemExit("bye now")), "tool explode failed: SystemExit: bye now"),
    ("sys-exit-none", _raise(SystemExit()), "tool explode failed: SystemExit"),
    ("runtime-error", _raise(RuntimeError("disk on fire")), "tool explode failed: RuntimeError: disk on fire"),
    ("os-error", _raise(OSError(28, "No space left")), "tool explode failed: OSError: [Errno 28] No space left"),
    ("key-error", _raise(KeyError("missing")), "tool explode failed: KeyError: 'missing'"),
    ("zero-division", lambda: 1 / 0, "tool explode failed: ZeroDivisionError: division by zero"),
    ("recursion", _raise(RecursionError("too deep")), "tool explode failed: RecursionError: too deep"),
    ("custom-base", _raise(_CustomBase("odd")), "tool explode failed: _CustomBase: odd"),
    ("assertion", _raise(AssertionError()), "tool explode failed: AssertionError"),
]

UNSENDABLE: list[tuple[str, Callable[[], Any], str]] = [
    ("object", lambda: _Unsendable(), "<Unsendable thing>"),
    ("nested", lambda: {"result": _Unsendable()}, "<Unsendable thing>"),
    ("lock", lambda: threading.Lock(), "unlocked"),
    ("generator", lambda: (i for i in range(3)), "generator object"),
]


def _scripted(seen: list[str]) -> FunctionModel:
    """Call ``explode`` once per question, then answer with what the tool gave back."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        for part in last.parts:
            if isinstance(part, RetryPromptPart | ToolReturnPart):
                text = part.model_response() if isinstance(part, RetryPromptPart) else str(part.content)
                seen.append(text)
                return ModelResponse(parts=[TextPart(f"The tool said: {text.splitlines()[0]}")])
        return ModelResponse(parts=[ToolCallPart("explode", {})])

    return FunctionModel(model)


class FaultyTool(ToolCard):
    """A card whose one tool runs ``behaviour`` (set per test: cards are configuration)."""

    def get_tools(self, host: ToolHost) -> list[Callable[..., Any]]:
        def explode() -> Any:
            """Do the risky thing."""
            return _behaviour()

        return [explode]


_behaviour: Callable[[], Any] = lambda: "fine"  # noqa: E731


@pytest.fixture
def behaviour() -> Iterator[Callable[[Callable[[], Any]], None]]:
    global _behaviour

    def set_(fn: Callable[[], Any]) -> None:
        global _behaviour
        _behaviour = fn

    yield set_
    _behaviour = lambda: "fine"  # noqa: E731


def _solo(seen: list[str]) -> Lab:
    spec = TeamSpec("faulty", [card("Solo", model=_scripted(seen), tools=[FaultyTool()])], "Solo")
    return Lab(spec)


@pytest.mark.parametrize(("name", "fault", "told"), FAULTS, ids=[f[0] for f in FAULTS])
def test_a_failing_tool_is_a_retry_prompt_and_the_team_answers_the_next_question(
    behaviour: Callable[[Callable[[], Any]], None], name: str, fault: Callable[[], Any], told: str
) -> None:
    behaviour(fault)
    seen: list[str] = []
    with _solo(seen) as lab:
        [reply] = lab.ask("Do the risky thing", timeout=20)
        assert told in seen[0] and "\n" not in seen[0].split("\n\nFix the errors")[0]
        assert f"The tool said: {told}" in reply.content
        behaviour(lambda: "all good")
        [again] = lab.ask("Try once more", timeout=20)
        assert again.content == "The tool said: all good"
        assert all(member.is_alive() for member in lab.team())
        assert lab.errors() == []


@pytest.mark.parametrize(("name", "value", "shown"), UNSENDABLE, ids=[u[0] for u in UNSENDABLE])
def test_a_tool_result_that_cannot_be_sent_reaches_the_model_as_text(
    behaviour: Callable[[Callable[[], Any]], None], name: str, value: Callable[[], Any], shown: str
) -> None:
    behaviour(value)
    seen: list[str] = []
    with _solo(seen) as lab:
        [reply] = lab.ask("Do the risky thing", timeout=20)
        assert shown in seen[0] and reply.content.startswith("The tool said:")
        behaviour(lambda: "all good")
        [again] = lab.ask("Try once more", timeout=20)
        assert again.content == "The tool said: all good"


def test_a_plain_function_tool_given_to_the_react_agent_is_guarded_too() -> None:
    seen: list[str] = []

    def explode() -> str:
        """Do the risky thing."""
        raise SystemExit(3)

    agent = ReactAgent(name="@Solo", model_cfg=ModelConfig(model=_scripted(seen)), tools=[explode])
    try:
        assert agent.run_sync("go", output_type=str) == "The tool said: tool explode failed: SystemExit: 3"
        assert agent.run_sync("again", output_type=str).startswith("The tool said: tool explode failed")
    finally:
        agent.close()


def test_cancellation_still_passes_through_the_tool_guard() -> None:
    hanging = threading.Event()

    def slow() -> str:
        """Wait."""
        return "late"

    async def model_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
            hanging.set()
            await asyncio.Event().wait()  # never answers: only a cancel ends this run
        return ModelResponse(parts=[ToolCallPart("slow", {})])

    from aklab.llm.failures import RunCancelledError

    agent = ReactAgent(name="@Solo", model_cfg=ModelConfig(model=FunctionModel(model_fn)), tools=[slow])
    interrupted: list[bool] = []

    def cancel() -> None:
        if hanging.wait(10):
            interrupted.append(agent.interrupt())

    canceller = threading.Thread(target=cancel)
    try:
        canceller.start()
        with pytest.raises(RunCancelledError):
            agent.run_sync("go", output_type=str)
        canceller.join(10)
        assert interrupted == [True]
    finally:
        agent.close()
