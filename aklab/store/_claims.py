"""TeamLocks: which teams of a SQLite store are running, and where (a lock file per team).

A lab claims its team with an exclusive ``flock`` on ``<store file>-teams/<team id>``, held
while the lab runs and dropped by the operating system when the process ends, however it
ends (a SIGKILL too), so a restarted kernel can resume the team at once. A process that
exits normally with its lab still open lets go at exit, once its teams have stopped. The holder writes
its pid, host and start time into the file for a refusal to name, and removes the file when
it lets go (still holding the lock; a claimer checks that the file it locked is still the
one at the path), so the folder lists the teams running now, and those of killed kernels.

``in_use`` probes with a shared lock held for microseconds; a claim that meets only shared
locks tries again (no lab holds one), so a listing in another kernel never refuses a claim.

Where ``fcntl`` is missing (Windows), or the folder cannot be written or locked, nothing
is claimed: the claim guards against a mistake, a team does not need it to run.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import threading
import weakref
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aklab.store._base import TeamInUseError, check_team_id

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["TeamLocks", "in_use_error", "still_probed_error", "this_process"]

log = logging.getLogger("aklab.store")

#: How many times a claim opens the lock file again when a releasing holder removed it meanwhile.
_RACES = 5

_holding: weakref.WeakSet[TeamLocks] = weakref.WeakSet()


@atexit.register
def _let_go_at_exit() -> None:
    """A kernel shut down with its lab still open lets go of its claims (and removes their
    files) at exit, after its teams have stopped and their last records are stored: a
    resume elsewhere must not start on a team whose stop records are still being written."""
    from aklab.core import shutdown_all

    shutdown_all()
    for locks in list(_holding):
        locks.release_all()


class TeamLocks:
    """The claims one store object holds, in the folder beside ``store_path``."""

    def __init__(self, store_path: Path, location: str) -> None:
        self.folder = Path(f"{store_path}-teams")
        self.location = location
        self._held: dict[str, int] = {}  # team id -> the locked file's descriptor
        self._lock = threading.Lock()

    def claim(self, team_id: str, *, action: str = "resume") -> None:
        check_team_id(team_id)
        if fcntl is None:
            return
        with self._lock:
            if team_id in self._held:
                raise in_use_error(team_id, {"pid": os.getpid()}, self.location, action=action)
            try:
                self.folder.mkdir(exist_ok=True)
                fd = self._lock_file(team_id, action)
            except OSError as exc:  # a folder that cannot be written, a file system without flock
                log.debug("team %s is not claimed: %s", team_id, exc)
                return
            note = {**this_process(), "since": datetime.now(UTC).isoformat()[:19]}
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(note).encode(), 0)
            except OSError:  # the lock holds without the note
                pass
            self._held[team_id] = fd
            _holding.add(self)

    def _lock_file(self, team_id: str, action: str) -> int:
        """The team's lock file, open and locked. A holder removes its file when it lets go, so
        the file locked must still be the one at the path: else it is opened again."""
        path = self.folder / team_id
        for _ in range(_RACES):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                _lock_exclusive(fd)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise in_use_error(team_id, holder, self.location, action=action) from None
            except _StillShared:
                os.close(fd)
                raise still_probed_error(team_id) from None
            except OSError:
                os.close(fd)
                raise
            try:
                if os.fstat(fd).st_ino == os.stat(path).st_ino:
                    return fd
            except FileNotFoundError:
                pass
            os.close(fd)  # removed by its holder after we opened it: try the new one
        raise OSError(f"{path} kept being replaced while it was being locked")

    def release(self, team_id: str) -> None:
        with self._lock:
            fd = self._held.pop(team_id, None)
        if fd is not None:
            self._let_go(team_id, fd)

    def release_all(self) -> None:
        with self._lock:
            held, self._held = self._held, {}
        for team_id, fd in held.items():
            self._let_go(team_id, fd)

    def _let_go(self, team_id: str, fd: int) -> None:
        try:  # removed while still locked, so nobody takes a file that is going away
            os.unlink(self.folder / team_id)
        except OSError:
            pass
        os.close(fd)  # drops the lock

    def running(self) -> list[str]:
        """The ids of the teams a lab runs now (this process or another), from the folder."""
        try:
            names = sorted(entry.name for entry in self.folder.iterdir())
        except OSError:  # no folder: nothing was ever claimed here
            return []
        return [name for name in names if self.in_use(name)]

    def is_running(self, team_id: str) -> bool | None:
        """Whether a claim on ``team_id`` is held now, by this object or another; None where
        there are no locks to ask (no ``fcntl``)."""
        if fcntl is None:
            return None
        with self._lock:
            if team_id in self._held:
                return True
        return self.in_use(team_id)

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


#: How many times a claim tries again while only ``in_use`` probes (shared locks held for
#: microseconds) stand in its way.
_PROBE_RETRIES = 1_000


def _lock_exclusive(fd: int) -> None:
    """Lock ``fd`` exclusively, or raise ``BlockingIOError`` if a lab holds it. A lab holds
    its claim exclusively; a shared lock is another process's ``in_use`` probe, let go
    microseconds later, so the claim tries again instead of refusing the team."""
    for _ in range(_PROBE_RETRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # granted: only probes hold it
            except BlockingIOError:
                raise  # a lab holds it
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.sched_yield()
    raise _StillShared


class _StillShared(Exception):
    """A team's lock file stayed shared-locked through every try of a claim."""


def _holder(fd: int) -> dict[str, Any]:
    try:
        note = json.loads(os.pread(fd, 512, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return note if isinstance(note, dict) else {}


def this_process() -> dict[str, Any]:
    """This process as a claim's holder: its pid and host."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def still_probed_error(team_id: str) -> TeamInUseError:
    """The refusal of a claim that met only ``in_use`` probes through every try (no lab holds the team)."""
    return TeamInUseError(f"team {team_id[:8]} could not be claimed: others kept checking whether it runs; try again")


def in_use_error(team_id: str, holder: dict[str, Any], location: str, *, action: str = "resume") -> TeamInUseError:
    """The refusal to claim ``team_id`` (to ``action`` it: "resume", "forget"), naming its holder
    (``pid``, ``host``, ``since``) as far as it is known."""
    short = team_id[:8]
    here = holder.get("pid") == os.getpid() and holder.get("host", socket.gethostname()) == socket.gethostname()
    if here:
        keep = "keep using that lab, or close it (lab.close())" if action == "resume" else "close it (lab.close())"
        return TeamInUseError(
            f"team {short} is already running in this process (a Lab on {location}): {keep} before you {action} it",
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
    why = (
        "two labs on one team would both handle what a resume delivers again"
        if action == "resume"
        else "a lab still appends to it"
    )
    return TeamInUseError(
        f"team {short} is running {where} on {location}: {why}; stop it there (lab.close(), or "
        f"restart or shut down that kernel), then {action} it here"
    )
