"""aklab benchmarks (issue 6): what aklab costs on top of the LLM, against a floor.

``python -m bench`` (``make bench``) runs every benchmark and writes
``bench/results/report.json`` and ``bench/results/report.md``; ``--smoke`` runs each with
a tiny N (the test suite does this, so the harness never rots). Benchmarks are not timed
tests: a missed budget is reported, never raised.

Every benchmark module has ``ID`` and ``run(*, smoke, repeat, context) -> list[Figure]``;
``context`` passes figures between benchmarks of the same run (B2 compares with B1).
"""

from __future__ import annotations

from types import ModuleType

__all__ = ["BENCHMARKS", "benchmark_modules"]

#: Benchmark id -> module name, in the order they run.
BENCHMARKS = {
    "B1": "bench.b1_relay",
    "B2": "bench.b2_burst",
    "B3": "bench.b3_memory",
    "B4": "bench.b4_start",
    "B5": "bench.b5_frames",
    "B6": "bench.b6_context",
    "B7": "bench.b7_cancel",
    "B8": "bench.b8_prompt",
    "B9": "bench.b9_soak",
    "B10": "bench.b10_store",
    "B11": "bench.b11_batch",
}


def benchmark_modules(only: list[str] | None = None) -> list[ModuleType]:
    """The benchmark modules to run (all, or the ids in ``only``), in order."""
    import importlib

    ids = [i.upper() for i in only] if only else list(BENCHMARKS)
    unknown = [i for i in ids if i not in BENCHMARKS]
    if unknown:
        raise ValueError(f"unknown benchmark ids {unknown}; choose from {', '.join(BENCHMARKS)}")
    return [importlib.import_module(BENCHMARKS[i]) for i in BENCHMARKS if i in ids]
