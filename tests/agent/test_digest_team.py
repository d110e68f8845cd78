"""A team member's old turns fold into digest lines on the wire, through pydantic-ai's real
OpenAI provider over loopback: requests stay bounded, tool calls keep their results, and
every earlier question is still named."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from tests.fakeserver import FakeOpenAI, last_user_text, output

SOLO = {"name": "solo", "entry": "Solo", "roles": [{"role": "Solo", "prompt": "You are Solo."}]}


def _answer(body: dict[str, Any]) -> Any:
    question = [line for line in last_user_text(body).splitlines() if line.strip()][-1]
    reply = {"message_type": "response", "recipient": "@Human", "message": f"Answer to {question}"}
    return output({"messages": [reply]})(body)


def _wire_pairs_valid(messages: list[dict[str, Any]]) -> bool:
    """OpenAI's rule: an assistant message's tool calls are answered by the tool messages right after it."""
    for i, message in enumerate(messages):
        calls = {c["id"] for c in message.get("tool_calls") or []}
        answered = set()
        for nxt in messages[i + 1 :]:
            if nxt["role"] != "tool":
                break
            answered.add(nxt["tool_call_id"])
        if calls - answered:
            return False
        if message["role"] == "tool":
            before = messages[i - 1]
            called = {c["id"] for c in before.get("tool_calls") or []}
            if before["role"] != "tool" and message["tool_call_id"] not in called:
                return False
    return True


def _no_two_user_messages_in_a_row(messages: list[dict[str, Any]]) -> bool:
    """Some chat templates (Gemma's, Mistral's) refuse a conversation whose roles do not alternate."""
    roles = [m["role"] for m in messages]
    return all(not (a == b == "user") for a, b in itertools.pairwise(roles))


@pytest.mark.parametrize("mode", ["tool", "prompted"])
def test_old_turns_reach_the_server_as_digest_lines(fake_openai: FakeOpenAI, mode: str) -> None:
    fake_openai.default = _answer
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, output_mode=mode)
    with Lab(team_from_dict(SOLO), model=cfg, store=False) as lab:
        for i in range(14):
            replies = [m.content for m in lab.ask(f"Question {i}: what is {i} + {i}?", timeout=20)]
            assert replies == [f"Answer to Question {i}: what is {i} + {i}?"]
    bodies = fake_openai.bodies
    assert len(bodies) == 14
    last = bodies[-1]["messages"]
    assert last[0]["role"] == "system" and last[0]["content"].startswith("You are Solo.")
    role_prompt = SOLO["roles"][0]["prompt"]  # type: ignore[index]
    # the role's prompt opens every system message; the team's full state rides there too
    # (aklab.llm.system_state), sent again after each fold took the turn that carried it
    assert all(b["messages"][0]["content"].startswith(role_prompt) for b in bodies)
    assert all(b["messages"][0]["content"].count("— current state.") == 1 for b in bodies)
    systems = [b["messages"][0]["content"] for b in bodies]
    assert [systems.index(x) for x in systems] == [0] * 7 + [7] * 6 + [13]  # changed at the folds only
    text = "\n".join(str(m.get("content") or "") for m in last)
    for i in range(14 - 7):  # older than the turns kept whole: one line each, in order
        assert f"- @Human request: Question {i}: what is {i} + {i}? ⇒ @Human response: Answer to Question {i}" in text
    assert sum(m["role"] == "user" for m in last) <= 4 + 2 + 1 + 1  # kept turns, fold step, this one, the digest
    assert all(_wire_pairs_valid(b["messages"]) for b in bodies)
    assert all(_no_two_user_messages_in_a_row(b["messages"]) for b in bodies), [
        [m["role"] for m in b["messages"]] for b in bodies
    ]
    whole = sum(len(str(m.get("content") or "")) for m in bodies[6]["messages"])
    assert sum(len(str(m.get("content") or "")) for m in last) < 2 * whole  # bounded, not growing per turn


def _turns_sent(body: dict[str, Any]) -> int:
    """Whole turns in a request: user messages that carry a received message."""
    return sum(m["role"] == "user" and "You received a request" in str(m["content"]) for m in body["messages"])


def test_a_local_model_keeps_two_whole_turns_unless_told_otherwise(fake_openai: FakeOpenAI) -> None:
    """Small local models copy their last answers: ``local:`` keeps two turns whole (not four)
    before older ones fold into the digest; a ``CompactionConfig.recent_runs`` given wins."""
    from aklab.llm.config import CompactionConfig

    fake_openai.default = _answer
    cfg = ModelConfig.parse("local:smollm2", base_url=fake_openai.url)
    team = team_from_dict(SOLO)
    told = team_from_dict(SOLO)  # the same team, its card's compaction set by hand
    told.cards[0] = told.cards[0].model_copy(
        update={"config": told.cards[0].config.model_copy(update={"compaction_cfg": CompactionConfig(recent_runs=4)})}
    )
    for spec, most in ((team, 2 + 1 + 1), (told, 4 + 2 + 1)):
        fake_openai.bodies.clear()
        with Lab(spec, model=cfg, store=False) as lab:
            for i in range(10):
                assert [m.content for m in lab.ask(f"Question {i}?", timeout=20)] == [f"Answer to Question {i}?"]
        turns = [_turns_sent(b) for b in fake_openai.bodies]
        assert max(turns) == most, str(turns)  # kept whole, half as many again piled up, and this one
