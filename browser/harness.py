"""Helpers for the browser test: servers on loopback, notebook copies, Chromium options.

Kept apart from ``test_browser.py`` so that the test reads as what a person does in the
browser. Nothing here sleeps for a fixed time to let something happen: waits poll a
condition until a deadline and fail with what they last saw.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import psutil

T = TypeVar("T")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCREENSHOTS = HERE / "screenshots"
QUICKSTART = ROOT / "notebooks" / "01-quickstart.ipynb"
DASHBOARD = HERE / "dashboard.ipynb"
MAGICS = HERE / "magics.ipynb"  # the magics' own checks (test_jupyterlab_magics)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Generous: the machine has 2 cores; JupyterLab takes 10-20 s to start there.
SERVER_START_S = 120.0
KERNEL_READY_S = 120.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(what: str, check: Callable[[], T | None], timeout: float, *, every: float = 0.25) -> T:
    """Call ``check`` until it returns something other than None (or raise on timeout).

    A poll, not a fixed sleep: it returns as soon as the condition holds.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            result = check()
        except Exception as exc:  # the server may not answer yet
            last = exc
            result = None
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last seen: {last!r})")
        time.sleep(every)


def copy_notebook(source: Path, dest_dir: Path) -> Path:
    """Copy a notebook without its outputs or saved widget state, so what shows ran now.

    JupyterLab restores widget state saved in a notebook's metadata; a copy that keeps
    it would show panels before any cell ran.
    """
    nb = json.loads(source.read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    nb.get("metadata", {}).pop("widgets", None)
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / source.name
    dest.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return dest


def isolated_env(home: Path) -> dict[str, str]:
    """The environment for a server: Jupyter and IPython state in ``home``, not the user's.

    Kernel specs still come from the venv (``--sys-prefix``), so the kernel named
    ``python3`` is the project venv's Python with aklab installed.
    """
    env = dict(os.environ)
    for var, sub in [
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_DATA_DIR", "data"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("IPYTHONDIR", "ipython"),
    ]:
        path = home / sub
        path.mkdir(parents=True, exist_ok=True)
        env[var] = str(path)
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("JUPYTER_PATH", None)
    return env


def write_lab_settings(settings_dir: Path) -> None:
    """JupyterLab user settings: every cell kept in the DOM, no news or update checks."""
    files: dict[str, dict[str, Any]] = {
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false",
            "checkForUpdates": False,
        },
    }
    for rel, value in files.items():
        path = settings_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value), encoding="utf-8")


class Server:
    """A Jupyter-family server process on 127.0.0.1, with its log kept in a file."""

    def __init__(self, name: str, argv: list[str], *, cwd: Path, env: dict[str, str], port: int, token: str) -> None:
        self.name = name
        self.argv = argv
        self.port = port
        self.token = token
        self.base = f"http://127.0.0.1:{port}"
        self.log_path = cwd.parent / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._children: dict[int, psutil.Process] = {}

    # -- talking to it -------------------------------------------------------------

    def get(self, path: str, timeout: float = 5.0) -> Any:
        """GET a JSON API path with the token; the parsed body."""
        req = urllib.request.Request(self.base + path, headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def post(self, path: str, timeout: float = 10.0) -> None:
        req = urllib.request.Request(
            self.base + path, data=b"", method="POST", headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=timeout):
            pass

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"

    def wait_until_up(self, probe: str, timeout: float = SERVER_START_S) -> None:
        """Wait until ``probe`` (a path) answers 200; fail at once if the process died."""

        def check() -> bool | None:
            self._check_alive()
            req = urllib.request.Request(self.base + probe, headers={"Authorization": f"token {self.token}"})
            try:
                with urllib.request.urlopen(req, timeout=5) as resp:
                    return True if resp.status == 200 else None
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                return None

        try:
            wait_for(f"{self.name} to answer {probe}", check, timeout)
        except Exception as exc:
            raise RuntimeError(f"{self.name} did not start: {exc}\n{self.log_tail()}") from exc

    def _check_alive(self) -> None:
        code = self.proc.poll()
        if code is not None:
            raise RuntimeError(f"{self.name} exited with code {code}\n{self.log_tail()}")

    def remember_children(self) -> None:
        """Note the server's child processes (kernels), to end any it leaves behind."""
        try:
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                self._children[child.pid] = child
        except psutil.NoSuchProcess:
            pass

    # -- logs and shutdown ------------------------------------------------------------

    def log_tail(self, lines: int = 80) -> str:
        self._log.flush()
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return f"(no log at {self.log_path})"
        tail = "\n".join(text.splitlines()[-lines:])
        return f"---- last {lines} lines of the {self.name} log ({self.log_path}) ----\n{tail}\n---- end of log ----"

    def stop(self, shutdown_path: str | None = None) -> None:
        """Shut down: the server's own shutdown API if it has one, then SIGTERM, then SIGKILL.

        Kernels run in sessions of their own, so any the server leaves behind are ended
        by pid (only processes this server started).
        """
        self.remember_children()
        if shutdown_path and self.proc.poll() is None:
            try:
                self.post(shutdown_path)
                self.proc.wait(timeout=20)
            except Exception:
                pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        leftovers = [p for p in self._children.values() if _alive(p)]
        for proc in leftovers:
            proc.terminate()
        _, still = psutil.wait_procs(leftovers, timeout=10)
        for proc in still:
            proc.kill()
        self._log.close()


def _alive(proc: psutil.Process) -> bool:
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def start_jupyterlab(root_dir: Path, home: Path) -> Server:
    """``jupyter lab`` on a free loopback port, a random token, ``root_dir`` as its root."""
    port, token = free_port(), secrets.token_hex(16)
    settings = home / "lab-settings"
    write_lab_settings(settings)
    argv = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--allow-root",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root_dir}",
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={home / 'lab-workspaces'}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    server = Server("jupyterlab", argv, cwd=root_dir, env=isolated_env(home), port=port, token=token)
    _wait_or_stop(server, "/api/status")
    return server


def start_voila(notebook: Path, home: Path) -> Server:
    """``voila NOTEBOOK`` on a free loopback port with a random token."""
    port, token = free_port(), secrets.token_hex(16)
    argv = [
        sys.executable,
        "-m",
        "voila",
        str(notebook),
        "--no-browser",
        f"--port={port}",
        "--Voila.ip=127.0.0.1",
        "--Voila.port_retries=0",
        f"--Voila.token={token}",
        "--VoilaConfiguration.show_tracebacks=True",
    ]
    server = Server("voila", argv, cwd=notebook.parent, env=isolated_env(home), port=port, token=token)
    _wait_or_stop(server, "/voila/static/voila.js")  # a static file: runs no notebook
    return server


def _wait_or_stop(server: Server, probe: str) -> None:
    """Wait for the server to answer; if it never does, end it before raising."""
    try:
        server.wait_until_up(probe)
    except BaseException:
        server.stop()
        raise


def connected_idle_kernel(server: Server) -> dict[str, Any] | None:
    """A kernel that is idle and has a browser connected, or None."""
    for kernel in server.get("/api/kernels"):
        if kernel.get("execution_state") == "idle" and int(kernel.get("connections", 0)) >= 1:
            return dict(kernel)
    return None


def fresh_screenshots() -> Path:
    """The screenshot folder, emptied of the last run's pictures."""
    if SCREENSHOTS.exists():
        shutil.rmtree(SCREENSHOTS)
    SCREENSHOTS.mkdir(parents=True)
    return SCREENSHOTS
