"""``engine="local"``: many teams in this process, one thread (and one Lab) per attempt.

Team sessions spend their time waiting on models, so threads overlap that wait well; the
actors of every Lab are pykka threads of this process. An attempt the driver gives up on
(a check that never returns) is cancelled and left to end on its daemon thread: Python
cannot kill a thread. Each outcome carries this process's memory, read as it ends
(``BatchResult.workers``), as a Ray actor's or a process worker's does.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from aklab.batch._attempt import AttemptControl, HostMeter, Job, Key, worker_name
from aklab.batch._engine import Engine, Finished, Lost, Post, Started
from aklab.llm import LlmUsageEvent

__all__ = ["LocalEngine"]

#: How long ``cancel``/``close`` wait for attempt threads to end.
JOIN_GRACE = 1.5


class LocalEngine(Engine):
    """Threads in this process; nothing is pickled."""

    name = "local"

    def __init__(self) -> None:
        self._post: Post | None = None
        self._lock = threading.Lock()
        self._controls: dict[Key, AttemptControl] = {}
        self._threads: dict[Key, threading.Thread] = {}

    @property
    def ships_jobs(self) -> bool:
        return False

    def dumps(self, obj: Any) -> bytes:  # pragma: no cover - never called: ships_jobs is False
        return b""

    def open(self, post: Post, concurrency: int) -> None:
        self._post = post
        self.slots = concurrency
        self._meter = HostMeter()  # this process's memory now: the teams' share is what it grows by

    def submit(self, job: Job) -> None:
        control = AttemptControl()
        thread = threading.Thread(
            target=self._run, args=(job, control), name=f"aklab-batch-{job.scenario_id}-{job.key[1]}", daemon=True
        )
        with self._lock:
            self._controls[job.key] = control
            self._threads[job.key] = thread
        thread.start()

    def _run(self, job: Job, control: AttemptControl) -> None:
        assert self._post is not None
        self._post(Started(job.key, worker_name()))
        try:
            outcome = self._meter.run(job, control)
        except BaseException as exc:  # run_attempt keeps the scenario's errors; this is a bug
            self._post(Lost(job.key, f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            with self._lock:
                self._controls.pop(job.key, None)
                self._threads.pop(job.key, None)
        self._post(Finished(outcome))

    def give_up(self, key: Key) -> list[LlmUsageEvent]:
        with self._lock:
            control = self._controls.get(key)
        if control is None:
            return []
        control.cancel()
        return control.usage_so_far()

    def cancel(self) -> None:
        with self._lock:
            controls = list(self._controls.values())
        for control in controls:
            control.cancel()
        self._join(JOIN_GRACE)

    def close(self) -> None:
        self._join(JOIN_GRACE)

    def _join(self, grace: float) -> None:
        deadline = time.monotonic() + grace
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
