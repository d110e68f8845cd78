"""Old runs fold into a one-line-per-run digest: tool calls keep their results, the system
prompt stays first, the digest is bounded and carried over from fold to fold."""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aklab.llm import CompactionConfig, ModelConfig
from aklab.llm.history import DIGEST_HEADER, digest_of, fold_runs, plain_run_line, run_starts
from aklab.llm.react import ReactAgent

SYSTEM = "You are terse."


def _run(i: int, *, first: bool = False, tool: bool = False) -> list[ModelMessage]:
    """One run as pydantic-ai leaves it: prompt, (a tool call and its return,) the answer."""
    parts: list[Any] = [SystemPromptPart(SYSTEM)] if first else []
    out: list[ModelMessage] = [ModelRequest(parts=[*parts, UserPromptPart(f"question {i}")])]
    if tool:
        out.append(ModelResponse(parts=[ToolCallPart("lookup", {"q": i}, tool_call_id=f"t{i}")]))
        out.append(ModelRequest(parts=[ToolReturnPart("lookup", f"fact {i}", tool_call_id=f"t{i}")]))
    out.append(ModelResponse(parts=[TextPart(f"answer {i}")]))
    return out


def _history(n: int, *, tool: bool = True) -> list[ModelMessage]:
    return [m for i in range(n) for m in _run(i, first=i == 0, tool=tool)]


def _pairs_valid(messages: list[ModelMessage]) -> bool:
    """Every tool return answers a call made in the response right before it, and every call is answered."""
    for i, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            calls = {p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)}
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            answered = {p.tool_call_id for p in nxt.parts if isinstance(p, ToolReturnPart)} if nxt else set()
            if calls - answered:
                return False
        if isinstance(message, ModelRequest):
            prev = messages[i - 1] if i else None
            calls = {p.tool_call_id for p in prev.parts if isinstance(p, ToolCallPart)} if prev else set()
            if {p.tool_call_id for p in message.parts if isinstance(p, ToolReturnPart)} - calls:
                return False
    return True


def line(run: Any) -> str | None:
    return plain_run_line(run, 40)


def test_fold_keeps_the_last_runs_whole_and_one_line_per_older_run() -> None:
    history = _history(6)
    folded, count = fold_runs(history, keep_runs=2, line_for_run=line, max_chars=4_000, system_prompt=SYSTEM)
    assert count == 4
    assert len(run_starts(folded)) == 2
    assert folded[-4:] == history[-4:]  # the last run untouched
    first = folded[0].parts
    assert isinstance(first[0], SystemPromptPart) and first[0].content == SYSTEM
    assert isinstance(first[1], UserPromptPart) and str(first[1].content).startswith(DIGEST_HEADER)
    lines, dropped = digest_of(folded)
    assert lines == [f"question {i} ⇒ answer {i}" for i in range(4)] and dropped == 0
    assert _pairs_valid(folded)
    assert sum(isinstance(p, SystemPromptPart) for m in folded for p in m.parts) == 1


def test_a_run_answered_only_by_tools_says_which_tools() -> None:
    run: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("look it up")]),
        ModelResponse(parts=[ToolCallPart("lookup", {}, tool_call_id="a")]),
        ModelRequest(parts=[ToolReturnPart("lookup", "x", tool_call_id="a")]),
        ModelResponse(parts=[ToolCallPart("final_result", {"answer": 1}, tool_call_id="b")]),
    ]
    assert plain_run_line(run) == "look it up ⇒ called lookup, final_result"


def test_successive_folds_extend_the_digest_and_a_full_digest_drops_its_oldest_lines() -> None:
    history = _history(4)
    history, _ = fold_runs(history, keep_runs=2, line_for_run=line, max_chars=4_000, system_prompt=SYSTEM)
    history += [m for i in range(4, 8) for m in _run(i, tool=True)]
    history, count = fold_runs(history, keep_runs=2, line_for_run=line, max_chars=4_000, system_prompt=SYSTEM)
    assert count == 4  # the run holding the old digest is folded without quoting it
    lines, _ = digest_of(history)
    assert lines == [f"question {i} ⇒ answer {i}" for i in range(6)]
    small, _ = fold_runs(_history(30), keep_runs=2, line_for_run=line, max_chars=200, system_prompt=SYSTEM)
    lines, dropped = digest_of(small)
    assert lines[-1] == "question 27 ⇒ answer 27" and dropped == 28 - len(lines) and dropped > 0
    assert "older lines dropped" in str(small[0].parts[1].content)
    assert len(str(small[0].parts[1].content)) < 200 + len(DIGEST_HEADER) + 40


def test_nothing_folds_when_there_are_no_more_runs_than_kept() -> None:
    history = _history(2)
    assert fold_runs(history, keep_runs=2, line_for_run=line, max_chars=4_000) == (history, 0)


def _echo_model(seen: list[list[ModelMessage]]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        last = messages[-1].parts[-1]
        return ModelResponse(parts=[TextPart(f"answer to {getattr(last, 'content', '')}")])

    return FunctionModel(respond)


def test_a_react_agent_folds_as_it_goes_and_keeps_every_turn_as_a_line() -> None:
    seen: list[list[ModelMessage]] = []
    cfg = CompactionConfig(recent_runs=4)
    model = ModelConfig(model=_echo_model(seen))
    agent = ReactAgent(name="@A", model_cfg=model, system_prompt=SYSTEM, compaction_cfg=cfg)
    try:
        for i in range(20):
            agent.maybe_compact()
            assert agent.run_sync(f"q{i}", output_type=str) == f"answer to q{i}"
        sizes = [len(run_starts(m)) for m in seen]
        assert max(sizes) <= 4 + 2 + 1  # recent runs, the fold step, the run being made
        lines, dropped = digest_of(agent.messages)
        assert dropped == 0 and lines[:2] == ["q0 ⇒ answer to q0", "q1 ⇒ answer to q1"]
        assert len(lines) + len(run_starts(agent.messages)) == 20
        assert all(isinstance(m[0].parts[0], SystemPromptPart) for m in seen)  # the system prompt stays first
    finally:
        agent.close()


def test_digest_off_keeps_the_whole_history() -> None:
    seen: list[list[ModelMessage]] = []
    cfg = CompactionConfig(digest=False)
    model = ModelConfig(model=_echo_model(seen))
    agent = ReactAgent(name="@A", model_cfg=model, system_prompt=SYSTEM, compaction_cfg=cfg)
    try:
        for i in range(12):
            agent.maybe_compact()
            agent.run_sync(f"q{i}", output_type=str)
        assert len(run_starts(agent.messages)) == 12 and digest_of(agent.messages) == ([], 0)
    finally:
        agent.close()
