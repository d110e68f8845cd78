from __future__ import annotations

import json
import threading

import pytest
from pydantic import BaseModel
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from aklab.llm import (
    AgentUsageLimitError,
    AgentUsageLimits,
    CompactionConfig,
    LlmUsageEvent,
    ModelConfig,
    RunUsageLimitError,
    RunUsageLimits,
    aggregate_usage,
)
from aklab.llm.react import FAILED, ReactAgent
from aklab.llm.recovery import LimitRecoveryCapability
from aklab.llm.scripted import scripted_model


class Answer(BaseModel):
    text: str = ""


def _agent(model: object, **kw: object) -> tuple[ReactAgent, list[LlmUsageEvent]]:
    events: list[LlmUsageEvent] = []
    agent = ReactAgent(name="@A", role="A", model_cfg=ModelConfig(model=model), on_usage=events.append, **kw)  # type: ignore[arg-type]
    return agent, events


def test_every_model_request_is_recorded_with_its_tokens() -> None:
    agent, events = _agent(scripted_model([{"text": "one"}, {"text": "two"}]))
    assert agent.run_sync("hi", output_type=Answer).text == "one"
    assert agent.run_sync("again", output_type=Answer).text == "two"
    assert [(e.requests, e.input_tokens, e.model) for e in events] == [(1, 100, "scripted")] * 2
    assert events[0].run_id != events[1].run_id
    assert len(agent.messages) == 6  # the history carries both runs


def test_a_priced_model_name_gets_a_cost_and_an_unknown_one_gets_none() -> None:
    def fn(messages: object, info: AgentInfo) -> ModelResponse:
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, '{"text": "x"}')],
            usage=RequestUsage(input_tokens=1000, output_tokens=500),
        )

    priced, priced_events = _agent(FunctionModel(fn, model_name="gpt-4o"))
    priced.run_sync("hi", output_type=Answer)
    assert priced_events[0].cost_usd == pytest.approx(0.0075)
    unknown, unknown_events = _agent(FunctionModel(fn, model_name="no-such-model"))
    unknown.run_sync("hi", output_type=Answer)
    assert unknown_events[0].cost_usd is None
    summary = aggregate_usage(priced_events + unknown_events)
    assert summary.total.cost_usd is None and summary.total.unpriced_requests == 1


def test_runs_work_from_a_plain_thread() -> None:
    agent, _ = _agent(scripted_model([{"text": "threaded"}]))
    out: list[Answer] = []
    t = threading.Thread(target=lambda: out.append(agent.run_sync("hi", output_type=Answer)))
    t.start()
    t.join(10)
    assert out == [Answer(text="threaded")]


def test_the_agent_tier_refuses_a_run_once_the_lifetime_budget_is_spent() -> None:
    agent, events = _agent(
        scripted_model([{"text": "a"}], repeat_last=True),
        agent_usage_limits=AgentUsageLimits(agent_request_limit=2),
    )
    agent.run_sync("1", output_type=Answer)
    agent.run_sync("2", output_type=Answer)
    with pytest.raises(AgentUsageLimitError, match="2 runs"):
        agent.run_sync("3", output_type=Answer)
    # rebuilt from events (as after a restore), the budget is still spent
    agent.budget.rebuild(events)
    assert agent.budget.runs == 2


def _looping_tool_model(conclusion: dict[str, object] | None) -> FunctionModel:
    """Calls a tool forever; answers with ``conclusion`` once tools are taken away."""

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not info.function_tools:
            if conclusion is None:
                raise RuntimeError("cannot conclude")
            prompt = messages[-1].parts[-1].content  # type: ignore[union-attr]
            return ModelResponse(
                parts=[ToolCallPart(info.output_tools[0].name, json.dumps({**conclusion, "seen": prompt}))]
            )
        return ModelResponse(parts=[ToolCallPart("ping", {})], usage=RequestUsage(input_tokens=10, output_tokens=1))

    return FunctionModel(fn)


class Concluded(BaseModel):
    text: str = ""
    seen: str = ""


def ping() -> str:
    """Ping."""
    return "pong"


def test_a_run_tier_breach_concludes_once_without_tools_and_says_what_is_unfinished() -> None:
    agent, events = _agent(
        _looping_tool_model({"text": "partial answer"}),
        run_usage_limits=RunUsageLimits(run_request_limit=3),
        tools=[ping],
    )
    out = agent.run_sync("work", output_type=Concluded)
    assert out.text == "partial answer"
    assert "state explicitly which parts you could not check or finish" in out.seen
    assert len(events) == 4  # three breached requests and the conclusion, all counted


