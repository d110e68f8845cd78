from __future__ import annotations

from collections.abc import Iterator

import pykka
import pytest

from aklab.core import ActorSystem
from tests.fakeserver import FakeOpenAI


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
