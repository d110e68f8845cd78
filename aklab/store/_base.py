"""The store's interface, its rows and its errors.

::

    AklabError
    └── StoreError              the store failed (I/O, lock, full disk, lost connection); original as __cause__
        └── StoreCorruptError   the file is damaged: the message says how to recover what is readable
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from aklab.core import OrchestratorMessage
from aklab.errors import AklabError, ConfigError

__all__ = [
    "EventStore",
    "StoreCorruptError",
    "StoreError",
    "StoredRecord",
    "TeamInfo",
    "matching_teams",
    "new_team_id",
    "to_utc",
]

SCHEMA_VERSION = 1


class StoreError(AklabError):
    """The event store could not do what was asked; the original error is ``__cause__``."""


class StoreCorruptError(StoreError):
    """The store's file is damaged; ``SqliteStore.recover(path)`` keeps what is readable."""


class TeamInUseError(StoreError):
    """The team is running in another lab on the same store (this process or another)."""

    def __init__(self, message: str, *, here: bool = False) -> None:
        super().__init__(message)
        self.here = here
        """Whether the lab running it is in this process."""


def new_team_id() -> str:
    """A fresh team id (32 hex digits), one per team session."""
    return uuid.uuid4().hex


def to_utc(when: datetime | date | str) -> datetime:
    """A datetime, a date (midnight UTC) or an ISO string, as an aware UTC datetime (naive means UTC)."""
    if isinstance(when, str):
        try:
            when = datetime.fromisoformat(when)
        except ValueError as exc:
            raise ConfigError(f"time {when!r}: give a datetime or an ISO date such as '2026-05-01'") from exc
    if not isinstance(when, datetime):
        if not isinstance(when, date):
            raise ConfigError(f"time {when!r}: give a datetime or an ISO date such as '2026-05-01'")
        when = datetime(when.year, when.month, when.day)
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One row of the ``events`` table. ``message()`` rebuilds the typed record."""

    seq: int
    team_id: str
    record_id: str
    ask_id: str | None
    kind: str
    """The record's class name: ``SentMessage``, ``EventMessage``, ``ErrorMessage``, ..."""
    event_type: str | None
    """For an ``EventMessage``: the event's class name (``LlmUsageEvent``, ...)."""
    message_id: str | None
    """The id of the message a record is about (sent, handled, or being handled when it failed)."""
    sender: str | None
    sender_role: str | None
    sender_id: str | None
    recipient: str | None
    recipient_id: str | None
    created_at: datetime
    payload: dict[str, Any] = field(repr=False)

    def message(self) -> OrchestratorMessage:
        """The typed record (``SentMessage`` with its ``AgentMessage``, ``EventMessage`` with its
        ``LlmUsageEvent``, ...). Addresses come back without a live actor."""
        from aklab.store._codec import decode

        return decode(self.payload)


@dataclass(frozen=True, slots=True)
class TeamInfo:
    """One row of the ``teams`` table."""

    team_id: str
    name: str
    created_at: datetime
    last_activity: datetime
    metadata: dict[str, Any]
    asked: bool = True
    """Whether anyone ever asked the team anything (it has a record with an ask id). A lab
    that was started and closed without a question (a model switched at once, a warm-up)
    leaves a team that has nothing to resume."""


