from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse, PartEndEvent, PartStartEvent, ToolCallPart
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.models.instrumented import InstrumentedModel
from pydantic_ai.models.test import TestModel

from aklab.agent import AgentMessage, StructuredOutput
from aklab.core import ActorAddress
from aklab.llm import LlmUsageEvent, ModelConfig, RuntimeConfig
from aklab.llm.demo import demo_model
from aklab.llm.react import ReactAgent
from aklab.llm.scripted import scripted_model
from aklab.llm.streaming import OutputStreamer, OutputStreamEvent, model_can_stream, streams_messages


def _request(text: str, sender: str = "@Manager") -> str:
    message = AgentMessage(content=text, type="request", sender=ActorAddress("x", sender, sender.strip("@")))
    return message.render_for_llm()


def _streaming(*outputs: dict[str, Any], chunk: int = 9) -> FunctionModel:
    """Streams ``outputs`` in turn (the last one again if asked more), ``chunk`` characters at a time."""
    calls = [0]

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[DeltaToolCalls]:
        body = json.dumps(outputs[min(calls[0], len(outputs) - 1)])
        calls[0] += 1
        yield {0: DeltaToolCall(name=info.output_tools[0].name, json_args=body[:chunk])}
        for i in range(chunk, len(body), chunk):
            yield {0: DeltaToolCall(json_args=body[i : i + chunk])}

    return FunctionModel(stream_function=stream, model_name="streaming")


def _out(*items: tuple[str, str, str]) -> dict[str, Any]:
    return {"messages": [{"message_type": t, "recipient": r, "message": m} for r, t, m in items]}


def _by_item(events: list[OutputStreamEvent]) -> dict[tuple[str, int, int], list[OutputStreamEvent]]:
    items: dict[tuple[str, int, int], list[OutputStreamEvent]] = {}
    for event in events:
        items.setdefault((event.run_id, event.attempt, event.index), []).append(event)
    return items


def _assert_grows(events: list[OutputStreamEvent]) -> None:
    texts = [e.text for e in events]
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts)), texts
    assert not any(e.done for e in events[:-1])


LONG = "Check the login form with empty, long and unicode input (é, 😀), then report.\n" * 3


# -- through ReactAgent -------------------------------------------------------------------------
def test_the_demo_model_streams_the_outgoing_message_as_it_is_written() -> None:
    events: list[OutputStreamEvent] = []
    agent = ReactAgent(name="@QA", model_cfg=ModelConfig(), system_prompt="You are QA.", on_stream=events.append)
    assert agent.streams
    out = agent.run_sync(_request("Test the login page end to end"), output_type=StructuredOutput)
    [sent] = out.messages
    [(key, item)] = _by_item(events).items()
    assert len(item) >= 3 and item[0].text and not item[0].done  # visible before the output is complete
    _assert_grows(item)
    last = item[-1]
    assert last.done and not last.dropped
    assert (last.text, last.recipient, last.message_type) == (sent.message, sent.recipient, sent.message_type)
    assert {e.agent for e in item} == {"@QA"} and key[1:] == (0, 0)
    assert all(e.recipient in ("", sent.recipient) for e in item)  # never a half-written recipient


def test_every_item_streams_in_steps_of_at_least_min_chars_and_completes_in_order() -> None:
    events: list[OutputStreamEvent] = []
    first, second = ("@Dev", "request", LONG), ("@Human", "notification", "short")
    model = _streaming(_out(first, second), chunk=5)
    agent = ReactAgent(name="@M", model_cfg=ModelConfig(model=model), on_stream=events.append, stream_min_chars=50)
    out = agent.run_sync("go", output_type=StructuredOutput)
    items = _by_item(events)
    assert [k[2] for k in items] == [0, 1]
    growing, short = items.values()
    _assert_grows(growing)
    steps = [len(e.text) for e in growing[:-1]]
    assert steps and all(b - a >= 50 for a, b in itertools.pairwise([0, *steps]))
    assert [e.text for e in (growing[-1], short[-1])] == [m.message for m in out.messages]
    assert [(e.done, e.text) for e in short] == [(True, "short")]  # shorter than min_chars: only its completion
    assert events.index(growing[-1]) < events.index(short[0])


def test_a_model_without_a_stream_function_is_run_without_streaming() -> None:
    events: list[OutputStreamEvent] = []
    usage: list[LlmUsageEvent] = []
    model = scripted_model([_out(("@Dev", "request", LONG))])
    assert not model_can_stream(model)
    agent = ReactAgent(name="@M", model_cfg=ModelConfig(model=model), on_stream=events.append, on_usage=usage.append)
    assert not agent.streams
    # A streamed request would fail: this FunctionModel has no stream_function.
    assert agent.run_sync("go", output_type=StructuredOutput).messages[0].message == LONG
    assert events == [] and [u.input_tokens for u in usage] == [100]


