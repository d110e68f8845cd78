"""B9 soak: 10,000 LLM turns on the demo model with default settings, in one Lab.

The default team (``dev-team``) on the default model (the offline demo model), nothing
configured: the human asks, the Manager delegates to a Developer, the Developer answers,
the Manager answers the human (about three LLM turns per ask). Asks are sent one after
another until the team has made N model requests, counted from the usage events.

Every 1,000 turns (a *window*) the wall time of the window is noted, then ``gc.collect()``
and the resident set size (VmRSS). Beside the soak, for its whole length, runs its floor:
another interpreter asking fresh default Labs (each with a store of its own, 600 timed
turns after 30 untimed ones, then the next) and timing every 50 turns. Two figures are
budgeted: the last window's time per turn over the first's, each divided by the floor's
time per turn over the same seconds (a history that grows makes every turn cost more; a
machine that slows for a minute slows the floor as much: on this shared VM the raw ratio
of the same code ranged from 0.83x to 1.59x), and the slope of RSS per 1,000 turns, least
squares over the second half of the windows: the first ones pay one-time costs (imports,
schema caches, the hire) and fill the capped collections up to their caps (recent records,
events per type, transcript, the human's inbox, the asks remembered; the last fill by
about 6,000 turns). The slope after the first window, the live Python blocks
(``sys.getallocatedblocks``), the raw time ratio and each window's figures are reported
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
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from bench.common import REPO, Figure, child_env, rss_mb, run_module_json

__all__ = ["measure", "run", "slope"]

ID = "B9"
WORKLOAD = "soak: {turns} LLM turns of dev-team on the demo model, default settings ({asks} asks)"
TURNS = 10_000
WINDOW = 1_000
SMOKE_TURNS = 300
SMOKE_WINDOW = 100
#: The floor beside the soak: each fresh Lab is asked FLOOR_WARMUP untimed turns, then
#: FLOOR_TURNS timed FLOOR_CHUNK at a time, then the next Lab starts.
FLOOR_TURNS = 600
FLOOR_WARMUP = 30
FLOOR_CHUNK = 50
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


def _ask_until(lab: Any, turns: int, asks: int) -> int:
    """Ask ``lab`` one question after another until it has made ``turns`` model requests."""
    while len(lab.recorder.usage) < turns:
        lab.ask(f"Task {asks}: add field {asks} to the login form.", timeout=ASK_TIMEOUT)
        asks += 1
    return asks


def floor_loop(turns: int = FLOOR_TURNS, warmup: int = FLOOR_WARMUP, chunk: int = FLOOR_CHUNK) -> None:
    """The floor, run beside the soak until terminated: fresh default Labs one after
    another, each storing to a folder of its own, asked ``warmup`` untimed turns (the
    hire, cold caches) then ``turns`` more, timed ``chunk`` turns at a time. Prints one
    JSON line per chunk: its start and end on the system's monotonic clock, and its turns."""
    import signal

    from aklab.lab import Lab

    # Terminated by the soak: leave through the finally clauses (close the Lab, remove
    # its folder), not by dying where the signal lands.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        with tempfile.TemporaryDirectory(prefix="aklab-b9-floor-") as folder:
            os.environ["AKLAB_STORE"] = os.path.join(folder, "events.sqlite3")
            lab = Lab()
            try:
                asks = _ask_until(lab, warmup, 0)
                end = len(lab.recorder.usage) + turns
                while (before := len(lab.recorder.usage)) < end:
                    t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
                    asks = _ask_until(lab, before + chunk, asks)
                    t1 = time.clock_gettime(time.CLOCK_MONOTONIC)
                    print(json.dumps({"t0": t0, "t1": t1, "turns": len(lab.recorder.usage) - before}), flush=True)
            finally:
                lab.close()


