"""The static form of a panel: what shows where no widget can be drawn.

A panel's display bundle carries its widget, and beside it a ``text/plain`` (a terminal
IPython, ``print(panel)``, a saved notebook opened without the widget state) and a
``text/html`` snapshot (GitHub and nbviewer render it; JupyterLab with the widget manager
prefers the widget). Both are taken when the output is made, hold no ids, times or
paths (nbval compares them in saved notebooks), and are bounded: a long run shows its
last few messages, not all of them. Message text is user and model content, so the HTML
escapes it (``_html.esc``) and the text strips control characters.

The snapshot's HTML uses its own CSS classes (``aklab-static-*``), not the widget's, so a
browser test that finds ``.aklab-msg`` knows the widget rendered, not its fallback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from aklab._text import one_line
from aklab.lab.panels._html import esc, note

__all__ = [
    "HTML_CHARS",
    "HTML_LINES",
    "SNAPSHOT_NOTE",
    "TEXT_ROWS",
    "TEXT_WIDTH",
    "StaticView",
    "cut",
    "more_line",
    "plain",
    "snapshot_html",
    "snapshot_note",
    "text_table",
]

#: How many rows (messages, members, agents) the text form lists at most.
TEXT_ROWS = 12
#: How wide a line of the text form is at most.
TEXT_WIDTH = 100
#: How many characters of one message (or one context line) the HTML snapshot keeps.
HTML_CHARS = 1_000
#: How many lines of one context block the HTML snapshot keeps.
HTML_LINES = 40
#: Below every HTML snapshot: a reader on GitHub should know the panel went on updating.
SNAPSHOT_NOTE = "a snapshot taken when this output was made; where widgets run, it updates live"

_COLUMN = 32  # widest text-table column


class StaticView(Protocol):
    """What a panel's view gives besides the widget's HTML: its static forms."""

    def html(self) -> str:
        """The widget's HTML (live, complete within the model's limits)."""
        ...

    def text_lines(self) -> list[str]:
        """The content as a few lines of text, at most ``TEXT_WIDTH`` wide."""
        ...

    def static_html(self) -> str:
        """The content as a bounded HTML snapshot (escaped; ``aklab-static-*`` classes)."""
        ...


def plain(text: str, width: int = TEXT_WIDTH) -> str:
    """``text`` on one line of at most ``width`` characters, without control characters
    (a model's output can hold terminal escapes)."""
    return one_line("".join(ch if ch.isprintable() else " " for ch in text), width)


def cut(text: str, limit: int = HTML_CHARS) -> str:
    """``text`` kept to ``limit`` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def more_line(shown: int, total: int, noun: str) -> list[str]:
    """``["… and 3 more members"]`` when ``total`` exceeds ``shown``, else nothing."""
    rest = total - shown
    return [f"… and {rest:,} more {noun}{'s' if rest != 1 else ''}"] if rest > 0 else []


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()) -> list[str]:
    """Rows under headers in aligned columns (``right``: indexes aligned right), each cell
    on one line and at most ``_COLUMN`` wide; trailing spaces dropped."""
    cells = [[plain(str(c), _COLUMN) for c in row] for row in (headers, *rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(parts).rstrip())
    return lines


def snapshot_html(title: str, summary: str, body: str) -> str:
    """One panel's snapshot: its title and summary, its body (already escaped), the note."""
    head = f'<div class="aklab-static-title" style="margin-top:8px"><b>{esc(title)}</b> · {esc(summary)}</div>'
    return f'<div class="aklab-static">{head}{body}</div>'


def snapshot_note() -> str:
    return note(SNAPSHOT_NOTE)
