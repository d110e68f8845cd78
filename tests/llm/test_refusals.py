"""A request the server refuses is told with the server's own words, and what to change.

A 400 (or an error object typed ``invalid_request_error`` sent with status 200, whole or
mid-stream) says what the server would not take: a parameter, the model's name, the body. The
notice carries that message (redacted, on one line, cut where it reads well) and, where the
message says plainly what aklab sent that the server refuses, the setting that stops sending
it; otherwise the general advice to check the model's settings.

Through pydantic-ai's real OpenAI model, built by aklab from a ``ModelConfig``, against the
loopback fake (``tests/fakeserver.py``).
"""

from __future__ import annotations

import json

import pytest

from aklab.llm._server_said import TEMPLATE_ADVICE
from aklab.secrets import REDACTED
from tests.fakeserver import Behaviour, FakeOpenAI, echo, error_at_200, http_error, raw
from tests.llm.test_openai_faults import ASK_TIMEOUT, QUESTION, _to_human, always, assert_answers_afterwards, solo_lab

SETTINGS = "asking again sends the same request: check the model's settings (%aklab model ... options, ModelConfig)"
PROMPTED = "use another output mode (%aklab model ... --output-mode prompted)"
TOOLS = "use %aklab model ... --output-mode prompted, or a server with tool calling (llama-server: --jinja)"
NO_STREAM = "use %aklab model ... --output-mode prompted, which does not stream"

#: What real servers answer, and the advice the notice gives for it.
REFUSALS = {
    "openai-response-format": (
        "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
        PROMPTED,
    ),
    "openai-tools": ("tools is not supported in this model.", TOOLS),
    "llama-server-tools": ("tools param requires --jinja flag", TOOLS),
    "vllm-tool-choice": (
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        TOOLS,
    ),
    "ollama-tools": ("registry.ollama.ai/library/gemma:2b does not support tools", TOOLS),
    "azure-stream-options": ("Unrecognized request argument supplied: stream_options", NO_STREAM),
    "a-tool-named-but-not-refused": ("Invalid 'tools[0].function.name': string does not match pattern.", SETTINGS),
    "unsupported-value": (
        "Unsupported value: 'temperature' does not support 0.2 with this model. "
        "Only the default (1) value is supported.",
        SETTINGS,
    ),
}

#: How the notice names the error: as an HTTP 400, the status 200 body answering a plain
#: request, the event inside a stream (the lab streams in tool mode).
SENT = {
    "http-400": ("prompted", "HTTP 400"),
    "whole-body": ("prompted", "error sent with status 200"),
    "mid-stream": ("tool", "error sent mid-stream"),
}


def _refusal(how: str, message: str, code: str | None = None) -> Behaviour:
    if how == "http-400":
        return http_error(400, message, code=code, error_type="invalid_request_error")
    return error_at_200(message, code=code, error_type="invalid_request_error")


def _notice(fake: FakeOpenAI, fault: Behaviour, mode: str = "prompted") -> str:
    fake.default = always(fault)
    with solo_lab(fake, output_mode=mode) as lab:
        messages = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        [notice] = _to_human(messages, "notification")
        assert not _to_human(messages, "response")
        assert_answers_afterwards(lab, fake)
        return notice.content


@pytest.mark.parametrize("how", SENT, ids=SENT.keys())
@pytest.mark.parametrize(("message", "advice"), REFUSALS.values(), ids=REFUSALS.keys())
def test_a_refused_request_is_told_with_the_servers_words_and_what_to_change(
    fake_openai: FakeOpenAI, how: str, message: str, advice: str
) -> None:
    mode, sent = SENT[how]
    notice = _notice(fake_openai, _refusal(how, message), mode)
    assert notice == f"@Solo could not answer: the model server rejected the request ({sent}: {message}); {advice}"


@pytest.mark.parametrize("how", SENT, ids=SENT.keys())
@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("The model `gpt-9` does not exist or you do not have access to it.", "model_not_found"),
        ("The model `qwen2.5:7b` does not exist.", None),
        ("Invalid model name passed in model=gpt-9", None),
    ],
    ids=["openai-code", "vllm-message", "litellm-message"],
)
def test_a_model_the_server_does_not_know_is_told_so_whatever_the_status(
    fake_openai: FakeOpenAI, how: str, message: str, code: str | None
) -> None:
    """Gateways answer 400, not 404: the notice says to check the model name all the same."""
    mode, sent = SENT[how]
    notice = _notice(fake_openai, _refusal(how, message, code), mode)
    assert notice == (
        f"@Solo could not answer: the model or endpoint was not found ({sent}: {message}); "
        "check the model name and base_url"
    )


