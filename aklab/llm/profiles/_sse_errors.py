"""An HTTP client hook that reads llama.cpp's SSE error events as the OpenAI SDK reads an error.

The SDK raises an error event of a stream only in the shape ``data: {"error": {...}}``,
which is what llama.cpp's server (llama-server) sends on its chat completions today (seen
running it: tests/local/fixtures). Two other shapes exist: a line ``error: {...}``, a field
the SSE format does not know (a decoder must ignore it), which llama-server's chat
completions sent until autumn 2025, and ``event: error`` whose ``data:`` is the error
object itself, the ``event:`` line before or after it (the order of an event's fields is
free), the Anthropic-style shape some OpenAI-compatible servers and proxies use. The SDK
passes over both, so the stream just ended and the human read an odd, cut answer. The hook
rewrites either, in the bytes of a ``text/event-stream`` response, to the
``data: {"error": {...}}`` event the SDK raises as ``APIError``; pydantic-ai then maps it
like any error sent mid-stream.

An error event the stream ends inside (the body ends, or the connection drops, before the
event's blank line, perhaps mid-line) is told as well: as sent if what came of it reads
whole, else as an error of type ``ERROR_CUT_OFF`` carrying what could be read
(``aklab.llm.failures`` says the error could not be read whole).

Bytes pass an event at a time: an event is held until its blank line, since an
``event: error`` may come after its ``data:``. That delays no token: the SDK dispatches an
event only at its blank line, and the hook passes the blank line on in the same chunk it
came in. An event with no ``error`` in it passes unchanged; a chunk of whole events
without one (the usual chunk) passes as it came, without being split into lines.

Only for a client of an OpenAI chat model (Chat Completions streams use no ``event:``
lines): Anthropic's own ``event: error`` must reach its SDK as sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import httpx2

from aklab.llm.failures import ERROR_CUT_OFF

__all__ = ["SSEErrorStream", "read_sse_errors"]

_LINE_END = re.compile(rb"(\r\n|\r|\n)")
#: How bytes of whole events end, as a server sends them: with an event's blank line.
_ENDED = (b"\n\n", b"\r\n\r\n")
#: The lines that may make an error event: an ``error:`` or an ``event:`` field (at the start
#: of the bytes, or after a line end).
_FIELDS = (b"error:", b"event:")
_AFTER_END = tuple(end + field for end in (b"\n", b"\r") for field in _FIELDS)


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
        self._held = bytearray()  # the event not yet ended by its blank line

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                if not self._held and chunk.endswith(_ENDED) and not _may_tell_error(chunk):
                    yield chunk  # the usual chunk: whole events, no error among them
                elif out := self._feed(chunk):
                    yield out
        except httpx2.TransportError:
            # The connection dropped (or stalled) inside an event: if an error, as far as it came,
            # it is what the human needs, not "dropped"; the SDK raises it and reads no further.
            if out := self._last():
                yield out
            raise
        if out := self._last():
            yield out

    async def aclose(self) -> None:
        await self._inner.aclose()

    def _feed(self, chunk: bytes) -> bytes:
        # Held: the bytes after the last blank line. The new one, if any: two line ends in a row,
        # ``\n\n``, ``\n\r`` or ``\r\r`` (with the LF of a CRLF after the last ``\r``, if it came).
        held = self._held
        start = max(len(held) - 1, 0)  # it may begin at the last byte held
        held += chunk
        end = held.rfind(b"\n\n", start)
        if b"\r" in chunk:  # else no CR can end a line in the bytes searched
            end = max(end, held.rfind(b"\n\r", start), held.rfind(b"\r\r", start))
        if end < 0:
            return b""
        end += 2
        if held[end - 1] == 13 and held[end : end + 1] == b"\n":
            end += 1
        done = bytes(held[:end])
        del held[:end]
        if not _may_tell_error(done):
            return done
        return b"".join(_rewritten(event) for event in _events(done))

    def _last(self) -> bytes:
        """The event the stream ended inside, its error told; other bytes as they came."""
        held, self._held = bytes(self._held), bytearray()
        if not _may_tell_error(held):
            return held
        *ended, event = _events(held)  # ended: at most the LF of a CRLF whose CR ended the last event
        return b"".join(line for lines in ended for line in lines) + _rewritten(event, last=True)


def _may_tell_error(data: bytes | bytearray) -> bool:
    """May ``data`` hold an error event: has it an ``error:`` or ``event:`` line, and "error"?"""
    return b"error" in data and (data.startswith(_FIELDS) or any(field in data for field in _AFTER_END))


def _events(region: bytes) -> list[list[bytes]]:
    """The events of ``region``: each its lines, each line with its line end (the last line
    of ``region`` may have none)."""
    parts = _LINE_END.split(region)
    lines = [parts[i] + parts[i + 1] for i in range(0, len(parts) - 1, 2)]
    if parts[-1]:
        lines.append(parts[-1])
    events: list[list[bytes]] = [[]]
    for line in lines:
        events[-1].append(line)
        if not line.rstrip(b"\r\n"):  # a blank line ends the event
            events.append([])
    return [event for event in events if event]


def _rewritten(event: list[bytes], *, last: bool = False) -> bytes:
    """``event`` as the SDK reads an error, if it is one; ``last``: the stream ended inside it."""
    fields = [(line.partition(b":")[0], _value(line.rstrip(b"\r\n"))) for line in event]
    errors = [value for name, value in fields if name == b"error"]
    if any(name == b"event" and value.strip() == b"error" for name, value in fields):
        data = b"\n".join(value for name, value in fields if name == b"data") or b"\n".join(errors)
        if _says_error(data):
            return b"".join(event) + (b"\n\n" if last else b"")  # raised as sent
    elif not errors:
        return b"".join(event)
    elif not last:
        return b"".join(_error_line(line) for line in event)
    else:
        data = errors[-1]
    if not last:  # the event's own line ends, its blank line as it came (a CRLF's LF may come next)
        first, blank = event[0], event[-1]
        return b"data: " + _as_error(data) + first[len(first.rstrip(b"\r\n")) :] + blank
    if _cut_off(data, ended=event[-1].endswith((b"\n", b"\r"))):
        return b"data: " + json.dumps({"error": _as_read(data)}).encode() + b"\n\n"
    return b"data: " + _as_error(data) + b"\n\n"


def _error_line(line: bytes) -> bytes:
    """An ``error:`` line as the ``data:`` line of the same error, with the same line end; any other as it is."""
    if line.partition(b":")[0] != b"error":
        return line
    text = line.rstrip(b"\r\n")
    return b"data: " + _as_error(_value(text)) + line[len(text) :]


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


def _cut_off(data: bytes, *, ended: bool) -> bool:
    """Was the error ``data`` of an event the stream ended inside cut short? Not if it reads as
    JSON, nor if it is text on a line that ended (llama-server's errors are JSON objects)."""
    try:
        json.loads(data)
    except ValueError:
        return not data.strip() or not ended or data.lstrip().startswith((b"{", b"["))
    return False


_MESSAGE = re.compile(rb'"message"\s*:\s*"((?:[^"\\]|\\.)*)("?)')
_ESCAPE_CUT = re.compile(rb"\\(u[0-9a-fA-F]{0,3})?$")


def _as_read(data: bytes) -> dict[str, str]:
    """The error object for ``data`` cut short, typed ``ERROR_CUT_OFF``: its message (else the
    text) as far as it came."""
    text, whole = data.decode("utf-8", "replace"), False
    if match := _MESSAGE.search(data):
        partial, whole = match.group(1), bool(match.group(2))
        try:
            text = json.loads(b'"' + (partial if whole else _ESCAPE_CUT.sub(b"", partial)) + b'"')
        except ValueError:
            text = partial.decode("utf-8", "replace")
    return {"message": text.strip() if whole else _cut_short(text), "type": ERROR_CUT_OFF}


def _cut_short(text: str) -> str:
    """``text``, cut at its end, with "…" there. Its last word goes if it has 8 characters or
    more: it may be the start of a key the server echoed, which redaction cannot know (aklab
    registers keys from 8 characters on)."""
    words = text.split()
    if words and len(words[-1]) >= 8:
        words.pop()
    return " ".join(words) + "…" if words else ""
