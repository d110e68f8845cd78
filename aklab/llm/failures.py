"""One readable line for a failed model call, with what the human can do about it.

Provider errors arrive as many types (pydantic-ai's ``ModelHTTPError``, the SDKs'
connection and timeout errors, validation retries running out). The human sees one line
that says what happened and what to try; the original stays as ``__cause__``.
"""

from __future__ import annotations

import contextlib
import email.utils
import math
import re
from datetime import UTC, datetime
from typing import Any

from pydantic_ai.exceptions import ModelAPIError, ModelContextWindowExceededError

from aklab._text import one_line
from aklab.errors import AklabError
from aklab.llm._server_said import (
    TEMPLATE_ADVICE,
    cut,
    names_no_model,
    server_message,
    template_refusal,
    what_to_change,
)
from aklab.secrets import redact, shown_url

__all__ = [
    "CONTEXT_FULL",
    "CONTEXT_RAN_OUT",
    "ERROR_CUT_OFF",
    "RunCancelledError",
    "describe_failure",
    "is_context_overflow",
    "is_cut_response",
]


class RunCancelledError(AklabError):
    """The run was cancelled by ``ReactAgent.interrupt()`` while its request was in flight."""


CONTEXT_FULL = "context full: /compact or /clear"
#: llama-server's "Context size has been exceeded." (a 500, mid-stream or as a stream's only
#: event) is not a prompt refused for its length (that is its 400): the room ran out while the
#: answer was written, in a context its parallel requests share. Compacting may not be enough.
CONTEXT_RAN_OUT = (
    "the model server ran out of context room (the answer, and its other requests, need it too): "
    "/compact or /clear, or start the server with a larger context (-c) or fewer parallel slots (-np)"
)
_RAN_OUT = re.compile(r"context size has been exceeded", re.IGNORECASE)

#: The ``type`` of the error the HTTP client makes of an error event a stream ended inside,
#: cut short (``profiles._sse_errors``): its message is what could be read of the server's.
ERROR_CUT_OFF = "aklab.error_cut_off"

_OVERFLOW = re.compile(
    r"context (length|window|size)|maximum context|exceeds? (the )?(context|max)|too many tokens|"
    r"prompt is too long|requested tokens|n_ctx|context_length_exceeded|reduce the length of the messages",
    re.IGNORECASE,
)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def is_context_overflow(exc: BaseException) -> bool:
    """Does the error say the prompt did not fit the model's context?"""
    for e in _chain(exc):
        if isinstance(e, ModelContextWindowExceededError):  # pydantic-ai read it from the code or message
            return True
        status = getattr(e, "status_code", None)
        body = getattr(e, "body", None)
        text = f"{e} {body if body is not None else ''}"
        if (status in (None, 400, 413, 422, 500)) and _OVERFLOW.search(text):
            return True
    return False


_CUT_NAMES = {"RemoteProtocolError", "ReadError", "IncompleteRead", "ChunkedEncodingError"}
_CUT = re.compile(r"peer closed connection|incomplete chunked read|connection (was )?(reset|closed)", re.IGNORECASE)


def is_cut_response(exc: BaseException) -> bool:
    """Did the server accept the request and then drop the response part-way?"""
    return any(type(e).__name__ in _CUT_NAMES or _CUT.search(str(e)) for e in _chain(exc))


def _status(exc: BaseException) -> int | None:
    for e in _chain(exc):
        status = getattr(e, "status_code", None)
        if isinstance(status, int):
            return status
    return None


#: The HTTP status a server would have sent for an error object it sent with status 200 instead,
#: by the object's ``code`` (first) or ``type``: OpenAI's names, Anthropic's, llama.cpp's.
_STATUS_OF = {
    **dict.fromkeys(("rate_limit_exceeded", "rate_limit_error", "too_many_requests"), 429),
    **dict.fromkeys(("overloaded", "overloaded_error", "server_is_overloaded", "service_unavailable"), 503),
    **dict.fromkeys(("unavailable_error", "service_unavailable_error"), 503),
    **dict.fromkeys(("server_error", "api_error"), 500),
    **dict.fromkeys(("invalid_api_key", "authentication_error"), 401),
    "permission_error": 403,
    **dict.fromkeys(("model_not_found", "not_found_error"), 404),
    **dict.fromkeys(("context_length_exceeded", "exceed_context_size_error", "invalid_request_error"), 400),
}


