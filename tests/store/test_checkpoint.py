"""The write-ahead log is copied back into the file by the store's own thread, not by a commit."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from aklab.store import SqliteStore
from aklab.store._checkpoint import BACKSTOP_PAGES, EVERY_PAGES, Checkpointer
from tests.store.test_contract import sent

WAIT = 10.0


def log_frames(path: Path) -> int:
    """Frames in the database's log now (a passive checkpoint reports them; it copies them too)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        _busy, frames, _copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()[0]
    finally:
        conn.close()
    return int(frames)


def big(i: int) -> object:
    return sent(f"message {i} " + "x" * 6_000, f"ask{i}")


def test_a_commit_no_longer_checkpoints_at_sqlites_default_length(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    with SqliteStore(path) as store:
        assert store._checkpoints is not None
        store._checkpoints.every_pages = 10**9  # no round of the thread: only the writer could
        for i in range(300):  # 6 pages each: past SQLite's default of 1,000
            store.append(big(i), "t")  # type: ignore[arg-type]
        frames = log_frames(path)
    assert 1_000 < frames < BACKSTOP_PAGES


def test_the_thread_copies_the_log_and_the_next_commit_starts_it_over(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    with SqliteStore(path) as store:
        checkpoints = store._checkpoints
        assert checkpoints is not None
        checkpoints.every_pages = 200
        i = 0
        while checkpoints.rounds == 0:
            store.append(big(i), "t")  # type: ignore[arg-type]
            i += 1
            assert checkpoints.wait(WAIT)  # one round at a time: this test appends between rounds
            assert checkpoints.failed is None
            assert i < 1_000, "no round ended with the log copied"
        store.append(big(i), "t")  # type: ignore[arg-type]
        assert log_frames(path) <= 10  # this commit's pages only: the log started over
        assert len(store.records(team_id="t")) == i + 1  # every record is there


def test_a_round_that_cannot_open_the_file_is_reported_not_raised(tmp_path: Path) -> None:
    checkpoints = Checkpointer(tmp_path / "no such folder" / "events.sqlite3", every_pages=1)
    checkpoints.wrote(1)
    assert checkpoints.wait(WAIT)
    assert checkpoints.rounds == 0
    assert checkpoints.failed is not None and "unable to open" in checkpoints.failed


def test_a_closed_checkpointer_starts_no_round(tmp_path: Path) -> None:
    checkpoints = Checkpointer(tmp_path / "events.sqlite3", every_pages=1)
    checkpoints.close()
    checkpoints.wrote(EVERY_PAGES)
    assert checkpoints._thread is None
