"""The local model server the ``local`` tests share (one start per session)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aklab.errors import ConfigError
from aklab.llm.local_server import LocalServer, require_local_runtime

#: The context the tests' server gives the model.
N_CTX = 4096


def skip_without_local_runtime() -> None:
    """Skip the calling test module when the ``local`` extra is missing. Checked by module
    spec, not imported: importing ``llama_cpp`` opens two /dev/null files it never closes,
    which the test process then reports as ResourceWarnings when it exits."""
    try:
        require_local_runtime()
    except ConfigError as exc:
        pytest.skip(str(exc), allow_module_level=True)


@pytest.fixture(scope="session")
def server() -> Iterator[LocalServer]:
    with LocalServer(n_ctx=N_CTX) as running:
        yield running
