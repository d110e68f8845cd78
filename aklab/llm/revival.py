"""Loopback model servers aklab starts again when they die, and the requests that wait for them.

When the bundled server dies on its own, :mod:`aklab.llm.local_auto` starts a new one on the
same port, which takes a second or so. Without this module, a request made during that
second found the port closed and its ask failed with "cannot reach the model server", so
the user had to ask again. Now a loopback client's transport (``BuildContext.http_client``)
calls :func:`wait_until_serving` when a connection is refused. If aklab runs the server at
that address and is starting it again, the call waits for it, and the request is sent once
more.

Only in this process: a worker process of a batch reaches the driver's server by its URL,
and a refused request there fails as before.

``local_auto`` reports each change here: :func:`serving` when a server answers, and
:func:`restarting` while a new one starts. :func:`given_up` is called when no server will
come back at that address.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol
from urllib.parse import urlsplit

__all__ = ["given_up", "restarting", "serving", "wait_until_serving"]


class _Server(Protocol):
    @property
    def running(self) -> bool: ...


_changed = threading.Condition()
#: By address (``host:port``): aklab's server there, or None while a new one is starting.
_servers: dict[str, _Server | None] = {}


def _address(url: str) -> str:
    """``host:port`` of an ``http`` URL (the key requests and servers are matched by)."""
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 80}"


def serving(base_url: str, server: _Server) -> None:
    """``server`` answers at ``base_url`` (started, or started again)."""
    with _changed:
        _servers[_address(base_url)] = server
        _changed.notify_all()


def restarting(base_url: str) -> None:
    """The server at ``base_url`` died, and a new one is being started at the same address."""
    with _changed:
        _servers[_address(base_url)] = None
        _changed.notify_all()


def given_up(base_url: str) -> None:
    """No server of aklab's will answer at ``base_url`` again (stopped, or not started again)."""
    with _changed:
        _servers.pop(_address(base_url), None)
        _changed.notify_all()


def wait_until_serving(url: str, timeout: float) -> bool:
    """Call this after a connection to ``url`` was refused. Returns True once aklab's server
    at that address runs again, so the request is worth sending once more. While a new
    server is being started, this waits for it, at most ``timeout`` seconds.

    A server that has just died but has not been reported yet (its watcher wakes up a moment
    after the exit) counts as one being started again.

    Returns False at once when the address is not aklab's, or when aklab gave up on it.
    Returns False after ``timeout`` if no server came back by then."""
    key = _address(url)
    deadline = time.monotonic() + timeout
    with _changed:
        while True:
            if key not in _servers:
                return False
            server = _servers[key]
            if server is not None and server.running:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            _changed.wait(remaining)
