"""Small HTML helpers shared by the panels. Every piece of user text goes through ``esc``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

__all__ = ["Markup", "esc", "note", "table"]

_CELL = "padding:2px 8px;text-align:left"


def esc(value: object) -> str:
    """``str(value)`` escaped for HTML text and attribute values."""
    return escape(str(value), quote=True)


def note(text: str) -> str:
    """A muted one-line remark (``text`` is escaped)."""
    return f'<div class="aklab-note" style="color:#777;font-style:italic">{esc(text)}</div>'


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, css_class: str = "aklab-table") -> str:
    """A plain table; cells are escaped unless they are ``Markup``."""
    head = "".join(f'<th style="{_CELL}">{esc(h)}</th>' for h in headers)
    body = "".join("<tr>" + "".join(f'<td style="{_CELL}">{_cell(c)}</td>' for c in row) + "</tr>" for row in rows)
    style = "border-collapse:collapse"
    return f'<table class="{css_class}" style="{style}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


class Markup(str):
    """A string that is already safe HTML (built from escaped parts)."""

    __slots__ = ()


def _cell(value: object) -> str:
    return value if isinstance(value, Markup) else esc(value)
