"""A fake OpenAI-compatible Chat Completions server on 127.0.0.1, for tests.

It runs in-process (stdlib ``ThreadingHTTPServer`` on an ephemeral port, one thread per
connection) and serves ``POST /v1/chat/completions``, non-streamed and streamed (SSE
``data: {...}`` chunks, then ``data: [DONE]``, over chunked transfer encoding like
llama.cpp's server), and ``GET /v1/models``. Every request is recorded, so a test can
assert what reached the wire.

A test scripts it with a queue of behaviours, one per chat request, built by the
functions below (``text``, ``json_text``, ``tool_call``, ``output``, ``http_error``,
``rate_limited``, ``hang``, ``stall``, ``truncated_json``, ``cut_stream``, ``empty``, ``error_at_200``,
``sse_tail``, ``sse_replay``); a queue item
may also be a responder (a callable given the request body, returning a behaviour). When
the queue is empty the ``default`` responder answers (e.g. ``echo``: text "OK: <the last
line of the last user message>"); with no default the server answers 500 "nothing scripted", so a forgotten
script shows.

::

    def test_something(fake_openai: FakeOpenAI) -> None:
        fake_openai.push(rate_limited(retry_after=1), text("Paris"))
        fake_openai.default = echo
        ...  # point a model at fake_openai.url
        assert fake_openai.bodies[-1]["max_tokens"] == 64

A ``hang`` holds its connection until ``release()`` (the fixture releases on teardown)
or until the client disconnects; it never needs a sleep to end.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = [
    "USAGE",
    "Behaviour",
    "FakeOpenAI",
    "Recorded",
    "Responder",
    "Usage",
    "cut_stream",
    "echo",
    "empty",
    "error_at_200",
    "hang",
    "http_error",
    "json_text",
    "last_user_content",
    "last_user_text",
    "output",
    "output_tool_name",
    "rate_limited",
    "sse_replay",
    "sse_tail",
    "stall",
    "text",
    "tool_call",
    "tool_names",
    "truncated_json",
]

Kind = Literal[
    "text", "tool", "error", "error200", "hang", "stall", "truncated", "cut", "empty", "raw", "tail", "replay"
]
SseError = Literal["data", "event", "event-last", "field"]


@dataclass(frozen=True)
class Usage:
    """Token counts the server reports (``usage`` of the response, or the last SSE chunk)."""

    prompt_tokens: int = 11
    completion_tokens: int = 7


USAGE = Usage()


@dataclass(frozen=True)
class Behaviour:
    """How the server answers one chat request. Build one with the functions below."""

    kind: Kind
    content: str | None = None
    """Text of the answer (``text``), or what is sent before the fault (``truncated``, ``cut``)."""
    tool_name: str | None = None
    """``tool``: the function to call; None means the request's output tool (``final_result...``)."""
    tool_args: str = "{}"
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    usage: Usage | None = USAGE
    """None: no usage at all (llama-cpp-python when streaming)."""
    clean_eof: bool = False
    """``cut``: end the body properly, only without a finish reason and ``[DONE]``."""
    finish: str | None = None
    """The finish reason sent, if not the usual one ("stop", or "tool_calls" for a tool call)."""
    error: str | None = None
    """``error200``: the error object sent, as JSON text; ``error``: the error body, if not the usual one."""
    sse_error: SseError = "data"
    """``error200``, streamed: how the error goes in the stream (see ``error_at_200``)."""
    tail: bytes = b""
    """``tail``: the bytes sent as they are after the content (see ``sse_tail``)."""
    body: bytes = b""
    """``replay``: the event-stream body sent, byte for byte."""


def text(content: str, *, usage: Usage | None = USAGE) -> Behaviour:
    """A plain text answer."""
    return Behaviour("text", content=content, usage=usage)


def json_text(obj: Any, *, usage: Usage | None = USAGE) -> Behaviour:
    """A text answer holding ``obj`` as JSON (what a prompted/native-mode model writes)."""
    return Behaviour("text", content=json.dumps(obj), usage=usage)


