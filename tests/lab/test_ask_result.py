"""lab.ask returns the ask's own replies, usage and runs, and renders them once as Markdown."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from aklab.lab import Lab
from aklab.lab.result import AskResult
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from tests.fakeserver import Behaviour, FakeOpenAI, output


@pytest.fixture
def lab() -> Iterator[Lab]:
    with Lab("dev-team") as lab:
        yield lab


def test_an_ask_returns_its_replies_and_its_own_usage(lab: Lab) -> None:
    first = lab.ask("Ask the Developer for a haiku about tests.", timeout=10)
    second = lab.ask("What is 2+2?", timeout=10)
    assert isinstance(first, AskResult) and isinstance(first, list)
    assert first.ask_id != second.ask_id
    assert [m.ask_id for m in first] == [first.ask_id] * len(first)
    assert {e.ask_id for e in first.usage_events} == {first.ask_id}
    frame = first.usage()
    assert set(frame["agent"]) == {"@Manager", "@Developer"}
    assert int(frame["requests"].sum()) == first.totals()["requests"] == len(first.run_ids) >= 2
    assert int(first.usage()["requests"].sum()) + int(second.usage()["requests"].sum()) == int(
        lab.usage()["requests"].sum()
    )
    assert not first.stopped


def test_an_ask_renders_once_as_markdown_and_as_text(lab: Lab) -> None:
    result = lab.ask("What is 2+2?", timeout=10)
    markdown = result._repr_markdown_()
    assert markdown.startswith("**@Manager** *(response)*\n\n")
    assert result.as_text().startswith("@Manager (response):\n")
    assert result.as_json()[0]["sender"] == "@Manager"
    summary = result.summary()
    assert summary.startswith("1 reply · ") and "requests" in summary and " tokens · " in summary
    assert repr(result) == f"<AskResult {summary}>"


def test_aklabs_notices_show_as_notices_and_are_not_answers() -> None:
    from aklab.agent import AgentMessage, Notice

    answer = AgentMessage(content="FYI: the plan is ready", type="notification")
    notice = Notice(content="@Manager could not answer: cannot reach the model server")
    result = AskResult([answer, notice])
    assert result.answers == [answer] and result.notices == [notice]
    assert "*(notification)*\n\nFYI" in result._repr_markdown_()
    assert "*(notice)*\n\n@Manager could not answer" in result._repr_markdown_()
    assert "(notice):\n@Manager could not answer" in result.as_text()


def test_an_empty_result_says_so() -> None:
    empty = AskResult([])
    assert empty._repr_markdown_() == "*(no reply)*"
    assert empty.summary() == "0 replies · 0 requests · 0 tokens · $0.0000"  # no request cost nothing


def test_a_stopped_run_keeps_the_usage_of_the_requests_it_made() -> None:
    import asyncio
    import json
    import threading

    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from tests.hardening._team import card, team

    gate, second = threading.Event(), threading.Event()
    calls = [0]

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls[0] += 1
        if calls[0] == 1:  # a finished request: a tool call
            return ModelResponse(parts=[ToolCallPart("hire_members", json.dumps({"roles": []}))])
        second.set()
        await asyncio.get_running_loop().run_in_executor(None, gate.wait, 30)
        return ModelResponse(parts=[])

    with Lab(team(card("A", model=FunctionModel(model)), entry="A")) as lab:
        try:
            lab.send("go")
            assert second.wait(10)
            assert lab.stop() == ["@A"]
            assert lab.wait(5)
        finally:
            gate.set()
        result = lab.result(lab.last_ask_id or "")
        assert result.stopped
        frame = result.usage(by="request")
        assert list(frame["ok"]) == [True, False]
        assert int(frame["input_tokens"].iloc[0]) > 0
        assert result.totals()["requests"] == 2
        assert [m.content for m in result] == ["Run interrupted. (@A)"]


def test_an_agents_usage_summary_matches_the_labs_usage(lab: Lab) -> None:
    from aklab.agent import BaseAgent

    for _ in range(3):
        lab.ask("What is 2+2?", timeout=10)
    summary = lab.system.proxy_ask(lab.entry, BaseAgent).get_usage_summary()
    row = lab.usage().set_index("agent").loc["@Manager"]
    assert summary.total.requests == int(row["requests"]) > 0
    assert summary.total.input_tokens == int(row["input_tokens"])


def test_usage_by_ask_totals_each_question_across_agents(lab: Lab) -> None:
    first = lab.ask("Ask the Developer for a haiku about tests.", timeout=10)
    second = lab.ask("What is 2+2?", timeout=10)
    frame = lab.usage(by="ask")
    assert list(frame["ask_id"]) == [first.ask_id, second.ask_id]
    assert list(frame["question"]) == ["Ask the Developer for a haiku about tests.", "What is 2+2?"]
    assert frame["agents"].iloc[0] == "@Manager, @Developer"
    assert int(frame["requests"].iloc[0]) == first.totals()["requests"]
    assert int(frame["requests"].sum()) == int(lab.usage()["requests"].sum())


def test_the_result_keeps_the_whole_conversation_for_a_saved_notebook(lab: Lab) -> None:
    result = lab.ask("Ask the Developer for a haiku about tests.", timeout=10)
    assert [m.ask_id for m in result.conversation] == [result.ask_id] * len(result.conversation)
    assert len(result.conversation) == 4  # ask, delegation, answer, relay
    markdown = result.as_markdown()
    assert "<details><summary>The whole conversation (4 messages)</summary>" in markdown
    assert "**@Manager → @Developer** *(request)*" in markdown


def test_each_of_two_asks_in_flight_at_once_gets_its_own_conversation(lab: Lab) -> None:
    lab.ask("What is 2+2?", timeout=10)  # an earlier ask, older in the transcript
    start = lab.send("Ask the Developer for a haiku about tests.")
    first = lab.last_ask_id
    lab.send("Ask the Developer for a haiku about rain.")
    second = lab.last_ask_id
    assert lab.wait(20)
    for ask_id, topic in ((first, "tests"), (second, "rain")):
        conversation = lab.result(ask_id, start).conversation
        # what the demo team does with two asks at once varies (mail arriving mid-run),
        # so the check is against the whole transcript, filtered
        assert conversation == [m for m in lab.transcript() if m.ask_id == ask_id]
        assert conversation[0].id == ask_id and topic in conversation[0].content  # the person's message first
        assert len(conversation) >= 2  # and what the team said about it


def test_a_conversation_longer_than_memory_keeps_what_memory_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("aklab.lab.recorder.TRANSCRIPT_LIMIT", 3)
    with Lab("dev-team", store=False) as lab:
        result = lab.ask("Ask the Developer for a haiku about tests.", timeout=10)
        kept = lab.transcript()
    # the person's message has left memory: the newest three are what is left of the ask
    assert len(kept) == 3 and result.conversation == kept
    assert all(m.ask_id == result.ask_id for m in kept) and kept[0].id != result.ask_id


def test_an_ask_a_slash_command_answered_cost_nothing() -> None:
    with Lab(store=False) as lab:
        result = lab.ask("/team_roles", timeout=20)
    assert result.summary() == "1 reply · 0 requests · 0 tokens · $0.0000"


def test_no_reply_says_why_from_what_the_ask_did(fake_openai: FakeOpenAI) -> None:
    """The team can go quiet without writing to the human: here the Manager, given its
    Developer's answer, sends nothing on (tool mode: a prompted reply holds at least one
    message). "(no reply)" alone left the user guessing."""
    from tests.lab.test_resume_real_provider import RELAY

    def respond(body: dict[str, Any]) -> Behaviour:
        system = next(m["content"] for m in body["messages"] if m["role"] == "system")
        if "You are Developer." in system:
            messages = [{"message_type": "response", "recipient": "@Manager", "message": "it is 42"}]
        elif "it is 42" in json.dumps(body):
            messages = []  # the Manager's turn on the Developer's answer sends nothing on
        else:
            messages = [{"message_type": "request", "recipient": "Developer", "message": "compute the answer"}]
        return output({"messages": messages})(body)

    fake_openai.default = respond
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, output_mode="tool")
    with Lab(team_from_dict(RELAY), model=cfg, store=False) as lab:
        result = lab.ask("What is the answer?", timeout=20)
    assert list(result) == []
    why = (
        "the team went quiet without writing to you: 2 messages passed between its members, the last from "
        "@Developer to @Manager (response), and @Manager sent nothing on; ask again, or ask @Manager what it found"
    )
    assert result.why_no_reply() == why
    assert result.as_text() == f"(no reply: {why})"
    assert result._repr_markdown_().startswith(f"*(no reply: {why})*\n\n<details>")


def test_no_reply_after_a_stop_or_a_run_that_sent_nothing_says_so() -> None:
    from aklab.llm import LlmUsageEvent

    assert AskResult([], stopped=True).why_no_reply() == "the ask was stopped before anyone wrote to you"
    usage = [LlmUsageEvent(agent="@Manager", run_id="r1", model="demo", input_tokens=3, output_tokens=1)]
    assert AskResult([], usage_events=usage).as_text() == (
        "(no reply: @Manager made 1 model request and sent no message; ask again)"
    )


def test_the_summary_counts_in_words() -> None:
    with Lab(store=False) as lab:
        lab.ask("/hire_member Developer", timeout=20)
        result = lab.ask("Hello there", to="Developer", timeout=20)
    assert result.summary().startswith("1 reply · 1 request · ")
