"""``engine="ray"``: Ray actors, each hosting several teams on threads.

Ray is imported here only, when a Ray batch starts (``pip install 'aklab[ray]'``). The
engine joins the cluster ``ray.init`` finds (``address``: ``"auto"``, ``"ray://host:10001"``,
or ``RAY_ADDRESS``; else it starts a local one and shuts it down after the batch). Each
actor (``workers`` of them, default one per CPU of the cluster, at most ``concurrency``)
is a threaded actor running ``ceil(concurrency / workers)`` attempts at once. Jobs travel
with Ray's cloudpickle, so team code must be importable on the workers: ship it with
``runtime_env={"py_modules": [...]}``.

An actor that dies (its node lost, killed) costs only its own attempts, reported as lost
and retried; a new actor takes its place. Cancelling stops every actor's teams, then
kills the actors (within about 1.5 s).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from typing import Any

from aklab.batch._attempt import AttemptControl, Job, Key, Outcome, run_attempt, worker_name
from aklab.batch._engine import Engine, Finished, Lost, Post, Started
from aklab.errors import ConfigError
from aklab.llm import LlmUsageEvent

__all__ = ["RayEngine", "TeamHost", "import_ray"]

INSTALL_HINT = "engine='ray' needs Ray: pip install 'aklab[ray]'"
#: How long cancelling waits for actors to stop their teams before killing them.
STOP_GRACE = 1.0


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(INSTALL_HINT) from exc
    return ray


class TeamHost:
    """The actor's body: runs attempts on Ray's threads (``max_concurrency``), cancels them on request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._controls: dict[Key, AttemptControl] = {}

    def name(self) -> str:
        return worker_name()

    def run(self, job: Job) -> Outcome:
        control = AttemptControl()
        with self._lock:
            self._controls[job.key] = control
        try:
            return run_attempt(job, control)
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


class RayEngine(Engine):
    """Ray actors hosting teams. ``address`` and ``runtime_env`` go to ``ray.init`` when this
    engine starts Ray; ``num_cpus`` is what each actor reserves (teams mostly wait on models)."""

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
        self._started_ray = False
        self._lock = threading.Lock()
        self._post: Post | None = None
        self._actors: list[Any] = []
        self._load: dict[int, set[Key]] = {}
        self._closing = False
        self._threads: list[threading.Thread] = []

    def dumps(self, obj: Any) -> bytes:
        from ray import cloudpickle

        return bytes(cloudpickle.dumps(obj))  # type: ignore[no-untyped-call]

    def prepare(self) -> None:
        ray = self.ray
        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, **self.init_options}
            if self.runtime_env:
                options["runtime_env"] = self.runtime_env
            ray.init(address=self.address, **options)
            self._started_ray = True

    def open(self, post: Post, concurrency: int) -> None:
        ray = self.ray
        self._post = post
        n = self.workers or max(1, int(ray.cluster_resources().get("CPU", 1) // max(self.num_cpus, 1e-9)))
        n = max(1, min(n, concurrency))
        self._per_actor = math.ceil(concurrency / n)
        self.slots = concurrency
        self._remote = ray.remote(TeamHost).options(
            max_concurrency=self._per_actor + 2, num_cpus=self.num_cpus, max_restarts=0
        )
        with self._lock:
            self._actors = [self._remote.remote() for _ in range(n)]
            self._load = {id(a): set() for a in self._actors}

    def submit(self, job: Job) -> None:
        with self._lock:
            actor = min(self._actors, key=lambda a: len(self._load[id(a)]))
            self._load[id(actor)].add(job.key)
        ref = actor.run.remote(job)
        thread = threading.Thread(target=self._await, args=(actor, job.key, ref), daemon=True)
        self._threads.append(thread)
        thread.start()
        assert self._post is not None
        self._post(Started(job.key, f"ray-actor-{id(actor):x}"))

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
            holder = next((a for a in self._actors if key in self._load.get(id(a), set())), None)
            if holder is not None:
                self._load[id(holder)].discard(key)
        if holder is not None:
            holder.cancel.remote(key)
        return []

    def cancel(self) -> None:
        ray = self.ray
        with self._lock:
            self._closing = True
            actors = list(self._actors)
        refs = [a.cancel.remote() for a in actors]
        ray.wait(refs, num_returns=len(refs), timeout=STOP_GRACE)
        for actor in actors:
            ray.kill(actor, no_restart=True)

    def close(self) -> None:
        ray = self.ray
        with self._lock:
            self._closing = True
            actors, self._actors = list(self._actors), []
        for actor in actors:
            ray.kill(actor, no_restart=True)
        for thread in self._threads:
            thread.join(STOP_GRACE)
        if self.shutdown or (self.shutdown is None and self._started_ray):
            ray.shutdown()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]
