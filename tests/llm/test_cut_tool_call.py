"""A tool call cut off at max_tokens ends the run after one request, with the notice to raise
--max-tokens: asked again with the same limit, it would only be cut again.

Through pydantic-ai's real OpenAI model against the loopback fake (``tests/fakeserver.py``),
which counts the requests that reached it.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai.exceptions import IncompleteToolCall

from aklab.llm import ModelConfig
from aklab.llm.react import ReactAgent
from tests.fakeserver import Behaviour, FakeOpenAI, echo, output_tool_name, tool_call
from tests.llm.test_openai_faults import ASK_TIMEOUT, QUESTION, _to_human, assert_answers_afterwards, solo_lab

#: The output tool's arguments as a model writes them, stopped by the token limit mid-string.
CUT_REPLY = '{"messages": [{"recipient": "@Human", "message_type": "response", "message": "Here is a long'


def cut_output_call(body: dict[str, Any]) -> Behaviour:
    return tool_call(output_tool_name(body), CUT_REPLY, finish="length")


def test_a_cut_output_tool_call_is_sent_once_and_tells_the_human_to_raise_max_tokens(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = cut_output_call  # every request, so that a retry would be cut again
    with solo_lab(fake_openai, output_mode="tool", max_tokens=30) as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert len(fake_openai.bodies) == 1, "the cut call was asked for again with the same limit"
        assert fake_openai.bodies[0].get("stream"), "tool mode in a lab streams"
        [notice] = _to_human(first, "notification")
        assert "cut off at the model's max_tokens limit" in notice.content and "--max-tokens" in notice.content
        assert not _to_human(first, "response")
        assert_answers_afterwards(lab, fake_openai)


def lookup(city: str) -> str:
    """The weather in ``city``."""
    return f"sunny in {city}"


def test_a_cut_function_tool_call_ends_the_run_after_one_request(fake_openai: FakeOpenAI) -> None:
    """Not retried as a tool call whose arguments did not parse (RuntimeConfig.retries, 3 by default)."""
    fake_openai.default = lambda body: tool_call("lookup", '{"city": "Par', finish="length")
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, retries=0, max_tokens=8)
    agent = ReactAgent(name="@A", model_cfg=cfg, tools=[lookup])
    try:
        with pytest.raises(IncompleteToolCall) as raised:
            agent.run_sync("What is the weather in Paris?", output_type=str)
        assert len(fake_openai.bodies) == 1
        assert "--max-tokens" in agent.describe(raised.value)
        fake_openai.default = echo  # the agent's next run goes out as usual
        assert agent.run_sync("And now?", output_type=str) == "OK: And now?"
    finally:
        agent.close()


def test_a_whole_tool_call_at_the_token_limit_is_still_run(fake_openai: FakeOpenAI) -> None:
    """finish_reason "length" after arguments that parse: the call is whole, and runs."""
    fake_openai.push(tool_call("lookup", {"city": "Paris"}, finish="length"), echo)
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, retries=0, timeout=5)
    agent = ReactAgent(name="@A", model_cfg=cfg, tools=[lookup])
    try:
        assert agent.run_sync("What is the weather in Paris?", output_type=str).startswith("OK: ")
        assert len(fake_openai.bodies) == 2
    finally:
        agent.close()


def test_a_native_mode_reply_cut_at_the_limit_tells_the_human_to_raise_max_tokens(fake_openai: FakeOpenAI) -> None:
    """Native mode (the provider's JSON schema): a reply cut mid-JSON is pydantic-ai's
    OutputTokenLimitExceeded, which read as "answered in a form that could not be used"."""
    from tests.fakeserver import cut_at_max_tokens, json_text

    fake_openai.default = lambda body: cut_at_max_tokens(CUT_REPLY)
    with solo_lab(fake_openai, output_mode="native", max_tokens=30) as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        notices = [m.content for m in first.notices]
        assert any("cut off at the model's max_tokens limit" in n and "--max-tokens" in n for n in notices), notices
        assert len(fake_openai.bodies) == 1
        whole = {"messages": [{"recipient": "@Human", "message_type": "response", "message": "fine"}]}
        fake_openai.default = lambda body: json_text(whole)  # the next ask goes out as usual
        assert [m.content for m in lab.ask(QUESTION, timeout=ASK_TIMEOUT)] == ["fine"]
