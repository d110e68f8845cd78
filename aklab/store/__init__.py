"""aklab.store: every team record, appended as it happens, read back across sessions.

The store sits beside ``llm`` and ``tools``: it knows core's records, nothing above
(the classes of stored messages and events are found again by their import path).

Wiring (what ``Lab`` does)::

    from aklab.store import StoreSubscriber, history, new_team_id, open_store

    store = open_store()                      # $AKLAB_STORE, else ./.aklab/events.sqlite3
    team_id = new_team_id()
    subscriber = StoreSubscriber(store, team_id, on_failure=warn_the_user)
    orchestrator.subscribe(subscriber)        # before the first member starts: every record
    store.save_team(team_id, name="dev-team", metadata={"entry": "@Manager", "models": [...]})
    ...
    store.teams()                             # [TeamInfo(team_id, name, created_at, last_activity, metadata)]
    store.records(team_id, since=seq)         # StoredRecord rows in append order; .message() rebuilds one
    history(store, team=None, agent=None, model=None, since=None, until=None)  # .asks .runs .usage .messages
    store.close()                             # after the team has stopped (the subscriber never closes it)

Stores (:class:`EventStore`):

- :class:`SqliteStore` ``(path=None, *, synchronous="NORMAL", verify=True)``: the embedded
  default, one file per project folder (:func:`default_store_path`), WAL; ``append``
  commits the record, with every record queued before it by ``append_later``, before it
  returns (NORMAL: survives a killed process; FULL: also a power loss). A damaged file
  raises :class:`StoreCorruptError`; ``SqliteStore.recover(path)`` keeps everything
  readable before the damage. A file that cannot be written opens
  read-only (``store.read_only`` says why).
- :class:`PostgresStore` ``(dsn, *, schema=None)``: the same tables on PostgreSQL
  (``pip install 'aklab[postgres]'``).

Tables: ``events`` (append-only: seq, team_id, record_id, ask_id, kind, event_type,
message_id, sender, sender_role, sender_id, recipient, recipient_id, created_at, payload
JSON) and ``teams`` (team_id, name, created_at, last_activity, metadata JSON). Payloads
are redacted (:func:`aklab.secrets.redact`) before they are written; an ``ActorAddress``
is stored as its identity, never its live actor.

:class:`StoreSubscriber` commits the records a member makes while it handles a message
together with the record of its end (one transaction, before the member takes its next
message), and any other record at once. It never raises into an actor: a failing store (read-only or full
disk, lock, lost connection) is logged once as a warning, ``subscriber.failed`` says why,
and the team goes on in memory.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from aklab.errors import ConfigError
from aklab.store._base import (
    EventStore,
    StoreCorruptError,
    StoredRecord,
    StoreError,
    TeamInfo,
    TeamInUseError,
    matching_teams,
    new_team_id,
)
from aklab.store._codec import class_path, decode, encode
from aklab.store._history import History, history
from aklab.store._progress import ReadProgress
from aklab.store._sqlite import RecoveryReport, SqliteStore, default_store_path, store_file
from aklab.store._subscriber import StoreSubscriber

if TYPE_CHECKING:
    from aklab.store._postgres import PostgresStore

__all__ = [
    "OFF",
    "STORE_ENV",
    "EventStore",
    "History",
    "PostgresStore",
    "ReadProgress",
    "RecoveryReport",
    "SqliteStore",
    "StoreCorruptError",
    "StoreError",
    "StoreSubscriber",
    "StoredRecord",
    "TeamInUseError",
    "TeamInfo",
    "class_path",
    "decode",
    "default_store_path",
    "encode",
    "history",
    "is_postgres",
    "matching_teams",
    "new_team_id",
    "no_store_here",
    "open_store",
    "per_folder_hint",
    "store_file",
    "store_target",
]

#: Environment variable naming the store: a path, or a ``postgresql://`` DSN.
STORE_ENV = "AKLAB_STORE"


def open_store(target: str | os.PathLike[str] | None = None, *, create: bool = True, verify: bool = True) -> EventStore:
    """The store at ``target``: a ``postgresql://``/``postgres://`` DSN opens a
    :class:`PostgresStore`, anything else is a SQLite file path. None means
    ``$AKLAB_STORE`` if set, else :func:`default_store_path` (``./.aklab/events.sqlite3``).
    ``create=False`` (for readers) raises ``ConfigError`` saying where it looked, rather
    than create an empty SQLite file where there is none. ``verify=False`` skips SQLite's
    check of the whole file on open (``SqliteStore``'s ``verify``; about 1 s per 60 MB)."""
    text = store_target(target)
    if is_postgres(text):
        from aklab.store._postgres import PostgresStore

        return PostgresStore(text)
    if not create and not os.path.exists(text):
        raise ConfigError(no_store_here(text))
    return SqliteStore(text, verify=verify)


#: ``$AKLAB_STORE`` values (or ``store=`` strings) that mean: keep nothing on disk.
OFF = ("off", "none", "false", "0", "")


def store_target(target: str | os.PathLike[str] | None = None) -> str:
    """What ``open_store(target)`` opens: ``target``, else ``$AKLAB_STORE``, else
    :func:`default_store_path`; a SQLite path as :func:`store_file` resolves it (``~``, a
    folder). ``$AKLAB_STORE=off`` (with no ``target``) raises ``ConfigError``: the labs of
    this environment keep nothing, so there is nothing to read or delete."""
    env = os.environ.get(STORE_ENV)
    if target is None and env is not None and env.strip().lower() in OFF:
        raise ConfigError(
            f"the event store is off here (${STORE_ENV}={env!r}): labs keep nothing on disk; "
            f"unset {STORE_ENV}, or pass store= a path or a postgresql:// DSN"
        )
    text = os.fspath(target if target is not None else env or default_store_path())
    return text if is_postgres(text) else os.fspath(store_file(text))


def is_postgres(target: str) -> bool:
    """Whether ``target`` (see :func:`store_target`) names a PostgreSQL server rather than a SQLite file."""
    return target.startswith(("postgresql://", "postgres://"))


def no_store_here(path: str | os.PathLike[str]) -> str:
    """Why a reader found nothing at ``path``: the store is per project folder."""
    return f"no event store at {os.path.abspath(path)}: {per_folder_hint()}"


def per_folder_hint() -> str:
    """Where the default SQLite store lives, and how to point elsewhere (for "nothing here" errors)."""
    return (
        f"aklab keeps one store per project folder, in .aklab/ under the folder the kernel runs in "
        f"(now {os.getcwd()}); run from the notebook's folder, set ${STORE_ENV}, or pass store="
    )


def __getattr__(name: str) -> object:
    # PostgresStore's module needs nothing optional at import, but keep it out of `import aklab.store`.
    if name == "PostgresStore":
        from aklab.store._postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module 'aklab.store' has no attribute {name!r}")
