"""TeamLocks: which teams of a SQLite store are running, and where (a lock file per team).

A lab claims its team with an exclusive ``flock`` on ``<store file>-teams/<team id>``, held
while the lab runs and dropped by the operating system when the process ends, however it
ends (a SIGKILL too), so a restarted kernel can resume the team at once. The holder writes
its pid, host and start time into the file for a refusal to name. A released file is left
in place (removing it could race with a process opening it); each is under 100 bytes.

Where ``fcntl`` is missing (Windows), or the folder cannot be written or locked, nothing
is claimed: the claim guards against a mistake, a team does not need it to run.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aklab.store._base import TeamInUseError, check_team_id

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["TeamLocks", "in_use_error", "this_process"]

log = logging.getLogger("aklab.store")


class TeamLocks:
    """The claims one store object holds, in the folder beside ``store_path``."""

    def __init__(self, store_path: Path, location: str) -> None:
        self.folder = Path(f"{store_path}-teams")
        self.location = location
        self._held: dict[str, int] = {}  # team id -> the locked file's descriptor
        self._lock = threading.Lock()

    def claim(self, team_id: str) -> None:
        check_team_id(team_id)
        if fcntl is None:
            return
        with self._lock:
            if team_id in self._held:
                raise in_use_error(team_id, {"pid": os.getpid()}, self.location)
            try:
                self.folder.mkdir(exist_ok=True)
                fd = os.open(self.folder / team_id, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                log.debug("team %s is not claimed: cannot open its lock file in %s: %s", team_id, self.folder, exc)
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise in_use_error(team_id, holder, self.location) from None
            except OSError as exc:  # a file system without flock
                os.close(fd)
                log.debug("team %s is not claimed: cannot lock %s: %s", team_id, self.folder / team_id, exc)
                return
            note = {**this_process(), "since": datetime.now(UTC).isoformat()[:19]}
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(note).encode(), 0)
            except OSError:  # the lock holds without the note
                pass
            self._held[team_id] = fd

    def release(self, team_id: str) -> None:
        with self._lock:
            fd = self._held.pop(team_id, None)
        if fd is not None:
            os.close(fd)  # drops the lock

    def release_all(self) -> None:
        with self._lock:
            held, self._held = self._held, {}
        for fd in held.values():
            os.close(fd)

    def in_use(self, team_id: str) -> bool:
        if fcntl is None:
            return False
        with self._lock:
            if team_id in self._held:
                return False
        try:
            fd = os.open(self.folder / check_team_id(team_id), os.O_RDONLY)
        except OSError:  # never claimed here
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        finally:
            os.close(fd)  # drops the probe's shared lock, if it got one
        return False


def _holder(fd: int) -> dict[str, Any]:
    try:
        note = json.loads(os.pread(fd, 512, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return note if isinstance(note, dict) else {}


def this_process() -> dict[str, Any]:
    """This process as a claim's holder: its pid and host."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def in_use_error(team_id: str, holder: dict[str, Any], location: str) -> TeamInUseError:
    """The refusal to claim ``team_id``, naming its holder (``pid``, ``host``, ``since``) as
    far as it is known."""
    short = team_id[:8]
    here = holder.get("pid") == os.getpid() and holder.get("host", socket.gethostname()) == socket.gethostname()
    if here:
        return TeamInUseError(
            f"team {short} is already running in this process (a Lab on {location}): keep using that lab, "
            "or close it (lab.close()) before resuming the team",
            here=True,
        )
    who = ", ".join(
        part
        for part in (
            f"pid {holder['pid']}" if holder.get("pid") else "",
            f"on {holder['host']}" if holder.get("host") else "",
            f"since {holder['since']} UTC" if holder.get("since") else "",
        )
        if part
    )
    where = f"in another process ({who})" if who else "in another lab"
    return TeamInUseError(
        f"team {short} is running {where} on {location}: two labs on one team would both handle "
        "what a resume delivers again; stop it there (lab.close(), or restart or shut down that "
        "kernel), then resume it here"
    )
