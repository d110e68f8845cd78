"""The local model server the ``local`` tests share (one start per session)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aklab.llm.local_server import LocalServer

#: The context the tests' server gives the model.
N_CTX = 4096


@pytest.fixture(scope="session")
def server() -> Iterator[LocalServer]:
    with LocalServer(n_ctx=N_CTX) as running:
        yield running
