"""A model that writes a ``/command`` to a teammate, on a real provider: pydantic-ai's OpenAI
model over loopback, in tool and prompted output modes. By default only a human may command
an agent, so the Manager's model writing "/fire_member @QA" or "/stop" to the Developer fires
and stops no one: the Developer's model reads it as text. With ``commands_from_agents`` on the
Developer's config the same message is obeyed without the Developer's model, and the result
goes back to the Manager as a notification; a /stop reaching the Developer mid-run ends it, and
the Manager is told so."""

from __future__ import annotations

from typing import Any

import pytest

from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.lab.teams import TeamSpec
from aklab.llm import ModelConfig
from aklab.llm.config import OutputModeSetting
from aklab.tools.mailbox import NO_RUN_TO_CANCEL, run_cancelled
from tests.fakeserver import Behaviour, FakeOpenAI, hang, last_user_text, output

TEAM = {
    "name": "build",
    "entry": "Manager",
    "start": ["Manager", "QA"],
    "roles": [
        {"role": "Manager", "prompt": "You are Manager.", "routes_to": ["Developer", "QA"]},
        {"role": "Developer", "prompt": "You are Developer."},
        {"role": "QA", "prompt": "You are QA."},
    ],
}
MODES: list[OutputModeSetting] = ["tool", "prompted"]
COMMANDS = ["/fire_member @QA", "/stop"]


def _team(*, commands_from_agents: bool) -> TeamSpec:
    """A team file cannot set ``commands_from_agents``: it goes on the Developer's card here."""
    team = team_from_dict(TEAM)
    i, card = next((i, c) for i, c in enumerate(team.cards) if c.config.role == "Developer")
    config = card.config.model_copy(update={"commands_from_agents": commands_from_agents})
    team.cards[i] = card.model_copy(update={"config": config})
    return team


def _lab(fake_openai: FakeOpenAI, mode: OutputModeSetting, *, commands_from_agents: bool) -> Lab:
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, output_mode=mode)
    return Lab(_team(commands_from_agents=commands_from_agents), model=cfg, store=False)


def _msg(intent: str, to: str, text: str) -> dict[str, str]:
    return {"message_type": intent, "recipient": to, "message": text}


def _who(body: dict[str, Any]) -> str:
    return str(body["messages"][0].get("content") or "").split(".")[0].removeprefix("You are ")


def _said(body: dict[str, Any]) -> str:
    """The message itself: the last paragraph of the request, after its framing."""
    return last_user_text(body).split("\n\n")[-1]


def _team_of(lab: Lab) -> list[str]:
    return sorted(a.name for a in lab.team())


def _manager_sends(*first_turn: dict[str, str]) -> Any:
    """Manager's model: ``first_turn`` for the human's request; whatever @Developer sends back
    goes to the human as "Developer said: ...". Developer's model: "I read: <the message>"."""

    def respond(body: dict[str, Any]) -> Behaviour:
        if _who(body) == "Developer":
            messages = [_msg("response", "@Manager", f"I read: {_said(body)}")]
        elif "from @Developer" in last_user_text(body):
            messages = [_msg("response", "@Human", f"Developer said: {_said(body)}")]
        else:
            messages = list(first_turn)
        return output({"messages": messages})(body)

    return respond


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("mode", MODES)
def test_a_command_a_model_writes_to_a_teammate_is_only_text_by_default(
    fake_openai: FakeOpenAI, mode: OutputModeSetting, command: str
) -> None:
    fake_openai.default = _manager_sends(_msg("request", "@Developer", command))
    with _lab(fake_openai, mode, commands_from_agents=False) as lab:
        replies = lab.ask("Deal with QA.", timeout=20)
        assert [(m.type, m.content) for m in replies] == [("response", f"Developer said: I read: {command}")]
        assert _team_of(lab) == ["@Developer", "@Human", "@Manager", "@QA"]  # no one fired
        assert lab.errors() == []
    [developer] = [b for b in fake_openai.bodies if _who(b) == "Developer"]
    assert last_user_text(developer).startswith("You received a request from @Manager.")
    assert _said(developer) == command  # the model got the command as the message's text
    assert [_who(b) for b in fake_openai.bodies] == ["Manager", "Developer", "Manager"]


@pytest.mark.parametrize("mode", MODES)
def test_with_commands_from_agents_a_fire_member_from_a_model_is_obeyed_and_its_result_notified(
    fake_openai: FakeOpenAI, mode: OutputModeSetting
) -> None:
    fake_openai.default = _manager_sends(_msg("request", "@Developer", "/fire_member @QA"))
    with _lab(fake_openai, mode, commands_from_agents=True) as lab:
        replies = lab.ask("Deal with QA.", timeout=20)
        assert [(m.type, m.content) for m in replies] == [("response", "Developer said: @QA fired")]
        assert _team_of(lab) == ["@Developer", "@Human", "@Manager"]
        sent = [
            (m.sender.name, m.recipient.name, m.type, m.content) for m in lab.transcript() if m.sender and m.recipient
        ]
        assert ("@Developer", "@Manager", "notification", "@QA fired") in sent
        assert lab.errors() == []
    assert [_who(b) for b in fake_openai.bodies] == ["Manager", "Manager"]  # none for the Developer's model
    notified = last_user_text(fake_openai.bodies[-1])
    assert "You received a notification from @Developer." in notified and _said(fake_openai.bodies[-1]) == "@QA fired"
    assert "## Team\n- @Developer (Developer)\n- @Human (Human)\n- @Manager (Manager)\n\n" in notified  # QA gone


@pytest.mark.parametrize("mode", MODES)
def test_with_commands_from_agents_a_stop_from_a_model_to_an_idle_teammate_says_there_is_no_run(
    fake_openai: FakeOpenAI, mode: OutputModeSetting
) -> None:
    fake_openai.default = _manager_sends(_msg("request", "@Developer", "/stop"))
    with _lab(fake_openai, mode, commands_from_agents=True) as lab:
        replies = lab.ask("Deal with QA.", timeout=20)
        assert [(m.type, m.content) for m in replies] == [("response", f"Developer said: {NO_RUN_TO_CANCEL}")]
        assert _team_of(lab) == ["@Developer", "@Human", "@Manager", "@QA"]
        assert lab.errors() == []
    assert [_who(b) for b in fake_openai.bodies] == ["Manager", "Manager"]
    assert "You received a notification from @Developer." in last_user_text(fake_openai.bodies[-1])


@pytest.mark.parametrize("mode", MODES)
def test_with_commands_from_agents_a_stop_from_a_model_ends_the_teammates_run(
    fake_openai: FakeOpenAI, mode: OutputModeSetting
) -> None:
    respond = _manager_sends(_msg("request", "@Developer", "Write the parser."), _msg("request", "@Developer", "/stop"))
    # The Developer's run on "Write the parser." never ends by itself: only the /stop ends it.
    fake_openai.default = lambda body: hang() if _said(body) == "Write the parser." else respond(body)
    with _lab(fake_openai, mode, commands_from_agents=True) as lab:
        replies = lab.ask("Get a parser written, then stop.", timeout=20)
        assert [(m.type, m.content) for m in replies] == [
            ("notification", "Run interrupted. (@Developer)"),  # the human, told as ever
            ("response", f"Developer said: {run_cancelled('@Developer')}"),  # the Manager, told too
        ]
        assert lab.errors() == []
    assert all(_said(b) != "/stop" for b in fake_openai.bodies), "the /stop reached a model"
    assert _said(fake_openai.bodies[-1]) == "@Developer's run was cancelled."
