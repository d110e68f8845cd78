"""``python -m bench [--smoke] [--only B1,B3] [--repeat 3] [--out bench/results]``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import BENCHMARKS, benchmark_modules
from bench.common import REPO, Figure
from bench.report import command_line, write_report

__all__ = ["main", "run_benchmarks"]


def run_benchmarks(
    *, smoke: bool = False, only: list[str] | None = None, repeat: int = 3, progress: bool = False
) -> list[Figure]:
    """Run the benchmarks in order; every figure they report.

    Labs on default settings (B9's soak, B4's kernel) keep an event store; unless
    ``AKLAB_STORE`` says where, it goes to a temporary folder, removed afterwards, not to
    the project's ``.aklab/`` (a soak writes ~100 MB of records)."""
    if os.environ.get("AKLAB_STORE"):
        return _run(smoke=smoke, only=only, repeat=repeat, progress=progress)
    with tempfile.TemporaryDirectory(prefix="aklab-bench-store-") as folder:
        os.environ["AKLAB_STORE"] = str(Path(folder) / "events.sqlite3")
        try:
            return _run(smoke=smoke, only=only, repeat=repeat, progress=progress)
        finally:
            os.environ.pop("AKLAB_STORE", None)


def _run(*, smoke: bool, only: list[str] | None, repeat: int, progress: bool) -> list[Figure]:
    context: dict[str, Any] = {}
    figures: list[Figure] = []
    for module in benchmark_modules(only):
        started = time.perf_counter()
        if progress:
            print(f"{module.ID} ({module.__name__}) ...", end=" ", flush=True)
        results: list[Figure] = module.run(smoke=smoke, repeat=repeat, context=context)
        figures.extend(results)
        if progress:
            summary = "; ".join(f"{f.figure}: {f.measured} [{f.verdict}]" for f in results)
            print(f"{time.perf_counter() - started:.1f} s — {summary}", flush=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny N, to check the harness runs")
    parser.add_argument("--only", help=f"comma-separated ids ({','.join(BENCHMARKS)})")
    parser.add_argument("--repeat", type=int, default=3, help="repeats per measurement (best is kept)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results", help="report directory")
    args = parser.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()] if args.only else None

    started_at = datetime.now(UTC)
    start = time.perf_counter()
    figures = run_benchmarks(smoke=args.smoke, only=only, repeat=args.repeat, progress=True)
    write_report(
        figures,
        args.out,
        command=command_line(sys.argv[1:] if argv is None else argv),
        started_at=started_at,
        duration_s=time.perf_counter() - start,
        smoke=args.smoke,
    )
    print(f"wrote {args.out / 'report.md'} and {args.out / 'report.json'}")
    return 0


if __name__ == "__main__":
    # Agents log warnings (skipped recipients, interrupted runs); print figures only.
    logging.basicConfig(level=logging.ERROR)
    sys.exit(main())
