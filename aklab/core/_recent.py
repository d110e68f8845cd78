"""Recent: the newest N of an append-only record, addressed by position since the start.

A long session must not keep every busy event, error or reply in memory, but readers
hold positions (``start = len(log)`` before an ask, ``log[start:]`` after it). ``Recent``
keeps the newest ``maxlen`` items and counts the ones it dropped, so a position stays
the same item for as long as that item is kept:

- ``len(recent)`` is how many items were ever appended (the next position);
- ``recent[i]`` / ``recent[a:b]`` address positions since the start; a slice leaves out
  the dropped items (``recent.dropped`` says how many there are), a negative index counts
  from the newest item, an index of a dropped item raises ``IndexError`` naming the cap;
- iterating (and ``list(recent)``) yields the kept items, oldest first.

An append is a deque append and an integer add under a short lock, so a reader on
another thread always sees positions and items that agree.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from typing import Generic, TypeVar, overload

__all__ = ["Recent"]

T = TypeVar("T")


class Recent(Generic[T]):
    """The newest ``maxlen`` items of an append-only record; positions count from the start."""

    __slots__ = ("_items", "_lock", "_total", "maxlen", "what")

    def __init__(self, maxlen: int, what: str = "items") -> None:
        if maxlen < 1:
            raise ValueError(f"maxlen must be at least 1, got {maxlen}")
        self.maxlen = maxlen
        self.what = what
        self._items: deque[T] = deque(maxlen=maxlen)
        self._total = 0
        self._lock = threading.Lock()

    def append(self, item: T) -> None:
        with self._lock:
            self._items.append(item)
            self._total += 1

    @property
    def dropped(self) -> int:
        """How many of the oldest items are no longer kept."""
        with self._lock:
            return self._total - len(self._items)

    def snapshot(self) -> tuple[int, list[T]]:
        """``(position of the first kept item, the kept items)``, taken at one moment."""
        with self._lock:
            return self._total - len(self._items), list(self._items)

    def since(self, position: int) -> list[T]:
        """The kept items at ``position`` and after."""
        return self[max(0, position) :]

    def __len__(self) -> int:
        return self._total

    def __bool__(self) -> bool:
        return self._total > 0

    def __iter__(self) -> Iterator[T]:
        return iter(self.snapshot()[1])

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, int):
            with self._lock:
                total, kept = self._total, len(self._items)
                position = index + total if index < 0 else index
                if total - kept <= position < total:
                    return self._items[position - (total - kept)]
            if 0 <= position < total - kept:
                raise IndexError(
                    f"{self.what} #{position} was dropped: only the newest {self.maxlen:,} are kept in memory"
                )
            raise IndexError(f"{self.what} index {index} out of range ({total} so far)")
        if isinstance(index, slice):
            first, items = self.snapshot()
            start, stop, step = index.indices(first + len(items))
            if step != 1:
                return [items[i - first] for i in range(start, stop, step) if i >= first]
            return items[max(start, first) - first : max(stop, first) - first]
        raise TypeError(f"indices must be integers or slices, not {type(index).__name__}")

    def clear(self) -> None:
        """Forget every item (positions keep counting)."""
        with self._lock:
            self._items.clear()

    def __repr__(self) -> str:
        dropped = self.dropped
        note = f", {dropped:,} oldest dropped" if dropped else ""
        return f"<Recent {self.what}: {len(self._items):,} of {self._total:,} kept (cap {self.maxlen:,}){note}>"
