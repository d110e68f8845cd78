"""Secrets: a server that echoes the API key (or the request's headers) puts it nowhere.

The key is read from the environment by the model's profile, which registers it; the fake
OpenAI-compatible server answers errors whose body carries the key and the Authorization
header it received. Nothing a person or a file sees may hold the key: the human's notices,
``lab.errors()``, the log records, the usage frame, the transcript. Then the team answers
the next question.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from aklab.lab import Lab
from aklab.lab.teamfile import team_from_dict
from aklab.llm import ModelConfig
from aklab.llm.failures import describe_failure
from aklab.llm.profiles import resolve
from aklab.secrets import REDACTED, redact
from tests.fakeserver import Behaviour, FakeOpenAI, echo, error_at_200, http_error

KEY = "sk-hardening-0123456789abcdef"
ENV = "AKLAB_HARDENING_TEST_KEY"
SOLO = {"name": "solo", "entry": "Solo", "roles": [{"role": "Solo", "prompt": "You are Solo."}]}


def _echoing(fake: FakeOpenAI, status: int, template: str) -> Callable[[dict[str, object]], Behaviour]:
    def respond(body: dict[str, object]) -> Behaviour:
        auth = next((v for k, v in fake.requests[-1].headers.items() if k.lower() == "authorization"), "")
        message = template.format(key=KEY, auth=auth)
        return error_at_200(message) if status == 200 else http_error(status, message)

    return respond


ECHOES = [
    (400, "Incorrect API key provided: {key}. Request headers: Authorization: {auth}"),
    (401, "invalid key {key}"),
    (403, "forbidden for {auth}"),
    (404, "model not found for key={key}"),
    (429, "rate limit for {key}"),
    (500, "internal error while handling {{'authorization': '{auth}', 'api-key': '{key}'}}"),
    (502, "upstream said: {key}"),
    (422, "cannot parse request from {auth}; key {key}"),
    (200, "an error object for {auth}, key {key}"),  # sent with status 200, its message told
]


@pytest.mark.parametrize(("status", "template"), ECHOES, ids=[f"{s}" for s, _ in ECHOES])
def test_a_server_echoing_the_key_puts_it_nowhere_and_the_team_still_answers(
    fake_openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    status: int,
    template: str,
) -> None:
    monkeypatch.setenv(ENV, KEY)
    caplog.set_level(logging.DEBUG, logger="aklab")
    caplog.set_level(logging.DEBUG, logger="pykka")
    fake_openai.push(_echoing(fake_openai, status, template))
    fake_openai.default = echo
    cfg = ModelConfig(
        provider="openai-compatible", model="fake", base_url=fake_openai.url, api_key_env=ENV, retries=0, timeout=5
    )
    lab = Lab(team_from_dict(SOLO), model=cfg)
    try:
        replies = lab.ask("What is 2+2?", timeout=10)
        sent = {k.lower(): v for k, v in fake_openai.requests[0].headers.items()}
        assert sent["authorization"] == f"Bearer {KEY}"  # the key did go out
        seen = [
            *(m.content for m in replies),
            *(m.content for m in lab.inbox.messages),
            *lab.errors(),
            *(m.content for m in lab.transcript()),
            lab.usage().to_string(),
            lab.usage(by="request").to_string(),
            caplog.text,
            *(r.getMessage() for r in caplog.records),
            *(r.exc_text or "" for r in caplog.records),
        ]
        leaks = [text for text in seen if KEY in text]
        assert leaks == []
        assert any(REDACTED in text or "HTTP" in text for text in seen)  # the failure was told, redacted
        [again] = lab.ask("What is the capital of France?", timeout=10)
        assert again.content == "OK: What is the capital of France?" and KEY not in again.content
    finally:
        fake_openai.release()
        lab.close()


@pytest.mark.parametrize(
    ("spec", "env"),
    [
        ("openai:gpt-4.1", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4", "ANTHROPIC_API_KEY"),
        ("google:gemini-2.5-flash", "GOOGLE_API_KEY"),
        ("mistral:mistral-large-latest", "MISTRAL_API_KEY"),
        ("openrouter:anthropic/claude-sonnet-4", "OPENROUTER_API_KEY"),
        ("openai-compatible:m", "CUSTOM_SERVER_KEY"),
    ],
)
def test_every_profile_registers_the_key_it_reads(spec: str, env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    key = f"key-for-{spec.split(':')[0]}-{env.lower()}-zz"
    monkeypatch.setenv(env, key)
    options = {"base_url": "http://127.0.0.1:9/v1", "api_key_env": env} if "compatible" in spec else {}
    try:
        resolved = resolve(ModelConfig.parse(spec, **options))
    except Exception as exc:  # an SDK that is not installed: the profile never read the key
        pytest.skip(f"{spec}: {exc}")
    resolved.close()
    assert redact(f"the key is {key}.") == f"the key is {REDACTED}."
    error = RuntimeError(f"server said: bad key {key}")
    assert key not in describe_failure(error) and REDACTED in describe_failure(error)


@pytest.mark.parametrize(
    "line",
    [
        "boom with Authorization: Bearer abcdefgh12345678",
        "headers {'api-key': 'abcdefgh12345678'}",
        "x-api-key=abcdefgh12345678 rejected",
    ],
)
def test_log_records_of_aklab_loggers_are_redacted(caplog: pytest.LogCaptureFixture, line: str) -> None:
    caplog.set_level(logging.INFO, logger="aklab")
    logging.getLogger("aklab.hardening.test").warning("request failed: %s", line)
    try:
        raise RuntimeError(line)
    except RuntimeError:
        logging.getLogger("aklab.hardening.test").exception("and again")
    assert "abcdefgh12345678" not in caplog.text
    assert all("abcdefgh12345678" not in r.getMessage() for r in caplog.records)


def test_a_url_is_shown_without_its_user_name_and_password() -> None:
    from aklab.secrets import shown_url

    assert shown_url("http://user:pw@gpu-box:8000/v1") == "http://gpu-box:8000/v1"
    assert shown_url("http://user:pw@[::1]:11434/v1", path=False) == "http://[::1]:11434"
    assert shown_url("https://api.example.org/v1?x=1", path=False) == "https://api.example.org"
