"""Each member's model history, folded from its stored snapshots for a resume.

A stored team has one ``AgentSnapshotEvent`` per handling and member (carried by the
record of the handling's end), each a change to the one before. Validating every one
into pydantic-ai's messages cost most of a resume's decoding (a team of 2,000 asks has
6,000), though only the last history of each member is kept. So the snapshots are folded
as they were stored (JSON), and each member's final history is validated once. If it does
not validate (a message written by another pydantic-ai version, say), that member's
snapshots are read again and folded one by one: one that does not read back is skipped
with a warning, and the member resumes with the history of the snapshot before it. Nothing
is kept of a snapshot once folded (a resume reads a long team a page at a time).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

if TYPE_CHECKING:
    from aklab.lab.resume import StoredMember

__all__ = ["Histories"]

log = logging.getLogger("aklab.lab")


def _snapshot_class() -> Any:
    from aklab.agent import AgentSnapshotEvent

    return AgentSnapshotEvent


class Histories:
    """Folds stored snapshots (``$type``/``$data`` JSON, as stored) into ``members``."""

    def __init__(self, members: dict[str, StoredMember]) -> None:
        from aklab.store import class_path

        self.members = members
        self._type = class_path(_snapshot_class())  # as the store tags it
        self._taken: set[str] = set()  # members with a snapshot
        self._broken: set[str] = set()  # members whose JSON fold failed: folded again one by one

    def _data(self, stored: Any) -> dict[str, Any] | None:
        data = stored.get("$data") if isinstance(stored, dict) and stored.get("$type") == self._type else None
        return data if isinstance(data, dict) else None

    def take(self, stored: Any) -> None:
        """Apply one stored snapshot (the ``snapshot`` field of a handling's end, or the
        ``event`` of an ``EventMessage``: ``{"$type": ..., "$data": {...}}``, or None)."""
        if stored is None:
            return
        data = self._data(stored)
        if data is None:
            _skipped(stored)
            return
        member = self.members.get(str(data.get("agent_id")))
        if member is None:
            return
        self._taken.add(member.agent_id)
        if member.agent_id not in self._broken:
            try:
                member.messages = _fold(data, member.messages)
            except (TypeError, ValueError, AttributeError):
                self._broken.add(member.agent_id)
        state = data.get("state")
        if isinstance(state, dict):  # None: unchanged since the snapshot before
            member.state = state

    def finish(self, again: Callable[[], Iterable[Any]]) -> None:
        """Validate each member's history once (pydantic-ai messages from then on);
        ``again()`` gives every stored snapshot once more, in order, for a history that
        does not validate as a whole."""
        snapshot = _snapshot_class()
        for agent_id in self._taken - self._broken:
            member = self.members[agent_id]
            try:
                member.messages = snapshot.model_validate(
                    {"agent": member.name, "agent_id": agent_id, "messages": member.messages}
                ).messages
            except ValidationError:
                self._broken.add(agent_id)
        if not self._broken:
            return
        for agent_id in self._broken:
            self.members[agent_id].messages = []
        for stored in again():  # the slow way: each snapshot validated on its own
            data = self._data(stored)
            whose = str(data.get("agent_id")) if data is not None else None
            if whose not in self._broken:
                continue
            member = self.members[whose]
            member.messages = _validated_fold(data, member.messages, snapshot)


def _fold(data: dict[str, Any], previous: list[Any]) -> list[Any]:
    """``AgentSnapshotEvent.history`` on the stored JSON (the same rule, unvalidated)."""
    snapshot = _snapshot_class().model_construct(
        start=int(data.get("start") or 0), refs=list(data.get("refs") or []), messages=list(data.get("messages") or [])
    )
    return snapshot.history(previous)  # type: ignore[no-any-return]


def _validated_fold(data: Any, previous: list[Any], snapshot: Any) -> list[Any]:
    """``previous`` changed by the snapshot ``data`` validated on its own (unchanged, with a
    warning, if it does not read back)."""
    try:
        return snapshot.model_validate(data).history(previous)  # type: ignore[no-any-return]
    except ValueError:  # it does not validate, or refers to messages a skipped snapshot had
        _skipped(data)
        return previous


def _skipped(stored: Any) -> None:
    log.warning(
        "a stored agent snapshot could not be read back and is skipped (its agent resumes with the history "
        "of the snapshot before): %s",
        str(stored)[:200],
    )
