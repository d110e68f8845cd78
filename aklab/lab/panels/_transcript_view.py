"""The transcript panel's rows and view, and how they render.

A row is ``sender → recipient (intent)`` and the content; a note (a ``/command``, an
unrouted message, an error) and a provisional row (a message being written) look
different. The view renders as the widget's HTML (every row it holds, escaped; the
recorded rows in blocks, see :meth:`TranscriptView.blocks`), and as the static forms
(text/plain, the HTML snapshot; see ``_static``): the last ``TEXT_ROWS`` rows, one
line each in text (``sender → recipient (intent):`` and the first line of the
content, as ``%transcript`` prints it), the content cut to ``HTML_CHARS`` in HTML.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aklab.lab._magic_show import first_line, more_lines
from aklab.lab.panels._html import esc, note
from aklab.lab.panels._static import TEXT_ROWS, TEXT_WIDTH, cut, plain

__all__ = ["ALL", "BLOCK_ROWS", "TranscriptRow", "TranscriptView", "block_rows"]

ALL = ""  # the filter value that shows every agent

_PRE = "white-space:pre-wrap;margin:2px 0 8px 12px;font-family:inherit"
_LIVE = "opacity:0.7;border-left:2px dashed #999;padding-left:4px"

#: How many recorded rows one block of the widget holds at most (fewer for a small limit).
BLOCK_ROWS = 50


def block_rows(limit: int) -> int:
    """The block size for a transcript showing ``limit`` rows: at most a tenth of them, so
    that what is shown floats at most 10% above ``limit``."""
    return max(1, min(BLOCK_ROWS, limit // 10))


@dataclass(frozen=True)
class TranscriptRow:
    sender: str
    recipient: str
    intent: str
    content: str
    is_note: bool = False
    live: str = ""  # a provisional row: "writing" or "sending"; "" for a recorded one
    record_id: str = field(default="", compare=False)  # the record it shows (to find it in the store)

    def involves(self, agent: str) -> bool:
        return agent in (self.sender, self.recipient)

    def html(self) -> str:
        """The row in the widget (rendered once: a view re-renders every row it holds)."""
        cached: str | None = self.__dict__.get("_html")
        if cached is None:
            cached = self._render()
            object.__setattr__(self, "_html", cached)
        return cached

    def _render(self) -> str:
        css = "aklab-note-row" if self.is_note else "aklab-live" if self.live else "aklab-msg"
        color = "#a50" if self.is_note else "#555"
        head = f"<b>{esc(self.sender)}</b> → <b>{esc(self.recipient)}</b> "
        head += f'<span style="color:{color}">({esc(self.intent)})</span>'
        if self.live:
            head += f' <span style="color:#07a;font-style:italic">{esc(self.live)}…</span>'
            return f'<div class="{css}" style="{_LIVE}">{head}<pre style="{_PRE}">{esc(self.content)}▍</pre></div>'
        return f'<div class="{css}">{head}<pre style="{_PRE}">{esc(self.content)}</pre></div>'

    def static_html(self) -> str:
        """The row in an HTML snapshot: the content cut to ``HTML_CHARS``."""
        css = "aklab-static-note" if self.is_note else "aklab-static-live" if self.live else "aklab-static-msg"
        head = f"<b>{esc(self.sender)}</b> → <b>{esc(self.recipient)}</b> ({esc(self.intent)})"
        if self.live:
            head += f" <i>{esc(self.live)}…</i>"
        return f'<div class="{css}">{head}<pre style="{_PRE}">{esc(cut(self.content))}</pre></div>'

    def line(self) -> str:
        """The row on one line of text, as ``%transcript`` prints a message: the first line
        of the content is cut so that the count of lines after it stays in view."""
        live = f", {self.live}…" if self.live else ""
        head = plain(f"{self.sender} → {self.recipient} ({self.intent}{live}):", TEXT_WIDTH // 2) + " "
        first, more = first_line(self.content)
        tail = more_lines(more)
        return head + plain(first, max(20, TEXT_WIDTH - len(head) - len(tail))) + tail


@dataclass(frozen=True)
class TranscriptView:
    rows: tuple[TranscriptRow, ...]  # the rows to render: last ``limit`` matching the filter
    matching: int  # how many kept rows match the filter
    agents: tuple[str, ...]
    agent: str  # the filter; ALL for everyone
    live: tuple[TranscriptRow, ...] = ()  # provisional rows (messages being written) matching the filter
    earlier: str = ""  # about older rows: how many were read back from the store, or why they cannot be
    more: bool = False  # "show earlier" can show more (kept rows hidden, or a store to read from)
    working: tuple[str, ...] = ()  # agents in a turn that have written nothing yet (matching the filter)
    waiting: str = ""  # the agent this ask waits for while it finishes a turn of another ask
    start: int = 0  # where ``rows[0]`` stands among every matching row there was (see ``blocks``)
    block: int = BLOCK_ROWS  # rows in one block

    def html(self) -> str:
        """All the widget shows: ``head_html() + rows_html() + live_html()``."""
        return self.head_html() + self.rows_html() + self.live_html()

    def head_html(self) -> str:
        """The notes above the rows (older rows, how many are shown, or that there are none)."""
        earlier = note(self.earlier) if self.earlier else ""
        if not self.rows and not self.live:
            empty = "no messages yet" if self.agent == ALL else f"no messages to or from {self.agent}"
            return earlier + ("" if self.working or self.waiting else note(empty))
        if self.matching > len(self.rows):
            return earlier + note(f"showing the last {len(self.rows):,} of {self.matching:,} messages")
        return earlier

    def rows_html(self) -> str:
        """The recorded rows: what the blocks show, joined."""
        return "".join(row.html() for row in self.rows)

    def blocks(self) -> list[tuple[tuple[int, int], tuple[TranscriptRow, ...]]]:
        """The recorded rows cut into the widget's blocks, keyed by position, oldest first.

        A row's position counts every matching row before it, including those the model
        let go, so it stays put while rows come and go at either end. Block ``b`` holds
        positions ``b * block`` to ``(b + 1) * block - 1``; the last block, while it
        fills, comes in pieces of ``block // 25`` rows (2 of 50), so that a new row
        re-sends one small piece (key ``(b, piece)``), not up to ``block`` rows; once full
        it is one block again (key ``(b, -1)``), sent once, so the widgets stay few."""
        size = self.block
        piece = max(1, size // 25)
        filling = (self.start + len(self.rows)) // size * size  # the first position of the block filling
        parts: dict[tuple[int, int], list[TranscriptRow]] = {}
        for at, row in enumerate(self.rows, self.start):
            key = (at // size, -1) if at < filling else (at // size, (at - filling) // piece)
            parts.setdefault(key, []).append(row)
        return [(key, tuple(rows)) for key, rows in parts.items()]

    def live_html(self) -> str:
        """Messages being written and agents at work: what changes while a model streams."""
        working = "".join(_working_html(agent) for agent in self.working)
        if self.waiting:
            working += _working_html(self.waiting, "busy with another ask; this one waits its turn", "aklab-waiting")
        return "".join(row.html() for row in self.live) + working

    def _static(self) -> tuple[list[str], tuple[TranscriptRow, ...], list[str]]:
        """The static forms' parts: remarks above, the rows, the working lines below."""
        rows = self.rows[-TEXT_ROWS:]
        above = [] if self.agent == ALL else [f"messages to or from {self.agent}"]
        if self.matching > len(rows):
            above.append(f"the last {len(rows)} of {self.matching:,} messages")
        below = [f"{agent} working…" for agent in self.working]
        if self.waiting:
            below.append(f"{self.waiting} is busy with another ask; this one waits its turn")
        if not rows and not self.live and not below:
            below.append("no messages yet" if self.agent == ALL else f"no messages to or from {self.agent}")
        return above, (*rows, *self.live), below

    def text_lines(self) -> list[str]:
        above, rows, below = self._static()
        return [*(f"({line})" for line in above), *(row.line() for row in rows), *(plain(line) for line in below)]

    def static_html(self) -> str:
        above, rows, below = self._static()
        return "".join(
            [*(note(line) for line in above), *(row.static_html() for row in rows), *(note(line) for line in below)]
        )


def _working_html(agent: str, doing: str = "working…", kind: str = "aklab-working") -> str:
    return (
        f'<div class="{kind}" style="{_LIVE}"><b>{esc(agent)}</b> '
        f'<span style="color:#07a;font-style:italic">{esc(doing)}</span></div>'
    )
