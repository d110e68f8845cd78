"""PostgresStore: the same store on PostgreSQL (psycopg 3), for a shared deployment.

The tables are those of the SQLite store, with PostgreSQL types: ``seq`` is an identity
column, ``created_at`` a ``timestamptz`` and ``payload`` ``json`` (kept as written; cast to
``jsonb`` to query it). A trigger refuses UPDATE and DELETE on ``events``. Each append is
one transaction, with the records ``append_later`` queued before it, committed before it
returns (the server's ``synchronous_commit``, on by default, makes that durable).
``schema`` puts the tables in their own schema (created if missing) instead of the
connection's search path.

One connection, used under a lock; a lost connection makes ``append`` raise
``StoreError`` (the ``StoreSubscriber`` then warns once and the team goes on in memory).
A lab's claim on its team is a session-level advisory lock on that connection, which the
server ends with the connection (a killed kernel's included).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from aklab.errors import ConfigError
from aklab.secrets import redact
from aklab.store._base import (
    SCHEMA_VERSION,
    EventStore,
    StoredRecord,
    StoreError,
    TeamInfo,
    check_kinds,
    check_team_id,
)
from aklab.store._claims import in_use_error, still_probed_error, this_process
from aklab.store._codec import Row, scrub
from aklab.store._queue import QueuedWrites
from aklab.store._sqlite import _order, _record, _where

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresStore", "postgres_location"]

INSTALL_HINT = "PostgresStore needs psycopg 3: pip install 'aklab[postgres]' (or pip install 'psycopg[binary]')"

#: A team's claim: a session-level advisory lock keyed by the schema and the team id.
_TEAM_KEY = "hashtextextended(current_schema() || ':aklab-team:' || %s, 0)"
_TRY_TEAM_LOCK = f"SELECT pg_try_advisory_lock({_TEAM_KEY})"
_TEAM_UNLOCK = f"SELECT pg_advisory_unlock({_TEAM_KEY})"
#: ``in_use`` probes with a shared lock: a claim that meets one (and no exclusive holder) tries again.
_TRY_TEAM_PROBE = f"SELECT pg_try_advisory_lock_shared({_TEAM_KEY})"
_TEAM_PROBE_END = f"SELECT pg_advisory_unlock_shared({_TEAM_KEY})"
#: How many times a claim tries again while only probes stand in its way.
PROBE_RETRIES = 100
#: Who holds a team's claim: the application name of the session holding its lock.
_TEAM_HOLDER = f"""
SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.mode = 'ExclusiveLock'
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((l.classid::bigint << 32) | l.objid::bigint) = {_TEAM_KEY}
LIMIT 1
"""
#: The application name of aklab's connections, which names a claim's holder: pid and host.
_APPLICATION = re.compile(r"^aklab (\d+)@(.+)$")

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS events (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
    created_at TIMESTAMPTZ NOT NULL,
    payload JSON NOT NULL
);
CREATE INDEX IF NOT EXISTS events_team ON events (team_id, seq);
CREATE INDEX IF NOT EXISTS events_ask ON events (ask_id) WHERE ask_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS events_kind ON events (kind, event_type);
-- A delete passes only inside forget's transaction, for the team it names (SET LOCAL).
CREATE OR REPLACE FUNCTION aklab_events_append_only() RETURNS trigger LANGUAGE plpgsql AS
    $$ BEGIN
        IF TG_OP = 'DELETE' AND current_setting('aklab.forget_team', true) = OLD.team_id THEN RETURN OLD; END IF;
        RAISE EXCEPTION 'events are append-only';
    END $$;
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'events_append_only' AND tgrelid = 'events'::regclass)
    THEN CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
        FOR EACH ROW EXECUTE FUNCTION aklab_events_append_only();
    END IF;
END $$;
CREATE TABLE IF NOT EXISTS teams (
    team_id TEXT PRIMARY KEY,
    name TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMPTZ NOT NULL,
    last_activity TIMESTAMPTZ NOT NULL,
    metadata JSON NOT NULL DEFAULT '{{}}'
);
CREATE TABLE IF NOT EXISTS aklab_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO aklab_meta (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}') ON CONFLICT (key) DO NOTHING;
"""
_COLUMNS = (
    "team_id, record_id, ask_id, kind, event_type, message_id, sender, sender_role, sender_id, "
    "recipient, recipient_id, created_at, payload"
)
_INSERT = f"INSERT INTO events ({_COLUMNS}) VALUES ({', '.join(['%s'] * 12)}, %s::json) RETURNING seq"
_INSERT_MANY = _INSERT.removesuffix(" RETURNING seq")
_TOUCH_TEAM = (
    "INSERT INTO teams (team_id, created_at, last_activity) VALUES (%s, %s, %s) "
    "ON CONFLICT (team_id) DO UPDATE SET last_activity = GREATEST(teams.last_activity, excluded.last_activity)"
)
_SAVE_TEAM = (
    "INSERT INTO teams (team_id, name, created_at, last_activity, metadata) VALUES (%s, %s, %s, %s, %s::json) "
    "ON CONFLICT (team_id) DO UPDATE SET name = excluded.name, metadata = excluded.metadata"
)
#: Serializes schema creation between processes (an arbitrary 64-bit key).
_SCHEMA_LOCK = 0x616B6C6162


