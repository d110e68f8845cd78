"""The driver: one thread per batch that submits attempts, enforces timeouts and retries,
and records every outcome into the :class:`BatchResult`. Engines only run attempts.

Timeouts: an attempt keeps its own time (``Lab.ask`` waits at most what is left of
``timeout_s``); the driver gives up on one that has not come back ``GIVE_UP_GRACE``
seconds after that (a hung check, a wedged worker) and records it as a timeout.
Retries: an attempt that failed, timed out or lost its worker is tried again, up to
``retries`` more times, before any scenario not yet started.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from aklab.batch._attempt import Job, Key, Outcome
from aklab.batch._engine import Broken, Engine, Finished, Lost, Named, Note, Started
from aklab.batch._result import CANCEL_WAIT, BatchResult
from aklab.batch._scenario import Scenario, ScenarioLike, normalize
from aklab.batch.progress import NoProgress, ProgressSink, ProgressState, make_sink
from aklab.errors import ConfigError

if TYPE_CHECKING:
    from aklab.core import TeamGuard
    from aklab.lab.teams import TeamSpec
    from aklab.llm import ModelConfig

__all__ = ["last_result", "run", "start"]

log = logging.getLogger("aklab.batch")

#: Seconds past ``timeout_s`` before the driver stops waiting for an attempt.
GIVE_UP_GRACE = 2.0
#: How often ``run`` looks for an interrupt while the batch goes on (seconds).
INTERRUPT_POLL_S = 0.1
EngineName = Literal["local", "process", "ray"]
_last: BatchResult | None = None


def last_result() -> BatchResult | None:
    """The most recent batch of this process (also after an interrupted ``run``)."""
    return _last


def run(
    scenarios: Iterable[ScenarioLike] | str | Path,
    *,
    team: str | Path | TeamSpec = "dev-team",
    model: str | ModelConfig | None = None,
    engine: EngineName | Engine = "local",
    concurrency: int = 8,
    workers: int | None = None,
    timeout_s: float | None = 300.0,
    retries: int = 0,
    guard: TeamGuard | None = None,
    trust: Iterable[str] = (),
    progress: bool | ProgressSink | Callable[[ProgressState], Any] = True,
) -> BatchResult:
    """Run every scenario in its own team session and return the :class:`BatchResult`.

    ``scenarios``: questions, lists of turns, :class:`Scenario` objects, or a file path.
    ``team``/``model``: as for ``Lab`` (a scenario may override both). ``engine``:
    ``local`` (threads here), ``process`` (a spawn process pool), ``ray`` (Ray actors), or
    an engine object (``RayEngine(address=...)``). ``concurrency``: sessions at once;
    ``workers``: processes or Ray actors that host them (default: one per core, at most
    ``concurrency``). ``timeout_s``: per attempt, all turns included (None: no limit).
    ``retries``: further attempts for a scenario that failed, timed out or lost its worker.
    ``progress``: True (a widget in a kernel, text elsewhere), False, or a sink/callable.

    An interrupt (Ctrl-C, the notebook's stop button) cancels the batch, waits for its
    work to stop, and re-raises; the partial result is ``aklab.batch.last_result()``.
    """
    started: BatchResult | None = None
    try:
        started = start(
            scenarios,
            team=team,
            model=model,
            engine=engine,
            concurrency=concurrency,
            workers=workers,
            timeout_s=timeout_s,
            retries=retries,
            guard=guard,
            trust=trust,
            progress=progress,
        )
        # Wake now and then: Ctrl-C may be delivered to another thread of the process, and
        # Python runs its handler (KeyboardInterrupt) only when the main thread runs Python;
        # a wait without a timeout could then sleep until the whole batch is over.
        while not started.wait(INTERRUPT_POLL_S):
            pass
    except KeyboardInterrupt:
        # The interrupt may land inside start(), once the driver runs but before it returns.
        running = started or _last
        if running is not None:
            running.cancel()
            running.wait(CANCEL_WAIT)
        raise
    result = started
    if result.error is not None:
        raise result.error
    return result


def start(
    scenarios: Iterable[ScenarioLike] | str | Path,
    *,
    team: str | Path | TeamSpec = "dev-team",
    model: str | ModelConfig | None = None,
    engine: EngineName | Engine = "local",
    concurrency: int = 8,
    workers: int | None = None,
    timeout_s: float | None = 300.0,
    retries: int = 0,
    guard: TeamGuard | None = None,
    trust: Iterable[str] = (),
    progress: bool | ProgressSink | Callable[[ProgressState], Any] = False,
) -> BatchResult:
    """Like :func:`run`, but return the live result at once (``.wait()``, ``.cancel()``)."""
    global _last
    _check_numbers(concurrency, timeout_s, retries, workers)
    items = normalize(scenarios)
    backend = _engine(engine, workers)
    jobs, labels = _plan(items, team, model, guard, timeout_s, tuple(trust))
    if backend.ships_jobs:
        _check_picklable(backend, jobs, items)
    backend.prepare()
    result = BatchResult(items, labels, backend.name)
    sink = make_sink(progress, len(items), backend.name)
    driver = _Driver(result, jobs, backend, sink, concurrency=concurrency, retries=retries, timeout_s=timeout_s)
    result._cancel = driver.cancel
    _last = result
    driver.start()
    return result


def _check_numbers(concurrency: int, timeout_s: float | None, retries: int, workers: int | None) -> None:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be a whole number >= 1, not {concurrency!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ConfigError(f"workers must be a whole number >= 1 (or None: one per core), not {workers!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ConfigError(f"retries must be a whole number >= 0, not {retries!r}")
    if timeout_s is not None and (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, int | float)
        or not math.isfinite(timeout_s)
        or timeout_s <= 0
    ):
        raise ConfigError(f"timeout_s must be a number of seconds > 0 (or None for no limit), not {timeout_s!r}")


def _engine(engine: EngineName | Engine, workers: int | None) -> Engine:
    if isinstance(engine, Engine):
        return engine
    if engine == "local":
        from aklab.batch._local import LocalEngine

        return LocalEngine()
    if engine == "process":
        from aklab.batch._process import ProcessEngine

        return ProcessEngine(workers=workers)
    if engine == "ray":
        from aklab.batch._ray import RayEngine

        return RayEngine(workers=workers)
    raise ConfigError(f"engine {engine!r}: choose 'local', 'process' or 'ray' (or pass an engine object)")


def _plan(
    items: list[Scenario],
    team: str | Path | TeamSpec,
    model: str | ModelConfig | None,
    guard: TeamGuard | None,
    timeout_s: float | None,
    trust: tuple[str, ...],
) -> tuple[list[Job], list[tuple[str, str]]]:
    """Resolve each scenario's team and model once per distinct pair, here (fail fast)."""
    from aklab.lab.session import resolve_team
    from aklab.llm import ModelConfig
    from aklab.llm.local_auto import serve_if_needed, shared_server

    cache: dict[tuple[int, int], tuple[TeamSpec, str, tuple[str, ...]]] = {}
    keep: list[object] = []  # keeps the cache's id() keys alive
    jobs, labels = [], []
    for i, s in enumerate(items):
        t = s.team if s.team is not None else team
        m = s.model if s.model is not None else model
        keep += [t, m]
        ck = (id(t), id(m)) if not isinstance(t, str) or not isinstance(m, str | None) else (hash(t), hash(m))
        if ck not in cache:
            try:
                spec = resolve_team(t, trust=trust)
                if m is not None:
                    spec = spec.with_model(ModelConfig.parse(m) if isinstance(m, str) else m)
                # local:smollm2 with nothing serving it: one server of aklab's, here, for every
                # worker (process and Ray workers get its URL instead of each starting one)
                spec = spec.map_models(serve_if_needed)
            except ConfigError as exc:
                raise ConfigError(f"scenario {s.id!r}: {exc}") from exc
            spec = _headless(spec)
            own = shared_server()
            served = tuple(sorted({u for u in _base_urls(spec) if own is not None and u == own.base_url}))
            cache[ck] = (spec, _model_label(spec), served)
        spec, label, served = cache[ck]
        jobs.append(
            Job(
                (i, 1),
                s.id,
                s.turns,
                spec,
                guard,
                s.check,
                s.expected,
                s.metadata,
                timeout_s,
                served=served,
                driver_pid=os.getpid(),
            )
        )
        labels.append((spec.name, label))
    return jobs, labels


def _base_urls(spec: TeamSpec) -> set[str]:
    """The model servers the team's members are pointed at."""
    urls = {getattr(getattr(c.config, "model_cfg", None), "base_url", None) for c in spec.cards}
    return {u for u in urls if isinstance(u, str)}


def _headless(spec: TeamSpec) -> TeamSpec:
    """The team without streaming: a batch session has no one watching its messages being
    written, and streaming them costs CPU on every chunk (the answers and usage are the same)."""
    from aklab.lab.teams import TeamSpec

    def quiet(card: Any) -> Any:
        runtime = getattr(card.config, "runtime_cfg", None)
        if runtime is None or not getattr(runtime, "stream", False):
            return card
        config = card.config.model_copy(update={"runtime_cfg": runtime.model_copy(update={"stream": False})})
        return card.model_copy(update={"config": config})

    return TeamSpec(spec.name, [quiet(c) for c in spec.cards], spec.entry, list(spec.start))


def _model_label(spec: TeamSpec) -> str:
    labels = {c.config.model_cfg.label for c in spec.cards if hasattr(c.config, "model_cfg")}
    return ", ".join(sorted(labels))


def _check_picklable(engine: Engine, jobs: list[Job], items: list[Scenario]) -> None:
    """Every job must travel to the workers: name the first part that cannot, in one line."""
    seen: set[int] = set()
    for job, scenario in zip(jobs, items, strict=True):
        for what, value in (("team", job.team), ("check", job.check), ("guard", job.guard), ("job", job)):
            if id(value) in seen:
                continue
            try:
                data = engine.dumps(value)
                if engine.name == "process" and _needs_main(data):
                    raise ValueError(
                        "it is defined in this notebook or console (__main__), which workers cannot import"
                    )
            except Exception as exc:
                why = " ".join(str(exc).split())[:160]
                hint = "define it in a module file" if what == "check" else "make it importable from a module"
                raise ConfigError(
                    f"engine={engine.name!r} sends scenarios to other processes, and scenario {scenario.id!r}'s "
                    f"{what} ({_short(value)}) cannot be pickled: {why}; {hint}, or use engine='local'"
                ) from exc
            if what != "job":
                seen.add(id(value))


def _needs_main(data: bytes) -> bool:
    """True when pickled ``data`` names something in ``__main__`` and ``__main__`` is no file a
    spawned worker could import (a notebook, a console)."""
    import sys

    if getattr(sys.modules.get("__main__"), "__file__", None):
        return False
    import pickletools

    return any(
        arg == "__main__" or (isinstance(arg, str) and arg.startswith("__main__ "))
        for _, arg, _ in pickletools.genops(data)
    )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Cancel:
    pass


class _Driver:
    def __init__(
        self,
        result: BatchResult,
        jobs: list[Job],
        engine: Engine,
        sink: ProgressSink,
        *,
        concurrency: int,
        retries: int,
        timeout_s: float | None,
    ) -> None:
        self.result = result
        self.jobs = jobs
        self.engine = engine
        self.sink = sink
        self.quiet = isinstance(sink, NoProgress)  # no state to build for nobody
        self.concurrency = concurrency
        self.retries = retries
        self.timeout_s = timeout_s
        self.inbox: queue.SimpleQueue[Started | Finished | Lost | Broken | Named | Note | _Cancel] = queue.SimpleQueue()
        self.cancelled = threading.Event()
        self.thread = threading.Thread(target=self._main, name="aklab-batch-driver", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def cancel(self) -> None:
        self.cancelled.set()
        self.inbox.put(_Cancel())

    def _main(self) -> None:
        try:
            self._loop()
        except BaseException as exc:
            if not isinstance(exc, ConfigError):
                log.exception("the batch driver failed")
            self.result.error = exc
            self.cancelled.set()
            try:
                self.engine.cancel()
            except Exception:
                log.exception("the engine did not cancel cleanly")
        finally:
            self._close()

    def _loop(self) -> None:
        self.engine.open(self.inbox.put, self.concurrency)
        self._notify()
        pending: deque[Key] = deque(job.key for job in self.jobs)
        self.running: dict[Key, float | None] = {}  # key -> when it started (None: not yet)
        while (pending or self.running) and not self.cancelled.is_set():
            while pending and len(self.running) < self.engine.slots:
                key = pending.popleft()
                self.running[key] = None
                self.engine.submit(self._job(key))
            try:
                message = self.inbox.get(timeout=self._wait_for())
            except queue.Empty:
                for key in self._overdue():
                    self._give_up(key, pending)
                continue
            if isinstance(message, _Cancel):
                break
            if isinstance(message, Broken):
                raise ConfigError(message.error)
            if isinstance(message, Note):
                self.result._note = message.text
                self._notify()
                continue
            if isinstance(message, Named):
                self.result._worker_named(message.provisional, message.worker)
                continue
            self._handle(message, pending)

    def _job(self, key: Key) -> Job:
        job = self.jobs[key[0]]
        return job if job.key == key else replace(job, key=key)

    def _wait_for(self) -> float | None:
        if self.timeout_s is None:
            return None
        started = [t for t in self.running.values() if t is not None]
        if not started:
            return None
        return max(0.0, min(started) + self.timeout_s + GIVE_UP_GRACE - time.monotonic())

    def _overdue(self) -> list[Key]:
        assert self.timeout_s is not None
        now = time.monotonic()
        limit = self.timeout_s + GIVE_UP_GRACE
        return [k for k, t in self.running.items() if t is not None and now - t >= limit]

    def _handle(self, message: Started | Finished | Lost, pending: deque[Key]) -> None:
        if isinstance(message, Started):
            if message.key in self.running:
                self.running[message.key] = time.monotonic()
                self.result._attempt_started(message.key[0], message.key[1], message.worker)
                self._notify()
            return
        key = message.outcome.key if isinstance(message, Finished) else message.key
        if key not in self.running:
            return  # an attempt given up on came back late: already recorded
        started = self.running.pop(key)
        if isinstance(message, Finished):
            outcome = message.outcome
        else:
            wall = 0.0 if started is None else time.monotonic() - started
            outcome = Outcome(key, "failed", error=message.error, wall_s=wall)
        self._record(outcome, pending)

    def _give_up(self, key: Key, pending: deque[Key]) -> None:
        started = self.running.pop(key)
        events = self.engine.give_up(key)
        wall = 0.0 if started is None else time.monotonic() - started
        error = f"no result within {self.timeout_s:g}s (+{GIVE_UP_GRACE:g}s grace): the attempt was abandoned"
        self._record(Outcome(key, "timeout", events=events, wall_s=wall, error=error), pending)

    def _record(self, outcome: Outcome, pending: deque[Key]) -> None:
        index, attempt = outcome.key
        retry = outcome.status in ("failed", "timeout") and attempt <= self.retries and not self.cancelled.is_set()
        self.result._attempt_ended(index, outcome, final=not retry)
        if retry:
            pending.appendleft((index, attempt + 1))
        self._notify()

    def _notify(self) -> None:
        if self.quiet:
            return
        try:
            self.sink.update(self.result.state())
        except Exception:
            log.exception("the progress display failed")

    def _close(self) -> None:
        if self.cancelled.is_set():
            try:
                self.engine.cancel()
            except Exception:
                log.exception("the engine did not cancel cleanly")
            running: dict[Key, float | None] = getattr(self, "running", {})
            while True:  # attempts that came back while stopping keep their answer and usage
                try:
                    message = self.inbox.get_nowait()
                except queue.Empty:
                    break
                if isinstance(message, Finished) and message.outcome.key in running:
                    running.pop(message.outcome.key)
                    self.result._attempt_ended(message.outcome.key[0], message.outcome, final=True)
            for key, started in running.items():
                if started is None:  # submitted, but its engine never started it (Ray still starting)
                    before = (key[0], key[1] - 1)
                    outcome = Outcome(before, "cancelled", error="cancelled before it started")
                    self.result._attempt_ended(key[0], outcome, final=True, counted=False)
                    continue
                wall = time.monotonic() - started
                self.result._attempt_ended(key[0], Outcome(key, "cancelled", wall_s=wall, error="cancelled"), True)
            for index, final in enumerate(list(self.result._final)):
                if final is None:
                    outcome = Outcome((index, 0), "cancelled", error="cancelled before it started")
                    self.result._attempt_ended(index, outcome, final=True, counted=False)
        try:
            self.engine.close()
        except Exception:
            log.exception("the engine did not close cleanly")
        self.result._finish()
        try:
            self.sink.close(self.result.state())
        except Exception:
            log.exception("the progress display failed")
