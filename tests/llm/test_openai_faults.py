"""A team on an OpenAI-compatible server that misbehaves: every ask still ends well.

The server is the loopback fake (``tests/fakeserver.py``); the client is pydantic-ai's real
``OpenAIChatModel`` path, built by aklab from a ``ModelConfig`` as a user would. Each fault
test asserts that (a) the ask ends, either with a reply from the agent or with one
notification line to @Human that says what happened and what to do, and (b) the team
answers a normal question afterwards.

The follow-up answers come from ``echo`` (text "OK: <the question>"): a plain-text answer
is delivered to the sender of the message it answers.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from aklab.agent import AgentMessage
from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from tests.fakeserver import (
    USAGE,
    Behaviour,
    FakeOpenAI,
    Responder,
    Usage,
    cut_at_max_tokens,
    cut_stream,
    echo,
    empty,
    hang,
    http_error,
    last_user_content,
    last_user_text,
    output,
    rate_limited,
    raw,
    text,
    truncated_json,
)

SOLO = {
    "name": "solo",
    "entry": "Solo",
    "roles": [{"role": "Solo", "prompt": "You are Solo. Answer the human's questions briefly."}],
}
#: Long enough for a few local requests, short enough that a hang fails the test quickly.
ASK_TIMEOUT = 8.0
QUESTION = "What is 2+2?"
FOLLOW_UP = "What is the capital of France?"

#: A notice says what to do: one of these hints.
WHAT_TO_DO = re.compile(
    r"\b(ask|try) again\b|\bretry\b|\bcheck\b|\bwait\b|/clear|/compact|rephrase|--timeout|raise the timeout|"
    r"is it running",
    re.IGNORECASE,
)


@contextmanager
def solo_lab(fake: FakeOpenAI, **model: Any) -> Iterator[Lab]:
    """A one-role team on the fake server; hangs are released before the lab closes."""
    settings: dict[str, Any] = {"retries": 0, "timeout": 5, **model}
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake.url, **settings)
    lab = Lab(team_from_dict(SOLO), model=cfg)
    try:
        yield lab
    finally:
        fake.release()
        lab.close()


def _to_human(messages: list[AgentMessage], kind: str) -> list[AgentMessage]:
    return [
        m
        for m in messages
        if m.type == kind
        and m.sender is not None
        and m.sender.name == "@Solo"
        and m.recipient is not None
        and m.recipient.name == "@Human"
    ]


def assert_answered_or_told(messages: list[AgentMessage], happened: str) -> None:
    """A reply from @Solo, or exactly one notification line saying ``happened`` and what to do."""
    replies = _to_human(messages, "response")
    if replies:
        assert all(r.content.strip() for r in replies), f"an empty reply reached the human: {messages}"
        return
    notices = _to_human(messages, "notification")
    assert notices, f"the ask ended in silence: the human got {[(m.type, m.content) for m in messages]}"
    assert len(notices) == 1, f"one notice expected, got {[n.content for n in notices]}"
    line = notices[0].content
    assert "\n" not in line.strip() and len(line) <= 300, f"not one short line: {line!r}"
    assert re.search(happened, line, re.IGNORECASE), f"the notice does not say what happened ({happened}): {line!r}"
    assert WHAT_TO_DO.search(line), f"the notice does not say what to do: {line!r}"


def assert_answers_afterwards(lab: Lab, fake: FakeOpenAI) -> None:
    """The team still answers a normal question (a plain-text answer, delivered to @Human)."""
    fake.default = echo
    messages = lab.ask(FOLLOW_UP, timeout=ASK_TIMEOUT)
    replies = _to_human(messages, "response")
    assert [r.content for r in replies] == [f"OK: {FOLLOW_UP}"], [(m.type, m.content) for m in messages]


def reply_to_human(content: str, *, usage: Usage | None = USAGE) -> Responder:
    """The protocol's own answer (a response to @Human), in whatever output mode the request uses."""
    return output({"messages": [{"recipient": "@Human", "message_type": "response", "message": content}]}, usage=usage)


