"""Cancelling a batch (result.cancel() from another thread, or an interrupt in the caller)
stops every engine's work within 2 s, and the batch reports what it had."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import aklab.batch as batch
from aklab.batch import Scenario
from aklab.batch._driver import GIVE_UP_GRACE
from aklab.batch.progress import ProgressState
from tests.batch.helpers import SLOW

ENGINES = ["local", "process"]
BOUND_S = 2.0


def _slow_batch(n: int = 6) -> list[batch.ScenarioLike]:
    return [Scenario(f"slow{i}", f"Plan feature {i}", model=SLOW) for i in range(n)]


class _WhenRunning:
    """A progress callback that sets ``ready`` once ``count`` attempts are in flight."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.ready = threading.Event()
        self.pids: set[int] = set()

    def __call__(self, state: ProgressState) -> None:
        tails = (worker.rsplit(":", 1)[-1] for _, worker in state.running.values())
        self.pids |= {int(tail) for tail in tails if tail.isdigit()}  # host:pid (Ray names its actors)
        if len(state.running) >= self.count:
            self.ready.set()


@pytest.mark.parametrize("engine", ENGINES)
def test_cancel_from_another_thread_stops_all_work_within_two_seconds(engine: str) -> None:
    watch = _WhenRunning(count=2)
    result = batch.start(_slow_batch(), engine=engine, concurrency=2, workers=1, timeout_s=120, progress=watch)
    assert watch.ready.wait(60), "the slow attempts never started"
    asked = time.monotonic()
    threading.Thread(target=result.cancel, name="canceller").start()
    assert result.wait(BOUND_S + 3), "the batch did not finish after cancel"
    took = time.monotonic() - asked
    assert took < BOUND_S, f"cancel took {took:.2f}s"
    statuses = result.scenarios["status"]
    assert set(statuses) == {"cancelled"}
    assert sorted(result.scenarios["attempt"])[-2:] == [1, 1] and (result.scenarios["attempt"] == 0).sum() == 4
    assert "cancelled before it started" in set(result.scenarios["error"])
    if engine == "local":
        assert not [t for t in threading.enumerate() if t.name.startswith("aklab-batch-slow")]
    else:
        for pid in watch.pids:  # our own workers are gone (reaped), not just told to stop
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    result.cancel()  # a second cancel, after the end, is harmless


@pytest.mark.parametrize(("engine", "to_a_worker_thread"), [*((e, False) for e in ENGINES), ("local", True)])
def test_an_interrupt_in_the_caller_cancels_the_batch_and_re_raises(engine: str, to_a_worker_thread: bool) -> None:
    """Ctrl-C reaches the process; the kernel may hand it to any thread (``to_a_worker_thread``:
    the progress callback's own, not the one waiting in ``batch.run``)."""
    watch = _WhenRunning(count=2)
    interrupted: list[float] = []

    def interrupt_when_running(state: ProgressState) -> None:
        watch(state)
        if watch.ready.is_set() and not interrupted:
            interrupted.append(time.monotonic())
            if to_a_worker_thread:
                signal.pthread_kill(threading.get_ident(), signal.SIGINT)
            else:
                os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C or the notebook's stop button sends

    with pytest.raises(KeyboardInterrupt):
        batch.run(
            _slow_batch(4), engine=engine, concurrency=2, workers=1, timeout_s=120, progress=interrupt_when_running
        )
    took = time.monotonic() - interrupted[0]
    assert took < BOUND_S, f"the interrupt took {took:.2f}s to stop the batch"
    result = batch.last_result()
    assert result is not None and result.done()
    assert set(result.scenarios["status"]) == {"cancelled"}


def test_cancel_while_process_workers_are_starting_stops_them_within_two_seconds() -> None:
    from aklab.batch import ProcessEngine
    from aklab.batch._process import STARTING

    engine = ProcessEngine(workers=2)
    starting = threading.Event()
    seen: dict[str, object] = {}

    def watch(state: ProgressState) -> None:
        if state.note == STARTING and not starting.is_set():
            seen.update(pids=engine.pids, ready=engine._any_ready)
            starting.set()

    result = batch.start(_slow_batch(4), engine=engine, concurrency=2, timeout_s=120, progress=watch)
    assert starting.wait(60), "the progress never said the workers were starting"
    asked = time.monotonic()
    result.cancel()
    assert result.wait(BOUND_S + 3), "the batch did not finish after cancel"
    took = time.monotonic() - asked
    assert took < BOUND_S, f"cancel took {took:.2f}s"
    assert seen["ready"] is False  # the cancel came while the workers were still importing
    # A worker that got ready while being told to stop may have begun an attempt (then cancelled it).
    assert set(result.scenarios["status"]) == {"cancelled"} and set(result.scenarios["attempt"]) <= {0, 1}
    assert (result.scenarios["attempt"] == 0).sum() >= 2  # concurrency 2: two never went out
    assert result.state().note == ""
    pids = seen["pids"]
    assert isinstance(pids, list) and len(pids) == 2
    for pid in pids:  # killed and reaped, not left importing
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_timeouts_are_enforced_even_when_a_check_never_returns() -> None:
    # Long enough for the turn before the check, even the first one in a fresh process (the
    # timeout must come in the check: a turn cut short by it times out inside the attempt).
    timeout_s = 2.0
    gate = threading.Event()

    def stuck(answer: str) -> bool:
        gate.wait(60)  # a check that hangs: the driver gives up on the attempt
        return True

    try:
        started = time.monotonic()
        result = batch.run(
            [Scenario("stuck", "Plan it", check=stuck), "Plan the login page"],
            timeout_s=timeout_s,
            concurrency=2,
            progress=False,
        )
        took = time.monotonic() - started
    finally:
        gate.set()
    table = result.scenarios.set_index("id")
    assert table.loc["stuck", "status"] == "timeout" and "abandoned" in table.loc["stuck", "error"]
    assert table.loc["s2", "status"] == "ok"
    assert took < timeout_s + GIVE_UP_GRACE + 10.0  # a fresh process starts in up to ~4 s; the check hangs 60 s
    assert result.workers["attempts"].sum() == 2  # the abandoned attempt too, on the worker it started on
