"""``local:smollm2`` with no server running: aklab starts its own.

``%aklab model local:smollm2``, ``Lab(model="local:smollm2")`` and ``%config
Aklab.default_model = "local:smollm2"`` name no server, so they mean llama.cpp's default
endpoint (``http://127.0.0.1:8080/v1``). A new user has nothing running there. When a team
starts on such a model, :func:`serve_if_needed`:

- leaves the model as it is when it names its server (``base_url``,
  ``$AKLAB_LOCAL_BASE_URL``), is not the bundled model, or something answers at the default
  endpoint (a server of the user's own);
- otherwise starts aklab's bundled server (:class:`~aklab.llm.local_server.LocalServer`:
  SmolLM2 from the ``local`` extra, on a free loopback port), once per process, printing a
  line per phase, and points the model at it. Later teams reuse it; it stops when Python
  exits (or, killed, with it: see ``LocalServer``). If it dies on its own (a crash, the
  OOM killer, a stray ``kill``), a watcher thread starts it again on the same port, so
  the teams pointed at it keep working, ``MAX_RESTARTS`` times per process at most. A
  model request made while it starts again waits for it (:mod:`aklab.llm.revival`);
- without the ``local`` extra, raises ``ConfigError`` naming both ways out: the install
  command, or a server of one's own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from aklab.errors import AklabError, ConfigError
from aklab.llm import local_server, revival
from aklab.llm.config import ModelConfig
from aklab.llm.profiles import local as local_profile

__all__ = ["BUNDLED_MODEL", "describe", "down_at", "serve_if_needed", "shared_server"]

#: The model the ``local`` extra ships (``local:smollm2``).
BUNDLED_MODEL = "smollm2"
#: Seconds the probe of the default endpoint may take (a refused connection is instant).
PROBE_TIMEOUT = 1.0
#: How many times a server that died on its own is started again, per process.
MAX_RESTARTS = 3

_lock = threading.Lock()
_shared: local_server.LocalServer | None = None
_restarts = 0
#: Why aklab's servers that died were not started again, by address (``revival.address``).
_down: dict[str, str] = {}
#: The address where a server that died is being started again, meanwhile.
_starting_again: str | None = None


def shared_server() -> local_server.LocalServer | None:
    """The server aklab started for ``local:smollm2`` in this process, while it runs."""
    server = _shared
    return server if server is not None and server.running else None


def describe(base_url: str | None) -> str | None:
    """A line for ``%aklab`` when ``base_url`` is (or was) aklab's own server: where it runs,
    or that it is down and how to get a new one; None for any other URL."""
    if base_url is None:
        return None
    server = _shared
    if base_url == _starting_again or (server is not None and server.base_url == base_url and not server.running):
        return f"model server: aklab's own, {base_url}, starting again after it exited"
    if server is not None and server.base_url == base_url:
        again = f"; started again {_restarts} time{'s' if _restarts != 1 else ''}" if _restarts else ""
        return f"model server: aklab's own, {base_url} (pid {server.pid}{again}; stops when Python exits)"
    why = _down.get(revival.address(base_url))
    if why is not None:
        return f"model server: aklab's own, {base_url}, is down ({why}); %aklab model local:smollm2 starts a new one"
    return None


def down_at(url: str) -> str | None:
    """Why aklab's own server at the address of ``url`` (any URL on it) is down for good, if it is."""
    return _down.get(revival.address(url))


def serve_if_needed(cfg: ModelConfig, *, progress: Callable[[str], None] | None = None) -> ModelConfig:
    """``cfg``, pointed at aklab's own server when it is ``local:smollm2`` with no server
    named and none answering at the default endpoint (see the module docstring)."""
    global _shared
    if (
        cfg.provider != local_profile.FAMILY.name
        or cfg.model != BUNDLED_MODEL
        or cfg.base_url
        or os.environ.get(local_profile.BASE_URL_ENV)
    ):
        return cfg
    with _lock:
        server = shared_server()
        if server is None:
            default = local_profile.DEFAULT_BASE_URL
            if _answers(default):
                return cfg
            try:
                local_server.require_local_runtime()
            except ConfigError as exc:
                raise ConfigError(
                    f"nothing answers at {default} (where local:smollm2 looks when no server is named), "
                    f"and aklab cannot start its own: {exc}. Or start an OpenAI-compatible server there, "
                    f"or name yours (--base-url URL, or ${local_profile.BASE_URL_ENV})"
                ) from None
            say = progress or _print
            say(
                f"local:smollm2: nothing answers at {default}; starting aklab's own server (it stops when Python exits)"
            )
            server = _shared = _start(None, say)
            revival.serving(server.base_url, server)  # under _lock: before its watcher can report it dead
    update: dict[str, object] = {"base_url": server.base_url}
    if cfg.context_length is None:
        update["context_length"] = server.n_ctx
    return cfg.model_copy(update=update)


def _start(port: int | None, say: Callable[[str], None]) -> local_server.LocalServer:
    """Start a server (on ``port``, or a free one) and a thread that revives it if it dies
    (under ``_lock``; the caller shares it, then reports it to ``revival``)."""
    server = local_server.LocalServer(port=port, progress=say).start()
    _down.pop(revival.address(server.base_url), None)
    threading.Thread(target=_revive, args=(server, say), name="aklab-local-server-watch", daemon=True).start()
    return server


def _revive(server: local_server.LocalServer, say: Callable[[str], None]) -> None:
    """Wait for ``server`` to exit; if it died on its own while shared, start it again."""
    global _starting_again
    pid, code = server.pid, server.wait()
    if code is None:  # stopped by close(): on purpose
        revival.given_up(server.base_url)
        return
    with _lock:
        if _shared is not server:
            revival.given_up(server.base_url)
            return
        _starting_again = server.base_url  # what %aklab says meanwhile
        try:
            _replace(server, pid, code, say)
        finally:
            _starting_again = None


def _replace(server: local_server.LocalServer, pid: int | None, code: int, say: Callable[[str], None]) -> None:
    """A new server where ``server`` (shared, dead) was, ``MAX_RESTARTS`` times per process
    at most (under ``_lock``)."""
    global _shared, _restarts
    url = server.base_url
    server.close()  # its log file and exit hook
    _shared = None
    if _restarts >= MAX_RESTARTS:
        revival.given_up(url)
        _down[revival.address(url)] = f"exited with code {code}, not started again after {MAX_RESTARTS} restarts"
        say(
            f"local model: the server (pid {pid}) exited with code {code}; not starting it again after "
            f"{MAX_RESTARTS} restarts (%aklab model local:smollm2 starts a new one)"
        )
        return
    _restarts += 1
    revival.restarting(url)  # requests made meanwhile wait for the new one
    say(f"local model: the server (pid {pid}) exited with code {code}; starting it again at {url}")
    try:
        _shared = _start(server.port, say)
        revival.serving(url, _shared)  # the requests waiting for it go on once it is shared
    except AklabError as exc:
        revival.given_up(url)
        _down[revival.address(url)] = f"exited with code {code}, and did not start again: {str(exc).splitlines()[0]}"
        say(f"local model: it did not start again: {exc}")


def _answers(base_url: str) -> bool:
    """Whether an HTTP server answers at ``base_url`` (then it is somebody's server)."""
    return local_server.answers(base_url, timeout=PROBE_TIMEOUT)


def _print(line: str) -> None:
    print(line, flush=True)
