"""The transport of an HTTP client for a model server on this machine.

It connects directly: an ``HTTP(S)_PROXY`` from the environment would take loopback
requests to a proxy that cannot reach them. When a connection is refused because aklab's
own server is being started again after it died, the request waits for the new server and
is sent once more, instead of failing the ask (see :mod:`aklab.llm.revival`).
"""

from __future__ import annotations

import asyncio

import httpx2
from pydantic_ai._http import DEFAULT_HTTP_LIMITS

from aklab.llm import revival

__all__ = ["ATTEMPTS", "RESTART_WAIT", "LoopbackTransport"]

#: Seconds a refused request waits at most for aklab's server to answer again. A start
#: takes about a second; ``LocalServer`` gives up on one after 120 s, and the wait ends then too.
RESTART_WAIT = 120.0
#: Sends of one request at most. A second refusal can come from a server that died a moment
#: before its watcher noticed, so it gets one more wait.
ATTEMPTS = 3


class LoopbackTransport(httpx2.AsyncHTTPTransport):
    """``httpx2.AsyncHTTPTransport`` with pydantic-ai's connection limits and no proxy; a request
    refused while aklab starts its server again waits for it (``RESTART_WAIT``) and is sent again."""

    def __init__(self) -> None:
        super().__init__(limits=DEFAULT_HTTP_LIMITS)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        attempt = 1
        while True:
            try:
                return await super().handle_async_request(request)
            except httpx2.ConnectError:
                # Nothing of the request was sent: sending it again cannot make the server do it twice.
                if attempt >= ATTEMPTS or not await asyncio.to_thread(
                    revival.wait_until_serving, str(request.url), RESTART_WAIT
                ):
                    raise
                attempt += 1