def always(behaviour: Behaviour | Responder) -> Responder:
    """A default responder that keeps misbehaving the same way (so retries cannot rescue the ask)."""
    if isinstance(behaviour, Behaviour):
        return lambda body: behaviour
    return behaviour


# -- the fake itself, on pydantic-ai's OpenAIChatModel directly -------------------------------------


def _direct_run(fake: FakeOpenAI, *, stream: bool, output_type: Any = str) -> tuple[Any, Any]:
    """One pydantic-ai run against the fake, closing its own HTTP client."""
    import httpx2
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    async def run() -> tuple[Any, Any]:
        async with httpx2.AsyncClient() as http:
            provider = OpenAIProvider(base_url=fake.url, api_key="x", http_client=http)
            agent = Agent(OpenAIChatModel("fake", provider=provider), retries=0)
            settings: Any = {"max_retries": 0, "timeout": 1}
            if stream:
                async with agent.run_stream("q", output_type=output_type, model_settings=settings) as result:
                    return await result.get_output(), result.usage
            done = await agent.run("q", output_type=output_type, model_settings=settings)
            return done.output, done.usage

    return asyncio.run(run())


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_the_fake_server_answers_pydantic_ais_openai_model_with_text_and_tool_calls(
    fake_openai: FakeOpenAI, stream: bool
) -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        answer: str

    fake_openai.push(text("Paris"), output({"answer": "4"}), text("no usage", usage=None))
    out, usage = _direct_run(fake_openai, stream=stream)
    assert out == "Paris" and (usage.input_tokens, usage.output_tokens) == (11, 7)
    out, _ = _direct_run(fake_openai, stream=stream, output_type=Answer)
    assert out == Answer(answer="4")
    out, usage = _direct_run(fake_openai, stream=stream)
    assert out == "no usage" and (usage.input_tokens, usage.output_tokens) == (0, 0)
    bodies = fake_openai.bodies
    assert [b.get("stream", False) for b in bodies] == [stream] * 3
    assert bodies[1]["tool_choice"] == "required" and bodies[1]["tools"][0]["function"]["name"] == "final_result"
    assert last_user_content(bodies[0]) == "q"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize(
    ("behaviour", "error"),
    [
        (http_error(500), "ModelServerError"),
        (rate_limited(1), "ModelRateLimitError"),
        (truncated_json(), "ModelAPIError"),
        (cut_stream(), "ModelConnectionError"),
        (empty(), "UnexpectedModelBehavior"),
        (hang(), "ModelTimeoutError"),
    ],
    ids=["500", "429", "truncated-json", "cut", "empty", "hang"],
)
def test_each_fault_of_the_fake_server_reaches_pydantic_ai_as_its_error(
    fake_openai: FakeOpenAI, behaviour: Behaviour, error: str, stream: bool
) -> None:
    fake_openai.push(behaviour)
    with pytest.raises(Exception) as raised:
        _direct_run(fake_openai, stream=stream)
    assert type(raised.value).__name__ == error, repr(raised.value)
    assert len(fake_openai.bodies) == 1
    # a hang ends when the client gives up, without waiting for teardown
    assert fake_openai.wait_for(lambda f: f.hanging == 0, timeout=2)


def test_the_fake_server_lists_its_models_and_reports_script_errors(fake_openai: FakeOpenAI) -> None:
    from openai import OpenAI

    with OpenAI(base_url=fake_openai.url, api_key="x", max_retries=0) as client:
        assert [m.id for m in client.models.list()] == ["fake"]
        fake_openai.push(lambda body: body["no such key"])
        with pytest.raises(Exception, match="responder failed"):
            client.chat.completions.create(model="fake", messages=[{"role": "user", "content": "hi"}])
    assert fake_openai.script_errors == ["KeyError('no such key')"]


# -- faults, end to end through aklab's Lab ---------------------------------------------------------

#: The family's default output mode (prompted JSON, not streamed, for an OpenAI-compatible
#: server) and the output-tool mode (streamed over SSE, since the lab listens to streams).
modes = pytest.mark.parametrize("mode", ["auto", "tool"], ids=["default-mode", "tool-mode"])


