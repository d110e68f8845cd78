"""PlanningTool: a task board shared by every agent of one team.

One board per team: keyed by ``host.team_board_key()`` when the host offers it, else by
the host's team directory object (entry dropped when the directory is collected), else
one board per card instance. Agents are threads, so every board operation is locked.

Every task created or changed is recorded as a :class:`PlanningTaskEvent` (through the
host's ``notify_event``, when it has one), so the event store holds the board: a resumed
team gets it back with :func:`restore_board` (``Lab.resume``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, ClassVar, Literal, cast, get_args

from pydantic import BaseModel, PrivateAttr

from aklab.tools.card import ToolCard, ToolHost, in_order

__all__ = [
    "PLANNING_SECTION",
    "STATUSES",
    "PlanningBoard",
    "PlanningTask",
    "PlanningTaskEvent",
    "PlanningTool",
    "restore_board",
]

PLANNING_SECTION = "Planning"
Status = Literal["todo", "doing", "done", "blocked"]
STATUSES: tuple[str, ...] = get_args(Status)


class PlanningTask(BaseModel):
    id: str
    title: str
    description: str = ""
    status: Status = "todo"
    owner: str = ""
    created_by: str = ""
    notes: list[str] = []

    def line(self) -> str:
        """The compact one-line form used in summaries."""
        who = f" {self.owner}:" if self.owner else ""
        return f"- {self.id} [{self.status}]{who} {self.title}"

    def __str__(self) -> str:
        lines = [
            f"{self.id}: {self.title}",
            f"status: {self.status}",
            f"owner: {self.owner or '(unassigned)'}",
            f"created by: {self.created_by or '(unknown)'}",
        ]
        if self.description:
            lines.append(f"description: {self.description}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


class PlanningTaskEvent(BaseModel):
    """A task of the team's board as it is after ``agent`` created or changed it."""

    aklab_log_limit: ClassVar[int] = 1  # the store keeps them all; memory only the last

    agent: str
    task: PlanningTask


def _owner(owner: str) -> str:
    owner = owner.strip()
    return f"@{owner}" if owner and not owner.startswith("@") else owner


def _status(status: str) -> Status:
    value = status.strip().lower()
    if value not in STATUSES:
        raise ValueError(f"unknown status {status!r}; valid statuses: {', '.join(STATUSES)}")
    return cast(Status, value)


