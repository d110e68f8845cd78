"""``engine="ray"``: Ray actors, each hosting several teams on threads.

Ray is imported here only, when a Ray batch starts (``pip install 'aklab[ray]'``). The
engine joins the cluster ``ray.init`` finds (``address``: ``"auto"``, ``"ray://host:10001"``,
or ``RAY_ADDRESS``; else it starts a local one and shuts it down after the batch). Each
actor (``workers`` of them, default one per CPU of the cluster, at most ``concurrency``)
is a threaded actor running ``ceil(concurrency / workers)`` attempts at once. Jobs travel
with Ray's cloudpickle, so team code must be importable on the workers: ship it with
``runtime_env={"py_modules": [...]}``.

Ray starts (or its cluster is joined) on a thread of its own, the keeper, once the batch
has started, with ``starting Ray`` in the progress meanwhile (12-22 s on a 2-core machine):
a cancel then returns at once, every scenario cancelled, and once ``ray.init`` returns the
Ray is shut down again unless another batch uses it (``RayEngine.settled`` is set when
that is done). Batches running together share the Ray that the first of them started; the
last to finish shuts it down. The keeper thread lives as long as that Ray, because Ray's
processes are killed when the thread that started them ends. Each batch waits for it on a
start-up thread that is no daemon: an interpreter exiting while Ray starts waits for the
start and the shut-down.

An actor that dies (its node lost, killed) costs only its own attempts, reported as lost
and retried; a new actor takes its place. Cancelling stops every actor's teams, then
kills the actors (within about 1.5 s). Each actor reports its memory with every outcome
(``BatchResult.workers``: RSS growth per hosted team).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping
from typing import Any

from aklab.batch._attempt import AttemptControl, HostMeter, Job, Key, Outcome, worker_name
from aklab.batch._engine import Broken, Engine, Finished, Lost, Named, Note, Post, Started
from aklab.errors import ConfigError
from aklab.llm import LlmUsageEvent

__all__ = ["RayEngine", "TeamHost", "import_ray"]

INSTALL_HINT = "engine='ray' needs Ray: pip install 'aklab[ray]'"
#: How long cancelling waits for actors to stop their teams before killing them.
STOP_GRACE = 1.0
#: What the progress shows while Ray starts (or the cluster is joined).
STARTING = "starting Ray"
#: Guards ``_keeper``: one Ray start-up or shut-down at a time in this process.
_LIFECYCLE = threading.Lock()


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(INSTALL_HINT) from exc
    return ray


class TeamHost:
    """The actor's body: runs attempts on Ray's threads (``max_concurrency``), cancels them on
    request, and reports its memory with every outcome."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._controls: dict[Key, AttemptControl] = {}
        self._meter = HostMeter()

    def name(self) -> str:
        return worker_name()

    def run(self, job: Job) -> Outcome:
        control = AttemptControl()
        with self._lock:
            self._controls[job.key] = control
        try:
            return self._meter.run(job, control)
        finally:
            with self._lock:
                self._controls.pop(job.key, None)

    def cancel(self, key: Key | None = None) -> int:
        """Cancel attempt ``key`` (every attempt when None); returns how many were told."""
        with self._lock:
            found = list(self._controls.values()) if key is None else [c for k, c in self._controls.items() if k == key]
        for control in found:
            control.cancel()
        return len(found)


class _NotMainThread(logging.Filter):
    """Ray warns when ``ray.init`` runs off the main thread (it then sets no SIGTERM handler):
    expected here, so not shown."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "not the main thread" not in record.getMessage()


class _Keeper(threading.Thread):
    """The thread that starts a Ray for aklab's batches and, once the last of them is done,
    shuts it down. Ray's processes die with the thread that started them (``fate_share``:
    ``PR_SET_PDEATHSIG`` is per thread on Linux), so that thread lives as long as they do,
    whichever batch came first. A daemon: at exit, Ray's own atexit hook stops them."""

    def __init__(self, ray: Any, address: str | None, options: dict[str, Any]) -> None:
        super().__init__(name="aklab-batch-ray", daemon=True)
        self.ray = ray
        self.address = address
        self.options = options
        self.users = 0  # batches using this Ray (under _LIFECYCLE)
        self.ready = threading.Event()  # ray.init returned (error: why it failed)
        self.stop = threading.Event()
        self.stopped = threading.Event()
        self.error: Exception | None = None

    def run(self) -> None:
        quiet = _NotMainThread()
        ray_log = logging.getLogger("ray._private.worker")
        ray_log.addFilter(quiet)
        try:
            self.ray.init(address=self.address, **self.options)
        except Exception as exc:
            self.error = exc
            self.stop.set()  # shut down whatever it had started
        finally:
            ray_log.removeFilter(quiet)
            self.ready.set()
        self.stop.wait()
        try:
            self.ray.shutdown(wait_for_processes=True)
        except Exception:
            logging.getLogger("aklab.batch").exception("Ray did not shut down cleanly")
        finally:
            self.stopped.set()