@modes
def test_an_http_500_ends_in_a_notice_and_the_team_answers_afterwards(fake_openai: FakeOpenAI, mode: str) -> None:
    fake_openai.default = echo  # answers any retry, and the follow-up
    fake_openai.push(http_error(500))
    with solo_lab(fake_openai, output_mode=mode) as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert len(fake_openai.bodies) == 1, "retries=0: the request is sent once"
        assert_answered_or_told(first, r"500|server (failed|error)")
        assert_answers_afterwards(lab, fake_openai)


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (http_error(403, "You do not have access to model fake"), r"HTTP 403: You do not have access to model fake"),
        (http_error(400, "Invalid parameter: temperature"), r"rejected the request \(HTTP 400: Invalid parameter: "),
        (http_error(503, "model is loading"), r"HTTP 503: model is loading"),
        (raw('{"id": "x", "object": "chat.completion", "created": 1, "model": "fake", "choices": []}'), r"no choices"),
        (raw("<html><body>Welcome to nginx!</body></html>", content_type="text/html"), r"chat-completions endpoint"),
    ],
    ids=["403", "400", "503", "no-choices", "web-page"],
)
def test_a_refused_or_unusable_answer_says_what_the_server_said_and_what_to_check(
    fake_openai: FakeOpenAI, fault: Any, says: str
) -> None:
    fake_openai.default = echo
    fake_openai.push(fault)
    with solo_lab(fake_openai, output_mode="prompted") as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert_answered_or_told(first, says)
        [notice] = _to_human(first, "notification")
        assert "IndexError" not in notice.content and "status_code:" not in notice.content
        if "400" in says:
            assert "ask again" not in notice.content  # the same request would be refused again
        assert_answers_afterwards(lab, fake_openai)


@pytest.mark.parametrize(
    ("written", "delivered"),
    [
        ("An essay that stops mid-sen", "An essay that stops mid-sen"),
        (
            '{"messages": [{"recipient": "@Human", "message_type": "response", "message": "Here is a long essay about',
            "Here is a long essay about",
        ),
    ],
    ids=["text", "reply-json"],
)
def test_an_answer_cut_at_max_tokens_is_delivered_as_far_as_written_and_said_to_be_cut(
    fake_openai: FakeOpenAI, written: str, delivered: str
) -> None:
    fake_openai.default = echo
    fake_openai.push(cut_at_max_tokens(written))
    with solo_lab(fake_openai, output_mode="prompted", max_tokens=30) as lab:
        first = lab.ask("Write an essay", timeout=ASK_TIMEOUT)
        assert [m.content for m in _to_human(first, "response")] == [delivered]  # not the JSON debris
        [notice] = _to_human(first, "notification")
        assert "cut off at the model's max_tokens limit" in notice.content and "--max-tokens" in notice.content
        assert len(fake_openai.bodies) == 1
        assert_answers_afterwards(lab, fake_openai)  # an answer that ends well says nothing of the kind
        assert not [m for m in lab.replies() if "max_tokens" in m.content and m not in first]


@modes
def test_a_429_with_retry_after_ends_in_a_notice_and_the_team_answers_afterwards(
    fake_openai: FakeOpenAI, mode: str
) -> None:
    fake_openai.default = echo  # answers any retry, and the follow-up
    fake_openai.push(rate_limited(retry_after=1))
    with solo_lab(fake_openai, output_mode=mode) as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert len(fake_openai.bodies) == 1, "retries=0: the request is sent once"
        assert_answered_or_told(first, r"429|rate")
        assert_answers_afterwards(lab, fake_openai)


