"""An error llama.cpp's server sends mid-stream as an SSE ``error`` reaches the notice.

llama-server has sent a failure inside a stream in two shapes the OpenAI SDK's SSE decoder
passes over: a line ``error: {...}`` (a field the SSE format does not know, so ignored) and an
``event: error`` whose ``data:`` is the error object itself, not ``{"error": {...}}`` (its
``event:`` line before or after the ``data:``). Either way the stream ended with nothing to say
why. The client aklab builds for an OpenAI chat model reads both as the ``data: {"error": {...}}``
event the SDK does raise; an error event the stream ends inside is told as an error that could
not be read whole, with what came of it.

Through pydantic-ai's real OpenAI model, built by aklab from a ``ModelConfig``, against the
loopback fake (``tests/fakeserver.py``); tool mode, since the lab streams in it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import httpx2
import pytest

from aklab.llm.failures import CONTEXT_FULL, ERROR_CUT_OFF
from aklab.llm.profiles._sse_errors import SSEErrorStream
from aklab.secrets import REDACTED
from tests.fakeserver import FakeOpenAI, SseError, error_at_200, sse_tail
from tests.llm.test_openai_faults import ASK_TIMEOUT, QUESTION, _to_human, always, assert_answers_afterwards, solo_lab

FORMS: list[SseError] = ["field", "event", "event-last", "data"]
FORM_IDS = ["error-line", "event-error", "event-error-after-its-data", "data-error"]

#: llama-server's words when a slot fails, and when the prompt outgrows its context.
CRASHED = "failed to decode the batch"
FULL = "the request exceeds the available context size, try increasing it"


def _notice(fake: FakeOpenAI, **model: object) -> str:
    with solo_lab(fake, output_mode="tool", **model) as lab:
        messages = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert fake.bodies[0].get("stream"), "tool mode in a lab streams"
        [notice] = _to_human(messages, "notification")
        assert not _to_human(messages, "response"), "the answer so far is no reply"
        assert_answers_afterwards(lab, fake)
        return notice.content


@pytest.mark.parametrize("sse", FORMS, ids=FORM_IDS)
def test_an_sse_error_from_llama_server_reaches_the_notice_with_its_message(
    fake_openai: FakeOpenAI, sse: SseError
) -> None:
    fake_openai.push(error_at_200(CRASHED, code=500, error_type="server_error", sse=sse))
    assert _notice(fake_openai) == (
        f"@Solo could not answer: the model server failed (error sent mid-stream: {CRASHED}); ask again"
    )


@pytest.mark.parametrize("sse", FORMS, ids=FORM_IDS)
def test_a_full_context_told_in_an_sse_error_is_a_full_context(fake_openai: FakeOpenAI, sse: SseError) -> None:
    """Told as llama-server's HTTP 400 for it is: the notice says /compact or /clear."""
    fake_openai.default = always(error_at_200(FULL, code=400, error_type="exceed_context_size_error", sse=sse))
    assert _notice(fake_openai) == f"@Solo could not answer: {CONTEXT_FULL}"


@pytest.mark.parametrize("sse", FORMS[:3], ids=FORM_IDS[:3])
def test_an_sse_error_echoing_the_key_is_told_without_it(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, sse: SseError
) -> None:
    key = "sk-sse-error-0123456789abcdef"
    monkeypatch.setenv("AKLAB_SSE_ERROR_KEY", key)
    fake_openai.push(error_at_200(f"no slot for key {key}", code=503, error_type="unavailable_error", sse=sse))
    notice = _notice(fake_openai, api_key_env="AKLAB_SSE_ERROR_KEY")
    assert notice == (
        f"@Solo could not answer: the model server failed (error sent mid-stream: no slot for key {REDACTED}); "
        "ask again"
    )


CUT = (
    "@Solo could not answer: the model server sent an error mid-stream, "
    "but the stream ended before it could be read whole"
)


@pytest.mark.parametrize("drop", [False, True], ids=["body-ended", "connection-dropped"])
@pytest.mark.parametrize(
    ("tail", "read"),
    [
        ('error: {"code":500,"message":"failed to dec', " (failed to dec…)"),
        ('event: error\r\ndata: {"code": 500, "mess', ' ({"code": 500, "mess…)'),
        ('event: error\ndata: {"code":500,"message":"failed to decode the batch","ty', f" ({CRASHED})"),
        ("event: error\n", ""),
    ],
    ids=["error-line", "event-error", "message-whole", "no-data"],
)
def test_an_error_event_the_stream_ends_inside_is_told_as_an_error_not_read_whole(
    fake_openai: FakeOpenAI, tail: str, read: str, drop: bool
) -> None:
    """Not the answer so far as a reply, not "dropped", not a JSON error: what came of the error."""
    fake_openai.push(sse_tail(tail, drop=drop))
    assert _notice(fake_openai) == f"{CUT}{read}; ask again"


