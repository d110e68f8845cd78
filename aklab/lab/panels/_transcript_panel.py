"""TranscriptPanel: the transcript's widgets (an agent filter, a "show earlier" button, the
rows) over a :class:`~aklab.lab.panels._transcript.TranscriptModel`.

The widget is a column: the notes above the rows, the recorded rows in keyed blocks
(``_blocks.HtmlBlocks``; how they are cut: ``TranscriptView.blocks``), then the live rows
in a widget of their own. A new message re-sends one small block, a streamed chunk the
live rows only: not every row the panel holds, which for hundreds of long messages is
megabytes sent to the browser at each update.
"""

from __future__ import annotations

from typing import Any

from aklab.lab.panels._blocks import HtmlBlocks
from aklab.lab.panels._html import note
from aklab.lab.panels._hub import Panel, PanelHub
from aklab.lab.panels._transcript import EARLIER_PAGE, TranscriptModel
from aklab.lab.panels._transcript_view import ALL, TranscriptRow, TranscriptView

__all__ = ["TranscriptPanel"]


class TranscriptPanel(Panel[TranscriptView]):
    """A filter dropdown (by agent) and a "show earlier" button over the rendered transcript."""

    title = "Transcript"
    model: TranscriptModel

    def __init__(self, hub: PanelHub | None = None, *, limit: int = 500, keep: int = 5000) -> None:
        self._page_size = EARLIER_PAGE
        super().__init__(TranscriptModel(limit=limit, keep=keep), hub)

    @property
    def page_size(self) -> int:
        """How many earlier rows the "show earlier" button asks for."""
        return self._page_size

    @page_size.setter
    def page_size(self, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"page_size must be a number of rows >= 1, not {n!r}")
        self._page_size = n
        self.earlier.description = f"show {n} earlier"

    def _build(self) -> Any:
        import ipywidgets as widgets

        self.filter = widgets.Dropdown(options=[("all agents", ALL)], value=ALL, description="agent")
        self.filter.observe(self._on_filter, names="value")
        self.earlier = widgets.Button(
            description=f"show {EARLIER_PAGE} earlier",
            disabled=True,
            tooltip="show earlier messages (read back from the event store once memory has let them go)",
        )
        self.earlier.on_click(lambda _button: self.show_earlier(self.page_size))
        # The notes, the recorded rows in blocks, the live rows: a streamed answer rewrites only
        # the small live widget, a new message one small block, not every row the panel holds
        # (hundreds of long messages are megabytes sent to the browser).
        self.head_html = widgets.HTML(value=note("no messages yet"))
        self.rows = HtmlBlocks()
        self.live_html = widgets.HTML(value="")
        return widgets.VBox(
            [widgets.HBox([self.filter, self.earlier]), self.head_html, self.rows.widget, self.live_html]
        )

    def shown_html(self) -> str:
        """The HTML the widget shows now: the notes, the recorded rows, then the live ones."""
        return str(self.head_html.value) + self.rows.html() + str(self.live_html.value)

    def show_earlier(self, n: int = EARLIER_PAGE) -> int:
        """Show ``n`` earlier rows (what the button does); returns how many were added."""
        added = self.model.show_earlier(n)
        self.hub.flush()
        return added

    def _on_filter(self, change: dict[str, Any]) -> None:
        if self.hub.applying():
            return  # our own options update, not the user's choice
        self.model.set_agent(change["new"])
        self.hub.flush()

    def _apply(self, view: TranscriptView) -> None:
        options = [("all agents", ALL), *((a, a) for a in view.agents)]
        value = view.agent if view.agent in view.agents else ALL
        with self.filter.hold_sync():
            if list(self.filter.options) != options:
                self.filter.options = options  # this selects the first option; the model's choice goes back below
            if self.filter.value != value:
                # The model is the source of truth: a user's pick reaches it through
                # _on_filter, which flushes again, so the last pick always wins.
                self.filter.value = value
        self.earlier.disabled = not view.more
        head = view.head_html()
        if head != self.head_html.value:
            self.head_html.value = head
        self.rows.update(view.blocks(), TranscriptRow.html)
        live = view.live_html()
        if live != self.live_html.value:
            self.live_html.value = live