def _status_sent_as_200(exc: BaseException) -> int | None:
    """The status an error object sent with status 200 stands for: its ``code`` when that is
    one (OpenRouter sends ``{"code": 429, ...}``), else the status its code or type names."""
    for e in _chain(exc):
        if isinstance(e, ModelAPIError):
            for name in (e.provider_error_code, e.provider_error_type):
                if name is not None and name.isdigit() and 400 <= int(name) < 600:
                    return int(name)
                if name in _STATUS_OF:
                    return _STATUS_OF[name]
    return None


def _first_line(exc: BaseException | str, limit: int = 160) -> str:
    return one_line(redact(str(exc)), limit)  # redacted before it is cut: no part of a key is left


def _retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked to wait before the next request, if an error in the chain says:
    pydantic-ai's reading of the headers, else ``retry-after-ms`` or ``Retry-After`` (seconds or
    an HTTP-date) of the response itself."""
    for e in _chain(exc):
        seconds = getattr(e, "retry_after", None)
        if isinstance(seconds, int | float) and not isinstance(seconds, bool):
            return float(seconds)
        try:
            headers = e.response.headers  # type: ignore[attr-defined]  # the SDKs' status errors; httpx's raise
        except Exception:
            headers = getattr(e, "headers", None)
        if hasattr(headers, "get") and (seconds := _seconds_in(headers)) is not None:
            return seconds
    return None


def _seconds_in(headers: Any) -> float | None:
    with contextlib.suppress(TypeError, ValueError):
        if (ms := headers.get("retry-after-ms")) is not None:
            return float(ms) / 1000
    value = headers.get("retry-after")
    if not isinstance(value, str):
        return None
    with contextlib.suppress(ValueError):
        return float(value)
    with contextlib.suppress(TypeError, ValueError, IndexError):
        when = email.utils.parsedate_to_datetime(value)
        return (when - datetime.now(when.tzinfo or UTC)).total_seconds()
    return None


def _wait(seconds: float | None) -> str | None:
    """``seconds`` as a person reads a wait: "20 s", "5 min", "2 h"; None for no wait at all."""
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return None
    if seconds < 120:
        return f"{math.ceil(seconds)} s"
    if seconds < 2 * 3600:
        return f"{math.ceil(seconds / 60)} min"
    return f"{math.ceil(seconds / 3600)} h"


def _request_url(exc: BaseException) -> str | None:
    """The URL of the HTTP request that failed, if an error in the chain carries it."""
    for e in _chain(exc):
        try:
            return str(e.request.url)  # type: ignore[attr-defined]  # httpx's errors raise if they have none
        except Exception:
            continue
    return None


def _own_server_down(url: str) -> str | None:
    """When ``url`` is aklab's own local server and aklab gave up on it: why, and what to do."""
    from aklab.llm import local_auto

    why = local_auto.down_at(url)
    return None if why is None else f"aklab's own server there {why}; %aklab model local:smollm2 starts a new one"


def describe_failure(exc: BaseException, *, timeout: float | None = None) -> str:
    """What went wrong, in one line, and what to do; registered keys and auth headers redacted."""
    return redact(_describe(exc, timeout))


