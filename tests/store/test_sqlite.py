"""SQLite specifics: the default path, secrets in the raw file, damage and recovery,
and stores that cannot be written (read-only, full, locked) while a team keeps working."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from aklab.errors import ConfigError
from aklab.lab import Lab
from aklab.secrets import register_secret
from aklab.store import (
    EventStore,
    SqliteStore,
    StoreCorruptError,
    StoreError,
    StoreSubscriber,
    default_store_path,
    new_team_id,
    open_store,
)
from tests.store.test_contract import sent, usage


def fill(store: EventStore, n: int, team: str) -> None:
    for i in range(n):
        store.append(sent(f"message {i} " + "x" * 200, f"ask{i // 10}"), team)


def store_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "aklab.store" and r.levelno == logging.WARNING]


@contextmanager
def tiny_fs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=True)


def ask_demo(lab: Lab) -> None:
    """The team answers (the demo model's Manager relays the Developer's answer)."""
    replies = lab.ask("Write a hello function", timeout=60)
    assert replies and replies[-1].content


# -- the default path ----------------------------------------------------------------------
def test_the_default_store_is_one_file_in_the_project_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_store_path(tmp_path) == tmp_path / ".aklab" / "events.sqlite3"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AKLAB_STORE", raising=False)
    with open_store() as store:
        assert isinstance(store, SqliteStore) and store.path == tmp_path / ".aklab" / "events.sqlite3"
        assert store.location == f"sqlite:{tmp_path / '.aklab' / 'events.sqlite3'}"
        mode = sqlite3.connect(store.path).execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"
    monkeypatch.setenv("AKLAB_STORE", str(tmp_path / "elsewhere.sqlite3"))
    with open_store() as store:
        assert isinstance(store, SqliteStore) and store.path.name == "elsewhere.sqlite3"


def test_a_store_path_naming_a_folder_or_home_is_the_file_labs_and_readers_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`AKLAB_STORE=<folder>/` made a database file named like the folder, an existing
    folder turned the store off ("Is a directory"), and `AKLAB_STORE=~/...` had labs write
    under the home folder while aklab.history() looked for a folder named "~"."""
    import aklab

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    existing = tmp_path / "existing"
    existing.mkdir()
    for target, file in [
        (f"{tmp_path}/new/", tmp_path / "new" / "events.sqlite3"),
        (str(existing), existing / "events.sqlite3"),
        ("~/stores/a.sqlite3", tmp_path / "home" / "stores" / "a.sqlite3"),
        ("~/lab1/", tmp_path / "home" / "lab1" / "events.sqlite3"),
    ]:
        monkeypatch.setenv("AKLAB_STORE", target)
        with Lab("dev-team") as lab:
            assert lab.store is not None and lab.store.location == f"sqlite:{file}", target
            ask_demo(lab)
        assert file.is_file(), target
        assert len(aklab.history().asks) == 1, target


@pytest.mark.parametrize("value", ["off", "OFF", ""])
def test_readers_say_the_store_is_off_when_aklab_store_turns_it_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """`AKLAB_STORE=off`: aklab.history() said "no event store at <cwd>/off" (as if it were
    a path), and an empty value read ./.aklab while labs kept nothing."""
    import aklab

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AKLAB_STORE", value)
    for read in (aklab.history, lambda: aklab.forget("dev-team")):
        with pytest.raises(ConfigError, match=r"the event store is off here \(\$AKLAB_STORE="):
            read()
    assert list(tmp_path.iterdir()) == []


def test_synchronous_is_normal_or_full(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "a.sqlite3", synchronous="FULL") as store:
        assert store._db().execute("PRAGMA synchronous").fetchone()[0] == 2  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="synchronous='OFF'"):
        SqliteStore(tmp_path / "b.sqlite3", synchronous="OFF")  # type: ignore[arg-type]


