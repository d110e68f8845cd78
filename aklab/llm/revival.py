"""Loopback model servers aklab starts again when they die, and the requests that wait for them.

When the bundled server dies on its own, :mod:`aklab.llm.local_auto` starts a new one on the
same port, which takes a second or so. Without this module, a request made during that
second found the port closed and its ask failed with "cannot reach the model server", so
the user had to ask again. Now a loopback client's transport (``BuildContext.http_client``)
calls :func:`wait_until_serving` when a connection is refused. If aklab runs the server at
that address and is starting it again, the call waits for it, and the request is sent once
more.

``local_auto`` reports each change here: :func:`serving` when a server answers, and
:func:`restarting` while a new one starts. :func:`given_up` is called when no server will
come back at that address.

A batch's worker processes reach the driver's server by its URL, and nothing in a worker
hears of its restart. The worker registers that address with :func:`served_elsewhere`:
a refused request there waits until the address answers ``GET /models`` again, checked
every ``POLL_S`` seconds, at most ``ELSEWHERE_WAIT`` seconds.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol
from urllib.parse import urlsplit

__all__ = [
    "ELSEWHERE_WAIT",
    "POLL_S",
    "address",
    "given_up",
    "restarting",
    "served_elsewhere",
    "serving",
    "wait_until_serving",
]

#: Seconds between two checks of a server in another process.
POLL_S = 0.1
#: Seconds a request waits at most for a server in another process. A restart takes about a
#: second; the driver may also have given up on it, which a worker cannot hear of.
ELSEWHERE_WAIT = 30.0
#: Seconds one check of a server in another process may take.
PROBE_TIMEOUT = 1.0


class _Server(Protocol):
    @property
    def running(self) -> bool: ...


class _Elsewhere:
    """aklab's server in another process of this machine (a batch's driver): running while
    its address answers."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    @property
    def running(self) -> bool:
        from aklab.llm.local_server import answers

        return answers(self.base_url, timeout=PROBE_TIMEOUT)


_changed = threading.Condition()
#: By address (``host:port``): aklab's server there, or None while a new one is starting.
_servers: dict[str, _Server | None] = {}
_version = 0  # bumped by every change, under _changed


def _notify() -> None:
    global _version
    _version += 1
    _changed.notify_all()


def address(url: str) -> str:
    """``host:port`` of an ``http`` URL (the key requests and servers are matched by)."""
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 80}"


def serving(base_url: str, server: _Server) -> None:
    """``server`` answers at ``base_url`` (started, or started again)."""
    with _changed:
        _servers[address(base_url)] = server
        _notify()


def restarting(base_url: str) -> None:
    """The server at ``base_url`` died, and a new one is being started at the same address."""
    with _changed:
        _servers[address(base_url)] = None
        _notify()


def given_up(base_url: str) -> None:
    """No server of aklab's will answer at ``base_url`` again (stopped, or not started again)."""
    with _changed:
        _servers.pop(address(base_url), None)
        _notify()


def served_elsewhere(base_url: str) -> None:
    """``base_url`` is aklab's server in another process of this machine, which restarts it
    there (a batch's driver). Does nothing where this process knows the address already."""
    with _changed:
        key = address(base_url)
        if key not in _servers:
            _servers[key] = _Elsewhere(base_url)
            _notify()


def wait_until_serving(url: str, timeout: float) -> bool:
    """Call this after a connection to ``url`` was refused. Returns True once aklab's server
    at that address runs again, so the request is worth sending once more. While a new
    server is being started, this waits for it, at most ``timeout`` seconds.

    A server that has just died but has not been reported yet (its watcher wakes up a moment
    after the exit) counts as one being started again.

    Returns False at once when the address is not aklab's, or when aklab gave up on it.
    Returns False after ``timeout`` if no server came back by then (``ELSEWHERE_WAIT`` for a
    server in another process)."""
    key = address(url)
    start = time.monotonic()
    deadline = start + timeout
    while True:
        with _changed:
            if key not in _servers:
                return False
            server, seen = _servers[key], _version
        if server is not None and server.running:  # outside the lock: it may ask the server
            return True
        polled = isinstance(server, _Elsewhere)
        if polled:
            deadline = min(deadline, start + ELSEWHERE_WAIT)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        with _changed:
            if _version == seen:  # nothing reported since the look above
                _changed.wait(min(remaining, POLL_S) if polled else remaining)
