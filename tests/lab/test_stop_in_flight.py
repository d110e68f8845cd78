"""Stop abandons the HTTP request in flight, on pydantic-ai's real OpenAI provider over loopback."""

from __future__ import annotations

import time

import pytest

from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from tests.fakeserver import FakeOpenAI, echo, hang, text

SOLO = {"name": "solo", "entry": "Solo", "roles": [{"role": "Solo", "prompt": "You are Solo."}]}


@pytest.mark.parametrize("mode", ["prompted", "tool"])
def test_stop_while_the_server_hangs_is_idle_within_half_a_second(fake_openai: FakeOpenAI, mode: str) -> None:
    fake_openai.default = echo
    fake_openai.push(hang())
    cfg = ModelConfig(
        provider="openai-compatible", model="fake", base_url=fake_openai.url, timeout=30, retries=0, output_mode=mode
    )
    lab = Lab(team_from_dict(SOLO), model=cfg)
    try:
        lab.send("What is 2+2?")
        assert fake_openai.wait_hanging(5), "the request never reached the server"
        started = time.monotonic()
        assert lab.stop() == ["@Solo"]
        assert lab.wait(5)
        assert time.monotonic() - started <= 0.5, "stop waited for the hanging request"
        assert [m.content for m in lab.replies()] == ["Run interrupted. (@Solo)"]
        usage = lab.usage(by="request")
        assert list(usage["requests"]) == [1] and not usage["ok"].iloc[0]  # sent, counted, size unknown
        fake_openai.push(text("4"))
        assert [m.content for m in lab.ask("Again: what is 2+2?", timeout=10)] == ["4"]
    finally:
        fake_openai.release()
        lab.close()