def test_streaming_needs_the_setting_a_listener_and_a_messages_output() -> None:
    events: list[OutputStreamEvent] = []
    off = ReactAgent(name="@A", runtime_cfg=RuntimeConfig(stream=False), on_stream=events.append)
    no_listener = ReactAgent(name="@A")
    assert not off.streams and not no_listener.streams
    off.run_sync(_request("Test it"), output_type=StructuredOutput)
    no_listener.run_sync(_request("Test it"), output_type=StructuredOutput)
    on = ReactAgent(name="@A", system_prompt="You are QA.", on_stream=events.append)
    assert on.run_sync(_request("Test it"), output_type=str)  # not a messages output: not streamed
    assert events == []


def test_which_outputs_and_models_stream() -> None:
    class Item(BaseModel):
        recipient: str
        message_type: str
        message: str

    class Like(BaseModel):
        messages: list[Item]
        note: str = ""

    class Other(BaseModel):
        messages: list[str]

    assert streams_messages(StructuredOutput) and streams_messages(Like)
    assert not any(streams_messages(t) for t in (Other, str, dict, list[Item], None))

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise AssertionError("not called")

    plain = FunctionModel(fn)
    assert model_can_stream(demo_model()) and model_can_stream(TestModel())
    assert not model_can_stream(plain) and not model_can_stream(InstrumentedModel(plain))
    assert model_can_stream(InstrumentedModel(demo_model()))
    assert not model_can_stream(FallbackModel(demo_model(), plain))
    assert model_can_stream(FallbackModel(demo_model(), TestModel()))


class Stop(Exception):
    pass


@dataclass
class Raise(AbstractCapability[Any]):
    """Raises in ``hook`` (before or after the model request)."""

    hook: str = "before"

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        if self.hook == "before":
            raise Stop("before the request")
        return request_context

    async def after_model_request(self, ctx: RunContext[Any], *, request_context: Any, response: Any) -> Any:
        if self.hook == "after":
            raise Stop("after the response")
        return response


@pytest.mark.parametrize("hook", ["before", "after"])
def test_a_capability_that_raises_still_propagates_and_the_history_is_the_same(hook: str) -> None:
    outcomes = []
    for streamed in (False, True):
        events: list[OutputStreamEvent] = []
        usage: list[LlmUsageEvent] = []
        agent = ReactAgent(
            name="@QA",
            system_prompt="You are QA.",
            capabilities=[Raise(hook)],
            on_stream=events.append if streamed else None,
            on_usage=usage.append,
            stream_min_chars=10,
        )
        assert agent.streams is streamed
        with pytest.raises(Stop, match=hook):
            agent.run_sync(_request("Test the login page end to end"), output_type=StructuredOutput)
        assert agent.current_run_id is None
        history = [[p.part_kind for p in m.parts] for m in agent.messages]
        outcomes.append((history, len(usage)))
        if streamed and hook == "after":  # the answer was written, then dropped
            [item] = _by_item(events).values()
            assert item[-2].done and not item[-2].dropped and item[-1].dropped
            _assert_grows(item[:-1])
        else:
            assert events == []
    assert outcomes[0] == outcomes[1]


@dataclass
class RejectFirst(AbstractCapability[Any]):
    """Rejects the first output, like RecipientCheckCapability does for an unknown recipient."""

    seen: list[str] = field(default_factory=list)

    async def after_output_validate(self, ctx: RunContext[Any], *, output_context: Any, output: Any) -> Any:
        self.seen.append(output.messages[0].recipient)
        if len(self.seen) == 1:
            raise ModelRetry("@Ghost cannot be reached")
        return output


def test_a_rejected_output_is_dropped_and_its_rewrite_is_a_new_attempt() -> None:
    events: list[OutputStreamEvent] = []
    model = _streaming(_out(("@Ghost", "request", LONG)), _out(("@Dev", "request", "Fixed: " + LONG)))
    agent = ReactAgent(
        name="@M", model_cfg=ModelConfig(model=model), capabilities=[RejectFirst()], on_stream=events.append
    )
    out = agent.run_sync("go", output_type=StructuredOutput)
    first, second = _by_item(events).values()
    assert {e.attempt for e in first} == {0} and {e.attempt for e in second} == {1}
    assert first[-2].done and first[-1].dropped and first[-1].recipient == "@Ghost"
    assert events.index(first[-1]) < events.index(second[0])  # dropped before the rewrite shows
    _assert_grows(second)
    assert not second[-1].dropped and second[-1].text == out.messages[0].message