KEY = "sk-sse-cut-0123456789abcdef"


@pytest.mark.parametrize(
    ("message", "read"),
    [
        (f"no slot for key {KEY}, try la", f"no slot for key {REDACTED}, try la…"),
        (f"no slot for {KEY[:15]}", "no slot for…"),
    ],
    ids=["key-whole", "cut-inside-the-key"],
)
def test_an_error_event_cut_off_is_told_without_the_key_it_echoes(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, message: str, read: str
) -> None:
    """Redaction knows the whole key only: a key cut is left out with the last word."""
    monkeypatch.setenv("AKLAB_SSE_CUT_KEY", KEY)
    fake_openai.push(sse_tail(f'error: {{"code":503,"message":"{message}'))
    assert _notice(fake_openai, api_key_env="AKLAB_SSE_CUT_KEY") == f"{CUT} ({read}); ask again"


# -- the rewriting, byte by byte -------------------------------------------------------------------


class _Bytes(httpx2.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def _rewritten(body: bytes, size: int) -> bytes:
    chunks = [body[i : i + size] for i in range(0, len(body), size)]

    async def read() -> bytes:
        return b"".join([part async for part in SSEErrorStream(_Bytes(chunks))])

    return asyncio.run(read())


LLAMA_ERROR = b'{"code":500,"message":"failed","type":"server_error"}'
AS_SDK_ERROR = b'data: {"error": {"code": 500, "message": "failed", "type": "server_error"}}'


@pytest.mark.parametrize("size", [1, 2, 7, 4096], ids=lambda n: f"chunks-of-{n}")
@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_the_rewriting_holds_across_chunk_boundaries_and_line_ends(size: int, end: bytes) -> None:
    chunk = b'data: {"choices": []}' + end + end
    body = chunk + b"error: " + LLAMA_ERROR + end + end + chunk + b"event: error" + end + b"data: " + LLAMA_ERROR
    body += end + end + b"event: error" + end + b'data: {"error": "as sent"}' + end + end + b": comment" + end
    assert _rewritten(body, size) == (
        chunk
        + AS_SDK_ERROR
        + end
        + end
        + chunk
        + AS_SDK_ERROR
        + end
        + end
        + b"event: error"
        + end
        + b'data: {"error": "as sent"}'
        + end
        + end
        + b": comment"
        + end
    )


def test_a_stream_without_errors_passes_unchanged_and_a_last_unended_line_is_kept() -> None:
    body = b'data: {"a": 1}\n\nevent: message\ndata: {"b": "error: no"}\n\n: errors are not here\ndata: [DONE]'
    assert _rewritten(body, 5) == body


@pytest.mark.parametrize("size", [1, 2, 7, 4096], ids=lambda n: f"chunks-of-{n}")
@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_an_event_error_is_rewritten_whatever_the_order_of_its_fields(size: int, end: bytes) -> None:
    chunk = b'data: {"choices": []}' + end + end
    body = chunk + b"data: " + LLAMA_ERROR + end + b"id: 7" + end + b"event:error" + end + end + chunk
    body += b"id: 8" + end + b"data: " + LLAMA_ERROR + end + b"event: error" + end + b": note" + end + end + chunk
    assert _rewritten(body, size) == chunk + AS_SDK_ERROR + end + end + chunk + AS_SDK_ERROR + end + end + chunk


class _Counted(httpx2.AsyncByteStream):
    """``chunks``, noting before each (and at the end) how many events were dispatched so far."""

    def __init__(self, chunks: list[bytes], dispatched: list[str]) -> None:
        self.chunks, self.dispatched, self.counts = chunks, dispatched, list[int]()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.counts.append(len(self.dispatched))
            yield chunk
        self.counts.append(len(self.dispatched))


def _dispatch(chunks: list[bytes], *, hooked: bool) -> tuple[list[str], list[int]]:
    """The events the OpenAI SDK's own SSE decoder dispatches from ``chunks``, and how many it
    had dispatched when each next chunk was asked for: the stream is pulled, so a chunk is asked
    for only when everything the ones before it let through is dispatched."""
    from openai._streaming import SSEDecoder

    dispatched: list[str] = []
    source = _Counted(chunks, dispatched)
    stream: httpx2.AsyncByteStream = SSEErrorStream(source) if hooked else source

    async def read() -> None:
        async for sse in SSEDecoder().aiter_bytes(stream.__aiter__()):
            dispatched.append(sse.data)

    asyncio.run(read())
    return dispatched, source.counts


@pytest.mark.parametrize("size", [1, 2, 7, 64, 4096], ids=lambda n: f"chunks-of-{n}")
@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_the_hook_holds_back_no_event_past_the_chunk_that_ends_it(size: int, end: bytes) -> None:
    """An event is held until its blank line (an ``event: error`` may follow its data), and the
    SDK dispatches one only there: every event is dispatched at the very chunk it is without
    the hook, the words in it too ("error" among them)."""
    events = [b'data: {"choices": [{"delta": {"content": "token %d, no error: fine"}}]}' % i for i in range(40)]
    body = b"".join(e + end + (b": ping" + end if i % 7 == 0 else b"") + end for i, e in enumerate(events))
    chunks = [body[i : i + size] for i in range(0, len(body), size)]
    assert _dispatch(chunks, hooked=True) == _dispatch(chunks, hooked=False)
    assert len(_dispatch(chunks, hooked=True)[0]) == len(events)


def test_a_long_line_passes_in_time_linear_in_its_length() -> None:
    """A 32 KB ``data:`` line (a tool call's arguments sent whole) in 4 KiB chunks: the hook
    looked for line ends over the unended line again at every chunk, 17 s for this one."""
    body = b'data: {"choices": [{"delta": {"content": "' + b"x" * 32_000 + b'"}}]}\n\n'
    start = time.perf_counter()
    assert _rewritten(body, 4096) == body
    assert time.perf_counter() - start < 1.0


# -- an error event the stream ends inside ----------------------------------------------------------

#: How the hook tells an error event cut off: its message as far as it came, else the text.
CUT_TAILS = {
    "error-line": (b'error: {"code":500,"message":"failed to dec', "failed to dec…"),
    "event-error": (b'event: error\ndata: {"code": 500, "mess', '{"code": 500, "mess…'),
    "message-whole": (b'event: error\ndata: {"code":500,"message":"failed","ty', "failed"),
    "no-data": (b"event: error\n", ""),
    "escape-cut": (b'error: {"message":"caf\\u00', "caf…"),
}


def _cut_error(message: str) -> bytes:
    return b"data: " + json.dumps({"error": {"message": message, "type": ERROR_CUT_OFF}}).encode() + b"\n\n"


@pytest.mark.parametrize("size", [1, 3, 4096], ids=lambda n: f"chunks-of-{n}")
@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
@pytest.mark.parametrize(("tail", "message"), CUT_TAILS.values(), ids=CUT_TAILS.keys())
def test_an_error_event_the_stream_ends_inside_is_told_as_far_as_it_came(
    tail: bytes, message: str, size: int, end: bytes
) -> None:
    chunk = b'data: {"choices": []}' + end + end
    assert _rewritten(chunk + tail.replace(b"\n", end), size) == chunk + _cut_error(message)


def test_an_error_event_whole_but_for_its_blank_line_is_told_as_sent() -> None:
    chunk = b'data: {"choices": []}\n\n'
    assert _rewritten(chunk + b"error: " + LLAMA_ERROR, 5) == chunk + AS_SDK_ERROR + b"\n\n"
    assert _rewritten(chunk + b"event: error\ndata: " + LLAMA_ERROR, 5) == chunk + AS_SDK_ERROR + b"\n\n"
    assert _rewritten(chunk + b"data: " + LLAMA_ERROR + b"\nevent: error", 5) == chunk + AS_SDK_ERROR + b"\n\n"
    told = b'data: {"error": {"message": "failed to load model"}}\n\n'
    assert _rewritten(chunk + b"error: failed to load model\n", 5) == chunk + told


class _Dropped(_Bytes):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        raise httpx2.RemoteProtocolError("peer closed connection without sending complete message body")


def _until_dropped(body: bytes) -> bytes:
    async def read() -> bytes:
        parts = []
        with pytest.raises(httpx2.RemoteProtocolError):
            async for part in SSEErrorStream(_Dropped([body[i : i + 3] for i in range(0, len(body), 3)])):
                parts.append(part)
        return b"".join(parts)

    return asyncio.run(read())


def test_a_connection_dropped_inside_an_error_event_tells_the_error_first() -> None:
    """The SDK raises the error and reads no further; read on, the drop is raised as it came."""
    chunk = b'data: {"choices": []}\n\n'
    assert _until_dropped(chunk + b'error: {"code":500,"message":"failed to dec') == chunk + _cut_error(
        "failed to dec…"
    )
    assert _until_dropped(chunk + b'data: {"choices": [1') == chunk + b'data: {"choices": [1'
