"""Ray batches, run by test_ray.py inside a loopback-only network namespace; prints JSON.

aklab/batch/netns_run.sh .venv/bin/python -m tests.batch.ray_batch MARKER_DIR

First a batch that must start Ray itself is cancelled while Ray is starting; then, with
Ray started here, the frames, retries, timeouts, a cancel of running actors, and the
actors' memory. Every process Ray starts descends from this one (orphans too: this
process is their subreaper), so what is left of them can be listed.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import aklab.batch as batch
from aklab.batch import RayEngine, Scenario
from aklab.batch._ray import STARTING
from aklab.batch.progress import ProgressState
from aklab.errors import ConfigError
from aklab.llm import ModelConfig
from tests.batch.helpers import SLOW, FailsOnce
from tests.batch.test_cancel import _slow_batch, _WhenRunning

PR_SET_CHILD_SUBREAPER = 36
#: How long processes may take to exit once Ray has been shut down.
EXIT_WAIT_S = 30.0


def descendants() -> dict[int, str]:
    """Live (not zombie) processes descending from this one: pid -> command line."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if state not in ("Z", "X"):
            parents[int(entry)] = int(ppid)
    found: dict[int, str] = {}
    frontier = [os.getpid()]
    while frontier:
        me = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == me and pid not in found:
                found[pid] = _cmdline(pid)
                frontier.append(pid)
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:160]
    except OSError:
        return "?"


def left_over(timeout: float = EXIT_WAIT_S) -> list[str]:
    """The descendants still alive after waiting (on pidfds, not sleeps) up to ``timeout`` for them to exit."""
    deadline = time.monotonic() + timeout
    for pid in descendants():
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        finally:
            os.close(fd)
    return sorted(descendants().values())


def cancel_while_ray_starts() -> dict[str, Any]:
    """A Ray batch that starts Ray itself, cancelled as soon as its progress says Ray is starting."""
    import ray

    assert not ray.is_initialized()
    starting = threading.Event()
    notes: list[str] = []

    def watch(state: ProgressState) -> None:
        notes.append(state.note)
        if state.note == STARTING:
            starting.set()

    engine = RayEngine(workers=2)
    result = batch.start(_slow_batch(4), engine=engine, concurrency=2, timeout_s=120, progress=watch)
    saw_starting = starting.wait(60)  # the test fails on False, with the rest of what happened
    ray_up = ray.is_initialized()
    asked = time.monotonic()
    result.cancel()
    finished = result.wait(10)
    cancel_s = time.monotonic() - asked
    settled = engine.settled.wait(180)
    return {
        "start_saw_starting": saw_starting,
        "start_cancel_s": cancel_s,
        "start_finished": finished,
        "start_ray_up_at_cancel": ray_up,
        "start_rows": result.scenarios[["id", "status", "attempt", "error"]].to_dict(orient="records"),
        "start_attempts": len(result.attempts),
        "start_error": None if result.error is None else str(result.error),
        "start_last_line": result.state().line(),
        "start_notes": sorted(set(notes)),
        "start_settled": settled,
        "start_ray_after": ray.is_initialized(),
        "start_left_over": left_over(),
    }


def a_failed_start() -> dict[str, Any]:
    """A Ray that cannot start (a wrong ``ray.init`` option) stops the batch with one line."""
    import ray

    engine = RayEngine(init_options={"no_such_option": 1})
    try:
        batch.run(["Plan feature 1"], engine=engine, progress=False)
    except ConfigError as exc:
        error = str(exc)
    else:
        error = "no error"
    return {"failed_start": error, "failed_settled": engine.settled.wait(60), "failed_ray_after": ray.is_initialized()}