class Floor:
    """:func:`floor_loop` in a fresh interpreter beside the soak (both share the machine
    as it is at each moment), its chunks collected by a thread; stopped by its pid."""

    def __init__(self) -> None:
        self.chunks: list[dict[str, float]] = []
        self._first = threading.Event()
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bench.b9_soak", "--floor"],
            cwd=REPO,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, name="b9-floor-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self.chunks.append(json.loads(line))
            self._first.set()
        self._first.set()

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Block until the floor has timed its first chunk (it is warm)."""
        if not self._first.wait(timeout) or not self.chunks:
            self.stop()
            raise RuntimeError(f"the B9 floor process gave no timing within {timeout:.0f} s")

    def per_turn(self, t0: float, t1: float) -> float:
        """Seconds per turn of the floor's chunks overlapping ``[t0, t1]``, each weighted
        by the share of it that falls inside (nan if none does)."""
        seconds = turns = 0.0
        for c in list(self.chunks):
            overlap = min(t1, c["t1"]) - max(t0, c["t0"])
            if overlap > 0:
                seconds += overlap
                turns += overlap / (c["t1"] - c["t0"]) * c["turns"]
        return seconds / turns if turns else float("nan")

    def stop(self) -> None:
        """Terminate the floor; if it had died on its own, say why (its stderr's tail)."""
        died = self._proc.poll()
        self._proc.terminate()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=30)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._stderr.seek(0)
        tail = self._stderr.read()[-3000:]
        self._stderr.close()
        if died is not None:
            raise RuntimeError(f"the B9 floor process exited on its own (status {died}):\n{tail}")


def measure(
    turns: int = TURNS,
    window: int = WINDOW,
    *,
    trace_from: int | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Drive a default Lab for ``turns`` model requests beside the floor; per-window time,
    RSS and the floor's time per turn over the same seconds."""
    from aklab.lab import Lab

    lab = Lab()
    recorder = lab.recorder
    windows: list[dict[str, float]] = []
    snapshot: Any = None
    asks = 0
    beside = Floor()
    try:
        beside.wait_ready()
        gc.collect()
        rss_start = rss_mb()
        done = 0
        start = time.perf_counter()
        t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
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
            t1 = time.clock_gettime(time.CLOCK_MONOTONIC)
            done = len(recorder.usage)
            gc.collect()
            windows.append(
                {
                    "turns": done,
                    "seconds": elapsed,
                    "rss_mb": rss_mb(),
                    "blocks": sys.getallocatedblocks(),
                    "t0": t0,
                    "t1": t1,
                }
            )
            if progress:
                w = windows[-1]
                print(
                    f"{w['turns']:>7} turns {w['seconds']:7.2f} s {w['rss_mb']:8.1f} MB {w['blocks']:>9} blocks",
                    file=sys.stderr,
                    flush=True,
                )
            start = time.perf_counter()
            t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
        top: list[str] = []
        if snapshot is not None:
            import tracemalloc

            gc.collect()
            stats = tracemalloc.take_snapshot().compare_to(snapshot, "lineno")
            top = [str(s) for s in stats[:25]]
        errors = lab.errors()
    finally:
        beside.stop()
        lab.close()
    for w in windows:
        w["floor_s_per_turn"] = beside.per_turn(w.pop("t0"), w.pop("t1"))
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
    # Time per window, normalised to a full window (the last may be short), and that
    # window's time per turn over the floor's during the same seconds.
    secs = []
    relative = []
    prev = 0.0
    for w in windows:
        secs.append(w["seconds"] * result["window"] / max(1.0, w["turns"] - prev))
        relative.append((secs[-1] / result["window"]) / w["floor_s_per_turn"])
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
        "raw_ratio": secs[-1] / secs[0] if secs[0] else float("nan"),
        "ratio": relative[-1] / relative[0] if relative[0] else float("nan"),
        "first_floor_s": windows[0]["floor_s_per_turn"] * 1000,
        "last_floor_s": windows[-1]["floor_s_per_turn"] * 1000,
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
            f"time of the last {window} turns / the first {window}, each over fresh Labs timed beside it",
            s["ratio"],
            "x",
            budget_max=TIME_RATIO_MAX,
            note=f"first {s['first_s']:.1f} s, last {s['last_s']:.1f} s per 1,000 turns (raw ratio "
            f"{s['raw_ratio']:.2f}x); fresh Labs beside it: {s['first_floor_s']:.1f} s and {s['last_floor_s']:.1f} s "
            f"per 1,000 turns; {s['turns_per_s']:.0f} turns/s overall{errors}",
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
    parser.add_argument("--floor", action="store_true", help="run the floor (fresh Labs) until terminated")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    if args.floor:
        floor_loop()
        return
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
