"""ReactAgent on models that do not follow the protocol: text answers, rejected attempts,
failures, unknown token counts, full contexts, and a stop while a request is in flight."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCalls, FunctionModel
from pydantic_ai.usage import RequestUsage

from aklab.agent import Request, StructuredOutput
from aklab.llm import LlmUsageEvent, ModelConfig
from aklab.llm.failures import CONTEXT_FULL, RunCancelledError, describe_failure
from aklab.llm.react import FAILED, INTERRUPTED, ReactAgent


def to_human(text: str) -> StructuredOutput:
    return StructuredOutput(messages=[Request(recipient="@Human", message_type="response", message=text)])


def make(model: object, **cfg: object) -> tuple[ReactAgent, list[LlmUsageEvent]]:
    events: list[LlmUsageEvent] = []
    agent = ReactAgent(name="@A", role="A", model_cfg=ModelConfig(model=model, **cfg), on_usage=events.append)  # type: ignore[arg-type]
    return agent, events


def parts_of(messages: list[ModelMessage]) -> list[str]:
    return [p.part_kind for m in messages for p in m.parts]


def test_a_plain_text_answer_becomes_a_reply_to_the_sender() -> None:
    agent, _ = make(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("Paris.")])))
    out = agent.run_sync("Capital of France?", output_type=StructuredOutput, fallback=to_human)
    assert out == to_human("Paris.")


def test_prompted_mode_sends_the_json_shape_as_instructions_and_reads_json_or_text() -> None:
    seen: list[AgentInfo] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        if len(seen) == 1:
            return ModelResponse(
                parts=[TextPart('{"messages": [{"recipient": "@Human", "message_type": "response", "message": "4"}]}')]
            )
        return ModelResponse(parts=[TextPart("Paris.")])

    agent, _ = make(FunctionModel(fn), output_mode="prompted")
    assert agent.run_sync("2+2?", output_type=StructuredOutput, fallback=to_human, recipients=["@Human"]) == to_human(
        "4"
    )
    assert agent.run_sync(
        "France?", output_type=StructuredOutput, fallback=to_human, recipients=["@Human"]
    ) == to_human("Paris.")
    assert seen[0].instructions is not None and "recipient is one of: @Human" in seen[0].instructions
    assert seen[0].allow_text_output and not seen[0].output_tools


def test_rejected_attempts_do_not_stay_in_the_history() -> None:
    calls = 0

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        args = '{"messages": "not a list"}' if calls == 1 else '{"messages": []}'
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

    agent, events = make(FunctionModel(fn))
    agent.run_sync("hi", output_type=StructuredOutput)
    assert calls == 2 and len(events) == 2  # both requests are counted...
    kinds = parts_of(agent.messages)
    assert kinds.count("tool-call") == 1  # ...but only the accepted attempt is kept
    assert "retry-feedback" not in kinds and "retry-prompt" not in kinds


def test_a_failed_run_collapses_to_its_prompt_and_a_note_and_its_request_counts() -> None:
    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelHTTPError(500, "m", body={"error": "boom"})

    agent, events = make(FunctionModel(fn))
    with pytest.raises(ModelHTTPError):
        agent.run_sync("What is 2+2?", output_type=StructuredOutput)
    assert len(agent.messages) == 1
    assert agent.messages[-1].parts[-1].content == f"What is 2+2?\n\n{FAILED}"  # type: ignore[union-attr]
    assert [(e.requests, e.ok, e.input_tokens) for e in events] == [(1, False, None)]


def test_tokens_a_server_does_not_report_are_estimated_and_marked() -> None:
    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(
            parts=[TextPart("The capital of France is Paris.")], usage=RequestUsage(unmeasured_requests=1)
        )

    agent, events = make(FunctionModel(fn))
    agent.run_sync("What is the capital of France? " * 10, output_type=StructuredOutput, fallback=to_human)
    (event,) = events
    assert event.estimated
    assert event.input_tokens is not None and event.input_tokens >= 75  # 310 characters of prompt at least
    assert event.output_tokens is not None and 5 <= event.output_tokens <= 20


def test_a_full_context_compacts_and_retries_once() -> None:
    requests: list[int] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(sum(len(str(getattr(p, "content", ""))) for m in messages for p in m.parts))
        if len(requests) == 2:
            raise ModelHTTPError(
                400, "m", body={"error": {"message": "Requested tokens (5000) exceed context window of 4096"}}
            )
        return ModelResponse(parts=[TextPart("x" * 3000)])

    agent, _ = make(FunctionModel(fn), context_length=1000)
    agent.run_sync("first", output_type=StructuredOutput, fallback=to_human)
    out = agent.run_sync("second", output_type=StructuredOutput, fallback=to_human)
    assert out == to_human("x" * 3000)
    assert len(requests) == 3 and requests[2] < requests[1] * 0.6  # the retry went out with a smaller history


def test_a_context_that_stays_full_tells_what_to_do() -> None:
    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelHTTPError(400, "m", body="This model's maximum context length is 4096 tokens")

    agent, _ = make(FunctionModel(fn))
    with pytest.raises(ModelHTTPError) as info:
        agent.run_sync("hi", output_type=StructuredOutput, fallback=to_human)
    assert describe_failure(info.value) == CONTEXT_FULL


def test_interrupt_abandons_the_request_in_flight() -> None:
    started = threading.Event()
    never = asyncio.Event()

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        started.set()
        await never.wait()  # a server that hangs
        yield "never"

    async def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        started.set()
        await never.wait()
        return ModelResponse(parts=[TextPart("never")])

    agent, events = make(FunctionModel(fn, stream_function=stream))
    errors: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            agent.run_sync("hang", output_type=StructuredOutput, fallback=to_human)
        except BaseException as exc:
            errors.append(exc)
        done.set()

    worker = threading.Thread(target=run)
    worker.start()
    assert started.wait(5)
    assert agent.interrupt()
    assert done.wait(0.5), "the run did not stop within 0.5 s"
    worker.join()
    assert isinstance(errors[0], RunCancelledError)
    assert agent.messages[-1].parts[-1].content == f"hang\n\n{INTERRUPTED}"  # type: ignore[union-attr]
    assert not agent.interrupt()  # nothing in flight any more
    assert [e.ok for e in events] == [False]
