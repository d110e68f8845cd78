from __future__ import annotations

from collections.abc import Iterator

import pykka
import pytest

from aklab.core import ActorSystem


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    s = ActorSystem(ask_timeout=10)
    yield s
    s.shutdown()


@pytest.fixture(autouse=True)
def no_actor_left_behind() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all(block=True, timeout=10)