def _holder(application_name: str | None) -> dict[str, Any]:
    """A claim's holder from its session's application name (empty if it is not aklab's)."""
    found = _APPLICATION.match(application_name or "")
    return {"pid": int(found[1]), "host": found[2]} if found else {}


def postgres_location(dsn: str) -> str:
    """``postgresql://user@host:port/db``: the DSN without password or options, for display."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
    except Exception:
        return "postgresql://(unparsable dsn)"
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = parts.get("host") or "localhost"
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{host}{port}/{parts.get('dbname') or ''}"


class PostgresStore(QueuedWrites, EventStore):
    """The event store in a PostgreSQL database (``dsn``: a libpq URL or key=value string)."""

    def __init__(self, dsn: str, *, schema: str | None = None, connect_timeout: float = 10.0) -> None:
        try:
            import psycopg
        except ImportError as exc:
            raise ConfigError(INSTALL_HINT) from exc
        if not isinstance(dsn, str) or not dsn:
            raise ConfigError("PostgresStore(dsn): give a DSN such as 'postgresql://user@host:5432/dbname'")
        self.location = postgres_location(dsn) + (f" (schema {schema})" if schema else "")
        self.read_only: str | None = None
        self._lock = threading.Lock()
        self._claims: set[str] = set()
        self._init_queue()
        from psycopg.conninfo import conninfo_to_dict

        named: dict[str, Any] = {}
        try:
            if "application_name" not in conninfo_to_dict(dsn):
                me = this_process()
                named["application_name"] = f"aklab {me['pid']}@{me['host']}"[:63]  # names a claim's holder
        except psycopg.Error:  # a malformed DSN: connect says what is wrong with it
            pass
        try:
            self._conn: psycopg.Connection[Any] | None = psycopg.connect(
                dsn, autocommit=True, connect_timeout=max(1, round(connect_timeout)), **named
            )
        except psycopg.Error as exc:
            # libpq's hint comes on a line of its own ("\n\tIs the server running ..."): one line,
            # for lab.status() and the magics' one-line errors
            said = " ".join(redact(str(exc)).split())
            raise StoreError(f"event store {self.location}: cannot connect: {said}") from exc
        from psycopg.types.json import set_json_loads
        from pydantic_core import from_json

        set_json_loads(from_json, self._conn)  # payloads parsed as the SQLite store parses them
        try:
            self._setup(schema)
        except BaseException:
            self.close()
            raise

    def _setup(self, schema: str | None) -> None:
        import psycopg
        from psycopg import sql

        conn = self._db()
        try:
            conn.execute("SET TIME ZONE 'UTC'")
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                if schema:
                    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
                    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
                conn.execute(_SCHEMA.encode())
                row = conn.execute("SELECT value FROM aklab_meta WHERE key = 'schema_version'").fetchone()
        except psycopg.Error as exc:
            raise self._wrap(exc, "create its tables") from exc
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            raise StoreError(
                f"event store {self.location} has schema version {row[0]}, newer than this aklab's "
                f"({SCHEMA_VERSION}): upgrade aklab to read it"
            )

    def _db(self) -> psycopg.Connection[Any]:
        if self._conn is None:
            raise StoreError(f"event store {self.location} is closed")
        return self._conn

    def _wrap(self, exc: Exception, doing: str) -> StoreError:
        return StoreError(f"event store {self.location}: {doing} failed: {redact(str(exc)).strip()}")

    # -- writing (append, append_later, flush: QueuedWrites) ------------------------------
    def _connected(self) -> bool:
        return self._conn is not None

    def _write_rows(self, rows: list[Row]) -> int:
        """One transaction: the rows, then each team's last activity."""
        import psycopg

        conn = self._db()
        try:
            with conn.transaction():
                with conn.cursor() as cur:
                    if len(rows) > 1:
                        cur.executemany(_INSERT_MANY, rows[:-1])
                    fetched = cur.execute(_INSERT, rows[-1]).fetchone()
                    latest: dict[str, datetime] = {}
                    for r in rows:
                        latest[r.team_id] = max(r.created_at, latest.get(r.team_id, r.created_at))
                    for team, when in latest.items():
                        cur.execute(_TOUCH_TEAM, (team, when, when))
        except psycopg.Error as exc:
            raise self._wrap(exc, "append") from exc
        assert fetched is not None
        return int(fetched[0])

    def save_team(self, team_id: str, *, name: str, metadata: dict[str, Any] | None = None) -> None:
        import json

        import psycopg

        check_team_id(team_id)
        now = datetime.now(UTC)
        meta = json.dumps(scrub(metadata or {}), ensure_ascii=False, default=str)
        with self._lock:
            try:
                self._db().execute(_SAVE_TEAM, (team_id, name, now, now, meta))
            except psycopg.Error as exc:
                raise self._wrap(exc, "save the team") from exc

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
        import psycopg

        ids = (record_id, message_id)
        where, args = _where(team_id, since, until, check_kinds(kinds), ask_id, before, mark="%s", ids=ids)
        query = f"SELECT seq, {_COLUMNS} FROM events{where}{_order(limit, newest)}"
        with self._lock:
            self._flush_for_reading()
            try:
                rows = self._db().execute(query.encode(), args).fetchall()
            except psycopg.Error as exc:
                raise self._wrap(exc, "read") from exc
        return [_record(r) for r in (reversed(rows) if newest else rows)]

    def teams(self) -> list[TeamInfo]:
        import psycopg

        query = (
            "SELECT team_id, name, created_at, last_activity, metadata, "
            "EXISTS (SELECT 1 FROM events e WHERE e.team_id = t.team_id AND e.ask_id IS NOT NULL) "
            "FROM teams t ORDER BY last_activity DESC"
        )
        with self._lock:
            self._flush_for_reading()
            try:
                rows = self._db().execute(query).fetchall()
            except psycopg.Error as exc:
                raise self._wrap(exc, "read the teams") from exc
        return [TeamInfo(r[0], r[1], r[2].astimezone(UTC), r[3].astimezone(UTC), r[4], r[5]) for r in rows]

    def forget(self, team_id: str) -> int:
        """See ``EventStore.forget``: one transaction, in which the append-only trigger lets
        through the deletes of this team only."""
        import psycopg

        check_team_id(team_id)
        self.claim(team_id, action="forget")  # TeamInUseError while a lab runs it
        try:
            with self._lock:
                self._write(None)  # this object's queue first (records of other teams)
                conn = self._db()
                try:
                    with conn.transaction():
                        conn.execute("SELECT set_config('aklab.forget_team', %s, true)", (team_id,))
                        gone = conn.execute("DELETE FROM events WHERE team_id = %s", (team_id,)).rowcount
                        conn.execute("DELETE FROM teams WHERE team_id = %s", (team_id,))
                except psycopg.Error as exc:
                    raise self._wrap(exc, f"forget team {team_id}") from exc
                return gone
        finally:
            self.release(team_id)

    # -- who runs a team: a session advisory lock per team, ended with the connection -------
    def claim(self, team_id: str, *, action: str = "resume") -> None:
        import psycopg

        check_team_id(team_id)
        with self._lock:
            if team_id in self._claims:
                raise in_use_error(team_id, this_process(), self.location, action=action)
            try:
                conn = self._db()
                for _ in range(PROBE_RETRIES):
                    got = conn.execute(_TRY_TEAM_LOCK, (team_id,)).fetchone()
                    if got and got[0]:
                        break
                    probed = conn.execute(_TRY_TEAM_PROBE, (team_id,)).fetchone()
                    if not (probed and probed[0]):  # a lab holds it
                        holder = conn.execute(_TEAM_HOLDER, (team_id,)).fetchone()
                        raise in_use_error(
                            team_id, _holder(holder[0] if holder else None), self.location, action=action
                        )
                    conn.execute(_TEAM_PROBE_END, (team_id,))  # only probes: another try
                    _between_tries()
                else:
                    raise still_probed_error(team_id)
            except psycopg.Error as exc:
                raise self._wrap(exc, "claim the team") from exc
            self._claims.add(team_id)

    def release(self, team_id: str) -> None:
        import psycopg

        with self._lock:
            if team_id not in self._claims:
                return
            self._claims.discard(team_id)
            try:
                self._db().execute(_TEAM_UNLOCK, (team_id,))
            except (psycopg.Error, StoreError):  # a lost connection has dropped the lock already
                pass

    def is_running(self, team_id: str) -> bool | None:
        with self._lock:
            if team_id in self._claims:
                return True
        return self.in_use(team_id)

    def in_use(self, team_id: str) -> bool:
        import psycopg

        with self._lock:
            if team_id in self._claims:
                return False
            try:
                conn = self._db()
                got = conn.execute(_TRY_TEAM_PROBE, (team_id,)).fetchone()
                if got and got[0]:
                    conn.execute(_TEAM_PROBE_END, (team_id,))
                    return False
            except (psycopg.Error, StoreError):  # cannot tell (a lost connection, a server before 11)
                return False
            return True

    def close(self) -> None:
        import psycopg

        with self._lock:
            self._flush_for_reading()
            conn, self._conn = self._conn, None
            claimed, self._claims = self._claims, set()
        if conn is not None:
            if claimed:
                # Let go before closing: the server ends a closed connection's locks when its
                # backend notices, a moment later, and a claim made meanwhile would be refused.
                try:
                    conn.execute("SELECT pg_advisory_unlock_all()")
                except psycopg.Error:  # a lost connection has dropped its locks already
                    pass
            conn.close()


def _between_tries() -> None:
    """Between two tries of a claim that met only probes (a hook for tests)."""
