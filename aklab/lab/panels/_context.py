"""ContextPanel: the context-update blocks each agent's model received, as diffs.

A block carries whole sections (``## Title`` and its text): all of them (a full
snapshot), or only those that changed (a delta, whose first line says so). So the panel
keeps, per agent, the *composed* state the model now holds: a full block replaces it, a
delta's sections replace those of the same title and leave the others as they were.
Each block is shown as that composed state compared line by line (``difflib``) with the
previous one for the same agent: added lines are marked ``+`` on a green background,
removed lines ``-`` struck through on red, unchanged lines are plain (a section a delta
left out is unchanged, not removed). The block's ``**Context update N**`` line is shown
plain above. An agent's first block has nothing to compare with and is shown plain. A
dropdown picks the agent (the first agent seen is picked until the user chooses); its
blocks are listed newest first.

The static forms (text/plain, the HTML snapshot; see ``_static``) cannot offer the
dropdown, so they show every agent's latest block: in text its summary line and the
lines it changed (a first block: its section titles), in HTML the composed state marked
as in the widget, cut to the changes and the lines around them when it is long.
"""

from __future__ import annotations

import difflib
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

from aklab._text import counted
from aklab.agent import ContextUpdateEvent
from aklab.core import EventMessage, Message
from aklab.lab.panels._html import esc, note
from aklab.lab.panels._hub import Panel, PanelHub, PanelModel
from aklab.lab.panels._static import HTML_LINES, TEXT_ROWS, TEXT_WIDTH, cut, more_line, plain
from aklab.tools.context import MARKER_RE, SUFFIX_DELTA

__all__ = ["ContextBlock", "ContextModel", "ContextPanel", "ContextState", "ContextView", "diff_lines"]

Mark = Literal[" ", "+", "-"]

_LINE = {
    " ": '<span class="aklab-same">  {}</span>',
    "+": '<span class="aklab-add" style="background:#e6ffec">+ {}</span>',
    "-": '<span class="aklab-del" style="background:#ffebe9;text-decoration:line-through">- {}</span>',
}
# The snapshot's lines: marked as in the widget, without its classes (see ``_static``).
_STATIC_LINE = {
    " ": "  {}",
    "+": '<span style="background:#e6ffec">+ {}</span>',
    "-": '<span style="background:#ffebe9;text-decoration:line-through">- {}</span>',
}
_PRE = "white-space:pre-wrap;margin:2px 0 10px 0"
#: The text form lists this many changed lines of a block at most.
TEXT_CHANGES = 6
_AROUND = 2  # unchanged lines kept either side of a change in a cut HTML snapshot
_LINE_CHARS = 200  # one line of a block in the HTML snapshot


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
class ContextState:
    """What an agent's model holds after a block: the block's own first lines (``head``,
    without the ``**Context update N**`` line) and every section delivered so far."""

    head: tuple[str, ...]
    sections: dict[str, tuple[str, ...]]  # "## Title" line -> its text lines, in first-seen order

    @classmethod
    def after(cls, previous: ContextState | None, block: str) -> tuple[ContextState, tuple[str, ...], int]:
        """``(composed state, the block's marker lines, how many sections it carried)``."""
        head: list[str] = []
        markers: list[str] = []
        sections: dict[str, list[str]] = {}
        current: list[str] | None = None
        delta = False
        for line in block.splitlines():
            if line.startswith("## "):
                current = sections.setdefault(line, [])
            elif current is not None:
                current.append(line)
            elif MARKER_RE.search(line):
                markers.append(line)
                delta = delta or SUFFIX_DELTA in line
            else:
                head.append(line)
        sent = {title: _trim(lines) for title, lines in sections.items()}
        merged = {**previous.sections, **sent} if delta and previous is not None else sent
        return cls(_trim(head), merged), tuple(markers), len(sent)

    def lines(self) -> list[str]:
        out = list(self.head)
        for title, text in self.sections.items():
            if out:
                out.append("")
            out.extend((title, *text))
        return out


def _trim(lines: list[str]) -> tuple[str, ...]:
    """Without the blank lines at either end (the blank between sections is layout)."""
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return tuple(lines[start:end])


