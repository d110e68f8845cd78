"""One attempt at one scenario, in whatever process hosts it: start a Lab, ask the turns,
score the answer, close the Lab. Every engine runs this same function.

The attempt keeps its own time: each ask waits at most what is left of ``timeout_s``
(``Lab.ask`` then raises ``AskTimeout``, the runs in flight are stopped). The batch's
driver only steps in when an attempt does not come back at all (a hung check, a dead
worker). ``AttemptControl.cancel`` stops the Lab's asks from any thread: the ask in
progress returns at once with what arrived.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aklab._text import one_line
from aklab.llm import LlmUsageEvent

if TYPE_CHECKING:
    from aklab.batch.checks import Check
    from aklab.core import TeamGuard
    from aklab.lab.session import Lab
    from aklab.lab.teams import TeamSpec

__all__ = ["AttemptControl", "HostMemory", "HostMeter", "Job", "Outcome", "Status", "rss_mb", "run_attempt"]

Status = Literal["ok", "failed", "timeout", "cancelled"]
Key = tuple[int, int]  # (scenario index, attempt number from 1)


@dataclass(frozen=True)
class Job:
    """Everything a worker needs for one attempt (picklable when the team and check are).

    ``team`` already carries the scenario's model (the driver applied it). ``served``: the
    URLs of the model servers the driver (process ``driver_pid``) runs for the team and
    starts again if they die; a worker in another process waits for them as the driver's
    own requests do (``aklab.llm.revival.served_elsewhere``).
    """

    key: Key
    scenario_id: str
    turns: tuple[str, ...]
    team: TeamSpec
    guard: TeamGuard | None
    check: Check | None
    expected: str | None
    metadata: Mapping[str, Any]
    timeout_s: float | None
    served: tuple[str, ...] = ()
    driver_pid: int = 0


@dataclass(frozen=True)
class HostMemory:
    """The memory of the process that hosted an attempt (a Ray actor, a process worker), read
    there when the attempt ended. ``baseline_mb``: its RSS once ready, before any team;
    ``rss_mb``: its RSS now; ``teams``: the most teams it has hosted at once so far."""

    baseline_mb: float
    rss_mb: float
    teams: int


@dataclass
class Outcome:
    """What an attempt came back with (``host``: where its host's memory stood, when known)."""

    key: Key
    status: Status
    answer: str = ""
    score: float | None = None
    asks: int = 0
    events: list[LlmUsageEvent] = field(default_factory=list)
    wall_s: float = 0.0
    error: str | None = None
    worker: str = ""
    host: HostMemory | None = None


class AttemptControl:
    """Lets another thread cancel an attempt, whether its Lab is starting, asking or done."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lab: Lab | None = None
        self.cancelled = threading.Event()

    def attach(self, lab: Lab) -> None:
        with self._lock:
            self._lab = lab
            if self.cancelled.is_set():
                lab.stop()

    def detach(self) -> None:
        with self._lock:
            self._lab = None

    def cancel(self) -> None:
        with self._lock:
            self.cancelled.set()
            if self._lab is not None:
                self._lab.stop()

    def usage_so_far(self) -> list[LlmUsageEvent]:
        """The attempt's usage events up to now (for an attempt the driver gives up on)."""
        with self._lock:
            return list(self._lab.recorder.usage) if self._lab is not None else []


def rss_mb() -> float:
    """This process's resident set size in MB (``/proc/self/statm``; 0.0 where there is none)."""
    try:
        with open("/proc/self/statm") as f:
            resident = int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return resident * os.sysconf("SC_PAGE_SIZE") / 2**20


class HostMeter:
    """Counts the teams a worker process hosts at once and reads its memory around them.

    Made when the worker is ready: it imports what attempts import first, so the baseline
    holds the code and not the teams."""

    def __init__(self) -> None:
        import gc

        import aklab.batch.checks
        import aklab.lab.session  # noqa: F401  (imported for the baseline, see above)

        gc.collect()
        self.baseline_mb = rss_mb()
        self._lock = threading.Lock()
        self._now = 0
        self._most = 0

    def run(self, job: Job, control: AttemptControl) -> Outcome:
        """``run_attempt``, counted, with the host's memory on the outcome."""
        with self._lock:
            self._now += 1
            self._most = max(self._most, self._now)
        try:
            outcome = run_attempt(job, control)
            outcome.host = HostMemory(self.baseline_mb, rss_mb(), self._most)
            return outcome
        finally:
            with self._lock:
                self._now -= 1


def worker_name() -> str:
    return f"{os.uname().nodename}:{os.getpid()}"


def run_attempt(job: Job, control: AttemptControl | None = None) -> Outcome:
    """Run one attempt; never raises for the scenario's own failures (they are the outcome)."""
    from aklab.batch.checks import CheckContext, score
    from aklab.lab.session import AskTimeout, Lab

    control = control or AttemptControl()
    if job.served and os.getpid() != job.driver_pid:
        from aklab.llm import revival

        for url in job.served:
            revival.served_elsewhere(url)
    started = time.monotonic()
    deadline = None if job.timeout_s is None else started + job.timeout_s
    out = Outcome(job.key, "failed", worker=worker_name())
    lab: Lab | None = None
    turn = 0
    try:
        # A batch's record is its BatchResult: its many short sessions do not queue up on the
        # project's event store (one SQLite file shared by every thread would serialize them).
        lab = Lab(job.team, guard=job.guard, store=False)
        control.attach(lab)
        replies = None
        for text in job.turns:
            if control.cancelled.is_set():
                break
            turn += 1
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            replies = lab.ask(text, timeout=remaining)
            out.asks += 1
        if control.cancelled.is_set() or replies is None:
            out.status, out.error = "cancelled", "cancelled"
        elif not replies:
            errors = lab.errors()
            why = f": {errors[0]}" if errors else ""
            out.error = one_line(f"the team gave no reply to turn {turn}{why}")
        elif not replies.answers:  # only aklab's notices: "could not answer: cannot reach the model server"
            out.error = one_line(f"turn {turn}: {replies.notices[0].content}")
        else:
            out.answer = "\n\n".join(m.content for m in replies.answers)
            ctx = CheckContext(job.turns, out.answer, job.expected, job.metadata, job.scenario_id)
            try:
                out.score = score(job.check, out.answer, ctx)
            except Exception as exc:
                out.error = one_line(f"check raised {type(exc).__name__}: {exc}")
            else:
                out.status = "ok"
    except AskTimeout:
        out.status = "timeout"
        out.error = f"no answer within {job.timeout_s:g}s (turn {turn} of {len(job.turns)})"
    except Exception as exc:
        out.error = one_line(f"{type(exc).__name__}: {exc}")
    finally:
        if lab is not None:
            control.detach()
            out.events = list(lab.recorder.usage)
            lab.close()
        out.wall_s = time.monotonic() - started
    return out
