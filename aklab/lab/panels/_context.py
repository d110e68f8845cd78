"""ContextPanel: the context-update blocks each agent's model received, as diffs.

Each block is compared line by line (``difflib``) with the previous block delivered
to the same agent: added lines are marked ``+`` on a green background, removed lines
``-`` struck through on red, unchanged lines are plain. An agent's first block has
nothing to compare with and is shown plain. A dropdown picks the agent (the first
agent seen is picked until the user chooses); its blocks are listed newest first.
"""

from __future__ import annotations

import difflib
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

from aklab.agent import ContextUpdateEvent
from aklab.core import EventMessage, Message
from aklab.lab.panels._html import esc, note
from aklab.lab.panels._hub import Panel, PanelHub, PanelModel

__all__ = ["ContextBlock", "ContextModel", "ContextPanel", "ContextView", "diff_lines"]

Mark = Literal[" ", "+", "-"]

_LINE = {
    " ": '<span class="aklab-same">  {}</span>',
    "+": '<span class="aklab-add" style="background:#e6ffec">+ {}</span>',
    "-": '<span class="aklab-del" style="background:#ffebe9;text-decoration:line-through">- {}</span>',
}
_PRE = "white-space:pre-wrap;margin:2px 0 10px 0"


def diff_lines(before: list[str] | None, after: list[str]) -> tuple[tuple[Mark, str], ...]:
    """``after`` with each line marked against ``before``; all plain when there is no before."""
    if before is None:
        return tuple((" ", line) for line in after)
    out: list[tuple[Mark, str]] = []
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            out.extend((" ", line) for line in after[b0:b1])
            continue
        out.extend(("-", line) for line in before[a0:a1])
        out.extend(("+", line) for line in after[b0:b1])
    return tuple(out)


@dataclass(frozen=True)
class ContextBlock:
    agent: str
    number: int
    lines: tuple[tuple[Mark, str], ...]
    first: bool

    @property
    def added(self) -> int:
        return sum(mark == "+" for mark, _ in self.lines)

    @property
    def removed(self) -> int:
        return sum(mark == "-" for mark, _ in self.lines)

    def html(self) -> str:
        change = "first update" if self.first else f"+{self.added} −{self.removed} lines"
        head = f"<b>{esc(self.agent)}</b> · context update {self.number} · {change}"
        body = "\n".join(_LINE[mark].format(esc(line)) for mark, line in self.lines)
        return f'<div class="aklab-context">{head}<pre style="{_PRE}">{body}</pre></div>'


@dataclass(frozen=True)
class ContextView:
    agents: tuple[str, ...]
    agent: str | None  # the agent shown
    blocks: tuple[ContextBlock, ...]  # that agent's kept blocks, newest first
    delivered: int  # blocks that agent received in all

    def html(self) -> str:
        if self.agent is None:
            return note("no context updates yet")
        head = (
            note(f"showing the last {len(self.blocks)} of {self.delivered} updates")
            if self.delivered > len(self.blocks)
            else ""
        )
        return head + "".join(block.html() for block in self.blocks)


class ContextModel(PanelModel[ContextView]):
    def __init__(self, *, keep: int = 20) -> None:
        super().__init__()
        self.keep = keep
        self._blocks: dict[str, deque[ContextBlock]] = {}
        self._last: dict[str, list[str]] = {}
        self._delivered: dict[str, int] = {}
        self._agent: str | None = None

    @property
    def agent(self) -> str | None:
        return self._agent

    def set_agent(self, agent: str | None) -> None:
        """Show ``agent``'s blocks (ignored for an agent that has none)."""
        with self._lock:
            if agent in self._blocks and agent != self._agent:
                self._agent = agent
                self._changed()

    def _feed(self, record: Message) -> bool:
        if not (isinstance(record, EventMessage) and isinstance(record.event, ContextUpdateEvent)):
            return False
        event = record.event
        lines = event.block.splitlines()
        previous = self._last.get(event.agent)
        block = ContextBlock(event.agent, event.number, diff_lines(previous, lines), previous is None)
        self._blocks.setdefault(event.agent, deque(maxlen=self.keep)).append(block)
        self._last[event.agent] = lines
        self._delivered[event.agent] = self._delivered.get(event.agent, 0) + 1
        if self._agent is None:
            self._agent = event.agent
        return True

    def _view(self) -> ContextView:
        agent = self._agent
        blocks = tuple(reversed(self._blocks[agent])) if agent is not None else ()
        delivered = self._delivered.get(agent, 0) if agent is not None else 0
        return ContextView(tuple(self._blocks), agent, blocks, delivered)

    def _summary(self) -> str:
        total = sum(self._delivered.values())
        agents = len(self._delivered)
        return f"{total} update{'s' if total != 1 else ''} from {agents} agent{'s' if agents != 1 else ''}"


class ContextPanel(Panel[ContextView]):
    """An agent dropdown over that agent's context-update diffs."""

    title = "Context"
    model: ContextModel

    def __init__(self, hub: PanelHub | None = None, *, keep: int = 20) -> None:
        super().__init__(ContextModel(keep=keep), hub)

    def _build(self) -> Any:
        import ipywidgets as widgets

        self.agent = widgets.Dropdown(options=[], description="agent")
        self.agent.observe(self._on_agent, names="value")
        self.html = widgets.HTML(value=note("no context updates yet"))
        return widgets.VBox([self.agent, self.html])

    def _on_agent(self, change: dict[str, Any]) -> None:
        if self.hub.applying():
            return
        self.model.set_agent(change["new"])
        self.hub.flush()

    def _apply(self, view: ContextView) -> None:
        with self.agent.hold_sync():
            if tuple(self.agent.options) != view.agents:
                self.agent.options = view.agents
            if self.agent.value != view.agent:
                self.agent.value = view.agent  # the model decides; see TranscriptPanel._apply
        self.html.value = view.html()