def interrupt_while_ray_starts() -> dict[str, Any]:
    """Ctrl-C (the notebook's stop button) while Ray starts: ``run`` re-raises it at once."""
    import ray

    engine = RayEngine(workers=1)
    sent: list[float] = []

    def interrupt_when_starting(state: ProgressState) -> None:
        if state.note == STARTING and not sent:
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)

    try:
        batch.run(_slow_batch(2), engine=engine, concurrency=2, timeout_s=120, progress=interrupt_when_starting)
    except KeyboardInterrupt:
        raised = time.monotonic()
    else:
        raised = -1.0
    result = batch.last_result()
    return {
        "interrupt_s": raised - sent[0] if sent and raised > 0 else None,
        "interrupt_statuses": None if result is None else sorted(set(result.scenarios["status"])),
        "interrupt_settled": engine.settled.wait(180),
        "interrupt_ray_after": ray.is_initialized(),
        "interrupt_left_over": left_over(),
    }


def two_batches_share_a_ray() -> dict[str, Any]:
    """Two batches start at once and neither finds Ray up: one starts it, both use it, and only
    the last to finish (the slow one) shuts it down."""
    import ray

    engines = [RayEngine(workers=1), RayEngine(workers=1)]
    quick = batch.start(["Plan feature 1"], engine=engines[0], progress=False)
    slow = batch.start(["Plan feature 2"], model=ModelConfig(demo_latency=1.0), engine=engines[1], progress=False)
    finished = quick.wait(120) and slow.wait(120)
    return {
        "shared_statuses": [*quick.scenarios["status"], *slow.scenarios["status"]],
        "shared_errors": [*quick.scenarios["error"], *slow.scenarios["error"]],
        "shared_finished": finished,
        "shared_settled": all(e.settled.wait(60) for e in engines),
        "shared_ray_after": ray.is_initialized(),
        "shared_left_over": left_over(),
    }


def batches(marker_dir: Path) -> dict[str, Any]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ray_processes = sum("ray" in line for line in descendants().values())
        scenarios = [
            "Plan feature 1",
            ["Plan the login page", "And test it"],
            Scenario("flaky", "Plan it", check=FailsOnce(str(marker_dir / "flaky"))),
            Scenario("hangs", "Plan it", model=SLOW),
        ]
        # 8 s an attempt: a Ray actor's first scenario took over 3 s with a compile running on both
        # cores (every scenario timed out); "hangs" still does, twice, against SLOW's latency.
        result = batch.run(scenarios, engine="ray", workers=2, concurrency=4, retries=1, timeout_s=8, progress=False)
        local = batch.run(scenarios[:2], engine="local", progress=False)
        watch = _WhenRunning(count=2)
        slow = batch.start(_slow_batch(4), engine=RayEngine(workers=2), concurrency=2, progress=watch)
        assert watch.ready.wait(60)
        asked = time.monotonic()
        slow.cancel()
        slow.wait(10)
        cancel_s = time.monotonic() - asked
        workers = result.workers
        return {
            "scenarios": result.scenarios.drop(columns=["wall_s"]).to_dict(orient="records"),
            "columns": list(result.scenarios.columns),
            "usage_columns": list(result.usage.columns),
            "local_columns": list(local.usage.columns),
            "usage_attempts": sorted(set(result.usage.query("scenario_id == 'flaky'")["attempt"].tolist())),
            "local_answers": local.scenarios["answer"].tolist(),
            "cancel_s": cancel_s,
            "cancel_statuses": sorted(set(slow.scenarios["status"])),
            "workers": workers.astype(object).where(workers.notna(), None).to_dict(orient="records"),
            "local_workers": local.workers.astype(object).where(local.workers.notna(), None).to_dict(orient="records"),
            "ray_processes": ray_processes,
        }
    finally:
        ray.shutdown(wait_for_processes=True)


def main(marker_dir: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"prctl(PR_SET_CHILD_SUBREAPER) failed: {os.strerror(ctypes.get_errno())}")
    out = a_failed_start()
    out.update(cancel_while_ray_starts())
    out.update(interrupt_while_ray_starts())
    out.update(two_batches_share_a_ray())
    out.update(batches(marker_dir))
    out["left_over"] = left_over()
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
