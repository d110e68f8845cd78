"""SqliteStore: the embedded default, one file per project folder (``.aklab/events.sqlite3``).

Durability: WAL journal with ``synchronous=NORMAL`` by default. ``append`` writes its record,
with every record queued before it by ``append_later``, in one INSERT statement (its own
transaction) and returns once it is committed; ``flush``, a read and ``close`` write the
queue too. The ``StoreSubscriber`` queues what a member records while it handles a message
and appends the record of its end, so a handling's records are in the WAL before the member
takes its next message: a killed kernel (SIGKILL, a crash, a restart) loses at most the
handlings in progress, and what is stored is always a prefix of what was recorded. What
NORMAL gives up is the fsync per commit: after a *power loss or OS crash* the last commits
may be rolled back (the file stays consistent). ``synchronous="FULL"`` syncs the WAL on
every commit and survives that too, at the price of one fsync per commit (milliseconds on
most disks). The log is copied back into the file (checkpointed) by a thread of the store's
own, not by the commit that makes it long (``aklab.store._checkpoint``).

Damage: opening checks the header (a file shorter than its header says is truncated) and
runs ``PRAGMA quick_check`` (``verify=False`` skips it); a damaged file raises
:class:`StoreCorruptError` naming :meth:`SqliteStore.recover`, which copies every record
readable before the damage into a fresh file and keeps the damaged one aside.

A lab claims its team while it runs (:meth:`SqliteStore.claim`): a lock file per team in the
folder ``<store file>-teams``, which the operating system unlocks when the process ends.

A file that cannot be written (read-only file or file system) is opened read-only:
``store.read_only`` says why, reading works, and ``append`` raises ``StoreError``.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic_core import from_json

from aklab.errors import ConfigError
from aklab.store._base import (
    SCHEMA_VERSION,
    EventStore,
    StoreCorruptError,
    StoredRecord,
    StoreError,
    TeamInfo,
    check_kinds,
    check_team_id,
    to_utc,
)
from aklab.store._checkpoint import BACKSTOP_PAGES, Checkpointer
from aklab.store._claims import TeamLocks
from aklab.store._codec import Row
from aklab.store._queue import QueuedWrites

__all__ = [
    "DEFAULT_STORE_DIR",
    "DEFAULT_STORE_FILE",
    "RecoveryReport",
    "SqliteStore",
    "default_store_path",
    "store_file",
]

log = logging.getLogger("aklab.store")

DEFAULT_STORE_DIR = ".aklab"
DEFAULT_STORE_FILE = "events.sqlite3"
#: How long a writer waits for another process holding the file's write lock. Another
#: kernel's append holds it for well under a millisecond; this stays below the team log's
#: ``DELIVERY_WAIT`` (2 s), so a store locked for good fails the subscriber (one warning)
#: before the log reports it as a stuck subscriber.
BUSY_TIMEOUT = 1.0
_READ_CHUNK = 1_000
#: Rows per INSERT statement (13 values each, within SQLite's 32,766 variables since 3.32;
#: 999 before: see _ROWS_PER_STATEMENT's use).
_ROWS_PER_STATEMENT = 1_000 if sqlite3.sqlite_version_info >= (3, 32) else 76

_NO_DELETE = """CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;"""
#: Records ``forget`` deletes per transaction: each is short, so another kernel appending
#: to the same file waits well within its busy timeout.
FORGET_CHUNK = 5_000

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY,
    team_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    ask_id TEXT,
    kind TEXT NOT NULL,
    event_type TEXT,
    message_id TEXT,
    sender TEXT,
    sender_role TEXT,
    sender_id TEXT,
    recipient TEXT,
    recipient_id TEXT,
    created_at TEXT NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_team ON events (team_id, seq);
CREATE INDEX IF NOT EXISTS events_ask ON events (ask_id) WHERE ask_id IS NOT NULL;
-- No index on kind: the kinds filter (kind IN (...) OR event_type IN (...)) could not use
-- one, and every index is written by every commit.
DROP INDEX IF EXISTS events_kind;
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
{_NO_DELETE}
CREATE TABLE IF NOT EXISTS teams (
    team_id TEXT PRIMARY KEY,
    name TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    last_activity TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{{}}'
);
-- A team's row is written with its first record (SqliteStore._write_rows: once per team
-- and store object, not by a trigger on every row); its last activity is read from its
-- newest record (teams()), not written by every commit.
DROP TRIGGER IF EXISTS events_touch_team;
DROP TRIGGER IF EXISTS events_new_team;
CREATE TABLE IF NOT EXISTS aklab_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO aklab_meta (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}');
"""
_FORGET_CHUNK_SQL = (
    "DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE team_id = ? ORDER BY seq DESC LIMIT ?)"
)
_COLUMNS = (
    "team_id, record_id, ask_id, kind, event_type, message_id, sender, sender_role, sender_id, "
    "recipient, recipient_id, created_at, payload"
)
_INSERT = f"INSERT INTO events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
#: A team's row, written with its first record (``_write_rows``); ``save_team`` names it.
_NEW_TEAM = "INSERT OR IGNORE INTO teams (team_id, created_at, last_activity) VALUES (?, ?, ?)"
_SAVE_TEAM = (
    "INSERT INTO teams (team_id, name, created_at, last_activity, metadata) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (team_id) DO UPDATE SET name = excluded.name, metadata = excluded.metadata"
)
_CORRUPT_WORDS = ("malformed", "not a database", "corrupt", "disk image")


