"""RunLoop: one asyncio event loop, on one daemon thread, for every agent's model runs.

An actor thread that starts a run hands the coroutine to the shared loop and blocks on
its result, so an actor still handles one message at a time. What changes is where the
pydantic-ai work happens: on a single thread, instead of one event loop per actor
thread. Why:

- The model work of a whole team stays on one thread, the way a bare pydantic-ai
  program runs it; with a loop per actor, each turn's heavy work (history processing)
  moved to whichever core that actor's thread woke on (bench B1).
- Runs that wait on the network (real providers) overlap on the one loop, at no cost
  in threads.

The caller's ``contextvars`` go with the coroutine (``capture_run_messages`` and the
like keep working). Sync tools and sync model functions still run in worker threads
(pydantic-ai sends them there), so they do not hold up the loop. What must not happen
is a coroutine that blocks (``time.sleep``, a blocking ``future.get()``) inside a run:
it would stall every agent's run, so ``run`` refuses to be called from the loop thread
itself (it would deadlock) and says so.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["RunLoop", "shared_run_loop"]

T = TypeVar("T")

#: Sync tools run through anyio's thread limiter, which is per event loop; every agent
#: shares this loop now, so give it room for many blocking tool calls at once.
WORKER_THREADS = 256


class RunLoop:
    """An event loop on its own daemon thread, started on first use."""

    def __init__(self, name: str = "aklab-runs") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def _ensure(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is not None and self._thread is not None and self._thread.is_alive():
            return loop
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                ready = threading.Event()
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=self._serve, args=(loop, ready), name=self.name, daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.create_task(_widen_thread_limiter())
        loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the shared loop with the caller's context; block for its result.

        An exception of the coroutine is raised here. If the caller is interrupted while
        waiting (``KeyboardInterrupt``), the run is cancelled before re-raising.
        """
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "RunLoop.run was called from the run loop's own thread, which would deadlock; "
                "await the coroutine instead, or call from an actor or worker thread"
            )
        loop = self._ensure()
        context = contextvars.copy_context()
        result: concurrent.futures.Future[T] = concurrent.futures.Future()
        tasks: list[asyncio.Task[T]] = []

        def start() -> None:
            if not result.set_running_or_notify_cancel():
                coro.close()
                return
            task = loop.create_task(coro, context=context)
            tasks.append(task)
            task.add_done_callback(_settle(result))

        loop.call_soon_threadsafe(start)
        try:
            return result.result()
        except BaseException:
            if not result.done():
                loop.call_soon_threadsafe(lambda: [t.cancel() for t in tasks])
                concurrent.futures.wait([result])
            raise


def _settle(result: concurrent.futures.Future[T]) -> Any:
    def done(task: asyncio.Task[T]) -> None:
        if task.cancelled():
            result.set_exception(asyncio.CancelledError("the run was cancelled"))
            return
        error = task.exception()
        if error is not None:
            result.set_exception(error)
        else:
            result.set_result(task.result())

    return done


async def _widen_thread_limiter() -> None:
    try:
        from anyio import to_thread

        to_thread.current_default_thread_limiter().total_tokens = WORKER_THREADS
    except Exception:  # anyio missing or changed: keep its default (40)
        pass


_shared = RunLoop()


def shared_run_loop() -> RunLoop:
    """The process-wide loop every ``ReactAgent`` runs on."""
    return _shared
