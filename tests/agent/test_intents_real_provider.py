"""The five intents routed between agents on a real provider: pydantic-ai's OpenAI model over
loopback, in tool and prompted output modes. Each message a model chooses reaches its
recipient's next request framed with its intent's own line (REPLY_PROTOCOLS), so the model on
the other end reads what arrived and whether a reply is expected."""

from __future__ import annotations

from typing import Any

import pytest

from aklab.agent import REPLY_PROTOCOLS
from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from tests.fakeserver import Behaviour, FakeOpenAI, last_user_text, output

TEAM = {
    "name": "build",
    "entry": "Manager",
    "roles": [
        {"role": "Manager", "prompt": "You are Manager.", "routes_to": ["Developer", "QA"]},
        {"role": "Developer", "prompt": "You are Developer."},
        {"role": "QA", "prompt": "You are QA."},
    ],
}


def _msg(intent: str, to: str, text: str) -> dict[str, str]:
    return {"message_type": intent, "recipient": to, "message": text}


def _who(body: dict[str, Any]) -> str:
    return str(body["messages"][0].get("content") or "").split(".")[0].removeprefix("You are ")


def _respond(body: dict[str, Any]) -> Behaviour:
    who, text = _who(body), last_user_text(body)
    if who == "Developer":
        messages = [_msg("acknowledgment", "@Manager", "parser written")]
    elif who == "QA":
        messages = []  # a notification needs no reply
    elif "from @Developer" in text:
        messages = [_msg("response", "@Human", "The parser is written.")]
    else:
        messages = [
            _msg("instruction", "@Developer", "Write the parser; acknowledge when done."),
            _msg("notification", "@QA", "A parser is coming for you to test."),
        ]
    return output({"messages": messages})(body)


def _framing(intent: str, sender: str) -> str:
    article = "an" if intent[0] in "aeiou" else "a"
    return f"You received {article} {intent} from {sender}. {REPLY_PROTOCOLS[intent].format(sender=sender)}"


@pytest.mark.parametrize("mode", ["tool", "prompted"])
def test_each_intent_reaches_its_recipients_model_framed_as_that_intent(fake_openai: FakeOpenAI, mode: str) -> None:
    fake_openai.default = _respond
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, output_mode=mode)
    with Lab(team_from_dict(TEAM), model=cfg, store=False) as lab:
        replies = lab.ask("Get a parser written and tested.", timeout=20)
        assert [(m.type, m.content) for m in replies] == [("response", "The parser is written.")]
        sent = [(m.sender.name, m.recipient.name, m.type) for m in lab.transcript() if m.sender and m.recipient]
        assert lab.errors() == []
    assert sorted(sent) == sorted(
        [
            ("@Human", "@Manager", "request"),
            ("@Manager", "@Developer", "instruction"),
            ("@Manager", "@QA", "notification"),
            ("@Developer", "@Manager", "acknowledgment"),
            ("@Manager", "@Human", "response"),
        ]
    )
    received = {(_who(b), last_user_text(b).split("\n\n")[-2]) for b in fake_openai.bodies}
    assert received == {
        ("Manager", _framing("request", "@Human")),
        ("Developer", _framing("instruction", "@Manager")),
        ("QA", _framing("notification", "@Manager")),
        ("Manager", _framing("acknowledgment", "@Developer")),
    }
    assert len(fake_openai.bodies) == 4  # the response to the human is the last word: no one ran again
