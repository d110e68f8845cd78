"""Per-record append cost of the stores (not a test; run by hand).

    .venv/bin/python -m tests.store.bench_append [N]            # SQLite NORMAL and FULL
    .venv/bin/python -m tests.store.bench_append [N] --postgres # also a local PostgreSQL server

Appends N ``SentMessage`` records (an ``AgentMessage`` of ~300 characters, as a team
sends) one by one, each committed before the next, and prints the median, p99 and mean
µs per append, plus the encoding alone (payload JSON + redaction).
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from aklab.store import EventStore, SqliteStore, new_team_id
from aklab.store._codec import encode
from tests.store.test_contract import sent


def measure(store: EventStore, n: int) -> list[float]:
    team = new_team_id()
    records = [sent(f"message {i}: " + "word " * 60, f"ask{i // 20}") for i in range(n)]
    out = []
    for record in records:
        t = time.perf_counter()
        store.append(record, team)
        out.append((time.perf_counter() - t) * 1e6)
    return out


def report(label: str, us: list[float]) -> None:
    us_sorted = sorted(us)
    p99 = us_sorted[int(len(us) * 0.99) - 1]
    print(
        f"{label:<28} n={len(us):>6}  median {statistics.median(us):8.1f} µs  p99 {p99:8.1f} µs  "
        f"mean {statistics.fmean(us):8.1f} µs"
    )


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 10_000
    records = [sent(f"message {i}: " + "word " * 60, f"ask{i // 20}") for i in range(n)]
    t = time.perf_counter()
    for r in records:
        encode(r, "team")
    print(f"{'encode only':<28} n={n:>6}  mean {(time.perf_counter() - t) / n * 1e6:8.1f} µs")
    with tempfile.TemporaryDirectory() as d:
        for sync in ("NORMAL", "FULL"):
            count = n if sync == "NORMAL" else min(n, 2_000)
            with SqliteStore(Path(d) / f"{sync}.sqlite3", synchronous=sync) as store:  # type: ignore[arg-type]
                report(f"sqlite synchronous={sync}", measure(store, count))
    if "--postgres" in sys.argv:
        from aklab.store._postgres import PostgresStore
        from tests.store.pg_server import LocalPostgres, find_bin

        bin_dir = find_bin()
        assert bin_dir is not None, "no PostgreSQL binaries"
        root = Path(tempfile.mkdtemp(prefix="aklab-pg-"))
        server = LocalPostgres(root, bin_dir)
        try:
            with PostgresStore(server.start()) as pg:
                report("postgres (fsync=off)", measure(pg, min(n, 5_000)))
        finally:
            server.stop()
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
