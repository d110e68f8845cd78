"""``engine="process"``: a pool of worker processes (spawn), each hosting several teams.

Why not ``concurrent.futures.ProcessPoolExecutor``: when one of its workers dies, every
pending future fails and the pool is broken. Here each worker has its own pipe, the
driver knows which attempts each one hosts, and a worker that dies (killed, out of
memory) costs only its own attempts (reported as lost, then retried) and is replaced.

A worker runs each attempt on a thread (team sessions wait on models, so a process hosts
``ceil(concurrency / workers)`` of them at once). Cancelling tells every worker to stop
its teams and exit, and kills whatever is still alive after ``STOP_GRACE``; that holds
while the workers are still starting (importing aklab, ~4 s on 2 cores; the progress says
``starting workers`` until the first is ready).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import pickle
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from aklab.batch._attempt import Job, Key, Outcome
from aklab.batch._engine import Broken, Engine, Finished, Lost, Note, Post, Started
from aklab.llm import LlmUsageEvent

__all__ = ["ProcessEngine"]

#: How long stopping workers waits for them to exit before killing them.
STOP_GRACE = 1.0
#: What the progress shows until the first worker is ready.
STARTING = "starting workers"


@dataclass(eq=False)
class _Worker:
    process: Any  # multiprocessing.context.SpawnProcess
    conn: Connection
    keys: set[Key] = field(default_factory=set)
    gone: bool = False
    ready: bool = False


class ProcessEngine(Engine):
    """Worker processes started with the ``spawn`` method (safe with threads, same on every OS)."""

    name = "process"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers
        self._ctx = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._pool: list[_Worker] = []
        self._post: Post | None = None
        self._per_worker = 1
        self._closing = False
        self._wake_r, self._wake_w = self._ctx.Pipe(duplex=False)
        self._reader: threading.Thread | None = None
        self._any_ready = False

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers."""
        with self._lock:
            return [w.process.pid for w in self._pool if not w.gone]

    def open(self, post: Post, concurrency: int) -> None:
        self._post = post
        n = self.workers or min(concurrency, os.cpu_count() or 1)
        n = max(1, min(n, concurrency))
        self._per_worker = math.ceil(concurrency / n)
        self.slots = concurrency
        post(Note(STARTING))
        with self._lock:
            self._pool = [self._spawn() for _ in range(n)]
        self._reader = threading.Thread(target=self._read, name="aklab-batch-process-reader", daemon=True)
        self._reader.start()

    def _spawn(self) -> _Worker:
        from aklab.batch._process_worker import main

        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=main, args=(child,), name="aklab-batch-worker", daemon=True)
        process.start()
        child.close()
        return _Worker(process, parent)

    def submit(self, job: Job) -> None:
        with self._lock:
            live = [w for w in self._pool if not w.gone]
            if not live:  # every worker died at start; Broken is on its way to the driver
                return
            worker = min(live, key=lambda w: len(w.keys))
            worker.keys.add(job.key)
        try:
            worker.conn.send(("run", job.key, pickle.dumps(job)))
        except (OSError, ValueError) as exc:  # the worker died meanwhile; the reader reports its keys
            with self._lock:
                if worker.gone:
                    worker.keys.discard(job.key)
                    lost = True
                else:
                    lost = False
            if lost and self._post is not None:
                self._post(Lost(job.key, f"worker process died before it got the job ({exc})"))

    def give_up(self, key: Key) -> list[LlmUsageEvent]:
        with self._lock:
            worker = next((w for w in self._pool if key in w.keys), None)
            if worker is not None:
                worker.keys.discard(key)
        if worker is not None and not worker.gone:
            try:
                worker.conn.send(("cancel", key))
            except (OSError, ValueError):
                pass
        return []

    # -- the reader thread: news from workers, and their deaths ------------------------
    def _read(self) -> None:
        while True:
            with self._lock:
                if self._closing and all(w.gone for w in self._pool):
                    return
                live = [w for w in self._pool if not w.gone]
            handles: list[Any] = [self._wake_r]
            for w in live:
                handles += [w.conn, w.process.sentinel]
            try:
                ready = wait(handles)
            except (OSError, ValueError):  # a handle closed under us: look again
                continue
            if self._wake_r in ready:
                while self._wake_r.poll():
                    self._wake_r.recv()
            for w in live:
                if w.conn in ready:
                    self._drain(w)
                if w.process.sentinel in ready or (w.conn in ready and not w.process.is_alive()):
                    self._drain(w)
                    self._died(w)

    def _drain(self, worker: _Worker) -> None:
        assert self._post is not None
        try:
            while not worker.gone and worker.conn.poll():
                message = worker.conn.recv()
                kind = message[0]
                if kind == "ready":
                    if not self._any_ready:
                        self._post(Note(""))
                    worker.ready = self._any_ready = True
                elif kind == "started":
                    self._post(Started(message[1], message[2]))
                elif kind == "done":
                    outcome: Outcome = message[1]
                    with self._lock:
                        mine = outcome.key in worker.keys
                        worker.keys.discard(outcome.key)
                    if mine:
                        self._post(Finished(outcome))
        except (EOFError, OSError):
            self._died(worker)

    def _died(self, worker: _Worker) -> None:
        with self._lock:
            if worker.gone:
                return
            worker.gone = True
            keys, worker.keys = sorted(worker.keys), set()
            replace = not self._closing
        worker.process.join(0.5)
        code = worker.process.exitcode
        why = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        assert self._post is not None
        if not worker.ready and not self._any_ready:  # no worker ever started: something is wrong here
            self._post(
                Broken(
                    f"process workers exit while starting ({why}): in a script, start the batch under "
                    "`if __name__ == '__main__':` (workers are spawned and import the main module); "
                    "check that `python -c 'import aklab.batch'` works"
                )
            )
            return
        if replace:
            with self._lock:
                self._pool.append(self._spawn())
        for key in keys:
            self._post(Lost(key, f"worker process {worker.process.pid} died ({why})"))

    def _wake(self) -> None:
        try:
            self._wake_w.send(None)
        except (OSError, ValueError):
            pass

    # -- stopping ----------------------------------------------------------------------
    def cancel(self) -> None:
        self._stop_all(("stop",))

    def close(self) -> None:
        self._stop_all(("stop",))
        if self._reader is not None:
            self._reader.join(STOP_GRACE)
        for w in self._pool:
            w.conn.close()
        self._wake_r.close()
        self._wake_w.close()

    def _stop_all(self, message: tuple[str]) -> None:
        with self._lock:
            self._closing = True
            pool = list(self._pool)
        for w in pool:
            if not w.gone:
                try:
                    w.conn.send(message)
                except (OSError, ValueError):
                    pass
        self._wake()
        _join_or_kill([w.process for w in pool], STOP_GRACE)
        with self._lock:
            for w in pool:
                w.gone = True
                w.keys.clear()
        self._wake()


def _join_or_kill(processes: Sequence[Any], grace: float) -> None:
    deadline = time.monotonic() + grace
    for p in processes:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in processes:
        if p.is_alive():
            p.kill()  # our own worker, by its handle
    for p in processes:
        p.join(1.0)
