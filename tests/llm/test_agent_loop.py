"""The agent's event loop (aklab.llm._loop): no poll without I/O, but nothing missed."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from typing import Any

import pytest

from aklab.llm._loop import _QuietSelector, agent_loop

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="counts epoll's polls")


class _CountingPoller:
    """Stands in for the selector's kernel object, counting the polls that reach it."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.polls = 0

    def poll(self, *args: Any, **kwargs: Any) -> Any:
        self.polls += 1
        return self.real.poll(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _counted() -> tuple[asyncio.AbstractEventLoop, _CountingPoller]:
    loop = agent_loop()
    assert isinstance(loop._selector, _QuietSelector)  # type: ignore[attr-defined]
    selector: Any = loop._selector  # type: ignore[attr-defined]
    counter = _CountingPoller(selector._selector)
    selector._selector = counter
    return loop, counter


async def _spin(passes: int) -> None:
    for _ in range(passes):
        await asyncio.sleep(0)


def test_passes_with_callbacks_queued_do_not_poll_when_there_is_no_io() -> None:
    loop, counter = _counted()
    try:
        loop.run_until_complete(_spin(1_000))
    finally:
        loop.close()
    # asyncio's own loop polls once per pass: about a thousand here.
    assert counter.polls < 10


def test_a_registered_socket_is_polled_while_callbacks_are_queued() -> None:
    loop, counter = _counted()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    seen: list[bytes] = []
    loop.add_reader(ours.fileno(), lambda: seen.append(ours.recv(16)))
    theirs.send(b"ping")

    async def busy_until_read() -> int:
        for n in range(10_000):  # never idle: a loop that skipped every zero-timeout poll would not see the data
            if seen:
                return n
            await asyncio.sleep(0)
        return -1

    try:
        passes = loop.run_until_complete(busy_until_read())
    finally:
        loop.remove_reader(ours.fileno())
        ours.close()
        theirs.close()
        loop.close()
    assert seen == [b"ping"]
    assert 0 <= passes < 5
    assert counter.polls >= passes


def test_work_handed_over_from_another_thread_runs_whether_the_loop_is_busy_or_waiting() -> None:
    loop = agent_loop()
    done_idle = asyncio.Event()
    handed = threading.Event()

    async def wait_then_spin() -> int:
        handed.set()
        await done_idle.wait()  # idle: a blocking wait, woken by the other thread
        busy = loop.create_future()
        threading.Thread(target=lambda: loop.call_soon_threadsafe(busy.set_result, 7)).start()
        while not busy.done():  # busy: the callback lands with callbacks queued
            await asyncio.sleep(0)
        return int(busy.result())

    def hand_over() -> None:
        handed.wait(timeout=30)
        loop.call_soon_threadsafe(done_idle.set)

    helper = threading.Thread(target=hand_over)
    helper.start()
    try:
        assert loop.run_until_complete(asyncio.wait_for(wait_then_spin(), timeout=30)) == 7
    finally:
        helper.join(timeout=30)
        loop.close()


def test_a_cancel_from_another_thread_ends_a_busy_run() -> None:
    loop = agent_loop()
    started = threading.Event()

    async def forever() -> None:
        started.set()
        while True:
            await asyncio.sleep(0)

    task = loop.create_task(forever())
    canceller = threading.Thread(target=lambda: started.wait(30) and loop.call_soon_threadsafe(task.cancel))
    canceller.start()
    try:
        with pytest.raises(asyncio.CancelledError):
            loop.run_until_complete(task)
    finally:
        canceller.join(timeout=30)
        loop.close()


def test_timed_waits_still_wait() -> None:
    loop, counter = _counted()

    async def nap() -> float:
        start = loop.time()
        await asyncio.sleep(0.05)
        return loop.time() - start

    try:
        slept = loop.run_until_complete(nap())
    finally:
        loop.close()
    assert slept >= 0.05
    assert counter.polls >= 1
