"""A model that writes "@Developer" for a Developer not hired yet gets one hired, through
pydantic-ai's real OpenAI provider over loopback, in tool and prompted output modes.
Before, prompted mode turned that request into prose delivered to the sender: the human
received "compute the answer" as the Manager's answer."""

from __future__ import annotations

from typing import Any

import pytest

from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from tests.fakeserver import Behaviour, FakeOpenAI, last_user_text, output, tool_call, tool_names
from tests.lab.test_resume_real_provider import RELAY


def _respond(body: dict[str, Any]) -> Behaviour:
    system, text = str(body["messages"][0].get("content") or ""), last_user_text(body)
    if system.startswith("You are Developer"):
        reply = {"message_type": "response", "recipient": "@Manager", "message": "42"}
    elif "from @Developer" in text:
        reply = {"message_type": "response", "recipient": "@Human", "message": "relayed: 42"}
    else:  # the Developer is not hired yet, and the model names it as a member all the same
        reply = {"message_type": "request", "recipient": "@Developer", "message": "compute the answer"}
    return output({"messages": [reply]})(body)


@pytest.mark.parametrize("mode", ["tool", "prompted"])
def test_an_at_role_naming_no_member_hires_that_role(fake_openai: FakeOpenAI, mode: str) -> None:
    fake_openai.default = _respond
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, output_mode=mode)
    with Lab(team_from_dict(RELAY), model=cfg, store=False) as lab:
        replies = lab.ask("What is the answer?", timeout=20)
        assert [m.content for m in replies] == ["relayed: 42"]
        assert [a.name for a in lab.team()] == ["@Human", "@Manager", "@Developer"]
        assert lab.errors() == []
    systems = [str(b["messages"][0].get("content") or "")[:18] for b in fake_openai.bodies]
    assert systems == ["You are Manager.\n\n", "You are Developer.", "You are Manager.\n\n"]


@pytest.mark.parametrize("mode", ["tool", "prompted"])
def test_a_real_model_hires_with_the_hire_members_tool_then_delegates(fake_openai: FakeOpenAI, mode: str) -> None:
    """The hiring tool is offered while a role can be hired; the model's call of it hires the
    member, the tool's result goes back on the wire, and the model then names the new member."""
    fake_openai.push(tool_call("hire_members", {"roles": ["Developer"]}))
    fake_openai.default = _respond
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, output_mode=mode)
    with Lab(team_from_dict(RELAY), model=cfg, store=False) as lab:
        assert [m.content for m in lab.ask("What is the answer?", timeout=20)] == ["relayed: 42"]
        assert [a.name for a in lab.team()] == ["@Human", "@Manager", "@Developer"]
        assert lab.errors() == []
    first, after_hire = fake_openai.bodies[:2]
    assert "hire_members" in tool_names(first)
    assert [m["content"] for m in after_hire["messages"] if m["role"] == "tool"] == ["Developer: hired @Developer"]
    assert len(fake_openai.bodies) == 4  # hire, delegate, the Developer's answer, the relay
