"""Resume through pydantic-ai's real OpenAI provider over loopback: the histories stored with
each handling's end (responses with their usage, finish reasons, provider ids, digest folds)
come back exactly, and the resumed agent's next request carries them to the server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter

from aklab.agent import BaseAgent
from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from aklab.store import SqliteStore
from tests.fakeserver import FakeOpenAI, last_user_text, output

SOLO = {"name": "solo", "entry": "Solo", "roles": [{"role": "Solo", "prompt": "You are Solo."}]}
ASKED = 9  # enough turns for the oldest to fold into a digest


def _answer(body: dict[str, Any]) -> Any:
    question = [line for line in last_user_text(body).splitlines() if line.strip()][-1]
    reply = {"message_type": "response", "recipient": "@Human", "message": f"Answer to {question}"}
    return output({"messages": [reply]})(body)


def _history(lab: Lab) -> list[Any]:
    agent = lab.system.proxy_ask(lab.member("@Solo"), BaseAgent)
    return ModelMessagesTypeAdapter.dump_python(agent.history(), mode="json")


@pytest.mark.parametrize("mode", ["tool", "prompted"])
def test_a_team_on_a_real_provider_resumes_with_its_histories_whole(
    fake_openai: FakeOpenAI, tmp_path: Path, mode: str
) -> None:
    fake_openai.default = _answer
    path = tmp_path / "events.sqlite3"
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, output_mode=mode)
    with Lab(team_from_dict(SOLO), model=cfg, store=path) as lab:
        for i in range(ASKED):
            assert [m.content for m in lab.ask(f"Question {i}?", timeout=20)] == [f"Answer to Question {i}?"]
        before = _history(lab)
    assert any(m["kind"] == "response" and m.get("provider_name") for m in before)  # the real provider's responses
    with SqliteStore(path) as store:
        ends = [r.message() for r in store.records(kinds=["DispatchedMessage"])]
    assert any(getattr(e.snapshot, "refs", None) for e in ends)  # a fold was stored as references
    sent_before = len(fake_openai.bodies)

    with Lab.resume(store=path, spec=team_from_dict(SOLO), model=cfg) as again:
        assert _history(again) == before
        assert [m.content for m in again.ask("Question 9?", timeout=20)] == ["Answer to Question 9?"]
    (body,) = fake_openai.bodies[sent_before:]
    wire = "\n".join(str(m.get("content") or "") for m in body["messages"])
    assert "Question 0?" in wire and "Question 8?" in wire and "Question 9?" in wire
