"""Stored answers given again instead of asking the model (a handling done again after a
resume): streamed and plain runs, answers running out part-way, and which models count as
answering in this process."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.providers.openai import OpenAIProvider

from aklab.agent import StructuredOutput
from aklab.llm import LlmUsageEvent, ModelConfig
from aklab.llm.demo import demo_model
from aklab.llm.react import ReactAgent
from aklab.llm.replay import in_process
from tests.fakeserver import FakeOpenAI

REPLY = {"messages": [{"message_type": "response", "recipient": "@Human", "message": "from the model"}]}
STORED = {"messages": [{"message_type": "response", "recipient": "@Human", "message": "from the store"}]}


def _model(calls: list[int]) -> FunctionModel:
    """Answers REPLY through the output tool, plainly or streamed; counts its calls."""

    def plain(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(REPLY))])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[DeltaToolCalls]:
        calls.append(1)
        yield {0: DeltaToolCall(name=info.output_tools[0].name, json_args=json.dumps(REPLY))}

    return FunctionModel(plain, stream_function=stream, model_name="counting")


def _agent(calls: list[int], usage: list[LlmUsageEvent], *, streamed: bool) -> ReactAgent:
    return ReactAgent(
        name="@Solo",
        model_cfg=ModelConfig(model=_model(calls)),
        on_usage=usage.append,
        on_stream=(lambda event: None) if streamed else None,
    )


def _stored_answer(tool_name: str) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(tool_name, json.dumps(STORED))], model_name="counting")


@pytest.mark.parametrize("streamed", [True, False])
def test_a_stored_answer_is_given_instead_of_asking_the_model(streamed: bool) -> None:
    calls: list[int] = []
    usage: list[LlmUsageEvent] = []
    agent = _agent(calls, usage, streamed=streamed)
    assert agent.streams is streamed
    agent.replay = deque([_stored_answer("final_result")])
    out = agent.run_sync("Say something.", output_type=StructuredOutput)
    assert [m.message for m in out.messages] == ["from the store"]
    assert calls == [] and usage == []  # not asked, nothing paid: its usage was counted when it was
    assert not agent.replay  # given once
    assert any(isinstance(m, ModelResponse) and m.model_name == "counting" for m in agent.messages)
    again = agent.run_sync("And now?", output_type=StructuredOutput)
    assert [m.message for m in again.messages] == ["from the model"]  # the next run asks the model
    assert calls == [1] and len(usage) == 1


@pytest.mark.parametrize("streamed", [True, False])
def test_requests_beyond_the_stored_answers_go_to_the_model(streamed: bool) -> None:
    """The stored answer called a tool; the answer after the tool's result was never given
    (the kernel died waiting for it): the model is asked for that one only."""
    calls: list[int] = []
    usage: list[LlmUsageEvent] = []
    looked_up: list[str] = []

    def lookup(topic: str) -> str:
        """Look a topic up."""
        looked_up.append(topic)
        return f"notes on {topic}"

    agent = ReactAgent(
        name="@Solo",
        model_cfg=ModelConfig(model=_model(calls)),
        tools=[lookup],
        on_usage=usage.append,
        on_stream=(lambda event: None) if streamed else None,
    )
    agent.replay = deque([ModelResponse(parts=[ToolCallPart("lookup", {"topic": "logins"})], model_name="counting")])
    out = agent.run_sync("Look it up, then answer.", output_type=StructuredOutput)
    assert looked_up == ["logins"]  # the stored answer's tool call runs again
    assert [m.message for m in out.messages] == ["from the model"]
    assert calls == [1] and len(usage) == 1  # only the request the store had no answer for


def test_the_runs_of_one_handling_take_the_stored_answers_in_turn() -> None:
    """A handling's runs (a compaction's summary, then the turn) asked in this order before
    the crash: done again, each takes its own answer."""
    calls: list[int] = []
    usage: list[LlmUsageEvent] = []
    agent = _agent(calls, usage, streamed=False)
    first = _stored_answer("final_result")
    second = ModelResponse(
        parts=[
            ToolCallPart("final_result", json.dumps(REPLY | {"messages": [STORED["messages"][0] | {"message": "2"}]}))
        ],
        model_name="counting",
    )
    agent.replay = deque([first, second])
    assert [m.message for m in agent.run_sync("One.", output_type=StructuredOutput).messages] == ["from the store"]
    assert [m.message for m in agent.run_sync("Two.", output_type=StructuredOutput).messages] == ["2"]
    assert calls == [] and usage == []


def test_models_answering_in_this_process_are_told_apart_from_servers() -> None:
    assert in_process(FunctionModel(lambda m, i: ModelResponse(parts=[])))
    assert in_process(TestModel())
    assert in_process(demo_model())
    server = OpenAIChatModel("fake", provider=OpenAIProvider(base_url="http://127.0.0.1:9/v1", api_key="unused"))
    assert not in_process(server)


def test_a_request_to_a_server_is_told_before_it_leaves_and_an_answer_given_again_is_not(
    fake_openai: FakeOpenAI,
) -> None:
    """``on_request`` (a stored team stores the request then) comes before the server has the
    request, once per request, through pydantic-ai's OpenAI provider; a stored answer given
    again asks no one, so nothing is told; a model in this process is never told about."""
    from pydantic_ai.messages import TextPart

    from tests.fakeserver import output, tool_names

    fake_openai.default = output(REPLY)
    told: list[tuple[str, int]] = []
    agent = ReactAgent(
        name="@Solo",
        model_cfg=ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url),
        on_request=lambda run_id: told.append((run_id, len(fake_openai.bodies))),
    )
    out = agent.run_sync("Say something.", output_type=StructuredOutput)
    assert [m.message for m in out.messages] == ["from the model"]
    [(run_id, had)] = told
    assert had == 0 and run_id  # told before the server had it
    assert tool_names(fake_openai.bodies[0]) == []  # this profile asks for its output as JSON text
    agent.replay = deque([ModelResponse(parts=[TextPart(json.dumps(STORED))], model_name="fake")])
    again = agent.run_sync("Again.", output_type=StructuredOutput)
    assert [m.message for m in again.messages] == ["from the store"]
    assert len(told) == 1 and len(fake_openai.bodies) == 1
    calls: list[int] = []
    local = ReactAgent(name="@Solo", model_cfg=ModelConfig(model=_model(calls)), on_request=told.append)
    local.run_sync("Say something.", output_type=StructuredOutput)
    assert calls == [1] and len(told) == 1