def test_the_output_modes_the_advice_names_send_nothing_refused(fake_openai: FakeOpenAI) -> None:
    """The advice holds: ``prompted`` sends no tools, tool choice, ``stream_options`` or
    ``response_format`` (for a role without tools of its own); ``tool``, ``native`` and
    ``grammar`` send what the advice switches off."""
    sent = {}
    for mode in ("prompted", "tool", "native", "grammar"):
        fake_openai.default = echo
        with solo_lab(fake_openai, output_mode=mode) as lab:
            lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        sent[mode] = set(fake_openai.bodies[-1]) & {"tools", "tool_choice", "stream_options", "response_format"}
    assert sent == {
        "prompted": set(),
        "tool": {"tools", "tool_choice", "stream_options"},
        "native": {"response_format"},
        "grammar": {"response_format"},
    }


def test_a_fastapi_servers_complaint_is_told_with_what_it_names(fake_openai: FakeOpenAI) -> None:
    """A 422 ``{"detail": [...]}`` (vLLM, llama-cpp-python and other FastAPI servers) said nothing
    but "HTTP 422"."""
    detail = [{"type": "extra_forbidden", "loc": ["body", "stream_options"], "msg": "Extra inputs are not permitted"}]
    notice = _notice(fake_openai, raw(json.dumps({"detail": detail}), status=422), "tool")
    assert notice == (
        "@Solo could not answer: the model server rejected the request "
        f"(HTTP 422: stream_options: Extra inputs are not permitted); {NO_STREAM}"
    )


OPENAI_BAD_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library "
    "correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble "
    "figuring out how to fix this, please contact us through our help center at help.openai.com.)"
)


@pytest.mark.parametrize(
    ("message", "said"),
    [
        (OPENAI_BAD_JSON, "We could not parse the JSON body of your request. …"),
        ("Request body " + "is not valid " * 12, "Request body" + " is not valid" * 8 + "…"),
    ],
    ids=["after-a-sentence", "after-a-word"],
)
def test_a_long_message_is_cut_where_it_reads_well(fake_openai: FakeOpenAI, message: str, said: str) -> None:
    notice = _notice(fake_openai, http_error(400, message, error_type="invalid_request_error"))
    assert notice == f"@Solo could not answer: the model server rejected the request (HTTP 400: {said}); {SETTINGS}"


KEY = "sk-refused-0123456789abcdef0123"


@pytest.mark.parametrize("how", SENT, ids=SENT.keys())
def test_a_key_where_the_message_is_cut_is_redacted_not_cut(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The message was cut before it was redacted: a key across the cut left its first part."""
    monkeypatch.setenv("AKLAB_REFUSED_KEY", KEY)
    message = "The project of this key has no access to the parameters sent with this request, see the key " + KEY
    mode, sent = SENT[how]
    fake_openai.default = always(_refusal(how, message))
    with solo_lab(fake_openai, output_mode=mode, api_key_env="AKLAB_REFUSED_KEY") as lab:
        [notice] = _to_human(lab.ask(QUESTION, timeout=ASK_TIMEOUT), "notification")
    assert notice.content == (
        f"@Solo could not answer: the model server rejected the request ({sent}: {message.replace(KEY, REDACTED)}); "
        f"{SETTINGS}"
    )


#: What llama-server answered (HTTP 400) when its chat template raised, with a template that
#: refuses two user messages in a row (tests/local/test_llama_server.py), and what vLLM passes
#: on from jinja2 for Gemma's template given a system message.
TEMPLATE_REFUSALS = {
    "llama-server": (
        "Unable to generate parser for this template. Automatic parser generation failed: \n"
        "Error: Jinja Exception: Conversation roles must alternate: two user messages in a row",
        "Conversation roles must alternate: two user messages in a row",
    ),
    "vllm-jinja2": ("jinja2.exceptions.TemplateError: System role not supported", "System role not supported"),
    "bare-words": (
        "Conversation roles must alternate user/assistant/user/assistant/...",
        "Conversation roles must alternate user/assistant/user/assistant/...",
    ),
}


@pytest.mark.parametrize("status", [400, 500])
@pytest.mark.parametrize(("message", "words"), TEMPLATE_REFUSALS.values(), ids=TEMPLATE_REFUSALS.keys())
def test_a_chat_template_that_refuses_the_conversation_is_told_in_its_own_words(
    fake_openai: FakeOpenAI, status: int, message: str, words: str
) -> None:
    """The template's words were cut away behind the server's preamble ("Unable to generate
    parser for this template. …"), or a 500 read as a server failure to ask again."""
    notice = _notice(fake_openai, http_error(status, message))
    assert notice == (
        f"@Solo could not answer: the model's chat template refused the conversation (HTTP {status}: {words}); "
        f"{TEMPLATE_ADVICE}"
    )
