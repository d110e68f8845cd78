"""The body of a process-pool worker: run the jobs the driver sends, on threads.

Messages in: ``("run", key, pickled job)``, ``("cancel", key)``, ``("stop",)``. Messages
out: ``("ready", worker)`` once, then ``("started", key, worker)`` and ``("done", outcome)``.
A job is unpickled here, on its own thread, so a job that cannot be (a class only the
driver's ``__main__`` has) fails that attempt, not the worker. The worker exits when told to stop
or when its pipe closes (the driver is gone), cancelling its teams first.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from multiprocessing.connection import Connection

from aklab.batch._attempt import AttemptControl, HostMeter, Job, Key, Outcome, worker_name

__all__ = ["main"]


def main(conn: Connection) -> None:
    send_lock = threading.Lock()
    controls: dict[Key, AttemptControl] = {}
    lock = threading.Lock()
    threads: list[threading.Thread] = []

    def send(message: object) -> None:
        with send_lock:
            try:
                conn.send(message)
            except (OSError, ValueError):  # the driver is gone: nobody to tell
                pass

    def run(key: Key, data: bytes) -> None:
        control = AttemptControl()
        with lock:
            controls[key] = control
        send(("started", key, worker_name()))
        try:
            job: Job = pickle.loads(data)
        except Exception as exc:
            error = f"the worker cannot unpickle the scenario: {type(exc).__name__}: {exc}"
            outcome = Outcome(key, "failed", error=" ".join(error.split())[:300], worker=worker_name())
        else:
            outcome = meter.run(job, control)
        with lock:
            controls.pop(key, None)
        send(("done", outcome))

    meter = HostMeter()  # imports what attempts need, then reads the baseline memory
    send(("ready", worker_name()))

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        if message[0] == "run":
            thread = threading.Thread(target=run, args=(message[1], message[2]), daemon=True)
            threads.append(thread)
            thread.start()
        elif message[0] == "cancel":
            with lock:
                found = controls.get(message[1])
            if found is not None:
                found.cancel()
        elif message[0] == "stop":
            break
    with lock:
        pending = list(controls.values())
    for control in pending:
        control.cancel()
    deadline = time.monotonic() + 0.5
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    os._exit(0)  # attempt threads are daemons; leave without waiting on anything else
