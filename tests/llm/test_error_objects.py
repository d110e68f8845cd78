"""An error object a server sends with status 200 gets the notice its HTTP status would get.

Gateways and OpenAI-compatible servers answer some failures with status 200 and an error
object (OpenRouter puts the HTTP status in ``code``; others name a ``type`` or a ``code`` such
as ``rate_limit_exceeded``), as the whole body or as an event mid-stream. The human gets the
advice the matching HTTP error gets (wait, ask again, check the key, the model name, /compact),
with the error named as what it was: not "HTTP 429", which the server did not send.

Through pydantic-ai's real OpenAI model, built by aklab from a ``ModelConfig``, against the
loopback fake (``tests/fakeserver.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from aklab.agent import AgentMessage
from aklab.llm.failures import CONTEXT_FULL
from aklab.secrets import REDACTED
from tests.fakeserver import FakeOpenAI, error_at_200, http_error
from tests.llm.test_openai_faults import ASK_TIMEOUT, QUESTION, _to_human, always, assert_answers_afterwards, solo_lab


@dataclass(frozen=True)
class Case:
    message: str
    status: int
    """The HTTP status a server sends for the same error (the same object for body) before any answer."""
    code: str | int | None = None
    error_type: str | None = None
    overflow: bool = False
    """The prompt did not fit the model's context: compacted, asked once more, then /compact or /clear."""


CASES = {
    "openrouter-429": Case("Rate limit exceeded: free-models-per-min", 429, code=429),
    "rate-limit-code": Case("Too many requests, slow down", 429, code="rate_limit_exceeded"),
    "rate-limit-type": Case("Too many requests, slow down", 429, error_type="rate_limit_error"),
    "openrouter-502": Case("Provider returned error", 502, code=502),
    "openrouter-503": Case("No instances available", 503, code=503),
    "overloaded-type": Case("Overloaded", 503, error_type="overloaded_error"),
    "context-code": Case(
        "Please shorten the conversation",
        400,
        code="context_length_exceeded",
        error_type="invalid_request_error",
        overflow=True,
    ),
    "context-message": Case("Please reduce the length of the messages or completion.", 400, overflow=True),
    "openrouter-context": Case("This endpoint's maximum context length is 8192 tokens", 400, code=400, overflow=True),
    "invalid-api-key": Case(
        "Incorrect API key provided", 401, code="invalid_api_key", error_type="invalid_request_error"
    ),
    "model-not-found": Case(
        "The model `gpt-9` does not exist", 404, code="model_not_found", error_type="invalid_request_error"
    ),
}

#: How the notice names the error: the status 200 body answering a plain request, the event
#: inside a stream (the lab streams in tool mode).
SENT = {"prompted": "error sent with status 200", "tool": "error sent mid-stream"}


def _notice(messages: list[AgentMessage]) -> str:
    [notice] = _to_human(messages, "notification")
    return notice.content


@pytest.mark.parametrize("mode", ["prompted", "tool"], ids=["whole-body", "mid-stream"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_an_error_object_gets_the_notice_of_its_http_status(fake_openai: FakeOpenAI, case: Case, mode: str) -> None:
    """The notice for the error object is the notice for the HTTP error, but for how it was sent
    (a context overflow's notice names neither; the agent compacts and asks once more first)."""
    with solo_lab(fake_openai, output_mode=mode) as lab:
        sent = {"code": case.code, "error_type": case.error_type}
        fake_openai.default = always(http_error(case.status, case.message, **sent))
        as_http = _notice(lab.ask(QUESTION, timeout=ASK_TIMEOUT))
        fake_openai.default = always(error_at_200(case.message, **sent))
        as_object = _notice(lab.ask(QUESTION, timeout=ASK_TIMEOUT))
        assert all(b.get("stream", False) is (mode == "tool") for b in fake_openai.bodies)
        assert as_http.endswith(CONTEXT_FULL) if case.overflow else f"HTTP {case.status}" in as_http, as_http
        assert as_object == as_http.replace(f"HTTP {case.status}", SENT[mode])
        assert_answers_afterwards(lab, fake_openai)


def test_a_rate_limit_sent_with_status_200_names_no_wait_the_server_did_not_ask_for(fake_openai: FakeOpenAI) -> None:
    """No Retry-After comes with an error object: the notice invents no number of seconds."""
    fake_openai.push(error_at_200("Rate limit exceeded", code=429))
    with solo_lab(fake_openai, output_mode="prompted") as lab:
        notice = _notice(lab.ask(QUESTION, timeout=ASK_TIMEOUT))
        assert notice == (
            "@Solo could not answer: the provider is rate-limiting requests "
            "(error sent with status 200: Rate limit exceeded); wait a moment and ask again"
        )


KEY = "sk-error-object-0123456789abcdef"


@pytest.mark.parametrize("mode", ["prompted", "tool"], ids=["whole-body", "mid-stream"])
def test_a_refused_key_the_server_echoes_is_told_without_the_key(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """``invalid_api_key`` with the key in its message, as OpenAI words it: told as a 401 is,
    the key redacted."""
    monkeypatch.setenv("AKLAB_ERROR_OBJECT_KEY", KEY)
    fake_openai.push(error_at_200(f"Incorrect API key provided: {KEY}.", code="invalid_api_key"))
    with solo_lab(fake_openai, output_mode=mode, api_key_env="AKLAB_ERROR_OBJECT_KEY") as lab:
        notice = _notice(lab.ask(QUESTION, timeout=ASK_TIMEOUT))
        assert notice == (
            f"@Solo could not answer: the provider refused the request ({SENT[mode]}: Incorrect API key "
            f"provided: {REDACTED}.); check the API key variable, and that the key may use this model"
        )
