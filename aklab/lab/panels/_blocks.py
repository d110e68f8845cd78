"""HtmlBlocks: long HTML shown as a column of blocks, so an update re-sends only what changed.

One HTML widget holding hundreds of long rows re-sends all of them to the browser on
every change (a transcript of 500 messages of 3 KB is 2 MB a message). Here the rows are
cut into blocks, each its own HTML widget in a VBox, and each block is keyed (by where it
stands, say): an update renders and sends only the blocks whose rows changed, adds the
blocks that are new and closes the ones that went (their widgets are reused first, so
that a window sliding by one block makes no widget). Rows are compared by identity: a
row is immutable, and the same object means the same HTML.

The browser keeps the views of the blocks before the first child that changed; a change
at the front (the oldest block dropped) redraws the column from its models, which are
already in the browser: nothing is sent again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

__all__ = ["HtmlBlocks"]


class HtmlBlocks:
    """A VBox of keyed HTML blocks (``widget``), updated in place by :meth:`update`."""

    def __init__(self) -> None:
        import ipywidgets as widgets

        # One Layout for the column and every block: a block's widget opens without one of its own
        # (a Layout's state is 1 KB); the column holds it, so closing the column closes it. No
        # margin: the blocks' rows follow each other as in one widget, with no gap between blocks.
        self._layout = widgets.Layout(margin="0")
        self.widget = widgets.VBox([], layout=self._layout)
        self._blocks: dict[Hashable, tuple[tuple[Any, ...], Any]] = {}  # key -> (rows, HTML widget)

    def update(self, blocks: Sequence[tuple[Hashable, tuple[Any, ...]]], render: Callable[[Any], str]) -> None:
        """Show ``blocks`` (``(key, rows)``, in order), each the rows' ``render``-ed HTML joined.

        A block whose key and rows (the same objects) are shown already is left alone."""
        import ipywidgets as widgets

        if self.widget.comm is None:
            return  # closed: a late update must not make widgets nobody will close
        old, new = self._blocks, {}
        wanted = {key for key, _ in blocks}
        spare = [w for key, (_, w) in old.items() if key not in wanted]
        for key, rows in blocks:
            held = old.get(key)
            if held is not None and _same(held[0], rows):
                new[key] = held
                continue
            html = "".join(render(row) for row in rows)
            widget = held[1] if held is not None else spare.pop() if spare else None
            if widget is None:
                widget = widgets.HTML(value=html, layout=self._layout)
            elif widget.value != html:
                widget.value = html
            new[key] = (rows, widget)
        self._blocks = new
        children = tuple(w for _, w in new.values())
        if children != self.widget.children:
            self.widget.children = children
        for widget in spare:  # out of the column first, then closed (not the shared layout)
            widget.style.close()
            widget.close()

    def html(self) -> str:
        """What the blocks show, in order."""
        return "".join(str(w.value) for w in self.widget.children)

    def __len__(self) -> int:
        return len(self._blocks)


def _same(shown: tuple[Any, ...], rows: tuple[Any, ...]) -> bool:
    return len(shown) == len(rows) and all(a is b for a, b in zip(shown, rows, strict=True))
