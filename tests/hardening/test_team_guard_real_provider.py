"""The team guard on a real provider: pydantic-ai's OpenAI model over loopback, in prompted
mode (the local default), with the token counts the server reports. A ping-pong between two
members is stopped and the human told; the token budget counts the server's tokens."""

from __future__ import annotations

from typing import Any

import pytest

from aklab.agent import Notice
from aklab.core import TeamGuard
from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from tests.fakeserver import Behaviour, FakeOpenAI, Usage, last_user_text, output

PAIR = {
    "name": "pair",
    "entry": "A",
    "roles": [
        {"role": "A", "prompt": "You are A.", "routes_to": ["B"]},
        {"role": "B", "prompt": "You are B.", "routes_to": ["A"]},
    ],
}
NO_LOOP_CHECKS = {"max_exchanges": None, "max_repeats": None}


def _pass_it_on(body: dict[str, Any]) -> Behaviour:
    """ "hello" is answered at once; anything else goes to the other member, for ever."""
    me = "A" if str(body["messages"][0].get("content") or "").startswith("You are A") else "B"
    text = last_user_text(body)
    if text.endswith("hello"):
        reply = {"message_type": "response", "recipient": "@Human", "message": "hi there"}
    else:
        other = "@B" if me == "A" else "@A"
        step = len(body["messages"])
        reply = {"message_type": "request", "recipient": other, "message": f"{me} step {step}: please go on"}
    return output({"messages": [reply]}, usage=Usage(prompt_tokens=60, completion_tokens=20))(body)


def _pair(fake: FakeOpenAI, guard: TeamGuard | None = None) -> Lab:
    fake.default = _pass_it_on
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake.url, retries=0)
    return Lab(team_from_dict(PAIR), model=cfg, guard=guard, store=False)


def _notices(result: Any) -> str:
    return " ".join(m.content for m in result.notices if isinstance(m, Notice))


def test_a_ping_pong_on_a_real_provider_is_stopped_and_the_human_told(fake_openai: FakeOpenAI) -> None:
    with _pair(fake_openai) as lab:
        stopped = lab.ask("start", timeout=30)
        said = _notices(stopped)
        assert "TeamGuard.max_exchanges" in said and "@A and @B" in said
        assert len(fake_openai.bodies) <= 18  # 16 exchanges, then the guard
        assert [m.content for m in lab.ask("hello", timeout=20).answers] == ["hi there"]


@pytest.mark.parametrize("budget", [300, 500])
def test_the_token_budget_of_an_ask_counts_the_tokens_the_server_reports(fake_openai: FakeOpenAI, budget: int) -> None:
    with _pair(fake_openai, TeamGuard(max_tokens=budget, **NO_LOOP_CHECKS)) as lab:
        stopped = lab.ask("start", timeout=30)
        assert "TeamGuard.max_tokens" in _notices(stopped)
        spent = int(lab.usage()["total_tokens"].sum())
        assert spent == 80 * len(fake_openai.bodies)  # the server's counts, 60 + 20 per request
        assert budget <= spent < budget + 80 * 3  # stopped within a turn or two of the budget
        assert [m.content for m in lab.ask("hello", timeout=20).answers] == ["hi there"]
