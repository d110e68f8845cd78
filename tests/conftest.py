from __future__ import annotations

import os
from collections.abc import Iterator

import pykka
import pytest

from aklab.core import ActorSystem
from tests.fakeserver import FakeOpenAI


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
