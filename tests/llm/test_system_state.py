"""The leading team-state block goes out in the system message for open models, on the wire
only (aklab.llm.system_state); the agent says what the block is (split_leading_state)."""

from __future__ import annotations

import copy

from pydantic_ai.messages import ModelRequest, ModelResponse, SystemPromptPart, TextPart, UserPromptPart

from aklab.agent.messages import split_leading_state
from aklab.llm.system_state import lift_state

BLOCK = (
    "**Context update 1** — current state.\n\n## Team\n- @Human (Human)\n- @Solo (Solo)"
    "\n\n## Roles you can hire\n(none)"
)
RECEIVED = "You received a request from @Human. A reply is expected: send @Human a response with the result.\n\nHi?"


def test_the_split_takes_a_full_block_followed_by_a_received_message_only() -> None:
    assert split_leading_state(f"{BLOCK}\n\n{RECEIVED}") == (BLOCK, RECEIVED)
    assert split_leading_state(RECEIVED) is None  # no block
    delta = BLOCK.replace("current state.", "state has changed since the last update.")
    assert split_leading_state(f"{delta}\n\n{RECEIVED}") is None  # a change, not the state
    assert split_leading_state(f"note: the board changed\n\n{BLOCK}\n\n{RECEIVED}") is None  # not leading
    assert split_leading_state(BLOCK) is None  # nothing received after it


def test_the_block_moves_into_a_system_part_and_the_history_given_is_untouched() -> None:
    history = [
        ModelRequest(parts=[SystemPromptPart("You are Solo."), UserPromptPart(f"{BLOCK}\n\n{RECEIVED}")]),
        ModelResponse(parts=[TextPart("4")]),
        ModelRequest(parts=[UserPromptPart("You received a request from @Human. ...\n\nAnd 3+3?")]),
    ]
    before = copy.deepcopy(history)
    sent = lift_state(history, split_leading_state)
    assert history == before  # what the agent keeps (resume, digests, markers) is as it was
    assert [type(p).__name__ for p in sent[0].parts] == ["SystemPromptPart", "SystemPromptPart", "UserPromptPart"]
    assert [p.content for p in sent[0].parts] == ["You are Solo.", BLOCK, RECEIVED]
    assert sent[1:] == history[1:]


def test_after_a_digest_the_latest_full_block_is_the_one_lifted() -> None:
    """Old turns folded: the opening block went with them, and the team sent the whole state
    again at the head of a later turn; deltas after it stay where they are."""
    again = BLOCK.replace("Context update 1", "Context update 2")
    delta = "**Context update 3** — state has changed since the last update.\n\n## Team\n- @Human (Human)"
    history = [
        ModelRequest(parts=[SystemPromptPart("You are Solo."), UserPromptPart("Earlier in this conversation…")]),
        ModelRequest(parts=[UserPromptPart(f"{again}\n\n{RECEIVED}")]),
        ModelResponse(parts=[TextPart("4")]),
        ModelRequest(parts=[UserPromptPart(f"{delta}\n\n{RECEIVED}")]),
    ]
    before = copy.deepcopy(history)
    sent = lift_state(history, split_leading_state)
    assert history == before
    assert [p.content for p in sent[0].parts] == ["You are Solo.", again, "Earlier in this conversation…"]
    assert [p.content for p in sent[1].parts] == [RECEIVED]
    assert sent[2:] == history[2:]  # the delta stays in its turn


def test_a_history_without_a_full_block_at_the_head_of_a_prompt_is_sent_as_it_is() -> None:
    digest = [ModelRequest(parts=[SystemPromptPart("You are Solo."), UserPromptPart("Earlier in this conversation…")])]
    assert lift_state(digest, split_leading_state) is digest
    media = [ModelRequest(parts=[UserPromptPart([f"{BLOCK}\n\n{RECEIVED}"])])]  # not one string: left alone
    assert lift_state(media, split_leading_state) is media
    assert lift_state([], split_leading_state) == []