def test_with_one_retry_a_429_is_retried_after_its_retry_after_and_answered(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(rate_limited(retry_after=1), reply_to_human("4"))
    with solo_lab(fake_openai, retries=1) as lab:
        started = time.monotonic()
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert time.monotonic() - started >= 0.9, "Retry-After was not waited for"
        assert [r.content for r in _to_human(first, "response")] == ["4"]
        assert len(fake_openai.bodies) == 2


@modes
def test_a_hanging_server_times_out_into_a_notice_and_the_team_answers_afterwards(
    fake_openai: FakeOpenAI, mode: str
) -> None:
    fake_openai.default = echo  # answers any retry, and the follow-up
    fake_openai.push(hang())
    with solo_lab(fake_openai, timeout=1, output_mode=mode) as lab:
        started = time.monotonic()
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert time.monotonic() - started < 5, "the 1 s timeout was not honoured"
        assert len(fake_openai.bodies) == 1, "retries=0: the request is sent once"
        assert_answered_or_told(first, r"did not answer|time[sd]? ?out|no answer|not respond")
        assert_answers_afterwards(lab, fake_openai)


@modes
def test_a_truncated_json_body_ends_in_a_notice_and_the_team_answers_afterwards(
    fake_openai: FakeOpenAI, mode: str
) -> None:
    fake_openai.default = echo  # answers any retry, and the follow-up
    fake_openai.push(truncated_json())
    with solo_lab(fake_openai, output_mode=mode) as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert_answered_or_told(first, r"JSON|decode|malformed|garbled|unreadable|could not be (read|parsed|used)")
        assert_answers_afterwards(lab, fake_openai)


@modes
def test_a_response_cut_mid_stream_ends_well_and_the_team_answers_afterwards(
    fake_openai: FakeOpenAI, mode: str
) -> None:
    fake_openai.default = echo  # answers any retry, and the follow-up
    fake_openai.push(cut_stream("The answer"))
    with solo_lab(fake_openai, output_mode=mode) as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        if mode == "tool":
            assert fake_openai.bodies[0].get("stream"), "tool mode in a lab streams: the cut is an SSE cut"
        # The server was reached: "cannot reach the server" would send the human the wrong way.
        assert_answered_or_told(first, r"\bcut\b|interrupted|incomplete|closed|dropped|lost|broke|ended|mid-")
        assert_answers_afterwards(lab, fake_openai)


def test_a_stream_that_ends_without_a_finish_reason_is_delivered_with_a_warning(fake_openai: FakeOpenAI) -> None:
    """The body ends properly but no chunk said the answer was finished (no finish reason, no
    ``[DONE]``): pydantic-ai takes it as a "stop". What came is delivered, and the human is told
    it may be cut, rather than reading half an answer as a whole one."""
    fake_openai.push(cut_stream("The answer is", clean_eof=True))
    with solo_lab(fake_openai, output_mode="tool") as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert fake_openai.bodies[0].get("stream"), "tool mode in a lab streams"
        assert [r.content for r in _to_human(first, "response")] == ["The answer is"]
        assert [n.content for n in _to_human(first, "notification")] == [
            "@Solo's answer ended without the server saying it was finished (no finish reason): it may be cut "
            "short, and is delivered as it stands. Ask again if it looks incomplete."
        ]
        fake_openai.default = echo
        again = lab.ask(FOLLOW_UP, timeout=ASK_TIMEOUT)
        assert [(m.type, m.content) for m in _to_human(again, "response")] == [("response", f"OK: {FOLLOW_UP}")]
        assert not _to_human(again, "notification"), "a finished answer got the warning"


@modes
def test_a_response_cut_once_is_retried_and_answered(fake_openai: FakeOpenAI, mode: str) -> None:
    fake_openai.default = echo
    fake_openai.push(cut_stream("The answer"))
    with solo_lab(fake_openai, retries=1, output_mode=mode) as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert [r.content for r in _to_human(first, "response")] == [f"OK: {QUESTION}"], first
        assert len(fake_openai.bodies) == 2


@modes
def test_output_that_keeps_violating_the_schema_ends_well_and_the_team_answers_afterwards(
    fake_openai: FakeOpenAI, mode: str
) -> None:
    fake_openai.default = always(output({"messages": [{"to": "@Human", "message_type": "shout", "text": 4}]}))
    with solo_lab(fake_openai, output_mode=mode) as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert_answered_or_told(first, r"could not be used|schema|invalid|not valid|form|format")
        assert_answers_afterwards(lab, fake_openai)


@modes
def test_output_that_keeps_naming_an_unknown_recipient_ends_well_and_the_team_answers_afterwards(
    fake_openai: FakeOpenAI, mode: str
) -> None:
    bad = {"messages": [{"recipient": "@Nobody", "message_type": "response", "message": "It is 4."}]}
    fake_openai.default = always(output(bad))
    with solo_lab(fake_openai, output_mode=mode) as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert_answered_or_told(first, r"@Nobody|recipient|not a member|unknown|could not be (used|delivered)")
        assert_answers_afterwards(lab, fake_openai)


@modes
def test_output_that_stays_empty_ends_in_a_notice_and_the_team_answers_afterwards(
    fake_openai: FakeOpenAI, mode: str
) -> None:
    fake_openai.default = always(empty())
    with solo_lab(fake_openai, output_mode=mode) as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert not _to_human(first, "response"), "an empty answer is never a reply"
        assert_answered_or_told(first, r"empty|no (answer|content|text)|nothing|could not be used")
        assert_answers_afterwards(lab, fake_openai)


# -- what reaches the human and the wire ----------------------------------------------------------------


@modes
def test_a_plain_text_answer_is_delivered_to_the_human_as_the_reply(fake_openai: FakeOpenAI, mode: str) -> None:
    fake_openai.push(text("The capital of France is Paris."))
    with solo_lab(fake_openai, output_mode=mode) as lab:
        messages = lab.ask(FOLLOW_UP, timeout=ASK_TIMEOUT)
        assert [(m.type, m.content) for m in messages] == [("response", "The capital of France is Paris.")]
        assert _to_human(messages, "response"), "the reply comes from @Solo to @Human"
        assert lab.errors() == []


@modes
def test_user_content_with_a_context_update_reaches_the_wire_as_one_string(fake_openai: FakeOpenAI, mode: str) -> None:
    """The team state opening the conversation goes out in the one system message (open models
    read it there: aklab.llm.system_state); the user's turn is one string with the question."""
    fake_openai.default = echo
    with solo_lab(fake_openai, output_mode=mode) as lab:
        lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        [update] = lab.context("@Solo")  # the first turn carries context-update block 1
        body = fake_openai.bodies[0]
        content = last_user_content(body)
        assert isinstance(content, str), f"sent as a list of parts: {content!r}"
        assert content.startswith("You received a request from @Human.") and content.endswith(QUESTION)
        [system] = [m["content"] for m in body["messages"] if m["role"] == "system"]
        assert system.startswith("You are Solo.") and update.block.strip() in system

        lab.ask(FOLLOW_UP, timeout=ASK_TIMEOUT)  # a later turn: the state stays in the system message
        later = fake_openai.bodies[-1]
        assert [m["content"] for m in later["messages"] if m["role"] == "system"] == [system]
        assert sum(update.block.strip() in str(m["content"]) for m in later["messages"]) == 1
        assert last_user_content(later).endswith(FOLLOW_UP)


def test_max_tokens_and_temperature_reach_the_wire_in_the_chat_completions_dialect(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = echo
    with solo_lab(fake_openai, max_tokens=64, temperature=0.25) as lab:
        lab.ask(QUESTION, timeout=ASK_TIMEOUT)
    assert fake_openai.bodies
    for body in fake_openai.bodies:
        assert body.get("max_tokens") == 64 and "max_completion_tokens" not in body, body
        assert body.get("temperature") == 0.25


@modes
def test_tokens_are_unknown_or_estimated_when_the_server_reports_no_usage(fake_openai: FakeOpenAI, mode: str) -> None:
    fake_openai.default = reply_to_human("4", usage=None)
    with solo_lab(fake_openai, output_mode=mode) as lab:
        lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        events = [e for e in lab.recorder.usage if e.agent == "@Solo"]
    assert events, "the request was not counted"
    for e in events:
        estimated = e.estimated
        assert estimated or (e.input_tokens is None and e.output_tokens is None), f"0 is not 'unknown': {e}"
        if estimated:
            assert e.input_tokens and e.output_tokens, f"an estimate is a positive count: {e}"


@modes
def test_tokens_the_server_reports_are_recorded_as_reported(fake_openai: FakeOpenAI, mode: str) -> None:
    fake_openai.default = reply_to_human("4", usage=Usage(123, 45))
    with solo_lab(fake_openai, output_mode=mode) as lab:
        lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        events = [e for e in lab.recorder.usage if e.agent == "@Solo"]
    assert [(e.input_tokens, e.output_tokens, e.estimated) for e in events] == [(123, 45, False)]


#: What llama.cpp's server answers (HTTP 400) when a prompt does not fit its context.
LLAMA_CPP_FULL = "the request exceeds the available context size, try increasing it (n_prompt_tokens=5120, n_ctx=4096)"


def test_a_full_context_compacts_the_history_and_asks_once_more(fake_openai: FakeOpenAI) -> None:
    """A server that refuses a prompt as too long (llama.cpp's words, HTTP 400): the history is
    compacted and the same question asked once more, with a shorter prompt; a context that stays
    full ends in one notice saying /compact or /clear, and the team goes on answering."""
    with solo_lab(fake_openai, output_mode="prompted", context_length=1000) as lab:
        fake_openai.push(reply_to_human("x" * 3000))
        assert [m.content for m in lab.ask("Write a long text.", timeout=ASK_TIMEOUT)] == ["x" * 3000]
        fake_openai.push(http_error(400, LLAMA_CPP_FULL), reply_to_human("It fits now."))
        assert [m.content for m in lab.ask(QUESTION, timeout=ASK_TIMEOUT)] == ["It fits now."]
        refused, retried = (len(str(b["messages"])) for b in fake_openai.bodies[1:3])
        assert retried < refused * 0.6, (refused, retried)  # the long answer left the history
        fake_openai.default = always(http_error(400, LLAMA_CPP_FULL))
        messages = lab.ask("And now?", timeout=ASK_TIMEOUT)
        assert_answered_or_told(messages, "context full")
        assert_answers_afterwards(lab, fake_openai)


_LEAD = {"role": "Lead", "prompt": "You are the Lead.", "routes_to": ["Helper"]}
LEAD_HELPER = {"name": "pair", "entry": "Lead", "roles": [_LEAD, {"role": "Helper", "prompt": "You are the Helper."}]}


def test_a_teammate_whose_model_fails_tells_the_one_that_asked_it(fake_openai: FakeOpenAI) -> None:
    """The Helper's model call fails: the human is told, and so is the Lead, whose request
    would otherwise stay unanswered; the Lead goes on and answers the human."""

    def respond(body: dict[str, Any]) -> Any:
        system = " ".join(str(m.get("content")) for m in body["messages"] if m.get("role") == "system")
        last = last_user_text(body)
        if "You are the Helper." in system:
            return http_error(500, "model crashed")
        if "could not answer your request" in last:
            said = next(line for line in last.splitlines() if "could not answer your request" in line)
            reply = {"recipient": "@Human", "message_type": "response", "message": f"Without the Helper: {said}"}
            return output({"messages": [reply]})(body)
        ask = {"recipient": "@Helper", "message_type": "request", "message": "Write hello world."}
        return output({"messages": [ask]})(body)

    fake_openai.default = respond
    cfg = ModelConfig(provider="openai-compatible", model="fake", base_url=fake_openai.url, retries=0, timeout=5)
    with Lab(team_from_dict(LEAD_HELPER), model=cfg) as lab:
        got = lab.ask("Build hello world", timeout=ASK_TIMEOUT)
        told = [(m.sender.name, m.type, m.content) for m in got if m.sender is not None]
        assert (
            "@Helper",
            "notification",
            "@Helper could not answer: the model server failed (HTTP 500: model crashed); ask again",
        ) in told
        [answer] = [content for name, kind, content in told if name == "@Lead" and kind == "response"]
        assert answer.startswith("Without the Helper: @Helper could not answer your request: the model server failed")
        hops = [(m.sender.name, m.recipient.name, m.type) for m in lab.transcript()]  # type: ignore[union-attr]
        assert ("@Helper", "@Lead", "response") in hops