def tool_call(name: str | None, args: Any, *, usage: Usage | None = USAGE, finish: str | None = None) -> Behaviour:
    """A call of tool ``name`` (None: the request's output tool) with ``args`` (JSON text or an object);
    ``finish="length"`` with JSON text cut mid-way is a call cut off at the request's max_tokens."""
    encoded = args if isinstance(args, str) else json.dumps(args)
    return Behaviour("tool", tool_name=name, tool_args=encoded, usage=usage, finish=finish)


def http_error(
    status: int = 500,
    message: str = "internal server error",
    *,
    retry_after: float | str | None = None,
    code: str | int | None = None,
    error_type: str | None = None,
) -> Behaviour:
    """An HTTP error with an OpenAI-style JSON error body; ``retry_after``: a Retry-After header
    in seconds, or as given (an HTTP-date); ``code``, ``error_type``: the body's, if not the
    status and the type the fake names for it."""
    if retry_after is None:
        headers: tuple[tuple[str, str], ...] = ()
    else:
        headers = (("Retry-After", retry_after if isinstance(retry_after, str) else f"{retry_after:g}"),)
    error = None
    if code is not None or error_type is not None:
        fields = {"message": message, "type": error_type or _error_type(status), "code": code or status}
        error = json.dumps({"error": fields})
    return Behaviour("error", content=message, status=status, headers=headers, error=error)


def cut_at_max_tokens(content: str) -> Behaviour:
    """A text answer that stopped at the request's max_tokens (finish reason "length")."""
    return Behaviour("text", content=content, finish="length")


def raw(body: str, *, status: int = 200, content_type: str = "application/json") -> Behaviour:
    """Exactly ``body`` (not a chat completion: a web page, an error at status 200, no choices)."""
    return Behaviour("raw", content=body, status=status, headers=(("Content-Type", content_type),))


def error_at_200(
    message: str,
    *,
    code: str | int | None = None,
    error_type: str | None = None,
    content: str = "The answer",
    sse: SseError = "data",
) -> Behaviour:
    """An error object (``{"error": {"message": ..., "code": ..., "type": ...}}``, without the fields
    not given) sent with status 200, as some OpenAI-compatible servers and gateways do. Non-streamed:
    the whole body. Streamed: ``content`` in a few chunks, then the error, and the body ends (no
    finish reason, no ``[DONE]``). The error goes as ``sse``: ``"data"``, one ``data:`` event,
    as llama-server sends it now (``sse_replay`` has its exact bytes: tests/local/fixtures);
    ``"event"``, an ``event: error`` whose ``data:`` is the inner object, as llama-server's
    Anthropic-style endpoint sends it; ``"event-last"``, the same event with its ``data:`` line
    first (the order of an event's fields is free); ``"field"``, a line ``error: <the inner
    object>``, as llama-server's chat completions sent it before it moved to ``data:`` (autumn 2025)."""
    fields = {"message": message, "code": code, "type": error_type}
    error = {"error": {k: v for k, v in fields.items() if v is not None}}
    return Behaviour("error200", content=content, error=json.dumps(error), sse_error=sse)


def sse_tail(tail: str | bytes, *, content: str = "The answer", drop: bool = False) -> Behaviour:
    """A stream of ``content`` in a few chunks, then exactly ``tail`` (SSE text as a server wrote
    it: any fields, any line ends, a last line left unended), then the body ends; ``drop=True``:
    the connection closes instead, inside the chunked body. A stream even for a request that
    asked for none."""
    data = tail.encode() if isinstance(tail, str) else tail
    return Behaviour("tail", content=content, tail=data, clean_eof=not drop)


def sse_replay(body: bytes, *, clean_eof: bool = True) -> Behaviour:
    """Exactly ``body``, an event stream as a real server sent it (a capture), whatever the request
    asked: status 200, ``text/event-stream``, chunked, one HTTP chunk per event (as llama-server
    writes them). ``clean_eof=False``: the connection then drops without the body's last chunk,
    as when the server process ends mid-stream."""
    return Behaviour("replay", body=body, clean_eof=clean_eof)


def rate_limited(retry_after: float = 1) -> Behaviour:
    """HTTP 429 with a Retry-After header (seconds)."""
    return http_error(429, "rate limit reached, retry later", retry_after=retry_after)


def hang() -> Behaviour:
    """Accept the request and answer nothing until released or the client goes away."""
    return Behaviour("hang")


