from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pykka
import pytest

from aklab.core import ActorSystem
from tests.fakeserver import FakeOpenAI
from tests.standin import RevivalWaits


@pytest.fixture(scope="session", autouse=True)
def event_store_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Labs made by tests append to a store in a temporary folder, never to ./.aklab of the checkout."""
    old = os.environ.get("AKLAB_STORE")
    os.environ["AKLAB_STORE"] = str(tmp_path_factory.mktemp("store") / "events.sqlite3")
    yield
    if old is None:
        os.environ.pop("AKLAB_STORE", None)
    else:
        os.environ["AKLAB_STORE"] = old


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    s = ActorSystem(ask_timeout=10)
    yield s
    s.shutdown()


@pytest.fixture(autouse=True)
def no_actor_left_behind() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all(block=True, timeout=10)


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A fake OpenAI-compatible server on 127.0.0.1 (``.url`` is its base URL), stopped after the test."""
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def nothing_serves_local(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """For ``local:smollm2`` with no server named: its default endpoint is a loopback port
    nothing listens on and no server of aklab's runs yet; yields the lines aklab prints
    while it starts one, and stops that one (by its pid) after the test."""
    from aklab.llm import local_auto
    from aklab.llm.profiles import local as local_profile

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setattr(local_profile, "DEFAULT_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.delenv(local_profile.BASE_URL_ENV, raising=False)
    monkeypatch.setattr(local_auto, "_shared", None)
    monkeypatch.setattr(local_auto, "_down", {})
    lines: list[str] = []
    monkeypatch.setattr(local_auto, "_print", lines.append)
    yield lines
    server = local_auto.shared_server()
    if server is not None:
        server.close()


@pytest.fixture
def revival_waits(monkeypatch: pytest.MonkeyPatch) -> RevivalWaits:
    from aklab.llm import revival

    waits = RevivalWaits()
    real_wait = revival.wait_until_serving

    def observed(url: str, timeout: float) -> bool:
        waits.begun.set()
        waits.results.append(real_wait(url, timeout))
        return waits.results[-1]

    monkeypatch.setattr(revival, "wait_until_serving", observed)
    return waits
