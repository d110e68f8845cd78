"""Text helpers of :class:`~aklab.tools.WorkspaceTool`: capped reads, whole writes and a bounded grep.

Grep runs the model's pattern on the ``regex`` engine with a timeout (the remaining time
of the whole search), so a catastrophic pattern such as ``^(a|aa)+$`` ends as a message
rather than as a stuck actor. Reads decode incrementally, so a cut never splits a
character and an offset far into a large file costs no more than decoding up to it.
"""

from __future__ import annotations

import codecs
import os
import time
from typing import Any

import regex  # type: ignore[import-untyped]

__all__ = [
    "MAX_GREP_HITS",
    "Grep",
    "compile_pattern",
    "decode_window",
    "read_all",
    "size_text",
    "write_all",
]

MAX_GREP_HITS = 200
MAX_GREP_LINE = 500
"""A matching line longer than this is shown cut, with its length."""
MAX_PATTERN_CHARS = 1000
REGEX_TIMEOUT_SHARE = 0.6


def compile_pattern(pattern: str) -> Any:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"the regular expression is {len(pattern)} characters; use at most {MAX_PATTERN_CHARS}")
    try:
        return regex.compile(pattern)
    except (regex.error, ValueError, OverflowError) as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None


class Grep:
    """Hits of one grep, and why it stopped (``stop``), within its caps."""

    def __init__(self, matcher: Any, deadline: float, max_chars: int) -> None:
        self.matcher, self.deadline, self.max_chars = matcher, deadline, max_chars
        self.hits: list[str] = []
        self.chars = 0
        self.stop = ""

    def search(self, line: str, rel: str, number: int) -> bool:
        """Record ``line`` if it matches; False once the grep must stop."""
        remaining = self.deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise TimeoutError
            # regex checks its clock only now and then: it overshoots a timeout by up to ~50%
            # (measured), so aim lower and keep the whole grep within its time.
            found = self.matcher.search(line, timeout=remaining * REGEX_TIMEOUT_SHARE) is not None
        except TimeoutError:
            self.stop = f"(the search timed out at {rel}:{number}; simplify the regular expression or narrow the path)"
            return False
        if not found:
            return True
        if len(line) > MAX_GREP_LINE:
            line = f"{line[:MAX_GREP_LINE]}… (line cut: {len(line)} characters)"
        hit = f"{rel}:{number}: {line}"
        if self.chars + len(hit) > self.max_chars:
            self.stop = f"(output cut at {self.max_chars} characters after {len(self.hits)} hits; narrow the search)"
            return False
        self.hits.append(hit)
        self.chars += len(hit) + 1
        if len(self.hits) >= MAX_GREP_HITS:
            self.stop = f"(stopped at {MAX_GREP_HITS} hits; narrow the search)"
            return False
        return True


def size_text(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 100_000 else f"{n / 1000:.1f} kB"


def read_all(fd: int, size: int) -> bytes:
    """At most ``size`` bytes from ``fd`` (a file growing meanwhile is cut at its fstat size)."""
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    os.lseek(fd, 0, os.SEEK_SET)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.ftruncate(fd, len(data))


def decode_window(fd: int, offset: int, limit: int, path: str, size: int) -> tuple[str, bool]:
    """Characters ``offset`` to ``offset + limit`` of a UTF-8 file, and whether more follow."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    seen = 0
    kept: list[str] = []
    want = offset + limit + 1
    try:
        while seen < want:
            chunk = os.read(fd, 1 << 20)
            piece = decoder.decode(chunk, final=not chunk)
            start = max(offset - seen, 0)
            if start < len(piece):
                kept.append(piece[start : want - seen])
            seen += len(piece)
            if not chunk:
                break
    except UnicodeDecodeError:
        raise ValueError(f"{path!r} is not UTF-8 text ({size} bytes); show an image with !!{path}") from None
    text = "".join(kept)
    return text[:limit], len(text) > limit