class EventStore(ABC):
    """An append-only log of team records, shared by every team of a project.

    Thread-safe: ``append`` is called on the thread of whichever member made the record
    (one at a time per team); readers may call from any thread.
    """

    #: Where the data lives, for people (``sqlite:/path`` or a DSN without its password).
    location: str = ""

    def size_bytes(self) -> int | None:
        """How much disk the store takes, if that is cheap to know (None otherwise)."""
        return None

    @abstractmethod
    def append(self, record: OrchestratorMessage, team_id: str) -> int:
        """Store ``record`` for ``team_id``; durable when this returns. Returns its ``seq``.
        Raises :class:`StoreError` (with the cause) if it could not be stored."""

    def append_later(self, record: OrchestratorMessage, team_id: str) -> None:
        """Queue ``record`` for ``team_id``: it is written, in order and in one transaction
        with whatever else is queued, by the next :meth:`append`, :meth:`flush`, read or
        :meth:`close` of this store object. A crash may lose the queued records, never
        one without the records queued after it, so what is stored is always a prefix of
        what was appended. Raises :class:`StoreError` if the store cannot be written.

        The default (for stores that do not group commits) writes it at once."""
        self.append(record, team_id)

    def flush(self) -> None:  # noqa: B027 (a store that queues nothing has nothing to write)
        """Write the records queued by :meth:`append_later` (durable when this returns)."""

    # -- who runs a team ------------------------------------------------------------------
    def claim(self, team_id: str, *, action: str = "resume") -> None:  # noqa: B027 (a store that cannot tell claims nothing)
        """Mark ``team_id`` as run through this store object until :meth:`release`, :meth:`close`
        or the end of this process (a killed kernel's claims end with it). Raises
        :class:`TeamInUseError`, saying who holds it, if another store object holds it, in
        this process or another: two labs appending one team's log would both handle the
        messages a resume delivers again. ``action`` is what the claim is for ("resume",
        "forget"), as the refusal says it. The default (a store that cannot tell) claims nothing."""

    def release(self, team_id: str) -> None:  # noqa: B027
        """End this store object's claim on ``team_id`` (nothing if it holds none)."""

    def in_use(self, team_id: str) -> bool:
        """Whether another store object holds a claim on ``team_id`` now (False if this one
        does, or if the store cannot tell)."""
        return False

    def is_running(self, team_id: str) -> bool | None:
        """Whether a lab runs ``team_id`` now, through this store object or another, in this
        process or another; None if the store cannot tell (the default)."""
        return None

    def forget(self, team_id: str) -> int:
        """Delete every record of ``team_id`` and its row, and return how many records went:
        the one deletion a store makes (records are never rewritten, and a team goes whole).
        Refused with :class:`TeamInUseError` while a lab runs the team, here or elsewhere.
        A store that deletes in several transactions deletes the newest records first and the
        team's row last: an interrupted forget leaves the team listed with an earlier prefix
        of its records, and forgetting it again finishes. The default (a store that cannot
        delete) raises :class:`StoreError`."""
        raise StoreError(f"event store {self.location or type(self).__name__} cannot forget a team")

    @abstractmethod
    def records(
        self,
        team_id: str | None = None,
        *,
        since: int | datetime | date | str | None = None,
        until: datetime | date | str | None = None,
        kinds: Iterable[str] | None = None,
        ask_id: str | None = None,
        before: int | None = None,
        limit: int | None = None,
        newest: bool = False,
        record_id: str | None = None,
        message_id: str | None = None,
    ) -> list[StoredRecord]:
        """Records in append order: of ``team_id`` (every team if None), after seq ``since``
        (an int) or from time ``since`` (a datetime or ISO date), before time ``until``,
        whose ``kind`` or ``event_type`` is in ``kinds``, of ``ask_id``, before seq ``before``,
        with this ``record_id`` or about this ``message_id``; at most ``limit`` of them: the
        first ones, or the newest ones with ``newest=True`` (still returned oldest first).
        A panel pages back with ``before=<oldest seq shown>, limit=N, newest=True``, and
        finds the seq of a record it holds with ``record_id=..., limit=1``."""

    @abstractmethod
    def save_team(self, team_id: str, *, name: str, metadata: dict[str, Any] | None = None) -> None:
        """Create or update the team's row (name, metadata such as the team spec and models)."""

    @abstractmethod
    def teams(self) -> list[TeamInfo]:
        """Every stored team, most recently active first."""

    @abstractmethod
    def close(self) -> None:
        """Release the file or connection (idempotent)."""

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.location}>"


def matching_teams(teams: list[TeamInfo], team: str, location: str) -> list[TeamInfo]:
    """The stored teams ``team`` names, in ``teams``' order: the one with that id, else those
    whose id starts with it, else those of that name. None raises ``ConfigError`` listing
    some of ``teams`` (stored in ``location``), as does an empty ``team``: every id starts
    with "", and ``forget("")`` must not delete the only team stored."""
    if not isinstance(team, str) or not team.strip():
        raise ConfigError(f"team {team!r}: name a stored team by its id, an id prefix or its name")
    found = [t for t in teams if t.team_id == team] or [t for t in teams if t.team_id.startswith(team)]
    found = found or [t for t in teams if t.name == team]
    if not found:
        known = ", ".join(f"{t.name} ({t.team_id[:8]})" for t in teams[:10]) or "none"
        raise ConfigError(f"no stored team {team!r} in {location}; stored: {known}")
    return found


def check_kinds(kinds: Iterable[str] | None) -> list[str] | None:
    if kinds is None:
        return None
    if isinstance(kinds, str):
        return [kinds]
    return list(kinds)


def check_team_id(team_id: object) -> str:
    if not isinstance(team_id, str) or not team_id:
        raise ConfigError(f"team_id must be a non-empty string (e.g. aklab.store.new_team_id()), not {team_id!r}")
    return team_id