class PlanningBoard:
    """Tasks with short ids (T1, T2, ...) allocated in creation order; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[int, PlanningTask] = {}
        self._next = 1

    def __deepcopy__(self, memo: dict[int, Any]) -> PlanningBoard:
        # cards are deep-copied per agent; a lock cannot be, so copy the tasks instead
        copy = PlanningBoard()
        with self._lock:
            copy._tasks = {n: t.model_copy(deep=True) for n, t in self._tasks.items()}
            copy._next = self._next
        return copy

    def _number(self, task_id: str) -> int:
        text = task_id.strip().upper()
        number = int(text[1:]) if text[:1] == "T" and text[1:].isdigit() else 0
        if number not in self._tasks:
            known = ", ".join(t.id for _, t in sorted(self._tasks.items())) or "none yet"
            raise ValueError(f"unknown task id {task_id!r}; valid ids: {known}")
        return number

    def create(self, title: str, description: str = "", owner: str = "", created_by: str = "") -> PlanningTask:
        if not title.strip():
            raise ValueError("a task needs a non-empty title")
        with self._lock:
            number = self._next
            self._next += 1
            task = PlanningTask(
                id=f"T{number}",
                title=title.strip(),
                description=description.strip(),
                owner=_owner(owner),
                created_by=created_by,
            )
            self._tasks[number] = task
            return task.model_copy(deep=True)

    def update(
        self,
        task_id: str,
        *,
        status: str | None = None,
        owner: str | None = None,
        note: str | None = None,
        author: str = "",
    ) -> PlanningTask:
        if status is None and owner is None and not note:
            raise ValueError("nothing to update: give a status, an owner or a note")
        new_status = _status(status) if status is not None else None
        with self._lock:
            task = self._tasks[self._number(task_id)]
            if new_status is not None:
                task.status = new_status
            if owner is not None:
                task.owner = _owner(owner)
            if note:
                task.notes.append(f"{author}: {note.strip()}" if author else note.strip())
            return task.model_copy(deep=True)

    def load(self, tasks: list[PlanningTask]) -> None:
        """Replace the board with ``tasks`` (a resumed team's); new ids continue after theirs."""
        loaded = {_task_number(t.id): t.model_copy(deep=True) for t in tasks}
        with self._lock:
            self._tasks = loaded
            self._next = max(loaded, default=0) + 1

    def get(self, task_id: str) -> PlanningTask:
        with self._lock:
            return self._tasks[self._number(task_id)].model_copy(deep=True)

    def tasks(self) -> list[PlanningTask]:
        """Every task, sorted by id number."""
        with self._lock:
            return [t.model_copy(deep=True) for _, t in sorted(self._tasks.items())]

    def search(self, query: str) -> list[PlanningTask]:
        """Tasks whose id, title, description, owner, status or notes contain ``query`` (any case)."""
        needle = query.strip().lower()
        found = []
        for task in self.tasks():
            haystack = [task.id, task.title, task.description, task.owner, task.status, *task.notes]
            if any(needle in field.lower() for field in haystack):
                found.append(task)
        return found

    def summary(self) -> str:
        return "\n".join(t.line() for t in self.tasks()) or "(no tasks)"


def _task_number(task_id: str) -> int:
    text = task_id.strip().upper()
    if text[:1] != "T" or not text[1:].isdigit():
        raise ValueError(f"a planning task id is T followed by a number (T1, T2, ...), not {task_id!r}")
    return int(text[1:])


_boards: dict[Hashable, PlanningBoard] = {}
_keep_alive: dict[Hashable, object] = {}
_boards_lock = threading.RLock()  # re-entrant: a finalizer may run while it is held


def _shared_board(key: Hashable, owner: object | None = None) -> PlanningBoard:
    with _boards_lock:
        board = _boards.get(key)
        if board is None:
            board = _boards[key] = PlanningBoard()
            if owner is not None:
                # ids are reused once an object is collected: drop the board with its owner,
                # or keep an owner that cannot be weakly referenced alive
                try:
                    weakref.finalize(owner, _forget, key)
                except TypeError:
                    _keep_alive[key] = owner
        return board


def _forget(key: Hashable) -> None:
    with _boards_lock:
        _boards.pop(key, None)


def restore_board(directory: object, tasks: list[PlanningTask]) -> PlanningBoard:
    """Put ``tasks`` on the board of the team whose directory is ``directory`` (``Lab.resume``)."""
    board = _shared_board(("directory", id(directory)), directory)
    board.load(tasks)
    return board


def _recorded(host: ToolHost, task: PlanningTask) -> PlanningTask:
    notify = getattr(host, "notify_event", None)
    if callable(notify):
        notify(PlanningTaskEvent(agent=host.name, task=task))
    return task


class PlanningTool(ToolCard):
    """The team's shared task board on the tool, context and command channels."""

    name: str = "PlanningTool"
    description: str = "A task board shared by the whole team."
    _own_board: PlanningBoard | None = PrivateAttr(default=None)

    def board(self, host: ToolHost) -> PlanningBoard:
        """The board of ``host``'s team (see the module docstring for the keying)."""
        key_of = getattr(host, "team_board_key", None)
        if callable(key_of):
            return _shared_board(("key", key_of()))
        directory = getattr(host, "directory", None)
        if directory is not None:
            return _shared_board(("directory", id(directory)), directory)
        with _boards_lock:
            if self._own_board is None:
                self._own_board = PlanningBoard()
            return self._own_board

    def get_tools(self, host: ToolHost) -> list[Callable[..., Any]]:
        @in_order
        def planning_create(title: str, description: str = "", owner: str = "") -> str:
            """Add a task to the team's board; owner is a member name like "@Developer" or empty."""
            task = _recorded(host, self.board(host).create(title, description, owner, created_by=host.name))
            return f"created {task.line()[2:]}"

        @in_order
        def planning_update(
            task_id: str, status: str | None = None, owner: str | None = None, note: str | None = None
        ) -> str:
            """Change a task's status (todo, doing, done, blocked) or owner, or add a note to it."""
            task = self.board(host).update(task_id, status=status, owner=owner, note=note, author=host.name)
            _recorded(host, task)
            return f"updated {task.line()[2:]}"

        def planning_get(task_id: str) -> str:
            """One task in full, by id (e.g. "T3")."""
            return str(self.board(host).get(task_id))

        def planning_search(query: str) -> str:
            """Tasks whose text, owner or status contains the query (case-insensitive)."""
            found = self.board(host).search(query)
            return "\n".join(t.line() for t in found) or f"(no tasks match {query!r})"

        def planning_summary() -> str:
            """Every task on the board, one line each."""
            return self.board(host).summary()

        return [planning_create, planning_update, planning_get, planning_search, planning_summary]

    def get_context_states(self, host: ToolHost) -> dict[str, Callable[[], str]]:
        def planning() -> str:
            return self.board(host).summary()

        return {PLANNING_SECTION: planning}

    def get_commands(self, host: ToolHost) -> list[Callable[..., Any]]:
        def planning_summary() -> str:
            """The team's task board, one line per task."""
            return self.board(host).summary()

        def get_planning_task(task_id: str) -> PlanningTask:
            """One planning task by id (e.g. T3)."""
            return self.board(host).get(task_id)

        def search_planning(query: str) -> str:
            """Search the team's task board."""
            found = self.board(host).search(query)
            return "\n".join(t.line() for t in found) or f"(no tasks match {query!r})"

        return [planning_summary, get_planning_task, search_planning]