@dataclass(frozen=True)
class ContextBlock:
    agent: str
    number: int
    lines: tuple[tuple[Mark, str], ...]  # the composed state, marked against the previous one
    first: bool
    markers: tuple[str, ...] = ()  # the block's "**Context update N** — ..." line, shown plain
    sent: int = 0  # sections the block carried
    total: int = 0  # sections in the composed state

    @property
    def added(self) -> int:
        return sum(mark == "+" for mark, _ in self.lines)

    @property
    def removed(self) -> int:
        return sum(mark == "-" for mark, _ in self.lines)

    def change(self) -> str:
        """``+1 −0 lines · 1 of 2 sections sent``, or ``first update``."""
        change = "first update" if self.first else f"+{self.added} −{self.removed} lines"
        if not self.first and self.sent < self.total:
            change += f" · {self.sent} of {self.total} sections sent"
        return change

    def html(self) -> str:
        head = f"<b>{esc(self.agent)}</b> · context update {self.number} · {self.change()}"
        body = "\n".join(
            [*(_LINE[" "].format(esc(line)) for line in self.markers)]
            + [_LINE[mark].format(esc(line)) for mark, line in self.lines]
        )
        return f'<div class="aklab-context">{head}<pre style="{_PRE}">{body}</pre></div>'

    def static_html(self) -> str:
        """The block in an HTML snapshot: at most ``HTML_LINES`` lines, the changes first."""
        head = f"<b>{esc(self.agent)}</b> · context update {self.number} · {esc(self.change())}"
        shown = excerpt(self.lines)
        body = [
            "  …" if item is None else _STATIC_LINE[item[0]].format(esc(cut(item[1], _LINE_CHARS)))
            for item in (*((" ", line) for line in self.markers), *shown)
        ]
        hidden = len(self.lines) - sum(item is not None for item in shown)
        if hidden:
            body.append(f"  ({hidden:,} line{'s' if hidden != 1 else ''} not shown)")
        text = "\n".join(body)
        return f'<div class="aklab-static-context">{head}<pre style="{_PRE}">{text}</pre></div>'

    def text_lines(self) -> list[str]:
        """The block's summary line, then the lines it changed (a first one: its sections)."""
        head = f"{self.agent} · context update {self.number} · {self.change()}"
        if self.first:
            titles = [line.removeprefix("## ") for mark, line in self.lines if line.startswith("## ")]
            return [plain(f"{head} · sections: {', '.join(titles)}" if titles else head)]
        changed = [(mark, line) for mark, line in self.lines if mark != " "]
        shown = [f"  {plain(f'{mark} {line}', TEXT_WIDTH - 2)}" for mark, line in changed[:TEXT_CHANGES]]
        return [plain(head), *shown, *(f"  {m}" for m in more_line(len(shown), len(changed), "changed line"))]


def excerpt(lines: tuple[tuple[Mark, str], ...], limit: int = HTML_LINES) -> list[tuple[Mark, str] | None]:
    """At most ``limit`` of ``lines``: all if they fit, else the changed ones with
    ``_AROUND`` lines either side (the first ``limit`` when nothing changed); None marks a gap."""
    if len(lines) <= limit:
        return list(lines)
    changed = [i for i, (mark, _) in enumerate(lines) if mark != " "]
    near = sorted({j for i in changed for j in range(i - _AROUND, i + _AROUND + 1) if 0 <= j < len(lines)})
    out: list[tuple[Mark, str] | None] = []
    previous = -1
    for j in (near or range(limit))[:limit]:
        if j != previous + 1:
            out.append(None)
        out.append(lines[j])
        previous = j
    if previous < len(lines) - 1:
        out.append(None)
    return out


@dataclass(frozen=True)
class ContextView:
    agents: tuple[str, ...]
    agent: str | None  # the agent shown
    blocks: tuple[ContextBlock, ...]  # that agent's kept blocks, newest first
    delivered: int  # blocks that agent received in all
    latest: tuple[ContextBlock, ...] = ()  # every agent's newest block, in the order agents came

    def html(self) -> str:
        if self.agent is None:
            return note("no context updates yet")
        head = (
            note(f"showing the last {len(self.blocks)} of {self.delivered} updates")
            if self.delivered > len(self.blocks)
            else ""
        )
        return head + "".join(block.html() for block in self.blocks)

    def text_lines(self) -> list[str]:
        if not self.latest:
            return ["no context updates yet"]
        shown = self.latest[:TEXT_ROWS]
        return [line for block in shown for line in block.text_lines()] + more_line(
            len(shown), len(self.latest), "agent"
        )

    def static_html(self) -> str:
        if not self.latest:
            return note("no context updates yet")
        shown = self.latest[:TEXT_ROWS]
        more = more_line(len(shown), len(self.latest), "agent")
        return note("each agent's latest update") + "".join(b.static_html() for b in shown) + "".join(map(note, more))


class ContextModel(PanelModel[ContextView]):
    def __init__(self, *, keep: int = 20) -> None:
        super().__init__()
        self.keep = keep
        self._reset()

    def _reset(self) -> None:
        self._blocks: dict[str, deque[ContextBlock]] = {}
        self._last: dict[str, ContextState] = {}
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
        previous = self._last.get(event.agent)
        state, markers, sent = ContextState.after(previous, event.block)
        before = previous.lines() if previous is not None else None
        lines = diff_lines(before, state.lines())
        block = ContextBlock(event.agent, event.number, lines, previous is None, markers, sent, len(state.sections))
        self._blocks.setdefault(event.agent, deque(maxlen=self.keep)).append(block)
        self._last[event.agent] = state
        self._delivered[event.agent] = self._delivered.get(event.agent, 0) + 1
        if self._agent is None:
            self._agent = event.agent
        return True

    def _view(self) -> ContextView:
        agent = self._agent
        blocks = tuple(reversed(self._blocks[agent])) if agent is not None else ()
        delivered = self._delivered.get(agent, 0) if agent is not None else 0
        latest = tuple(kept[-1] for kept in self._blocks.values())
        return ContextView(tuple(self._blocks), agent, blocks, delivered, latest)

    def _summary(self) -> str:
        total = sum(self._delivered.values())
        agents = len(self._delivered)
        return f"{counted(total, 'update')} from {counted(agents, 'agent')}"


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
