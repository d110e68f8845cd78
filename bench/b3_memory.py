"""B3 memory: resident memory per hired, idle agent.

Runs in a fresh interpreter (so heap left over by other benchmarks cannot absorb the
growth): start a Lab on the relay team, hire two Developers to warm up one-time costs
(imports, schema caches), then ``gc.collect()``, read VmRSS, hire N more through the
orchestrator, wait until the team is quiet, ``gc.collect()``, read VmRSS again.
Threads and open file descriptors are reported too: each agent is a thread and owns an
asyncio event loop.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import threading
from typing import Any

from bench.common import Figure, rss_mb, run_module_json

__all__ = ["measure", "run"]

ID = "B3"
WORKLOAD = "memory: {n} hired agents, idle"
WARM_UP = 2


def measure(n: int) -> dict[str, Any]:
    from aklab.lab import Lab
    from bench.common import relay_team

    lab = Lab(relay_team(), store=False)
    lab.guard.max_members = None  # the team guard caps a team at 40 members by default
    try:
        for _ in range(WARM_UP):
            lab.orchestrator.hire("Developer")
        lab.wait(60)
        gc.collect()
        before = rss_mb()
        threads_before = threading.active_count()
        fds_before = len(os.listdir("/proc/self/fd"))
        for _ in range(n):
            lab.orchestrator.hire("Developer")
        if not lab.wait(120):
            raise RuntimeError("hired agents did not go idle")
        gc.collect()
        after = rss_mb()
        members = len(lab.team())
        result = {
            "n": n,
            "rss_before_mb": before,
            "rss_after_mb": after,
            "per_agent_mb": (after - before) / n,
            "threads_per_agent": (threading.active_count() - threads_before) / n,
            "fds_per_agent": (len(os.listdir("/proc/self/fd")) - fds_before) / n,
            "members": members,
        }
    finally:
        lab.close()
    if members != n + WARM_UP + 2:  # + Human and Manager
        raise RuntimeError(f"expected {n + WARM_UP + 2} members, found {members}")
    return result


def run(*, smoke: bool = False, repeat: int = 3, context: dict[str, Any] | None = None) -> list[Figure]:
    n = 5 if smoke else 100
    # A fresh interpreter, so heap freed by earlier benchmarks cannot absorb the growth;
    # the smoke run measures in-process (same code, meaningless figure, much faster).
    result = measure(n) if smoke else run_module_json("bench.b3_memory", "--n", str(n))
    return [
        Figure(
            ID,
            WORKLOAD.format(n=n),
            "RSS per agent",
            result["per_agent_mb"],
            "MB",
            budget_max=0.6,
            note=(
                f"VmRSS {result['rss_before_mb']:.1f} → {result['rss_after_mb']:.1f} MB; "
                f"{result['threads_per_agent']:g} thread and {result['fds_per_agent']:g} fds per agent"
            ),
            details=result,
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.b3_memory")
    parser.add_argument("--n", type=int, default=100)
    print(json.dumps(measure(parser.parse_args().n)))


if __name__ == "__main__":
    main()
