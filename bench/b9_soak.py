"""B9 soak: 10,000 LLM turns on the demo model with default settings, in one Lab.

The default team (``dev-team``) on the default model (the offline demo model), nothing
configured: the human asks, the Manager delegates to a Developer, the Developer answers,
the Manager answers the human (about three LLM turns per ask). Asks are sent one after
another until the team has made N model requests, counted from the usage events.

Every 1,000 turns (a *window*) the wall time of the window is noted, then ``gc.collect()``
and the resident set size (VmRSS). Two figures are budgeted: the last window's time over
the first's (a history that grows makes every turn cost more) and the slope of RSS per
1,000 turns, least squares over the second half of the windows: the first ones pay
one-time costs (imports, schema caches, the hire) and fill the capped collections up to
their caps (recent records, events per type, transcript, the human's inbox, the asks
remembered; the last fill by about 6,000 turns). The slope after the first window, the
live Python blocks (``sys.getallocatedblocks``) and each window's figures are reported
too.

Runs in a fresh interpreter, so heap left over by earlier benchmarks cannot absorb the
growth. ``AKLAB_SOAK_TURNS`` sets N (default 10,000); ``--smoke`` runs a few hundred
turns in process. ``python -m bench.b9_soak --turns 4000 --trace 2000`` also prints the
allocations that grew most (tracemalloc, by file:line) between turn 2,000 and the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
import time
from typing import Any

from bench.common import Figure, rss_mb, run_module_json

__all__ = ["measure", "run", "slope"]

ID = "B9"
WORKLOAD = "soak: {turns} LLM turns of dev-team on the demo model, default settings ({asks} asks)"
TURNS = 10_000
WINDOW = 1_000
SMOKE_TURNS = 300
SMOKE_WINDOW = 100
ASK_TIMEOUT = 120.0
#: Budgets (issue 11): the last window costs at most 1.2x the first; RSS grows at most
#: 0.5 MB per 1,000 turns.
TIME_RATIO_MAX = 1.2
RSS_SLOPE_MAX = 0.5


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``ys`` over ``xs`` (0 with fewer than two points)."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def measure(
    turns: int = TURNS, window: int = WINDOW, *, trace_from: int | None = None, progress: bool = False
) -> dict[str, Any]:
    """Drive a default Lab for ``turns`` model requests; per-window time and RSS."""
    from aklab.lab import Lab

    lab = Lab()
    recorder = lab.recorder
    windows: list[dict[str, float]] = []
    snapshot: Any = None
    asks = 0
    try:
        gc.collect()
        rss_start = rss_mb()
        done = 0
        start = time.perf_counter()
        while done < turns:
            target = min(turns, done + window)
            while len(recorder.usage) < target:
                if trace_from is not None and snapshot is None and len(recorder.usage) >= trace_from:
                    import tracemalloc

                    gc.collect()
                    snapshot = tracemalloc.take_snapshot()
                lab.ask(f"Task {asks}: add field {asks} to the login form.", timeout=ASK_TIMEOUT)
                asks += 1
            elapsed = time.perf_counter() - start
            done = len(recorder.usage)
            gc.collect()
            windows.append({"turns": done, "seconds": elapsed, "rss_mb": rss_mb(), "blocks": sys.getallocatedblocks()})
            if progress:
                w = windows[-1]
                print(
                    f"{w['turns']:>7} turns {w['seconds']:7.2f} s {w['rss_mb']:8.1f} MB {w['blocks']:>9} blocks",
                    file=sys.stderr,
                    flush=True,
                )
            start = time.perf_counter()
        top: list[str] = []
        if snapshot is not None:
            import tracemalloc

            gc.collect()
            stats = tracemalloc.take_snapshot().compare_to(snapshot, "lineno")
            top = [str(s) for s in stats[:25]]
        errors = lab.errors()
    finally:
        lab.close()
    return {
        "turns": done,
        "asks": asks,
        "window": window,
        "rss_start_mb": rss_start,
        "windows": windows,
        "errors": errors[-5:],
        "error_count": len(errors),
        "top_growth": top,
    }


def summarize(result: dict[str, Any]) -> dict[str, float]:
    windows = result["windows"]
    per_k = 1000 / result["window"]
    # Time per window, normalised to a full window (the last may be short).
    secs = []
    prev = 0.0
    for w in windows:
        secs.append(w["seconds"] * result["window"] / max(1.0, w["turns"] - prev))
        prev = w["turns"]
    xs = [w["turns"] / 1000 for w in windows]
    rss = [w["rss_mb"] for w in windows]
    blocks = [float(w.get("blocks", 0)) for w in windows]
    # The budgeted slope is over the second half of the run: every collection that is
    # capped (records, events per type, transcript, inbox, asks remembered) has filled
    # by then, so what still grows would grow forever. The slope after the first window
    # (caps still filling) is reported beside it.
    steady = slice(len(windows) // 2, None) if len(windows) > 3 else slice(None)
    return {
        "first_s": secs[0] * per_k,
        "last_s": secs[-1] * per_k,
        "ratio": secs[-1] / secs[0] if secs[0] else float("nan"),
        "rss_slope": slope(xs[steady], rss[steady]),
        "rss_slope_after_first": slope(xs[1:], rss[1:]),
        "rss_slope_all": slope(xs, rss),
        "blocks_slope": slope(xs[steady], blocks[steady]),
        "rss_first": rss[0],
        "rss_last": rss[-1],
        "turns_per_s": result["turns"] / sum(w["seconds"] for w in windows),
    }


def run(*, smoke: bool = False, repeat: int = 3, context: dict[str, Any] | None = None) -> list[Figure]:
    if smoke:
        result = measure(SMOKE_TURNS, SMOKE_WINDOW)
    else:
        turns = int(os.environ.get("AKLAB_SOAK_TURNS", TURNS))
        result = run_module_json("bench.b9_soak", "--turns", str(turns), timeout=3600.0)
    s = summarize(result)
    result["summary"] = s
    workload = WORKLOAD.format(turns=result["turns"], asks=result["asks"])
    window = f"{result['window']:,}"
    errors = f"; {result['error_count']} errors" if result["error_count"] else ""
    return [
        Figure(
            ID,
            workload,
            f"time of the last {window} turns / the first {window}",
            s["ratio"],
            "x",
            budget_max=TIME_RATIO_MAX,
            note=f"first {s['first_s']:.1f} s, last {s['last_s']:.1f} s per 1,000 turns; "
            f"{s['turns_per_s']:.0f} turns/s overall{errors}",
            details=result,
        ),
        Figure(
            ID,
            workload,
            "RSS slope per 1,000 turns",
            s["rss_slope"],
            "MB",
            budget_max=RSS_SLOPE_MAX,
            note=f"second half of the run (caps filled); VmRSS {s['rss_first']:.1f} → {s['rss_last']:.1f} MB "
            f"from the first window on, slope {s['rss_slope_after_first']:.2f} MB after the first window; "
            "live Python blocks "
            f"{s['blocks_slope']:+,.0f} per 1,000 turns",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.b9_soak")
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--window", type=int, default=WINDOW)
    parser.add_argument(
        "--trace", type=int, default=None, help="tracemalloc: compare the heap at this turn with the end"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    if args.trace is not None:
        import tracemalloc

        # From the start: a heap traced only from the first snapshot on would count every
        # record that replaced an untraced one in a capped collection as growth.
        tracemalloc.start(1)
    result = measure(args.turns, args.window, trace_from=args.trace, progress=True)
    for line in result["top_growth"]:
        print(line, file=sys.stderr, flush=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
