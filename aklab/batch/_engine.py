"""The engine interface: where attempts run. The driver decides what runs and when.

An engine is opened with a ``post`` function and the batch's concurrency; it runs each
submitted :class:`Job` somewhere (threads, worker processes, Ray actors) and posts back
what happens to it: :class:`Started`, :class:`Finished` (the attempt's outcome),
:class:`Lost` (its worker died), or :class:`Broken` (it cannot go on at all), and what it
is doing meanwhile (:class:`Note`: "starting Ray", shown with the progress). It never
retries or times out on its own account: the driver does, so that every engine behaves
the same.
"""

from __future__ import annotations

import pickle
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aklab.batch._attempt import Job, Key, Outcome
from aklab.llm import LlmUsageEvent

__all__ = ["Broken", "Engine", "Finished", "Lost", "Note", "Post", "Started"]


@dataclass(frozen=True)
class Started:
    key: Key
    worker: str


@dataclass(frozen=True)
class Finished:
    outcome: Outcome


@dataclass(frozen=True)
class Lost:
    key: Key
    error: str


@dataclass(frozen=True)
class Broken:
    """The engine cannot go on (its workers cannot start): the batch stops with this error."""

    error: str


@dataclass(frozen=True)
class Named:
    """The worker an engine named ``provisional`` when it started attempts there is ``worker``
    (``host:pid``), as the worker's first outcome says: attempts it never finished (given up
    on) are counted under that name too."""

    provisional: str
    worker: str


@dataclass(frozen=True)
class Note:
    """What the engine is busy with before it can run attempts ("starting Ray"); "" when ready."""

    text: str


Post = Callable[[Started | Finished | Lost | Broken | Named | Note], None]


class Engine(ABC):
    """Runs attempts. ``slots`` is how many it runs at once (set by ``open``)."""

    name: str = "engine"
    slots: int = 1

    def dumps(self, obj: Any) -> bytes:
        """How jobs travel to this engine's workers (the standard pickle by default)."""
        return pickle.dumps(obj)

    @property
    def ships_jobs(self) -> bool:
        """True when jobs leave this process (so they must be picklable)."""
        return True

    def prepare(self) -> None:
        """Quick checks on the caller's thread, once, before ``open`` (errors reach the caller at once).
        Slow set-up (starting workers, joining a cluster) belongs after ``open``, off the driver's
        thread, so that a cancel can abandon it."""
        return None  # nothing to do for most engines

    @abstractmethod
    def open(self, post: Post, concurrency: int) -> None:
        """Get ready to run ``concurrency`` attempts at once, posting their news with ``post``.
        Returns soon: the driver's thread must stay free to take a cancel."""

    @abstractmethod
    def submit(self, job: Job) -> None:
        """Start ``job`` (the driver never submits more than ``slots`` at once)."""

    @abstractmethod
    def give_up(self, key: Key) -> list[LlmUsageEvent]:
        """The driver stopped waiting for ``key``: stop it as far as possible, free its slot,
        and return the usage it is known to have caused so far."""

    @abstractmethod
    def cancel(self) -> None:
        """Stop every attempt now (returns within about 1.5 s, whatever the workers do)."""

    @abstractmethod
    def close(self) -> None:
        """Release the workers (bounded); called once, after ``cancel`` or when all is done. After a
        cancel, slow clean-up (shutting down a Ray it started) may go on in the background."""
