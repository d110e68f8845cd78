"""RosterPanel: who is on the team, their role, and whether each is busy, idle or gone.

Joined and left come from ``StartMessage`` / ``StopMessage``; busy and idle from
``AgentBusyEvent``. A member that is seen busy before its start record (a replay that
began mid-run) is added on the spot. Each member's model is the ``provider:model`` label
of the config it started with (``attach_panels`` gives it for members already there).
The one-line summary counts members only: busy state depends on timing, and ``repr``
should not change while a team works; the static forms list the members as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from aklab._text import counted
from aklab.agent import AgentBusyEvent
from aklab.core import EventMessage, Message, StartMessage, StopMessage
from aklab.lab.panels._html import Markup, note, table
from aklab.lab.panels._hub import Panel, PanelHub, PanelModel
from aklab.lab.panels._static import TEXT_ROWS, more_line, text_table

__all__ = ["Member", "RosterModel", "RosterPanel", "RosterView", "model_label"]

Status = Literal["idle", "busy", "left"]

#: The HTML snapshot lists this many members at most.
STATIC_MEMBERS = 30
_NONE = "—"  # no model: the human, a member started without one

_BADGES: dict[str, str] = {
    "idle": '<span style="color:#2a7">○ idle</span>',
    "busy": '<span style="color:#d80;font-weight:bold">● busy</span>',
    "left": '<span style="color:#999">– left</span>',
}


@dataclass(frozen=True)
class Member:
    name: str
    role: str
    status: Status = "idle"
    model: str = ""  # provider:model, "" when unknown


@dataclass(frozen=True)
class RosterView:
    members: tuple[Member, ...]

    @property
    def present(self) -> int:
        return sum(m.status != "left" for m in self.members)

    @property
    def busy(self) -> int:
        return sum(m.status == "busy" for m in self.members)

    def html(self) -> str:
        return self._html(self.members, "aklab-roster")

    def static_html(self) -> str:
        return self._html(self.members[:STATIC_MEMBERS], "aklab-static-roster")

    def _html(self, members: tuple[Member, ...], css_class: str) -> str:
        if not self.members:
            return note("no team members yet")
        rows = [(m.name, m.role, m.model or _NONE, Markup(_BADGES[m.status])) for m in members]
        more = more_line(len(members), len(self.members), "member")
        return table(["member", "role", "model", "status"], rows, css_class=css_class) + note(
            "; ".join([f"{self.present} present, {self.busy} busy", *more])
        )

    def text_lines(self) -> list[str]:
        if not self.members:
            return ["no team members yet"]
        shown = self.members[:TEXT_ROWS]
        rows = [(m.name, m.role, m.model or _NONE, m.status) for m in shown]
        return text_table(["member", "role", "model", "status"], rows) + more_line(
            len(shown), len(self.members), "member"
        )


class RosterModel(PanelModel[RosterView]):
    """Members in order of arrival, keyed by name."""

    def __init__(self) -> None:
        super().__init__()
        self._reset()

    def _reset(self) -> None:
        self._members: dict[str, Member] = {}

    def join(self, name: str, role: str, model: str = "") -> bool:
        """Add (or bring back) a member; True if that changed anything."""
        with self._lock:
            changed = self._set(name, role, "idle", keep_busy=True, model=model)
            if changed:
                self._changed()
            return changed

    def _set(self, name: str, role: str, status: Status, *, keep_busy: bool = False, model: str = "") -> bool:
        old = self._members.get(name)
        if old is not None and keep_busy and old.status == "busy":
            status = "busy"
        new = Member(name, role or (old.role if old else ""), status, model or (old.model if old else ""))
        if new == old:
            return False
        self._members[name] = new
        return True

    def _feed(self, record: Message) -> bool:
        if isinstance(record, StartMessage) and record.sender is not None:
            model = model_label(record.config)
            return self._set(record.sender.name, record.sender.role, "idle", keep_busy=True, model=model)
        if isinstance(record, StopMessage) and record.sender is not None:
            return self._set(record.sender.name, record.sender.role, "left")
        if isinstance(record, EventMessage) and isinstance(record.event, AgentBusyEvent):
            event = record.event
            old = self._members.get(event.agent)
            if old is not None and old.status == "left":
                return False  # a late event from an agent that already stopped
            return self._set(event.agent, event.role, "busy" if event.busy else "idle")
        return False

    def _view(self) -> RosterView:
        return RosterView(tuple(self._members.values()))

    def _summary(self) -> str:
        view = self._view()
        text = counted(view.present, "member")
        left = len(view.members) - view.present
        return f"{text}, {left:,} left" if left else text


def model_label(config: Any) -> str:
    """``provider:model`` of an agent config, "" for one without a model (the human)."""
    label = getattr(getattr(config, "model_cfg", None), "label", "")
    return label if isinstance(label, str) else ""


class RosterPanel(Panel[RosterView]):
    """One HTML table: member, role, model, status."""

    title = "Roster"
    model: RosterModel

    def __init__(self, hub: PanelHub | None = None) -> None:
        super().__init__(RosterModel(), hub)

    def _build(self) -> Any:
        import ipywidgets as widgets

        self.html = widgets.HTML(value=RosterView(()).html())
        return self.html

    def _apply(self, view: RosterView) -> None:
        self.html.value = view.html()
