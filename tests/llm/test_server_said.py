"""What the server said reaches the human's notice: how long a rate limit asks to wait, and
the message of an error the server sent with status 200 (whole, or inside a stream).

Through pydantic-ai's real OpenAI model, built by aklab from a ``ModelConfig``, against the
loopback fake (``tests/fakeserver.py``).
"""

from __future__ import annotations

import email.utils
import json
import re
import time

import pytest

from tests.fakeserver import Behaviour, FakeOpenAI, error_at_200, http_error, raw
from tests.llm.test_openai_faults import (
    ASK_TIMEOUT,
    QUESTION,
    _to_human,
    always,
    assert_answered_or_told,
    assert_answers_afterwards,
    modes,
    solo_lab,
)

RATE_LIMITED = "@Solo could not answer: the provider is rate-limiting requests (HTTP 429: slow down)"


def _http_date(seconds_from_now: float) -> str:
    return email.utils.formatdate(time.time() + seconds_from_now, usegmt=True)


@modes
@pytest.mark.parametrize(
    ("retry_after", "wait"),
    [(20, r"20 s"), ("1.5", r"2 s"), (600, r"10 min"), ("+90", r"(8\d|9\d) s"), (None, None)],
    ids=["seconds", "fraction", "minutes", "http-date", "none"],
)
def test_a_429_says_how_long_the_server_asks_to_wait(
    fake_openai: FakeOpenAI, mode: str, retry_after: float | str | None, wait: str | None
) -> None:
    if isinstance(retry_after, str) and retry_after.startswith("+"):  # an HTTP-date, from now
        retry_after = _http_date(float(retry_after))
    fake_openai.push(http_error(429, "slow down", retry_after=retry_after))
    with solo_lab(fake_openai, output_mode=mode) as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert len(fake_openai.bodies) == 1, "retries=0: the request is sent once"
        assert_answered_or_told(first, r"HTTP 429: slow down")
        [notice] = _to_human(first, "notification")
        then = f"it asks to wait {wait}, then ask again" if wait else "wait a moment and ask again"
        assert re.fullmatch(rf"{re.escape(RATE_LIMITED)}; {then}", notice.content), notice.content
        assert_answers_afterwards(lab, fake_openai)


def test_a_wait_longer_than_the_sdk_waits_for_is_told_at_once_and_not_retried(fake_openai: FakeOpenAI) -> None:
    """With the SDK's retry on (``retries=1``), a 429 asking for 10 minutes is not waited for
    (the openai SDK waits two minutes at most): the human is told at once how long to wait."""
    fake_openai.default = always(http_error(429, "slow down", retry_after=600))
    with solo_lab(fake_openai, retries=1) as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert len(fake_openai.bodies) == 1
        [notice] = _to_human(first, "notification")
        assert notice.content == f"{RATE_LIMITED}; it asks to wait 10 min, then ask again"


# -- an error object sent with status 200 ------------------------------------------------------------

#: An error object naming no status (no code, no type): its message is all there is to tell.
#: One that does is told as that status is (``test_error_objects.py``).
NOT_LOADED = json.dumps({"error": {"message": "model failed to load"}})


@pytest.mark.parametrize(
    ("mode", "fault"),
    [("prompted", error_at_200("model failed to load")), ("tool", raw(NOT_LOADED))],
    ids=["plain", "json-answering-a-stream"],
)
def test_an_error_sent_with_status_200_reaches_the_notice_with_the_servers_message(
    fake_openai: FakeOpenAI, mode: str, fault: Behaviour
) -> None:
    """As llama.cpp, vLLM or a gateway may answer: a 200 whose body is an error object, not a
    completion (for a streamed request too, as JSON instead of a stream)."""
    fake_openai.push(fault)
    with solo_lab(fake_openai, output_mode=mode) as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert fake_openai.bodies[0].get("stream", False) is (mode == "tool")
        [notice] = _to_human(first, "notification")
        assert notice.content == (
            "@Solo could not answer: the model server sent an error instead of an answer "
            "(model failed to load); ask again"
        )
        assert_answers_afterwards(lab, fake_openai)


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (
            error_at_200("model overloaded"),
            "the model server sent an error part-way through its answer (model overloaded); ask again",
        ),
        (
            error_at_200("model overloaded", error_type="server_error"),
            "the model server failed (error sent mid-stream: model overloaded); ask again",
        ),
        (
            error_at_200("too many requests", code="rate_limit_exceeded"),
            "the provider is rate-limiting requests (error sent mid-stream: too many requests); "
            "wait a moment and ask again",
        ),
    ],
    ids=["unclassified", "server-error", "rate-limit"],
)
def test_an_error_event_mid_stream_reaches_the_notice_with_the_servers_message(
    fake_openai: FakeOpenAI, fault: Behaviour, says: str
) -> None:
    """``data: {"error": {...}}`` after some content: the status 200 is not called an HTTP error,
    and the status pydantic-ai infers from the error's code or type is not shown as sent."""
    fake_openai.push(fault)
    with solo_lab(fake_openai, output_mode="tool") as lab:
        first = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert fake_openai.bodies[0].get("stream"), "tool mode in a lab streams"
        [notice] = _to_human(first, "notification")
        assert notice.content == f"@Solo could not answer: {says}"
        assert_answers_afterwards(lab, fake_openai)
