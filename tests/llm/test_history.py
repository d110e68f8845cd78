"""History hygiene: rejected attempts leave, failed runs collapse to their prompt and a note, big
runs are cut to fit."""

from __future__ import annotations

from pydantic_ai.messages import (
    ImageUrl,
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

from aklab.llm.history import (
    collapse_failed_run,
    estimate_tokens,
    join_prompt,
    message_chars,
    prune_rejected,
    shrink_parts,
    unanswered,
)


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


def test_a_failed_run_collapses_to_its_prompt_with_the_note_after_it_and_no_answer() -> None:
    history = [ModelRequest(parts=[UserPromptPart("earlier")]), ModelResponse(parts=[TextPart("ok")])]
    run = [
        ModelRequest(parts=[UserPromptPart("What is 2+2?")]),
        ModelResponse(parts=[TextPart("garbage")]),
        ModelRequest(parts=[feedback("again")]),
    ]
    out = collapse_failed_run(history, run, "(No answer was sent.)")
    assert out[:2] == history
    assert len(out) == 3 and isinstance(out[2], ModelRequest)  # no answer is made up for it
    assert out[2].parts == [
        UserPromptPart("What is 2+2?\n\n(No answer was sent.)", timestamp=run[0].parts[0].timestamp)
    ]
    assert unanswered(out) is out[2] and unanswered(history) is None


def test_a_failed_first_run_keeps_its_system_prompt_in_front() -> None:
    run = [ModelRequest(parts=[SystemPromptPart("sys"), UserPromptPart("hi")])]
    [request] = collapse_failed_run([], run, "(note)")
    assert [(p.part_kind, p.content) for p in request.parts] == [
        ("system-prompt", "sys"),
        ("user-prompt", "hi\n\n(note)"),
    ]


def test_a_run_that_never_sent_its_prompt_leaves_the_history_as_it_was() -> None:
    history = [ModelRequest(parts=[UserPromptPart("earlier")])]
    assert collapse_failed_run(history, [], "(note)") == history


def test_a_prompt_joins_the_last_user_text_of_a_request_leaving_what_is_in_front() -> None:
    digest = UserPromptPart("Earlier in this conversation, ...")
    request = ModelRequest(parts=[SystemPromptPart("sys"), digest, UserPromptPart("first\n\n(note)")])
    joined = join_prompt(request, "second")
    assert joined.parts[:2] == [SystemPromptPart("sys", timestamp=joined.parts[0].timestamp), digest]
    assert joined.parts[2].content == "first\n\n(note)\n\nsecond"  # type: ignore[union-attr]
    assert request.parts[2].content == "first\n\n(note)"  # type: ignore[union-attr]  # the request given is not changed


def test_a_prompt_with_media_joins_as_one_list_of_contents() -> None:
    image = ImageUrl("https://example.invalid/cat.png")
    request = ModelRequest(parts=[UserPromptPart(["look", image])])
    assert join_prompt(request, "and now?").parts[0].content == ["look", image, "\n\n", "and now?"]  # type: ignore[union-attr]
    request = ModelRequest(parts=[UserPromptPart("first")])
    assert join_prompt(request, ["see", image]).parts[0].content == ["first", "\n\n", "see", image]  # type: ignore[union-attr]


def test_only_a_request_with_a_prompt_at_the_end_is_unanswered() -> None:
    assert unanswered([]) is None
    assert unanswered([ModelRequest(parts=[UserPromptPart("q")]), ModelResponse(parts=[TextPart("a")])]) is None
    tool_return = [ModelResponse(parts=[ToolCallPart("t", {})]), ModelRequest(parts=[ToolReturnPart("t", 1)])]
    assert unanswered(tool_return) is None
    asked = ModelRequest(parts=[UserPromptPart("q")])
    assert unanswered([ModelResponse(parts=[TextPart("a")]), asked]) is asked


def test_one_oversized_part_is_cut_to_fit_and_says_so() -> None:
    big = "x" * 40_000
    messages = [ModelRequest(parts=[UserPromptPart("q")]), ModelResponse(parts=[TextPart(big)])]
    out, cut = shrink_parts(messages, 4_000)
    assert cut > 30_000
    assert message_chars(out) <= 4_200
    assert "characters cut to fit the context" in out[1].parts[0].content  # type: ignore[union-attr]
    assert estimate_tokens(4_000) == 1_000
