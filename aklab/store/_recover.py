"""Recovery of a damaged SQLite store: keep every record readable before the damage."""

from __future__ import annotations

import json
import logging
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aklab.errors import ConfigError

if TYPE_CHECKING:
    from aklab.store._sqlite import RecoveryReport, SqliteStore

__all__ = ["recover"]

log = logging.getLogger("aklab.store")

_CHUNK = 500
_EVENT_COLUMNS = (
    "seq, team_id, record_id, ask_id, kind, event_type, message_id, sender, sender_role, sender_id, "
    "recipient, recipient_id, created_at, payload"
)


def recover(store_class: type[SqliteStore], path: Path, *, force: bool = False) -> RecoveryReport:
    from aklab.store._base import StoreCorruptError
    from aklab.store._sqlite import RecoveryReport

    path = path.expanduser().absolute()
    if not path.exists():
        raise ConfigError(f"recover: no store file at {path}")
    running = store_class.running_teams(path)
    if running:  # checked first: a store a lab writes to may answer "locked" for a while
        raise ConfigError(
            f"recover: {'team' if len(running) == 1 else 'teams'} {', '.join(t[:8] for t in running)} of {path} "
            f"{'is' if len(running) == 1 else 'are'} running in a lab "
            "(this kernel or another), so the store is left as it is; stop them first (lab.close(), "
            "or restart that kernel), then recover"
        )
    if not force:
        try:
            store_class(path, verify=True).close()  # every page checked (about 1 s per 60 MB)
        except StoreCorruptError:
            pass
        else:
            return RecoveryReport(path=path, damaged_path=None, records=0, teams=0, last_seq=0, stopped_at=None)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    damaged = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 2
    while damaged.exists():
        damaged = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
        n += 1
    path.rename(damaged)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(damaged.with_name(damaged.name + suffix))

    rows, teams, stopped = _read(damaged)
    fresh = store_class(path, verify=False)
    try:
        conn = fresh._db()
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(f"INSERT INTO events ({_EVENT_COLUMNS}) VALUES ({', '.join(['?'] * 14)})", rows)
        for team in teams:
            conn.execute(
                "INSERT OR REPLACE INTO teams (team_id, name, created_at, last_activity, metadata) "
                "VALUES (?, ?, ?, ?, ?)",
                team,
            )
        known = {t[0] for t in teams}
        spans: dict[str, list[str]] = {}
        for row in rows:
            span = spans.setdefault(row[1], [row[12], row[12]])
            span[0], span[1] = min(span[0], row[12]), max(span[1], row[12])
        for team_id, (first, last) in spans.items():
            if team_id not in known:  # its team row was in the damaged part
                conn.execute(
                    "INSERT OR REPLACE INTO teams (team_id, name, created_at, last_activity) VALUES (?, '', ?, ?)",
                    (team_id, first, last),
                )
            else:
                conn.execute(
                    "UPDATE teams SET last_activity = ? WHERE team_id = ? AND last_activity > ?", (last, team_id, last)
                )
        conn.execute("COMMIT")
    finally:
        fresh.close()
    report = RecoveryReport(
        path=path,
        damaged_path=damaged,
        records=len(rows),
        teams=len(known | set(spans)),
        last_seq=int(rows[-1][0]) if rows else 0,
        stopped_at=stopped,
    )
    log.warning("%s", report)
    return report


def _read(damaged: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], str | None]:
    """The events readable in seq order up to the first damage, the readable team rows, and the error."""
    rows: list[tuple[Any, ...]] = []
    teams: list[tuple[Any, ...]] = []
    stopped: str | None = None
    try:
        conn = sqlite3.connect(f"{damaged.as_uri()}?mode=ro", uri=True)
        # A truncated file (fewer pages than its header counts) is refused outright
        # unless the schema is "writable": then the pages that are there can be read.
        conn.execute("PRAGMA writable_schema=ON")
    except sqlite3.Error as exc:
        return rows, teams, str(exc)
    try:
        last = 0
        while True:
            try:
                chunk = conn.execute(
                    f"SELECT {_EVENT_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?", (last, _CHUNK)
                ).fetchall()
            except sqlite3.DatabaseError as exc:
                # the chunk is all or nothing: read the rest of it one row at a time
                stopped = str(exc)
                more = _one_by_one(conn, last)
                good = _valid_prefix(more)
                rows.extend(good)
                if len(good) < len(more):
                    stopped = f"record seq {more[len(good)][0]} is unreadable (its payload is not the JSON written)"
                break
            if not chunk:
                break
            good = _valid_prefix(chunk)
            rows.extend(good)
            if len(good) < len(chunk):
                stopped = f"record seq {chunk[len(good)][0]} is unreadable (its payload is not the JSON written)"
                break
            last = chunk[-1][0]
        try:
            teams = conn.execute("SELECT team_id, name, created_at, last_activity, metadata FROM teams").fetchall()
        except sqlite3.DatabaseError as exc:
            stopped = stopped or str(exc)
    finally:
        conn.close()
    return rows, teams, stopped


def _valid_prefix(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The rows up to the first whose columns are not what a store writes (damage read as data)."""
    for i, row in enumerate(rows):
        try:
            ok = isinstance(json.loads(row[13]), dict) and isinstance(row[1], str) and isinstance(row[4], str)
            datetime.fromisoformat(row[12])
        except (TypeError, ValueError):
            ok = False
        if not ok:
            return rows[:i]
    return rows


def _one_by_one(conn: sqlite3.Connection, last: int) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for _ in range(_CHUNK):
        try:
            row = conn.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT 1", (last,)
            ).fetchone()
        except sqlite3.DatabaseError:
            break
        if row is None:
            break
        out.append(row)
        last = row[0]
    return out
