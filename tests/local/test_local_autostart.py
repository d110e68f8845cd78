"""``Lab(model="local:smollm2")`` on a machine where nothing serves it: aklab starts the
bundled SmolLM2 server itself (the ``local`` extra), shows its progress, answers through
it, and a later team reuses the same server process. The default endpoint is pointed at a
loopback port nothing listens on, so a server the machine happens to run is not used."""

from __future__ import annotations

import json
import os
import signal

import pytest

from aklab.lab.session import Lab
from aklab.llm import local_auto
from tests.local.conftest import skip_without_local_runtime
from tests.standin import RevivalWaits

skip_without_local_runtime()

pytestmark = pytest.mark.local

ASK_TIMEOUT_S = 90.0


def test_local_smollm2_with_nothing_serving_it_starts_the_bundled_server(nothing_serves_local: list[str]) -> None:
    with Lab(model="local:smollm2", store=False) as lab:
        replies = lab.ask("What is the capital of France?", timeout=ASK_TIMEOUT_S)
        server = local_auto.shared_server()
        assert server is not None and server.pid is not None
        assert replies and replies[-1].content.strip()  # SmolLM2 answered through aklab's server
        usage = lab.usage()
        assert set(usage["model"]) == {"local:smollm2"} and usage["requests"].sum() >= 1
    progress = "\n".join(nothing_serves_local)
    assert "starting aklab's own server" in progress and f"ready at {server.base_url}" in progress

    with Lab(model="local:smollm2", store=False) as again:  # e.g. after %aklab model
        assert again.ask("Say hello.", timeout=ASK_TIMEOUT_S)
        assert local_auto.shared_server() is server and server.running
    pid = server.pid
    server.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_an_ask_right_after_the_server_is_killed_waits_for_it_to_start_again(
    nothing_serves_local: list[str], revival_waits: RevivalWaits, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL the real server and ask at once, while aklab starts a new one on the same port
    (about a second): the ask is answered. Its first request finds the old server gone: a
    stale pooled connection (the SDK sends it again after a short back-off) or a refused one
    (it waits for the new server, ``aklab.llm.revival``): which one happens first is timing,
    so tests/llm/test_local_auto.py holds the restart to prove the wait."""
    monkeypatch.setattr(local_auto, "_restarts", 0)
    with Lab(model="local:smollm2", store=False) as lab:
        assert lab.ask("Say hello.", timeout=ASK_TIMEOUT_S)
        first = local_auto.shared_server()
        assert first is not None and first.pid is not None
        os.kill(first.pid, signal.SIGKILL)
        replies = lab.ask("What is the capital of France?", timeout=ASK_TIMEOUT_S)
        assert replies.answers and not replies.notices, [(type(m).__name__, m.content) for m in replies]
        # The new server may answer before its start is over (its readiness is polled): the
        # watcher holds the lock until the server is shared.
        with local_auto._lock:
            second = local_auto.shared_server()
        assert second is not None and second is not first and second.base_url == first.base_url
    assert all(revival_waits.results)  # any refused request waited for the new server, and was sent again
    assert any("starting it again" in line for line in nothing_serves_local)


def test_the_bundled_server_s_chat_format_leaves_tool_definitions_out() -> None:
    """Why ``lab.status()`` says a member's tools are not offered on aklab's own server: the
    prompt llama-cpp-python builds with the chat format it is started with has no trace of
    them. If a later llama-cpp-python offers them, this fails and the status line must go."""
    import subprocess
    import sys

    from aklab.llm.local_server import LocalServer

    probe = (
        "import json, sys\n"
        "from llama_cpp.llama_chat_format import get_chat_completion_handler, format_chatml\n"
        f"assert get_chat_completion_handler({LocalServer().chat_format!r})\n"
        "tool = {'type': 'function', 'function': {'name': 'workspace_write', 'description': 'Write a file.',"
        " 'parameters': {'type': 'object', 'properties': {'path': {'type': 'string'}}}}}\n"
        "out = format_chatml(messages=[{'role': 'system', 'content': 'S'}, {'role': 'user', 'content': 'U'}],"
        " tools=[tool], tool_choice='auto')\n"
        "print(json.dumps(out.prompt))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    prompt = json.loads(done.stdout)
    assert "<|im_start|>system\nS" in prompt and "U" in prompt  # the probe did format the conversation
    assert "workspace_write" not in prompt and "Write a file" not in prompt
