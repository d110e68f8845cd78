"""B11: batches of team sessions (issue 14).

200 demo-model sessions with 0.1 s of simulated model latency per request: the local engine
(threads, concurrency 32) against the same sessions one after another (measured on 20 and
scaled per session; goal >= 8x from overlapping the latency); 50 instant sessions on the
process engine (2 workers) against the local engine; memory per hosted team; rows lost (0).
Ray is measured by its tests inside a loopback-only network namespace
(``aklab/batch/netns_run.sh``), not here: starting Ray here would probe the network.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from bench.common import Figure, rss_mb

ID = "B11"
WORKLOAD = "demo-model sessions through aklab.batch: local vs sequential, process vs local"


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
    gc.collect()
    rss_before = rss_mb()
    local_s, local = _timed(scenarios=questions, model=slow, concurrency=32)
    rss_peak = max(rss_mb() - rss_before, 0.0)
    speedup = (seq_s / sequential_n) / (local_s / many)
    lost = sum(int((r.scenarios["status"] != "ok").sum()) for r in (seq, local))
    fast_local_s, _ = _timed(scenarios=questions[:few], concurrency=8)
    process_s, process = _timed(scenarios=questions[:few], engine="process", workers=2, concurrency=8)
    lost += int((process.scenarios["status"] != "ok").sum())
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
        Figure(ID, WORKLOAD, "memory per hosted team (RSS growth / 32 concurrent labs)", rss_peak / 32, "MB"),
        Figure(ID, WORKLOAD, "rows lost (scenarios not ok)", float(lost), "rows", budget_max=0.0),
    ]
