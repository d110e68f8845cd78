"""The planning and workspace tools called by a real model: pydantic-ai's OpenAI provider over
loopback, the fake server answering with tool calls. The calls run, their results go back to
the model on the wire, and the board they changed reaches the next question as a context
update (a delta naming only the planning section)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from tests.fakeserver import FakeOpenAI, last_user_text, output, tool_call, tool_names


def _answer(text: str) -> Any:
    return output({"messages": [{"message_type": "response", "recipient": "@Human", "message": text}]})


def _tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def _lab(fake: FakeOpenAI, workspace: Path, mode: str) -> Lab:
    tools = ["PlanningTool", {"type": "WorkspaceTool", "root": str(workspace)}]
    role = {"role": "Solo", "prompt": "You are Solo.", "tools": tools}
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake.url, retries=0, output_mode=mode)
    return Lab(team_from_dict({"name": "solo", "entry": "Solo", "roles": [role]}), model=cfg, store=False)


@pytest.mark.parametrize("mode", ["tool", "prompted"])
def test_a_real_models_tool_calls_plan_and_write_and_the_board_reaches_the_next_request(
    fake_openai: FakeOpenAI, tmp_path: Path, mode: str
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    fake_openai.push(
        tool_call("planning_create", {"title": "Write the notes", "owner": "@Solo"}),
        tool_call("workspace_write", {"path": "notes/plan.md", "content": "# Plan\n"}),
        _answer("planned and written"),
        tool_call("workspace_read", {"path": "notes/plan.md"}),
        _answer("read it"),
    )
    with _lab(fake_openai, workspace, mode) as lab:
        assert [m.content for m in lab.ask("Plan the notes and write them.", timeout=20)] == ["planned and written"]
        assert (workspace / "notes" / "plan.md").read_text() == "# Plan\n"
        assert [m.content for m in lab.ask("Read the notes back.", timeout=20)] == ["read it"]
        assert lab.errors() == []

    first, after_create, after_write, second, after_read = fake_openai.bodies
    assert {"planning_create", "workspace_write", "workspace_read"} <= set(tool_names(first))
    assert _tool_results(after_create) == ["created T1 [todo] @Solo: Write the notes"]
    assert _tool_results(after_write)[-1] == "wrote 7 characters to notes/plan.md"
    assert _tool_results(after_read)[-1] == "# Plan\n"
    # The next question opens with a delta carrying the board the tool changed, and only it.
    asked = last_user_text(second)
    assert asked.startswith("**Context update 2** — state has changed since the last update.")
    assert "- T1 [todo] @Solo: Write the notes" in asked and asked.endswith("Read the notes back.")
    assert asked.count("## ") == 1, "only the changed section is sent again"
    assert "Write the notes" not in json.dumps(first)  # the first request's full snapshot had no tasks
