"""An HTTP client hook that reads llama.cpp's SSE error events as the OpenAI SDK reads an error.

The SDK raises an error event of a stream only in the shape ``data: {"error": {...}}``.
llama.cpp's server (llama-server) has sent one in two other shapes: a line ``error: {...}``,
a field the SSE format does not know (a decoder must ignore it), and ``event: error`` whose
``data:`` is the error object itself. The SDK passes over both, so the stream just ended and
the human read an odd, cut answer. The hook rewrites either, in the bytes of a
``text/event-stream`` response, to the ``data: {"error": {...}}`` line the SDK raises as
``APIError``; pydantic-ai then maps it like any error sent mid-stream. Every other line
passes unchanged, a line at a time.

Only for a client of an OpenAI chat model (Chat Completions streams use no ``event:``
lines): Anthropic's own ``event: error`` must reach its SDK as sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import httpx2

__all__ = ["SSEErrorStream", "read_sse_errors"]

_LINE = re.compile(rb"([^\r\n]*)(\r\n|\r|\n)")


def read_sse_errors(client: httpx2.AsyncClient) -> httpx2.AsyncClient:
    """``client``, whose event-stream responses carry llama.cpp's error events as the SDK reads one."""
    client.event_hooks = {**client.event_hooks, "response": [*client.event_hooks["response"], _wrap]}
    return client


async def _wrap(response: httpx2.Response) -> None:
    event_stream = response.headers.get("content-type", "").startswith("text/event-stream")
    if event_stream and isinstance(response.stream, httpx2.AsyncByteStream):
        response.stream = SSEErrorStream(response.stream)


class SSEErrorStream(httpx2.AsyncByteStream):
    """The bytes of ``inner`` with llama.cpp's error events rewritten (see the module)."""

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._rest = b""  # a line not yet ended
        self._held: list[bytes] | None = None  # the lines of an ``event: error``, until its blank line

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            if out := self._feed(chunk):
                yield out
        out = self._feed(b"", final=True)
        if self._rest:
            out += self._line(self._rest, b"")
        if self._held is not None:
            out += self._line(b"", b"\n")  # an error event cut before its blank line: told all the same
        if out:
            yield out

    async def aclose(self) -> None:
        await self._inner.aclose()

    def _feed(self, chunk: bytes, *, final: bool = False) -> bytes:
        buffer, done, out = self._rest + chunk, 0, []
        for line in _LINE.finditer(buffer):
            if line.group(2) == b"\r" and line.end() == len(buffer) and not final:
                break  # perhaps the first half of a CRLF
            out.append(self._line(line.group(1), line.group(2)))
            done = line.end()
        self._rest = buffer[done:]
        return b"".join(out)

    def _line(self, text: bytes, end: bytes) -> bytes:
        if self._held is not None:
            self._held.append(text + end)
            if text:
                return b""
            held, self._held = self._held, None
            data = b"\n".join(_value(line.rstrip(b"\r\n")) for line in held if line.startswith(b"data:"))
            return b"".join(held) if _says_error(data) else b"data: " + _as_error(data) + b"\n\n"
        name, colon, _ = text.partition(b":")
        if name == b"event" and _value(text).strip() == b"error":
            self._held = [text + end]
            return b""
        if name == b"error" and colon:
            return b"data: " + _as_error(_value(text)) + end
        return text + end


def _value(line: bytes) -> bytes:
    """The value of an SSE field line (one space after the colon is not part of it)."""
    value = line.partition(b":")[2]
    return value[1:] if value.startswith(b" ") else value


def _says_error(data: bytes) -> bool:
    """Is ``data`` already ``{"error": ...}``, which the SDK raises as sent?"""
    try:
        obj = json.loads(data)
    except ValueError:
        return False
    return isinstance(obj, dict) and bool(obj.get("error"))


def _as_error(data: bytes) -> bytes:
    """``data`` (an error object, or any text) as ``{"error": {...}}``."""
    if _says_error(data):
        return data
    try:
        obj = json.loads(data)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        obj = {"message": data.decode("utf-8", "replace").strip() or "the server sent an error event"}
    return json.dumps({"error": obj}).encode()
