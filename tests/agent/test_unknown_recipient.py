"""A reply naming no one the agent can reach, through pydantic-ai's real OpenAI provider
over loopback, in tool and prompted output modes (prompted is the default on
OpenAI-compatible servers): the model is told which name is wrong and may fix it; a
request it never fixes is reported to the human; a response goes to whoever asked.

Before, prompted mode turned any such reply into prose for the sender: a request to
"@Nobody" reached the human as the Manager's answer, with no notice."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aklab.agent import RoutingSkippedEvent
from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from tests.fakeserver import Behaviour, FakeOpenAI, output
from tests.lab.test_resume_real_provider import RELAY

TOLD = "@Nobody is not a member of the team"  # what the recipient check tells the model


def _told(body: dict[str, Any]) -> bool:
    return TOLD in json.dumps(body)


def _lab(fake_openai: FakeOpenAI, mode: str) -> Lab:
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, output_mode=mode)
    return Lab(team_from_dict(RELAY), model=cfg, store=False)


def _skips(lab: Lab) -> dict[str, str]:
    return {e.event.recipient: e.event.reason for e in lab.orchestrator.get_events(RoutingSkippedEvent)}


@pytest.mark.parametrize("mode", ["tool", "prompted"])
def test_a_request_to_no_one_goes_back_to_the_model_which_fixes_it(fake_openai: FakeOpenAI, mode: str) -> None:
    def respond(body: dict[str, Any]) -> Behaviour:
        if _told(body):
            reply = {"message_type": "response", "recipient": "@Human", "message": "fixed: 42"}
        else:
            reply = {"message_type": "request", "recipient": "@Nobody", "message": "compute the answer"}
        return output({"messages": [reply]})(body)

    fake_openai.default = respond
    with _lab(fake_openai, mode) as lab:
        replies = lab.ask("What is the answer?", timeout=20)
        assert [m.content for m in replies] == ["fixed: 42"]
        assert lab.errors() == [] and _skips(lab) == {}
    assert [_told(b) for b in fake_openai.bodies] == [False, True]


def _ask_a_model_that_never_fixes(fake_openai: FakeOpenAI, mode: str, reply: dict[str, str]) -> Any:
    """Ask once with every answer ``reply``; (replies, skipped routes, request bodies)."""
    fake_openai.default = output({"messages": [reply]})
    with _lab(fake_openai, mode) as lab:
        replies = lab.ask("What is the answer?", timeout=20)
        skips = _skips(lab)
    return replies, skips, fake_openai.bodies


@pytest.mark.parametrize("mode", ["tool", "prompted"])
def test_a_request_to_no_one_that_the_model_never_fixes_is_reported_not_delivered(
    fake_openai: FakeOpenAI, mode: str
) -> None:
    reply = {"message_type": "request", "recipient": "@Nobody", "message": "compute the answer"}
    replies, skips, bodies = _ask_a_model_that_never_fixes(fake_openai, mode, reply)
    assert [m.type for m in replies] == ["notification"]
    assert "@Manager did not reply to @Human" in replies[0].content and TOLD in replies[0].content
    assert "compute the answer" not in replies.text
    assert TOLD in skips["@Nobody"]
    assert [_told(b) for b in bodies] == [False, True, True, True]  # the first answer, 3 retries


@pytest.mark.parametrize("mode", ["tool", "prompted"])
def test_a_response_to_a_misspelled_name_reaches_whoever_asked_once_retries_are_spent(
    fake_openai: FakeOpenAI, mode: str
) -> None:
    reply = {"message_type": "response", "recipient": "@Humna", "message": "42"}
    replies, skips, bodies = _ask_a_model_that_never_fixes(fake_openai, mode, reply)
    assert [(m.type, m.content) for m in replies] == [("response", "42")]
    assert skips["@Humna"] == "@Humna is not a member of the team; delivered to @Human instead"
    assert ["@Humna is not a member of the team" in json.dumps(b) for b in bodies] == [False, True, True, True]


# -- slips whose intent is clear are read as meant, without a retry ------------------------
@pytest.mark.parametrize("mode", ["tool", "prompted"])
@pytest.mark.parametrize("written", ["Human", "@human", " HUMAN "])
def test_the_human_named_without_at_or_in_another_case_is_the_human(
    fake_openai: FakeOpenAI, mode: str, written: str
) -> None:
    """Small models write "Human" (no @) or "@human": before, each cost three retries
    ("'Human' is not a role you may hire") and then a notice instead of the answer."""
    reply = {"message_type": "response", "recipient": written, "message": "42"}
    replies, skips, bodies = _ask_a_model_that_never_fixes(fake_openai, mode, reply)
    assert [(m.type, m.content) for m in replies] == [("response", "42")]
    assert skips == {} and len(bodies) == 1


def _speaker(body: dict[str, Any]) -> str:
    system = next(m["content"] for m in body["messages"] if m["role"] == "system")
    return "Developer" if "You are Developer." in system else "Manager"


@pytest.mark.parametrize("mode", ["tool", "prompted"])
def test_a_teammate_named_in_another_case_gets_the_message(fake_openai: FakeOpenAI, mode: str) -> None:
    def respond(body: dict[str, Any]) -> Behaviour:
        if _speaker(body) == "Developer":
            reply = {"message_type": "response", "recipient": "@manager", "message": "it is 42"}
        elif "it is 42" in json.dumps(body):
            reply = {"message_type": "response", "recipient": "human", "message": "The Developer says 42."}
        else:
            reply = {"message_type": "request", "recipient": "Developer", "message": "compute the answer"}
        return output({"messages": [reply]})(body)

    fake_openai.default = respond
    with _lab(fake_openai, mode) as lab:
        replies = lab.ask("What is the answer?", timeout=20)
        assert [m.content for m in replies] == ["The Developer says 42."]
        assert lab.errors() == [] and _skips(lab) == {}
    assert [_speaker(b) for b in fake_openai.bodies] == ["Manager", "Developer", "Manager"]


def test_a_name_two_members_share_but_for_case_is_not_guessed() -> None:
    from aklab.core._directory import TeamDirectory

    class Address:
        def __init__(self, name: str) -> None:
            self.name, self.agent_id = name, name + "-id"

        def is_alive(self) -> bool:
            return True

    directory = TeamDirectory()
    for name in ("@Dev", "@DEV", "@Manager"):
        directory.add_member(Address(name))  # type: ignore[arg-type]
    assert directory.member_ignoring_case("@manager").name == "@Manager"  # type: ignore[union-attr]
    assert directory.member_ignoring_case("@dev") is None
