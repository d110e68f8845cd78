"""A team runs in one lab at a time: a store object claims it, another is refused, saying who
holds it, until the claim is released, the store closed or the holding process gone."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aklab.store import EventStore, SqliteStore, TeamInUseError, new_team_id
from tests.store.test_sqlite import tiny_fs

ROOT = Path(__file__).parents[2]


def test_a_team_is_claimed_by_one_store_object_at_a_time(make_store: Callable[[], EventStore]) -> None:
    first, second, team = make_store(), make_store(), new_team_id()
    assert not second.in_use(team)
    first.claim(team)
    assert second.in_use(team) and not first.in_use(team)  # in use by someone else
    with pytest.raises(TeamInUseError, match=f"team {team[:8]} is already running in this process .*close") as refused:
        second.claim(team)
    assert refused.value.here  # named by the lock file's note, or by the PostgreSQL session's application name
    with pytest.raises(TeamInUseError, match="already running in this process"):
        first.claim(team)  # twice on one object: a second lab sharing the store
    first.release(team)
    assert not second.in_use(team)
    second.claim(team)
    assert first.in_use(team)
    second.close()  # closing ends every claim the object held
    first.claim(team)


def test_is_running_sees_a_claim_held_by_the_same_store_object_or_another(
    make_store: Callable[[], EventStore],
) -> None:
    first, second, team = make_store(), make_store(), new_team_id()
    assert first.is_running(team) is False and second.is_running(team) is False
    first.claim(team)
    assert first.is_running(team) is True and second.is_running(team) is True  # in_use says False to the holder
    first.release(team)
    assert first.is_running(team) is False and second.is_running(team) is False


def test_teams_are_claimed_independently(make_store: Callable[[], EventStore]) -> None:
    first, second = make_store(), make_store()
    one, two = new_team_id(), new_team_id()
    first.claim(one)
    second.claim(two)
    assert first.in_use(two) and second.in_use(one)
    first.release(two)  # not held by it: nothing happens
    assert first.in_use(two)


def test_a_sqlite_claim_names_the_holder_in_this_process(tmp_path: Path) -> None:
    team, lock_file = new_team_id(), tmp_path / "events.sqlite3-teams"
    with SqliteStore(tmp_path / "events.sqlite3") as first, SqliteStore(tmp_path / "events.sqlite3") as second:
        first.claim(team)
        assert [p.name for p in lock_file.iterdir()] == [team]  # beside the store, while it runs
        with pytest.raises(TeamInUseError, match=r"already running in this process \(a Lab on sqlite:"):
            second.claim(team)
    assert list(lock_file.iterdir()) == []  # removed when let go


HOLDER = """
import sys
from aklab.store import SqliteStore
store = SqliteStore(sys.argv[1])
store.claim(sys.argv[2])
print("claimed", flush=True)
sys.stdin.read()  # until killed
"""


def test_a_claim_ends_with_the_process_that_held_it_even_when_killed(tmp_path: Path) -> None:
    path, team = tmp_path / "events.sqlite3", new_team_id()
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), team],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    ) as holder:  # leaving the block closes its pipes and waits for it
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "claimed\n"
            with SqliteStore(path) as store:
                assert store.in_use(team)
                with pytest.raises(TeamInUseError, match=rf"running in another process \(pid {holder.pid}, on .*since"):
                    store.claim(team)
        finally:
            holder.kill()  # SIGKILL
    with SqliteStore(path) as store:  # the killed kernel's claim is gone with it
        assert not store.in_use(team)
        store.claim(team)


def test_a_read_only_store_claims_nothing(tmp_path: Path) -> None:
    team = new_team_id()
    with tiny_fs(tmp_path / "mnt", "1m") as mnt:
        SqliteStore(mnt / "events.sqlite3").close()
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        with SqliteStore(mnt / "events.sqlite3") as store:
            assert store.read_only
            store.claim(team)  # nothing to guard: the team cannot be stored here
            assert not store.in_use(team)


def test_a_claim_made_while_another_process_probes_the_team_goes_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``in_use`` probes with a shared lock held for microseconds: a claim that meets one tries
    again (it is not a lab holding the team), and only a probe that never ends refuses it."""
    import fcntl
    import os

    import aklab.store._claims as claims

    team = new_team_id()
    folder = tmp_path / "events.sqlite3-teams"
    folder.mkdir()
    probe = os.open(folder / team, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a probe, caught in the act
        waits: list[int] = []

        def probe_ends() -> None:  # the claim yields while the probe holds: the probe lets go
            waits.append(1)
            fcntl.flock(probe, fcntl.LOCK_UN)

        monkeypatch.setattr(claims.os, "sched_yield", probe_ends)
        with SqliteStore(tmp_path / "events.sqlite3") as store:
            store.claim(team)
            assert waits == [1]
            assert SqliteStore(tmp_path / "events.sqlite3").in_use(team)
        os.close(probe)  # the file it probed went with the claim: probe the next one, for good
        probe = os.open(folder / team, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
        monkeypatch.setattr(claims.os, "sched_yield", lambda: None)
        with SqliteStore(tmp_path / "events.sqlite3") as store:
            with pytest.raises(TeamInUseError, match=r"could not be claimed: others kept checking.*try again"):
                store.claim(team)
    finally:
        os.close(probe)


def test_a_postgres_claim_made_while_another_session_probes_the_team_goes_through(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on PostgreSQL: ``in_use`` probes with a shared advisory lock; a claim that
    meets one tries again, and only a probe that never ends refuses it."""
    import uuid

    import aklab.store._postgres as pg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    team = new_team_id()
    with (
        pg.PostgresStore(postgres_dsn, schema=schema) as prober,
        pg.PostgresStore(postgres_dsn, schema=schema) as store,
    ):

        def probe() -> None:
            assert prober._db().execute(pg._TRY_TEAM_PROBE, (team,)).fetchone()[0]

        def probe_ends() -> None:
            prober._db().execute(pg._TEAM_PROBE_END, (team,))

        probe()  # caught in the act
        tries: list[int] = []
        monkeypatch.setattr(pg, "_between_tries", lambda: (tries.append(1), probe_ends()))
        store.claim(team)
        assert tries == [1] and prober.in_use(team)
        store.release(team)
        probe()  # a probe that never lets go
        monkeypatch.setattr(pg, "_between_tries", lambda: None)
        with pytest.raises(TeamInUseError, match=r"could not be claimed: others kept checking.*try again"):
            store.claim(team)
        probe_ends()
        store.claim(team)  # and once it does, the claim goes through


def test_a_refusal_says_what_it_refused() -> None:
    from aklab.store._claims import in_use_error

    elsewhere = {"pid": 4242, "host": "elsewhere", "since": "2026-12-07T04:00:00"}
    resume = str(in_use_error("ab" * 16, elsewhere, "sqlite:x"))
    forget = str(in_use_error("ab" * 16, elsewhere, "sqlite:x", action="forget"))
    assert "(pid 4242, on elsewhere, since" in resume and resume.endswith("then resume it here")
    assert "what a resume delivers again" in resume
    assert forget.endswith("then forget it here") and "resume" not in forget