def test_no_secret_is_in_the_raw_file(tmp_path: Path) -> None:
    key = "sk-raw-bytes-" + new_team_id()
    register_secret(key)
    path = tmp_path / "events.sqlite3"
    store = SqliteStore(path)
    team = new_team_id()
    store.save_team(team, name="t", metadata={"why": key})
    store.append(sent(f"here is {key} for you"), team)
    store.append(usage(model=f"demo-{key}"), team)
    from aklab.core import ErrorMessage

    store.append(ErrorMessage(exception_type="AuthError", exception_value=f"Authorization: Bearer {key}"), team)
    files = [p for p in tmp_path.iterdir() if p.name.startswith("events.sqlite3")]
    assert any(p.name.endswith("-wal") for p in files)
    raw = b"".join(p.read_bytes() for p in files)  # the WAL while open ...
    store.close()
    raw += path.read_bytes()  # ... and the file once checkpointed
    assert key.encode() not in raw
    assert b"[redacted]" in raw and b"here is" in raw


# -- damage ----------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["truncate", "garble"])
def test_a_damaged_tail_is_refused_clearly_and_recovery_keeps_everything_before_it(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "events.sqlite3"
    team = new_team_id()
    with SqliteStore(path) as store:
        store.save_team(team, name="dev-team", metadata={"entry": "@Manager"})
        fill(store, 300, team)
    size = path.stat().st_size
    assert not Path(f"{path}-wal").exists()  # closing checkpointed everything into the file
    if damage == "truncate":
        os.truncate(path, size - 3 * 4096 - 100)
    else:
        with open(path, "r+b") as f:
            f.seek(size - 2 * 4096)
            f.write(b"\xde\xad" * 4096)

    with pytest.raises(StoreCorruptError) as caught:
        SqliteStore(path)
    message = str(caught.value)
    assert "is damaged" in message and f"SqliteStore.recover({str(path)!r})" in message

    report = SqliteStore.recover(path)
    assert 250 <= report.records < 300 and report.teams == 1 and report.stopped_at
    assert report.damaged_path.exists() and report.damaged_path.name.startswith("events.sqlite3.damaged-")
    assert f"recovered {report.records:,} records of 1 team" in str(report)
    with SqliteStore(path) as store:
        rows = store.records(team)
        assert [r.seq for r in rows] == list(range(1, report.records + 1))  # a prefix, in order, with its seqs
        assert [r.message().message.content.split()[1] for r in rows] == [  # type: ignore[attr-defined]
            str(i) for i in range(report.records)
        ]
        assert store.teams()[0].name == "dev-team"
        assert store.append(sent("after recovery"), team) == report.records + 1  # and the store goes on


def test_a_file_that_is_no_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreCorruptError, match="bad header"):
        SqliteStore(path)
    report = SqliteStore.recover(path)
    assert report.records == 0 and report.damaged_path.exists()
    SqliteStore(path).close()


def test_a_store_from_a_newer_aklab_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    SqliteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE aklab_meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="schema version 99, newer"):
        SqliteStore(path)


