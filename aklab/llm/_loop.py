"""The event loop each agent's model runs use: a selector loop that does not poll for
I/O when it has none to wait for.

An asyncio loop asks its selector for ready file descriptors on every pass, with a zero
timeout while callbacks are queued. A pydantic-ai run makes about forty passes, and each
poll (``epoll_wait``) lets go of the interpreter lock. With one agent running, that costs
a system call. With two agents running at once on their own threads (a burst of messages),
each poll hands the lock to the other thread: about 150 thread switches per human message
on the demo model, 12-15 % of the team's throughput.

:func:`agent_loop` gives a loop whose selector answers a zero-timeout poll with "nothing
ready" without asking the kernel when the only descriptor registered is the loop's own
wake-up socket (an in-process model: the demo model, a ``FunctionModel``). Work handed
over from another thread (``call_soon_threadsafe``, used by ``interrupt()``) is queued
as a callback and runs on the next pass either way; the wake-up byte it leaves is read
when the loop next waits. With any other descriptor registered (an HTTP connection to a
provider), every pass polls, as asyncio's own loop does. A blocking or timed wait always
asks the kernel.

Only where asyncio's default policy would build a selector loop anyway: on Windows, or
with another policy installed (uvloop, say), the policy's loop is used as it is.
"""

from __future__ import annotations

import asyncio
import selectors
import sys
from typing import Any

__all__ = ["agent_loop"]


class _QuietSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """A selector that skips a zero-timeout poll when only the loop's wake-up socket is registered."""

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout <= 0 and len(self.get_map()) <= 1:
            return []
        result: list[tuple[selectors.SelectorKey, int]] = super().select(timeout)
        return result


def agent_loop() -> asyncio.AbstractEventLoop:
    """A new event loop for one agent's runs (see the module's docstring)."""
    if sys.platform == "win32" or type(asyncio.get_event_loop_policy()) is not asyncio.DefaultEventLoopPolicy:
        return asyncio.new_event_loop()
    selector: Any = _QuietSelector()
    return asyncio.SelectorEventLoop(selector)
