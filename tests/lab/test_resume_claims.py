"""A team runs in one lab at a time: resuming a team that a lab runs (in this kernel or in
another) is refused in one line naming where; ``Lab.resume()`` with no team takes the latest
team nobody runs; ``%aklab teams`` marks the running ones; a killed kernel's team resumes."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from aklab.errors import ConfigError
from aklab.lab import Lab, get_lab
from aklab.lab.resume import pick_team
from aklab.store import EventStore, SqliteStore, StoreError, TeamInfo, TeamInUseError

ROOT = Path(__file__).resolve().parents[2]


def test_a_running_team_is_not_resumed_twice_in_one_process(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    with Lab("dev-team", store=path) as lab:
        lab.ask("What is 2+2?", timeout=30)
        with pytest.raises(TeamInUseError, match=f"team {lab.team_id[:8]} is already running in this process"):
            Lab.resume(lab.team_id, store=path)
        assert len(lab.ask("And 3+3?", timeout=30)) >= 1  # the running lab is untouched
    with Lab.resume(lab.team_id, store=path) as again:  # closed: free
        assert len(again.replies()) == 2


def test_resume_without_a_team_refuses_the_latest_if_this_process_runs_it(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    with Lab("dev-team", store=path) as old:
        old.ask("What is 2+2?", timeout=30)
    with Lab.resume(store=path) as resumed:
        # re-running the cell: the team is running here, so no older team is taken instead
        with pytest.raises(TeamInUseError, match=f"team {old.team_id[:8]} is already running in this process.*name it"):
            Lab.resume(store=path)
        assert resumed.team_id == old.team_id


CHILD = """
import sys
from aklab.lab import Lab
lab = Lab("dev-team", store=sys.argv[1])
lab.ask("What is 2+2?", timeout=30)
print(lab.team_id, flush=True)
sys.stdin.read()  # until killed
"""


def test_a_team_running_in_another_kernel_is_refused_until_that_kernel_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    with Lab("dev-team", store=path) as mine:  # an older team, stopped
        mine.ask("What is 1+1?", timeout=30)
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ) as kernel:  # leaving the block closes its pipes and waits for it
        try:
            assert kernel.stdout is not None
            team_id = kernel.stdout.readline().strip()
            with pytest.raises(TeamInUseError, match=rf"running in another process \(pid {kernel.pid}, on "):
                Lab.resume(team_id, store=path)
            with Lab.resume(store=path) as latest_free:  # the latest team runs next door: the one before it
                assert latest_free.team_id == mine.team_id
        finally:
            kernel.kill()  # SIGKILL
    with Lab.resume(team_id, store=path) as again:
        assert [m.content for m in again.replies()] and again.team_id == team_id


def test_resume_without_a_team_says_so_when_every_team_runs_elsewhere() -> None:
    class Elsewhere(_NoStore):
        def claim(self, team_id: str) -> None:
            raise TeamInUseError(f"team {team_id[:8]} is running in another process")

    with pytest.raises(ConfigError, match=r"every team stored in .* is running in a lab in another process now \(2\)"):
        pick_team(Elsewhere(), None, skip_running=True)
    assert pick_team(Elsewhere(), None).team_id == "a" * 32  # without skip_running: the latest, as before


class _NoStore(EventStore):
    location = "nowhere"

    def append(self, record: Any, team_id: str) -> int:
        raise AssertionError("nothing is appended")

    def records(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []

    def save_team(self, team_id: str, *, name: str, metadata: dict[str, Any] | None = None) -> None:
        pass

    def teams(self) -> list[TeamInfo]:
        now = datetime.now(UTC)
        return [TeamInfo(c * 32, "dev-team", now, now, {}) for c in "ab"]

    def close(self) -> None:
        pass


def test_the_magics_mark_running_teams_and_refuse_to_resume_one(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AKLAB_STORE", str(tmp_path / "events.sqlite3"))  # read when the first %ask starts a lab
    assert shell.run_cell("%ask What is 2+2?").error_in_exec is None
    lab = get_lab()
    assert lab is not None
    capsys.readouterr()
    assert shell.run_cell("%aklab teams").error_in_exec is None
    listing = capsys.readouterr().out
    assert f"{lab.team_id[:8]}  dev-team" in listing and "(running in a lab now)" in listing
    result = shell.run_cell(f"%aklab resume {lab.team_id[:8]}")
    assert isinstance(result.error_in_exec, TeamInUseError)
    assert get_lab() is lab  # the running lab stays the notebook's


def test_a_store_that_cannot_claim_still_runs_and_resumes_teams(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Unclaimable(SqliteStore):
        def claim(self, team_id: str) -> None:
            raise StoreError("claims are not supported here")

    with Unclaimable(tmp_path / "events.sqlite3") as store:
        with Lab("dev-team", store=store) as lab:
            lab.ask("What is 2+2?", timeout=30)
        assert "could not be claimed" in caplog.text and "claims are not supported here" in caplog.text
        with Lab.resume(store=store) as again:
            assert again.team_id == lab.team_id and len(again.replies()) == 1


EXITS_OPEN = """
import sys
from aklab.lab import Lab
lab = Lab("dev-team", store=sys.argv[1])  # never closed: the kernel is shut down with it open
lab.ask("What is 2+2?", timeout=30)
print(lab.team_id, flush=True)
"""


def test_a_kernel_shut_down_with_its_lab_open_lets_go_of_the_team(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    done = subprocess.run(
        [sys.executable, "-c", EXITS_OPEN, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=True,
    )
    team_id = done.stdout.strip()
    assert list((tmp_path / "events.sqlite3-teams").iterdir()) == []  # its lock file went with it
    with Lab.resume(store=path) as again:
        assert again.team_id == team_id and len(again.replies()) == 1