def _describe(exc: BaseException, timeout: float | None) -> str:
    names = {type(e).__name__ for e in _chain(exc)}
    status = _status(exc)
    if is_context_overflow(exc):
        ran_out = any(_RAN_OUT.search(f"{e} {getattr(e, 'body', '')}") for e in _chain(exc))
        return CONTEXT_RAN_OUT if ran_out else CONTEXT_FULL
    if names & {"APITimeoutError", "ReadTimeout", "TimeoutException", "TimeoutError", "ConnectTimeout"}:
        after = f" within {timeout:g} s" if timeout else ""
        return f"the model did not answer{after}; try again, or raise the timeout (%aklab model ... --timeout S)"
    if is_cut_response(exc):
        return "the model server dropped the response part-way; ask again"
    if names & {"APIConnectionError", "ConnectError", "ConnectionError", "ConnectionRefusedError"}:
        url = _request_url(exc)
        down = None if url is None else _own_server_down(url)
        if down is not None:
            return f"cannot reach the model server: {down}"
        where = "" if url is None else f" at {shown_url(url, path=False)}"  # never its path or credentials
        return f"cannot reach the model server{where} ({_first_line(exc, 80)}); is it running? (check base_url)"
    # What the server said, if anything: in an HTTP error, or in an error object it sent with
    # status 200 (whole, or mid-stream). Such an object gets the advice of the status it stands
    # for: pydantic-ai gives a mid-stream one the status its code or type implies, where it sees
    # one; the rest is read here from the same code or type.
    sent = any(isinstance(e, ModelAPIError) for e in _chain(exc))
    at_200 = sent and status is None and (status := _status_sent_as_200(exc)) is not None
    message = server_message(_chain(exc)) if status is not None or sent else None
    said = None if message is None else cut(message)
    detail = f": {said}" if said else ""
    mid_stream = any(getattr(e, "in_stream", False) is True for e in _chain(exc))
    if any(getattr(e, "provider_error_type", None) == ERROR_CUT_OFF for e in _chain(exc)):
        read = f" ({said})" if said else ""  # as far as it came, "…" where it was cut
        told = "the model server sent an error mid-stream, but the stream ended before it could be read whole"
        return f"{told}{read}; ask again"
    how = "error sent mid-stream" if mid_stream else "error sent with status 200" if at_200 else f"HTTP {status}"
    http = f"{how}{detail}"
    if status == 429:
        # The SDK may have waited and asked again already (ModelConfig.retries); the wait
        # named is the one the server asked for last.
        wait = _wait(_retry_after(exc))
        then = f"it asks to wait {wait}, then ask again" if wait else "wait a moment and ask again"
        return f"the provider is rate-limiting requests ({http}); {then}"
    if status in (401, 403):
        return (
            f"the provider refused the request ({http}); check the API key variable, "
            "and that the key may use this model"
        )
    refused = template_refusal(message) if status is not None and status >= 400 else None
    if refused is not None:  # the template's words, not the server's preamble before them
        return f"the model's chat template refused the conversation ({how}: {cut(refused)}); {TEMPLATE_ADVICE}"
    if status is not None and status >= 500:
        return f"the model server failed ({http}); ask again"
    # A 404 (Ollama's message says which model, and to pull it), or another refusal that says
    # the model is unknown (pydantic-ai reads ``model_not_found``; gateways answer 400).
    rejected = status is not None and 400 <= status < 500
    if status == 404 or (rejected and ("ModelNotFoundError" in names or names_no_model(message))):
        return f"the model or endpoint was not found ({http}); check the model name and base_url"
    if rejected:
        return f"the model server rejected the request ({http}); {what_to_change(message)}"
    if said:  # an error object sent with status 200 that names no status
        where = "part-way through its answer" if mid_stream else "instead of an answer"
        return f"the model server sent an error {where} ({said}); ask again"
    if names & {"IncompleteToolCall", "OutputTokenLimitExceeded"}:  # a tool call, or native JSON, cut off
        return (
            "the answer was cut off at the model's max_tokens limit; raise it "
            "(%aklab model ... --max-tokens N, or ModelConfig(max_tokens=N)) or ask for less"
        )
    if any("decode" in str(e).lower() for e in _chain(exc)) and names & {"ModelAPIError", "JSONDecodeError"}:
        return f"the model server sent a garbled response ({_first_line(exc, 80)}); ask again"
    if "IndexError" in names and _raised_in_model_client(exc):
        return (
            "the model server sent a completion with no choices in it; ask again, and check base_url "
            "if it keeps happening"
        )
    if "UnexpectedModelBehavior" in names:
        text = _first_line(_PYDANTIC_AI_ADVICE.sub("", str(exc)))
        if "invalid response from" in text.lower() and "chat completions endpoint" in text.lower():
            return f"the server did not answer as a chat-completions endpoint ({_first_line(exc, 100)}); check base_url"
        if "retries" in text.lower():
            return f"the model's answer could not be used ({text}); ask again or rephrase"
        return f"the model answered in a form that could not be used ({text}); ask again"
    return f"{type(exc).__name__}: {_first_line(exc)}; ask again, or /clear if it keeps failing"


#: pydantic-ai's advice to its own users (raise a retry limit aklab sets, read its docs):
#: nothing an aklab user can act on.
_PYDANTIC_AI_ADVICE = re.compile(r"\s*Consider raising the retry limit.*$", re.IGNORECASE | re.DOTALL)


def _raised_in_model_client(exc: BaseException) -> bool:
    """Whether an error in the chain was raised inside pydantic-ai's model classes or a
    provider SDK (reading a response), not in aklab's own code."""
    for e in _chain(exc):
        tb = e.__traceback__
        last = None
        while tb is not None:
            last = tb.tb_frame.f_code.co_filename
            tb = tb.tb_next
        if last is not None and ("pydantic_ai/models/" in last or "/openai/" in last):
            return True
    return False
