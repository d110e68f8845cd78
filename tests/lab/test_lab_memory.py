"""A closed lab is garbage: no cache or registry of the process keeps its team alive, so a
notebook that re-runs ``lab = Lab(...)`` or a benchmark building many labs does not grow."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Literal

import pytest

from aklab.core import Akgent, TeamLog
from aklab.lab import Lab
from aklab.llm import react
from aklab.tools import commands, factory
from aklab.tools._signature import SignatureCache


@pytest.fixture
def empty_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process-wide schema caches start empty, so the lab under test is the one that
    fills them (otherwise an earlier test's lab would have)."""
    monkeypatch.setattr(factory, "_schemas", SignatureCache())
    monkeypatch.setattr(commands, "_described", SignatureCache())
    monkeypatch.setattr(react, "_SCHEMAS", {})


def _team_objects() -> list[object]:
    return [o for o in gc.get_objects() if isinstance(o, Akgent | TeamLog)]


def _closed_lab(store: Path | Literal[False]) -> list[weakref.ref[object]]:
    """Weak references to a lab, its actors and its team log, once it has answered and closed."""
    gc.collect()
    before = {id(o) for o in _team_objects()}
    lab = Lab(store=store)
    lab.ask("Plan the login page", timeout=20)
    lab.ask("What is 2+2?", timeout=20)
    team = [weakref.ref(o) for o in _team_objects() if id(o) not in before]
    lab.close()
    return [weakref.ref(lab), *team]


@pytest.mark.usefixtures("empty_caches")
@pytest.mark.parametrize("store", ["off", "sqlite"])
def test_a_closed_lab_its_agents_and_its_team_log_are_freed(store: str, tmp_path: Path) -> None:
    refs = _closed_lab(False if store == "off" else tmp_path / "events.sqlite3")
    kinds = {type(r()).__name__ for r in refs}
    assert {"Orchestrator", "BaseAgent", "TeamLog"} <= kinds  # before collection: cycles remain
    gc.collect()
    assert [type(o).__name__ for r in refs if (o := r()) is not None] == []
