"""B11: batches of team sessions (issue 14).

200 demo-model sessions with 0.1 s of simulated model latency per request: the local engine
(threads, concurrency 32) against the same sessions one after another (measured on 20 and
scaled per session; goal >= 8x from overlapping the latency); 50 instant sessions on the
process engine (2 workers) against the local engine; the same 200 slow sessions on the Ray
engine (2 actors) against the local engine; memory per hosted team, local and in the Ray
actors, measured the same way (each worker process reads its own RSS as each attempt ends:
its growth over its baseline when the batch opened / the most teams it hosted at once; see
``BatchResult.workers``); rows lost (0).

Ray probes cloud metadata addresses whenever it starts, so the Ray figure is measured by a
child, ``python -m bench.b11_batch --ray N``, run inside a loopback-only network namespace
(``aklab/batch/netns_run.sh``); without Ray or a namespace the figure says why it is missing.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from typing import Any

from bench.common import REPO, Figure, child_env

ID = "B11"
WORKLOAD = "demo-model sessions through aklab.batch: local vs sequential, process and ray vs local"
NETNS = REPO / "aklab" / "batch" / "netns_run.sh"
#: Ray's share of the machine in the child: the bench's 2 cores.
RAY_CPUS = 2


def _timed(**kwargs: Any) -> tuple[float, Any]:
    import aklab.batch as batch

    start = time.perf_counter()
    result = batch.run(progress=False, **kwargs)
    return time.perf_counter() - start, result


def run(*, smoke: bool = False, repeat: int = 1, context: dict[str, Any] | None = None) -> list[Figure]:
    from aklab.llm import ModelConfig

    many = 16 if smoke else 200
    sequential_n = 4 if smoke else 20
    few = 6 if smoke else 50
    slow = ModelConfig(demo_latency=0.1)
    questions = [f"Plan feature {i}" for i in range(many)]
    _timed(scenarios=questions[:4])  # warm up
    seq_s, seq = _timed(scenarios=questions[:sequential_n], model=slow, concurrency=1)
    local_s, local = _timed(scenarios=questions, model=slow, concurrency=32)
    local_memory = _per_team(local)
    speedup = (seq_s / sequential_n) / (local_s / many)
    lost = sum(int((r.scenarios["status"] != "ok").sum()) for r in (seq, local))
    fast_local_s, _ = _timed(scenarios=questions[:few], concurrency=8)
    process_s, process = _timed(scenarios=questions[:few], engine="process", workers=2, concurrency=8)
    lost += int((process.scenarios["status"] != "ok").sum())
    ray_figures, ray_lost = _ray_figures(many)
    lost += ray_lost
    return [
        Figure(
            ID,
            WORKLOAD,
            f"{many} sessions at 0.1 s latency: local (concurrency 32) speed-up over sequential",
            speedup,
            "x",
            budget_min=None if smoke else 8.0,
            note=f"sequential {seq_s / sequential_n:.3f} s per session; local {local_s:.1f} s for {many}",
        ),
        Figure(
            ID,
            WORKLOAD,
            f"{few} instant sessions: process (2 workers) / local wall time",
            process_s / fast_local_s,
            "x",
            note="each worker process starts and imports aklab (~4 s on 2 cores)",
        ),
        ray_figures[0],
        Figure(
            ID,
            WORKLOAD,
            "memory per hosted team, local (this process's RSS growth / the teams it hosted at once)",
            local_memory[0],
            "MB",
            note=local_memory[1],
        ),
        ray_figures[1],
        Figure(ID, WORKLOAD, "rows lost (scenarios not ok)", float(lost), "rows", budget_max=0.0),
    ]


def _per_team(result: Any) -> tuple[float, str]:
    """MB per hosted team over the batch's workers (each read its own RSS as attempts ended:
    growth over its baseline, summed, / the most teams each hosted at once, summed)."""
    workers = result.workers.to_dict(orient="records")
    per_team = sum(float(w["growth_mb"]) for w in workers) / max(1, sum(int(w["teams"]) for w in workers))
    note = "; ".join(
        f"+{float(w['growth_mb']):.1f} MB over {float(w['baseline_mb']):.0f} MB for {int(w['teams'])} teams"
        for w in workers
    )
    return per_team, note


def _ray_figures(many: int) -> tuple[list[Figure], int]:
    """Ray vs local on the same slow sessions, and the actors' memory per hosted team, measured
    by a child inside a loopback-only namespace."""
    title = f"{many} sessions at 0.1 s latency: ray (2 actors, concurrency 32) / local wall time"
    memory_title = "memory per hosted team, ray (each actor's RSS growth / the teams it hosted at once)"

    def skipped(why: str) -> tuple[list[Figure], int]:
        return [
            Figure(ID, WORKLOAD, title, None, "x", status=f"skipped: {why}"),
            Figure(ID, WORKLOAD, memory_title, None, "MB", status=f"skipped: {why}"),
        ], 0

    if importlib.util.find_spec("ray") is None:
        return skipped("Ray is not installed (make install-ray)")
    env = child_env()
    env.pop("RAY_ADDRESS", None)  # a local cluster in the namespace, never one found outside
    child = subprocess.run(
        [str(NETNS), sys.executable, "-m", "bench.b11_batch", "--ray", str(many)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if child.returncode == 97:
        why = child.stderr.strip().splitlines()[-1] if child.stderr.strip() else "no network namespace"
        return skipped(why)
    if child.returncode != 0:
        raise RuntimeError(f"the Ray child failed ({child.returncode}):\n{child.stderr[-3000:]}")
    out = json.loads(child.stdout.strip().splitlines()[-1])
    memory = Figure(
        ID,
        WORKLOAD,
        memory_title,
        out["actor_mb_per_team"],
        "MB",
        note=f"{out['actor_note']} (fresh actors: their one-time caches count; local was warmed up)",
    )
    note = (
        f"ray {out['ray_s']:.1f} s (starting its 2 actors included), local {out['local_s']:.1f} s, "
        f"in one process inside the namespace; ray.init {out['init_s']:.0f} s not counted"
    )
    return [Figure(ID, WORKLOAD, title, out["ray_s"] / out["local_s"], "x", note=note), memory], int(out["lost"])


def _ray_child(many: int) -> None:
    """Inside the namespace: start Ray, then time the same sessions on Ray and locally; print JSON."""
    import ray

    from aklab.llm import ModelConfig

    slow = ModelConfig(demo_latency=0.1)
    questions = [f"Plan feature {i}" for i in range(many)]
    started = time.perf_counter()
    ray.init(num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
    init_s = time.perf_counter() - started
    try:
        _timed(scenarios=questions[:4])  # warm up this process
        ray_s, on_ray = _timed(scenarios=questions, model=slow, engine="ray", workers=2, concurrency=32)
        local_s, local = _timed(scenarios=questions, model=slow, concurrency=32)
    finally:
        ray.shutdown()
    lost = sum(int((r.scenarios["status"] != "ok").sum()) for r in (on_ray, local))
    per_team, note = _per_team(on_ray)
    summary = {"ray_s": ray_s, "local_s": local_s, "init_s": init_s, "lost": lost}
    print(json.dumps({**summary, "actor_mb_per_team": per_team, "actor_note": note}))


if __name__ == "__main__":
    if sys.argv[1:2] != ["--ray"] or len(sys.argv) != 3:
        sys.exit("usage: aklab/batch/netns_run.sh python -m bench.b11_batch --ray N")
    _ray_child(int(sys.argv[2]))
