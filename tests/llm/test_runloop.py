"""The shared run loop: runs from many threads overlap on one loop, with the caller's context."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from aklab.llm.runloop import RunLoop, shared_run_loop

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


def test_runs_from_two_threads_overlap_on_the_one_loop() -> None:
    loop = RunLoop(name="test-runs")
    first_waiting = threading.Event()
    threads: set[str] = set()
    shared: dict[str, asyncio.Event] = {}

    async def first() -> str:
        threads.add(threading.current_thread().name)
        shared["go"] = asyncio.Event()
        first_waiting.set()
        await shared["go"].wait()  # only the second run can set it: both are on the loop at once
        return "first"

    async def second() -> str:
        threads.add(threading.current_thread().name)
        shared["go"].set()
        return "second"

    with ThreadPoolExecutor(2) as pool:
        a = pool.submit(loop.run, first())
        assert first_waiting.wait(10)
        b = pool.submit(loop.run, second())
        assert (a.result(10), b.result(10)) == ("first", "second")
    assert threads == {"test-runs"}


def test_the_callers_context_goes_with_the_run() -> None:
    async def read() -> str:
        return VAR.get()

    token = VAR.set("from the caller")
    try:
        assert shared_run_loop().run(read()) == "from the caller"
    finally:
        VAR.reset(token)


def test_an_error_in_the_run_is_raised_to_the_caller() -> None:
    async def boom() -> None:
        raise ValueError("provider said no")

    with pytest.raises(ValueError, match="provider said no"):
        shared_run_loop().run(boom())


def test_calling_run_from_the_loop_thread_is_refused_not_deadlocked() -> None:
    loop = RunLoop(name="test-nested")

    async def inner() -> int:
        return 1

    async def outer() -> str:
        coro = inner()
        try:
            loop.run(coro)
        except RuntimeError as exc:
            return str(exc)
        return "ran"

    assert "would deadlock" in loop.run(outer())
