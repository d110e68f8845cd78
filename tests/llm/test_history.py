"""History hygiene: rejected attempts leave, failed runs collapse, big runs are cut to fit."""

from __future__ import annotations

from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from aklab.llm.history import collapse_failed_run, estimate_tokens, message_chars, prune_rejected, shrink_parts


def retried(tool: str, call_id: str) -> ToolReturnPart:
    return ToolReturnPart(tool, "invalid arguments", tool_call_id=call_id, outcome="retried")


def feedback(text: str) -> RetryFeedbackPart:
    return RetryFeedbackPart(text, retry=RetryInfo(cause="model_retry"))  # type: ignore[arg-type]


def test_a_rejected_output_and_its_retry_prompt_leave_the_history() -> None:
    messages = [
        ModelRequest(parts=[SystemPromptPart("sys"), UserPromptPart("What is 2+2?")]),
        ModelResponse(parts=[ToolCallPart("final_result", {"bad": 1}, tool_call_id="a")]),
        ModelRequest(parts=[retried("final_result", "a")]),
        ModelResponse(parts=[TextPart("")]),
        ModelRequest(parts=[feedback("empty")]),
        ModelResponse(parts=[ToolCallPart("final_result", {"messages": []}, tool_call_id="b")]),
        ModelRequest(parts=[ToolReturnPart("final_result", "Final result processed.", tool_call_id="b")]),
    ]
    kept = prune_rejected(messages)
    assert [type(m).__name__ for m in kept] == ["ModelRequest", "ModelResponse", "ModelRequest"]
    assert not any(
        isinstance(p, RetryFeedbackPart) or getattr(p, "outcome", "") == "retried" for m in kept for p in m.parts
    )
    assert kept[1].parts[0].tool_call_id == "b"  # type: ignore[union-attr]


def test_a_partly_rejected_tool_step_keeps_the_calls_that_worked() -> None:
    messages = [
        ModelRequest(parts=[UserPromptPart("go")]),
        ModelResponse(
            parts=[ToolCallPart("read", {}, tool_call_id="ok"), ToolCallPart("read", "x", tool_call_id="no")]
        ),
        ModelRequest(parts=[ToolReturnPart("read", "data", tool_call_id="ok"), retried("read", "no")]),
    ]
    kept = prune_rejected(messages)
    assert [p.tool_call_id for p in kept[1].parts] == ["ok"]  # type: ignore[union-attr]
    assert [type(p).__name__ for p in kept[2].parts] == ["ToolReturnPart"]


def test_only_the_new_part_of_the_history_is_pruned() -> None:
    old = [ModelResponse(parts=[TextPart("x")]), ModelRequest(parts=[feedback("kept")])]
    assert prune_rejected(old, start=2) == old


def test_a_failed_run_collapses_to_its_prompt_and_one_line() -> None:
    history = [ModelRequest(parts=[UserPromptPart("earlier")]), ModelResponse(parts=[TextPart("ok")])]
    run = [
        ModelRequest(parts=[UserPromptPart("What is 2+2?")]),
        ModelResponse(parts=[TextPart("garbage")]),
        ModelRequest(parts=[feedback("again")]),
    ]
    out = collapse_failed_run(history, run, "[failed: HTTP 500]")
    assert out[:2] == history
    assert out[2].parts == [UserPromptPart("What is 2+2?", timestamp=run[0].parts[0].timestamp)]
    assert out[3].parts[0].content == "[failed: HTTP 500]"  # type: ignore[union-attr]
    assert len(out) == 4


def test_a_run_that_never_sent_its_prompt_leaves_the_history_as_it_was() -> None:
    history = [ModelRequest(parts=[UserPromptPart("earlier")])]
    assert collapse_failed_run(history, [], "[failed]") == history


def test_one_oversized_part_is_cut_to_fit_and_says_so() -> None:
    big = "x" * 40_000
    messages = [ModelRequest(parts=[UserPromptPart("q")]), ModelResponse(parts=[TextPart(big)])]
    out, cut = shrink_parts(messages, 4_000)
    assert cut > 30_000
    assert message_chars(out) <= 4_200
    assert "characters cut to fit the context" in out[1].parts[0].content  # type: ignore[union-attr]
    assert estimate_tokens(4_000) == 1_000