_keeper: _Keeper | None = None


class RayEngine(Engine):
    """Ray actors hosting teams. ``address`` and ``runtime_env`` go to ``ray.init`` when this
    engine starts Ray; ``num_cpus`` is what each actor reserves (teams mostly wait on models).
    ``shutdown``: shut Ray down after the batch (None: only a Ray that aklab started here,
    once no other batch uses it). ``settled`` is set once everything the engine started has
    stopped (after a cancel, that can be after the batch's result is final)."""

    name = "ray"

    def __init__(
        self,
        *,
        address: str | None = None,
        workers: int | None = None,
        runtime_env: Mapping[str, Any] | None = None,
        num_cpus: float = 1.0,
        init_options: Mapping[str, Any] | None = None,
        shutdown: bool | None = None,
    ) -> None:
        self.ray = import_ray()
        self.address = address
        self.workers = workers
        self.runtime_env = dict(runtime_env or {})
        self.num_cpus = num_cpus
        self.init_options = dict(init_options or {})
        self.shutdown = shutdown
        self.settled = threading.Event()
        self._keeper: _Keeper | None = None  # the Ray that aklab started, while this batch uses it
        self._lock = threading.Lock()
        self._post: Post | None = None
        self._actors: list[Any] = []
        self._load: dict[int, set[Key]] = {}
        self._named: set[int] = set()  # actors whose worker name (host:pid) has been posted
        self._queued: list[Job] = []
        self._ready = False
        self._start_done = False
        self._closing = False
        self._cancelled = False
        self._threads: list[threading.Thread] = []

    def dumps(self, obj: Any) -> bytes:
        from ray import cloudpickle

        return bytes(cloudpickle.dumps(obj))  # type: ignore[no-untyped-call]

    def open(self, post: Post, concurrency: int) -> None:
        self._post = post
        self.slots = concurrency
        # Not a daemon: a Ray being started is shut down before the interpreter exits.
        starter = threading.Thread(target=self._start_up, args=(concurrency,), name="aklab-batch-ray-start")
        starter.start()

    def _start_up(self, concurrency: int) -> None:
        """Join or start Ray, then the actors, then run what was submitted meanwhile. A cancel
        meanwhile leaves this thread to let go of Ray (``_tidy``) once ``ray.init`` returns."""
        assert self._post is not None
        try:
            self._join_ray()
            with self._lock:
                if self._closing:
                    return
                self._make_actors(concurrency)
                self._ready = True
                queued, self._queued = self._queued, []
            self._post(Note(""))
            for job in queued:
                self.submit(job)
        except Exception as exc:
            with self._lock:
                closing = self._closing
            if not closing:
                self._post(Broken(f"engine='ray' could not start: {type(exc).__name__}: {_first_line(exc)}"))
        finally:
            with self._lock:
                self._start_done = True
                tidy = self._closing  # close() came while starting and left the tidying to us
            if tidy:
                self._tidy()

    def _join_ray(self) -> None:
        """Use the Ray this process has (the caller's own, or one aklab started for a batch),
        else have a keeper thread start one; wait for it (``starting Ray`` meanwhile)."""
        global _keeper
        ray = self.ray
        with _LIFECYCLE:
            keeper = _keeper
            if keeper is not None and (keeper.stop.is_set() or (keeper.ready.is_set() and not ray.is_initialized())):
                keeper.stop.set()  # shut down, or being shut down: wait for that, then start anew
                keeper.stopped.wait()
                keeper = _keeper = None
            if keeper is None:
                if ray.is_initialized() or self._closing:
                    return  # the caller's own Ray (not ours to shut down), or no longer wanted
                options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, **self.init_options}
                if self.runtime_env:
                    options["runtime_env"] = self.runtime_env
                keeper = _keeper = _Keeper(ray, self.address, options)
                keeper.start()
            keeper.users += 1
            self._keeper = keeper
        if not keeper.ready.is_set():
            assert self._post is not None
            self._post(Note(STARTING))
            keeper.ready.wait()
        if keeper.error is not None:
            raise keeper.error

    def _make_actors(self, concurrency: int) -> None:
        ray = self.ray
        n = self.workers or max(1, int(ray.cluster_resources().get("CPU", 1) // max(self.num_cpus, 1e-9)))
        n = max(1, min(n, concurrency))
        self._per_actor = math.ceil(concurrency / n)
        self._remote = ray.remote(TeamHost).options(
            max_concurrency=self._per_actor + 2, num_cpus=self.num_cpus, max_restarts=0
        )
        self._actors = [self._remote.remote() for _ in range(n)]
        self._load = {id(a): set() for a in self._actors}

    def submit(self, job: Job) -> None:
        with self._lock:
            if self._closing:
                return
            if not self._ready:
                self._queued.append(job)  # run once the actors exist
                return
            actor = min(self._actors, key=lambda a: len(self._load[id(a)]))
            self._load[id(actor)].add(job.key)
        ref = actor.run.remote(job)
        thread = threading.Thread(target=self._await, args=(actor, job.key, ref), daemon=True)
        self._threads.append(thread)
        thread.start()
        assert self._post is not None
        self._post(Started(job.key, _provisional(actor)))

    def _await(self, actor: Any, key: Key, ref: Any) -> None:
        ray = self.ray
        assert self._post is not None
        try:
            outcome = ray.get(ref)
        except Exception as exc:  # the actor died, or the task could not run
            with self._lock:
                self._load.get(id(actor), set()).discard(key)
                closing = self._closing
            if not closing:
                self._replace(actor)
                self._post(Lost(key, f"Ray actor failed: {type(exc).__name__}: {_first_line(exc)}"))
            return
        with self._lock:
            self._load.get(id(actor), set()).discard(key)
            named = outcome.worker and id(actor) not in self._named
            if named:
                self._named.add(id(actor))
        if named:  # before the outcome: an attempt started there and given up on counts there too
            self._post(Named(_provisional(actor), outcome.worker))
        self._post(Finished(outcome))

    def _replace(self, actor: Any) -> None:
        with self._lock:
            if actor not in self._actors or self._closing:
                return
            self._actors.remove(actor)
            self._load.pop(id(actor), None)
            fresh = self._remote.remote()
            self._actors.append(fresh)
            self._load[id(fresh)] = set()

    def give_up(self, key: Key) -> list[LlmUsageEvent]:
        with self._lock:
            self._queued = [j for j in self._queued if j.key != key]
            holder = next((a for a in self._actors if key in self._load.get(id(a), set())), None)
            if holder is not None:
                self._load[id(holder)].discard(key)
        if holder is not None:
            holder.cancel.remote(key)
        return []

    def cancel(self) -> None:
        ray = self.ray
        with self._lock:
            self._closing = self._cancelled = True
            self._queued = []
            actors = list(self._actors)  # none while Ray is starting: nothing to wait for
        if not actors:
            return
        refs = [a.cancel.remote() for a in actors]
        ray.wait(refs, num_returns=len(refs), timeout=STOP_GRACE)
        for actor in actors:
            ray.kill(actor, no_restart=True)

    def close(self) -> None:
        with self._lock:
            self._closing = True
            if not self._start_done:
                return  # still in ray.init: the start-up thread tidies up when it returns
        if self._cancelled:  # the batch is over now; shutting Ray down takes seconds more
            threading.Thread(target=self._tidy, name="aklab-batch-ray-stop").start()
        else:
            self._tidy()

    def _tidy(self) -> None:
        """Kill the actors, let their waiting threads end, and shut Ray down when this batch
        was the last user of a Ray that aklab started (or ``shutdown=True``); then ``settled``."""
        ray = self.ray
        try:
            with self._lock:
                actors, self._actors = list(self._actors), []
            for actor in actors:
                ray.kill(actor, no_restart=True)
            deadline = time.monotonic() + STOP_GRACE
            for thread in self._threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            with _LIFECYCLE:
                keeper, self._keeper = self._keeper, None
                if keeper is not None:
                    keeper.users -= 1
                    if self.shutdown or (self.shutdown is None and keeper.users == 0):
                        keeper.stop.set()
                elif self.shutdown:
                    ray.shutdown()  # the caller's own Ray, as asked
            if keeper is not None and keeper.stop.is_set():
                keeper.stopped.wait()
        except Exception:
            logging.getLogger("aklab.batch").exception("the Ray engine did not stop cleanly")
        finally:
            self.settled.set()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]


def _provisional(actor: Any) -> str:
    """The name an actor's attempts start under, until its first outcome names its process."""
    return f"ray-actor-{id(actor):x}"
