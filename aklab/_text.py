"""Counts in words: "1 reply", "3 replies", never "repl(ies)"."""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (``plural``, or ``noun`` + "s"); ``n`` with
    thousands separators."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
