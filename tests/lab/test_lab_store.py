"""A lab appends its team's records to the event store; a store problem never stops the team."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from aklab.lab import Lab
from aklab.store import SqliteStore, history


def test_a_lab_records_its_team_and_history_reads_it_back(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    with Lab("dev-team", store=path) as lab:
        first = lab.ask("What is 2+2?", timeout=10)
        status = lab.status()
        assert f"store: sqlite:{path} (" in status and status.count(" MB)") + status.count(" kB)") == 1
        team_id = lab.team_id
        reported = int(lab.usage()["requests"].sum())
    with SqliteStore(path) as store:
        assert [t.team_id for t in store.teams()] == [team_id]
        h = history(store)
        assert int(h.usage["requests"].sum()) == reported
        assert list(h.asks["ask_id"]) == [first.ask_id]
        assert h.asks["question"].iloc[0] == "What is 2+2?"


def test_the_default_store_follows_the_environment_and_can_be_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AKLAB_STORE", "off")
    with Lab("dev-team") as lab:
        assert lab.store is None and "store: off" in lab.status()
        assert len(lab.ask("What is 2+2?", timeout=10)) >= 1
    with Lab("dev-team", store=False) as lab:
        assert lab.store is None


def test_a_damaged_store_is_a_warning_and_the_team_answers(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with Lab("dev-team", store=path) as lab:
        assert lab.store is None
        assert lab.store_warning is not None and "could not be opened" in lab.store_warning
        assert "recover" in lab.store_warning
        assert len(lab.ask("What is 2+2?", timeout=10)) >= 1


def test_a_store_that_fails_mid_session_is_reported_once_and_the_team_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "events.sqlite3"
    with Lab("dev-team", store=path) as lab:
        lab.ask("What is 2+2?", timeout=10)
        store = lab.store
        assert store is not None
        original = store.append

        def broken(*args: object, **kwargs: object) -> int:
            raise sqlite3.OperationalError("database or disk is full")

        store.append = broken  # type: ignore[method-assign]
        try:
            assert len(lab.ask("And 3+3?", timeout=10)) >= 1
        finally:
            store.append = original  # type: ignore[method-assign]
        assert lab.store_warning is not None and "disk is full" in lab.store_warning
        assert "store:" in lab.status() and "in memory" in lab.status()


def test_aklab_history_reads_every_session_by_path(tmp_path: Path) -> None:
    import aklab

    path = tmp_path / "events.sqlite3"
    spent = 0
    for _ in range(2):  # two sessions, one after the other (as after a kernel restart)
        with Lab("dev-team", store=path) as lab:
            lab.ask("What is 2+2?", timeout=10)
            spent += int(lab.usage()["total_tokens"].sum())
    h = aklab.history(path)
    assert len(h.asks) == 2 and h.asks["team_id"].nunique() == 2
    assert int(h.usage["total_tokens"].sum()) == spent
    assert len(aklab.history(path, team=h.asks["team_id"].iloc[0]).asks) == 1