def stall(content: str = "The answer is", *, tool_args: str | None = None) -> Behaviour:
    """Start streaming, then hold the connection like ``hang``: ``content`` in a few chunks
    (``tool_args``: the request's output tool called with these arguments, as far as they go),
    then nothing until released or the client goes away. Non-streamed: a ``hang``."""
    if tool_args is not None:
        return Behaviour("stall", tool_args=tool_args)
    return Behaviour("stall", content=content)


def truncated_json(content: str = "The answer is 4") -> Behaviour:
    """A 200 whose JSON is cut off (non-streamed: the body; streamed: one ``data:`` line)."""
    return Behaviour("truncated", content=content)


def cut_stream(content: str = "The answer is", *, clean_eof: bool = False) -> Behaviour:
    """Start answering, then drop the connection mid-response (no finish reason, no ``[DONE]``).

    Streamed: some content chunks, then the connection closes inside the chunked body
    (``clean_eof=True``: the body ends properly, only the finish and ``[DONE]`` are missing).
    Non-streamed: fewer body bytes than the Content-Length announced.
    """
    return Behaviour("cut", content=content, clean_eof=clean_eof)


def empty(*, usage: Usage | None = USAGE) -> Behaviour:
    """A well-formed answer with no content and no tool calls."""
    return Behaviour("empty", usage=usage)


Responder = Callable[[dict[str, Any]], Behaviour]


# -- reading a recorded request body ----------------------------------------------------------


def last_user_content(body: dict[str, Any]) -> Any:
    """The ``content`` of the last user message, as sent: a string or a list of parts."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            return message.get("content")
    return None


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last user message (text parts joined by newlines)."""
    content = last_user_content(body)
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else ""


def tool_names(body: dict[str, Any]) -> list[str]:
    """Names of the tools the request offered."""
    return [str(t.get("function", {}).get("name")) for t in body.get("tools", []) or []]


def output_tool_name(body: dict[str, Any]) -> str:
    """The request's output tool (pydantic-ai names it ``final_result...``), else its only tool."""
    names = tool_names(body)
    for name in names:
        if name.startswith("final_result"):
            return name
    if len(names) == 1:
        return names[0]
    raise LookupError(f"no output tool among {names}")


def output(obj: Any, *, usage: Usage | None = USAGE) -> Responder:
    """Answer with ``obj`` as the run's structured output, in the request's own mode: a call
    of its output tool when it offers one, else ``obj`` as JSON text (native/prompted modes)."""

    def respond(body: dict[str, Any]) -> Behaviour:
        if any(n.startswith("final_result") for n in tool_names(body)):
            return tool_call(None, obj, usage=usage)
        return json_text(obj, usage=usage)

    return respond


def echo(body: dict[str, Any]) -> Behaviour:
    """A responder for a scripted conversation: text ``OK: <last line of the last user message>``
    (aklab puts the message's own content last, after its framing and any context update)."""
    lines = [line for line in last_user_text(body).splitlines() if line.strip()]
    return text(f"OK: {lines[-1].strip() if lines else ''}")


# -- the server ---------------------------------------------------------------------------------


