"""The event store on a real model: a team on SmolLM2 (llama-cpp-python on 127.0.0.1, the
``local`` extra) is closed as a kernel restart would, resumed from its store with the entry
agent's model history whole, and asked again; ``aklab.history`` then reads both sessions'
asks with the tokens the server counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter

from aklab.agent import BaseAgent
from aklab.lab.session import Lab
from aklab.llm.local_server import LocalServer
from aklab.store import SqliteStore, history
from tests.local.conftest import skip_without_local_runtime

skip_without_local_runtime()

pytestmark = pytest.mark.local

ASK_TIMEOUT_S = 90.0
FIRST = "What is the capital of France?"
SECOND = "And what is the capital of Italy?"


def _entry_history(lab: Lab) -> list[Any]:
    agent = lab.system.proxy_ask(lab.entry, BaseAgent)
    return ModelMessagesTypeAdapter.dump_python(agent.history(), mode="json")


def _prompts(messages: list[Any]) -> str:
    return "\n".join(
        str(part.get("content"))
        for message in messages
        if message["kind"] == "request"
        for part in message["parts"]
        if part["part_kind"] == "user-prompt"
    )


def test_a_team_on_the_local_model_resumes_and_history_spans_both_sessions(server: LocalServer, tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    model = server.model_config()
    with Lab(model=model, store=path) as lab:
        first = lab.ask(FIRST, timeout=ASK_TIMEOUT_S)
        team_id = lab.team_id
        before = _entry_history(lab)
    assert first, "the first question got neither an answer nor a notice"
    assert FIRST in _prompts(before)
    assert any(m["kind"] == "response" and m.get("model_name") for m in before)  # the server's own responses

    with Lab.resume(team_id, store=path, model=model) as again:
        assert _entry_history(again) == before  # the model history came back whole
        second = again.ask(SECOND, timeout=ASK_TIMEOUT_S)
        after = _entry_history(again)
    assert second, "the question after the resume got neither an answer nor a notice"
    assert after[: len(before)] == before and SECOND in _prompts(after[len(before) :])

    with SqliteStore(path) as store:
        frames = history(store, team=team_id)
    asks = frames.asks.set_index("question")
    assert set(asks.index) >= {FIRST, SECOND}
    for question in (FIRST, SECOND):
        row = asks.loc[question]
        assert row["requests"] >= 1 and row["input_tokens"] > 0 and row["output_tokens"] > 0
    assert not frames.usage["estimated"].any()  # the server's counts, not estimates