def test_a_broken_listener_never_breaks_the_run(caplog: pytest.LogCaptureFixture) -> None:
    def boom(event: OutputStreamEvent) -> None:
        raise RuntimeError("display is gone")

    agent = ReactAgent(name="@QA", system_prompt="You are QA.", on_stream=boom, stream_min_chars=5)
    out = agent.run_sync(_request("Test the login page end to end"), output_type=StructuredOutput)
    assert out.messages
    assert [r.getMessage() for r in caplog.records] == ["@QA: output stream sink failed"]  # once per run


# -- the streamer alone ---------------------------------------------------------------------------
def _feed(streamer: OutputStreamer, raw: str, sizes: random.Random) -> None:
    streamer._start(0, "call")
    i = 0
    while i < len(raw):
        n = sizes.randint(1, 30)
        streamer._feed(raw[i : i + n])
        i += n


def test_any_chunking_of_any_json_yields_the_exact_items() -> None:
    rng = random.Random(7)
    alphabet = 'ab c"\\\n\t{}[],:é😀\u2028'

    def text(n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, n)))

    for _ in range(300):
        items = [
            {"message_type": text(6), "message": text(150), "extra": [{"message": text(9)}], "recipient": text(9)}
            for _ in range(rng.randint(0, 3))
        ]
        doc: dict[str, Any] = {"before": {"messages": [{"message": "decoy"}]}, "messages": items, "after": [1]}
        raw = json.dumps(doc, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 2]))
        events: list[OutputStreamEvent] = []
        _feed(OutputStreamer(agent="@A", run_id="r", sink=events.append, min_chars=rng.choice([1, 7, 40])), raw, rng)
        by_index = _by_item(events)
        assert [k[2] for k in by_index] == list(range(len(items)))
        for (_, _, index), seen in by_index.items():
            want = items[index]
            _assert_grows(seen)
            assert seen[-1].done and (seen[-1].recipient, seen[-1].message_type, seen[-1].text) == (
                want["recipient"],
                want["message_type"],
                want["message"],
            )
            assert all(e.recipient in ("", want["recipient"]) for e in seen)


def test_whole_object_arguments_are_published_when_the_part_ends() -> None:
    events: list[OutputStreamEvent] = []
    streamer = OutputStreamer(agent="@A", run_id="r", sink=events.append)
    part = ToolCallPart("final_result", _out(("@B", "request", "hello"), ("@C", "response", "bye")), tool_call_id="c")

    async def stream() -> AsyncIterator[Any]:
        yield PartStartEvent(index=0, part=part)
        yield PartEndEvent(index=0, part=part)

    asyncio.run(streamer.handle(SimpleNamespace(tool_manager=None), stream()))  # type: ignore[arg-type]
    assert [(e.index, e.recipient, e.text, e.done) for e in events] == [
        (0, "@B", "hello", True),
        (1, "@C", "bye", True),
    ]
    streamer.abort()
    assert [(e.index, e.dropped) for e in events[2:]] == [(0, True), (1, True)]


def test_the_demo_reports_the_same_tokens_streamed_or_not() -> None:
    from aklab.agent import AgentMessage, StructuredOutput
    from aklab.core import ActorAddress
    from aklab.llm import ModelConfig
    from aklab.llm.react import ReactAgent

    prompt = AgentMessage(content="Fix the bug", sender=ActorAddress("x", "@Manager", "Manager")).render_for_llm()
    counts = []
    for on_stream in (None, lambda event: None):
        events: list[LlmUsageEvent] = []
        agent = ReactAgent(
            name="@D",
            model_cfg=ModelConfig(),
            system_prompt="You are a Developer.",
            on_usage=events.append,
            on_stream=on_stream,
        )
        agent.run_sync(prompt, output_type=StructuredOutput)
        counts.append((events[0].input_tokens, events[0].output_tokens))
    assert counts[0] == counts[1] and counts[0][0] > 100


def test_stream_events_reach_subscribers_but_are_not_kept_by_the_orchestrator() -> None:
    from aklab.core import ActorSystem, EventSubscriber, Message
    from aklab.llm.streaming import OutputStreamEvent
    from tests.helpers import card, make_team

    class Seen(EventSubscriber):
        def __init__(self) -> None:
            self.streamed = 0

        def on_message(self, message: Message) -> None:
            self.streamed += isinstance(getattr(message, "event", None), OutputStreamEvent)

    with ActorSystem() as system:
        team = make_team(system, [card("Manager")])
        seen = Seen()
        team.orchestrator.subscribe(seen)
        manager = team.start("Manager")
        team.say(manager, "Plan the sprint")
        team.settle()
        assert seen.streamed > 0
        assert team.orchestrator.get_events(OutputStreamEvent) == []
