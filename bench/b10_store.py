"""B10: what the event store adds to a team's wall time (issue 13).

The relay of B1 (200 human messages, 600 LLM turns on zero-latency models), once with no
store and once appending every record to a SQLite store in a temporary folder (aklab's
default: WAL, a commit per record), interleaved, best of ``repeat`` each. Figure: wall time
with the store / without (budget <= 1.10x), and the store's cost per message.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.b1_relay import run_relay
from bench.common import Figure, relay_messages

ID = "B10"
WORKLOAD = "the B1 relay (200 messages, 600 LLM turns) with and without the SQLite event store"


def run(*, smoke: bool = False, repeat: int = 3, context: dict[str, Any] | None = None) -> list[Figure]:
    n = 10 if smoke else 200
    repeat = 1 if smoke else repeat
    messages = relay_messages(n)
    run_relay(relay_messages(5))  # warm up imports and caches
    without: list[float] = []
    with_store: list[float] = []
    records = 0
    for _ in range(repeat):
        without.append(run_relay(messages)[0])
        folder = Path(tempfile.mkdtemp(prefix="aklab-b10-"))
        try:
            seconds, _ = run_relay(messages, store=folder / "events.sqlite3")
            with_store.append(seconds)
            from aklab.store import SqliteStore

            with SqliteStore(folder / "events.sqlite3") as store:
                records = len(store.records())
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    best_without, best_with = min(without), min(with_store)
    per_message_ms = (best_with - best_without) / n * 1000
    return [
        Figure(
            ID,
            WORKLOAD,
            "wall time with the store / without",
            best_with / best_without,
            "x",
            budget_max=None if smoke else 1.10,
            note=f"{records:,} records stored; {per_message_ms:.2f} ms added per human message",
            details={"without_s": without, "with_store_s": with_store, "records": records},
        ),
        Figure(ID, WORKLOAD, "store cost per human message", per_message_ms, "ms"),
    ]
