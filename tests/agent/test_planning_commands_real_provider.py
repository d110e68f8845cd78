"""The planning commands on a real provider: pydantic-ai's OpenAI model over loopback. A
scripted model fills the board through the planning tool on the wire; the human's
/planning_summary, /get_planning_task and /search_planning then read that board without a
request to the model, a missing id gets one line back, and the next question still works."""

from __future__ import annotations

import json
from typing import Any

from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from tests.fakeserver import FakeOpenAI, echo, last_user_text, output, tool_call

SOLO = {
    "name": "solo",
    "entry": "Solo",
    "roles": [{"role": "Solo", "prompt": "You are Solo.", "tools": ["PlanningTool"]}],
}


def _answer(text: str) -> Any:
    return output({"messages": [{"message_type": "response", "recipient": "@Human", "message": text}]})


def _said(lab: Lab, command: str) -> list[tuple[str, str]]:
    return [(m.type, m.content) for m in lab.ask(command, timeout=20)]


def test_planning_commands_read_the_board_a_real_model_filled_and_a_missing_id_gets_one_line(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.push(
        tool_call("planning_create", {"title": "Write the notes", "owner": "@Solo"}),
        tool_call("planning_create", {"title": "Review the draft", "description": "check the maths"}),
        _answer("planned"),
    )
    fake_openai.default = echo
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, retries=0)
    with Lab(team_from_dict(SOLO), model=cfg, store=False) as lab:
        assert _said(lab, "Plan the notes.") == [("response", "planned")]
        assert len(fake_openai.bodies) == 3  # two tool calls and the answer, all over the wire
        assert "created T2 [todo] Review the draft" in json.dumps(fake_openai.bodies[-1]["messages"])

        board = "- T1 [todo] @Solo: Write the notes\n- T2 [todo] Review the draft"
        assert _said(lab, "/planning_summary") == [("notification", board)]
        review = (
            "T2: Review the draft\nstatus: todo\nowner: (unassigned)\ncreated by: @Solo\ndescription: check the maths"
        )
        assert _said(lab, "/get_planning_task T2") == [("notification", review)]
        assert _said(lab, "/search_planning MATHS") == [("notification", "- T2 [todo] Review the draft")]
        assert _said(lab, "/search_planning nothing") == [("notification", "(no tasks match 'nothing')")]
        missing = "Error in /get_planning_task: unknown task id 'T9'; valid ids: T1, T2"
        assert _said(lab, "/get_planning_task T9") == [("notification", missing)]
        assert len(fake_openai.bodies) == 3, "a command reached the model"

        assert _said(lab, "What next?") == [("response", "OK: What next?")]
        asked = last_user_text(fake_openai.bodies[-1])
        assert f"## Planning\n{board}\n" in asked  # the board the tool changed, as a context update
        assert f"Operator action by @Human: /get_planning_task T2\nResult: {review}" in asked
        assert lab.errors() == []
