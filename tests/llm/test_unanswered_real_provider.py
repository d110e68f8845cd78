"""What the request after a failed or stopped model call carries on the wire, through
pydantic-ai's real OpenAI provider against the loopback fake (``tests/fakeserver.py``).

The question that got no answer, a note saying so, and the next question go out as one
user message after the system message: no assistant message stands in for the missing
answer (SmolLM2 copied such a line, "[failed: cannot reach the model server ...]", as its
answer to the next question), the error's text is not in it, and no two user messages
follow each other (some chat templates refuse that). A resumed team reads its stored
history the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from aklab.llm.react import FAILED, INTERRUPTED
from tests.fakeserver import FakeOpenAI, echo, hang, http_error
from tests.llm.test_openai_faults import ASK_TIMEOUT, FOLLOW_UP, QUESTION, SOLO, _to_human, solo_lab

ERROR = "the backend fell over"


def assert_one_user_turn_after_the_system_message(body: dict[str, Any], note: str) -> None:
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["system", "user"], messages
    text = messages[1]["content"]
    assert isinstance(text, str)
    assert text.index(QUESTION) < text.index(note) < text.index(FOLLOW_UP)
    assert ERROR not in str(messages) and "[failed" not in str(messages)


def assert_the_follow_up_is_answered(messages: list[Any]) -> None:
    assert [m.content for m in _to_human(messages, "response")] == [f"OK: {FOLLOW_UP}"]


@pytest.mark.parametrize("mode", ["tool", "prompted"])
def test_after_a_failed_call_the_question_and_a_note_go_out_with_the_next_one_as_one_user_turn(
    fake_openai: FakeOpenAI, mode: str
) -> None:
    fake_openai.push(http_error(500, ERROR))
    with solo_lab(fake_openai, output_mode=mode) as lab:
        [notice] = _to_human(lab.ask(QUESTION, timeout=ASK_TIMEOUT), "notification")
        assert ERROR in notice.content  # the human is told what failed; the model is not
        fake_openai.default = echo
        assert_the_follow_up_is_answered(lab.ask(FOLLOW_UP, timeout=ASK_TIMEOUT))
    assert len(fake_openai.bodies) == 2
    assert_one_user_turn_after_the_system_message(fake_openai.bodies[-1], FAILED)


def test_after_a_stop_the_question_and_a_note_go_out_with_the_next_one_as_one_user_turn(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.push(hang())
    with solo_lab(fake_openai) as lab:
        lab.send(QUESTION)
        assert fake_openai.wait_hanging(), "the question never reached the server"
        assert lab.stop() == ["@Solo"]
        assert lab.wait(ASK_TIMEOUT)
        fake_openai.default = echo
        assert_the_follow_up_is_answered(lab.ask(FOLLOW_UP, timeout=ASK_TIMEOUT))
    assert_one_user_turn_after_the_system_message(fake_openai.bodies[-1], INTERRUPTED)


def test_a_resumed_team_sends_the_question_that_failed_with_the_next_one_alike(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    path = tmp_path / "events.sqlite3"
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, retries=0, timeout=5)
    fake_openai.push(http_error(500, ERROR))
    with Lab(team_from_dict(SOLO), model=cfg, store=path) as lab:
        assert _to_human(lab.ask(QUESTION, timeout=ASK_TIMEOUT), "notification")
    fake_openai.default = echo
    with Lab.resume(store=path, spec=team_from_dict(SOLO), model=cfg) as again:
        assert_the_follow_up_is_answered(again.ask(FOLLOW_UP, timeout=ASK_TIMEOUT))
    assert_one_user_turn_after_the_system_message(fake_openai.bodies[-1], FAILED)


@pytest.mark.parametrize(
    ("old_line", "note"),
    [
        ("[failed: cannot reach the model server at http://127.0.0.1:9/v1; is it running?]", FAILED),
        ("[interrupted: stopped before it was answered; take it up again only if asked to]", INTERRUPTED),
    ],
    ids=["failed", "stopped"],
)
def test_a_history_stored_with_an_earlier_versions_failed_line_is_sent_in_todays_form(
    fake_openai: FakeOpenAI, old_line: str, note: str
) -> None:
    """Before 2026-12-07 a failed or stopped run left "[failed: ...]" as the model's answer,
    and a team resumed from such a store sent it as an assistant message (SmolLM2 copied it)."""
    from pydantic_ai.messages import (
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        UserPromptPart,
    )

    from aklab.agent import BaseAgent

    stored = [
        ModelRequest(parts=[SystemPromptPart("You are Solo."), UserPromptPart(QUESTION)]),
        ModelResponse(parts=[TextPart(old_line)]),
    ]
    with solo_lab(fake_openai) as lab:
        solo = lab.system.proxy_ask(lab.member("@Solo"), BaseAgent)
        solo.restore(ModelMessagesTypeAdapter.dump_python(stored, mode="json"), {}, [])
        [request] = solo.history()
        assert [p.content for p in request.parts] == ["You are Solo.", f"{QUESTION}\n\n{note}"]
        fake_openai.default = echo
        assert_the_follow_up_is_answered(lab.ask(FOLLOW_UP, timeout=ASK_TIMEOUT))
    assert_one_user_turn_after_the_system_message(fake_openai.bodies[-1], note)
    assert old_line not in str(fake_openai.bodies[-1])