def default_store_path(cwd: str | os.PathLike[str] | None = None) -> Path:
    """``<cwd>/.aklab/events.sqlite3``: one store per project folder (the working directory by default)."""
    return Path(os.getcwd() if cwd is None else cwd) / DEFAULT_STORE_DIR / DEFAULT_STORE_FILE


def store_file(path: str | os.PathLike[str]) -> Path:
    """The SQLite file ``path`` names: ``~`` expanded, and a folder (one that exists, or a path
    ending in a separator, as ``AKLAB_STORE=~/stores/lab1/``) means its ``events.sqlite3``,
    never a database file named like the folder."""
    text = os.fspath(path)
    resolved = Path(text).expanduser()
    if resolved.is_dir() or text.endswith(("/", os.sep)):
        return resolved / DEFAULT_STORE_FILE
    return resolved


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class RecoveryReport:
    """What :meth:`SqliteStore.recover` kept."""

    path: Path
    damaged_path: Path | None
    """Where the damaged file was moved; None when the store was sound and left as it is."""
    records: int
    teams: int
    last_seq: int
    stopped_at: str | None
    """Why reading stopped before the end (the damage), or None if everything was read."""

    def __str__(self) -> str:
        if self.damaged_path is None:
            return f"the event store {self.path} is not damaged (every page checked): nothing to recover"
        text = (
            f"recovered {self.records:,} records of {self.teams} team{'s' if self.teams != 1 else ''} "
            f"into {self.path} (up to seq {self.last_seq}); the damaged file is kept as {self.damaged_path}"
        )
        return text + (f"; reading stopped at the damage: {self.stopped_at}" if self.stopped_at else "")


