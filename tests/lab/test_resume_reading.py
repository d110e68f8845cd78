"""How a resume reads a stored team: page by page (a long team is never held whole), each
member's history folded from its snapshots as stored and validated once, and a snapshot that
no longer reads back skipped with a warning while the rest comes back."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import aklab.lab.resume as resume
from aklab.agent import AgentSnapshotEvent, BaseAgent
from aklab.core import DispatchedMessage
from aklab.lab import Lab
from aklab.store import SqliteStore

QUESTIONS = ("Ask the Developer for a haiku about tests.", "What is 2+2?", "Ask the Developer for a limerick.")


def _stored_team(path: Path) -> str:
    with Lab("dev-team", store=path) as lab:
        for question in QUESTIONS:
            lab.ask(question, timeout=10)
        return lab.team_id


def _folded_one_by_one(path: Path, team_id: str, before: int | None = None) -> dict[str, list[Any]]:
    """Each member's history as the snapshots (stored before seq ``before``) give it, each
    validated on its own."""
    histories: dict[str, list[Any]] = {}
    with SqliteStore(path) as store:
        for row in store.records(team_id, kinds=["DispatchedMessage"], before=before):
            record = row.message()
            assert isinstance(record, DispatchedMessage)
            snapshot = record.snapshot
            if record.done and isinstance(snapshot, AgentSnapshotEvent):
                histories[snapshot.agent_id] = snapshot.history(histories.get(snapshot.agent_id, []))
    return histories


def test_a_team_read_page_by_page_comes_back_as_its_snapshots_say_and_a_long_read_shows_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "events.sqlite3"
    team_id = _stored_team(path)
    expected = _folded_one_by_one(path, team_id)
    assert len(expected) == 2 and all(expected.values())
    with SqliteStore(path) as store:
        whole = resume.load_team(store)
        monkeypatch.setattr(resume, "PAGE", 3)  # pages end everywhere: mid-handling, mid-ask
        monkeypatch.setattr(resume, "PROGRESS_AFTER_S", 0.0)
        paged = resume.load_team(store)
        total = len(store.records(team_id))
    for team in (whole, paged):
        assert team.records == total
        assert {m.agent_id: m.messages for m in team.members if m.agent_id in expected} == expected
    assert [(m.agent_id, m.state, m.usage) for m in paged.members] == [
        (m.agent_id, m.state, m.usage) for m in whole.members
    ]
    assert [m.id for m in paged.replies] == [m.id for m in whole.replies] and len(paged.replies) == len(QUESTIONS)
    assert paged.usage == whole.usage and paged.pending == whole.pending == []
    err = capsys.readouterr().err
    assert "aklab: team 'dev-team': 3 records read..." in err
    assert f"aklab: team 'dev-team': {total:,} records read in" in err


def test_a_snapshot_that_no_longer_reads_back_is_skipped_and_the_rest_comes_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Written by another pydantic-ai version, say: the Manager's last snapshot has a part
    this one does not know. The Manager resumes with the history before that snapshot, with
    a warning; the Developer's history is whole; the team answers."""
    path = tmp_path / "events.sqlite3"
    team_id = _stored_team(path)
    expected = _folded_one_by_one(path, team_id)
    with SqliteStore(path) as store:
        ends = [r for r in store.records(team_id, kinds=["DispatchedMessage"]) if r.sender == "@Manager"]
        manager_id = ends[-1].sender_id
        assert manager_id is not None
    before_last = _folded_one_by_one(path, team_id, before=ends[-1].seq)[manager_id]
    assert 0 < len(before_last) < len(expected[manager_id])
    db = sqlite3.connect(path)
    with db:
        db.execute("DROP TRIGGER events_no_update")
        changed = db.execute(
            'UPDATE events SET payload = replace(payload, \'"part_kind":"user-prompt"\', \'"part_kind":"hologram"\') '
            "WHERE seq = ?",
            (ends[-1].seq,),
        ).rowcount
        assert changed == 1
    db.close()
    caplog.set_level(logging.WARNING, "aklab.lab")
    with Lab.resume(store=path) as lab:
        assert any("stored agent snapshot could not be read back" in r.getMessage() for r in caplog.records)
        manager = lab.system.proxy_ask(lab.member("@Manager"), BaseAgent)
        developer = lab.system.proxy_ask(lab.member("@Developer"), BaseAgent)
        assert manager.history() == before_last
        developer_id = next(a for a in expected if a != manager_id)
        assert developer.history() == expected[developer_id]
        assert len(lab.ask("What is 3+3?", timeout=10)) >= 1
