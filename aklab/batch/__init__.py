"""aklab.batch: one team over many scenarios, on this machine or a Ray cluster, into DataFrames.

::

    import aklab.batch as batch

    result = batch.run(["Plan the login page", "Plan the search box"], team="dev-team",
                       engine="local", concurrency=8, timeout_s=120, retries=1)
    result.scenarios       # one row per scenario: status, answer, score, tokens, cost, wall_s, attempt
    result.usage           # every model request, lab.usage(by="request") columns + scenario_id, attempt
    result.summary()       # per team and model
    result.workers         # per worker process: attempts, teams hosted at once, RSS growth per team
    result.plot()          # status counts and tokens per scenario (matplotlib)

Each scenario attempt runs in its own headless :class:`aklab.lab.Lab`, closed after.
Scenarios are questions, lists of turns, :class:`Scenario` objects (own team, model,
``check``, ``expected``, metadata) or a CSV/JSONL/YAML file (:func:`load_scenarios`).
:mod:`aklab.batch.checks` scores answers.

Engines (the same call and the same frames on each):

- ``local``: threads in this process, one Lab per attempt. Best for model-bound work.
- ``process``: a pool of spawned worker processes, each hosting several teams. The
  team, the scenarios and their checks are pickled: a lambda check is refused up front
  with a one-line error naming it. A worker that dies costs only its own attempts.
- ``ray`` (``pip install 'aklab[ray]'``): Ray actors, each hosting several teams.
  ``engine="ray"`` joins the cluster ``ray.init()`` finds (``RAY_ADDRESS``, else a new
  local one, shut down after the batch); ``RayEngine(address=..., runtime_env=...)``
  says where. Ray starts on a thread of its own after ``start``/``run`` began (the
  progress says ``starting Ray``), so a cancel never waits for it.

Faults: an attempt that raises, runs past ``timeout_s`` or whose worker dies is retried
up to ``retries`` times; each attempt is costed in ``result.attempts`` and
``result.usage`` (``attempt`` column), and the batch always finishes, failures
reported. ``result.cancel()`` (any thread) or an interrupt stops every engine's work
within about 2 s, also while Ray is still starting (what it started is shut down in the
background once ``ray.init`` returns; ``RayEngine.settled`` says when).

Ray clusters, for real use:

- Connect with ``RayEngine(address="ray://head-node:10001")`` (Ray Client) or run the
  script on the head node with ``address="auto"``.
- Token authentication (``RAY_AUTH_MODE=token``, Ray 2.60's default): the driver needs
  the cluster's token, in ``RAY_AUTH_TOKEN``, a file named by ``RAY_AUTH_TOKEN_PATH``, or
  ``~/.ray/auth_token``; never write a token into a notebook or a team file.
- Ship your code: ``RayEngine(runtime_env={"py_modules": [my_team_package],
  "pip": ["aklab[openai]"], "env_vars": {...}})``. ``py_modules`` takes imported
  modules or paths; custom agent classes, tools and checks must be importable on the
  workers. Model keys come from the workers' environment (``env_vars`` or the nodes'
  own), never from the scenarios.
- Ray probes cloud metadata addresses when it starts; on a machine that must stay
  offline, run it in a loopback-only network namespace: ``aklab/batch/netns_run.sh
  python my_batch.py`` (as root), which also sets ``RAY_USAGE_STATS_ENABLED=0``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aklab.batch._driver import last_result, run, start
    from aklab.batch._engine import Engine
    from aklab.batch._local import LocalEngine
    from aklab.batch._process import ProcessEngine
    from aklab.batch._ray import RayEngine
    from aklab.batch._result import BatchResult
    from aklab.batch._scenario import Scenario, ScenarioLike, load_scenarios
    from aklab.batch.progress import ProgressSink, ProgressState, TextProgress, WidgetProgress

__all__ = [
    "BatchResult",
    "Engine",
    "LocalEngine",
    "ProcessEngine",
    "ProgressSink",
    "ProgressState",
    "RayEngine",
    "Scenario",
    "ScenarioLike",
    "TextProgress",
    "WidgetProgress",
    "last_result",
    "load_scenarios",
    "run",
    "start",
]

_HOMES = {
    "run": "aklab.batch._driver",
    "start": "aklab.batch._driver",
    "last_result": "aklab.batch._driver",
    "Engine": "aklab.batch._engine",
    "LocalEngine": "aklab.batch._local",
    "ProcessEngine": "aklab.batch._process",
    "RayEngine": "aklab.batch._ray",
    "BatchResult": "aklab.batch._result",
    "Scenario": "aklab.batch._scenario",
    "ScenarioLike": "aklab.batch._scenario",
    "load_scenarios": "aklab.batch._scenario",
    "ProgressSink": "aklab.batch.progress",
    "ProgressState": "aklab.batch.progress",
    "TextProgress": "aklab.batch.progress",
    "WidgetProgress": "aklab.batch.progress",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'aklab.batch' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(home), name)