@dataclass
class Recorded:
    """One request as it reached the server."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    raw: bytes = b""


@dataclass
class _State:
    queue: deque[Behaviour | Responder] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    hanging: int = 0
    served: int = 0
    changed: threading.Condition = field(default_factory=threading.Condition)
    release: threading.Event = field(default_factory=threading.Event)


class FakeOpenAI:
    """The server. Start with ``start()`` (or use it as a context manager); ``close()`` stops it."""

    def __init__(self, *, model_ids: tuple[str, ...] = ("fake",), port: int = 0) -> None:
        """``port``: the loopback port to listen on (0: a free one)."""
        self.model_ids = model_ids
        self.default: Responder | None = None
        self.script_errors: list[str] = []
        """Exceptions raised by scripted responders (each answered as a 500)."""
        self._state = _State()
        self._server = _Server(self, port)
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._handlers: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._ids = 0

    # -- lifecycle
    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL to give a client: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        # A short poll interval only makes close() quick: requests never wait on it.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Release hangs, stop accepting, drop open connections, join every thread."""
        self.release()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
            self._thread = None
        self._server.server_close()
        with self._lock:
            connections, handlers = list(self._connections), list(self._handlers)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in handlers:
            thread.join(5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- scripting
    def push(self, *behaviours: Behaviour | Responder) -> None:
        """Queue behaviours (or responders), one per coming chat request."""
        with self._state.changed:
            self._state.queue.extend(behaviours)

    @property
    def pending(self) -> int:
        """Behaviours queued and not yet used."""
        return len(self._state.queue)

    def release(self) -> None:
        """End every hang in progress (later hangs hang again)."""
        with self._state.changed:
            self._state.release.set()
            self._state.release = threading.Event()

    # -- what reached the wire
    @property
    def requests(self) -> list[Recorded]:
        return list(self._state.requests)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """JSON bodies of the chat completion requests, in arrival order."""
        return [r.body for r in self.requests if r.path.endswith("/chat/completions") and r.body is not None]

    @property
    def hanging(self) -> int:
        """Requests held by a hang right now."""
        return self._state.hanging

    def wait_for(self, predicate: Callable[[FakeOpenAI], bool], timeout: float = 5.0) -> bool:
        """Block until ``predicate(self)`` holds (re-checked on every request event); False on timeout."""
        with self._state.changed:
            return self._state.changed.wait_for(lambda: predicate(self), timeout)

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> bool:
        return self.wait_for(lambda f: len(f.bodies) >= n, timeout)

    def wait_hanging(self, timeout: float = 5.0) -> bool:
        return self.wait_for(lambda f: f.hanging > 0, timeout)

    # -- called by handler threads
    def _next(self, body: dict[str, Any]) -> Behaviour:
        with self._state.changed:
            item = self._state.queue.popleft() if self._state.queue else None
        if isinstance(item, Behaviour):
            return item
        if item is not None:
            return item(body)
        if self.default is not None:
            return self.default(body)
        return http_error(500, "fake server: nothing scripted for this request")

    def _record(self, recorded: Recorded) -> None:
        with self._state.changed:
            self._state.requests.append(recorded)
            self._state.changed.notify_all()

    def _bump(self, attr: Literal["hanging", "served"], delta: int) -> None:
        with self._state.changed:
            setattr(self._state, attr, getattr(self._state, attr) + delta)
            self._state.changed.notify_all()

    def _release_event(self) -> threading.Event:
        with self._state.changed:
            return self._state.release

    def _new_id(self) -> str:
        with self._lock:
            self._ids += 1
            return f"chatcmpl-fake-{self._ids}"

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
                self._handlers.add(threading.current_thread())
            else:
                self._connections.discard(conn)
                self._handlers.discard(threading.current_thread())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, fake: FakeOpenAI, port: int) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", port), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # A stream is many small writes: without this, Nagle's algorithm holds each one until
        # the client's delayed ACK (~40 ms a request on loopback). Real servers set it too.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.fake._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: pytest shows what matters

    @property
    def fake(self) -> FakeOpenAI:
        return self.server.fake

    # -- routing
    def do_GET(self) -> None:
        self.fake._record(Recorded("GET", self.path, dict(self.headers), None))
        if self.path.rstrip("/").endswith("/models"):
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.fake.model_ids]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.fake._record(Recorded("POST", self.path, dict(self.headers), body, raw))
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_error(404, f"no route {self.path}")
            return
        if not isinstance(body, dict):
            self._send_error(400, "request body is not a JSON object")
            return
        try:
            behaviour = self.fake._next(body)
        except Exception as exc:  # a bug in the test's script: answer, and keep it for the test to see
            self.fake.script_errors.append(repr(exc))
            behaviour = http_error(500, f"fake server: the scripted responder failed: {exc!r}")
        try:
            self._serve(behaviour, body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            self.fake._bump("served", 1)

    # -- behaviours
    def _serve(self, b: Behaviour, body: dict[str, Any]) -> None:
        stream = bool(body.get("stream"))
        if b.kind == "error" and b.error is not None:
            self._send_json(b.status, json.loads(b.error), b.headers)
        elif b.kind == "error":
            self._send_error(b.status, b.content or "error", headers=b.headers)
        elif b.kind == "error200":
            self._error_at_200(b, body, stream)
        elif b.kind == "raw":
            data = (b.content or "").encode()
            self._start(b.status, dict(b.headers)["Content-Type"], [("Content-Length", str(len(data)))])
            self.wfile.write(data)
        elif b.kind == "hang" or (b.kind == "stall" and not stream):
            self._hang()
        elif b.kind == "stall":
            self._stall(b, body)
        elif b.kind == "truncated":
            self._truncated(b, body, stream)
        elif b.kind == "cut":
            self._cut(b, body, stream)
        elif b.kind == "tail":
            self._tail(b, body)
        elif b.kind == "replay":
            self._replay(b)
        elif stream:
            self._stream(b, body)
        else:
            self._send_json(200, self._completion(b, body))

    def _hang(self) -> None:
        event = self.fake._release_event()
        self.fake._bump("hanging", 1)
        try:
            # Wake every 50 ms only to notice a client that hung up; the release event ends it.
            while not event.wait(0.05):
                if self._client_gone():
                    break
        finally:
            self.fake._bump("hanging", -1)
        self.close_connection = True

    def _stall(self, b: Behaviour, body: dict[str, Any]) -> None:
        self._start_stream()
        if b.content is not None:
            self._event(json.dumps(self._chunk(body, {"role": "assistant", "content": ""})))
            for piece in _pieces(b.content):
                self._event(json.dumps(self._chunk(body, {"content": piece})))
        else:
            self._event(json.dumps(self._chunk(body, {"role": "assistant", "content": None})))
            call = {"index": 0, "id": "call_fake_1", "type": "function"}
            self._event(
                json.dumps(
                    self._chunk(
                        body, {"tool_calls": [{**call, "function": {"name": output_tool_name(body), "arguments": ""}}]}
                    )
                )
            )
            for piece in _pieces(b.tool_args):
                self._event(
                    json.dumps(self._chunk(body, {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
                )
        self._hang()

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _truncated(self, b: Behaviour, body: dict[str, Any], stream: bool) -> None:
        if not stream:
            whole = json.dumps(self._completion(text(b.content or ""), body)).encode()
            cut = whole[: len(whole) // 2]
            self._start(200, "application/json", [("Content-Length", str(len(cut)))])
            self.wfile.write(cut)
            return
        self._start_stream()
        first = self._chunk(body, {"role": "assistant", "content": ""})
        self._event(json.dumps(first))
        bad = json.dumps(self._chunk(body, {"content": b.content or ""}))
        self._event(bad[: len(bad) // 2])
        self._event("[DONE]")
        self._end_chunks()

    def _cut(self, b: Behaviour, body: dict[str, Any], stream: bool) -> None:
        self.close_connection = True
        if not stream:
            whole = json.dumps(self._completion(text(b.content or ""), body)).encode()
            self._start(200, "application/json", [("Content-Length", str(len(whole)))])
            self.wfile.write(whole[: len(whole) // 2])
            self.wfile.flush()
            self._drop()
            return
        self._start_stream()
        self._event(json.dumps(self._chunk(body, {"role": "assistant", "content": ""})))
        for piece in _pieces(b.content or ""):
            self._event(json.dumps(self._chunk(body, {"content": piece})))
        if b.clean_eof:
            self._end_chunks()
        else:
            self.wfile.flush()
            self._drop()

    def _error_at_200(self, b: Behaviour, body: dict[str, Any], stream: bool) -> None:
        if not stream:
            data = (b.error or "").encode()
            self._start(200, "application/json", [("Content-Length", str(len(data)))])
            self.wfile.write(data)
            return
        self._start_stream()
        self._event(json.dumps(self._chunk(body, {"role": "assistant", "content": ""})))
        for piece in _pieces(b.content or ""):
            self._event(json.dumps(self._chunk(body, {"content": piece})))
        if b.sse_error == "data":
            self._event(b.error or "")
        else:
            inner = json.dumps(json.loads(b.error or "{}")["error"])
            lines = {
                "event": f"event: error\ndata: {inner}",
                "event-last": f"data: {inner}\nevent: error",
                "field": f"error: {inner}",
            }[b.sse_error]
            self._write_chunk(f"{lines}\n\n".encode())
        self._end_chunks()
        self.close_connection = True  # the client stops reading at the error: no next request comes

    def _tail(self, b: Behaviour, body: dict[str, Any]) -> None:
        self.close_connection = True  # the client stops reading at an error: no next request comes
        self._start_stream()
        self._event(json.dumps(self._chunk(body, {"role": "assistant", "content": ""})))
        for piece in _pieces(b.content or ""):
            self._event(json.dumps(self._chunk(body, {"content": piece})))
        if b.tail:
            self._write_chunk(b.tail)
        if b.clean_eof:
            self._end_chunks()
        else:
            self._drop()

    def _replay(self, b: Behaviour) -> None:
        self.close_connection = True
        self._start(200, "text/event-stream", [("Transfer-Encoding", "chunked"), ("X-Accel-Buffering", "no")])
        for event in _events(b.body):
            self._write_chunk(event)
        if b.clean_eof:
            self._end_chunks()
        else:
            self._drop()

    def _drop(self) -> None:
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _stream(self, b: Behaviour, body: dict[str, Any]) -> None:
        self._start_stream()
        self._event(json.dumps(self._chunk(body, {"role": "assistant", "content": None if b.kind == "tool" else ""})))
        finish = "stop"
        if b.kind == "text":
            for piece in _pieces(b.content or ""):
                self._event(json.dumps(self._chunk(body, {"content": piece})))
        elif b.kind == "tool":
            finish = "tool_calls"
            name = b.tool_name or output_tool_name(body)
            call = {"index": 0, "id": "call_fake_1", "type": "function", "function": {"name": name, "arguments": ""}}
            self._event(json.dumps(self._chunk(body, {"tool_calls": [call]})))
            for piece in _pieces(b.tool_args):
                args = {"index": 0, "function": {"arguments": piece}}
                self._event(json.dumps(self._chunk(body, {"tool_calls": [args]})))
        self._event(json.dumps(self._chunk(body, {}, finish=b.finish or finish)))
        wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if b.usage is not None and wants_usage:
            usage_chunk = {**self._chunk(body, {}), "choices": [], "usage": _usage(b.usage)}
            self._event(json.dumps(usage_chunk))
        self._event("[DONE]")
        self._end_chunks()

    def _completion(self, b: Behaviour, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        if b.kind == "text":
            message["content"] = b.content
        elif b.kind == "tool":
            finish = "tool_calls"
            name = b.tool_name or output_tool_name(body)
            message["tool_calls"] = [
                {"id": "call_fake_1", "type": "function", "function": {"name": name, "arguments": b.tool_args}}
            ]
        out: dict[str, Any] = {
            "id": self.fake._new_id(),
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": str(body.get("model", "fake")),
            "choices": [{"index": 0, "message": message, "finish_reason": b.finish or finish, "logprobs": None}],
        }
        if b.usage is not None:
            out["usage"] = _usage(b.usage)
        return out

    def _chunk(self, body: dict[str, Any], delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake-stream",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": str(body.get("model", "fake")),
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    # -- HTTP plumbing
    def _start(self, status: int, content_type: str, headers: list[tuple[str, str]]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()

    def _send_json(self, status: int, payload: Any, headers: tuple[tuple[str, str], ...] = ()) -> None:
        data = json.dumps(payload).encode()
        self._start(status, "application/json", [("Content-Length", str(len(data))), *headers])
        self.wfile.write(data)

    def _send_error(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        self._send_json(status, {"error": {"message": message, "type": _error_type(status), "code": status}}, headers)

    def _start_stream(self) -> None:
        self._start(200, "text/event-stream", [("Transfer-Encoding", "chunked"), ("Cache-Control", "no-cache")])

    def _event(self, data: str) -> None:
        self._write_chunk(f"data: {data}\n\n".encode())

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _usage(u: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    }


def _events(body: bytes) -> Iterator[bytes]:
    """``body`` cut after each blank line that ends an event (the last piece as it is)."""
    start = 0
    while (end := body.find(b"\n\n", start)) >= 0:
        yield body[start : end + 2]
        start = end + 2
    if start < len(body):
        yield body[start:]


def _pieces(s: str, size: int = 8) -> Iterator[str]:
    """Split ``s`` into stream-sized pieces (at least one, so an empty string still streams)."""
    if not s:
        yield ""
        return
    for i in range(0, len(s), size):
        yield s[i : i + size]


def _error_type(status: int) -> str:
    """The ``type`` OpenAI's API names for an error of ``status``."""
    return "rate_limit_error" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