def test_a_failed_conclusion_raises_the_original_breach() -> None:
    agent, _ = _agent(_looping_tool_model(None), run_usage_limits=RunUsageLimits(run_request_limit=2), tools=[ping])
    with pytest.raises(RunUsageLimitError, match="request_limit of 2") as caught:
        agent.run_sync("work", output_type=Concluded)
    assert isinstance(caught.value.__cause__, UsageLimitExceeded)


def test_recovery_can_be_turned_off() -> None:
    agent, _ = _agent(
        _looping_tool_model({"text": "x"}),
        run_usage_limits=RunUsageLimits(run_request_limit=2),
        tools=[ping],
        limit_recovery=LimitRecoveryCapability(enabled=False),
    )
    with pytest.raises(RunUsageLimitError):
        agent.run_sync("work", output_type=Concluded)


def test_a_failed_run_keeps_its_usage_and_the_prompt_in_the_history() -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ConnectionError("down")

    agent, _ = _agent(FunctionModel(broken))
    with pytest.raises(ConnectionError):
        agent.run_sync("remember me", output_type=Answer)
    kinds = [p.part_kind for m in agent.messages for p in m.parts if p.part_kind != "system-prompt"]
    assert kinds == ["user-prompt"]  # the prompt, and a note that it got no answer: no answer is made up
    assert agent.messages[-1].parts[-1].content == f"remember me\n\n{FAILED}"  # type: ignore[union-attr]


@pytest.mark.parametrize("digest", [False, True])
def test_compaction_drops_whole_old_runs(digest: bool) -> None:
    """Without the digest old runs are dropped; with it (the default) each leaves one line."""
    agent, _ = _agent(
        scripted_model([{"text": "a"}], repeat_last=True),
        system_prompt="You are A.",
        compaction_cfg=CompactionConfig(digest=digest),
    )
    for i in range(4):
        agent.run_sync(f"turn {i}", output_type=Answer)
    removed = agent.compact_sliding(keep_runs=2)
    assert removed == 4
    kinds = [[p.part_kind for p in m.parts] for m in agent.messages]
    assert kinds[0] == ["system-prompt", "user-prompt", "user-prompt"] if digest else ["system-prompt", "user-prompt"]
    assert "tool-return" not in kinds[0]
    assert ("turn 0 ⇒" in str(agent.messages[0].parts[1].content)) is digest  # type: ignore[union-attr]
    assert agent.run_sync("after", output_type=Answer).text == "a"


def test_summarizing_compaction_replaces_old_runs_with_the_models_summary() -> None:
    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        from pydantic_ai.messages import TextPart

        if not info.output_tools:  # the summary request (output type str)
            return ModelResponse(parts=[TextPart("We discussed turns 0 to 2.")])
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, '{"text": "ok"}')])

    agent, events = _agent(FunctionModel(fn), system_prompt="You are A.")
    for i in range(4):
        agent.run_sync(f"turn {i}", output_type=Answer)
    removed = agent.compact_summarize(keep_runs=1)
    assert removed > 0
    texts = [str(p.content) for m in agent.messages for p in m.parts if p.part_kind in ("user-prompt", "system-prompt")]
    assert texts[:2] == ["You are A.", "Summary of the earlier conversation:\nWe discussed turns 0 to 2."]
    assert texts[-1] == "turn 3" and not any(t == "turn 0" for t in texts)
    assert len(events) == 5  # the summary request is counted like any other
    assert agent.run_sync("after", output_type=Answer).text == "ok"


def test_agents_share_the_output_schema_but_each_keeps_its_own_output_retries() -> None:
    """The schema of an output spec is built once and shared; a run's retries stay its agent's own."""
    from aklab.llm import RuntimeConfig

    def bad_then_good() -> FunctionModel:
        calls = iter(range(100))

        def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            args = '{"text": 1}' if next(calls) % 2 == 0 else '{"text": "ok"}'  # every other one is wrong
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

        return FunctionModel(fn)

    patient, _ = _agent(bad_then_good(), runtime_cfg=RuntimeConfig(retries=2))
    strict, _ = _agent(bad_then_good(), runtime_cfg=RuntimeConfig(retries=0))
    try:
        assert patient.run_sync("hi", output_type=Answer).text == "ok"
        with pytest.raises(Exception, match=r"retr(y|ies)"):
            strict.run_sync("hi", output_type=Answer)
        assert patient.run_sync("again", output_type=Answer).text == "ok"  # still its own retries
    finally:
        patient.close()
        strict.close()


def test_a_lifetime_limit_of_one_run_says_one_run() -> None:
    from aklab.llm.limits import AgentBudget

    budget = AgentBudget(AgentUsageLimits(agent_request_limit=1))
    budget.start_run("r1")
    with pytest.raises(AgentUsageLimitError, match=r"reached: 1 run \(agent_request_limit\) used of 1;"):
        budget.start_run("r2")
