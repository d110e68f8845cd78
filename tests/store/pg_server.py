"""A throwaway PostgreSQL server on 127.0.0.1, from Debian's binaries (never a mock).

Used by the ``postgres_dsn`` fixture and usable from a shell (e.g. ``.ci/run``)::

    python tests/store/pg_server.py start /tmp/aklab-pg   # prints the DSN
    python tests/store/pg_server.py stop /tmp/aklab-pg

What it does: finds ``initdb`` and ``pg_ctl`` under ``/usr/lib/postgresql/*/bin`` (newest
version first; ``$PG_BIN`` overrides), runs ``initdb`` into ``<dir>/data`` (trust
authentication, superuser ``aklab``), starts the server with ``pg_ctl -w`` listening on
127.0.0.1 only, on a free port, with its unix socket in ``<dir>/sock``, and creates the
database ``aklab_test``. PostgreSQL refuses to run as root: as root, every command runs
as the ``postgres`` system user that Debian's package creates (``runuser -u postgres
--``), and ``<dir>`` is handed to that user. ``fsync=off``: a test server, thrown away.

``stop`` runs ``pg_ctl stop -m fast``, then checks that the postmaster's pid (from
``postmaster.pid``) is gone, killing that pid (and only it) if it is not.
"""

from __future__ import annotations

import glob
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LocalPostgres", "find_bin"]

DB = "aklab_test"
USER = "aklab"
RUN_AS = "postgres"
START_TIMEOUT = 60
STOP_TIMEOUT = 30


def find_bin() -> Path | None:
    """The directory with initdb and pg_ctl, or None."""
    env = os.environ.get("PG_BIN")
    candidates = [env] if env else sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    for c in candidates:
        if c and (Path(c) / "initdb").exists() and (Path(c) / "pg_ctl").exists():
            return Path(c)
    return None


def _version(path: str) -> float:
    try:
        return float(Path(path).parent.name)
    except ValueError:
        return 0.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalPostgres:
    """A server in ``root`` (``start()``, ``stop()``; ``dsn`` once started)."""

    root: Path
    bin_dir: Path
    port: int = 0
    pid: int | None = None

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def dsn(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{DB}"

    def _run(self, *args: str, timeout: float = START_TIMEOUT) -> subprocess.CompletedProcess[str]:
        cmd = list(args)
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", RUN_AS, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        return done

    def start(self) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "sock").mkdir(exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, RUN_AS)
            shutil.chown(self.root / "sock", RUN_AS)
            os.chmod(self.root, 0o700)
        self._run(
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
            "--no-instructions",
        )
        last: Exception | None = None
        for _ in range(3):  # the free port may be taken between the probe and the start
            self.port = _free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root / 'sock'} "
                "-c fsync=off -c shared_buffers=16MB -c max_connections=30"
            )
            try:
                self._run(
                    str(self.bin_dir / "pg_ctl"),
                    "-D",
                    str(self.data),
                    "-l",
                    str(self.root / "server.log"),
                    "-w",
                    "-t",
                    str(START_TIMEOUT),
                    "-o",
                    options,
                    "start",
                )
                break
            except RuntimeError as exc:
                last = exc
        else:
            raise RuntimeError(f"postgres did not start: {last}; see {self.root / 'server.log'}")
        self.pid = _postmaster_pid(self.data)
        self._run(
            str(self.bin_dir / "createdb"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            USER,
            DB,
        )
        return self.dsn

    def stop(self) -> None:
        pid = self.pid if self.pid is not None else _postmaster_pid(self.data)
        if pid is None:
            return
        try:
            self._run(
                str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop", timeout=STOP_TIMEOUT
            )
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
        if not _wait_gone(pid, STOP_TIMEOUT):
            os.kill(pid, signal.SIGKILL)  # this server's postmaster, by its pid
            _wait_gone(pid, STOP_TIMEOUT)
        self.pid = None
        if _alive(pid):
            raise RuntimeError(f"postgres (pid {pid}) is still running after pg_ctl stop and SIGKILL")


def _postmaster_pid(data: Path) -> int | None:
    try:
        return int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _wait_gone(pid: int, timeout: float) -> bool:
    """Wait (on a pidfd: no polling) until ``pid`` has exited; False on timeout."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready) or not _alive(pid)
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (an exited process not yet reaped by its parent counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("start", "stop"):
        print(f"usage: {argv[0]} start|stop DIR", file=sys.stderr)
        return 2
    bin_dir = find_bin()
    if bin_dir is None:
        print("no PostgreSQL binaries under /usr/lib/postgresql/*/bin: apt-get install -y postgresql", file=sys.stderr)
        return 1
    server = LocalPostgres(Path(argv[2]).absolute(), bin_dir)
    if argv[1] == "start":
        print(server.start())
    else:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
