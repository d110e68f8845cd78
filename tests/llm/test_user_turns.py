"""One user message per turn on the wire (aklab.llm.user_turns): user texts that pydantic-ai
would send as user messages in a row are joined, on the wire only, and for every model but
the demo. Through pydantic-ai's real OpenAI provider: tests/agent/test_digest_team.py (old
turns folded into a digest) and tests/llm/test_unanswered_real_provider.py."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from typing import Any

from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from aklab.agent.messages import split_leading_state
from aklab.llm.system_state import lift_state
from aklab.llm.user_turns import SEPARATOR, WireShape, join_user_parts
from tests.llm.test_system_state import BLOCK, RECEIVED

DIGEST = "Earlier in this conversation, one shortened line per turn (oldest first):\n- Hi? ⇒ Hello."


def _kinds(messages: list[Any]) -> list[list[str]]:
    return [[p.part_kind for p in m.parts] for m in messages]


def test_a_digest_and_the_message_received_go_out_as_one_user_part_and_the_history_is_untouched() -> None:
    history = [
        ModelRequest(parts=[SystemPromptPart("You are Solo."), UserPromptPart(DIGEST), UserPromptPart(RECEIVED)]),
    ]
    before = copy.deepcopy(history)
    sent = join_user_parts(history)
    assert history == before
    assert _kinds(sent) == [["system-prompt", "user-prompt"]]
    assert sent[0].parts[1].content == f"{DIGEST}{SEPARATOR}{RECEIVED}"


def test_user_texts_where_two_requests_meet_are_joined_into_the_later_request() -> None:
    history = [
        ModelRequest(parts=[SystemPromptPart("You are Solo."), UserPromptPart(DIGEST)]),
        ModelRequest(parts=[UserPromptPart(RECEIVED)]),
        ModelResponse(parts=[TextPart("4")]),
        ModelRequest(parts=[UserPromptPart("only")]),
        ModelRequest(parts=[UserPromptPart("then")]),
    ]
    sent = join_user_parts(history)
    assert _kinds(sent) == [["system-prompt"], ["user-prompt"], ["text"], ["user-prompt"]]
    assert sent[1].parts[0].content == f"{DIGEST}{SEPARATOR}{RECEIVED}"
    assert sent[3].parts[0].content == f"only{SEPARATOR}then"  # the emptied request is gone


def test_tool_returns_media_and_alternating_turns_are_left_as_they_are() -> None:
    call = ToolCallPart("search", {"q": "x"}, tool_call_id="c1")
    history = [
        ModelRequest(parts=[SystemPromptPart("You are Solo."), UserPromptPart(RECEIVED)]),
        ModelResponse(parts=[call]),
        ModelRequest(parts=[ToolReturnPart("search", "found", tool_call_id="c1"), UserPromptPart("next")]),
        ModelResponse(parts=[TextPart("4")]),
        ModelRequest(parts=[UserPromptPart(["an image would go here"]), UserPromptPart("caption")]),
    ]
    assert join_user_parts(history) is history  # nothing to join: the same list, no copy


@dataclasses.dataclass
class _Request:
    """What WireShape reads and replaces of pydantic-ai's request context."""

    messages: list[Any]


def test_the_state_block_is_lifted_before_a_digest_is_joined_in_front_of_it() -> None:
    """In the other order the block would no longer open a user text, and would stay there."""
    history = [
        ModelRequest(
            parts=[SystemPromptPart("You are Solo."), UserPromptPart(DIGEST), UserPromptPart(f"{BLOCK}\n\n{RECEIVED}")]
        ),
    ]
    request = _Request(history)
    shaped = asyncio.run(WireShape(split_leading_state, join=True).prepare_model_request(None, request))  # type: ignore[arg-type]
    assert [p.content for p in shaped.messages[0].parts] == ["You are Solo.", BLOCK, f"{DIGEST}{SEPARATOR}{RECEIVED}"]
    joined_first = join_user_parts(history)  # the other order: the block is found nowhere
    assert lift_state(joined_first, split_leading_state) is joined_first
    assert asyncio.run(WireShape(None, join=False).prepare_model_request(None, request)) is request  # type: ignore[arg-type]
