"""Slash commands on a real provider: pydantic-ai's OpenAI model over loopback. A command is
obeyed without a request to the model, and what it changed reaches the model's next request
on the wire: the member /hire_member hired is in the roster, the operator's action is noted,
and after /clear the conversation starts afresh with a full context snapshot. The member
/fire_member fired is gone from the next request's roster; bad input gets one line back and
the team goes on."""

from __future__ import annotations

import json

from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from tests.fakeserver import FakeOpenAI, echo, last_user_text
from tests.lab.test_resume_real_provider import RELAY

SHOP = {
    "name": "shop",
    "entry": "Manager",
    "roles": [
        {"role": "Manager", "prompt": "You are Manager.", "routes_to": ["Developer", "Tester"]},
        {"role": "Developer", "description": "Writes the code.", "prompt": "You are Developer."},
        {"role": "Tester", "prompt": "You are Tester."},
    ],
}


def _said(lab: Lab, command: str) -> list[tuple[str, str]]:
    return [(m.type, m.content) for m in lab.ask(command, timeout=20)]


def test_commands_are_obeyed_without_the_model_and_their_effects_reach_its_next_request(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.default = echo
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, retries=0)
    with Lab(team_from_dict(RELAY), model=cfg, store=False) as lab:
        assert _said(lab, "/hire_member Developer") == [("notification", "@Developer (Developer)")]
        roster = "- @Developer (Developer)\n- @Human (Human)\n- @Manager (Manager)"
        assert _said(lab, "/team_members") == [("notification", roster)]
        [(kind, help_text)] = _said(lab, "/help")
        assert kind == "notification" and "/hire_member" in help_text and "/clear" in help_text
        assert fake_openai.bodies == [], "a command reached the model"

        assert _said(lab, "What is 2+2?") == [("response", "OK: What is 2+2?")]
        [first] = fake_openai.bodies
        assert "@Developer (Developer)" in json.dumps(first["messages"])  # the roster the model sees
        assert "Operator action by @Human: /hire_member Developer" in last_user_text(first)

        assert _said(lab, "/clear") == [("notification", "Context cleared.")]
        assert len(fake_openai.bodies) == 1
        assert _said(lab, "And 3+3?") == [("response", "OK: And 3+3?")]
        after = fake_openai.bodies[-1]
        assert "2+2" not in json.dumps(after["messages"]), "the cleared conversation was sent again"
        assert [m["role"] for m in after["messages"]] == ["system", "user"]
        assert "**Context update 1**" in json.dumps(after["messages"])  # a full snapshot again
        assert lab.errors() == []


def test_a_fired_member_leaves_the_roster_the_model_sees_next_and_bad_names_get_one_line(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.default = echo
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, retries=0)
    with Lab(team_from_dict(SHOP), model=cfg, store=False) as lab:
        roles = "- Developer: Writes the code.\n- Tester: (no description)"  # as the model's context shows them
        assert _said(lab, "/team_roles") == [("notification", roles)]
        assert _said(lab, "/hire_member Developer") == [("notification", "@Developer (Developer)")]
        assert _said(lab, "Who is here?") == [("response", "OK: Who is here?")]
        [hired] = fake_openai.bodies
        assert "- @Developer (Developer)" in last_user_text(hired)  # the context snapshot rides on the question
        assert f"## Roles you can hire\n{roles}" in last_user_text(hired)

        assert _said(lab, "/fire_member Developer") == [("notification", "@Developer fired")]
        assert sorted(a.name for a in lab.team()) == ["@Human", "@Manager"]
        assert _said(lab, "/team_members") == [("notification", "- @Human (Human)\n- @Manager (Manager)")]
        nobody = "Error in /fire_member: @Nobody is not a member of the team (members: @Human, @Manager)"
        assert _said(lab, "/fire_member @Nobody") == [("notification", nobody)]
        assert _said(lab, "/fire_member Human") == [
            ("notification", "Error in /fire_member: @Human is a person and cannot be fired")
        ]
        assert len(fake_openai.bodies) == 1, "a command reached the model"

        assert _said(lab, "Who is here now?") == [("response", "OK: Who is here now?")]
        asked = last_user_text(fake_openai.bodies[-1])
        assert "## Team\n- @Human (Human)\n- @Manager (Manager)\n" in asked  # the changed roster, without @Developer
        assert "Operator action by @Human: /fire_member Developer\nResult: @Developer fired" in asked
        assert lab.errors() == []