class SqliteStore(QueuedWrites, EventStore):
    """The event store in one SQLite file (created with its folder if missing)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        verify: bool = True,
    ) -> None:
        """Open (or create) the store at ``path`` (default: :func:`default_store_path`).

        ``synchronous``: ``NORMAL`` (default) survives a killed process, ``FULL`` also a power
        loss (see the module docstring). ``verify`` runs ``PRAGMA quick_check`` on open.
        Raises :class:`StoreCorruptError` for a damaged file, :class:`StoreError` if it
        cannot be opened at all.
        """
        if synchronous not in ("NORMAL", "FULL"):
            raise ConfigError(f"synchronous={synchronous!r}: choose 'NORMAL' (the default) or 'FULL'")
        self.path = store_file(default_store_path() if path is None else path).absolute()
        self.location = f"sqlite:{self.path}"
        self.synchronous = synchronous
        self.read_only: str | None = None
        """Why the store cannot be written (None if it can)."""
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._writer: sqlite3.Cursor | None = None  # the appends' one cursor, made on first use
        self._teams_written: set[str] = set()  # teams whose row this object has written (under self._lock)
        self._checkpoints: Checkpointer | None = None  # a writable store's (see _checkpoint)
        self._init_queue()
        self._team_locks = TeamLocks(self.path, self.location)
        self._check_header()
        self._conn = self._open()
        if verify:
            self._verify()
        if self.read_only is None:
            self._create_schema()
        self._check_version()
        if self.read_only is None:
            self._db().execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
            self._checkpoints = Checkpointer(self.path, timeout=BUSY_TIMEOUT)

    def size_bytes(self) -> int | None:
        """The database file and its write-ahead log, in bytes (None if neither can be read)."""
        sizes = []
        for path in (self.path, self.path.with_name(self.path.name + "-wal")):
            try:
                sizes.append(path.stat().st_size)
            except OSError:
                continue
        return sum(sizes) if sizes else None

    # -- opening ------------------------------------------------------------------------

    def _check_header(self) -> None:
        try:
            with open(self.path, "rb") as f:
                header = f.read(100)
                size = os.fstat(f.fileno()).st_size
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(f"event store {self.path}: cannot read it: {exc}") from exc
        if not header:
            return  # an empty file becomes a new store
        if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
            raise self._corrupt("not an SQLite database (bad header)")
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        if header[24:28] == header[92:96] and pages and size < pages * page_size and not self._wal_pending():
            raise self._corrupt(f"truncated: {size:,} bytes where the header counts {pages * page_size:,}")

    def _wal_pending(self) -> bool:
        """Whether a write-ahead log with frames lies beside the file. A process killed in the
        middle of a checkpoint leaves the header (page 1, written first) counting pages the
        file does not have yet; opening replays the log, so that file is not truncated
        (``quick_check`` still reads every page)."""
        try:
            return Path(f"{self.path}-wal").stat().st_size > 0
        except OSError:
            return False

    def _corrupt(self, detail: str) -> StoreCorruptError:
        return StoreCorruptError(
            f"the event store {self.path} is damaged ({detail}); "
            f"aklab.store.SqliteStore.recover({str(self.path)!r}) (in a notebook: %aklab recover) copies every "
            "record readable before the damage to a fresh file and keeps the damaged one aside"
        )

    def _connect(self, uri: str | None = None) -> sqlite3.Connection:
        conn = sqlite3.connect(
            uri or str(self.path),
            timeout=BUSY_TIMEOUT,
            check_same_thread=False,  # appends come from every member's thread, under self._lock
            isolation_level=None,  # explicit BEGIN IMMEDIATE / COMMIT
            uri=uri is not None,
        )
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if not self.path.exists():
                raise StoreError(f"event store {self.path}: cannot create its folder: {exc}") from exc
        try:
            conn = self._connect()
            try:
                mode = _switch_to_wal(conn)
                conn.execute(f"PRAGMA synchronous={self.synchronous}")
                if str(mode).lower() != "wal":
                    raise sqlite3.OperationalError(f"could not switch to WAL (journal_mode is {mode})")
                return conn
            except BaseException:
                conn.close()
                raise
        except sqlite3.DatabaseError as exc:
            if not _is_read_only(exc) or not self.path.exists():
                raise self._wrap(exc, "open") from exc
            reason = str(exc)
        return self._open_read_only(reason)

    def _open_read_only(self, reason: str) -> sqlite3.Connection:
        """The file (or its folder) cannot be written: read it as it is."""
        self.read_only = reason
        last: sqlite3.Error | None = None
        for query in ("mode=ro", "immutable=1"):  # immutable: a WAL file whose -shm cannot be made
            try:
                conn = self._connect(f"{self.path.as_uri()}?{query}")
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return conn
            except sqlite3.Error as exc:
                last = exc
        assert last is not None
        raise self._wrap(last, "open (read-only)") from last

    def _verify(self) -> None:
        try:
            result = self._db().execute("PRAGMA quick_check(1)").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            self.close()
            raise self._corrupt(str(exc)) from exc
        if result != "ok":
            self.close()
            raise self._corrupt(str(result))

    def _create_schema(self) -> None:
        conn = self._db()
        try:
            conn.executescript(f"BEGIN IMMEDIATE;\n{_SCHEMA}\nCOMMIT;")
        except sqlite3.DatabaseError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if _is_read_only(exc):
                self.read_only = str(exc)
                return
            self.close()
            raise self._wrap(exc, "create its tables") from exc

    def _check_version(self) -> None:
        try:
            row = self._db().execute("SELECT value FROM aklab_meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise self._wrap(exc, "read its schema version") from exc
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            self.close()
            raise StoreError(
                f"event store {self.path} has schema version {row[0]}, newer than this aklab's "
                f"({SCHEMA_VERSION}): upgrade aklab to read it"
            )

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"event store {self.path} is closed")
        return self._conn

    def _wrap(self, exc: sqlite3.Error, doing: str) -> StoreError:
        text = str(exc)
        if isinstance(exc, sqlite3.DatabaseError) and any(w in text.lower() for w in _CORRUPT_WORDS):
            return self._corrupt(text)
        return StoreError(f"event store {self.path}: {doing} failed: {text}")

    # -- writing (append, append_later, flush: QueuedWrites) ------------------------------
    def _connected(self) -> bool:
        return self._conn is not None

    def _write_rows(self, rows: list[Row]) -> int:
        """One INSERT statement for them all, in autocommit: SQLite runs a statement as its own
        transaction, so they are committed together. The sqlite3 module lets go of the GIL
        around every statement step; while another member is running Python, taking it back
        can wait the interpreter's switch interval (5 ms), so a flush makes as few calls as it
        can: one (an ``executemany`` or an explicit BEGIN/COMMIT would make one per row and
        two more).

        A team's row in ``teams`` is written here, in the transaction of its first record
        (first for this object: ``save_team`` writes it too). A trigger did it before, on
        every row: it ran a sub-program per row (bench B10: 0.2-0.6 ms of the store's ~3 ms
        per relayed message). A team that another process forgets while this object goes on
        appending to it without a claim gets no new row: its later records are kept and
        read, but ``teams()`` does not list it (a lab claims its team, and ``forget``
        refuses a claimed team)."""
        conn = self._db()
        # One cursor for every append: ``conn.execute`` makes a cursor each time, and the
        # connection keeps a weak reference to each until it sweeps them (every 200), so
        # those outlived two collections and made the collector run full passes more often
        # (bench B10: 721 more objects kept into the oldest generation in a 200-message relay).
        writer = self._writer
        if writer is None:
            writer = self._writer = conn.cursor()
        written = self._teams_written
        new_teams: dict[str, Row] = {}
        for row in rows:
            if row.team_id not in written:
                new_teams.setdefault(row.team_id, row)
        try:
            if len(rows) <= _ROWS_PER_STATEMENT and not new_teams:
                seq = writer.execute(_insert_sql(len(rows)), _all_params(rows)).lastrowid
            else:  # a team's first record here, or more than one statement's worth: one transaction
                conn.execute("BEGIN IMMEDIATE")
                for team_id, first in new_teams.items():
                    when = _iso(first.created_at)
                    conn.execute(_NEW_TEAM, (team_id, when, when))
                for cut in range(0, len(rows), _ROWS_PER_STATEMENT):
                    chunk = rows[cut : cut + _ROWS_PER_STATEMENT]
                    seq = conn.execute(_insert_sql(len(chunk)), _all_params(chunk)).lastrowid
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            raise self._wrap(exc, "append") from exc
        written.update(new_teams)
        if self._checkpoints is not None:
            self._checkpoints.wrote(_pages(rows))
        assert seq is not None
        return seq

    def forget(self, team_id: str) -> int:
        """See ``EventStore.forget``: ``FORGET_CHUNK`` records per transaction, each lifting the
        no-delete trigger for its own deletes only (other connections never see it lifted).
        The file keeps its size; SQLite reuses the freed pages. What is deleted leaves no
        bytes behind: its deletes run with ``secure_delete`` (the freed space is overwritten
        with zeros; some SQLite builds have it off by default), and the log, which held the
        pages as they were written, is copied back and truncated (``_truncate_log``)."""
        check_team_id(team_id)
        if self.read_only is not None:
            raise StoreError(f"event store {self.path} is read-only ({self.read_only}): nothing can be forgotten")
        self.claim(team_id, action="forget")  # TeamInUseError while a lab runs it
        try:
            with self._lock:
                self._write(None)  # this object's queue first (records of other teams)
                conn, total = self._db(), 0
                secure = conn.execute("PRAGMA secure_delete").fetchone()[0]
                conn.execute("PRAGMA secure_delete=ON")
                try:
                    while True:
                        try:
                            conn.execute("BEGIN IMMEDIATE")
                            conn.execute("DROP TRIGGER events_no_delete")
                            gone = conn.execute(_FORGET_CHUNK_SQL, (team_id, FORGET_CHUNK)).rowcount
                            if gone < FORGET_CHUNK:
                                conn.execute("DELETE FROM teams WHERE team_id = ?", (team_id,))
                                self._teams_written.discard(team_id)
                            conn.execute(_NO_DELETE)
                            conn.execute("COMMIT")
                        except sqlite3.Error as exc:
                            if conn.in_transaction:
                                conn.execute("ROLLBACK")
                            raise self._wrap(exc, f"forget team {team_id}") from exc
                        total += gone
                        if gone < FORGET_CHUNK:
                            break
                finally:
                    conn.execute(f"PRAGMA secure_delete={int(secure)}")
                self._truncate_log(conn)
                return total
        finally:
            self.release(team_id)

    def _truncate_log(self, conn: sqlite3.Connection) -> None:
        """Copy the log back into the file and truncate it, so that the pages it held as they
        were written before a ``forget`` are gone too. Another connection reading an older
        snapshot keeps SQLite from it (it says busy): then the log is reused from its start
        by a later commit, once every reader has moved on, and overwritten as it goes."""
        try:
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        except sqlite3.Error as exc:
            busy, why = 1, str(exc)
        else:
            why = "another connection is reading"
        if busy:
            log.info("event store %s: the log could not be truncated after forget (%s)", self.path, why)

    def save_team(self, team_id: str, *, name: str, metadata: dict[str, Any] | None = None) -> None:
        from aklab.store._codec import scrub

        check_team_id(team_id)
        if self.read_only is not None:
            raise StoreError(f"event store {self.path} is read-only ({self.read_only}): the team is not saved")
        now = _iso(datetime.now(UTC))
        meta = json.dumps(scrub(metadata or {}), ensure_ascii=False, default=str)
        with self._lock:
            conn = self._db()
            try:
                conn.execute(_SAVE_TEAM, (team_id, name, now, now, meta))
            except sqlite3.Error as exc:
                raise self._wrap(exc, "save the team") from exc
            self._teams_written.add(team_id)

    # -- reading --------------------------------------------------------------------------
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
        where, args = _where(team_id, since, until, check_kinds(kinds), ask_id, before, ids=(record_id, message_id))
        sql = f"SELECT seq, {_COLUMNS} FROM events{where}{_order(limit, newest)}"
        with self._lock:
            self._flush_for_reading()
            try:
                rows = self._db().execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise self._wrap(exc, "read") from exc
        try:
            return [_record(r) for r in (reversed(rows) if newest else rows)]
        except (TypeError, ValueError) as exc:  # damage that reads as data
            raise self._corrupt(f"a record cannot be read back: {exc}") from exc

    def teams(self) -> list[TeamInfo]:
        sql = (
            "SELECT team_id, name, created_at, max(last_activity, coalesce((SELECT created_at FROM events e "
            "WHERE e.team_id = t.team_id ORDER BY seq DESC LIMIT 1), '')) AS last, metadata, "
            # a team's first question comes among its first records: the index scan stops there
            "EXISTS (SELECT 1 FROM events e WHERE e.team_id = t.team_id AND e.ask_id IS NOT NULL) "
            "FROM teams t ORDER BY last DESC"
        )
        with self._lock:
            self._flush_for_reading()
            try:
                rows = self._db().execute(sql).fetchall()
            except sqlite3.Error as exc:
                raise self._wrap(exc, "read the teams") from exc
        return [
            TeamInfo(
                r[0], r[1], datetime.fromisoformat(r[2]), datetime.fromisoformat(r[3]), json.loads(r[4]), bool(r[5])
            )
            for r in rows
        ]

    # -- who runs a team (lock files beside the store: aklab.store._claims) ---------------
    def claim(self, team_id: str, *, action: str = "resume") -> None:
        if self.read_only is None:  # a read-only store keeps nothing of a team to share
            self._team_locks.claim(team_id, action=action)

    def release(self, team_id: str) -> None:
        self._team_locks.release(team_id)

    def in_use(self, team_id: str) -> bool:
        return self._team_locks.in_use(team_id)

    def is_running(self, team_id: str) -> bool | None:
        return self._team_locks.is_running(team_id)

    def close(self) -> None:
        self._team_locks.release_all()
        if self._checkpoints is not None:
            self._checkpoints.close()
        with self._lock:
            self._flush_for_reading()
            conn, self._conn = self._conn, None
            self._writer = None
        if conn is not None:
            conn.close()  # the last connection checkpoints the WAL into the file

    # -- recovery -------------------------------------------------------------------------
    @staticmethod
    def running_teams(path: str | os.PathLike[str]) -> list[str]:
        """The ids of the teams of the store at ``path`` that a lab runs now, in this process
        or another (their claims), read without opening the database: a damaged file too."""
        return TeamLocks(Path(path), f"sqlite:{path}").running()

    @classmethod
    def recover(cls, path: str | os.PathLike[str], *, force: bool = False) -> RecoveryReport:
        """Move the damaged file at ``path`` aside (``<name>.damaged-<time>``, with its -wal and
        -shm) and copy every record readable before the damage, with its seq, and the team
        rows that can be read, into a fresh store at ``path``.

        Every page is checked first: a sound store is left as it is (the report's
        ``damaged_path`` is None) unless ``force``; a store written by a newer aklab is
        refused. Refused too while a lab runs one of its teams (that lab would go on writing
        to the file moved aside)."""
        from aklab.store._recover import recover

        return recover(cls, store_file(path), force=force)


@functools.lru_cache(maxsize=64)
def _insert_sql(rows: int) -> str:
    """An INSERT of ``rows`` rows (one statement: SQLite caches its plan by its text)."""
    return _INSERT + ", (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" * (rows - 1)


def _params(row: Row) -> tuple[Any, ...]:
    return (*row[:11], _iso(row.created_at), row.payload)


def _pages(rows: list[Row]) -> int:
    """About how many log pages a commit of ``rows`` writes (measured: 6 for one 6 KB row, 8-9
    for a relayed handling's end): its rows' pages and overflow pages, a leaf of each index, the
    header page."""
    return 4 + sum(len(row.payload) for row in rows) // 2048


def _all_params(rows: list[Row]) -> list[Any]:
    return [value for row in rows for value in _params(row)]


def _is_read_only(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "readonly" in text or "read-only" in text or "unable to open" in text


def _where(
    team_id: str | None,
    since: int | datetime | date | str | None,
    until: datetime | date | str | None,
    kinds: list[str] | None,
    ask_id: str | None,
    before: int | None = None,
    mark: str = "?",
    ids: tuple[str | None, str | None] = (None, None),
) -> tuple[str, list[Any]]:
    """A WHERE clause for the records filter (``mark`` is the driver's placeholder)."""
    clauses: list[str] = []
    args: list[Any] = []
    if team_id is not None:
        clauses.append(f"team_id = {mark}")
        args.append(team_id)
    if since is not None:
        if isinstance(since, bool):
            raise ConfigError(f"since={since!r}: give a seq (int), a datetime or an ISO date")
        if isinstance(since, int):
            clauses.append(f"seq > {mark}")
            args.append(since)
        else:
            clauses.append(f"created_at >= {mark}")
            args.append(_time_arg(since, mark))
    if until is not None:
        clauses.append(f"created_at < {mark}")
        args.append(_time_arg(until, mark))
    if kinds is not None:
        if not kinds:
            return " WHERE 1 = 0", []
        marks = ", ".join([mark] * len(kinds))
        clauses.append(f"(kind IN ({marks}) OR event_type IN ({marks}))")
        args.extend(kinds + kinds)
    if ask_id is not None:
        clauses.append(f"ask_id = {mark}")
        args.append(ask_id)
    if before is not None:
        clauses.append(f"seq < {mark}")
        args.append(int(before))
    for column, value in zip(("record_id", "message_id"), ids, strict=True):
        if value is not None:
            clauses.append(f"{column} = {mark}")
            args.append(value)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


def _order(limit: int | None, newest: bool) -> str:
    if limit is None:
        return " ORDER BY seq DESC" if newest else " ORDER BY seq"
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ConfigError(f"limit={limit!r}: give a number of records >= 0, or None for all")
    return f" ORDER BY seq {'DESC' if newest else 'ASC'} LIMIT {limit}"


def _time_arg(when: datetime | date | str, mark: str) -> Any:
    utc = to_utc(when)
    return _iso(utc) if mark == "?" else utc


def _record(r: tuple[Any, ...]) -> StoredRecord:
    created = r[12]
    if isinstance(created, str):
        created = datetime.fromisoformat(created)
    return StoredRecord(
        r[0],
        r[1],
        r[2],
        r[3],
        r[4],
        r[5],
        r[6],
        r[7],
        r[8],
        r[9],
        r[10],
        r[11],
        created.astimezone(UTC),
        from_json(r[13]) if isinstance(r[13], str) else r[13],  # pydantic-core's parser: 1.6x json.loads' speed
    )


def _switch_to_wal(conn: sqlite3.Connection, *, attempts: int = 50) -> str:
    """``PRAGMA journal_mode=WAL``, retried while another process opening the same new file
    holds it (SQLite does not apply the busy timeout to this switch): bounded, ~5 s at most."""
    for attempt in range(attempts):
        try:
            return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.1)  # a back-off before trying again, not a wait for an event
    raise AssertionError("unreachable")
