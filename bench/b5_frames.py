"""B5 frames: ``lab.usage()`` over 100,000 usage events.

The events are built directly (10 agents, 5 model requests per run, so 20,000 runs) and
put in a Lab's recorder, as the orchestrator would have. Timed: ``lab.usage()`` (by
agent, the magic's default) and ``usage_frame(events, by="run")`` (the most groups).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.common import Figure, best_of

__all__ = ["make_events", "run"]

ID = "B5"
AGENTS = 10
REQUESTS_PER_RUN = 5


def make_events(n: int) -> list[Any]:
    from aklab.llm import LlmUsageEvent

    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    events = []
    for i in range(n):
        agent = (i // REQUESTS_PER_RUN) % AGENTS
        events.append(
            LlmUsageEvent(
                agent=f"@Agent{agent}",
                role=f"Role{agent % 3}",
                run_id=f"run-{i // REQUESTS_PER_RUN:08d}",
                model="relay-model",
                input_tokens=100 + i % 50,
                output_tokens=20 + i % 7,
                cost_usd=None if i % 1000 == 0 else 0.0001,
                started_at=t0 + timedelta(milliseconds=i),
                duration_s=0.001,
            )
        )
    return events


def run(*, smoke: bool = False, repeat: int = 3, context: dict[str, Any] | None = None) -> list[Figure]:
    from aklab.lab import Lab
    from aklab.lab.frames import usage_frame
    from bench.common import relay_team

    n = 1_000 if smoke else 100_000
    repeat = 1 if smoke else repeat
    events = make_events(n)
    lab = Lab(relay_team())
    try:
        for event in events:  # the lab keeps usage packed (UsageRows): one append per request
            lab.recorder.usage.append(event)

        def by_agent() -> float:
            start = time.perf_counter()
            frame = lab.usage()
            elapsed = time.perf_counter() - start
            assert int(frame["requests"].sum()) == n
            return elapsed

        def by_run() -> float:
            start = time.perf_counter()
            frame = usage_frame(events, by="run")
            elapsed = time.perf_counter() - start
            assert len(frame) == -(-n // REQUESTS_PER_RUN)
            return elapsed

        lab.usage()  # the first call imports pandas' grouping machinery
        agent_s, agent_all = best_of(repeat, by_agent)
        run_s, run_all = best_of(repeat, by_run)
    finally:
        lab.close()
    workload = f"frames: usage over {n:,} usage events"
    return [
        Figure(ID, workload, "`lab.usage()` (by agent)", agent_s, "s", budget_max=0.5, details={"all_s": agent_all}),
        Figure(ID, workload, '`usage_frame(events, by="run")`', run_s, "s", budget_max=0.5, details={"all_s": run_all}),
    ]