def test_recover_leaves_a_sound_store_as_it_is_unless_forced(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    team = new_team_id()
    with SqliteStore(path) as store:
        fill(store, 20, team)
    before = path.read_bytes()
    report = SqliteStore.recover(path)
    assert report.damaged_path is None and report.records == 0
    assert str(report) == f"the event store {path} is not damaged (every page checked): nothing to recover"
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["events.sqlite3"]

    forced = SqliteStore.recover(path, force=True)  # the caller knows better: rewritten all the same
    assert forced.damaged_path is not None and forced.damaged_path.exists() and forced.records == 20
    with SqliteStore(path) as store:
        assert len(store.records(team)) == 20


def test_recover_refuses_a_store_in_use_or_from_a_newer_aklab(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    with Lab("dev-team", store=path) as lab:
        lab.ask("What is 2+2?", timeout=30)
        with pytest.raises(ConfigError, match=rf"team {lab.team_id[:8]} of .* is running in a lab"):
            SqliteStore.recover(path, force=True)
    assert not [p for p in tmp_path.iterdir() if ".damaged-" in p.name]

    conn = sqlite3.connect(path)
    conn.execute("UPDATE aklab_meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="schema version 99, newer"):
        SqliteStore.recover(path)
    assert not [p for p in tmp_path.iterdir() if ".damaged-" in p.name]


# -- stores that cannot be written, while the team works -----------------------------------------
def run_team_on(store: SqliteStore, caplog: pytest.LogCaptureFixture, asks: int = 1) -> StoreSubscriber:
    """A demo team with a StoreSubscriber on ``store``: it answers every ask."""
    with Lab("dev-team") as lab:
        subscriber = StoreSubscriber(store, new_team_id())
        lab.orchestrator.subscribe(subscriber)
        for _ in range(asks):
            ask_demo(lab)
            if subscriber.failed:
                break
        ask_demo(lab)  # after the failure too
        assert len(lab.usage(by="request")) >= 3 and not lab.errors()
    return subscriber


def test_a_read_only_store_warns_once_and_the_team_keeps_working(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with tiny_fs(tmp_path / "mnt", "4m") as mnt:
        path = mnt / "events.sqlite3"
        team = new_team_id()
        with SqliteStore(path) as store:
            fill(store, 5, team)
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        store = SqliteStore(path)
        try:
            assert store.read_only and len(store.records(team)) == 5  # still readable
            assert store._checkpoints is None  # nothing to copy back: no thread
            with pytest.raises(StoreError, match="read-only"):
                store.append(sent("x"), team)
            caplog.set_level(logging.WARNING, "aklab.store")
            subscriber = run_team_on(store, caplog)
        finally:
            store.close()
    assert subscriber.failed and "read-only" in subscriber.failed
    assert subscriber.stored == 0 and subscriber.dropped > 0
    warnings = store_warnings(caplog)
    assert len(warnings) == 1 and "read-only" in warnings[0] and "keeps working in memory" in warnings[0]


def test_a_full_disk_warns_once_and_the_team_keeps_working(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with tiny_fs(tmp_path / "mnt", "512k") as mnt:
        store = SqliteStore(mnt / "events.sqlite3")
        try:
            fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
            try:  # take the space left (bounded: the tmpfs is 512 KiB)
                while os.write(fd, b"\1" * 4096):
                    pass
            except OSError:
                pass
            finally:
                os.close(fd)
            caplog.set_level(logging.WARNING, "aklab.store")
            subscriber = run_team_on(store, caplog, asks=5)
        finally:
            store.close()
    assert subscriber.failed and "database or disk is full" in subscriber.failed
    warnings = store_warnings(caplog)
    assert len(warnings) == 1 and "disk is full" in warnings[0] and str(mnt) in warnings[0]


class _Failing:
    """The store's connection, whose statements starting with ``start`` fail with SQLite's
    ``error`` (from the ``at``-th such statement on: 1, every one); every other call goes
    to the real connection."""

    def __init__(self, conn: sqlite3.Connection, start: str, error: str, *, at: int = 1) -> None:
        self.conn, self.start, self.error, self.at, self.seen = conn, start, error, at, 0

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith(self.start):
            self.seen += 1
            if self.seen >= self.at:
                raise sqlite3.OperationalError(self.error)
        return self.conn.execute(sql, *args)

    def cursor(self) -> _Failing:  # the appends' cursor fails alike
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def test_a_full_disk_simulated_by_sqlites_error_is_survived_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteStore(tmp_path / "events.sqlite3")
    store._conn = _Failing(store._conn, "INSERT", "database or disk is full")  # type: ignore[arg-type, assignment]
    try:
        with pytest.raises(StoreError, match=r"append failed: database or disk is full"):
            store.append(sent("x"), new_team_id())
        caplog.set_level(logging.WARNING, "aklab.store")
        subscriber = run_team_on(store, caplog)
    finally:
        store.close()
    assert subscriber.failed and "disk is full" in subscriber.failed
    assert len(store_warnings(caplog)) == 1


def test_a_store_locked_by_another_process_fails_the_subscriber_not_the_actor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("aklab.store._sqlite.BUSY_TIMEOUT", 0.05)
    path = tmp_path / "events.sqlite3"
    store = SqliteStore(path)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # holds the write lock
    failures: list[str] = []
    subscriber = StoreSubscriber(store, new_team_id(), on_failure=failures.append)
    caplog.set_level(logging.WARNING, "aklab.store")
    try:
        subscriber.on_message(sent("one"))  # must not raise
        subscriber.on_message(sent("two"))
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert subscriber.failed and "database is locked" in subscriber.failed
    assert failures == [subscriber.failed] and subscriber.dropped == 2
    assert len(store_warnings(caplog)) == 1
    store.close()


@pytest.mark.parametrize(
    "trigger",
    [
        # as aklab wrote its files at first: the team row updated on every insert
        "CREATE TRIGGER events_touch_team AFTER INSERT ON events BEGIN "
        "INSERT OR IGNORE INTO teams (team_id, created_at, last_activity) "
        "VALUES (NEW.team_id, NEW.created_at, NEW.created_at); "
        "UPDATE teams SET last_activity = NEW.created_at WHERE team_id = NEW.team_id; END",
        # and later: the team row made by a trigger on every insert
        "CREATE TRIGGER events_new_team AFTER INSERT ON events BEGIN "
        "INSERT OR IGNORE INTO teams (team_id, created_at, last_activity) "
        "VALUES (NEW.team_id, NEW.created_at, NEW.created_at); END",
    ],
    ids=["touch", "new-team"],
)
def test_a_file_made_with_an_old_trigger_drops_it_and_keeps_last_activity_current(tmp_path: Path, trigger: str) -> None:
    path, team = tmp_path / "events.sqlite3", new_team_id()
    with SqliteStore(path) as store:
        first = sent("first")
        store.append(first, team)
    conn = sqlite3.connect(path)
    try:
        conn.execute(trigger)
        conn.commit()
    finally:
        conn.close()
    later = sent("later")
    later.created_at = first.created_at.replace(year=first.created_at.year + 1)
    with SqliteStore(path) as store:
        store.append(later, team)
        triggers = {r[0] for r in store._db().execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert triggers == {"events_no_update", "events_no_delete"}
        assert [t.last_activity for t in store.teams() if t.team_id == team] == [later.created_at]


def test_a_team_row_is_written_with_its_first_record_once_per_team(tmp_path: Path) -> None:
    """No trigger makes the team row: the store writes it with the team's first record
    (in the same transaction), for every team of a batch, again after ``forget``, and for a
    team another store object (another kernel) writes to."""
    path, one, two = tmp_path / "events.sqlite3", new_team_id(), new_team_id()
    store = SqliteStore(path)
    first = sent("first")
    store.append_later(first, one)
    store.append_later(sent("second"), two)
    store.append(sent("third"), one)
    assert sorted(t.team_id for t in store.teams()) == sorted([one, two])
    assert [t.created_at for t in store.teams() if t.team_id == one] == [first.created_at]
    assert store.forget(one) == 2
    assert [t.team_id for t in store.teams()] == [two]
    store.append(sent("again"), one)
    assert sorted(t.team_id for t in store.teams()) == sorted([one, two])
    other = SqliteStore(path)
    three = new_team_id()
    other.append(sent("elsewhere"), three)
    assert three in {t.team_id for t in store.teams()}
    other.close()
    store.close()


def test_a_file_left_in_the_middle_of_a_checkpoint_opens_with_every_record(tmp_path: Path) -> None:
    """A process killed while it copies the log into the file leaves page 1 (written first)
    counting pages the file does not have yet: that is no damage, the log has them all."""
    path, team = tmp_path / "events.sqlite3", new_team_id()
    writer = SqliteStore(path)
    writer._db().execute("PRAGMA wal_autocheckpoint=0")  # everything stays in the log
    assert writer._checkpoints is not None
    writer._checkpoints.every_pages = 10**9  # nor does the store's thread copy it
    fill(writer, 300, team)
    wal = Path(f"{path}-wal").read_bytes()
    page_size = int.from_bytes(wal[8:12], "big")
    frames = [(wal[o : o + 24], wal[o + 24 : o + 24 + page_size]) for o in range(32, len(wal), 24 + page_size)]
    first_page = [data for head, data in frames if int.from_bytes(head[:4], "big") == 1][-1]
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "events.sqlite3").write_bytes(path.read_bytes())  # the file as the last checkpoint left it...
    with open(copy / "events.sqlite3", "r+b") as f:
        f.write(first_page)  # ...with the new page 1 written, the pages after it not yet
    (copy / "events.sqlite3-wal").write_bytes(wal)
    writer.close()
    header = first_page[:100]
    assert int.from_bytes(header[28:32], "big") * page_size > (copy / "events.sqlite3").stat().st_size
    with SqliteStore(copy / "events.sqlite3") as store:
        assert len(store.records(team)) == 300


def test_a_big_team_is_forgotten_in_chunks_newest_first_and_an_interrupted_forget_leaves_a_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aklab.store._sqlite as sqlite_module

    monkeypatch.setattr(sqlite_module, "FORGET_CHUNK", 4)
    path, team, other = tmp_path / "events.sqlite3", new_team_id(), new_team_id()
    with SqliteStore(path) as store:
        store.save_team(team, name="big")
        fill(store, 10, team)
        fill(store, 1, other)
        real = store._conn
        assert real is not None
        store._conn = _Failing(real, "DELETE FROM events", "disk I/O error", at=2)  # type: ignore[assignment]
        with pytest.raises(StoreError, match=f"forget team {team} failed: disk I/O error"):
            store.forget(team)
        store._conn = real
        # the newest 4 went; the team is still listed, with the oldest 6: a prefix, as a crash leaves
        left = [r.message().message.content.split(" x")[0] for r in store.records(team)]  # type: ignore[attr-defined]
        assert left == [f"message {i}" for i in range(6)]
        assert {t.team_id for t in store.teams()} == {team, other}
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):  # the trigger came back
            real.execute("DELETE FROM events")
        assert store.forget(team) == 6  # forgetting again finishes the job
        assert [t.team_id for t in store.teams()] == [other] and len(store.records(other)) == 1


def test_forget_leaves_no_trace_of_the_team_in_the_file_or_its_log(tmp_path: Path) -> None:
    """What ``forget`` deleted cannot be read back from the bytes on disk: the freed space is
    overwritten with zeros (``secure_delete`` for its deletes) and the log, which held the
    pages as they were written, is truncated once copied back."""
    path = tmp_path / "events.sqlite3"
    kept_team, gone_team = new_team_id(), new_team_id()
    with SqliteStore(path) as store:
        for i in range(300):  # enough to span many pages of the table and its indexes
            store.append(sent(f"keep-me-{i:04d} " + "k" * 200), kept_team)
            store.append(sent(f"secret-plan-{i:04d} " + "s" * 200), gone_team)
        store.flush()
        on_disk = path.read_bytes() + path.with_name(path.name + "-wal").read_bytes()
        assert b"secret-plan-0123" in on_disk  # the test can see what a forget must remove
        # as in SQLite builds where it is off by default (Debian's has it on)
        store._db().execute("PRAGMA secure_delete=OFF")
        assert store.forget(gone_team) == 300
        assert store._db().execute("PRAGMA secure_delete").fetchone() == (0,)  # as it was
        assert len(store.records(kept_team)) == 300
    wal = path.with_name(path.name + "-wal")
    on_disk = path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    assert b"secret-plan" not in on_disk and gone_team.encode() not in on_disk
    assert b"keep-me-0123" in on_disk
    with SqliteStore(path) as store:
        assert [r.message().message.content[:12] for r in store.records(kept_team)][:2] == [
            "keep-me-0000",
            "keep-me-0001",
        ]
