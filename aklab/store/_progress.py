"""A long read of the store says on stderr how far it has got (``history``, a resume)."""

from __future__ import annotations

import sys
import time

__all__ = ["ReadProgress"]


class ReadProgress:
    """Counts what a read has got so far. Once ``after_s`` seconds have passed, each
    ``update`` rewrites one stderr line (``"<what>: N records read..."``); ``done`` ends that
    line with the time taken (a read that never showed progress says nothing)."""

    def __init__(self, what: str, after_s: float) -> None:
        self.what = what
        self.after_s = after_s
        self.started = time.monotonic()
        self.shown = False

    def update(self, records: int) -> None:
        if time.monotonic() - self.started >= self.after_s:
            self.shown = True
            print(f"\r{self.what}: {records:,} records read...", end="", file=sys.stderr, flush=True)

    def done(self, records: int) -> None:
        if self.shown:
            took = time.monotonic() - self.started
            print(f"\r{self.what}: {records:,} records read in {took:.1f} s", file=sys.stderr, flush=True)
