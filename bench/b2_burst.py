"""B2 burst: the same 200 messages as B1, sent at once.

The Manager handles its mailbox one message at a time, so the 600 turns are the same as
B1's; what changes is that the Manager and the Developer now work at the same time on two
threads, the Manager's history interleaves differently, and mail that lands mid-run is
announced to the model (aklab's arrival notice). Throughput is compared with
B1's sequential workload, re-run here interleaved with the bursts (same process, same run).
"""

from __future__ import annotations

import gc
from typing import Any

from bench.b1_relay import run_relay
from bench.common import Figure, relay_messages

__all__ = ["run"]

ID = "B2"
WORKLOAD = "burst: the same {n} messages sent at once ({turns} LLM turns)"


def run(*, smoke: bool = False, repeat: int = 3, context: dict[str, Any] | None = None) -> list[Figure]:
    n = 5 if smoke else 200
    repeat = 1 if smoke else repeat
    messages = relay_messages(n)
    turns = 3 * n
    workload = WORKLOAD.format(n=n, turns=turns)

    # B1's sequential workload is run again here, interleaved with the bursts, so the
    # ratio is not skewed by drift in the machine between B1 and B2.
    sequential: list[float] = []
    burst: list[float] = []
    for _ in range(repeat):
        gc.collect()
        burst.append(run_relay(messages, burst=True)[0])
        gc.collect()
        sequential.append(run_relay(messages)[0])
    burst_tps = turns / min(burst)
    seq_tps = turns / min(sequential)
    context = context or {}
    b1 = context.get("b1_turns_per_s") if context.get("b1_messages") == n else None
    b1_note = f"; B1's own figure {b1:.1f} turns/s" if b1 is not None else ""
    details = {"messages": n, "turns": turns, "repeat": repeat, "burst_s": burst, "sequential_s": sequential}
    return [
        Figure(ID, workload, "burst throughput", burst_tps, "turns/s", details=details),
        Figure(
            ID,
            workload,
            "burst throughput / B1 (sequential) throughput",
            burst_tps / seq_tps,
            "x",
            budget_min=0.9,
            note=(
                f"burst {burst_tps:.1f} vs sequential {seq_tps:.1f} turns/s, re-measured interleaved "
                f"(best of {repeat}){b1_note}"
            ),
        ),
    ]
